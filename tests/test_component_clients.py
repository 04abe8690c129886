"""Issue 32 goal 2: kube-scheduler's and kube-controller-manager's API clients as token buckets on the simulated
clock, with their upstream defaults (kube-scheduler 50 qps / 100 burst for one client; kube-controller-manager
20 / 30 for each controller's own client), overridable from the Scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from k8s_builders import make_job, make_pod, make_scenario, static_node
from typer.testing import CliRunner

from kubetwin.api.loader import Manifest
from kubetwin.cli.main import app
from kubetwin.runner import run as kt_run
from kubetwin.validation.validate import validate


def big_node(name: str) -> dict:
    node = static_node(name).obj()
    for field in ("capacity", "allocatable"):
        node["status"][field].update(cpu="1000", pods="1000")
    return node


def bound_times(result, prefix: str) -> list[float]:
    """When each pod's binding reached the API server (spec.nodeName set), sorted."""
    times = [result.first_time("Pod", lambda o: bool(o["spec"].get("nodeName")), v.object["metadata"]["name"])
             for v in result.versions("Pod", prefix=prefix) if v.type == "ADDED"]
    assert None not in times
    return sorted(times)  # type: ignore[arg-type]


def created_times(result, prefix: str) -> list[float]:
    return sorted(v.time for v in result.versions("Pod", prefix=prefix) if v.type == "ADDED")


def pods(n: int) -> list[dict]:
    return [make_pod(f"p{i:03d}").cpu("100m").duration("10m").obj() for i in range(n)]


# -- kube-scheduler ---------------------------------------------------------------------------------------------


def test_binds_go_out_as_the_schedulers_tokens_come():
    result = kt_run(objects=[make_scenario("1m").obj(), big_node("n1"), big_node("n2"), *pods(300)])
    times = bound_times(result, "p")
    assert times[:100] == [0.0] * 100  # the burst
    assert times[100:] == pytest.approx([0.02 * k for k in range(1, 201)])  # then 50 per second
    client = result.summary["scheduler_api_client"]
    assert (client["qps"], client["burst"]) == (50.0, 100)
    assert client["requests"]["create pods/binding"] == 300
    assert client["max_wait_s"] == pytest.approx(4.0)


def test_a_pod_waiting_for_its_bind_is_assumed_on_its_node():
    # one node with room for 150 pods: all 150 are placed in the first instant (assumed), none is refused
    node = big_node("n1")
    node["status"]["capacity"]["cpu"] = node["status"]["allocatable"]["cpu"] = "15"
    result = kt_run(objects=[make_scenario("1m").obj(), node, *pods(150), make_pod("late").cpu("100m").obj()])
    assert len(bound_times(result, "p")) == 150
    late = result.last("Pod", "late")
    assert not late["spec"].get("nodeName")  # the assumed pods hold the node's room while their binds wait
    assert result.recorded_events("FailedScheduling", involved="late")


def test_the_schedulers_client_connection_is_read_from_the_scenario():
    scenario = make_scenario("1m").spec(kubeScheduler={"clientConnection": {"qps": 10, "burst": 5}}).obj()
    result = kt_run(objects=[scenario, big_node("n1"), *pods(20)])
    times = bound_times(result, "p")
    assert times[:5] == [0.0] * 5
    assert times[5:] == pytest.approx([0.1 * k for k in range(1, 16)])


def test_a_negative_qps_turns_the_schedulers_limiter_off():
    scenario = make_scenario("1m").spec(kubeScheduler={"clientConnection": {"qps": -1}}).obj()
    result = kt_run(objects=[scenario, big_node("n1"), big_node("n2"), *pods(300)])
    assert set(bound_times(result, "p")) == {0.0}
    assert result.summary["scheduler_api_client"]["waited_s"] == 0.0


def test_a_failed_attempts_status_patch_waits_for_a_token():
    # 100 binds take the burst; the unschedulable pod's PodScheduled=False patch is the 101st request
    objs = [make_scenario("1m").obj(), big_node("n1"), *pods(100),
            make_pod("huge").cpu("5000").obj()]
    result = kt_run(objects=objs)
    unschedulable = result.first_time("Pod", lambda o: any(
        c["type"] == "PodScheduled" and c["status"] == "False" for c in (o.get("status") or {}).get("conditions")
        or []), "huge")
    assert unschedulable == pytest.approx(0.02)
    assert result.summary["scheduler_api_client"]["requests"]["patch pods/status"] >= 1


# -- kube-controller-manager ------------------------------------------------------------------------------------


def test_a_large_jobs_pod_creates_are_paced_by_the_job_controllers_own_client():
    job = make_job("big").pods(500).obj()
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "10m"
    result = kt_run(objects=[make_scenario("1m").obj(), big_node("n1"), big_node("n2"), job])
    times = created_times(result, "big-")
    assert len(times) == 500
    assert times[:30] == [0.0] * 30  # the burst
    assert times[30:] == pytest.approx([k / 20 for k in range(1, 471)])  # then 20 per second
    clients = result.summary["kube_controller_manager_api_clients"]
    job_client = clients["job-controller"]
    assert (job_client["qps"], job_client["burst"]) == (20.0, 30)
    assert job_client["requests"]["create pods"] == 500
    # the Job's status (active: 500) is written once its creates are through
    active = result.first_time("Job", lambda o: (o.get("status") or {}).get("active") == 500, "big")
    assert active == pytest.approx(470 / 20 + 1 / 20)


def test_each_controller_has_its_own_bucket_and_the_scenario_sets_them():
    scenario = make_scenario("1m").spec(kubeControllerManager={"clientConnection": {"qps": 5, "burst": 2}}).obj()
    job = make_job("j").pods(6).obj()
    result = kt_run(objects=[scenario, big_node("n1"), job])
    times = created_times(result, "j-")
    assert times == pytest.approx([0.0, 0.0, 0.2, 0.4, 0.6, 0.8])
    assert result.summary["kube_controller_manager_api_clients"]["job-controller"]["burst"] == 2


@pytest.mark.parametrize("n, longest", [(97, 0.0), (98, 0.02)])
def test_runs_within_the_burst_never_wait(n, longest):
    """The scheduler's burst of 100: 97 bare pods and a Job's 3 bind without a wait; one more pod waits 1/qps."""
    result = kt_run(objects=[make_scenario("1m").obj(), big_node("n1"), make_job("j").pods(3).obj(), *pods(n)])
    assert result.summary["scheduler_api_client"]["max_wait_s"] == pytest.approx(longest)
    assert result.summary["kube_controller_manager_api_clients"]["job-controller"]["waited_s"] == 0.0


# -- validation --------------------------------------------------------------------------------------------------


def _errors(spec: dict) -> list[str]:
    scenario = make_scenario("1m").spec(**spec).obj()
    return [d.field for d in validate([Manifest(scenario, "s.yaml", 1)]) if d.severity == "error"]


def test_client_connection_fields_are_strict():
    assert _errors({"kubeScheduler": {"clientConnection": {"qps": 5, "burts": 10}}}) == [
        "spec.kubeScheduler.clientConnection.burts"]
    # component-base ValidateClientConnectionConfiguration: "must be non-negative"; 0 takes the default
    assert _errors({"kubeControllerManager": {"clientConnection": {"qps": 5, "burst": -1}}}) == [
        "spec.kubeControllerManager.clientConnection.burst"]
    assert _errors({"kubeControllerManager": {"clientConnection": {"qps": 5, "burst": 0}}}) == []
    assert _errors({"kubeScheduler": {"clientConnection": {"qps": -1}}}) == []


# -- explain pod -------------------------------------------------------------------------------------------------


def test_explain_pod_says_when_its_binding_waited_for_a_token(tmp_path: Path) -> None:
    scenario = make_scenario("1m").spec(traceScheduling=True,
                                        kubeScheduler={"clientConnection": {"qps": 10, "burst": 2}}).obj()
    out = tmp_path / "run"
    kt_run(objects=[scenario, big_node("n1"), *pods(3)], out=out)
    first = CliRunner().invoke(app, ["explain", "pod", "p000", "--run", str(out)])
    assert first.exit_code == 0, first.output
    assert "Binding written" not in first.output  # the burst's token was there
    last = CliRunner().invoke(app, ["explain", "pod", "p002", "--run", str(out)])
    assert "Binding written at 0h00m00s (t=0.1s): it waited 0.1 s for a token of kube-scheduler's API client" in (
        last.output)


def test_a_replicasets_pod_creates_are_paced_by_its_own_client():
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 100, "selector": {"matchLabels": {"app": "web"}}, "template": {
                  "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                      {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "10m"}}}]}}}}
    result = kt_run(objects=[make_scenario("1m").obj(), big_node("n1"), deploy])
    times = created_times(result, "web-")
    assert times[:30] == [0.0] * 30
    assert times[30:] == pytest.approx([k / 20 for k in range(1, 71)])
    clients = result.summary["kube_controller_manager_api_clients"]
    assert clients["replicaset-controller"]["requests"]["create pods"] == 100
    assert "job-controller" not in clients  # its own bucket: a controller that made no request is not listed


def test_a_pod_deleted_while_its_binding_waits_gives_its_room_back():
    # room for 150: 150 pods take it at once (assumed, 50 of their binds waiting); those 50 are deleted at 0.51 s,
    # 25 of them before their binds land, whose room goes back (the late pods get it: no room was left behind)
    node = big_node("n1")
    node["status"]["capacity"]["cpu"] = node["status"]["allocatable"]["cpu"] = "15"
    waiting = [make_pod(f"p{i:03d}").cpu("100m").duration("10m").annotation("kubetwin.io/delete-at", "0.51s").obj()
               if i >= 100 else make_pod(f"p{i:03d}").cpu("100m").duration("10m").obj() for i in range(150)]
    late = [make_pod(f"late{i}").cpu("100m").create_at("1s").obj() for i in range(50)]
    result = kt_run(objects=[make_scenario("1m").obj(), node, *waiting, *late])
    assert len(bound_times(result, "late")) == 50
    landed = sorted(t for t in (result.first_time("Pod", lambda o: bool(o["spec"].get("nodeName")), f"p{i:03d}")
                                for i in range(100, 150)) if t is not None)
    assert landed == pytest.approx([0.02 * k for k in range(1, 26)])


def test_the_ttl_controller_deletes_through_its_own_client():
    job = make_job("j").obj()
    job["spec"]["ttlSecondsAfterFinished"] = 0
    job["spec"]["template"]["metadata"]["annotations"]["kubetwin.io/duration"] = "10s"
    result = kt_run(objects=[make_scenario("1m").obj(), big_node("n1"), job])
    ttl = result.summary["kube_controller_manager_api_clients"]["ttl-after-finished-controller"]
    assert ttl["requests"] == {"delete jobs": 1}


def test_the_scheduling_loop_waits_for_the_failure_handlers_patch():
    # one token a second: p's Binding takes the burst's token; the unschedulable pod's status patch is due at 1 s,
    # and the scheduler makes it itself (handleSchedulingFailure), so the next pod's attempt comes only then
    scenario = make_scenario("1m").spec(traceScheduling=True,
                                        kubeScheduler={"clientConnection": {"qps": 1, "burst": 1}}).obj()
    objs = [scenario, big_node("n1"), make_pod("p").cpu("100m").obj(), make_pod("huge").cpu("5000").obj(),
            make_pod("q").cpu("100m").obj()]
    result = kt_run(objects=objs)
    attempts = {r["pod"]: r["t"] for r in map(json.loads, (result.scheduling_trace or "").splitlines())}
    assert attempts == {"default/p": 0.0, "default/huge": 0.0, "default/q": 1.0}
    assert bound_times(result, "q") == [2.0]

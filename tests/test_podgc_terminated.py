"""PodGC's gcTerminated (kubernetes pkg/controller/podgc/gc_controller.go): every 20 s (gcCheckPeriod) the
terminated pods past --terminated-pod-gc-threshold (12,500 by default) are force-deleted, evicted pods first, then
the oldest by creationTimestamp, names breaking ties (byEvictionAndCreationTimestamp); <= 0 turns it off."""

from __future__ import annotations

import pytest
from k8s_builders import make_job, make_pod, make_scenario, static_node

from kubetwin.api.errors import KubetwinError
from kubetwin.controllers.podgc import PodGC
from kubetwin.runner import run
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store


def _pod(name: str, created: str, runs: str) -> dict:
    pod = make_pod(name).cpu("100m").duration(runs).create_at(created).obj()
    pod["spec"]["restartPolicy"] = "Never"
    return pod


def _deleted(res, names) -> dict[str, float]:
    return {n: vs[-1][0] for n in names if (vs := res.versions("Pod", n)) and vs[-1][1] == "DELETED"}


def test_terminated_pods_past_the_threshold_go_oldest_first_on_the_20s_tick() -> None:
    # created at 0..5 s, all finished by 12 s; threshold 3: the first tick after the 4th finish (20 s) deletes
    # the three oldest; the ones created last stay
    names = [f"p{i}" for i in range(6)]
    pods = [_pod(n, f"{i}s", f"{10 - i}s") for i, n in enumerate(names)]
    res = run(objects=[make_scenario("5m").spec(kubeControllerManager={"terminatedPodGCThreshold": 3}).obj(),
                       static_node("n1").obj(), *pods])
    assert _deleted(res, names) == {"p0": 20.0, "p1": 20.0, "p2": 20.0}
    for n in ("p3", "p4", "p5"):
        assert res.versions("Pod", n)[-1][2]["status"]["phase"] == "Succeeded"


def test_running_pods_are_never_collected_and_the_default_threshold_keeps_small_runs_whole() -> None:
    names = [f"p{i}" for i in range(4)]
    pods = [_pod(n, "0s", "10s") for n in names] + [_pod("long", "0s", "1h")]
    res = run(objects=[make_scenario("5m").spec(kubeControllerManager={"terminatedPodGCThreshold": 1}).obj(),
                       static_node("n1").obj(), *pods])
    gone = _deleted(res, [*names, "long"])
    assert set(gone) == {"p0", "p1", "p2"} and set(gone.values()) == {20.0}  # same second: by name
    res = run(objects=[make_scenario("5m").obj(), static_node("n1").obj(), *pods])
    assert _deleted(res, names) == {}


@pytest.mark.parametrize("threshold", [0, -1])
def test_a_threshold_of_zero_or_less_turns_it_off(threshold: int) -> None:
    names = [f"p{i}" for i in range(3)]
    res = run(objects=[make_scenario("5m").spec(
        kubeControllerManager={"terminatedPodGCThreshold": threshold}).obj(),
        static_node("n1").obj(), *[_pod(n, "0s", "5s") for n in names]])
    assert _deleted(res, names) == {}


def test_a_threshold_that_is_no_int32_is_refused() -> None:
    with pytest.raises(KubetwinError, match="terminatedPodGCThreshold"):
        run(objects=[make_scenario("5m").spec(kubeControllerManager={"terminatedPodGCThreshold": 2**31}).obj()])


def test_evicted_pods_go_first_then_by_creation_time_then_name() -> None:
    env = Environment()
    store = Store(env)
    gc = PodGC(store, env, terminated_threshold=1)
    ts = "2026-01-01T00:00:%02dZ"
    for name, created, status in [("b-old", 1, {"phase": "Succeeded"}), ("a-old", 1, {"phase": "Failed"}),
                                  ("evicted-new", 9, {"phase": "Failed", "reason": "Evicted"}),
                                  ("young", 5, {"phase": "Succeeded"})]:
        store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "default", "creationTimestamp": ts % created}, "spec": {}, "status": status})
    env.run(until=60)
    left = {p["metadata"]["name"] for p in store.list("Pod")}
    assert left == {"young"} and gc.collected == 3


def test_a_job_still_counts_the_pods_podgc_took() -> None:
    """The job-tracking finalizer keeps a collected pod countable: the Job completes with every success."""
    job = make_job("batch").pods(1).duration("30s").obj()
    job["spec"]["completions"] = 4
    res = run(objects=[make_scenario("10m").spec(kubeControllerManager={"terminatedPodGCThreshold": 1}).obj(),
                       static_node("n1").obj(), job])
    pods = {o["metadata"]["name"] for _, _, _, o in res.history if o["kind"] == "Pod"}
    assert len(pods) == 4
    gone = [n for n in pods if res.versions("Pod", n)[-1][1] == "DELETED"]
    assert len(gone) == 3
    status = res.versions("Job", "batch")[-1][2]["status"]
    assert status["succeeded"] == 4
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in status["conditions"])


def test_the_deletes_go_through_the_controllers_client() -> None:
    """kube-controller-manager's 20 qps / 30 burst, the pod-garbage-collector's own bucket: of 40 surplus pods 30 go
    at the tick, the rest 1/20 s apart; summary.json counts them."""
    names = [f"p{i:02d}" for i in range(41)]
    res = run(objects=[make_scenario("5m").spec(kubeControllerManager={"terminatedPodGCThreshold": 1}).obj(),
                       static_node("n1").obj(), static_node("n2").obj(), *[_pod(n, "0s", "5s") for n in names]])
    times = sorted(_deleted(res, names).values())
    assert len(times) == 40
    assert times[:30] == [20.0] * 30
    assert times[30:] == pytest.approx([20.0 + 0.05 * k for k in range(1, 11)])
    client = res.summary["kube_controller_manager_api_clients"]["pod-garbage-collector"]
    assert client["requests"] == {"delete pods": 40}


def test_the_next_pass_comes_a_period_after_the_last_one_ended() -> None:
    """wait.UntilWithContext is a sliding period: a pod that terminates while the pass's deletes are still going
    out waits for the tick gcCheckPeriod after the last of them, not for the pass's end."""
    names = [f"p{i:02d}" for i in range(41)]
    res = run(objects=[make_scenario("5m").spec(kubeControllerManager={"terminatedPodGCThreshold": 1}).obj(),
                       static_node("n1").obj(), static_node("n2").obj(), *[_pod(n, "0s", "5s") for n in names],
                       *[_pod(n, "15s", "5200ms") for n in ("late0", "late1")]])
    times = sorted(_deleted(res, names).values())  # the first pass takes 40 of the 41: 30 at once, then 1/20 s
    last_of_pass = times[39]
    assert times[0] == 20.0 and last_of_pass == pytest.approx(20.5)
    # late0 terminates at 20.2, during the pass; the next pass (the 41st pod and late0: two past the threshold of 1
    # with late1) comes a period after the pass ended
    assert times[40] == pytest.approx(last_of_pass + 20.0)
    assert _deleted(res, ["late0", "late1"]) == {"late0": pytest.approx(last_of_pass + 20.0)}

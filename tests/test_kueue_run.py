"""Kueue inside `kubetwin run`, end to end: Workload, Job and Pod objects read back from the run's history.

Covers the cohort example (borrowing, reclaim, requeue), missing LocalQueues, flavor injection, JobSet
integration, the manager Configuration (validation, waitForPodsReady, blockAdmission, fairSharing) and
byte-identical outputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import condition, is_true
from k8s_builders import make_job, make_pool, make_scenario
from kueue_builders import fair_preemptions_f3, make_configuration, make_cq, make_flavor, make_lq

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import load_paths
from kubetwin.kueue import config as kueue_config
from kubetwin.runner import run as kt_run
from kubetwin.validation.validate import validate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
COHORT = EXAMPLES / "kueue-cohort-borrowing.yaml"
WFPR = EXAMPLES / "kueue-wait-for-pods-ready.yaml"
FAIR = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


# ------------------------------------------------------------------------------------------------ (a) cohort
@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    return kt_run([COHORT], out=tmp_path_factory.mktemp("cohort"))


def test_cohort_example_borrow_reclaim_requeue(cohort):
    wl = {n: cohort.last("Workload", prefix=f"job-{n}-", at=3599) for n in ("sweep-a", "sweep-b", "sweep-c", "sweep-d")}
    for n in wl:  # all four admitted at their creation (0, 1m, 2m, 3m); c and d borrow prod's idle quota
        assert condition(wl[n], "QuotaReserved")["status"] == "True"
    assert [cohort.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=f"job-{n}-")
            for n in ("sweep-a", "sweep-b", "sweep-c", "sweep-d")] == [0.0, 60.0, 120.0, 180.0]
    research = cohort.last("ClusterQueue", prefix="research", at=3599)
    gpu = next(r for r in research["status"]["flavorsUsage"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    assert (gpu["total"], gpu["borrowed"]) == ("32", "16")

    # 1h: prod's finetune reclaims its nominal quota: c and d (the borrowers) are preempted
    for n in ("sweep-c", "sweep-d"):
        at_1h = cohort.last("Workload", prefix=f"job-{n}-", at=3600)
        assert condition(at_1h, "Evicted")["reason"] == "Preempted"
        assert condition(at_1h, "Preempted")["reason"] == "InCohortReclamation"
        assert condition(at_1h, "QuotaReserved")["status"] == "False"
        assert cohort.last("Job", prefix=n, at=3600)["spec"]["suspend"] is True
    for n in ("sweep-a", "sweep-b"):
        assert condition(cohort.last("Workload", prefix=f"job-{n}-", at=3600), "Evicted") == {}
    assert cohort.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix="job-finetune-") == 3600.0
    assert len(cohort.recorded_events("Preempted")) == 2

    # 3h: finetune finishes; the sweeps are admitted again and every Job completes
    for n in ("sweep-c", "sweep-d"):
        readmitted = [t for t, etype, o in cohort.versions("Workload", prefix=f"job-{n}-")
                      if is_true(o, "Admitted") and t > 3600]
        assert readmitted[0] == 10801.0  # Kueue's requeuer retries inadmissible workloads 1 s after the release (#9232)
    done = {n: cohort.first_time("Job", lambda o: is_true(o, "Complete"), prefix=n)
            for n in ("sweep-a", "sweep-b", "sweep-c", "sweep-d", "finetune")}
    assert done["finetune"] == 10800.0 and done["sweep-c"] == done["sweep-d"] == 25201.0
    assert all(t is not None for t in done.values())


def test_cohort_example_summary_and_metrics(cohort):
    k = cohort.summary["kueue"]
    assert {q: (k[q]["admitted"], k[q]["evicted"], k[q]["finished"]) for q in k} == {
        "prod": (1, 0, 1), "research": (6, 2, 4)}
    assert k["prod"]["preemptions_issued"] == {"InCohortReclamation": 2}
    assert k["research"]["evicted_by_reason"] == {"Preempted": 2}
    assert k["research"]["admission_wait_s"]["max"] == 7201.0  # requeued at 1h, again at 3h + the requeuer's 1 s
    prom = (cohort.out / "metrics.prom").read_text()
    lines = prom.splitlines()  # values as kueue-controller-manager (client_golang) prints them: 6, not 6.0
    assert 'kueue_admitted_workloads_total{cluster_queue="research"} 6' in lines
    assert 'kueue_preempted_workloads_total{preempting_cluster_queue="prod",reason="InCohortReclamation"} 2' in lines


# ------------------------------------------------------------------------------------------------ (b) missing LQ
def test_missing_local_queue_then_created():
    objs = [make_scenario().obj(), make_pool("cpu", "e2-standard-16", 2).obj(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="8").obj(), make_lq("main").cluster_queue("cq").create_at("30m").obj(),
            make_job("train").queue("main").obj()]
    result = kt_run(objects=objs)
    wl = result.last("Workload", prefix="job-train-", at=1799)
    qr = condition(wl, "QuotaReserved")
    assert (qr["status"], qr["reason"], qr["message"]) == ("False", "Inadmissible", "LocalQueue main doesn't exist")
    assert result.last("Job", prefix="train", at=1799)["spec"]["suspend"] is True
    assert not [o for t, _, o in result.versions("Pod", prefix="train-") if t < 1800]
    assert result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix="job-train-") \
        == 1800.0
    assert result.first_time("Job", lambda o: o["spec"].get("suspend") is False, prefix="train") == 1800.0


# ------------------------------------------------------------------------------------------------ (c) flavors
def test_admitted_pods_carry_flavor_node_labels_and_tolerations():
    toleration = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    objs = [make_scenario().obj(), make_pool("plain", "e2-standard-16", 2).obj(),
            make_pool("ml", "e2-standard-16", 2)
            .spec(labels={"team": "ml"}, taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]).obj(),
            make_flavor("ml").node_labels({"team": "ml"}).tolerations([toleration]).obj(),
            make_cq("cq").flavor("ml", cpu="8").obj(), make_lq("main").cluster_queue("cq").obj(),
            make_job("train").queue("main").pods(2).obj()]
    result = kt_run(objects=objs)
    pods = [o for _, etype, o in result.versions("Pod", prefix="train-") if etype == "ADDED"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"team": "ml"}
        assert toleration in pod["spec"]["tolerations"]
    nodes = {result.last("Pod", prefix=p["metadata"]["name"])["spec"].get("nodeName") for p in pods}
    assert nodes and all(n and "ml" in n for n in nodes)
    # the Job's template is restored to what the Workload was made from only on eviction; here it runs as admitted
    assert result.last("Job", prefix="train", at=60)["spec"]["template"]["spec"]["nodeSelector"] == {"team": "ml"}


# ------------------------------------------------------------------------------------------------ (d) JobSet
def _jobset() -> dict:
    def rjob(name: str, replicas: int, pods: int) -> dict:
        return {"name": name, "replicas": replicas, "template": {"spec": {
            "parallelism": pods, "completions": pods, "template": {
                "metadata": {"annotations": {"kubetwin.io/duration": "20m"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}}}

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "main"},
                         "annotations": {"kubetwin.io/create-at": "1m"}},
            "spec": {"replicatedJobs": [rjob("driver", 1, 1), rjob("workers", 2, 2)]}}


def _jobset_objects() -> list[dict]:
    return [make_scenario().obj(), make_pool("cpu", "e2-standard-16", 2).obj(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="5").obj(), make_lq("main").cluster_queue("cq").obj(),
            make_job("blocker").queue("main").cpu("4").duration("30m").obj(), _jobset()]


def test_jobset_is_one_workload_and_starts_when_admitted():
    result = kt_run(objects=_jobset_objects())
    wls = {o["metadata"]["name"] for _, _, o in result.versions("Workload", prefix="jobset-train-")}
    assert len(wls) == 1
    wl = result.last("Workload", prefix="jobset-train-")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("driver", 1), ("workers", 4)]
    admitted = result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix="jobset-train-")
    blocker_done = result.first_time("Workload", lambda o: is_true(o, "Finished"), prefix="job-blocker-")
    # Kueue's requeuer retries inadmissible workloads 1 s after the release (#9232)
    assert admitted is not None and blocker_done is not None and admitted == blocker_done + 1 > 60
    assert result.last("JobSet", prefix="train", at=admitted - 1)["spec"]["suspend"] is True
    child_pods = [t for t, etype, o in result.versions("Pod", prefix="train-") if etype == "ADDED"]
    assert len(child_pods) == 5 and min(child_pods) >= admitted


def test_configuration_without_jobset_framework_leaves_jobsets_unmanaged():
    """defaults.go: integrations.frameworks defaults to [batch/job]; a queued JobSet then starts at once."""
    result = kt_run(objects=_jobset_objects() + [make_configuration().obj()])
    assert not result.versions("Workload", prefix="jobset-train-")
    assert result.first_time("Pod", lambda o: True, prefix="train-") == 60.0
    assert any("JobSets labelled kueue.x-k8s.io/queue-name are not queued" in d.message for d in result.notices)
    managed = kt_run(objects=_jobset_objects() + [make_configuration().fields(
        integrations={"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}).obj()])
    assert len({o["metadata"]["name"] for _, _, o in managed.versions("Workload", prefix="jobset-train-")}) == 1


# ------------------------------------------------------------------------------------------------ Configuration
def test_configuration_validation_diagnostics(tmp_path):
    f = tmp_path / "cfg.yaml"
    f.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n"
                 "  enable: true\n  timeout: 10\n  requeuingStrategy:\n    timestamp: Later\n"
                 "fairSharing:\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n"
                 "featureGates: {NotAGate: true}\nwaitForPodReady: {}\n")
    diags = validate(load_paths([f]))
    got = {(d.line, d.field, d.severity) for d in diags}
    assert (4, "waitForPodsReady.enable", "error") in got
    assert (5, "waitForPodsReady.timeout", "error") in got
    assert (7, "waitForPodsReady.requeuingStrategy.timestamp", "error") in got
    assert (9, "fairSharing.preemptionStrategies", "error") in got
    assert (11, "waitForPodReady", "error") in got
    by_field = {d.field: d for d in diags}
    assert "Eviction" in by_field["waitForPodsReady.requeuingStrategy.timestamp"].hint
    assert "presence" in by_field["waitForPodsReady.enable"].hint
    assert by_field["waitForPodReady"].message == 'strict decoding error: unknown field "waitForPodReady"'
    with pytest.raises(KubetwinError):
        kt_run([f])


def test_configuration_fair_sharing_needs_strategies_and_frameworks_must_exist(tmp_path):
    f = tmp_path / "cfg.yaml"
    f.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\n"
                 "integrations:\n  frameworks: [batch/job, kubeflow.org/notajob]\n")
    by_field = {d.field: d for d in validate(load_paths([f]))}
    assert by_field["fairSharing.preemptionStrategies"].message == "Required value: must be specified"
    assert by_field["fairSharing.preemptionStrategies"].line == 3
    frameworks = by_field["integrations.frameworks"]
    assert frameworks.line == 5 and "'kubeflow.org/notajob'" in frameworks.message
    assert "jobset.x-k8s.io/jobset" in frameworks.message  # the supported values are listed


def test_configuration_defaults_per_version():
    v2 = kueue_config.parse(make_configuration().fields(waitForPodsReady={}, fairSharing=FAIR).obj())
    assert v2.wait_for_pods_ready == kueue_config.WaitForPodsReady(timeout=1800.0, block_admission=False,
                                                                   recovery_timeout=1800.0)
    assert v2.fair_sharing and v2.preemption_strategies == ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    v1 = kueue_config.parse(make_configuration().version("v1beta1")
                            .fields(waitForPodsReady={"enable": True}, fairSharing={"enable": False}).obj())
    assert (v1.wait_for_pods_ready.timeout, v1.wait_for_pods_ready.block_admission, v1.fair_sharing) == (
        300.0, True, False)
    assert kueue_config.parse(make_configuration().obj()).wait_for_pods_ready is None
    no_partial = make_configuration().fields(featureGates={"PartialAdmission": False}).obj()
    assert kueue_config.parse(no_partial).partial_admission is False
    w = kueue_config.WaitForPodsReady(backoff_base_seconds=60, backoff_max_seconds=200)
    assert [w.backoff(n) for n in (1, 2, 3, 4)] == [60.0, 120.0, 200.0, 200.0]
    assert kueue_config.go_duration("1h30m") == 5400.0
    assert [d for d in validate(load_paths([WFPR])) if d.severity == "error"] == []


# ------------------------------------------------------------------------------------------------ (e) waitForPodsReady
@pytest.fixture(scope="module")
def wfpr(tmp_path_factory):
    return kt_run([WFPR], out=tmp_path_factory.mktemp("wfpr"))


def test_wait_for_pods_ready_evicts_requeues_with_backoff_and_deactivates(wfpr):
    key = wfpr.last("Workload", prefix="job-gang-")["metadata"]
    key = f"{key['namespace']}/{key['name']}"
    evictions = sorted({(condition(o, "Evicted")["lastTransitionTime"], condition(o, "Evicted")["message"])
                        for t, _, o in wfpr.versions("Workload", prefix="job-gang-")
                        if condition(o, "Evicted").get("reason") == "PodsReadyTimeout"
                        and is_true(o, "Evicted")})
    assert evictions == [("2026-01-01T00:10:00Z", f"Exceeded the PodsReady timeout {key}"),
                         ("2026-01-01T00:21:00Z", f"Exceeded the PodsReady timeout {key}")]
    event = [o for _, o in wfpr.recorded_events("EvictedDueToPodsReadyTimeout")]
    assert len(event) == 1 and event[0]["message"] == f"Exceeded the PodsReady timeout {key}"
    admitted = [t for t, etype, o in wfpr.versions("Workload", prefix="job-gang-")
                if is_true(o, "Admitted") and condition(o, "Evicted").get("status") != "True"]
    assert sorted(set(admitted)) == [0.0, 660.0, 1380.0]  # requeued 60 s, then 120 s after each eviction
    first = wfpr.last("Workload", prefix="job-gang-", at=600)
    assert first["status"]["requeueState"] == {"count": 1, "requeueAt": "2026-01-01T00:11:00Z"}
    assert (condition(first, "Evicted")["reason"], condition(first, "Requeued")["reason"]) == ("PodsReadyTimeout",
                                                                                    "PodsReadyTimeout")
    assert condition(first, "QuotaReserved")["status"] == "False" and "admission" not in first["status"]
    pr = condition(first, "PodsReady")
    assert (pr["status"], pr["reason"], pr["message"]) == (
        "False", "WaitForStart", "Not all pods are ready or succeeded")
    assert wfpr.last("Workload", prefix="job-gang-", at=1260)["status"]["requeueState"]["count"] == 2
    assert condition(wfpr.last("Workload", prefix="job-gang-", at=660), "Requeued")["reason"] == "BackoffFinished"
    assert wfpr.last("Job", prefix="gang", at=620)["spec"]["suspend"] is True
    # third timeout: count 2 + 1 > backoffLimitCount 2 -> deactivated, never admitted again
    final = wfpr.last("Workload", prefix="job-gang-")
    assert final["spec"]["active"] is False and "requeueState" not in final["status"]
    ev = condition(final, "Evicted")
    assert (ev["reason"], ev["message"], ev["lastTransitionTime"]) == (
        "DeactivatedDueToRequeuingLimitExceeded",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries", "2026-01-01T00:33:00Z")
    assert condition(final, "QuotaReserved")["status"] == "False"
    assert wfpr.last("Job", prefix="gang")["spec"]["suspend"] is True
    alive = {}
    for _, etype, pod in wfpr.versions("Pod", prefix="gang-"):
        alive[pod["metadata"]["name"]] = etype != "DELETED"
    assert alive and not any(alive.values())  # every pod of the gang is gone after the deactivation
    k = wfpr.summary["kueue"]["team"]
    assert (k["admitted"], k["evicted"], k["evicted_by_reason"]) == (
        3, 3, {"Deactivated": 1, "PodsReadyTimeout": 2})
    prom = (wfpr.out / "metrics.prom").read_text()
    assert 'kueue_evicted_workloads_total{cluster_queue="team",reason="PodsReadyTimeout"} 2' in prom.splitlines()


def test_pods_ready_true_when_all_pods_ready_and_no_eviction():
    objs = [make_scenario().obj(), make_configuration().fields(waitForPodsReady={"timeout": "5m"}).obj(),
            make_pool("cpu", "e2-standard-16", 2).obj(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="8").obj(), make_lq("main").cluster_queue("cq").obj(),
            make_job("train").queue("main").pods(3).obj()]
    result = kt_run(objects=objs)
    wl = result.last("Workload", prefix="job-train-", at=1000)
    pr = condition(wl, "PodsReady")
    assert (pr["status"], pr["reason"], pr["message"]) == (
        "True", "Started", "All pods reached readiness and the workload is running")
    assert not result.recorded_events("EvictedDueToPodsReadyTimeout")


def test_block_admission_holds_other_workloads_until_the_gang_is_evicted():
    # 2 nodes of ~15.9 cpu: one 9-cpu pod each
    gang = make_job("gang").queue("main").cpu("9").pods(3).duration("1h").obj()
    small = make_job("small").queue("main").cpu("1").create_at("1m").obj()

    def run(block: bool):
        cfg = make_configuration().fields(waitForPodsReady={"timeout": "10m", "blockAdmission": block,
                                                            "requeuingStrategy": {"backoffLimitCount": 0}}).obj()
        return kt_run(objects=[make_scenario().obj(), cfg, make_pool("cpu", "e2-standard-16", 2).obj(),
                               make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="40").obj(),
                                     make_lq("main").cluster_queue("cq").obj(), gang, small])

    def admitted(result, name):
        return result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=f"job-{name}-")

    free, blocked = run(False), run(True)
    assert admitted(free, "small") == 60.0
    assert admitted(blocked, "small") == 600.0  # once the gang is deactivated and its quota released
    assert blocked.last("Workload", prefix="job-gang-")["spec"]["active"] is False


# ------------------------------------------------------------------------------------------------ (f) fair sharing
def test_fair_sharing_from_configuration_changes_the_outcome():
    """TestFairPreemptions F3 end to end: a (at nominal) asks for 1 more cpu while b borrows 2. Classical
    preemption cannot take it (borrowWithinCohort only below priority -3); fair sharing preempts b's newest."""
    objs = fair_preemptions_f3()

    def outcome(fair: bool) -> tuple[float | None, list]:
        run_objs = objs + ([make_configuration().fields(fairSharing=FAIR).obj()] if fair else [])
        result = kt_run(objects=run_objs)
        admitted = result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix="job-a-incoming-")
        preempted = sorted((o["involvedObject"]["name"].split("-")[1], cond_reason)
                           for _, o in result.recorded_events("Preempted")
                           for cond_reason in [o["message"].split("; ")[0]])
        return admitted, preempted

    classical, fair = outcome(False), outcome(True)
    assert classical == (None, [])
    admitted, preempted = fair
    assert admitted == 300.0 and [p[0] for p in preempted] == ["b5"]
    result = kt_run(objects=objs + [make_configuration().fields(fairSharing=FAIR).obj()])
    b5 = result.last("Workload", prefix="job-b5-", at=300)
    assert condition(b5, "Preempted")["reason"] == "InCohortFairSharing"


# ------------------------------------------------------------------------------------------------ (g) determinism
@pytest.mark.parametrize("example", [COHORT, WFPR], ids=["cohort", "wait-for-pods-ready"])
def test_same_inputs_byte_identical_outputs(example, tmp_path):
    a = kt_run([example], out=tmp_path / "a")
    b = kt_run([example], out=tmp_path / "b")
    for name in ("summary.json", "metrics.prom"):
        assert (a.out / name).read_bytes() == (b.out / name).read_bytes()


def test_recovery_timeout_after_pods_ready_drops():
    """A running gang whose containers crash (kubetwin.io/fail-after, restartPolicy OnFailure) turns PodsReady
    False "WaitForRecovery"; the kubelet restarts them after 10 s of CrashLoopBackOff. recoveryTimeout 1m lets it
    recover ("Recovered"); recoveryTimeout 5s evicts it first."""
    crashing = make_job("train").queue("main").pods(2).duration("3h").obj()
    tmpl = crashing["spec"]["template"]
    tmpl["metadata"]["annotations"]["kubetwin.io/fail-after"] = "20m"
    tmpl["spec"]["restartPolicy"] = "OnFailure"
    crashing["spec"]["backoffLimit"] = 100

    def run(recovery: str):
        cfg = make_configuration().fields(waitForPodsReady={"timeout": "10m", "recoveryTimeout": recovery}).obj()
        return kt_run(objects=[make_scenario("1h").obj(), cfg, make_pool("cpu", "e2-standard-16", 2).obj(),
                               make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="8").obj(),
                               make_lq("main").cluster_queue("cq").obj(), crashing])

    def pods_ready(result):
        out = []
        for t, _, o in result.versions("Workload", prefix="job-train-"):
            c = condition(o, "PodsReady")
            if c and (not out or out[-1][1:] != (c["status"], c["reason"])):
                out.append((t, c["status"], c["reason"]))
        return out

    patient = run("1m")
    seen = pods_ready(patient)
    assert ("False", "WaitForRecovery") in [s[1:] for s in seen] and ("True", "Recovered") in [s[1:] for s in seen]
    assert not [o for t, _, o in patient.versions("Workload", prefix="job-train-") if condition(o, "Evicted")]
    strict = run("5s")
    dropped = next(t for t, status, reason in pods_ready(strict) if reason == "WaitForRecovery")
    evicted = strict.first_time("Workload", lambda o: is_true(o, "Evicted"), prefix="job-train-")
    assert evicted == dropped + 5
    evicted_wl = strict.last("Workload", prefix="job-train-", at=evicted)
    assert condition(evicted_wl, "Evicted")["reason"] == "PodsReadyTimeout"


@pytest.mark.parametrize("timestamp,first", [("Eviction", "b"), ("Creation", "a")])
def test_requeuing_timestamp_orders_the_evicted_workload(timestamp, first):
    """a (created at 0) times out at 10m and is requeued at once (backoffBaseSeconds 0); b (created at 1m) waits
    for the same quota. Eviction orders a by its eviction time (after b), Creation by its creation time."""
    cfg = make_configuration().fields(waitForPodsReady={"timeout": "10m", "requeuingStrategy": {
        "timestamp": timestamp, "backoffBaseSeconds": 0}}).obj()
    objs = [make_scenario("30m").obj(), cfg, make_pool("cpu", "e2-standard-16", 2).obj(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="24").obj(), make_lq("main").cluster_queue("cq").obj(),
            make_job("a").queue("main").cpu("8").pods(3).obj(),
            make_job("b").queue("main").cpu("8").pods(3).create_at("1m").obj()]
    result = kt_run(objects=objs)
    # both are back in the heap at 10m01s, when Kueue's requeuer's batch (1 s after a's release, #9232) is due
    admitted_at_10m = [n for n in "ab" if any(
        is_true(o, "Admitted") and condition(o, "Admitted")["lastTransitionTime"].endswith("00:10:01Z")
        for _, _, o in result.versions("Workload", prefix=f"job-{n}-"))]
    assert admitted_at_10m == [first]

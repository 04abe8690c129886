"""The Job controller's pod-failure back-off and its counting of pods others deleted, against kubernetes/kubernetes
pkg/controller/job (1.34): backoff_utils_test.go (TestNewBackoffRecord, TestGetFinishedTime,
TestGetRemainingBackoffTime, TestGetRemainingBackoffTimePerIndex), job_controller_test.go's back-off behaviour
(a replacement waits 10 s, 20 s, ... after consecutive failures; a success resets it), and isPodFailed's rule that a
pod deleted before it succeeded is a failure (the job-tracking finalizer lets the controller count it), with the
DisruptionTarget conditions the scheduler's preemption, the taint manager's eviction and a Spot VM's shutdown set."""

from __future__ import annotations

import pytest
from conftest import final_objects
from k8s_builders import make_pod, make_pool, make_priority_class, make_scenario, static_node

from kubetwin.controllers import admission
from kubetwin.controllers import job_backoff as backoff
from kubetwin.controllers import job_policy as policy
from kubetwin.controllers.job import COMPLETION_INDEX, JobController
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.runner import run
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store

T = "2009-11-10T23:00:00Z"  # backoff_utils_test.go's defaultTestTime
T0 = backoff.seconds(T)


def _at(offset_s: float) -> str:
    """defaultTestTime + offset as RFC 3339 (milliseconds kept)."""
    from datetime import UTC, datetime
    return datetime.fromtimestamp(T0 + offset_s, UTC).isoformat().replace("+00:00", "Z")


def _finished(phase: str, offset_s: float) -> dict:
    return {"metadata": {"creationTimestamp": _at(-3600)},
            "status": {"phase": phase, "containerStatuses": [{"state": {"terminated": {"finishedAt": _at(offset_s)}}}]}}


# -- backoff_utils_test.go -------------------------------------------------------------------------------------

NEW_RECORD = {  # name: (stored record, new succeeded (offsets, s), new failed (offsets, s), want record)
    "Empty backoff store and one new failure": (None, [], [0], (1, 0)),
    "Empty backoff store and two new failures": (None, [], [0, -0.001], (2, 0)),
    "Empty backoff store, two failures followed by success": (None, [0], [-0.002, -0.001], (0, None)),
    "Empty backoff store, two failures, one success and two more failures": (
        None, [-0.002], [0, -0.004, -0.003, -0.001], (2, 0)),
    "Backoff store having failure count 2 and one new failure": (backoff.BackoffRecord(2, None), [], [0], (3, 0)),
    "Empty backoff store with success and failure at same timestamp": (None, [0], [0], (0, None)),
    "Empty backoff store with no success/failure": (None, [], [], (0, None)),
    "Empty backoff store with one success": (None, [0], [], (0, None)),
}


@pytest.mark.parametrize("name", list(NEW_RECORD))
def test_new_backoff_record_as_upstreams_table(name: str) -> None:
    old, succeeded, failed, (count, last) = NEW_RECORD[name]
    rec = backoff.new_backoff_record(old, [_finished("Succeeded", o) for o in succeeded],
                                     [_finished("Failed", o) for o in failed])
    assert rec == backoff.BackoffRecord(count, None if last is None else T0 + last)


def _pod(statuses: list[dict], meta: dict | None = None, conditions: list | None = None,
         init: list | None = None, spec: dict | None = None) -> dict:
    return {"metadata": {"creationTimestamp": "0001-01-01T00:00:00Z", **(meta or {})}, "spec": spec or {},
            "status": {"containerStatuses": statuses, "conditions": conditions or [],
                       **({"initContainerStatuses": init} if init else {})}}


def _term(offset: float | None) -> dict:
    return {"state": {"terminated": {} if offset is None else {"finishedAt": _at(offset)}}}


RUNNING = {"state": {"running": {}}}
FINISHED_TIME = {
    "Pod with multiple containers and all containers terminated": (
        _pod([_term(-1), _term(0), _term(-2)]), 0),
    "Pod with multiple containers; two containers in terminated state and one in running state; fallback to "
    "deletionTimestamp": (_pod([_term(-1), RUNNING, _term(-2)], {"deletionTimestamp": T}), 0),
    "fallback to deletionTimestamp": (_pod([RUNNING], {"deletionTimestamp": T}), 0),
    "fallback to deletionTimestamp, decremented by grace period": (
        _pod([RUNNING], {"deletionTimestamp": T, "deletionGracePeriodSeconds": 30}), -30),
    "fallback to PodReady.LastTransitionTime when status of the condition is False": (
        _pod([_term(None)], conditions=[{"type": "Ready", "status": "False", "reason": "PodFailed",
                                         "lastTransitionTime": T}]), 0),
    "skip fallback to PodReady.LastTransitionTime when status of the condition is True": (
        _pod([_term(None)], {"deletionTimestamp": T},
             [{"type": "Ready", "status": "True", "lastTransitionTime": _at(-30)}]), 0),
    "fallback to creationTimestamp": (_pod([_term(None)], {"creationTimestamp": T}), 0),
    "Pod with sidecar container and all containers terminated": (
        _pod([_term(-1)], init=[{"name": "sidecar", **_term(0)}],
             spec={"initContainers": [{"name": "sidecar", "restartPolicy": "Always"}]}), 0),
}


@pytest.mark.parametrize("name", list(FINISHED_TIME))
def test_get_finished_time_as_upstreams_table(name: str) -> None:
    pod, want = FINISHED_TIME[name]
    assert backoff.finished_time(pod) == pytest.approx(T0 + want)


REMAINING = {  # name: (failures, last failure offset or None, now offset, default, max, want)
    "no failures": (0, None, 0, 5, 700, 0),
    "one failure; current time and failure time are same": (1, 0, 0, 5, 700, 5),
    "one failure; current time == 1 second + failure time": (1, 0, 1, 5, 700, 4),
    "one failure; current time == expected backoff time": (1, 0, 5, 5, 700, 0),
    "one failure; current time == expected backoff time + 1 Second": (1, 0, 6, 5, 700, 0),
    "three failures; current time and failure time are same": (3, 0, 0, 5, 700, 20),
    "eight failures; current time and failure time are same; backoff not exceeding maxBackoff": (8, 0, 0, 5, 700, 640),
    "nine failures; current time and failure time are same; backoff exceeding maxBackoff": (9, 0, 0, 5, 700, 700),
}


@pytest.mark.parametrize("name", list(REMAINING))
def test_get_remaining_backoff_time_as_upstreams_table(name: str) -> None:
    failures, last, now, default, maximum, want = REMAINING[name]
    rec = backoff.BackoffRecord(failures, None if last is None else T0 + last)
    assert backoff.remaining_time(rec, T0 + now, default, maximum) == want


def _index_pod(failures: str, ignored: str | None = None) -> dict:
    ann = {policy.INDEX_FAILURE_COUNT: failures, **({policy.INDEX_IGNORED_FAILURE_COUNT: ignored} if ignored else {})}
    return {"metadata": {"annotations": ann, "deletionTimestamp": T, "creationTimestamp": T},
            "status": {"phase": "Failed"}}


@pytest.mark.parametrize("pod,want", [(None, 0), (_index_pod("2"), 20), (_index_pod("1", "1"), 20)],
                         ids=["no failures", "two prev failures; current time and failure time are same",
                              "one prev failure counted and one ignored; current time and failure time are same"])
def test_get_remaining_backoff_time_per_index_as_upstreams_table(pod: dict | None, want: float) -> None:
    assert backoff.remaining_time_per_index(pod, T0, 5, 700) == want


def test_the_constants_are_upstreams() -> None:
    """job_controller.go: DefaultJobPodFailureBackOff 10 s, MaxJobPodFailureBackOff 10 min, syncJobBatchPeriod 1 s."""
    assert (backoff.DEFAULT_POD_FAILURE_BACKOFF, backoff.MAX_POD_FAILURE_BACKOFF,
            backoff.SYNC_JOB_BATCH_PERIOD) == (10, 600, 1)
    assert [backoff.remaining_time_for_failures(n, 0, 0) for n in range(1, 9)] == [
        10, 20, 40, 80, 160, 320, 600, 600]


# -- the controller, on a clock --------------------------------------------------------------------------------

NOW = "2026-01-01T00:00:00Z"


def _job(**spec: object) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
            "spec": {**spec, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "x"}]}}}}


class _Cluster:
    """The Job controller alone: pods are failed or succeeded by hand at the clock's instants."""

    def __init__(self, job: dict) -> None:
        self.env = Environment()
        self.store = Store(self.env, 0, NOW)
        self.store.admit(admission.api_defaults, admission.API_DEFAULTED)
        JobController(self.store, self.env, EventRecorder(self.store), NameGenerator(0))
        self.store.create(job)
        self.env.run(until=0)

    def live(self) -> list[dict]:
        return [p for p in self.store.list("Pod") if p["status"].get("phase") in (None, "Pending", "Running")]

    def finish(self, pod: dict, phase: str) -> None:
        now = self.store.timestamp(self.env.now)
        self.store.update({**pod, "status": {"phase": phase, "containerStatuses": [{"name": "c", "state": {
            "terminated": {"exitCode": int(phase == "Failed"), "finishedAt": now}}}]}})

    def step(self, until: float) -> None:
        self.env.run(until=until)


def test_a_replacement_waits_10s_then_20s_and_a_success_resets_the_backoff() -> None:
    """job_controller_test.go TestJobBackoff's rule: no pod is created while the back-off runs; the Job is synced
    again when it has passed."""
    c = _Cluster(_job(completions=3, parallelism=1, backoffLimit=6))
    c.finish(c.live()[0], "Failed")
    c.step(9.5)
    assert c.live() == []  # 10 s back-off after the first failure
    c.step(10.5)
    [second] = c.live()
    assert second["metadata"]["creationTimestamp"] == "2026-01-01T00:00:10Z"
    c.finish(second, "Failed")
    c.step(29.5)
    assert c.live() == []  # 20 s after the second consecutive failure
    c.step(30.5)
    [third] = c.live()
    c.finish(third, "Succeeded")  # a success resets the record: the next pod starts at once
    c.step(30.6)
    [fourth] = c.live()
    assert fourth["metadata"]["creationTimestamp"] == "2026-01-01T00:00:30Z"
    job = c.store.get("Job", "default", "j")
    assert (job["status"]["failed"], job["status"]["succeeded"], job["status"]["active"]) == (2, 1, 1)


def test_active_pods_are_not_touched_and_status_active_stays_true_during_the_backoff() -> None:
    """parallelism 2, one pod fails: the other keeps running and status.active stays 1 while the replacement
    waits (the 1.34 cherry-pick of kubernetes#139457 fixed manageJob returning active=0 during the back-off)."""
    c = _Cluster(_job(completions=4, parallelism=2, backoffLimit=6))
    c.finish(c.live()[0], "Failed")
    c.step(5)
    assert len(c.live()) == 1 and c.store.get("Job", "default", "j")["status"]["active"] == 1
    c.step(10.5)
    assert len(c.live()) == 2


def test_per_index_backoff_delays_only_the_failed_index() -> None:
    """backoffLimitPerIndex: the failed index waits 10 s (its job-index-failure-count + 1 failures), the other
    index is not delayed (getPodCreationInfoForIndependentIndexes)."""
    c = _Cluster(_job(completions=2, parallelism=2, completionMode="Indexed", backoffLimitPerIndex=3))
    pods = {p["metadata"]["annotations"][COMPLETION_INDEX]: p for p in c.live()}
    c.finish(pods["0"], "Failed")
    c.step(9.5)
    assert {p["metadata"]["annotations"][COMPLETION_INDEX] for p in c.live()} == {"1"}
    c.step(10.5)
    new = [p for p in c.live() if p["metadata"]["annotations"][COMPLETION_INDEX] == "0"]
    assert len(new) == 1 and new[0]["metadata"]["annotations"][policy.INDEX_FAILURE_COUNT] == "1"
    c.finish(new[0], "Failed")  # the index's second failure: 20 s
    c.step(29.5)
    assert {p["metadata"]["annotations"][COMPLETION_INDEX] for p in c.live()} == {"1"}
    c.step(30.5)
    assert {p["metadata"]["annotations"][COMPLETION_INDEX] for p in c.live()} == {"0", "1"}


# -- whole runs: the back-off's time -----------------------------------------------------------------------------

def _fail_times(res, job: str = "x") -> tuple[list[float], list[float], float | None]:
    """(pod creation times, pod failure times, the Job's Failed time)."""
    created, failed, job_failed = [], [], None
    for t, _, et, o in res.history:
        if o["kind"] == "Pod" and et == "ADDED":
            created.append(t)
        elif o["kind"] == "Pod" and et == "MODIFIED" and o["status"].get("phase") == "Failed" and not any(
                t2 == t and n == o["metadata"]["name"] for t2, n in failed):
            failed.append((t, o["metadata"]["name"]))
        elif o["kind"] == "Job" and job_failed is None and any(
                c["type"] == "Failed" for c in (o.get("status") or {}).get("conditions") or []):
            job_failed = t
    return created, [t for t, _ in failed], job_failed


def _crashing_job(**spec: object) -> dict:
    job = _job(**spec)
    job["metadata"]["name"] = "x"
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/fail-after": "1s"}}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    return job


def test_run_backoff_limit_6_is_reached_after_the_sum_of_the_backoffs() -> None:
    """A pod failing 1 s after it starts, backoffLimit 6: seven pods, each replacement created 10, 20, 40, 80, 160,
    320 s after the previous failure, so BackoffLimitExceeded comes 630 s + the pods' own run time after the first
    failure, not seconds after it."""
    res = run(objects=[make_scenario("2h").obj(), make_pool("cpu", "e2-standard-4", 1).obj(),
                       _crashing_job(backoffLimit=6)])
    created, failed, job_failed = _fail_times(res)
    assert len(created) == 7 and len(failed) == 7
    assert [c - f for c, f in zip(created[1:], failed[:-1], strict=True)] == [10, 20, 40, 80, 160, 320]
    assert job_failed == failed[-1] and job_failed - failed[0] == 630 + sum(
        f - c for c, f in zip(created[1:], failed[1:], strict=True))
    job = final_objects(res, "Job")["x"]
    assert job["status"]["conditions"][-1]["reason"] == "BackoffLimitExceeded" and job["status"]["failed"] == 7


def test_run_backoff_limit_per_index_waits_per_index() -> None:
    """backoffLimitPerIndex 2 on 2 indexes: each index is tried 3 times, 10 s then 20 s apart; the Job fails
    FailedIndexes once both have failed."""
    res = run(objects=[make_scenario("2h").obj(), make_pool("cpu", "e2-standard-4", 1).obj(),
                       _crashing_job(completions=2, parallelism=2, completionMode="Indexed",
                                     backoffLimitPerIndex=2)])
    by_index: dict[str, list[tuple[float, str]]] = {}
    for t, _, et, o in res.history:
        if o["kind"] == "Pod" and (et == "ADDED" or o["status"].get("phase") == "Failed"):
            ev = "created" if et == "ADDED" else "failed"
            seq = by_index.setdefault(o["metadata"]["annotations"][COMPLETION_INDEX], [])
            if (t, ev) not in seq and not (ev == "failed" and seq and seq[-1][1] == "failed"):
                seq.append((t, ev))
    for seq in by_index.values():
        kinds = [e for _, e in seq]
        assert kinds == ["created", "failed"] * 3
        times = [t for t, _ in seq]
        assert [times[2] - times[1], times[4] - times[3]] == [10, 20]
    job = final_objects(res, "Job")["x"]
    assert job["status"]["failedIndexes"] == "0,1" and job["status"]["conditions"][-1]["reason"] == "FailedIndexes"


# -- pods others delete -------------------------------------------------------------------------------------------

IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                          "status": "True"}]}]}


def _preemption_run(backoff_limit: int, pfp: dict | None, preemptors: list[str]):
    """One 4-CPU node; the Job's pod asks 3 CPUs for 20 min; each preemptor (priority 1000, 3 CPUs, 2 min) created
    at its time preempts it."""
    job = _job(backoffLimit=backoff_limit, **({"podFailurePolicy": pfp} if pfp else {}))
    job["metadata"]["name"] = "x"
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "20m"}}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    high = [make_pod(f"high-{i}").cpu("3").duration("2m").create_at(at).priority_class("high").obj()
            for i, at in enumerate(preemptors)]
    return run(objects=[make_scenario("2h").obj(), static_node("n1").obj(),
                        make_priority_class("high").value(1000).obj(), job, *high])


def _deleted(res, reason: str) -> list[dict]:
    return [o for _, _, et, o in res.history if o["kind"] == "Pod" and et == "DELETED"
            and any(c.get("reason") == reason for c in o["status"].get("conditions") or [])]


def test_a_preempted_pod_counts_as_failed_and_is_replaced_after_the_backoff() -> None:
    res = _preemption_run(6, None, ["5m"])
    [victim] = _deleted(res, "PreemptionByScheduler")
    assert victim["metadata"]["name"].startswith("x-")
    job = final_objects(res, "Job")["x"]
    assert job["status"]["failed"] == 1 and job["status"]["succeeded"] == 1
    assert job["status"]["conditions"][-1]["type"] == "Complete"
    pods = sorted((p["metadata"]["creationTimestamp"], n) for n, p in final_objects(res, "Pod").items()
                  if n.startswith("x-"))
    assert pods[-1][0] == "2026-01-01T00:05:10Z"  # preempted at 5 min, the 10 s back-off, then its replacement


def test_backoff_limit_reached_by_preemptions_alone() -> None:
    """Two preemptions with backoffLimit 1: the Job fails BackoffLimitExceeded though no container ever failed."""
    res = _preemption_run(1, None, ["5m", "10m"])
    assert len(_deleted(res, "PreemptionByScheduler")) == 2
    job = final_objects(res, "Job")["x"]
    assert job["status"]["failed"] == 2
    assert [(c["type"], c["reason"]) for c in job["status"]["conditions"]] == [
        ("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]


def test_preemptions_ignored_by_a_disruption_target_rule_do_not_count() -> None:
    """GKE's and the Kubernetes docs' recommended policy: Ignore on DisruptionTarget; backoffLimit 0 survives two
    preemptions (the replacement is not delayed by a failure count, but an ignored failure still backs off)."""
    res = _preemption_run(0, IGNORE_DISRUPTION, ["5m", "10m"])
    assert len(_deleted(res, "PreemptionByScheduler")) == 2
    job = final_objects(res, "Job")["x"]
    assert job["status"]["failed"] == 0 and job["status"]["conditions"][-1]["type"] == "Complete"


@pytest.mark.parametrize("pfp,want_failed,want_final", [(None, 2, "Failed"), (IGNORE_DISRUPTION, 0, None)])
def test_taint_manager_eviction_counts_as_failed_unless_ignored(pfp: dict | None, want_failed: int,
                                                               want_final: str | None) -> None:
    """A Job pod bound to a NotReady node is evicted after the 300 s toleration (DisruptionTarget
    DeletionByTaintManager): counted as failed, so backoffLimit 1 fails the Job at the second eviction; with
    Ignore on DisruptionTarget it never fails (and keeps being evicted)."""
    job = _job(backoffLimit=1, **({"podFailurePolicy": pfp} if pfp else {}))
    job["metadata"]["name"] = "x"
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "1h"}}
    job["spec"]["template"]["spec"].update(nodeName="sick")
    res = run(objects=[make_scenario("40m").obj(), static_node("sick").ready("False").obj(), job])
    evicted = _deleted(res, "DeletionByTaintManager")
    job = final_objects(res, "Job")["x"]
    assert job["status"].get("failed", 0) == want_failed
    final = [c["type"] for c in job["status"].get("conditions") or [] if c["type"] in ("Failed", "Complete")]
    assert final == ([want_final] if want_final else [])
    # the first pod goes at 300 s; its replacement, bound 10 s later (the back-off), tolerates 300 s from then
    times = sorted(t for t, _, et, o in res.history if o["kind"] == "Pod" and et == "DELETED"
                   and any(c.get("reason") == "DeletionByTaintManager" for c in o["status"].get("conditions") or []))
    assert len(evicted) >= 2 and times[:2] == [300.0, 610.0]


@pytest.mark.parametrize("pfp,want_failed", [(None, 1), (IGNORE_DISRUPTION, 0)])
def test_spot_preemption_counts_as_failed_unless_ignored(pfp: dict | None, want_failed: int) -> None:
    """A Spot VM's shutdown fails the pod (DisruptionTarget TerminationByKubelet); the Job counts it, or not with
    the Ignore rule, and its replacement runs on the recreated VM."""
    job = _job(backoffLimit=6, **({"podFailurePolicy": pfp} if pfp else {}))
    job["metadata"]["name"] = "x"
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "30m"}}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    pool = make_pool("spot", "e2-standard-4", 1).spec(spot=True, spotPreemption={
        "schedule": [{"at": "10m", "nodes": 1}]}).obj()
    res = run(objects=[make_scenario("2h").obj(), pool, job])
    job = final_objects(res, "Job")["x"]
    assert job["status"].get("failed", 0) == want_failed
    assert job["status"]["conditions"][-1]["type"] == "Complete"


def test_validate_notices_pod_replacement_policy_failed() -> None:
    """podReplacementPolicy: Failed differs from TerminatingOrFailed only by the grace period the twin does not
    model: a notice says so (on the field's line)."""
    from kubetwin.api.loader import Manifest
    from kubetwin.validation.validate import validate

    job = _job(podReplacementPolicy="Failed")
    [d] = [d for d in validate([Manifest(job, "job.yaml", 1)]) if d.severity == "notice"]
    assert d.field == "spec.podReplacementPolicy" and "without a grace period" in d.message
    assert not [d for d in validate([Manifest(_job(podReplacementPolicy="TerminatingOrFailed"), "job.yaml", 1)])
                if d.severity != "info"]


@pytest.mark.parametrize("pfp,want_failed", [(None, 1), (IGNORE_DISRUPTION, 0)])
def test_cluster_autoscaler_drain_is_an_eviction_api_disruption_the_job_counts(pfp: dict | None,
                                                                                want_failed: int) -> None:
    """The cluster autoscaler's scale-down evicts a Job's pod through the Eviction API: DisruptionTarget
    EvictionByEvictionAPI ("Eviction API: evicting"), counted as a failure unless an Ignore rule matches it; the
    replacement starts on the node that stays (test_cluster_autoscaler's two-node layout)."""
    from test_cluster_autoscaler import owned, pool

    job = _job(backoffLimit=6, **({"podFailurePolicy": pfp} if pfp else {}))
    job["metadata"]["name"] = "x"
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "2h"}}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    bare = make_pod("bare").cpu("500m").obj()
    filler = [owned(make_pod(f"f{i}").cpu("6").duration("20m").obj()) for i in range(2)]
    res = run(objects=[make_scenario("1h").obj(), pool("cpu", "n2-standard-8", 0, 4), *filler, job, bare])
    [evicted] = _deleted(res, "EvictionByEvictionAPI")
    assert evicted["metadata"]["name"].startswith("x-")
    [cond] = [c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (cond["status"], cond["message"]) == ("True", "Eviction API: evicting")
    job = final_objects(res, "Job")["x"]
    assert job["status"].get("failed", 0) == want_failed and job["status"]["active"] == 1


@pytest.mark.parametrize("pfp,want_failed,want_final", [(None, 2, "Failed"), (IGNORE_DISRUPTION, 0, None)])
def test_node_loss_podgc_counts_as_failed_unless_ignored(pfp: dict | None, want_failed: int,
                                                         want_final: str | None) -> None:
    """A Job pod bound to a node that does not exist: PodGC fails it after its 40 s quarantine (DisruptionTarget
    DeletionByPodGC); counted, so backoffLimit 1 fails the Job at the second loss (40 s, then 10 s back-off +
    40 s); ignored with the DisruptionTarget rule."""
    job = _job(backoffLimit=1, **({"podFailurePolicy": pfp} if pfp else {}))
    job["metadata"]["name"] = "x"
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "1h"}}
    job["spec"]["template"]["spec"].update(nodeName="gone")
    res = run(objects=[make_scenario("10m").obj(), static_node("n1").obj(), job])
    job = final_objects(res, "Job")["x"]
    assert job["status"].get("failed", 0) == want_failed
    final = [c["type"] for c in job["status"].get("conditions") or [] if c["type"] in ("Failed", "Complete")]
    assert final == ([want_final] if want_final else [])
    lost = [o for _, _, et, o in res.history if o["kind"] == "Pod" and et == "MODIFIED" and any(
        c.get("reason") == "DeletionByPodGC" for c in o["status"].get("conditions") or [])]
    assert len(lost) >= 2

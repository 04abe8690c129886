"""Kueue starvation: workloads that real Kueue admits and the twin left pending.

- BestEffortFIFO moves an inadmissible head aside and keeps cycling (pkg/scheduler/scheduler.go runs
  ``schedule`` in ``wait.UntilWithBackoff`` for as long as the queues have heads; cluster_queue.go
  requeueIfNotPresent puts a NoFit head into the inadmissible set), so the Jobs behind it are admitted at once.
- A preemptor waiting for its victims stays at the head of its BestEffortFIFO ClusterQueue (cluster_queue.go
  ``preemptorWorkload``, "sticky", Kueue#6929/#7101) and takes the freed quota before a victim or an older
  inadmissible workload can.
- A re-admitted victim is preempted again when its quota is reclaimed a second time.
- metrics.prom is the same bytes whatever the string-hash seed.
"""

from __future__ import annotations

import pytest
from conftest import condition, is_true
from k8s_builders import make_job, make_pool, make_scenario
from kueue_builders import NOW, make_cq, make_flavor, make_lq, make_wl
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.kueue import api
from kubetwin.kueue.queue import (
    REQUEUE_FAILED_AFTER_NOMINATION,
    REQUEUE_GENERIC,
    REQUEUE_NAMESPACE_MISMATCH,
    REQUEUE_PENDING_PREEMPTION,
    REQUEUE_PREEMPTION_FAILED,
    REQUEUE_PREEMPTION_NO_CANDIDATES,
    ClusterQueueQueue,
)
from kubetwin.kueue.snapshot import WorkloadInfo
from kubetwin.runner import run as kt_run


def admitted_at(result, name: str) -> list[float]:
    """The instants a Job's Workload turned Admitted=True."""
    out, prev = [], False
    for t, etype, o in result.versions("Workload", prefix=f"job-{name}-"):
        now = etype != "DELETED" and is_true(o, "Admitted")
        if now and not prev:
            out.append(t)
        prev = now
    return out


def gpu_job(name: str, gpus: int, pods: int, duration: str = "30m") -> dict:
    j = make_job(name).queue("main").cpu("1").pods(pods).duration(duration).obj()
    j["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    return j


def gpu_objects() -> list[dict]:
    pool = make_pool("h100", "a3-highgpu-8g", 2).gpus("nvidia-h100-80gb", 8).obj()
    cq = make_cq("gpu").strategy("BestEffortFIFO").flavor("default", {"cpu": "100", "nvidia.com/gpu": "16"}).obj()
    return [make_scenario("1h").obj(), pool, make_flavor("default").obj(), cq,
            make_lq("main").cluster_queue("gpu").obj()]


def test_best_effort_fifo_admits_small_jobs_behind_an_inadmissible_gang_created_at_the_same_instant(tmp_path):
    """A 20-GPU gang (5 x 4) cannot fit a 16-GPU quota; the two 4-GPU Jobs created with it are admitted at once."""
    objs = gpu_objects() + [gpu_job("gang", 4, 5), gpu_job("small-a", 4, 1), gpu_job("small-b", 4, 1)]
    result = kt_run(objects=objs, out=tmp_path / "run")
    assert admitted_at(result, "small-a") == [0.0]
    assert admitted_at(result, "small-b") == [0.0]
    assert admitted_at(result, "gang") == []
    qr = condition(result.last("Workload", prefix="job-gang-"), "QuotaReserved")
    assert (qr["status"], qr["reason"]) == ("False", "ExceedsMaxQuota")
    assert "current podset request (20) > maximum capacity (16)" in qr["message"]
    gpu_cq = result.last("ClusterQueue", prefix="gpu", at=60)
    assert (gpu_cq["status"]["pendingWorkloads"], gpu_cq["status"]["admittedWorkloads"]) == (1, 2)

    table = CliRunner().invoke(app, ["get", "workloads", "--run", str(tmp_path / "run"), "--at", "1m"])
    assert table.exit_code == 0, table.output
    rows = {line.split()[0].rsplit("-", 1)[0]: line.split() for line in table.output.splitlines()[1:]}
    assert rows["job-small-a"][1:4] == ["main", "gpu", "True"]
    assert rows["job-small-b"][1:4] == ["main", "gpu", "True"]
    assert rows["job-gang"][1:] == ["main", "60s"]  # reserved nowhere, not admitted


def reclaim_objects(with_big: bool, second_reclaim: bool = False) -> list[dict]:
    """alpha and beta, 8 CPU each in one cohort; beta-borrow (4 x 3 CPU) borrows 4 of alpha's; alpha-reclaim
    (8 CPU, 10m) reclaims them; optionally a never-fitting 40-CPU Job queued in alpha before it (5m)."""
    objs = [make_scenario("3h").obj(), make_pool("cpu", "e2-standard-16", 3).obj(), make_flavor("default").obj(),
            make_cq("alpha").flavor("default", cpu="8").cohort("org").preemption(reclaim="Any").obj(),
            make_cq("beta").flavor("default", cpu="8").cohort("org").obj(), make_lq("a").cluster_queue("alpha").obj(),
            make_lq("b").cluster_queue("beta").obj(),
            make_job("beta-borrow").queue("b").cpu("3").pods(4).duration("30m").obj(),
            make_job("alpha-reclaim").queue("a").cpu("8").duration("30m").create_at("10m").obj()]
    if with_big:
        objs.append(make_job("alpha-big").queue("a").cpu("40").create_at("5m").obj())
    if second_reclaim:
        objs.append(make_job("alpha-again").queue("a").cpu("8").duration("30m").create_at("50m").obj())
    return objs


def test_reclaiming_preemptor_is_admitted_once_its_quota_is_free_behind_a_never_fitting_head():
    """The preemptor keeps the head of alpha (sticky) when its victim's quota is released: it is admitted at that
    instant, and the victim, requeued at the same instant, does not take the quota back."""
    result = kt_run(objects=reclaim_objects(with_big=True))
    assert admitted_at(result, "alpha-reclaim") == [600.0]
    # again once alpha-reclaim finished (+ the requeuer's 1 s)
    assert admitted_at(result, "beta-borrow") == [0.0, 2401.0]
    assert len(result.recorded_events("Preempted")) == 1
    at_10m = result.last("Workload", prefix="job-beta-borrow-", at=600)
    assert condition(at_10m, "QuotaReserved")["status"] == "False"
    assert condition(at_10m, "Preempted")["reason"] == "InCohortReclamation"
    big = condition(result.last("Workload", prefix="job-alpha-big-"), "QuotaReserved")
    assert (big["status"], big["reason"]) == ("False", "ExceedsMaxQuota")
    reclaim = condition(result.last("Workload", prefix="job-alpha-reclaim-", at=600), "QuotaReserved")
    assert (reclaim["status"], reclaim["reason"]) == ("True", "QuotaReserved")


def test_reclaiming_preemptor_without_a_blocking_head_is_admitted_at_the_same_instant():
    result = kt_run(objects=reclaim_objects(with_big=False))
    assert admitted_at(result, "alpha-reclaim") == [600.0]
    # Kueue's requeuer retries inadmissible workloads 1 s after the release (#9232)
    assert admitted_at(result, "beta-borrow") == [0.0, 2401.0]


def test_readmitted_victim_is_preempted_again_when_its_quota_is_reclaimed_again():
    """beta-borrow, preempted at 10m and admitted again at 40m, borrows alpha's quota once more; alpha-again (50m)
    reclaims it: a second preemption, not a preemptor waiting for an eviction nobody issues."""
    result = kt_run(objects=reclaim_objects(with_big=False, second_reclaim=True))
    # Kueue's requeuer retries inadmissible workloads 1 s after the release (#9232)
    assert admitted_at(result, "beta-borrow") == [0.0, 2401.0, 4801.0]
    assert admitted_at(result, "alpha-again") == [3000.0]
    preempted = [(t, o["involvedObject"]["name"].rsplit("-", 1)[0]) for t, o in result.recorded_events("Preempted")]
    assert preempted == [(600.0, "job-beta-borrow"), (3000.0, "job-beta-borrow")]
    again = condition(result.last("Workload", prefix="job-beta-borrow-", at=3000), "Evicted")
    assert (again["status"], again["reason"]) == ("True", "Preempted")


def test_same_second_jobs_are_ordered_by_creation_then_uid():
    """Kueue's queue order (cluster_queue.go baseCompareFunc): priority, then queue-order timestamp, then UID.
    Three Jobs created in the same instant on a StrictFIFO queue with room for one: the first created (lowest UID
    in the twin's sequence) is admitted, the others wait behind it in that order."""
    cq = make_cq("cq").flavor("default", cpu="4").obj()
    cq["spec"]["queueingStrategy"] = "StrictFIFO"
    objs = [make_scenario("2h").obj(), make_pool("cpu", "e2-standard-16", 2).obj(), make_flavor("default").obj(), cq,
            make_lq("main").cluster_queue("cq").obj(),
            make_job("first").queue("main").cpu("4").duration("10m").obj(),
            make_job("second").queue("main").cpu("4").duration("10m").obj(),
            make_job("third").queue("main").cpu("4").duration("10m").obj()]
    result = kt_run(objects=objs)
    times = {n: result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=f"job-{n}-")
             for n in ("first", "second", "third")}
    done = {n: result.first_time("Job", lambda o: is_true(o, "Complete"), prefix=n)
            for n in ("first", "second")}
    assert times["first"] == 0.0
    assert times["second"] == done["first"] and times["third"] == done["second"]
    assert 0.0 < times["second"] < times["third"]


# ------------------------------------------------------------------------------------------------ the queue itself
@pytest.mark.parametrize("reason, inadmissible, sticky", [
    (REQUEUE_FAILED_AFTER_NOMINATION, False, False),
    (REQUEUE_PENDING_PREEMPTION, False, True),
    (REQUEUE_PREEMPTION_FAILED, False, False),
    (REQUEUE_NAMESPACE_MISMATCH, True, False),
    (REQUEUE_GENERIC, True, False),  # NoFit
    (REQUEUE_PREEMPTION_NO_CANDIDATES, True, False),
])
def test_best_effort_fifo_requeue_if_not_present(reason: str, inadmissible: bool, sticky: bool) -> None:
    """Kueue's TestBestEffortFIFORequeueIfNotPresent (pkg/cache/queue/cluster_queue_test.go): where a popped head
    goes per requeue reason, and whether it becomes the sticky preemptor, popped before an older workload."""
    q = ClusterQueueQueue("cq", "BestEffortFIFO")
    older = WorkloadInfo(api.parse_workload(make_wl("default", "older").queue("main").created(NOW - 60)
                                            .request("cpu", "1").obj()), "cq")
    wl = WorkloadInfo(api.parse_workload(make_wl("default", "w").queue("main").request("cpu", "1").obj()), "cq")
    q.requeue(wl, reason)
    assert ("default/w" in q.inadmissible) == inadmissible
    assert (q.preemptor == "default/w") == sticky
    q.push(older)
    q.queue_inadmissible()
    assert q.active()[0] == ("default/w" if sticky else "default/older")
    assert q.pop().key == ("default/w" if sticky else "default/older")
    q.delete("default/w")
    assert q.preemptor is None

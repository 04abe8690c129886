"""report.jobtimes: Jobs' and JobSets' lifetimes as `kubectl get jobs` shows them, the one implementation behind
summary.json's `jobs` (the run summary's rows, and the sweep's jct_p50 / makespan metrics, which read it)."""

from __future__ import annotations

from pathlib import Path

from kubetwin.report.headline import cluster_rows
from kubetwin.report.jobtimes import JobTimes
from kubetwin.runner import run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _job(kind: str, name: str, cond: str | None = None, owner: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": "JobSet", "name": owner, "controller": True}]
    status = {"conditions": [{"type": cond, "status": "True"}]} if cond else {}
    return {"kind": kind, "metadata": meta, "status": status}


def test_completed_failed_unfinished_and_jobset_children() -> None:
    times = JobTimes()
    times.add(0, "ADDED", _job("Job", "a"))
    times.add(0, "ADDED", _job("Job", "b"))
    times.add(0, "ADDED", _job("JobSet", "s"))
    times.add(5, "ADDED", _job("Job", "s-w-0", owner="s"))  # counted in its JobSet
    times.add(10, "ADDED", _job("Job", "c"))
    times.add(100, "MODIFIED", _job("Job", "a", "Complete"))
    times.add(200, "MODIFIED", _job("Job", "a", "Complete"))  # completion is the first time the condition is True
    times.add(150, "MODIFIED", _job("Job", "b", "Failed"))
    times.add(400, "MODIFIED", _job("JobSet", "s", "Completed"))
    times.add(900, "MODIFIED", _job("Job", "s-w-0", "Complete", owner="s"))
    s = times.summary()
    assert s == {"total": 4, "completed": 2, "failed": 1, "unfinished": 1,
                 "completion_seconds": {"p50": 400.0, "p99": 400.0, "max": 400}, "makespan_seconds": None}
    times.add(500, "MODIFIED", _job("Job", "c", "Complete"))
    assert times.last_completed() is None  # b failed: the set never all completed
    assert JobTimes().summary() is None


def test_the_run_summary_and_the_sweep_read_the_same_times() -> None:
    result = run([EXAMPLES / "spot-vs-on-demand.yaml"])
    jobs = result.summary["jobs"]
    replay = JobTimes()  # the same rule fed from the history instead of the run's watch: the same times
    for t, _, etype, o in result.history:
        replay.add(t, etype, o)
    count, jct, last = len(replay.created), replay.completion_seconds(), replay.last_completed()
    assert (jobs["total"], jobs["completed"], jobs["makespan_seconds"]) == (count, len(jct), last) == (2, 2, 39900.0)
    assert jobs["completion_seconds"]["max"] == max(jct) == 39900.0 and min(jct) == 36270.0  # on-demand 10h4m30s
    rows = dict(cluster_rows(result.summary))
    assert rows["jobs completed / failed / unfinished"] == "2 / 0 / 0"
    assert rows["job completion p50 / max"] == "11h5m / 11h5m"

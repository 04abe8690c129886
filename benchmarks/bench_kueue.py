"""Kueue admission throughput, and a 30-day Philly trace replay through Kueue on a 64-node GPU pool.

1. Admission: 50 ClusterQueues in 5 cohorts (10 each, 40 GPUs nominal, may borrow 40) on 256 nodes, 20,000
   queued Jobs (1-8 GPUs, 10-60 min) arriving over one simulated day, through `kubetwin run`'s own code path
   (webhook, Workloads, cycles, Job start, pods, scheduler, kubelet). Reported: workloads admitted per wall
   second, against a baseline measured in the same process: the same Jobs without the queue label (no
   Kueue), so the difference is Kueue's cost.
2. Philly: the Pollux/Philly trace (../shared/traces/pollux/philly_pollux.csv, Apache-2.0, Qiao et al. OSDI'21,
   Jeon et al. ATC'19), 30 days from 2017-10-03, every job as a queued Job (num_gpus > 8 as ceil(n/8) pods of 8
   GPUs) on 64 a2-highgpu-8g nodes behind one ClusterQueue: wall time, jobs finished, admission wait.
Usage: python benchmarks/bench_kueue.py [--workloads 20000] [--days 30] [--skip-philly]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gc
import random
import time
from pathlib import Path

from kubetwin.runner import run

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "pollux" / "philly_pollux.csv"
GPU = "nvidia.com/gpu"


def _pool(name: str, nodes: int) -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"machineType": "a2-highgpu-8g", "nodeCount": nodes, "zones": ["us-central1-a"],
                     "accelerators": [{"type": "nvidia-tesla-a100", "count": 8}], "bootDelay": "0s",
                     "driverInstallDelay": "0s"}}


def _kueue(name: str, cohort: str | None, gpus: int, borrow: int | None) -> list[dict]:
    quota: dict = {"name": GPU, "nominalQuota": gpus}
    if borrow is not None:
        quota["borrowingLimit"] = borrow
    spec: dict = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
        {"name": "a100", "resources": [quota]}]}], "preemption": {"reclaimWithinCohort": "Any"}}
    if cohort:
        spec["cohortName"] = cohort
    return [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
             "spec": spec},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "main", "namespace": name}, "spec": {"clusterQueue": name}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}]


def _job(name: str, ns: str, at: float, gpus: int, seconds: float, queued: bool) -> dict:
    pods, per_pod = (gpus + 7) // 8, min(gpus, 8)
    meta: dict = {"name": name, "namespace": ns, "annotations": {"kubetwin.io/create-at": f"{int(at)}s"}}
    if queued:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": "main"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "parallelism": pods, "completions": pods, "template": {
            "metadata": {"annotations": {"kubetwin.io/duration": f"{max(1, int(seconds))}s"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "resources": {
                "limits": {GPU: str(per_pod)}}}]}}}}


def _common(duration: str) -> list[dict]:
    return [{"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench"},
             "spec": {"duration": duration, "report": ["summary"], "sampleInterval": "1h"}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"},
             "spec": {}}]


def _timed(objects: list[dict]) -> tuple[float, dict]:
    gc.collect()
    t0 = time.perf_counter()
    result = run(objects=objects)
    return time.perf_counter() - t0, result.summary


def admission(workloads: int) -> None:
    rng = random.Random(7)
    queues = [f"team-{c}-{i}" for c in range(5) for i in range(10)]
    objs = _common("2d") + [_pool("gpu", 256)]  # 2,048 GPUs
    for q in queues:
        objs += _kueue(q, f"org-{q.split('-')[1]}", 40, 40)  # 2,000 GPUs of nominal quota
    jobs = [(f"job-{n}", queues[rng.randrange(len(queues))], rng.uniform(0, 86400), rng.choice((1, 2, 4, 8)),
             rng.uniform(600, 3600)) for n in range(workloads)]
    wall, summary = _timed(objs + [_job(n, q, at, g, s, True) for n, q, at, g, s in jobs])
    base, _ = _timed(objs + [_job(n, q, at, g, s, False) for n, q, at, g, s in jobs])
    admitted = sum(cq["admitted"] for cq in summary["kueue"].values())
    print(f"admission: 50 ClusterQueues in 5 cohorts, {workloads:,} queued Jobs over one day: {admitted:,} "
          f"admitted; run {wall:.1f}s, same Jobs without Kueue {base:.1f}s -> {admitted / wall:,.0f} workloads/s "
          f"end to end, {admitted / max(wall - base, 1e-9):,.0f} workloads/s of Kueue's own cost")


def philly(days: int) -> None:
    if not TRACE.exists():
        print(f"philly: skipped ({TRACE} not found)")
        return
    start = dt.datetime(2017, 10, 3)
    objs = _common(f"{days}d") + [_pool("gpu", 64)] + _kueue("philly", None, 512, None)
    n = 0
    with TRACE.open() as f:
        for row in csv.DictReader(f):
            at = (dt.datetime.fromisoformat(row["timestamp"]) - start).total_seconds()
            if 0 <= at < days * 86400:
                gpus = min(int(row["num_gpus"]), 512)
                objs.append(_job(f"j{n}", "philly", at, gpus, float(row["duration"]), True))
                n += 1
    wall, summary = _timed(objs)
    k = summary["kueue"]["philly"]
    print(f"philly: {n:,} jobs over {days} days on 64 x a2-highgpu-8g (512 GPUs) behind one ClusterQueue: "
          f"{wall:.1f}s wall; {k['admitted']:,} admitted, {k['finished']:,} finished, admission wait p50 "
          f"{k['admission_wait_s']['p50']:.0f}s p99 {k['admission_wait_s']['p99']:.0f}s, GPU allocation "
          f"{summary['gpu_allocation']['gpu']['mean_pct']:.1f}%")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--workloads", type=int, default=20000)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--skip-philly", action="store_true")
    a = p.parse_args()
    admission(a.workloads)
    if not a.skip_philly:
        philly(a.days)

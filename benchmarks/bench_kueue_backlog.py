"""Kueue admission cost against the backlog: N queued Jobs created at once behind cohorts that borrow and preempt.

The ClusterQueues follow Kueue's scheduler performance suite (kubernetes-sigs/kueue
test/performance/scheduler/configs/baseline/generator.yaml at ff69552e: 5 cohorts x 6 ClusterQueues, nominalQuota
20, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue LowerPriority; workload classes small / medium
/ large: 1 / 5 / 20 cpu, 200 / 500 / 1000 ms, priority 50 / 100 / 200, in the ratio 350 : 100 : 50). Every Job is
created within the first 0.6 s (the suite's large-scale shape: the whole backlog at once) and the run stops at a
fixed simulated time, so about the same number of workloads are admitted whatever the backlog: admissions per
wall second (and per CPU second of this process) then show what a pending workload costs. The Jobs run as pods
on c3-standard-88 nodes with room for all of the quota (a twin assumption: Kueue's suite runs without nodes).

Reported per backlog size: workloads admitted, wall and CPU seconds of the whole run and of Kueue's scheduler
(KueueScheduler's public entry points, timed from outside), admissions per wall second, and the ratio of the
largest backlog's rate to the smallest's (the goal of issue 32: roughly flat from 2,000 to 50,000). Kueue's CPU is
also split: the cycles (``schedule``: per head tried) and ``add_workload`` (taking in each Workload once, as Kueue's
informer and queue manager do for every arrival: it grows with the backlog by construction, since the whole backlog
arrives within the run and the admissions are the same).

`--large-scale` runs a simple stand-in for the suite's large-scale config (2,000 ClusterQueues in 20 cohorts,
30 Jobs each, 60,000 in all, created within 0.6 s) for `--duration` of simulated time and reports its wall time.
`--write DIR` writes the scenario(s) as YAML instead of running them (for `kubetwin run` A/B folder diffs).

Usage: python benchmarks/bench_kueue_backlog.py [--backlog 2000,20000,50000] [--duration 3s] [--large-scale]
       [--profile N] [--write DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import pstats
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.runner import run

# (class, cpu, runtime ms, priority, share of the backlog in 50ths): baseline/generator.yaml's workload classes
CLASSES = (("small", 1, 200, 50, 35), ("medium", 5, 500, 100, 10), ("large", 20, 1000, 200, 5))
CREATE_WITHIN_S = 0.6


def _kueue(name: str, cohort: str) -> list[dict]:
    spec: dict = {"namespaceSelector": {}, "cohortName": cohort, "resourceGroups": [{
        "coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": 20, "borrowingLimit": 100}]}]}],
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
             "spec": spec},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "main", "namespace": name}, "spec": {"clusterQueue": name}}]


def _job(name: str, ns: str, at: str, cpu: int, runtime_ms: int, priority_class: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "namespace": ns, "annotations": {"kubetwin.io/create-at": at},
        "labels": {"kueue.x-k8s.io/queue-name": "main", "kueue.x-k8s.io/priority-class": priority_class}},
        "spec": {"parallelism": 1, "completions": 1, "template": {
            "metadata": {"annotations": {"kubetwin.io/duration": f"{runtime_ms}ms"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "resources": {
                "requests": {"cpu": str(cpu)}}}]}}}}


def scenario(backlog: int, cohorts: int, queues: int, duration: str) -> list[dict]:
    """`backlog` Jobs over cohorts x queues ClusterQueues, in class order per queue as the suite's generator
    interleaves them (a deterministic round-robin, no randomness), one every 10 us (60,000 within CREATE_WITHIN_S):
    the first Jobs are the same whatever the backlog."""
    nodes = (cohorts * queues * 20 + 79) // 80 + 1  # every ClusterQueue's nominal quota, in 88-vCPU nodes
    objs: list[dict] = [
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "kueue-backlog"},
         "spec": {"duration": duration, "report": ["summary"], "sampleInterval": "1h"}},
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "cpu"},
         "spec": {"machineType": "c3-standard-88", "nodeCount": nodes, "zones": ["us-central1-a"],
                  "bootDelay": "0s"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"},
         "spec": {}}]
    objs += [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": c},
              "value": prio} for c, _, _, prio, _ in CLASSES]
    names = [f"cq-{c}-{q}" for c in range(cohorts) for q in range(queues)]
    for i, name in enumerate(names):
        objs += _kueue(name, f"cohort-{i // queues}")
    pattern = [cls for cls in CLASSES for _ in range(cls[4])]  # 50 slots: 35 small, 10 medium, 5 large
    pattern = [pattern[(i * 7) % 50] for i in range(50)]  # interleaved (7 is coprime to 50)
    for n in range(backlog):
        cq = names[n % len(names)]
        cls, cpu, runtime, _, _ = pattern[(n // len(names)) % 50]
        objs.append(_job(f"{cls}-{n}", cq, f"{n // 100}.{n % 100:02d}ms", cpu, runtime, cls))
    return objs


class KueueTimer:
    """Wall and CPU seconds inside KueueScheduler's entry points (outermost calls only), patched on the class."""

    METHODS = ("schedule", "add_workload", "remove_workload", "queue_inadmissible", "apply", "delete", "pending")

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.by_method: dict[str, float] = {}  # CPU seconds per entry point (outermost calls)
        self.calls: dict[str, int] = {}
        self.heads = 0  # workloads a cycle tried (admitted or not): the same before and after a cost fix
        self._depth = 0
        self._saved: dict[str, Callable] = {}

    def __enter__(self) -> KueueTimer:
        for name in self.METHODS:
            original = self._saved[name] = getattr(KueueScheduler, name)
            setattr(KueueScheduler, name, self._wrap(original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._saved.items():
            setattr(KueueScheduler, name, original)

    def _wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            w, c = time.perf_counter(), time.process_time()
            try:
                out = fn(*args, **kwargs)
                if fn.__name__ == "schedule":
                    self.heads += len(out.admitted) + len(out.pending)
                return out
            finally:
                self.wall += time.perf_counter() - w
                spent = time.process_time() - c
                self.cpu += spent
                self.by_method[fn.__name__] = self.by_method.get(fn.__name__, 0.0) + spent
                self.calls[fn.__name__] = self.calls.get(fn.__name__, 0) + 1
                self._depth -= 1
        return timed


def measure(objs: list[dict], profile: bool = False) -> dict:
    gc.collect()
    prof = cProfile.Profile() if profile else None
    with KueueTimer() as kt:
        w, c = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        result = run(objects=objs)
        if prof is not None:
            prof.disable()
        wall, cpu = time.perf_counter() - w, time.process_time() - c
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
    kueue = result.summary["kueue"]
    admitted = sum(cq["admitted"] for cq in kueue.values())
    pending = sum(cq["pending_at_end"]["active"] + cq["pending_at_end"]["inadmissible"] for cq in kueue.values())
    return {"admitted": admitted, "pending": pending, "heads": kt.heads, "wall": wall, "cpu": cpu,
            "kueue_wall": kt.wall,
            "kueue_cpu": kt.cpu, "cycle_cpu": kt.by_method.get("schedule", 0.0),
            "arrival_cpu": kt.by_method.get("add_workload", 0.0), "arrivals": kt.calls.get("add_workload", 0),
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def backlog(sizes: list[int], duration: str, profile: int | None) -> None:
    rates: dict[int, float] = {}
    cycles: dict[int, float] = {}  # admissions per CPU second of the cycles alone
    for n in sizes:
        m = measure(scenario(n, 5, 6, duration), profile=profile == n)
        rates[n] = m["admitted"] / max(m["kueue_cpu"], 1e-9)
        print(f"backlog {n:>6,}: {m['admitted']:,} admitted in {duration} simulated ({m['pending']:,} pending at the "
              f"end); run {m['wall']:.1f}s wall {m['cpu']:.1f}s CPU -> {m['admitted'] / m['wall']:,.0f} admissions "
              f"per wall s; Kueue's scheduler {m['kueue_wall']:.1f}s wall {m['kueue_cpu']:.1f}s CPU -> "
              f"{rates[n]:,.0f} admissions per Kueue CPU s, {m['heads']:,} heads tried, "
              f"{m['kueue_cpu'] / max(m['heads'], 1) * 1e6:,.0f} us of Kueue CPU per head; "
              f"max RSS {m['maxrss_mb']:,.0f} MB", flush=True)
        cycles[n] = m["admitted"] / max(m["cycle_cpu"], 1e-9)
        print(f"  of which the cycles (schedule) {m['cycle_cpu']:.2f}s CPU -> {cycles[n]:,.0f} admissions per cycle "
              f"CPU s, {m['cycle_cpu'] / max(m['heads'], 1) * 1e6:,.0f} us per head; "
              f"add_workload {m['arrival_cpu']:.2f}s CPU over {m['arrivals']:,} calls "
              f"({m['arrival_cpu'] / max(m['arrivals'], 1) * 1e6:,.0f} us each: "
              f"taking in the backlog, once per Workload)", flush=True)
    if len(sizes) > 1:
        lo, hi = min(sizes), max(sizes)
        print(f"ratio {hi:,}/{lo:,} of admissions per Kueue CPU s: {rates[hi] / rates[lo]:.2f}; per cycle CPU s: "
              f"{cycles[hi] / cycles[lo]:.2f}")


def large_scale(duration: str, profile: bool) -> None:
    objs = scenario(60_000, 20, 100, duration)
    m = measure(objs, profile=profile)
    print(f"large scale: 2,000 ClusterQueues in 20 cohorts, 60,000 Jobs within {CREATE_WITHIN_S}s, {duration} "
          f"simulated: {m['admitted']:,} admitted; {m['wall']:.1f}s wall {m['cpu']:.1f}s CPU (Kueue's scheduler "
          f"{m['kueue_wall']:.1f}s wall), max RSS {m['maxrss_mb']:,.0f} MB", flush=True)


def write(folder: Path, sizes: list[int], duration: str, large: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    cases = [(f"backlog-{n}", scenario(n, 5, 6, duration)) for n in sizes]
    if large:
        cases.append(("large-scale", scenario(60_000, 20, 100, duration)))
    for name, objs in cases:
        (folder / f"{name}.yaml").write_text(yaml.safe_dump_all(objs, sort_keys=False))
        print(folder / f"{name}.yaml")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--backlog", default="2000,20000,50000", help="comma-separated backlog sizes ('' for none)")
    p.add_argument("--duration", default="3s", help="simulated time of each run")
    p.add_argument("--large-scale", action="store_true")
    p.add_argument("--profile", type=int, default=None, help="cProfile the run of this backlog size (0: large scale)")
    p.add_argument("--write", type=Path, default=None, help="write the scenarios as YAML here instead of running")
    a = p.parse_args()
    sizes = [int(s) for s in a.backlog.split(",") if s]
    if a.write is not None:
        write(a.write, sizes, a.duration, a.large_scale)
    else:
        backlog(sizes, a.duration, a.profile)
        if a.large_scale:
            large_scale(a.duration, a.profile == 0)

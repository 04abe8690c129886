"""How well `kubetwin simulate`'s start-time band is calibrated (issue 36 item 3's acceptance), next to a naive
estimate, on stochastic Kueue scenarios.

Each trial is one world (WORLDS): a StrictFIFO ClusterQueue, jobs of a few kinds arriving at random in the first 30
minutes, each running a time drawn from its kind's distribution (seeded by the trial). At T = 30 min the twin's own
state is dumped (`kubetwin get <kinds> -A -o yaml --at T`, a dump `kubetwin import` reads) and `simulate` is asked
about a new job from that dump, told only what a user would know: each kind's distribution (`--runtime
'job/train-*=lognormal:...'`), not the run times the world drew (the dump carries them as kubetwin.io/duration; the
--runtime rules override them). The realized start is the same world run again with the new job submitted at T.

Reported over the trials: how often the P10-P90 band holds the realized start (goal >= 80 %), how often the P50 is
within 10 % of the realized wait or within 1 minute, and the same shares for two naive estimates from the same
dump: queue position x mean run time (as the issue writes it), and that divided by the jobs of mean size the quota
runs at once. Brown et al. (arXiv 2204.13543) report "within 1 minute" for 65-76 % of jobs for the best published
predictors on real HPC machines, Slurm's backfill estimate 3.8-18x worse.

    python benchmarks/bench_simulate_calibration.py                       # mixed world, 50 trials, 20 runs each
    python benchmarks/bench_simulate_calibration.py --world backlog
    python benchmarks/bench_simulate_calibration.py --trials 4 --runs 10 --workers 1
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class World:
    """A stochastic scenario: kinds of job (name prefix, share of the jobs, CPUs, run-time distribution: what the
    user gives simulate, one --runtime rule per kind), the ClusterQueue's CPUs, how many jobs arrive."""

    classes: tuple[tuple[str, float, int, str], ...]
    quota: int
    jobs: int
    incoming_cpus: int


WORLDS = {
    # a platform's mix: a few 4-CPU training jobs of ~45 min among 1-CPU evaluations of ~8 min; short queues
    "mixed": World((("train", 0.25, 4, "lognormal:median=45m,sigma=0.5"),
                    ("eval", 0.75, 1, "lognormal:median=8m,sigma=0.6")), quota=8, jobs=14, incoming_cpus=2),
    # a long backlog of alike jobs: the wait is a sum of many run times, so it varies less
    "backlog": World((("job", 1.0, 1, "lognormal:median=20m,sigma=0.5"),), quota=4, jobs=40, incoming_cpus=1),
}
ARRIVALS = 1800.0  # the jobs arrive uniformly at random in [0, ARRIVALS)
T = 1800.0  # the snapshot, and when the new job is submitted
HORIZON = "12h"  # how far simulate looks (the realized start is within it)
START = "2026-01-01T00:00:00Z"
KINDS = "nodes,namespaces,resourceflavors,clusterqueues,localqueues,workloads,jobs,pods"


def rules(w: World) -> list[str]:
    """simulate's --runtime rules: each kind's distribution, by its jobs' name prefix."""
    return [f"job/{prefix}-*={dist}" for prefix, _, _, dist in w.classes]


def _job(name: str, seconds: float, create_at: float, cpus: int = 1) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        "annotations": {"kubetwin.io/create-at": f"{create_at:.3f}s"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {
            "metadata": {"annotations": {"kubetwin.io/duration": f"{seconds:.3f}s"}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": str(cpus)}}}]}}}}


def world(w: World, trial: int) -> list[dict[str, Any]]:
    """The trial's world: a node, a ClusterQueue of w.quota CPUs (StrictFIFO), w.jobs jobs of w.classes arriving
    at random, their run times drawn from their kind's distribution (seeded by the trial)."""
    from kubetwin.importer.runtime import parse_dist, rng

    r = random.Random(f"calibration/{trial}")
    arrivals = sorted(r.uniform(0, ARRIVALS) for _ in range(w.jobs))
    objs: list[dict[str, Any]] = [
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": f"trial-{trial}"},
         "spec": {"duration": HORIZON, "seed": trial, "startTime": START, "report": ["summary"]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
         "status": {"capacity": {"cpu": str(2 * w.quota), "memory": "64Gi", "pods": "110"},
                    "allocatable": {"cpu": str(2 * w.quota), "memory": "64Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"},
         "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "queueingStrategy": "StrictFIFO", "resourceGroups": [
             {"coveredResources": ["cpu"], "flavors": [
                 {"name": "default", "resources": [{"name": "cpu", "nominalQuota": w.quota}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}]
    for i, at in enumerate(arrivals):
        u = r.random()
        edges = itertools.accumulate(share for _, share, _, _ in w.classes)
        prefix, _, cpus, dist = next((c for c, edge in zip(w.classes, edges, strict=True) if u < edge),
                                     w.classes[-1])
        seconds = parse_dist(dist).draw(rng(trial, f"job-{i}"))
        objs.append(_job(f"{prefix}-{i:03d}", seconds, at, cpus))
    return objs


def incoming(w: World) -> dict[str, Any]:
    job = _job("incoming", 600.0, 0.0, w.incoming_cpus)
    del job["metadata"]["annotations"]
    return job


@dataclass
class Trial:
    trial: int
    realized: float | None  # the new job's realized start, seconds after T
    p10: float | None
    p50: float | None
    p90: float | None
    position: int  # 1 + the Workloads pending at T
    seconds: float
    starts: list[float]  # simulate's runs' starts


def trial(name: str, n: int, runs: int, folder: Path) -> Trial:
    from typer.testing import CliRunner

    from kubetwin.cli.main import app
    from kubetwin.runner import run
    from kubetwin.simulate import simulate

    t0 = time.perf_counter()
    base = folder / f"trial-{n}"
    base.mkdir(parents=True)
    w = WORLDS[name]
    objs = world(w, n)
    (base / "world.yaml").write_text(yaml.safe_dump_all(objs, sort_keys=False))
    run([base / "world.yaml"], out=base / "run", duration=f"{T + 1:.0f}s")
    res = CliRunner().invoke(app, ["get", KINDS, "-A", "-o", "yaml", "--run", str(base / "run"), "--at",
                                   f"{T:.0f}s"])
    if res.exit_code != 0:
        raise RuntimeError(res.output)
    (base / "state.yaml").write_text(res.output)
    dumped = yaml.safe_load(res.output)["items"]
    pending = sum(1 for o in dumped if o["kind"] == "Workload" and not (o.get("status") or {}).get("admission"))
    new = incoming(w)
    (base / "incoming.yaml").write_text(yaml.safe_dump(new, sort_keys=False))
    truth_job = {**new, "metadata": {**new["metadata"], "annotations": {"kubetwin.io/create-at": f"{T:.0f}s"}}}
    truth = run(objects=[*objs, truth_job], duration=HORIZON)
    started = truth.first_time("Pod", lambda p: (p.get("status") or {}).get("phase") == "Running",
                               prefix="incoming-")
    snap = _rfc3339(T)
    answer = simulate([base / "incoming.yaml"], [base / "state.yaml"], duration=HORIZON, runs=runs, seed=1000 * n,
                      runtime=rules(w), snapshot_time=snap)
    (row,) = answer.start_percentiles()
    return Trial(n, None if started is None else started - T, row.get("p10"), row.get("p50"), row.get("p90"),
                 pending + 1, time.perf_counter() - t0,
                 [o.started for (o,) in answer.runs if o.started is not None])


def _rfc3339(seconds: float) -> str:
    from datetime import datetime, timedelta

    t = datetime.fromisoformat(START.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def close(estimate: float | None, realized: float | None) -> bool:
    """Within 10 % of the realized wait, or within 1 minute (the acceptance's test)."""
    if estimate is None or realized is None:
        return False
    return abs(estimate - realized) <= max(60.0, 0.1 * realized)


def best_point(starts: list[float]) -> float:
    """The largest share of `starts` one estimate lands close to (close()): a start s is close to e when e is within
    max(60 s, 10 % of s) of it, so the best e is at one of the ends of those windows."""
    edges = [e for s in starts for e in (s - max(60.0, 0.1 * s), s + max(60.0, 0.1 * s))]
    return max(sum(close(e, s) for s in starts) for e in edges) / len(starts)


def naive_mean(w: World) -> tuple[float, float]:
    """The mean run time over the job mix, and the jobs of mean size the quota runs at once."""
    from kubetwin.importer.runtime import parse_dist

    mean = sum(share * parse_dist(dist).mean() for _, share, _, dist in w.classes)
    slots = w.quota / sum(share * cpus for _, share, cpus, _ in w.classes)
    return mean, slots


def summarize(w: World, trials: list[Trial]) -> dict[str, Any]:
    mean, slots = naive_mean(w)
    known = [t for t in trials if t.realized is not None]
    covered = [t for t in known if t.p10 is not None and t.p90 is not None and t.p10 <= t.realized <= t.p90]
    naive: list[float | None] = [t.position * mean for t in known]
    naive_slots: list[float | None] = [t.position * mean / slots for t in known]

    def share(est: list[float | None]) -> float:
        return sum(close(e, t.realized) for e, t in zip(est, known, strict=True)) / max(1, len(known))

    def within_minute(est: list[float | None]) -> float:
        return sum(e is not None and t.realized is not None and abs(e - t.realized) <= 60
                   for e, t in zip(est, known, strict=True)) / max(1, len(known))

    def mae(est: list[float | None]) -> float:
        errors = [abs(e - t.realized) for e, t in zip(est, known, strict=True)
                  if e is not None and t.realized is not None]
        return statistics.median(errors) if errors else float("nan")

    p50 = [t.p50 for t in known]
    early = [t for t in known if t.p10 is not None and t.realized is not None and t.realized < t.p10]
    return {
        "trials": len(trials), "started": len(known),
        "band_coverage": len(covered) / max(1, len(known)),
        # a calibrated 80 % band misses as often early as late, and its coverage over n trials is binomial: 80 %
        # give or take this standard deviation (5.7 % for 50 trials), so a miss on one side is a bias, not chance
        "band_misses_early": len(early) / max(1, len(known)),
        "band_misses_late": (len(known) - len(covered) - len(early)) / max(1, len(known)),
        "band_coverage_sd_if_calibrated": (0.8 * 0.2 / max(1, len(known))) ** 0.5,
        "simulate_p50_close": share(p50), "simulate_p50_within_1min": within_minute(p50),
        "simulate_median_abs_error_s": mae(p50),
        "naive_close": share(naive), "naive_within_1min": within_minute(naive),
        "naive_median_abs_error_s": mae(naive),
        "naive_per_slot_close": share(naive_slots), "naive_per_slot_within_1min": within_minute(naive_slots),
        "naive_per_slot_median_abs_error_s": mae(naive_slots),
        # how often one more draw of simulate's own runs lands within 10 % or 1 minute of their P50: the share
        # any predictor could reach if simulate's spread is the world's (the wait's own variance bounds it)
        "attainable_p50_close": statistics.fmean(
            sum(close(t.p50, s) for s in t.starts) / len(t.starts) for t in known if t.starts) if known else 0.0,
        # the best any one number could do: per trial, the share of simulate's runs within 10 % or 1 min of the
        # point that holds the most of them (chosen on the same runs, so an upper estimate; tight with --runs 200)
        "best_point_close": statistics.fmean(best_point(t.starts) for t in known if t.starts) if known else 0.0,
        "median_realized_wait_s": statistics.median(t.realized for t in known if t.realized is not None)
        if known else None,
    }


def calibrate(name: str, trials: int, runs: int, workers: int = 1, first: int = 0
              ) -> tuple[list[Trial], dict[str, Any]]:
    """`trials` seeded worlds of WORLDS[name] (seeds first, first+1, ...), each asked of simulate with `runs` runs."""
    with tempfile.TemporaryDirectory(prefix="kubetwin-calibration-") as tmp:
        folder = Path(tmp)
        seeds = range(first, first + trials)
        if workers > 1:
            with ProcessPoolExecutor(workers) as pool:
                done = list(pool.map(trial, [name] * trials, seeds, [runs] * trials, [folder] * trials))
        else:
            done = [trial(name, n, runs, folder) for n in seeds]
    return done, summarize(WORLDS[name], done)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", choices=sorted(WORLDS), default="mixed")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--runs", type=int, default=20, help="simulate --runs per trial")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--first", type=int, default=0, help="the first trial's seed")
    ap.add_argument("--json", action="store_true", help="every trial and the summary as JSON")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    done, summary = calibrate(args.world, args.trials, args.runs, args.workers, args.first)
    summary["wall_s"] = round(time.perf_counter() - t0, 1)
    if args.json:
        print(json.dumps({"trials": [asdict(t) for t in done], "summary": summary}, indent=1))
        return 0
    for t in done:
        print(f"trial {t.trial:3d}  position {t.position:3d}  realized {_m(t.realized)}  "
              f"P10 {_m(t.p10)}  P50 {_m(t.p50)}  P90 {_m(t.p90)}  ({t.seconds:.1f}s)")
    print(json.dumps(summary, indent=1))
    return 0


def _m(seconds: float | None) -> str:
    return "    -" if seconds is None else f"{seconds / 60:5.1f}m"


if __name__ == "__main__":
    sys.exit(main())

"""The FGD paper's whole openb study (6 policies x 10 seeds, inflate 1.3) through `kubetwin experiment fgd`.

Prints the study's wall time against the 10-minute goal, pod placements per second, and, as the baseline measured
in the same run, one single-policy single-seed run of the same command (the authors' Go simulator needs "around
10 minutes for 1 experiment on 2 vCPU", hkust-adsl/kubernetes-scheduler-simulator experiments/README.md).
Usage: python benchmarks/bench_fgd.py [--traces ../shared/traces/openb] [--out runs/fgd-study.csv]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

from kubetwin.experiments import fgd, openb


def _run(traces: Path, out: Path, policies: list[str], seeds: list[int]) -> float:
    cmd = [sys.executable, "-m", "kubetwin.cli.main", "experiment", "fgd",
           "--nodes", str(traces / "openb_node_list_gpu_node.csv"),
           "--pods", str(traces / "openb_pod_list_default.csv"), "-o", str(out)]
    for p in policies:
        cmd += ["--policy", p]
    for s in seeds:
        cmd += ["--seed", str(s)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb")
    ap.add_argument("--out", type=Path, default=Path("runs/fgd-study.csv"))
    a = ap.parse_args()
    single = _run(a.traces, a.out.with_name("fgd-single.csv"), ["FGD"], [42])
    study = _run(a.traces, a.out, ["all"], list(range(42, 52)))
    with a.out.open() as f:
        runs = {(r["policy"], int(r["seed"])) for r in csv.DictReader(f)}
    nodes = openb.load_nodes(a.traces / "openb_node_list_gpu_node.csv")
    pods = openb.load_pods(a.traces / "openb_pod_list_default.csv")
    placements = sum(len(fgd.arrivals(nodes, pods, seed, 1.3)) for _, seed in runs)  # pods each run schedules
    print(f"one FGD run: {single:.1f}s (the authors' simulator: about 600 s)")
    print(f"whole study, {len(runs)} runs: {study:.1f}s wall ({study / 60:.1f} min; goal under 10 min) -> "
          f"{placements / study:,.0f} pod placements/s; {study / single:.1f}x one FGD run")

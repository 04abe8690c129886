"""The FGD paper's whole evaluation: its 17 openb pod lists x 6 policies x 10 seeds = 1,020 runs, one command.

`kubetwin experiment fgd --pods-dir ... --workload paper --policy all --seed 42..51` on a process pool (one worker
per CPU), in a child process so the operating system's accounting gives its wall time, its CPU time (the pool's
workers included) and its peak RSS (benchmarks/bench_report.measured). Prints them against the goal (the 1,020
runs under 5 minutes on a quiet 2-core machine: issue 32; wall is about CPU / 2 there) and runs per minute; the
authors report about 10 hours for the 1,020 runs on a 256-vCPU machine (hkust-adsl/kubernetes-scheduler-simulator
experiments/README.md). With --base TREE the same command runs with that tree's sources too (e.g.
`git archive 3f002fa | tar -x -C /tmp/base-tree`), alternating A B A B, and the two CSVs must be the same bytes.
CPU seconds are the figure to compare on a shared machine: wall time counts what other processes take.
--quick runs one pod list per family, two seeds (60 runs).
Usage: python benchmarks/bench_fgd_full.py [--traces ../shared/traces/openb] [--out runs/fgd-paper.csv] [--quick]
       [--jobs N] [--base /tmp/base-tree] [--repeat 1]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "benchmarks"))
sys.path.insert(0, str(HERE / "src"))

from bench_report import measured  # noqa: E402

from kubetwin.experiments import fgd  # noqa: E402

QUICK = ("default", "gpushare40", "multigpu50", "gpuspec33", "cpu250")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=Path, default=HERE.parent / "shared" / "traces" / "openb")
    ap.add_argument("--out", type=Path, default=Path("runs/fgd-paper.csv"))
    ap.add_argument("--quick", action="store_true", help="one pod list per family, seeds 42 and 43")
    ap.add_argument("--jobs", type=int, default=0, help="parallel runs (default: one per CPU)")
    ap.add_argument("--base", type=Path, help="a baseline tree (its src/ goes first on the path)")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    workloads = QUICK if a.quick else fgd.PAPER_WORKLOADS
    seeds = (42, 43) if a.quick else fgd.DEFAULT_SEEDS
    args = ["experiment", "fgd", "--nodes", str(a.traces.resolve() / "openb_node_list_gpu_node.csv"),
            "--pods-dir", str(a.traces.resolve()), "--policy", "all", "--jobs", str(a.jobs)]
    for w in workloads:
        args += ["--workload", w]
    for s in seeds:
        args += ["--seed", str(s)]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    outs = {"this tree": a.out.resolve(), "baseline": a.out.resolve().with_suffix(".base.csv")}
    trees = [("this tree", HERE / "src")] + ([("baseline", a.base.resolve() / "src")] if a.base else [])
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in trees}
    for _ in range(a.repeat):
        for name, src in trees:
            got[name].append(measured(src, [*args, "-o", str(outs[name])]))
    with outs["this tree"].open() as f:
        runs = len({(r["workload"], r["policy"], r["seed"]) for r in csv.DictReader(f)})
    wall = statistics.median([w for w, _, _ in got["this tree"]])
    cpu = statistics.median([c for _, _, c in got["this tree"]])
    peak = max(p for _, p, _ in got["this tree"])
    print(f"{runs} runs ({len(workloads)} pod lists x 6 policies x {len(seeds)} seeds) on "
          f"{a.jobs or os.cpu_count()} workers: {wall:.1f} s wall ({wall / 60:.1f} min, "
          f"{runs / wall * 60:.0f} runs/min), "
          f"{cpu:.1f} s CPU ({cpu / runs:.2f} s a run), peak {peak:.0f} MB; goal for 1,020 runs: under 300 s wall on "
          f"a quiet 2-core machine, about 560 s CPU")
    if a.base:
        b = got["baseline"]
        bwall, bcpu = statistics.median([w for w, _, _ in b]), statistics.median([c for _, _, c in b])
        same = outs["this tree"].read_bytes() == outs["baseline"].read_bytes()
        print(f"baseline {a.base}: {bwall:.1f} s wall, {bcpu:.1f} s CPU, peak {max(p for _, p, _ in b):.0f} MB -> "
              f"CPU x{cpu / bcpu:.2f}, wall x{wall / bwall:.2f}; CSVs {'byte-identical' if same else 'DIFFER'}")
        if not same:
            raise SystemExit(1)


if __name__ == "__main__":
    main()

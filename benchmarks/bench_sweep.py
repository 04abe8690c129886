"""kubetwin sweep's throughput: the same cases in one process, on a process pool and on Ray, with the overhead per
case against the one-process baseline measured in the same run.

The cases: examples/sweeps/a3-capacity-mix.yaml's grid (on-demand x Spot x flex-start A3 pools under a queue of
eight 5-hour training Jobs, 60 configurations) with enough seeds and a random sample of the grid to make --cases
runs. The three backends must write byte-identical results.csv (checked). Overhead per case = (wall x workers -
one-process wall) / cases: the CPU-seconds each case costs beyond its own run (spawn, pickling, Ray's scheduling).

    python benchmarks/bench_sweep.py                 # 200 cases, 2 workers (the issue's benchmark)
    python benchmarks/bench_sweep.py --cases 40      # a quick version
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kubetwin.sweep import backends, cases, execute

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "examples" / "sweeps" / "a3-capacity-mix.yaml"


def make_sweep(folder: Path, n: int) -> Path:
    """The example's Sweep with seeds and a random-search budget that give `n` case-seed runs (or just above)."""
    doc = yaml.safe_load(SWEEP.read_text())
    grid = math.prod(len(a["values"]) for a in doc["spec"]["axes"])
    seeds = max(1, math.ceil(n / grid))
    doc["spec"]["scenario"] = [str(SWEEP.parent / p) for p in doc["spec"]["scenario"]]
    doc["spec"]["seeds"] = list(range(seeds))
    doc["spec"]["search"] = {"strategy": "random", "budget": math.ceil(n / seeds), "seed": 0}
    f = folder / "bench-sweep.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


def timed(label: str, fn) -> tuple[str, float, execute.Outcome]:
    start = time.perf_counter()
    out = fn()
    return label, time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200, help="case-seed runs (default 200)")
    ap.add_argument("--jobs", type=int, default=2, help="workers for the pool and Ray (default 2)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray backend")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        plan = cases.plan(make_sweep(tmp, args.cases))
        n = execute.task_count(plan)
        print(f"{n} runs ({n // len(plan.seeds())} cases x {len(plan.seeds())} seeds) of "
              f"{plan.base[0].file}, {args.jobs} workers", flush=True)
        results = [timed("one process", lambda: execute.execute(plan, tmp / "one", jobs=1))]
        results.append(timed(f"process pool ({args.jobs})", lambda: execute.execute(plan, tmp / "pool",
                                                                                  jobs=args.jobs)))
        ray_start = None
        if not args.no_ray and backends.ray_available():
            import ray

            t0 = time.perf_counter()
            ray.init(address="local", num_cpus=args.jobs, include_dashboard=False, _node_ip_address="127.0.0.1",
                     log_to_driver=False, configure_logging=False)
            ray_start = time.perf_counter() - t0
            try:
                results.append(timed(f"ray ({args.jobs})", lambda: execute.execute(plan, tmp / "ray", backend="ray",
                                                                                jobs=args.jobs)))
            finally:
                ray.shutdown()
        base = results[0][1]
        print(f"{'backend':<20} {'wall s':>8} {'cases/min':>10} {'overhead/case ms':>17}  failed  same csv")
        reference = (tmp / "one" / "results.csv").read_bytes()
        for label, wall, out in results:
            workers = 1 if label == "one process" else args.jobs
            folder = {"one process": "one"}.get(label, label.split(" ")[0] if label.startswith("ray") else "pool")
            same = (tmp / folder / "results.csv").read_bytes() == reference
            overhead = (wall * workers - base) / n * 1000
            print(f"{label:<20} {wall:>8.2f} {n / wall * 60:>10.0f} {overhead:>17.1f}  {len(out.failed):>6}  {same}")
            if not same:
                sys.exit(f"{label}: results.csv differs from the one-process run")
        if ray_start is not None:
            print(f"(Ray's local start, not counted above: {ray_start:.1f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

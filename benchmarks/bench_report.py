"""`kubetwin run` of the 10,000-pod scenario through the CLI, report.html included, and `kubetwin report` alone.

Issue 32's regression: report.html, written at the end of every run, loaded the whole history.jsonl. Measured with
this benchmark on 2 cores (2026-12-07): 3f002fa 5.3-5.6 s and 787 MB peak; 8c4b814, before the report existed,
3.2-3.3 s and 283 MB; the streaming report 3.9 s and 275 MB; then history.jsonl through orjson and the
collector kept off after the run: 0.95x 8c4b814's CPU seconds (3.28 vs 3.47 s, 5 alternating pairs), 276 MB.
(The issue's own figures, 15-17 s and 1,112 MB, came
from another machine and another way of writing the scenario.)
This writes the scenario of benchmarks/bench_scheduling.py (10,000 pods onto 5,000 nodes, pools of 1,000 nodes) as
YAML, then runs, each in a child process so the operating system's accounting gives its wall time and peak RSS:
  1. `kubetwin run SCENARIO --out DIR` (report included) with this tree's sources and, when --base names one, with
     a baseline tree's (e.g. `git archive 3f002fa | tar -x -C /tmp/base-tree`), alternating A B A B;
  2. `kubetwin report DIR` alone on the run folder, with each tree.
Prints median wall seconds, peak RSS and the ratio to the baseline for each, and the run's CPU seconds (user + sys,
the figure to compare on a shared machine) with the median ratio of the alternating pairs. --base-rev REV builds
the baseline tree from this checkout's git history (`make bench` pins 8c4b814, the last build before report.html;
its CLI has no `kubetwin report`, so that line is printed without a baseline).
This tree runs the scenario with kube-scheduler's and kube-controller-manager's API clients unpaced (qps -1), so
it makes the decisions the baseline makes (8c4b814 predates the clients' token buckets); --paced runs it with
their defaults instead (the ReplicaSet controller then creates the pods at 20 a second: another simulation).
Usage: python benchmarks/bench_report.py [--pods 10000] [--nodes 5000] [--repeat 3] [--paced]
                                         [--base /tmp/base-tree | --base-rev REV]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "benchmarks"))

from bench_scheduling import _deployment, _pools  # noqa: E402


def scenario(nodes: int, pods: int, unpaced: bool = False) -> list[dict]:
    """bench_scheduling's scenario with every report (report.html included), as `kubetwin run` gets it by default.
    `unpaced`: kube-scheduler's and kube-controller-manager's API clients without their token buckets, so a tree
    that paces them makes the decisions a tree from before the pacing (8c4b814) makes; with the defaults the
    ReplicaSet controller creates the 10,000 pods at 20 a second, a longer and different simulation."""
    spec: dict = {"duration": "10m", "sampleInterval": "10m"}
    if unpaced:
        spec["kubeScheduler"] = spec["kubeControllerManager"] = {"clientConnection": {"qps": -1}}
    head = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench-report"},
            "spec": spec}
    return [head, *_pools("gpu", "a3-highgpu-8g", nodes // 2, "nvidia-h100-80gb", 8),
            *_pools("cpu", "n2-standard-32", nodes - nodes // 2),
            _deployment("gpu-work", pods // 2, {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "4"}}),
            _deployment("cpu-work", pods - pods // 2, {"requests": {"cpu": "2", "memory": "4Gi"}})]


def write_scenario(path: Path, nodes: int, pods: int, unpaced: bool = False) -> Path:
    path.write_text(yaml.safe_dump_all(scenario(nodes, pods, unpaced), sort_keys=False))
    return path


_COMPILED: set[Path] = set()


def compiled(src: Path) -> None:
    """Byte-compile a tree's sources once before it is timed, as `pip install` does for an installed package: with
    PYTHONDONTWRITEBYTECODE set (as on some CI machines) or a tree just unpacked, every run would otherwise compile
    the sources again (about 0.2 CPU s of a 3 s run, measured 2026-12-07), a cost no installed kubetwin pays."""
    if src not in _COMPILED:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True,
                       stdout=subprocess.DEVNULL)
        _COMPILED.add(src)


def measured(src: Path, args: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in MB, CPU seconds) of `kubetwin ARGS` in a child process with `src` first on the path.

    Each call runs in a fresh grandchild (through a `python -c` wrapper) so RUSAGE_CHILDREN's high-water mark is
    this command's alone (its largest process); the CPU seconds are user + sys of the command and of every process
    it waited for (a process pool's workers). The tree is byte-compiled first (`compiled`)."""
    compiled(src)
    code = ("import resource,subprocess,sys,time;t=time.perf_counter();"
            "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);w=time.perf_counter()-t;"
            "u=resource.getrusage(resource.RUSAGE_CHILDREN);print(w,u.ru_maxrss,r.returncode,u.ru_utime+u.ru_stime)")
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-c", code, sys.executable, "-c", "from kubetwin.cli.main import main; main()", *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout.split()
    if out[2] != "0":
        raise SystemExit(f"kubetwin {' '.join(args)} failed with {src}")
    return float(out[0]), int(out[1]) / 1024, float(out[3])


def code_of(src: Path) -> str:
    """What a tree's runs execute: its compiled modules (kubetwin.native, when built from its sources) or the pure
    Python, and why; trees from before kubetwin.native are pure Python."""
    code = "import kubetwin.native as n; print(n.status())"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(src)},
                          capture_output=True, text=True)
    return done.stdout.strip()[:60] if done.returncode == 0 else "pure Python (no kubetwin.native)"


def timed(src: Path, args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `kubetwin ARGS`, as measured() gives them."""
    wall, peak, _ = measured(src, args)
    return wall, peak


def base_tree(rev: str, into: Path) -> Path:
    """A baseline tree: `git archive REV` of this checkout unpacked into `into` (a pinned build to compare with)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(HERE), "archive", rev], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"--base-rev {rev}: git archive failed ({archive.stderr.decode().strip()}); "
                         "run from a git clone, or pass --base with an unpacked tree")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def has_command(src: Path, command: str) -> bool:
    """Whether the tree's CLI knows `kubetwin COMMAND` (an older baseline may predate it)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([sys.executable, "-m", "kubetwin.cli.main", command, "--help"], env=env,
                          capture_output=True, check=False).returncode == 0


def paces_clients(src: Path) -> bool:
    """Whether the tree paces kube-scheduler's and kube-controller-manager's API clients (it knows
    Scenario.spec.kubeScheduler): such a baseline gets the unpaced scenario too, an older one the scenario as
    written (it has no pacing to turn off)."""
    twin_py = src / "kubetwin" / "api" / "twin.py"
    return twin_py.exists() and "kubeScheduler" in twin_py.read_text()


def ratio_line(label: str, a: list[tuple[float, float]], b: list[tuple[float, float]] | None) -> str:
    wall, peak = statistics.median(w for w, _ in a), max(p for _, p in a)
    text = f"{label}: {wall:.2f} s, peak {peak:,.0f} MB"
    if b:
        bw, bp = statistics.median(w for w, _ in b), max(p for _, p in b)
        ratios = sorted(x[0] / y[0] for x, y in zip(a, b, strict=True))
        text += (f"   baseline {bw:.2f} s, peak {bp:,.0f} MB -> time x{statistics.median(ratios):.2f} "
                 f"(pairs {', '.join(f'{r:.2f}' for r in ratios)}), memory x{peak / bp:.2f}")
    return text


def cpu_line(label: str, a: list[float], b: list[float] | None) -> str:
    """Median CPU seconds (user + sys) and, with a baseline, the median of the alternating pairs' ratios: the figure
    to compare on a shared machine, where wall time moves with the other processes."""
    text = f"{label}: {statistics.median(a):.2f} CPU s"
    if b:
        ratios = sorted(x / y for x, y in zip(a, b, strict=True))
        text += (f"   baseline {statistics.median(b):.2f} CPU s -> x{statistics.median(ratios):.2f} "
                 f"(pairs {', '.join(f'{r:.2f}' for r in ratios)})")
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", type=Path, help="a baseline tree (its src/ goes first on the path)")
    ap.add_argument("--base-rev", help="a git revision of this checkout to build the baseline tree from")
    ap.add_argument("--paced", action="store_true",
                    help="run this tree with the API clients' default token buckets (a different simulation)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.base_rev:
            a.base = base_tree(a.base_rev, Path(tmp) / "base-tree")
        # this tree runs the scenario with its API clients unpaced (the baseline's decisions) unless --paced;
        # the baseline, which may not know those fields, runs it as written
        scen = {"this tree": write_scenario(Path(tmp) / "scenario.yaml", a.nodes, a.pods, unpaced=not a.paced),
                "baseline": write_scenario(Path(tmp) / "scenario-base.yaml", a.nodes, a.pods,
                                           unpaced=bool(a.base) and not a.paced and paces_clients(a.base / "src"))}
        trees = [("this tree", HERE / "src")] + ([("baseline", a.base / "src")] if a.base else [])
        runs: dict[str, list[tuple[float, float]]] = {n: [] for n, _ in trees}
        cpu: dict[str, list[float]] = {n: [] for n, _ in trees}
        reports: dict[str, list[tuple[float, float]]] = {n: [] for n, _ in trees}
        for i in range(a.repeat):
            for name, src in trees:
                out = Path(tmp) / f"run-{name.replace(' ', '-')}-{i}"
                wall, peak, seconds = measured(src, ["run", str(scen[name]), "--out", str(out)])
                runs[name].append((wall, peak))
                cpu[name].append(seconds)
        folder = Path(tmp) / "run-this-tree-0"
        size = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
        page = (folder / "report.html").stat().st_size / 2**20
        report_trees = [(n, src) for n, src in trees if has_command(src, "report")]
        for _ in range(a.repeat):
            for name, src in report_trees:
                rebuilt = Path(tmp) / "r.html"
                rebuilt.unlink(missing_ok=True)  # `report --out` refuses an existing file; older trees lack --overwrite
                reports[name].append(timed(src, ["report", str(folder), "--out", str(rebuilt)]))
        base = "baseline" if a.base else None
        print(f"{a.pods:,} pods onto {a.nodes:,} nodes, {a.repeat} runs each, medians; run folder {size:.0f} MB, "
              f"report.html {page:.1f} MB ({time.strftime('%Y-%m-%d')})")
        print("code: " + "; ".join(f"{name} {code_of(src)}" for name, src in trees))
        print(ratio_line("kubetwin run (report included)", runs["this tree"], runs[base] if base else None))
        print(cpu_line("kubetwin run (report included)", cpu["this tree"], cpu[base] if base else None))
        base_reports = reports.get(base) if base else None
        print(ratio_line("kubetwin report RUN alone", reports["this tree"], base_reports or None))


if __name__ == "__main__":
    main()

"""Issue 32's end-to-end scale goals through `kubetwin run` (report.html included), each run in a child process.

  10k    10,000 pods onto 5,000 nodes (bench_report's scenario: half one-GPU pods on a3-highgpu-8g, half CPU pods
         on n2-standard-32, all created at 1 s)                                   goal: 5,000 pods/s or more
  100k   100,000 pods onto 10,000 nodes, the same shape                           goal: under 25 s and 4 GB
  1m     (--million) 1,000,000 pods onto 10,000 nodes arriving over a simulated day, finishing and being replaced:
         `churn()`'s 10,000 Jobs                                                  goal: under 5 minutes and 8 GB

Every cluster keeps GKE's limits: node pools of at most 1,000 nodes in one zone (1,000 nodes per node pool and
zone) and at most 15,000 nodes (https://cloud.google.com/kubernetes-engine/quotas, "Nodes per cluster",
"Nodes per node pool zone"). For each scenario this prints the wall seconds and peak RSS of the child process
(bench_report.timed), pods/s (pods the run created, from summary.json, per wall second), simulated seconds per
wall second and the run folder's size; with --net also pods/s net of the same scenario with no pods (the
Deployments at 0 replicas, or no Jobs: node bring-up, start-up and output alone, as bench_scheduling subtracts);
with --base TREE the same run with a baseline tree's sources, alternating
A B A B, and the ratios (bench_report.ratio_line). Times are wall seconds on whatever else the machine runs: compare
only pairs measured side by side.
This tree runs each scenario with kube-scheduler's and kube-controller-manager's API clients unpaced (qps -1: the
decisions of a baseline from before their token buckets, and the twin's cost per pod rather than the ReplicaSet
controller's 20 creates a second); --paced keeps their defaults.
Usage: python benchmarks/bench_scale.py [--only 10k,100k] [--million] [--net] [--repeat 1] [--base /tmp/base-tree]
       [--paced]
       python benchmarks/bench_scale.py --write-churn churn.yaml   # the 1M-pod scenario as YAML, to run by hand
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "benchmarks"))

from bench_report import code_of, paces_clients, ratio_line, scenario, timed  # noqa: E402
from bench_scheduling import _pools  # noqa: E402

DAY = 86400


def churn(jobs: int = 10_000, completions: int = 100, parallelism: int = 10, nodes: int = 10_000,
          seed: int = 1, unpaced: bool = False) -> list[dict]:
    """`jobs` Jobs of `completions` pods, `parallelism` at a time, created at uniform random times over a day:
    each finished pod is replaced by the Job controller until the Job completes, and a finished Job goes with its
    pods 10 minutes later (ttlSecondsAfterFinished, as batch users set it to keep the API server small). Each Job's
    pods run for one random duration of 1 to 10 minutes (kubetwin.io/duration), so every Job (at most 10 rounds of
    10 minutes) ends within the day; half ask for one H100, half for 2 CPUs and 4 GiB, onto half a3-highgpu-8g and
    half n2-standard-32 nodes. The arrival rate and durations are a twin assumption of a busy batch cluster (about
    4,000 pods running at once), not a trace. `unpaced`: kube-scheduler's and kube-controller-manager's API clients
    without token buckets (bench_report.scenario): at their defaults (20 qps) the Job controller's creates,
    finalizer patches and status updates for ~12 pods a second fall behind, as they would on a real cluster left
    at kube-controller-manager's defaults."""
    rng = random.Random(seed)
    longest = completions // parallelism * 600
    spec: dict = {"duration": "24h", "sampleInterval": "1h"}
    if unpaced:
        spec["kubeScheduler"] = spec["kubeControllerManager"] = {"clientConnection": {"qps": -1}}
    head = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench-churn"},
            "spec": spec}
    objs = [head, *_pools("gpu", "a3-highgpu-8g", nodes // 2, "nvidia-h100-80gb", 8),
            *_pools("cpu", "n2-standard-32", nodes - nodes // 2)]
    gpu = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "4"}}
    cpu = {"requests": {"cpu": "2", "memory": "4Gi"}}
    for i, at in enumerate(sorted(rng.uniform(1, DAY - longest) for _ in range(jobs))):
        seconds = rng.randint(60, 600)
        objs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": f"job-{i:05d}", "annotations": {"kubetwin.io/create-at": f"{int(at)}s"}},
            "spec": {"completions": completions, "parallelism": parallelism, "ttlSecondsAfterFinished": 600,
                     "template": {"metadata": {"annotations": {"kubetwin.io/duration": f"{seconds}s"}},
                                  "spec": {"restartPolicy": "Never", "containers": [
                                      {"name": "c", "image": "x", "resources": gpu if i % 2 else cpu}]}}}})
    return objs


def _write(path: Path, objs: list[dict]) -> Path:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path


def _without_pods(objs: list[dict]) -> list[dict]:
    """The scenario with its Deployments at 0 replicas and no Jobs: everything a run does but the pods."""
    return [{**o, "spec": {**o["spec"], "replicas": 0}} if o["kind"] == "Deployment" else o
            for o in objs if o["kind"] != "Job"]


def _folder(run: Path) -> tuple[int, float, float]:
    """(pods the run created, simulated seconds, run folder MB)."""
    summary = json.loads((run / "summary.json").read_text())
    size = sum(f.stat().st_size for f in run.iterdir()) / 2**20
    return summary["pods"]["total"], float(summary["duration_seconds"]), size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="10k,100k", help="comma-separated: 10k, 100k, 1m")
    ap.add_argument("--million", action="store_true", help="add the 1,000,000-pod day (minutes, GBs)")
    ap.add_argument("--jobs", type=int, default=10_000, help="the day's Jobs (100 pods each)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--net", action="store_true", help="also run each scenario without pods, and subtract it")
    ap.add_argument("--base", type=Path, help="a baseline tree (its src/ goes first on the path)")
    ap.add_argument("--keep", type=Path, help="write the run folders here instead of a temporary folder")
    ap.add_argument("--write-churn", type=Path, help="only write the 1M-pod scenario to this file")
    ap.add_argument("--paced", action="store_true",
                    help="this tree's runs keep the API clients' default token buckets (another simulation)")
    a = ap.parse_args()
    if a.write_churn:
        _write(a.write_churn, churn(a.jobs, unpaced=not a.paced))
        return
    names = [n for n in a.only.split(",") if n] + (["1m"] if a.million and "1m" not in a.only else [])
    with tempfile.TemporaryDirectory() as tmp:
        root = a.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        trees = [("this", HERE / "src")] + ([("base", a.base / "src")] if a.base else [])
        print("code: " + "; ".join(f"{tree} {code_of(src)}" for tree, src in trees))
        for name in names:
            # this tree runs with the API clients unpaced (unless --paced): the decisions of a baseline from
            # before their token buckets, and the twin's own cost per pod rather than 20 pod creates a second
            def make(unpaced: bool, name: str = name) -> list[dict]:
                return {"10k": lambda: scenario(5000, 10_000, unpaced), "100k": lambda: scenario(10_000, 100_000,
                                                                                               unpaced),
                        "1m": lambda: churn(a.jobs, unpaced=unpaced)}[name]()
            objs = make(not a.paced)
            base_unpaced = bool(a.base) and not a.paced and paces_clients(a.base / "src")
            scen = {"this": _write(root / f"{name}.yaml", objs),
                    "base": _write(root / f"{name}-base.yaml", make(base_unpaced))}
            runs: dict[str, list[tuple[float, float]]] = {t: [] for t, _ in trees}
            for i in range(a.repeat):
                for tree, src in trees:
                    out = root / f"run-{name}-{tree}-{i}"
                    runs[tree].append(timed(src, ["run", str(scen[tree]), "--out", str(out), "--overwrite"]))
                    if tree != "this" or i:
                        continue
                    pods, sim, size = _folder(out)
            wall = min(w for w, _ in runs["this"])
            net = ""
            if a.net:
                idle = _write(root / f"{name}-no-pods.yaml", _without_pods(objs))
                empty = min(timed(HERE / "src", ["run", str(idle), "--out", str(root / f"run-{name}-no-pods"),
                                                 "--overwrite"])[0] for _ in range(a.repeat))
                net = f" ({pods / max(wall - empty, 1e-9):,.0f} pods/s net of the {empty:.2f} s run without pods)"
            print(f"{name}: {pods:,} pods, {sim:,.0f} simulated s -> {pods / wall:,.0f} pods/s end to end{net}, "
                  f"{sim / wall:,.0f} simulated s per wall s, run folder {size:,.0f} MB (best of {a.repeat})")
            print("  " + ratio_line("kubetwin run", runs["this"], runs["base"] if a.base else None))


if __name__ == "__main__":
    main()

"""End-to-end serving accuracy: the twin against measured vLLM runs (benchmarks/e2e/README.md, issue 17).

For every experiment in benchmarks/e2e/measured/*.yaml this writes the manifests a user would write -- a NodePool of
the run's GPUs, a vLLM Deployment with the run's flags, a Service in front of it, a RequestTrace generator with the
run's workload (inference-perf's shared_prefix groups, its constant-rate stages back to back, the fixed output
length) -- runs them through `kubetwin.runner.run` (the function `kubetwin run` calls) into a run folder, reads the
folder's requests.csv and compares each stage's TTFT, per-token time and E2E with the measurement.

Reported: per run and metric the relative error (twin - measured) / measured; the median and worst |error| over
the fit and the holdout split separately, per model x TP, and the saturation agreement (one rule on both sides, the
measured file's `saturated`: > 1 % of the stage's requests failed or never finished, or TTFT p50 > 1 s). Latency
errors are only computed where the real server was not saturated (a saturated run's latencies are the client's
timeout, not the server's).

Twin choices (assumptions, stated): inference-perf's constant rate is a gamma renewal process with cv 0.001 (evenly
spaced arrivals); the prompt is the shared system prompt plus a question of the measured mean prompt length minus
the system prompt (the chat framing rides on the question); the trace starts after the pod is Ready (WARMUP_S).

Usage: python benchmarks/bench_e2e.py [--only SUBSTRING] [--split fit|holdout] [--out runs/e2e] [--json FILE]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kubetwin.runner import run

HERE = Path(__file__).resolve().parent
MEASURED = HERE / "e2e" / "measured"
WARMUP_S = 600.0  # the pod boots, pulls and loads well within this; the trace starts after it
DRAIN_S = 600.0  # simulated time after the last stage for the requests in flight to finish
CONSTANT_CV = 0.001  # gamma gaps this regular are inference-perf's evenly spaced `constant` arrivals
# One saturation rule for both sides: the measured runs' (extract_inference_sim.py wrote `measured.saturated` with it)
_rule = importlib.util.spec_from_file_location("extract_inference_sim", HERE / "e2e" / "extract_inference_sim.py")
assert _rule and _rule.loader
_extract = importlib.util.module_from_spec(_rule)
_rule.loader.exec_module(_extract)
SATURATED_TTFT_P50_S, SATURATED_FAILED_FRACTION = _extract.SATURATED_TTFT_P50_S, _extract.SATURATED_FAILED_FRACTION
METRICS = ("ttft_mean", "ttft_p50", "ttft_p90", "tpot_mean", "e2e_mean", "e2e_p50", "e2e_p90")
MACHINE = {1: "a3-highgpu-1g", 2: "a3-highgpu-2g", 4: "a3-highgpu-4g", 8: "a3-highgpu-8g"}
IMAGE = "vllm/vllm-openai:v0.10.1"


@dataclass(frozen=True)
class Stats:
    """One stage's latencies, measured or simulated (seconds)."""

    ttft_mean: float
    ttft_p50: float
    ttft_p90: float
    tpot_mean: float
    e2e_mean: float
    e2e_p50: float
    e2e_p90: float
    saturated: bool


def load_runs(paths: list[Path] | None = None) -> list[dict]:
    """Every run of the measured files (benchmarks/e2e/measured/*.yaml unless `paths`), in file order."""
    runs: list[dict] = []
    for p in paths or sorted(MEASURED.glob("*.yaml")):
        runs += yaml.safe_load(p.read_text())["runs"]
    return runs


def experiment_id(run_: dict) -> str:
    """The experiment a stage belongs to: its stages share one server and one trace."""
    return run_["id"].rsplit("-stage", 1)[0]


def measured_stats(run_: dict) -> Stats:
    m = run_["measured"]
    return Stats(m["ttft_s"]["mean"], m["ttft_s"]["p50"], m["ttft_s"]["p90"], m["tpot_s_mean"],
                 m["e2e_s"]["mean"], m["e2e_s"]["p50"], m["e2e_s"]["p90"], bool(m["saturated"]))


def manifests(run_: dict, seed: int = 1) -> list[dict]:
    """The objects a user would apply to reproduce `run_`'s experiment (all its stages) on the twin."""
    w, v, tp = run_["workload"], run_["vllm"], int(run_["tensor_parallel_size"])
    sp = w["shared_prefix"]
    stages = w["stages"]
    span = sum(s["duration_s"] for s in stages)
    labels = {"app": "vllm"}
    args = ["--model", run_["model"], "--tensor-parallel-size", str(tp), "--max-num-seqs", str(v["max_num_seqs"]),
            "--max-num-batched-tokens", str(v["max_num_batched_tokens"]), "--max-model-len", str(v["max_model_len"])]
    args.append("--enable-prefix-caching" if v["enable_prefix_caching"] else "--no-enable-prefix-caching")
    question = max(1, round(w["prompt_tokens_mean"]) - sp["system_prompt_len"])
    steps, at = [], 0.0
    for s in stages[1:]:
        at += stages[len(steps)]["duration_s"]
        steps.append({"at": f"{at:.0f}s", "rate": s["rate"]})
    gen: dict[str, Any] = {
        "rate": stages[0]["rate"], "duration": f"{span:.0f}s", "process": {"type": "gamma", "cv": CONSTANT_CV},
        "sharedPrefix": {"numGroups": sp["num_groups"], "promptsPerGroup": sp["prompts_per_group"],
                         "systemPromptLen": sp["system_prompt_len"], "questionLen": question,
                         "outputLen": w["output_tokens"]}}
    if steps:
        gen["rateSchedule"] = {"steps": steps}
    return [
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "e2e"},
         "spec": {"duration": f"{WARMUP_S + span + DRAIN_S:.0f}s", "seed": seed, "sampleInterval": "60s"}},
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "gpu"},
         "spec": {"machineType": MACHINE[tp], "nodeCount": 1, "zones": ["us-central1-a"],
                  "accelerators": [{"type": run_["gpu"], "count": tp}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm", "namespace": "default"},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
             # the server is up before the trace starts, as in the measured runs (no cold start inside a stage)
             "metadata": {"labels": labels, "annotations": {"kubetwin.io/ready-after": "120s"}},
             "spec": {"containers": [{"name": "vllm", "image": IMAGE, "args": args,
                                      "ports": [{"containerPort": 8000}],
                                      "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vllm", "namespace": "default"},
         "spec": {"selector": labels, "ports": [{"port": 8000, "targetPort": 8000}]}},
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "RequestTrace",
         "metadata": {"name": "inference-perf", "namespace": "default",
                      "annotations": {"kubetwin.io/create-at": f"{WARMUP_S:.0f}s"}},
         "spec": {"format": "generator", "target": {"kind": "Service", "name": "vllm"}, "model": run_["model"],
                  "generator": gen}},
    ]


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else math.nan


def stage_stats(rows: list[dict], run_: dict) -> Stats:
    """The twin's latencies for `run_`'s stage: the requests that arrived in the stage's window."""
    w = run_["workload"]
    start = WARMUP_S + sum(s["duration_s"] for s in w["stages"][: w["stage"]])
    end = start + w["duration_s"]
    mine = [r for r in rows if start <= float(r["arrival"]) < end]
    ok = [r for r in mine if r["status"] == "200" and r["ttft"] != "" and r["e2e"] != ""]
    ttft = np.array([float(r["ttft"]) for r in ok])
    e2e = np.array([float(r["e2e"]) for r in ok])
    failed = 1.0 - len(ok) / len(mine) if mine else 1.0
    out = w["output_tokens"]
    ttft_mean = float(ttft.mean()) if len(ttft) else math.nan
    e2e_mean = float(e2e.mean()) if len(e2e) else math.nan
    p50 = _pct(ttft, 50)
    saturated = failed > SATURATED_FAILED_FRACTION or not p50 <= SATURATED_TTFT_P50_S
    return Stats(ttft_mean, p50, _pct(ttft, 90), (e2e_mean - ttft_mean) / (out - 1), e2e_mean, _pct(e2e, 50),
                 _pct(e2e, 90), saturated)


def simulate(runs: list[dict], out: Path, seed: int = 1) -> dict[str, Stats]:
    """Run every experiment of `runs` once through the twin; the stats per run id."""
    by_exp: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by_exp[experiment_id(r)].append(r)
    result: dict[str, Stats] = {}
    for exp, stages in by_exp.items():
        folder = out / exp
        folder.mkdir(parents=True, exist_ok=True)
        scenario = folder / "scenario.yaml"
        scenario.write_text(yaml.safe_dump_all(manifests(stages[0], seed), sort_keys=False))
        run([scenario], out=folder / "run", overwrite=True)
        with open(folder / "run" / "requests.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for r in stages:
            result[r["id"]] = stage_stats(rows, r)
    return result


def errors(measured: Stats, twin: Stats) -> dict[str, float]:
    """Relative error per metric, (twin - measured) / measured."""
    return {k: (getattr(twin, k) - getattr(measured, k)) / getattr(measured, k) for k in METRICS}


def family(run_: dict) -> str:
    return f"{run_['model'].split('/')[-1]} TP{run_['tensor_parallel_size']}"


def summarize(runs: list[dict], twin: dict[str, Stats]) -> dict[str, Any]:
    """Per-run errors, median and worst |error| per split and per model x TP, saturation agreement."""
    per_run, groups = {}, defaultdict(lambda: defaultdict(list))
    disagree = []
    for r in runs:
        m, t = measured_stats(r), twin[r["id"]]
        entry: dict[str, Any] = {"split": r["split"], "family": family(r), "measured_saturated": m.saturated,
                                 "twin_saturated": t.saturated,
                                 "twin": {k: round(getattr(t, k), 6) for k in METRICS}}
        if m.saturated != t.saturated:
            disagree.append(r["id"])
        if not m.saturated:
            e = errors(m, t)
            entry["error"] = {k: round(x, 4) for k, x in e.items()}
            for k, x in e.items():
                groups[r["split"]][k].append(abs(x))
                groups[f"{r['split']} / {family(r)}"][k].append(abs(x))
        per_run[r["id"]] = entry

    def agg(xs: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(xs), 4), "worst": round(max(xs), 4), "n": len(xs)}

    return {"runs": per_run,
            "groups": {g: {k: agg(v) for k, v in d.items()} for g, d in sorted(groups.items())},
            "saturation": {"runs": len(runs), "disagreements": disagree}}


def report(runs: list[dict], twin: dict[str, Stats], summary: dict[str, Any]) -> str:
    """Markdown tables: per run (measured -> twin, error), then per group median / worst."""
    lines = ["| run | split | TTFT mean ms (meas -> twin, err) | TPOT ms | E2E mean s | E2E p90 s "
             "| saturated meas/twin |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        m, t = measured_stats(r), twin[r["id"]]
        e = summary["runs"][r["id"]].get("error")

        def cell(k: str, scale: float, fmt: str, m=m, t=t, e=e) -> str:
            s = f"{getattr(m, k) * scale:{fmt}} -> {getattr(t, k) * scale:{fmt}}"
            return s + (f" ({e[k]:+.0%})" if e else "")

        lines.append(f"| {r['id']} | {r['split']} | {cell('ttft_mean', 1e3, '.1f')} | {cell('tpot_mean', 1e3, '.2f')}"
                     f" | {cell('e2e_mean', 1, '.3f')} | {cell('e2e_p90', 1, '.3f')} | {m.saturated}/{t.saturated} |")
    lines += ["", "| group | n | " + " | ".join(f"{k} med / worst" for k in METRICS) + " |",
              "|---|---|" + "---|" * len(METRICS)]
    for g, d in summary["groups"].items():
        n = next(iter(d.values()))["n"]
        lines.append(f"| {g} | {n} | " + " | ".join(f"{d[k]['median']:.1%} / {d[k]['worst']:.1%}" for k in METRICS)
                     + " |")
    s = summary["saturation"]
    lines += ["", f"saturation: {s['runs'] - len(s['disagreements'])}/{s['runs']} runs agree"
              + (f"; disagree: {', '.join(s['disagreements'])}" if s["disagreements"] else "")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="only runs whose id contains this")
    ap.add_argument("--split", choices=("fit", "holdout"))
    ap.add_argument("--out", default="runs/e2e", help="where the scenarios and run folders go")
    ap.add_argument("--json", help="write the summary as JSON here")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    runs = [r for r in load_runs() if (not a.only or a.only in r["id"]) and (not a.split or r["split"] == a.split)]
    if not runs:
        print("no runs selected", file=sys.stderr)
        return 2
    twin = simulate(runs, Path(a.out), a.seed)
    summary = summarize(runs, twin)
    print(report(runs, twin, summary))
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

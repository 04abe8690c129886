"""Two routing studies the serving issue's acceptance asks for, run through the whole twin (`kubetwin.runner.run`) from
the examples users would `kubetwin run`; results and caveats are written up in docs/serving-studies.md.

1. `mooncake`: the Mooncake FAST'25 conversation trace (12,031 requests, 512-token hash blocks) replayed on 8 H100
   replicas of Llama-3.1-8B (examples/serving-mooncake-routing.yaml) under each router preset, at the trace's own
   speed and at timeScale 0.5 (twice as fast: the knee where round robin's TTFT p90 is ~4x its nearly idle value
   but nothing collapses yet). Engine prefix-cache hit rate against two bounds computed from the trace: the
   infinite-cache reuse ratio (0.366 of blocks, reference section 9 A2) and one LRU cache holding the whole
   cluster's KV capacity, which is what a perfect router over 8 finite caches can at best approach.
2. `llmd`: llm-d-kv-cache's benchmarking/73-capacity (reference 2.2 and 9 A1): 8 x Qwen3-32B TP=2 on
   a3-highgpu-2g, inference-perf shared_prefix (150 groups x 5 prompts, 6,000-token system prompt, 1,200-token
   question, 1,000 output tokens), a Poisson QPS ladder 3 -> 60 after a 15 QPS warmup
   (examples/serving-llmd-shared-prefix.yaml). precise vs estimated (epp-v1.0) vs load vs random; output tok/s,
   TTFT p90/mean, hit rate, against the published numbers (ratios and ordering, not absolute values).

Everything is deterministic (fixed seeds; the twin is deterministic in its seed). Wall time is printed per run.
Usage: python benchmarks/study_routing.py [--study mooncake|llmd|all] [--quick] [--seed 1]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kubetwin.runner import run
from kubetwin.serving.modelserver.modelspec import lookup_model
from kubetwin.serving.modelserver.perf import GpuSpec, PerfModel

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE_EXAMPLE = ROOT / "examples" / "serving-mooncake-routing.yaml"
LLMD_EXAMPLE = ROOT / "examples" / "serving-llmd-shared-prefix.yaml"
ROUTER_ANNOTATION = "kubetwin.io/router"

MOONCAKE_ROUTERS = ("round-robin", "service-random", "load", "epp", "epp-v1.0", "precise", "sglang-cache-aware")
MOONCAKE_TIME_SCALES = (1.0, 0.5)  # the trace's own speed (3.4 req/s) and twice as fast (the knee, see above)
MOONCAKE_QUICK_LIMIT = 3000  # first 3,000 requests (~15 simulated minutes at timeScale 0.5)
MOONCAKE_SPAN_S = 3537.0  # the conversation trace's last timestamp (ms / 1000)
MOONCAKE_QUICK_SPAN_S = 1000.0  # the first 3,000 requests span 987 s
MOONCAKE_BLOCK_TOKENS = 512
INFINITE_CACHE_REFERENCE = 0.366  # reference section 1 trace table / 9 A2: blocks seen before, infinite cache

LLMD_ROUTERS = ("precise", "epp-v1.0", "load", "random")
# llm-d-kv-cache benchmarking/73-capacity README (2025-09, @d070ea6), "all QPS" summary: out tok/s, TTFT p90, mean
LLMD_PUBLISHED = {"precise": (8730, 0.542, 0.298), "epp-v1.0": (6944, 31.08, 13.32),
                  "random": (4429, 92.55, 45.28), "load": (4266, 94.87, 46.99)}
LLMD_PUBLISHED_NAMES = {"precise": "precise", "epp-v1.0": "estimated", "random": "random", "load": "load"}
LLMD_KV_TOKENS_PER_POD = 307_328  # same README
LLMD_STAGE_S = 50.0  # the example's stage length (an assumption: the README gives the ladder, not its stages)
LLMD_SUSTAINED_TTFT_P90 = 2.0  # a stage is "sustained" while its TTFT p90 stays under this


# ----------------------------------------------------------------------------------------------------------------
# scenario objects
# ----------------------------------------------------------------------------------------------------------------
def example_objects(path: Path, router: str, **trace_spec: Any) -> list[dict]:
    """The example's objects with the pool's router annotation set, the RequestTrace's relative path made absolute
    (objects passed to `run` resolve paths from the working directory) and `trace_spec` merged into its spec."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        if d["kind"] in ("InferencePool", "Service"):
            d["metadata"].setdefault("annotations", {})[ROUTER_ANNOTATION] = router
        if d["kind"] == "RequestTrace":
            spec = d["spec"]
            if spec.get("path"):
                spec["path"] = str((path.parent / spec["path"]).resolve())
            for k, v in trace_spec.items():
                if isinstance(v, dict) and isinstance(spec.get(k), dict):
                    spec[k] = {**spec[k], **v}
                else:
                    spec[k] = v
    return docs


def trace_file(path: Path) -> Path:
    """The RequestTrace file an example reads, resolved the way the twin resolves it (from the example's folder)."""
    for d in yaml.safe_load_all(path.read_text()):
        if d and d["kind"] == "RequestTrace":
            return (path.parent / d["spec"]["path"]).resolve()
    raise ValueError(f"{path}: no RequestTrace")


# ----------------------------------------------------------------------------------------------------------------
# measurements
# ----------------------------------------------------------------------------------------------------------------
def measure(objects: list[dict], seed: int, duration: str | None = None) -> dict[str, Any]:
    """One run: the summary's serving figures plus throughput over the makespan (first arrival to last response),
    which, unlike the summary's fixed window (run end - first arrival), changes with the load and the router."""
    t0 = time.perf_counter()
    res = run(objects=copy.deepcopy(objects), seed=seed, duration=duration)
    wall = time.perf_counter() - t0
    o = res.summary["serving"]["overall"]
    df = res.requests()
    done = df[df.status == 200]
    finish = done.arrival + done.e2e
    makespan = float(finish.max() - df.arrival.min()) if len(done) else float("nan")
    return {
        "requests": o["requests"], "completed": o["completed"], "in_flight_at_end": o["in_flight_at_end"],
        "hit": o["prefix_cache_hit_rate"], "ttft_p50": o["ttft_seconds"]["p50"], "ttft_p90": o["ttft_seconds"]["p90"],
        "ttft_mean": o["ttft_seconds"]["mean"], "tpot_p90": o["tpot_seconds"]["p90"], "preemptions": o["preemptions"],
        "tok_s": float(done.output_tokens.sum()) / makespan if makespan > 0 else float("nan"),
        "makespan_s": makespan, "wall_s": wall, "frame": df,
    }


def mooncake_bounds(path: Path, cache_tokens: int) -> dict[str, float]:
    """Hit-rate bounds of the trace, independent of routing and timing: the infinite cache (blocks and tokens seen
    before; prefix-only matching gives the same figure on this trace) and one LRU over whole 512-token blocks
    holding `cache_tokens` (the cluster's KV capacity), touched in arrival order."""
    seen: set[int] = set()
    lru: OrderedDict[int, None] = OrderedDict()
    cap = cache_tokens // MOONCAKE_BLOCK_TOKENS
    blocks = block_hits = tokens = token_hits = lru_hits = 0
    for line in path.read_text().splitlines():
        row = json.loads(line)
        h, n = row["hash_ids"], row["input_length"]
        prefix = True
        for i, x in enumerate(h):
            tok = MOONCAKE_BLOCK_TOKENS if i < len(h) - 1 else n - MOONCAKE_BLOCK_TOKENS * (len(h) - 1)
            blocks += 1
            tokens += tok
            if x in seen:
                block_hits += 1
                token_hits += tok
            prefix = prefix and x in lru
            if prefix:
                lru_hits += tok
        seen.update(h)
        for x in h:
            lru[x] = None
            lru.move_to_end(x)
        while len(lru) > cap:
            lru.popitem(last=False)
    return {"infinite_blocks": block_hits / blocks, "infinite_tokens": token_hits / tokens,
            "cluster_lru_tokens": lru_hits / tokens}


def kv_tokens_per_pod(model: str, tp: int, utilization: float = 0.9) -> int:
    """What the twin's engine allocates per pod (vLLM's profiling arithmetic in serving.modelserver.perf)."""
    spec = lookup_model(model)
    assert spec is not None, model
    perf = PerfModel(spec, GpuSpec.from_catalog("nvidia-h100-80gb"), tp=tp)
    return perf.num_gpu_blocks(utilization) * 16


# ----------------------------------------------------------------------------------------------------------------
# studies
# ----------------------------------------------------------------------------------------------------------------
def study_mooncake(quick: bool, seed: int, scales: tuple[float, ...] | None = None,
                   routers: tuple[str, ...] = MOONCAKE_ROUTERS) -> dict[str, Any]:
    """Every router at each time scale; prints one table per time scale. `scales` and `routers` narrow or widen
    the sweep (docs/serving-studies.md's turning-point sweep: --scales 1,0.75,0.6,0.5,0.45,0.4,0.35
    --routers round-robin,epp)."""
    trace = trace_file(MOONCAKE_EXAMPLE)
    pods = 8
    kv = kv_tokens_per_pod("meta-llama/Llama-3.1-8B-Instruct", 1)
    t0 = time.perf_counter()
    bounds = mooncake_bounds(trace, pods * kv)
    span = MOONCAKE_QUICK_SPAN_S if quick else MOONCAKE_SPAN_S

    def duration(ts: float) -> str:
        """The trace starts at 10m (after the cold start); give it its scaled span and 5 minutes to drain."""
        return f"{math.ceil((600 + span * ts + 300) / 60)}m"

    print(f"\n== Mooncake conversation trace on {pods} x H100 Llama-3.1-8B ({trace})")
    print(f"hit-rate bounds (computed in {time.perf_counter() - t0:.1f} s): infinite cache "
          f"{bounds['infinite_blocks']:.3f} of blocks (reference: {INFINITE_CACHE_REFERENCE}), "
          f"{bounds['infinite_tokens']:.3f} of tokens; one LRU of the cluster's KV ({pods} x {kv:,} tokens) "
          f"{bounds['cluster_lru_tokens']:.3f} of tokens")
    if scales is None:
        scales = (0.5,) if quick else MOONCAKE_TIME_SCALES
    extra: dict[str, Any] = {"limit": MOONCAKE_QUICK_LIMIT} if quick else {}
    results: dict[str, Any] = {"bounds": bounds, "kv_tokens_per_pod": kv, "runs": {}}
    for ts in scales:
        print(f"\ntimeScale {ts}" + (f" (first {MOONCAKE_QUICK_LIMIT} requests)" if quick else ""))
        print(f"{'router':20s} {'hit':>6s} {'TTFT p50':>9s} {'TTFT p90':>9s} {'TPOT p90':>9s} {'out tok/s':>10s} "
              f"{'preempt':>8s} {'done':>6s} {'wall s':>7s}")
        for r in routers:
            m = measure(example_objects(MOONCAKE_EXAMPLE, r, timeScale=ts, **extra), seed, duration(ts))
            m.pop("frame")
            results["runs"][(ts, r)] = m
            print(f"{r:20s} {m['hit']:6.3f} {m['ttft_p50']:8.2f}s {m['ttft_p90']:8.2f}s "
                  f"{m['tpot_p90'] * 1000:7.1f}ms {m['tok_s']:10.0f} {m['preemptions']:8d} {m['completed']:6d} "
                  f"{m['wall_s']:7.1f}", flush=True)
    return results


def llmd_stages(objects: list[dict]) -> list[tuple[float, float]]:
    """(start s from the trace start, rate) of each stage of the example's generator ladder."""
    from kubetwin.k8s.units import parse_duration

    gen = next(d for d in objects if d["kind"] == "RequestTrace")["spec"]["generator"]
    stages = [(0.0, float(gen["rate"]))]
    for s in sorted(gen.get("rateSchedule", {}).get("steps", []), key=lambda s: parse_duration(s["at"])):
        at = parse_duration(s["at"])
        if at <= 0:
            stages[0] = (0.0, float(s["rate"]))
        else:
            stages.append((at, float(s["rate"])))
    return stages


def study_llmd(quick: bool, seed: int) -> dict[str, Any]:
    """The four schedulers on the ladder; prints the comparison with the published summary and TTFT p90 per stage."""
    pods = 8
    kv = kv_tokens_per_pod("Qwen/Qwen3-32B", 2)
    spec = lookup_model("Qwen/Qwen3-32B")
    assert spec is not None
    perf = PerfModel(spec, GpuSpec.from_catalog("nvidia-h100-80gb"), tp=2)
    cold = perf.iteration_time(7200, 7200 * 3600.0, 7200, 1)
    warm = perf.iteration_time(1200, 1200 * (6000 + 600.0), 7200, 1)
    print(f"\n== llm-d 73-capacity: {pods} x Qwen3-32B TP=2 on a3-highgpu-2g, shared_prefix 150x5, 6000+1200 -> 1000")
    print(f"KV per pod: twin {kv:,} tokens at 0.9 utilization vs published {LLMD_KV_TOKENS_PER_POD:,} "
          f"({kv / LLMD_KV_TOKENS_PER_POD - 1:+.1%}); resident set 1.8M tokens = "
          f"{1.8e6 / (pods * kv):.0%} of the twin's cluster KV (published 73%)")
    print(f"one 7,200-token prefill alone: cold {cold:.2f} s, warm (6,000 cached) {warm:.3f} s")
    base = example_objects(LLMD_EXAMPLE, "precise")
    stages = llmd_stages(base)
    extra: dict[str, Any] = {}
    duration = None
    if quick:  # the warmup and the first five stages only (15, 3, 10, 15, 20, 25 QPS), 30 s each
        stages = [(i * 30.0, r) for i, (_, r) in enumerate(stages[:6])]
        extra = {"generator": {"duration": "180s", "rateSchedule": {"steps": [
            {"at": f"{int(t)}s", "rate": r} for t, r in stages[1:]]}}}
        duration = "40m"
    results: dict[str, Any] = {"kv_tokens_per_pod": kv, "cold_s": cold, "warm_s": warm, "runs": {}}
    print(f"\n{'scheduler':10s} {'hit':>6s} {'out tok/s':>10s} {'TTFT p90':>9s} {'TTFT mean':>10s} {'TPOT p90':>9s} "
          f"{'preempt':>8s} {'sustained':>10s} {'done':>6s} {'makespan':>9s} {'wall s':>7s} "
          "| published tok/s, TTFT p90, mean")
    per_stage: dict[str, list[float]] = {}
    for r in LLMD_ROUTERS:
        m = measure(example_objects(LLMD_EXAMPLE, r, **extra), seed, duration)
        df = m.pop("frame")
        t = df.arrival - df.arrival.min()
        starts = np.array([s for s, _ in stages])
        stage = np.searchsorted(starts, t.to_numpy(), side="right") - 1
        p90 = [float(df.ttft[stage == i].quantile(0.9)) for i in range(len(stages))]
        per_stage[r] = p90
        sustained = 0.0
        for (_, rate), p in zip(stages[1:], p90[1:], strict=True):  # after the warmup stage
            if not p <= LLMD_SUSTAINED_TTFT_P90:
                break
            sustained = rate
        m["stage_ttft_p90"], m["sustained_qps"] = p90, sustained
        results["runs"][r] = m
        pub = LLMD_PUBLISHED[r]
        print(f"{r:10s} {m['hit']:6.3f} {m['tok_s']:10.0f} {m['ttft_p90']:8.2f}s {m['ttft_mean']:9.2f}s "
              f"{m['tpot_p90']:8.3f}s {m['preemptions']:8d} {sustained:8.0f}/s {m['completed']:6d} "
              f"{m['makespan_s']:8.0f}s {m['wall_s']:7.1f} | {pub[0]:5d} {pub[1]:6.2f}s {pub[2]:6.2f}s", flush=True)
    print("\nTTFT p90 (s) per stage: " + " ".join(f"{r:g}" for _, r in stages) + " QPS")
    for r, p90 in per_stage.items():
        print(f"{r:10s} " + " ".join(f"{p:.2f}" if p == p else "-" for p in p90))
    runs = results["runs"]
    if all(k in runs for k in ("precise", "epp-v1.0", "random")):
        pr, est, rnd = runs["precise"], runs["epp-v1.0"], runs["random"]
        print(f"\nratios (twin vs published): TTFT p90 estimated/precise {est['ttft_p90'] / pr['ttft_p90']:.1f}x vs "
              f"{31.08 / 0.542:.1f}x; tok/s precise/random {pr['tok_s'] / rnd['tok_s']:.2f}x vs {8730 / 4429:.2f}x; "
              f"tok/s estimated/random {est['tok_s'] / rnd['tok_s']:.2f}x vs {6944 / 4429:.2f}x")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", choices=("mooncake", "llmd", "all"), default="all")
    ap.add_argument("--quick", action="store_true", help="a shorter slice of each study, for iterating")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scales", help="Mooncake time scales, comma-separated (default: 1.0,0.5; --quick: 0.5)")
    ap.add_argument("--routers", help="Mooncake routers, comma-separated (default: all of them)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.study in ("mooncake", "all"):
        scales = tuple(float(x) for x in args.scales.split(",")) if args.scales else None
        routers = tuple(args.routers.split(",")) if args.routers else MOONCAKE_ROUTERS
        study_mooncake(args.quick, args.seed, scales, routers)
    if args.study in ("llmd", "all"):
        study_llmd(args.quick, args.seed)
    print(f"\ntotal wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

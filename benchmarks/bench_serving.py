"""The serving data plane at scale: 1,000,000 requests over 64 replicas through the whole twin (issue 5's goal:
under 60 s of wall time).

Scenario: 64 x a3-highgpu-1g (one H100 each, a static NodePool), a Deployment of 64 vLLM pods serving
Llama-3.1-8B-Instruct, an InferencePool over them, and a RequestTrace generator of Poisson arrivals with
Azure-conversation-like lengths (lognormal prompts, mean 1,000 tokens, sigma 1; lognormal outputs, mean 200,
sigma 1), its rate set to LOAD of the pool's measured capacity so the pool is busy but stable. Everything runs
through `kubetwin.runner.run` (store, scheduler, kubelet with the model servers' cold start, data plane, samplers,
Prometheus scrapes, summary, requests.csv written to a temporary folder).

Capacity is measured, not assumed: one replica under an overload for a few simulated minutes, completed requests
per simulated second (`--capacity` skips it with a given number of requests/s per replica).

Baseline, measured in the same process: the same scenario with a trace of 0 requests (the twin without the data
plane's requests: nodes, pods, cold start, samplers, scrapes), so the difference is the data plane's own cost.

Reported per router (round-robin and the endpoint picker, `--router` picks one): requests, simulated span, wall time
split into setup (validation, trace generation, objects), clock (env.run: arrivals, routing, engines) and finish
(summary, requests.csv, writing the run folder), requests per wall second.
Usage: python benchmarks/bench_serving.py [--requests 1000000] [--router round-robin|epp|both] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from typing import Any

import kubetwin.runner as twin_run
from kubetwin.runner import run

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
WARMUP_S = 600.0  # the trace starts after the pods have booted and cold-started (about 5 simulated minutes)
DRAIN_S = 120.0  # simulated time after the last arrival, for the requests in flight to finish
LOAD = 0.7  # offered load as a share of the measured capacity


def scenario(replicas: int, requests: int, rate: float, router: str, seed: int = 1,
             span: float | None = None) -> list[dict]:
    """The benchmark's objects: `requests` arrivals at `rate` per second into a pool of `replicas` H100 pods,
    simulated for the arrivals' span (or `span` seconds: the baseline's empty trace runs as long as the real one)."""
    span = span if span is not None else requests / rate
    gen_s = span * 1.05 + 10  # a little longer, then `limit` cuts exactly `requests`
    duration = WARMUP_S + span + DRAIN_S
    labels = {"app": "vllm-bench"}
    trace: dict[str, Any] = {
        "format": "generator", "target": {"kind": "InferencePool", "name": "bench-pool"}, "model": MODEL,
        "generator": {"rate": rate, "duration": f"{gen_s:.0f}s", "process": {"type": "poisson"},
                      "promptTokens": {"lognormal": {"mean": 1000, "sigma": 1.0}, "min": 4, "max": 16000},
                      "outputTokens": {"lognormal": {"mean": 200, "sigma": 1.0}, "min": 1, "max": 4000}}}
    if requests:
        trace["limit"] = requests
    else:
        trace["generator"]["rate"] = 1e-9  # an empty trace: the twin without requests
    return [
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench-serving"},
         "spec": {"duration": f"{duration:.0f}s", "seed": seed, "sampleInterval": "30s"}},
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "h100"},
         "spec": {"machineType": "a3-highgpu-1g", "nodeCount": replicas, "zones": ["us-central1-a"],
                  "accelerators": [{"type": "nvidia-h100-80gb", "count": 1}], "bootDelay": "0s",
                  "driverInstallDelay": "0s"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm", "namespace": "default"},
         "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                                      "args": ["--model", MODEL, "--max-num-seqs", "256"],
                                      "ports": [{"containerPort": 8000}],
                                      "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}},
        {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
         "metadata": {"name": "bench-pool", "namespace": "default", "annotations": {"kubetwin.io/router": router}},
         "spec": {"selector": {"matchLabels": labels}, "targetPorts": [{"number": 8000}],
                  "endpointPickerRef": {"name": "bench-epp", "port": {"number": 9002}}}},
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "RequestTrace",
         "metadata": {"name": "bench", "namespace": "default",
                      "annotations": {"kubetwin.io/create-at": f"{WARMUP_S:.0f}s"}},
         "spec": trace},
    ]


class _Split:
    """Wall time of run()'s phases, taken by wrapping the Environment's run (the clock) for one call."""

    def __init__(self) -> None:
        self.start = self.end = 0.0

    def __enter__(self) -> _Split:
        env_cls = twin_run.Environment
        self._orig = orig = env_cls.run
        split = self

        def timed(env: Any, until: float, on_advance: Any = None) -> None:
            split.start = time.perf_counter()
            orig(env, until, on_advance)
            split.end = time.perf_counter()

        env_cls.run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        twin_run.Environment.run = self._orig  # type: ignore[method-assign]


def timed_run(objects: list[dict]) -> dict[str, Any]:
    """One whole run, written to a temporary folder: wall times and what it served."""
    gc.collect()
    with tempfile.TemporaryDirectory() as out, _Split() as split:
        t0 = time.perf_counter()
        result = run(objects=objects, out=out)
        wall = time.perf_counter() - t0
    serving = result.summary.get("serving", {}).get("overall", {})
    return {"wall": wall, "setup": split.start - t0, "clock": split.end - split.start,
            "finish": t0 + wall - split.end, "serving": serving,
            "csv_rows": result.summary.get("serving", {}).get("requests_csv_rows", 0)}


def capacity_per_replica(seconds: float = 300.0) -> float:
    """Completed requests per simulated second of one replica offered far more than it can serve."""
    rate = 60.0
    objs = scenario(1, int(rate * seconds), rate, "round-robin")
    t = timed_run(objs)
    s = t["serving"]
    # the replica is saturated from the first seconds; the drain adds DRAIN_S of service time
    return s["completed"] / (seconds + DRAIN_S)


def _split(r: dict[str, Any]) -> str:
    return f"setup {r['setup']:.2f}s + clock {r['clock']:.2f}s + finish {r['finish']:.2f}s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--replicas", type=int, default=64)
    p.add_argument("--router", choices=("round-robin", "epp", "both"), default="both")
    p.add_argument("--capacity", type=float, default=None, help="requests/s one replica serves (skip measuring)")
    p.add_argument("--load", type=float, default=LOAD, help="offered load, a share of the pool's capacity")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1, help="runs of each; min and median are printed")
    a = p.parse_args()

    timed_run(scenario(1, 200, 20.0, "epp", a.seed))  # warm-up: imports and first-call costs out of the figures
    cap = a.capacity if a.capacity is not None else capacity_per_replica()
    rate = round(cap * a.replicas * a.load, 1)
    span = a.requests / rate
    print(f"capacity: {cap:.2f} requests/s per replica ({'given' if a.capacity is not None else 'measured'}); "
          f"offered {rate:,.1f} requests/s = {a.load:.0%} of {a.replicas} replicas; {a.requests:,} requests "
          f"arrive over {span:,.0f} simulated s ({WARMUP_S + span + DRAIN_S:,.0f} s simulated in all)")
    base = [timed_run(scenario(a.replicas, 0, rate, "epp", a.seed, span=span)) for _ in range(a.repeat)]
    assert base[0]["csv_rows"] == 0, "the baseline's trace must be empty"
    bb = min(base, key=lambda r: r["wall"])
    print(f"baseline, the same scenario with 0 requests: wall min {bb['wall']:.2f}s ({_split(bb)})")
    for router in (("round-robin", "epp") if a.router == "both" else (a.router,)):
        objs = scenario(a.replicas, a.requests, rate, router, a.seed)
        runs = [timed_run(objs) for _ in range(a.repeat)]
        walls = [r["wall"] for r in runs]
        best = min(runs, key=lambda r: r["wall"])
        s = best["serving"]
        own = best["wall"] - bb["wall"]
        print(f"{router}: {best['csv_rows']:,} requests, {s['completed']:,} completed (TTFT p50 "
              f"{s['ttft_seconds']['p50']}s p99 {s['ttft_seconds']['p99']}s)\n"
              f"  wall min {min(walls):.2f}s median {statistics.median(walls):.2f}s of {len(walls)} "
              f"(fastest: {_split(best)})\n"
              f"  {a.requests / best['wall']:,.0f} requests per wall second end to end; the data plane's own cost "
              f"{own:.2f}s = {a.requests / max(own, 1e-9):,.0f} requests/s")


if __name__ == "__main__":
    main()

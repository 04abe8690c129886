"""The serving data plane at scale through the whole twin: 1,000,000 requests over 64 replicas (issue 5's goal: under
60 s of wall time), and at fleet scale 10,000,000 requests over 512 replicas (`--fleet`, issue 32's goal: under
10 minutes through `kubetwin run`), with the simulated-to-real time ratio of one replica.

Scenario: REPLICAS x a3-highgpu-1g (one H100 each, a static NodePool), a Deployment of vLLM pods serving
Llama-3.1-8B-Instruct, an InferencePool over them, and a RequestTrace generator of Poisson arrivals with
Azure-conversation-like lengths (lognormal prompts, mean 1,000 tokens, sigma 1; lognormal outputs, mean 200,
sigma 1), its rate set to LOAD of the pool's measured capacity so the pool is busy but stable. Everything runs
through `kubetwin.runner.run` (store, scheduler, kubelet with the model servers' cold start, data plane, samplers,
Prometheus scrapes, summary, requests.csv written to a temporary folder).

Capacity is measured, not assumed: one replica under an overload for a few simulated minutes, completed requests
per simulated second (`--capacity` skips it with a given number of requests/s per replica).

Baseline, measured in the same process: the same scenario with a trace of 0 requests (the twin without the data
plane's requests: nodes, pods, cold start, samplers, scrapes), so the difference is the data plane's own cost.

Each run goes in a forked child process, so its peak RSS is its own (ru_maxrss, which starts from the parent's
resident pages at the fork, printed). Times are CPU seconds (user + sys of the child: what the run costs on a quiet
machine, where one Python process runs at one core's speed) and wall seconds (what it took on this machine, shared
or not), split into setup (validation, trace generation, objects), clock (env.run: arrivals, routing, engines) and
finish (summary, requests.csv, writing the run folder).

Reported per router (round-robin and the endpoint picker, `--router` picks one): requests, simulated span, requests
per CPU second end to end and for the data plane's own cost, peak RSS; the projected wall of 10,000,000 requests
over 512 replicas on a quiet machine (the 512-replica baseline over the fleet's span + 10M x the measured data
plane's CPU per request; meaningful when --replicas is 512, the per-request cost depends on the replica count); and
the one-replica ratio: simulated seconds of one replica serving at LOAD (its arrival span plus the drain) per CPU
second of the data plane's own cost (the loaded run's clock minus the empty trace's), and end to end (per CPU
second of the whole `kubetwin run`), next to BLIS's published "approximately 200x faster than equivalent cluster
runs" (llm-d blog "BLIS: Evolving llm-d at Simulation Speed", IBM Research, llm-d/llm-d.github.io PR #344:
https://deploy-preview-363--elaborate-kangaroo-25e1ee.netlify.app/blog/blis-evolving-llm-d-at-simulation-speed).

Usage: python benchmarks/bench_serving.py [--requests 1000000] [--replicas 64] [--fleet] [--router round-robin|epp|both]
       [--repeat 1] [--capacity 23.27] [--one-replica-seconds 600] [--skip-one-replica]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import resource
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


FLEET_REQUESTS, FLEET_REPLICAS = 10_000_000, 512  # issue 32's goal: under 10 minutes through `kubetwin run`
BLIS_RATIO = 200.0  # BLIS: "Approximately 200x faster than equivalent cluster runs" (the llm-d blog in the docstring)


class _Split:
    """Wall and CPU time of run()'s phases, taken by wrapping the Environment's run (the clock) for one call."""

    def __init__(self) -> None:
        self.start = self.end = self.cpu_start = self.cpu_end = 0.0

    def __enter__(self) -> _Split:
        env_cls = twin_run.Environment
        self._orig = orig = env_cls.run
        split = self

        def timed(env: Any, until: float, on_advance: Any = None) -> None:
            split.start, split.cpu_start = time.perf_counter(), time.process_time()
            orig(env, until, on_advance)
            split.end, split.cpu_end = time.perf_counter(), time.process_time()

        env_cls.run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        twin_run.Environment.run = self._orig  # type: ignore[method-assign]


def _timed_run_here(objects: list[dict]) -> dict[str, Any]:
    gc.collect()
    with tempfile.TemporaryDirectory() as out, _Split() as split:
        t0, c0 = time.perf_counter(), time.process_time()
        result = run(objects=objects, out=out)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    serving = result.summary.get("serving", {}).get("overall", {})
    return {"wall": wall, "setup": split.start - t0, "clock": split.end - split.start,
            "finish": t0 + wall - split.end, "cpu": cpu, "cpu_setup": split.cpu_start - c0,
            "cpu_clock": split.cpu_end - split.cpu_start, "cpu_finish": c0 + cpu - split.cpu_end,
            "serving": serving, "csv_rows": result.summary.get("serving", {}).get("requests_csv_rows", 0),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(objects: list[dict], conn: Any) -> None:
    try:
        conn.send(_timed_run_here(objects))
    except BaseException as exc:  # the parent re-raises it
        conn.send(exc)
    conn.close()


def timed_run(objects: list[dict]) -> dict[str, Any]:
    """One whole run, written to a temporary folder, in a forked child (its own peak RSS): times and what it
    served."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(objects, child))
    proc.start()
    child.close()
    got = parent.recv()
    proc.join()
    if isinstance(got, BaseException):
        raise got
    return got


def capacity_per_replica(seconds: float = 300.0) -> float:
    """Completed requests per simulated second of one replica offered far more than it can serve."""
    rate = 60.0
    objs = scenario(1, int(rate * seconds), rate, "round-robin")
    t = timed_run(objs)
    s = t["serving"]
    # the replica is saturated from the first seconds; the drain adds DRAIN_S of service time
    return s["completed"] / (seconds + DRAIN_S)


def _split(r: dict[str, Any]) -> str:
    return (f"CPU setup {r['cpu_setup']:.2f}s + clock {r['cpu_clock']:.2f}s + finish {r['cpu_finish']:.2f}s; "
            f"wall {r['wall']:.2f}s")


def one_replica_ratio(cap: float, router: str, seconds: float, seed: int) -> None:
    """Simulated seconds of one replica serving at LOAD per CPU second: of the data plane's own cost and end to
    end."""
    rate = round(cap * LOAD, 2)
    n = int(rate * seconds)
    loaded = timed_run(scenario(1, n, rate, router, seed))
    empty = timed_run(scenario(1, 0, rate, router, seed, span=n / rate))
    served = n / rate + DRAIN_S  # simulated seconds the replica serves: the arrivals' span, then the drain
    own = loaded["cpu_clock"] - empty["cpu_clock"]
    print(f"one replica at {LOAD:.0%} load ({rate} requests/s, {n:,} requests, {router}): {served:,.0f} simulated s "
          f"served; clock CPU {loaded['cpu_clock']:.2f}s, empty trace's {empty['cpu_clock']:.2f}s, whole run CPU "
          f"{loaded['cpu']:.2f}s\n  simulated-to-real ratio: {served / max(own, 1e-9):,.0f}x per CPU second of the "
          f"data plane's own cost, {served / loaded['cpu']:,.0f}x end to end (the whole `kubetwin run`); "
          f"BLIS publishes ~{BLIS_RATIO:.0f}x (faster than equivalent cluster runs)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=None, help="default 1,000,000 (10,000,000 with --fleet)")
    p.add_argument("--replicas", type=int, default=None, help="default 64 (512 with --fleet)")
    p.add_argument("--fleet", action="store_true",
                   help=f"{FLEET_REQUESTS:,} requests over {FLEET_REPLICAS} replicas (its peak RSS is about 3 GB)")
    p.add_argument("--router", choices=("round-robin", "epp", "both"), default="both")
    p.add_argument("--capacity", type=float, default=None, help="requests/s one replica serves (skip measuring)")
    p.add_argument("--load", type=float, default=LOAD, help="offered load, a share of the pool's capacity")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1, help="runs of each; min and median are printed")
    p.add_argument("--one-replica-seconds", type=float, default=600.0,
                   help="simulated seconds of arrivals for the one-replica ratio")
    p.add_argument("--skip-one-replica", action="store_true", help="skip the one-replica ratio")
    a = p.parse_args()
    requests = a.requests if a.requests is not None else FLEET_REQUESTS if a.fleet else 1_000_000
    replicas = a.replicas if a.replicas is not None else FLEET_REPLICAS if a.fleet else 64

    timed_run(scenario(1, 200, 20.0, "epp", a.seed))  # warm-up: imports and first-call costs out of the figures
    print(f"parent process RSS at each fork: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB "
          f"(a child's peak RSS includes it)")
    cap = a.capacity if a.capacity is not None else capacity_per_replica()
    rate = round(cap * replicas * a.load, 1)
    span = requests / rate
    print(f"capacity: {cap:.2f} requests/s per replica ({'given' if a.capacity is not None else 'measured'}); "
          f"offered {rate:,.1f} requests/s = {a.load:.0%} of {replicas} replicas; {requests:,} requests "
          f"arrive over {span:,.0f} simulated s ({WARMUP_S + span + DRAIN_S:,.0f} s simulated in all)")
    routers = ("round-robin", "epp") if a.router == "both" else (a.router,)
    if not a.skip_one_replica:
        one_replica_ratio(cap, routers[-1], a.one_replica_seconds, a.seed)
    base = [timed_run(scenario(replicas, 0, rate, "epp", a.seed, span=span)) for _ in range(a.repeat)]
    assert base[0]["csv_rows"] == 0, "the baseline's trace must be empty"
    bb = min(base, key=lambda r: r["cpu"])
    print(f"baseline, the same scenario with 0 requests: CPU min {bb['cpu']:.2f}s ({_split(bb)}), "
          f"peak RSS {bb['rss_mb']:.0f} MB")
    fleet_rate = round(cap * FLEET_REPLICAS * a.load, 1)
    fleet_base = bb if (replicas, requests) == (FLEET_REPLICAS, FLEET_REQUESTS) else timed_run(
        scenario(FLEET_REPLICAS, 0, fleet_rate, "epp", a.seed, span=FLEET_REQUESTS / fleet_rate))
    for router in routers:
        objs = scenario(replicas, requests, rate, router, a.seed)
        runs = [timed_run(objs) for _ in range(a.repeat)]
        cpus = [r["cpu"] for r in runs]
        best = min(runs, key=lambda r: r["cpu"])
        s = best["serving"]
        own = best["cpu"] - bb["cpu"]
        per_request = own / requests
        projected = fleet_base["cpu"] + FLEET_REQUESTS * per_request
        print(f"{router}: {best['csv_rows']:,} requests, {s['completed']:,} completed (TTFT p50 "
              f"{s['ttft_seconds']['p50']}s p99 {s['ttft_seconds']['p99']}s)\n"
              f"  CPU min {min(cpus):.2f}s median {statistics.median(cpus):.2f}s of {len(cpus)} "
              f"(fastest: {_split(best)}); peak RSS {best['rss_mb']:,.0f} MB\n"
              f"  {requests / best['cpu']:,.0f} requests per CPU second end to end; the data plane's own cost "
              f"{own:.2f} CPU s = {requests / max(own, 1e-9):,.0f} requests per CPU second "
              f"({per_request * 1e6:.1f} us a request)\n"
              f"  projected for {FLEET_REQUESTS:,} requests over {FLEET_REPLICAS} replicas on a quiet machine: "
              f"{projected:,.0f} s (the {FLEET_REPLICAS}-replica baseline over the fleet's span "
              f"{fleet_base['cpu']:.1f} CPU s + {FLEET_REQUESTS:,} x {per_request * 1e6:.1f} us"
              f"{'' if replicas == FLEET_REPLICAS else f'; per-request cost measured at {replicas} replicas'})")


if __name__ == "__main__":
    main()

"""Speed of one serving engine (kubetwin.serving.engine.core) under a synthetic Poisson load.

Lengths are Azure-conversation-like (lognormal prompt with mean ~1k tokens, output mean ~200); the step model is linear
with the GIE simulator's A100/llama-3-8B constants (tools/simulations/llm_ig_simulation/src/constants.py @1748e829, see
shared/reference/serving-router-keda-latency.md 1.13): prefill 6.769e-5 s/token, decode 0.014 s + 5.353e-7 s per KV
token read + 1.026e-4 s per sequence. Prints simulated requests and iterations per second of wall time.

    .venv/bin/python benchmarks/bench_engine.py [--requests 20000] [--rate 3.0] [--no-macro]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from kubetwin.serving.engine.core import Engine
from kubetwin.serving.types import EngineArgs, Request


class GIELinear:
    """GIE simulator constants summed into one mixed-batch line: overhead + per token + per KV token read + per
    sequence."""

    def iteration_time(self, num_tokens: int, prefill_pairs: float, kv_read_tokens: int, num_seqs: int) -> float:
        return 0.014 + 6.769e-5 * num_tokens + 5.353e-7 * kv_read_tokens + 1.026e-4 * num_seqs

    def decode_line(self, num_seqs: int) -> tuple[float, float]:
        return 0.014 + (6.769e-5 + 1.026e-4) * num_seqs, 5.353e-7


def workload(n: int, rate: float, seed: int) -> list[Request]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    sigma = 0.9
    prompts = np.clip(rng.lognormal(math.log(1000) - sigma**2 / 2, sigma, n), 16, 6000).astype(int)
    outs = np.clip(rng.lognormal(math.log(200) - 0.8**2 / 2, 0.8, n), 1, 2000).astype(int)
    sys_ids = rng.integers(0, 20, n)
    reqs = []
    for i in range(n):
        p = int(prompts[i])
        sys_len = min(256, p - 1) if p > 256 else 0
        if sys_len:
            segs: tuple[int, ...] = (sys_len, p - sys_len)
            hashes: tuple[int, ...] = (int(sys_ids[i]) + 1, 1_000_000 + i)
        else:
            segs, hashes = (p,), (1_000_000 + i,)
        reqs.append(Request(id=i, arrival=float(arrivals[i]), prompt_tokens=p, output_tokens=int(outs[i]),
                            hashes=hashes, seg_tokens=segs))
    return reqs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=3.0)
    ap.add_argument("--blocks", type=int, default=2810)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-macro", action="store_true")
    a = ap.parse_args()
    reqs = workload(a.requests, a.rate, a.seed)
    args = EngineArgs(model="llama-3-8b", max_num_seqs=256, max_num_batched_tokens=2048)
    done: list[Request] = []
    eng = Engine(args, GIELinear(), a.blocks, name="bench", max_model_len=8192, on_finish=done.append,
                 macro_steps=not a.no_macro)
    t0 = time.perf_counter()
    for r in reqs:
        eng.advance(r.arrival)
        eng.add(r, r.arrival)
    eng.advance(math.inf)
    wall = time.perf_counter() - t0
    ttft = np.array([r.first_token - r.arrival for r in done])
    tpot = np.array([(r.finish - r.first_token) / (r.output_tokens - 1) for r in done if r.output_tokens > 1])
    print(f"requests={len(done)} sim_time={eng.now:.0f}s iterations={eng.iterations} wall={wall:.2f}s")
    print(f"  {len(done) / wall:,.0f} requests/s wall, {eng.iterations / wall:,.0f} iterations/s wall")
    print(f"  busy={eng.busy_time / eng.now:.2f} preemptions={eng.num_preemptions} "
          f"prefix_hit={eng.prefix_cache_hits / max(eng.prefix_cache_queries, 1):.3f}")
    print(f"  TTFT p50={np.percentile(ttft, 50):.3f}s p99={np.percentile(ttft, 99):.3f}s  "
          f"TPOT p50={np.percentile(tpot, 50) * 1e3:.1f}ms p99={np.percentile(tpot, 99) * 1e3:.1f}ms")


if __name__ == "__main__":
    main()

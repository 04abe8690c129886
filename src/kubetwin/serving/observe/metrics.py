"""The serving numbers a user reads: per-pool time series (replicas, queue depth, KV usage, prefix-cache hit rate,
held requests), the serving section of summary.json (latency percentiles, SLO attainment, goodput, cache hit rate,
GPU-hours, cost per million tokens) and requests.csv."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from kubetwin.serving.dataplane.plane import ServingDataPlane
from kubetwin.serving.observe.results import (
    DEFAULT_SLO_TPOT,
    DEFAULT_SLO_TTFT,
    csv_chunks,
    latencies,
    overall_slo,
    summarize,
)
from kubetwin.sim.env import Environment


class ServingMetrics:
    """Samples the data plane every `interval` seconds while any pool exists."""

    def __init__(self, plane: ServingDataPlane, env: Environment, interval: float) -> None:
        self.plane, self.env, self.interval = plane, env, interval
        self.t: list[float] = []
        self.series: dict[str, dict[str, list[float]]] = {}
        # pool key -> (the Pool, its hits, its queries) at the last sample; a pool re-created under the same key
        # is a new Pool whose counters start again from 0
        self._last: dict[str, tuple[object, int, int]] = {}
        env.after(0, self._sample)

    def _counters(self, eps: Iterable) -> tuple[int, int]:
        eps = list(eps)
        return (sum(ep.engine.prefix_cache_hits for ep in eps), sum(ep.engine.prefix_cache_queries for ep in eps))

    def _sample(self) -> None:
        """One sample of every pool the run has had so far; a deleted pool reads as empty (0s), so every series
        stays as long as `t`."""
        now = self.env.now
        plane = self.plane
        if plane.pools:
            self.t.append(now)
            n = len(self.t)
            for key, pool in plane.all_pools().items():
                s = self.series.setdefault(key, {k: [0.0] * (n - 1) for k in (
                    "ready_replicas", "waiting", "running", "kv_usage", "held", "prefix_hit_rate")})
                eps = pool.endpoints
                for ep in eps:
                    ep.engine.advance(now)
                # over every pod that was ever in the pool: the sum only grows, as a pod that left keeps its counts
                hits, queries = self._counters(pool.members.values())
                last, h0, q0 = self._last.get(key, (pool, 0, 0))
                if last is not pool:
                    h0 = q0 = 0
                hits_d, q_d = hits - h0, queries - q0
                self._last[key] = (pool, hits, queries)
                s["ready_replicas"].append(len(eps))
                s["waiting"].append(sum(ep.engine.num_waiting for ep in eps))
                s["running"].append(sum(ep.engine.num_running for ep in eps))
                s["kv_usage"].append(round(float(np.mean([ep.engine.kv_usage for ep in eps])), 4) if eps else 0.0)
                s["held"].append(len(pool.held))
                s["prefix_hit_rate"].append(round(hits_d / q_d, 4) if q_d > 0 else 0.0)
        self.env.after(self.interval, self._sample)

    def timeseries(self) -> dict[str, Any]:
        return {"t": self.t, "pools": self.series, "cdf": getattr(self, "_cdf", {})}

    def summary(self, until: float, slos: dict[str, tuple[float, float]]) -> dict[str, Any]:
        """The serving section of summary.json: overall and per pool. The request log's last read: it is released as
        its columns are sorted (a fleet's is GBs), so whatever reads it (the Prometheus exposition) goes before."""
        plane = self.plane
        a = plane.log.arrays(release=True)
        labels = plane.log.labels
        slo_all = overall_slo(slos)
        out: dict[str, Any] = {"overall": summarize(a, slo_all), "pools": {}}
        hits, queries = self._counters(plane.all_endpoints())
        out["overall"]["prefix_cache_hit_rate"] = round(hits / queries, 4) if queries else None
        gpu_s = cost = 0.0
        for start, end, gpus, price in plane.pod_gpu_seconds.values():
            secs = (until if end < 0 else end) - start
            gpu_s += secs * gpus
            cost += secs * gpus * price
        out["overall"]["gpu_hours"] = round(gpu_s / 3600, 3)
        out["overall"]["gpu_cost_usd"] = round(cost, 2)
        tokens = out["overall"]["output_tokens"]
        out["overall"]["usd_per_million_output_tokens"] = round(cost / tokens * 1e6, 4) if tokens else None
        self._cdf: dict[str, dict[str, list[float]]] = {}
        for key, pool in plane.all_pools().items():
            idx = plane.log.names.get(key)
            if idx is None:
                continue
            sel = a["pool"] == idx
            part = a if sel.all() else {k: v[sel] for k, v in a.items()}  # one pool: no copy of every column
            out["pools"][key] = summarize(part, slos.get(key, (DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT)))
            # the pods the pool selected while they were Ready (a pod two pools select counts in both: vLLM's
            # counters are per pod, not per route)
            h, q = self._counters(pool.members.values())
            out["pools"][key]["prefix_cache_hit_rate"] = round(h / q, 4) if q else None
            out["pools"][key]["router"] = getattr(pool.router, "name", "")
            self._cdf[key] = _cdf(part)
        out["requests_csv_rows"] = len(a["id"])
        self._csv = csv_chunks(a, labels)
        return out

    def requests_csv_chunks(self) -> Iterator[str]:
        """requests.csv of the rows summary() read, formatted a chunk at a time as the runner writes them."""
        return self._csv


def _cdf(a: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """Latency quantiles at 1 % steps, enough to draw each CDF in the report."""
    lat = latencies(a)
    q = np.linspace(0, 1, 101)
    out: dict[str, list[float]] = {"q": [round(float(x), 2) for x in q]}
    for k in ("ttft", "tpot", "e2e"):
        x = lat[k][~np.isnan(lat[k])]
        out[k] = [round(float(v), 5) for v in np.quantile(x, q)] if len(x) else []
    return out

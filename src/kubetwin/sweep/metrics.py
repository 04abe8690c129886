"""The Sweep's metrics from one run: named ones (api/sweep.py NAMED_METRICS) and paths into summary.json.

Job completion times come from the run's history as `kubectl get jobs` shows them: a Job (or JobSet) from its
creation to its Complete (JobSet: Completed) condition turning True; Jobs a JobSet owns are counted in their JobSet.
"""

from __future__ import annotations

import math
from typing import Any

from kubetwin.api.sweep import PathMetric, Sweep
from kubetwin.report.jobtimes import JobTimes
from kubetwin.runner import RunResult
from kubetwin.sim.stats import percentile

_SUMMARY_PATHS = {
    "cost": "cost.total_usd", "on_demand_cost": "cost.on_demand_usd", "spot_cost": "cost.spot_usd",
    "pending_p50": "pods.pending_seconds.p50", "pending_p99": "pods.pending_seconds.p99",
    "pending_max": "pods.pending_seconds.max", "never_scheduled": "pods.never_scheduled",
    "wasted_gpu_hours": "wasted_gpu_hours",
    "ttft_p50": "serving.overall.ttft_seconds.p50", "ttft_p90": "serving.overall.ttft_seconds.p90",
    "ttft_p99": "serving.overall.ttft_seconds.p99", "tpot_p90": "serving.overall.tpot_seconds.p90",
    "e2e_p99": "serving.overall.e2e_seconds.p99", "slo_attainment": "serving.overall.slo_attainment",
    "goodput_rps": "serving.overall.goodput_rps",
    "usd_per_million_output_tokens": "serving.overall.usd_per_million_output_tokens",
    "serving_gpu_cost": "serving.overall.gpu_cost_usd",
}


def summary_path(summary: Any, path: str) -> Any:
    """The value at a dotted path of summary.json; keys that hold dots or slashes (pool names such as
    InferencePool/default/llama3-pool) match whole, longest first. None when absent."""
    node = summary
    rest = path
    while rest:
        if not isinstance(node, dict):
            return None
        key = next((k for k in sorted(node, key=len, reverse=True) if rest == k or rest.startswith(k + ".")), None)
        if key is None:
            return None
        node, rest = node[key], rest[len(key) + 1:]
    return node


def _gpu_allocation(summary: dict[str, Any]) -> float | None:
    pools = summary.get("gpu_allocation") or {}
    alloc = sum(p.get("gpu_hours_allocatable") or 0 for p in pools.values())
    req = sum(p.get("gpu_hours_requested") or 0 for p in pools.values())
    return round(100 * req / alloc, 3) if alloc else None


def job_times(result: RunResult) -> tuple[int, list[float], float | None]:
    """(jobs, completion times of the finished ones, when the last finished: None while any is unfinished), from
    the run's history through report.jobtimes (the run summary's `jobs` reads the same)."""
    times = JobTimes()
    for t, _, etype, o in result.history:
        times.add(t, etype, o)
    return len(times.created), times.completion_seconds(), times.last_completed()


def collect(sweep: Sweep, result: RunResult) -> dict[str, Any]:
    """Each metric of the Sweep, in its order: a number, or None where the run has no such value."""
    summary = result.summary
    jobs: tuple[int, list[float], float | None] | None = None
    out: dict[str, Any] = {}
    for m in sweep.spec.metrics:
        if isinstance(m, PathMetric):
            value = summary_path(summary, m.path)
            out[m.name] = value if isinstance(value, (int, float, str)) or value is None else None
            continue
        if m in _SUMMARY_PATHS:
            out[m] = summary_path(summary, _SUMMARY_PATHS[m])
        elif m == "gpu_allocation":
            out[m] = _gpu_allocation(summary)
        else:
            jobs = jobs or job_times(result)
            count, jct, last = jobs
            out[m] = {"jobs": count, "jobs_unfinished": count - len(jct),
                      "jct_p50": percentile(jct, 50) if jct else None,
                      "jct_p99": percentile(jct, 99) if jct else None,
                      "makespan": math.inf if last is None else last}[m]
    return out

"""The Sweep's metrics from one run: named ones (api/sweep.py NAMED_METRICS) and paths into summary.json.

Job completion times are summary.json's `jobs` (report.jobtimes), as `kubectl get jobs` shows them: a Job (or
JobSet) from its creation to its Complete (JobSet: Completed) condition turning True; Jobs a JobSet owns are counted
in their JobSet.
"""

from __future__ import annotations

import math
from typing import Any

from kubetwin.api.sweep import PathMetric, Sweep
from kubetwin.runner import RunResult

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


def collect(sweep: Sweep, result: RunResult) -> dict[str, Any]:
    """Each metric of the Sweep, in its order: a number, or None where the run has no such value."""
    summary = result.summary
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
        else:  # summary.json's `jobs` (report.jobtimes, fed by the run's own watch): no pass over the history
            jobs = summary.get("jobs") or {}
            jct = jobs.get("completion_seconds") or {}
            total, completed = jobs.get("total", 0), jobs.get("completed", 0)
            last = jobs.get("makespan_seconds", 0.0) if jobs else 0.0
            out[m] = {"jobs": total, "jobs_unfinished": total - completed, "jct_p50": jct.get("p50"),
                      "jct_p99": jct.get("p99"), "makespan": math.inf if last is None else last}[m]
    return out

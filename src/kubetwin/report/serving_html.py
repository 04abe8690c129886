"""The serving part of report.html: latency CDFs, replicas over time, queue depth and prefix-cache hit rate."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go


def serving_figures(summary: dict[str, Any], series: dict[str, Any]) -> list[go.Figure]:
    """One figure per question a serving user asks; empty when the run served nothing."""
    if not series or not series.get("t"):
        return []
    hours = [t / 3600 for t in series["t"]]
    pools = series["pools"]
    figs = []
    cdfs = series.get("cdf") or {}
    for metric, title in (("ttft", "Time to first token"), ("tpot", "Time per output token"),
                          ("e2e", "End-to-end latency")):
        fig = go.Figure([go.Scatter(x=c[metric], y=c["q"], name=html.escape(p), mode="lines")
                         for p, c in sorted(cdfs.items()) if c.get(metric)])
        fig.update_layout(title=f"{title}: CDF per pool", xaxis_title="seconds", yaxis_title="fraction of requests",
                          xaxis_type="log")
        figs.append(fig)

    def lines(key: str, title: str, ytitle: str) -> go.Figure:
        fig = go.Figure([go.Scatter(x=hours, y=s[key], name=html.escape(p), mode="lines", line_shape="hv")
                         for p, s in sorted(pools.items())])
        fig.update_layout(title=title, xaxis_title="simulated hours", yaxis_title=ytitle)
        return fig

    figs.append(lines("ready_replicas", "Ready model-server replicas per pool", "replicas"))
    queue = go.Figure()
    for p, s in sorted(pools.items()):
        queue.add_trace(go.Scatter(x=hours, y=s["waiting"], name=html.escape(f"{p} waiting in servers"),
                                   mode="lines", line_shape="hv"))
        queue.add_trace(go.Scatter(x=hours, y=s["held"], name=html.escape(f"{p} held at the gateway"),
                                   mode="lines", line_shape="hv"))
    queue.update_layout(title="Queue depth (vllm:num_requests_waiting summed; requests held by the gateway)",
                        xaxis_title="simulated hours", yaxis_title="requests")
    figs.append(queue)
    figs.append(lines("prefix_hit_rate", "Prefix-cache hit rate per sample interval (tokens)", "fraction"))
    figs.append(lines("kv_usage", "KV-cache usage (mean of vllm:kv_cache_usage_perc)", "fraction"))
    return figs


def serving_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Headline rows for the report's table."""
    s = summary.get("serving", {}).get("overall")
    if not s:
        return []

    def sec(d: dict, k: str) -> str:
        return "-" if d.get(k) is None else f"{d[k]:.3f} s"

    return [("requests (completed / 429 / 503)", f"{s['requests']} ({s['completed']} / {s['rejected_429']} / "
             f"{s['failed_503']})"),
            ("TTFT p50 / p90 / p99", " / ".join(sec(s["ttft_seconds"], k) for k in ("p50", "p90", "p99"))),
            ("TPOT p50 / p90 / p99", " / ".join(sec(s["tpot_seconds"], k) for k in ("p50", "p90", "p99"))),
            ("SLO attainment", "-" if s["slo_attainment"] is None else f"{100 * s['slo_attainment']:.1f} %"),
            ("prefix-cache hit rate", "-" if s.get("prefix_cache_hit_rate") is None
             else f"{100 * s['prefix_cache_hit_rate']:.1f} %"),
            ("serving GPU-hours", f"{s['gpu_hours']:.2f}"),
            ("USD per million output tokens", "-" if s["usd_per_million_output_tokens"] is None
             else f"${s['usd_per_million_output_tokens']:.2f}")]

"""The serving part of report.html: latency CDFs, replicas over time, queue depth and prefix-cache hit rate."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

# Tick values for the latency CDFs' log axes: 1-2-5 steps, labelled in ms or s (plotly's own log ticks print
# "2", "5" between unlabelled decades, which reads badly for latencies).
_TICKS = [m * 10.0 ** e for e in range(-4, 4) for m in (1, 2, 5)]
_FINE = [round(m * 10.0 ** e, 6) for e in range(-4, 4) for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)]


def _tick(v: float) -> str:
    return f"{v * 1000:g} ms" if v < 1 else f"{v:g} s"


def _cdf_axis(values: list[float]) -> dict[str, Any]:
    lo, hi = min(values), max(values)
    ticks = [v for v in (_TICKS if hi > 4 * lo else _FINE) if lo / 1.5 <= v <= hi * 1.5]
    if len(ticks) < 4:  # a narrow spread (1.6 s to 3.1 s) has one 1-2-5 tick in it: the finer steps, not one label
        ticks = [v for v in _FINE if lo / 1.5 <= v <= hi * 1.5]
    if len(ticks) > 12:  # labels that would overlap: every other one, or fewer
        ticks = ticks[:: -(-len(ticks) // 12)]
    ticks = ticks or [lo, hi]
    return {"type": "log", "tickmode": "array", "tickvals": ticks, "ticktext": [_tick(v) for v in ticks],
            "title": "latency (ms / s, log scale)"}


RunSeries = tuple[str, dict[str, Any], dict[str, Any]]  # (run name or "" for one run, summary, serving series)


def serving_figures(runs: list[RunSeries]) -> list[go.Figure]:
    """One figure per question a serving user asks, each run's pools overlaid; none when nothing was served."""
    runs = [(n, summ, s) for n, summ, s in runs if s and s.get("t")]
    if not runs:
        return []

    def name(run: str, label: str) -> str:
        return html.escape(f"{run}: {label}" if run else label)

    figs = []
    for metric, title, slo_key in (("ttft", "Time to first token", "ttft_seconds"),
                                   ("tpot", "Time per output token", "tpot_seconds"), ("e2e", "End-to-end latency",
                                                                                      None)):
        fig = go.Figure([go.Scatter(x=c[metric], y=c["q"], name=name(run, p), mode="lines")
                         for run, _, s in runs for p, c in sorted((s.get("cdf") or {}).items()) if c.get(metric)])
        if not fig.data:
            continue
        values = [v for tr in fig.data for v in tr.x if v and v > 0]
        slos = sorted({float(slo[slo_key]) for _, summ, _ in runs
                       for slo in [((summ.get("serving") or {}).get("overall") or {}).get("slo") or {}]
                       if slo_key and slo.get(slo_key)})
        for v in slos:
            fig.add_vline(x=v, line_dash="dash", line_color="#d62728", annotation_text=f"SLO {_tick(v)}",
                          annotation_position="top left")
        fig.update_layout(title=f"{title}: CDF per pool" + (" (dashed: the SLO)" if slos else ""),
                          xaxis=_cdf_axis(values + slos), yaxis_title="fraction of requests", yaxis_range=[0, 1.02])
        figs.append(fig)

    def lines(key: str, title: str, ytitle: str) -> go.Figure | None:
        fig = go.Figure([go.Scatter(x=[t / 3600 for t in s["t"]], y=ps[key], name=name(run, p), mode="lines",
                                    line_shape="hv")
                         for run, _, s in runs for p, ps in sorted(s["pools"].items()) if any(ps.get(key) or ())])
        if not fig.data:
            return None
        fig.update_layout(title=title, xaxis_title="simulated hours", yaxis_title=ytitle, yaxis_rangemode="tozero")
        return fig

    queue = go.Figure()
    for run, _, s in runs:
        for p, ps in sorted(s["pools"].items()):
            for key, label in (("waiting", "waiting in servers"), ("held", "held at the gateway")):
                if any(ps.get(key) or ()):
                    queue.add_trace(go.Scatter(x=[t / 3600 for t in s["t"]], y=ps[key], name=name(run, f"{p} {label}"),
                                               mode="lines", line_shape="hv"))
    queue.update_layout(title="Queue depth (vllm:num_requests_waiting summed; requests held by the gateway)",
                        xaxis_title="simulated hours", yaxis_title="requests waiting", yaxis_rangemode="tozero")
    figs += [f for f in (lines("ready_replicas", "Ready model-server replicas per pool", "ready replicas"),
                         queue if queue.data else None,
                         lines("prefix_hit_rate", "Prefix-cache hit rate per sample interval (tokens)",
                               "hit rate (fraction of prompt tokens)"),
                         lines("kv_usage", "KV-cache usage (mean of vllm:kv_cache_usage_perc)",
                               "KV-cache used (fraction, 0-1)"))
             if f is not None]
    return figs

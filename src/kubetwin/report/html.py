"""report.html: one self-contained page (plotly.js inlined once), byte-identical for identical inputs."""

from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go

from kubetwin.report.serving_html import serving_figures, serving_rows
from kubetwin.workloads.dcgm import figures as dcgm_figures


def _fig_html(fig: go.Figure, div_id: str, first: bool) -> str:
    fig.update_layout(template="plotly_white", height=380, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig.to_html(full_html=False, include_plotlyjs=first, div_id=div_id, config={"displaylogo": False})


def write_report(run_dir: Path, summary: dict, timeseries: dict, jobs: list[dict]) -> Path:
    """Write run_dir/report.html: headline table, GPU allocation, pending pods, cost by pool, job timeline."""
    hours = [t / 3600 for t in timeseries["t"]]
    alloc = go.Figure([go.Scatter(x=hours, y=v, name=html.escape(p), mode="lines", line_shape="hv")
                       for p, v in sorted(timeseries["gpu_allocation_pct"].items())])
    alloc.update_layout(title="GPU allocation per node pool (% of allocatable GPUs requested)",
                        xaxis_title="simulated hours", yaxis_title="%", yaxis_range=[0, 105])
    pending = go.Figure([go.Scatter(x=hours, y=timeseries["pending_pods"], mode="lines", line_shape="hv")])
    pending.update_layout(title="Pending pods", xaxis_title="simulated hours", yaxis_title="pods")
    frag = go.Figure([go.Scatter(x=hours, y=timeseries.get("fragmented_gpu_pct") or [], mode="lines",
                                 line_shape="hv")])
    frag.update_layout(title="Fragmented GPUs (% of all GPUs; idle GPUs the typical GPU pods cannot use)",
                       xaxis_title="simulated hours", yaxis_title="%")
    by_pool = summary["cost"]["by_pool"]
    cost = go.Figure([go.Bar(x=[html.escape(p) for p in by_pool], y=list(by_pool.values()))])
    cost.update_layout(title=f"Cost by node pool (total ${summary['cost']['total_usd']:,.2f})", yaxis_title="USD")
    end = summary["duration_seconds"]
    names = [html.escape(f"{j['namespace']}/{j['name']}") for j in jobs]
    wait = go.Bar(y=names, x=[((j["start"] if j["start"] is not None else end) - j["created"]) / 3600 for j in jobs],
                  base=[j["created"] / 3600 for j in jobs], orientation="h", name="waiting", marker_color="#f0ad4e")
    running = go.Bar(y=names, x=[((j["end"] if j["end"] is not None else end) - j["start"]) / 3600
                                 if j["start"] is not None else 0 for j in jobs],
                     base=[j["start"] / 3600 if j["start"] is not None else 0 for j in jobs], orientation="h",
                     name="running", marker_color="#5cb85c")
    timeline = go.Figure([wait, running])
    timeline.update_layout(title="Jobs: waiting and running", barmode="overlay", xaxis_title="simulated hours",
                           height=max(380, 18 * len(jobs) + 120))
    pods = summary["pods"]
    rows = [("simulated time", f"{end / 3600:.1f} h"), *((("pods", str(pods["total"])),) if "total" in pods else ()),
            *((f"pods {k}", str(v)) for k, v in pods["by_phase"].items()),
            ("pending p50 / p99", f"{pods['pending_seconds']['p50']:.0f} s / {pods['pending_seconds']['p99']:.0f} s"),
            *((f"GPU allocation {k}", f"{v['mean_pct']:.1f} %") for k, v in summary["gpu_allocation"].items()),
            *((("fragmented GPUs (mean)", f"{summary['gpu_fragmentation']['fragmented_gpu_pct_mean']:.1f} %"),)
              if "gpu_fragmentation" in summary else ()),
            ("cost total", f"${summary['cost']['total_usd']:,.2f}"), *serving_rows(summary)]
    table = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    serving = serving_figures(summary, timeseries.get("serving") or {})
    figs = [_fig_html(f, f"kubetwin-fig-{i}", i == 0)
            for i, f in enumerate((alloc, pending, frag, cost, timeline, *serving, *dcgm_figures(timeseries)))]
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>kubetwin run report</title><style>"
            "body{font-family:sans-serif;margin:24px;max-width:1100px}th{text-align:left;padding-right:24px}"
            "</style></head><body><h1>kubetwin run report</h1><table>" + table + "</table>"
            + "".join(figs) + "</body></html>\n")
    path = run_dir / "report.html"
    path.write_text(page, encoding="utf-8")
    return path

"""report.html's panels, one group per subsystem that ran (none for what did not), for one run or several overlaid.

Every function takes the runs to draw; with more than one, each trace's name starts with its run's name, so
`kubetwin report A B` overlays the same panel of A and B. A panel with nothing to draw is left out rather than
drawn flat or empty.
"""

from __future__ import annotations

import bisect
import html
from dataclasses import dataclass, field

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kubetwin.k8s.units import short_duration
from kubetwin.report.axes import ASSUMED_WIDTH as PAGE_PX
from kubetwin.report.axes import RIGHT, TimeAxis, cut_label, legend_rows, place, separate, time_axis
from kubetwin.report.pagebounds import MAX_SERIES, bound_figure, sum_steps
from kubetwin.report.rundata import ClusterQueueSeries, RunData
from kubetwin.report.serving_html import serving_figures
from kubetwin.report.timeline import STATE_COLORS, Row
from kubetwin.workloads.dcgm import figures as dcgm_figures
from kubetwin.workloads.training_explain import never_trained
from kubetwin.workloads.training_explain import render as explain_render

__all__ = ["Panel", "page_axis", "panels", "timeline_figure"]

HOURS = "simulated hours"


@dataclass
class Panel:
    """One figure of the page, under its subsystem's heading; text: HTML shown under it (already escaped)."""

    group: str
    fig: go.Figure
    text: str = ""
    timed: bool = False  # drawn over simulated time, on the page's one time axis (report.axes)
    bounded: list[str] = field(default_factory=list)  # what report.pagebounds left out of it (shown above it)


def _hours(ts: list[float]) -> list[float]:
    return [t / 3600 for t in ts]


def _name(run: RunData, multi: bool, label: str) -> str:
    return html.escape(f"{run.name}: {label}" if multi else label)


def _dur(s: float) -> str:
    return short_duration(s)  # the page's one rule for a duration (k8s.units), as the headline writes it


def page_axis(runs: list[RunData], rows: list[list[Row]]) -> TimeAxis:
    """The page's time axis: to the longest run's end, its left margin wide enough for every timeline's labels."""
    return time_axis(max(r.duration for r in runs), [r.label for rs in rows for r in rs])


TITLE_TOP, LEGEND_TOP = 12, 44  # px from a timeline's top to its title's top, and to its legend's
LEGEND_ROW_PX = 22  # px a legend row takes (plotly's 19 px rows and their padding, erring wide)
LEGEND_GAP_PX, AXIS_ON_TOP_PX = 16, 64  # px from the legend to the plot: a gap; the time axis' ticks and title


def timeline_figure(rows: list[Row], title: str, end: float, axis: TimeAxis | None = None) -> go.Figure:
    """One horizontal bar per state segment, every row labelled; hover: the object, its state, reason, events."""
    axis = axis or time_axis(end, [r.label for r in rows])
    labels = [html.escape(r.label) for r in rows]
    fig = go.Figure()

    def at(t: float) -> str:  # an instant in the axis' unit
        return f"{t / 3600:.2f} h" if axis.unit == "h" else f"{t / 60:.1f} min"

    for state, color in STATE_COLORS.items():
        segs = [(lab, row, s) for lab, row in zip(labels, rows, strict=True) for s in row.segments
                if s.state == state]
        if not segs:
            continue
        hover = []
        for lab, row, s in segs:
            evs = [e for e in row.events if s.start <= e[0] <= s.end]
            lines = [f"{at(t)} {html.escape(text[:110])}" for t, text in evs[:6]]
            if len(evs) > 6:
                lines.append(f"... {len(evs) - 6} more events")
            hover.append(f"<b>{lab}</b><br>{state}{': ' + html.escape(s.reason[:140]) if s.reason else ''}<br>"
                         f"{at(s.start)} - {at(s.end)} ({_dur(s.end - s.start)})"
                         + ("<br>" + "<br>".join(lines) if lines else ""))
        fig.add_trace(go.Bar(y=[x[0] for x in segs], x=[(x[2].end - x[2].start) / 3600 for x in segs],
                             base=[x[2].start / 3600 for x in segs], orientation="h", name=state,
                             marker_color=color, hovertext=hover, hoverinfo="text"))
    marks = [(lab, t, text) for lab, row in zip(labels, rows, strict=True) for t, text in row.marks]
    if marks:
        fig.add_trace(go.Scatter(x=[m[1] / 3600 for m in marks], y=[m[0] for m in marks], mode="markers",
                                 name="pod failed / disrupted", marker={"symbol": "x", "color": "black", "size": 8},
                                 hovertext=[f"<b>{m[0]}</b><br>{at(m[1])} {html.escape(m[2][:160])}"
                                            for m in marks], hoverinfo="text"))
    tall = len(rows) > 30  # the time axis on top, where a scrolled tall timeline still shows it
    # The top band, in px from the figure's top: the title, then the legend in rows of its own, then (tall) the
    # time axis' tick labels and title, then the plot. Placed in the figure's own px (yref container), so the
    # legend never lies on the title or the plot however many rows it wraps to (it was placed in fractions of the
    # plot's height: over the title of a tall timeline, touching the plot of a short one).
    rows_px = LEGEND_ROW_PX * legend_rows([str(tr.name) for tr in fig.data], PAGE_PX - axis.left - RIGHT)
    top = LEGEND_TOP + rows_px + (AXIS_ON_TOP_PX if tall else LEGEND_GAP_PX)
    height = max(260, 22 * len(rows) + 160) + top - (150 if tall else 90)
    fig.update_layout(title={"text": title, "yref": "container", "y": 1 - TITLE_TOP / height, "yanchor": "top"},
                      barmode="overlay", xaxis_title=HOURS, height=height,
                      xaxis_range=[0, end / 3600], xaxis_side="top" if tall else "bottom",
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "yref": "container",
                              "y": 1 - LEGEND_TOP / height, "yanchor": "top"}, margin_t=top)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=labels, autorange="reversed",
                     tickmode="array", tickvals=labels, ticktext=[html.escape(cut_label(r.label, axis)) for r in rows],
                     tickfont_size=11, title_font_size=12, title_standoff=4,
                     title_text="object (its Job, JobSet or pod)" if len(rows) >= 12 else "object")
    return place(fig, axis, legend_below=False)


def _cluster(runs: list[RunData], multi: bool) -> list[Panel]:
    out = []
    alloc = go.Figure([go.Scatter(x=_hours(r.timeseries["t"]), y=v, name=_name(r, multi, p), mode="lines",
                                  line_shape="hv")
                       for r in runs for p, v in sorted((r.timeseries.get("gpu_allocation_pct") or {}).items())
                       if _has_gpus(r, p, v)])
    if alloc.data:
        alloc.update_layout(title="GPU allocation per node pool (% of allocatable GPUs requested)",
                            xaxis_title=HOURS, yaxis_title="GPUs requested (% of allocatable)", yaxis_range=[0, 105])
        out.append(Panel("Cluster", alloc))
    if any(any(r.timeseries.get("pending_pods") or ()) for r in runs):
        pending = go.Figure([go.Scatter(x=_hours(r.timeseries["t"]), y=r.timeseries["pending_pods"],
                                        name=_name(r, multi, "pending pods"), mode="lines", line_shape="hv")
                             for r in runs])
        pending.update_layout(title="Pending pods", xaxis_title=HOURS, yaxis_title="pending pods",
                              yaxis_rangemode="tozero")
        out.append(Panel("Cluster", pending))
    if any(any(v for v in r.timeseries.get("fragmented_gpu_pct") or () if v) for r in runs):
        frag = go.Figure([go.Scatter(x=_hours(r.timeseries["t"]), y=r.timeseries["fragmented_gpu_pct"],
                                     name=_name(r, multi, "fragmented GPUs"), mode="lines", line_shape="hv")
                          for r in runs])
        frag.update_layout(title="Fragmented GPUs (% of all GPUs; idle GPUs the typical GPU pods cannot use)",
                           xaxis_title=HOURS, yaxis_title="fragmented GPUs (% of all)", yaxis_rangemode="tozero")
        out.append(Panel("Cluster", frag))
    cost = go.Figure([go.Bar(x=[html.escape(p) for p in r.summary["cost"]["by_pool"]],
                             y=list(r.summary["cost"]["by_pool"].values()), name=html.escape(r.name))
                      for r in runs if r.summary.get("cost", {}).get("total_usd")])
    if cost.data:
        totals = ", ".join(f"{'' if not multi else r.name + ' '}${r.summary['cost']['total_usd']:,.2f}"
                           + (f" with ${r.summary['cost']['idle_reserved_usd']:,.2f} of idle reserved VMs"
                              if "idle_reserved_usd" in r.summary["cost"] else "") for r in runs)
        cost.update_yaxes(tickprefix="$", tickformat=",.0f")
        cost.update_layout(title=html.escape(f"Cost by node pool (total {totals})"), yaxis_title="cost (USD)",
                           xaxis_title="node pool",
                           barmode="group", showlegend=multi)
        out.append(Panel("Cluster", cost))
    return out


def _has_gpus(run: RunData, pool: str, series: list[float]) -> bool:
    """Whether a pool ever had GPUs to allocate (a CPU or TPU pool's allocation series is a flat zero)."""
    alloc = (run.summary.get("gpu_allocation") or {}).get(pool) or {}
    return bool(alloc.get("gpu_hours_allocatable")) or any(series)


def _step(points: list[tuple[float, float]], t: float) -> float:
    """The value a step series holds at t (0 before its first point)."""
    i = bisect.bisect_right([p[0] for p in points], t) - 1
    return points[i][1] if i >= 0 else 0.0


def _queues(run: RunData) -> list[tuple[str, ClusterQueueSeries]]:
    """The ClusterQueues drawn: each of the first MAX_SERIES, the others as one sum (report.pagebounds)."""
    queues = list(run.cluster_queues.items())
    if len(queues) <= MAX_SERIES:
        return queues
    rest = [s for _, s in queues[MAX_SERIES:]]
    resources = sorted({res for s in rest for res in s.borrowed})
    total = ClusterQueueSeries(sum_steps([s.admitted for s in rest]), sum_steps([s.pending for s in rest]),
                               {res: sum_steps([s.borrowed.get(res, []) for s in rest]) for res in resources})
    return queues[:MAX_SERIES] + [(f"other {len(rest):,} ClusterQueues (sum)", total)]


def _kueue(runs: list[RunData], multi: bool) -> list[Panel]:
    counts, borrowed = go.Figure(), go.Figure()
    for r in runs:
        end = r.duration
        for cq, series in _queues(r):
            for label, pts, dash in (("admitted", series.admitted, "solid"), ("pending", series.pending, "dot")):
                counts.add_trace(go.Scatter(x=[p[0] / 3600 for p in pts] + [end / 3600],
                                            y=[p[1] for p in pts] + [pts[-1][1]], mode="lines", line_shape="hv",
                                            line_dash=dash, name=_name(r, multi, f"{cq} {label}")))
            for res, pts in sorted(series.borrowed.items()):
                if any(p[1] for p in pts):
                    borrowed.add_trace(go.Scatter(x=[p[0] / 3600 for p in pts] + [end / 3600],
                                                  y=[p[1] for p in pts] + [pts[-1][1]], mode="lines",
                                                  line_shape="hv", name=_name(r, multi, f"{cq} {res}")))
        marks = r.preemptions
        if marks:
            adm_series = {cq: s.admitted for cq, s in r.cluster_queues.items()}
            counts.add_trace(go.Scatter(
                x=[m[0] / 3600 for m in marks], y=[_step(adm_series.get(m[1], []), m[0] - 1e-9) for m in marks],
                mode="markers", marker={"symbol": "x", "size": 11, "color": "#d62728"},
                name=_name(r, multi, "preempted / evicted workload"),
                hovertext=[html.escape(f"{m[0] / 3600:.2f} h {m[2]}") for m in marks], hoverinfo="text"))
    out = []
    if counts.data:
        counts.update_layout(title="Kueue ClusterQueues: admitted (solid) and pending (dotted) workloads; "
                             "x: preemptions and evictions", xaxis_title=HOURS, yaxis_title="workloads",
                             yaxis_rangemode="tozero")
        out.append(Panel("Kueue", counts))
    if borrowed.data:
        borrowed.update_layout(title="Kueue: quota borrowed from the cohort (status.flavorsUsage[].borrowed)",
                               xaxis_title=HOURS, yaxis_title="borrowed (cores / GiB / devices)",
                               yaxis_rangemode="tozero")
        out.append(Panel("Kueue", borrowed))
    return out


def _nodes(runs: list[RunData], multi: bool) -> list[Panel]:
    # Stacked: the pools' node counts add up to the cluster's, and pools of equal size no longer draw one line on
    # another; a second run's stack is outlined (dashed, no fill) over the first's.
    fig = go.Figure()
    for i, r in enumerate(runs):
        changes = r.node_changes
        below: list[list[tuple[float, float]]] = []  # the pools stacked under the current one
        tops: dict[str, list[tuple[float, float]]] = {}
        # Every pool on the same instants: plotly stacks series point by point and takes a series as 0 at an x it
        # lacks (stackgaps "infer zero"), which would drop a step series to 0 between its changes.
        ts = sorted({0.0, r.duration, *(p[0] for pts in changes.values() for p in pts)})
        for pool, pts in sorted(changes.items()):
            xs = [p[0] for p in pts]
            fig.add_trace(go.Scatter(x=[t / 3600 for t in ts], mode="lines",
                                     y=[pts[k][1] if (k := bisect.bisect_right(xs, t) - 1) >= 0 else 0 for t in ts],
                                     line_shape="hv",
                                     stackgroup=f"nodes-{i}", fill="tonexty" if i == 0 else "none",
                                     line={"dash": "solid" if i == 0 else "dash", "width": 1.5 if i == 0 else 2.5},
                                     hovertemplate="%{y} nodes<extra>%{fullData.name}</extra>",
                                     name=_name(r, multi, f"{pool} nodes")))
            below.append(pts)
            tops[pool] = sum_steps(below)
        notes = r.node_events
        if notes:
            fig.add_trace(go.Scatter(
                x=[n[0] / 3600 for n in notes],
                y=[_step(tops.get(n[1], []), n[0]) for n in notes], mode="markers",
                marker={"symbol": "triangle-down", "size": 11, "color": [n[3] for n in notes]},
                name=_name(r, multi, "autoscaler / Spot / node events"),
                hovertext=[html.escape(f"{n[0] / 3600:.2f} h {n[2]}") for n in notes], hoverinfo="text"))
    if not fig.data:
        return []
    marked = any(r.node_events for r in runs)  # the title promises markers only where there are some
    fig.update_layout(title="Nodes per pool (stacked: the top line is the cluster's total)" + (
                      "; markers: autoscaler, Spot and node lifecycle events" if marked else
                      "; no autoscaler, Spot or node lifecycle events"), xaxis_title=HOURS,
                      yaxis_title="nodes", yaxis_rangemode="tozero")
    return [Panel("Nodes", fig)]


def _training(runs: list[RunData], multi: bool) -> list[Panel]:
    fig, texts = go.Figure(), []
    parts: dict[str, list[tuple[str, float]]] = {}
    for r in runs:
        for ref, rec in sorted(r.training.items()):
            label = html.escape(f"{r.name}: {ref}" if multi else ref)
            if "breakdown" not in rec or never_trained(rec) is not None:  # no step ran: no bar, only the text
                texts.append(f"<details><summary>kubetwin explain job {html.escape(ref)}"
                             f"{' (' + html.escape(r.name) + ')' if multi else ''}</summary><pre>"
                             f"{html.escape(explain_render(rec))}</pre></details>")
                continue
            b = rec["breakdown"]
            rows = [("compute", b["compute"]), ("pipeline bubble", b["bubble"])]
            rows += [(f"comm {k} (exposed)", v) for k, v in sorted(b["comm_by_kind"].items())]
            rows += [("data stall", b["parts"]["data"]), ("checkpoint (amortized)", b["parts"]["checkpoint"])]
            for part, v in rows:
                parts.setdefault(part, []).append((label, v))
            texts.append(f"<details><summary>kubetwin explain job {html.escape(ref)}"
                         f"{' (' + html.escape(r.name) + ')' if multi else ''}</summary><pre>"
                         f"{html.escape(explain_render(rec))}</pre></details>")
    for part, vals in parts.items():
        if any(v for _, v in vals):
            fig.add_trace(go.Bar(y=[v[0] for v in vals], x=[v[1] for v in vals], name=html.escape(part),
                                 orientation="h"))
    if not fig.data and texts:  # only gangs that never trained: no step to draw, but why they did not train
        fig.update_layout(title="Training: no job ran a step (why: `kubetwin explain job` below)", height=200)
        return [Panel("Training", fig, "".join(texts))]
    if not fig.data:
        return []
    fig.update_layout(title="Training step time by part (as `kubetwin explain job` prints it)", barmode="stack",
                      xaxis_title="step time (s per step)", yaxis_title="training job",
                      height=max(300, 40 * len(parts.get("compute", [])) + 160))
    fig.update_yaxes(automargin=True)
    return [Panel("Training", fig, "".join(texts))]


def _gpu_sharing(runs: list[RunData], multi: bool) -> list[Panel]:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("slowdown of shared pods (x their declared run time)",
                                                        "GPU out-of-memory failures (pods)"))
    for r in runs:
        pools = {p: g for p, g in sorted((r.summary.get("gpu_sharing") or {}).items())
                 if g.get("gpu_oom_failures") or (g.get("slowdown_max") or 1) > 1}
        if not pools:
            continue
        names = [html.escape(p) for p in pools]
        fig.add_trace(go.Bar(x=names, y=[g["slowdown_mean"] or 1 for g in pools.values()],
                             name=_name(r, multi, "mean slowdown")), row=1, col=1)
        fig.add_trace(go.Bar(x=names, y=[g["slowdown_max"] or 1 for g in pools.values()],
                             name=_name(r, multi, "max slowdown")), row=1, col=1)
        fig.add_trace(go.Bar(x=names, y=[g["gpu_oom_failures"] for g in pools.values()],
                             name=_name(r, multi, "GPU out-of-memory failures")), row=1, col=2)
    if not fig.data:
        return []
    fig.update_layout(title="GPU sharing outcomes per pool", barmode="group", legend_orientation="h", legend_y=-0.2)
    fig.update_yaxes(rangemode="tozero")
    fig.update_xaxes(title_text="node pool")
    fig.update_yaxes(title_text="slowdown (x declared run time)", row=1, col=1)
    fig.update_yaxes(title_text="pods failed", row=1, col=2)
    return [Panel("GPU sharing", fig)]


def _serving(runs: list[RunData], multi: bool) -> list[Panel]:
    return [Panel("Serving", f) for f in serving_figures(
        [(r.name if multi else "", r.summary, r.timeseries.get("serving") or {}) for r in runs])]


_DCGM_Y = {"%": "GPU utilization (%)", "ratio": "SM active (ratio, 0-1)"}


def panels(runs: list[RunData], axis: TimeAxis | None = None) -> list[Panel]:
    """Every panel the runs have data for, grouped by subsystem in the page's order; those over simulated time
    laid out on the page's one time axis (default: to the longest run's end)."""
    multi = len(runs) > 1
    axis = axis or time_axis(max(r.duration for r in runs), [])
    out = _kueue(runs, multi) + _nodes(runs, multi) + _serving(runs, multi) + _training(runs, multi)
    out += _gpu_sharing(runs, multi)
    if not multi:
        for f in dcgm_figures(runs[0].timeseries):  # from zero: a steady gauge is a level, not a flat band
            f.update_yaxes(rangemode="tozero", title_text=_DCGM_Y.get(f.layout.yaxis.title.text or "",
                                                                        f.layout.yaxis.title.text))
            out.append(Panel("Training", f))
    out += _cluster(runs, multi)
    for p in out:
        if p.fig.layout.xaxis.title.text == HOURS:  # built in simulated hours: on the page's time axis
            p.timed = True
            # bounded first: the coinciding-lines check and the axis rescale walk at most MAX_POINTS a series
            p.bounded = bound_figure(p.fig)
            place(separate(p.fig), axis)
            if (p.fig.layout.yaxis.title.text or "") in _COUNTS:
                _whole(p.fig)
    return out


# y axes that count things: ticks at whole numbers (plotly would tick 1 pending pod at 0.2, 0.4, ...)
_COUNTS = frozenset({"pending pods", "nodes", "workloads", "ready replicas", "requests waiting"})


def _whole(fig: go.Figure) -> None:
    top = max((v for tr in fig.data if tr.y is not None for v in tr.y if isinstance(v, (int, float))), default=0)
    if any(tr.stackgroup for tr in fig.data if isinstance(tr, go.Scatter)):  # the stack's top: the sum
        top = max(top, sum(max((v for v in tr.y if isinstance(v, (int, float))), default=0)
                           for tr in fig.data if isinstance(tr, go.Scatter) and tr.stackgroup))
    if top <= 8:
        fig.update_yaxes(dtick=1, tick0=0)
    else:
        fig.update_yaxes(tickformat=",d")

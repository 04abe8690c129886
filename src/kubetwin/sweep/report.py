"""report.html for a sweep: each metric against each axis (mean over seeds, one dot per case), the Pareto front of
the objective against each constrained metric, and a table of the cases linking to their run folders' reports.
Self-contained (inline SVG, no script) and deterministic: the same results give the same bytes."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from kubetwin.api.sweep import NAMED_METRICS, SECONDS_METRICS
from kubetwin.k8s.units import short_duration
from kubetwin.sweep.cases import Plan
from kubetwin.sweep.goals import Answer, by_seed, case_table
from kubetwin.sweep.results import cell, write_atomic
from kubetwin.validation.sweep import metric_names

W, H = 380, 250
LEFT, RIGHT, TOP, BOTTOM = 70, 28, 14, 46  # px around the plot area: y tick labels and title, x ticks and title
# What each named metric is measured in comes from api.sweep.NAMED_METRICS (seconds, USD); the axis titles of the
# others, written out for a reader: a path metric (summary.json's) has none.
_UNITS = {"gpu_allocation": "% of allocatable GPU-hours", "jobs": "jobs", "jobs_unfinished": "jobs",
          "never_scheduled": "pods", "wasted_gpu_hours": "GPU-hours", "goodput_rps": "requests/s",
          "slo_attainment": "fraction of requests"}
# Tick steps of a duration axis, in seconds: a person reads 30m, 1h, 2h, not 3600, 7200.
_TIME_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900,
               1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)
COLOURS = {"best": "#d62728", "feasible": "#2ca02c", "infeasible": "#9a9a9a", "case": "#1f77b4"}
FRONT, BOUND = "#ff7f0e", "#9467bd"


def _num(v: Any, inf: bool = False) -> float | None:
    """A finite number, or None; with inf, +infinity too (a makespan of a case whose Jobs never all finished)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return float(v) if math.isfinite(v) or (inf and v == math.inf) else None


def _short(v: Any) -> str:
    return cell(round(v, 4) if isinstance(v, float) and math.isfinite(v) else v)


def _is_seconds(metric: str) -> bool:
    return metric in SECONDS_METRICS


def _is_usd(metric: str) -> bool:
    return NAMED_METRICS.get(metric, ("", ""))[1] == "USD"


def _unit(metric: str) -> str:
    if _is_seconds(metric):
        return "duration"
    if _is_usd(metric):
        return "USD per million output tokens" if metric.startswith("usd_per") else "USD"
    return _UNITS.get(metric, "")


def title_of(metric: str) -> str:
    """The axis title: the metric and its unit."""
    unit = _unit(metric)
    return f"{metric} ({unit})" if unit else metric


def _seconds(v: float) -> str:
    return short_duration(v)  # the one rule for a duration (k8s.units), as report.html writes it


def fmt(metric: str, v: Any) -> str:
    """A metric's value as a person writes it: 2h30m, $1,234.56, 45.2%; other values as the table cells are."""
    x = _num(v)
    if x is None:
        return "∞" if isinstance(v, float) and math.isinf(v) else _short(v)
    if _is_seconds(metric):
        return _seconds(x)
    if _is_usd(metric):
        return f"${x:,.2f}"
    if metric == "gpu_allocation":
        return f"{x:.1f}%"
    return _short(v)


def _tick_text(metric: str, v: float) -> str:
    if _is_seconds(metric):
        return _seconds(v)
    if _is_usd(metric):
        return f"${v:,.0f}" if abs(v) >= 100 or v == int(v) else f"${v:,.2f}"
    return f"{v:,.0f}" if v == int(v) else f"{v:.4g}"


def ticks(metric: str, lo: float, hi: float, n: int = 5) -> list[float]:
    """About n evenly spaced round values covering [lo, hi] (durations in round minutes and hours); a single value
    gets a range around it, so an axis never reads "0.0 / 0.0"."""
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
        if lo < 0 <= hi - pad:
            lo = 0.0
    raw = (hi - lo) / n
    if _is_seconds(metric):
        step = next((t for t in _TIME_STEPS if t >= raw), raw)
    else:
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    out = [first]
    while out[-1] < hi - 1e-9 * step:
        out.append(round(first + len(out) * step, 12))
    return out


def _scale(lo: float, hi: float, a: float, b: float) -> Any:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


Point = tuple[float, float, str, str]  # x, y, tooltip, kind (COLOURS' keys)


def _marker(x: float, y: float, tip: str, kind: str) -> str:
    t = f"<title>{html.escape(tip)}</title>"
    if kind == "infeasible":  # a grey cross: a case that breaks a constraint
        return (f"<g class='infeasible' stroke='{COLOURS[kind]}' stroke-width='1.5'>{t}<line x1='{x - 3.5:.1f}' "
                f"y1='{y - 3.5:.1f}' x2='{x + 3.5:.1f}' y2='{y + 3.5:.1f}'/><line x1='{x - 3.5:.1f}' "
                f"y1='{y + 3.5:.1f}' x2='{x + 3.5:.1f}' y2='{y - 3.5:.1f}'/></g>")
    if kind == "best":  # last, larger, ringed: the answer on top of everything
        return (f"<circle class='best' cx='{x:.1f}' cy='{y:.1f}' r='7' fill='{COLOURS[kind]}' stroke='#000' "
                f"stroke-width='2'>{t}</circle>")
    return (f"<circle class='{kind}' cx='{x:.1f}' cy='{y:.1f}' r='4' fill='{COLOURS[kind]}' fill-opacity='0.8'>"
            f"{t}</circle>")


Box = tuple[float, float, float, float]  # left, top, right, bottom (px) of a text drawn on a chart
CHAR_PX = 6.2  # px per character of the charts' 10 px sans-serif, bold (an estimate that errs wide)


def _text_box(x: float, y: float, text: str, anchor: str = "start") -> Box:
    """Where an SVG <text> at (x, baseline y) lies."""
    w = CHAR_PX * len(text)
    left = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
    return (left, y - 9, left + w, y + 3)


def _hits(box: Box, boxes: list[Box]) -> bool:
    return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes)


def _label_at(px: float, py: float, text: str, taken: list[Box], frame: Box) -> tuple[float, float, str]:
    """Where the winner's name goes: beside its mark (above right, above left, below right, below left, then a
    line further up or down), inside the plot area, at the first place where it covers no other label (tick,
    threshold); else above right."""
    left, top, right, bottom = frame
    w = CHAR_PX * len(text)
    tries = []
    for dy in (-8.0, 17.0, -20.0, 29.0, -32.0):
        for side in (1, -1):
            x = px + 9 if side > 0 else px - 9 - w
            x, y = min(max(x, left + 2), right - w - 2), min(max(py + dy, top + 10), bottom - 4)
            tries.append((x, y))
    for x, y in tries:
        if not _hits(_text_box(x, y, text), taken):
            return x, y, "start"
    return tries[0][0], tries[0][1], "start"


def _svg(title: str, xmetric: str, ymetric: str, points: list[Point], xticks: list[str] | None,
         line: list[tuple[float, float]] | None = None, hlines: list[tuple[float, str]] | None = None,
         vlines: list[tuple[float, str]] | None = None, xtitle: str | None = None) -> str:
    """A scatter plot: points (x, y, tooltip, kind) with round ticks and titled axes; categorical x when xticks is
    given (points of one category spread a little, so none hides another); line: the Pareto front; hlines/vlines:
    constraints (value, label) as dashed thresholds. The winner is drawn last."""
    if not points:
        return f"<figure><figcaption>{html.escape(title)}: no values</figcaption></figure>"
    hlines, vlines = hlines or [], vlines or []
    ys = [p[1] for p in points if math.isfinite(p[1])] + [v for v, _ in hlines] or [0.0]
    yt = ticks(ymetric, min(ys), max(ys))
    infinite = any(math.isinf(p[1]) for p in points)  # the infinity row gets a line of its own above the ticks
    scale_y = _scale(yt[0], yt[-1], H - BOTTOM, TOP + (24 if infinite else 12))

    def sy(v: float) -> float:  # an infinite value (a makespan never reached) on a line of its own at the top
        return TOP + 2 if math.isinf(v) else scale_y(v)

    if xticks:
        sx = _scale(-0.5, len(xticks) - 0.5, LEFT, W - RIGHT)
        xt: list[tuple[float, str]] = [(float(i), t) for i, t in enumerate(xticks)]
    else:
        xs = [p[0] for p in points] + [v for v, _ in vlines]
        xv = ticks(xmetric, min(xs), max(xs))
        sx = _scale(xv[0], xv[-1], LEFT, W - RIGHT)
        xt = [(v, _tick_text(xmetric, v)) for v in xv]
    x0, x1, y0, y1 = LEFT, W - RIGHT, H - BOTTOM, TOP
    out = [f"<figure><svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' role='img' font-size='10'>"]
    taken: list[Box] = []  # the labels drawn so far: a later one goes where it covers none of them
    for v in yt:
        out.append(f"<line x1='{x0}' y1='{sy(v):.1f}' x2='{x1}' y2='{sy(v):.1f}' stroke='#eee'/>"
                   f"<text x='{x0 - 4}' y='{sy(v) + 3:.1f}' text-anchor='end'>"
                   f"{html.escape(_tick_text(ymetric, v))}</text>")
        taken.append(_text_box(x0 - 4, sy(v) + 3, _tick_text(ymetric, v), "end"))
    if infinite:
        out.append(f"<text x='{LEFT - 4}' y='{TOP + 5}' text-anchor='end'>&#8734;</text>")
    for v, label in xt:
        out.append(f"<line x1='{sx(v):.1f}' y1='{y0}' x2='{sx(v):.1f}' y2='{y0 + 4}' stroke='#999'/>"
                   f"<text x='{sx(v):.1f}' y='{y0 + 15}' text-anchor='middle'>{html.escape(label)}</text>")
    out.append(f"<line x1='{x0}' y1='{y0}' x2='{x1}' y2='{y0}' stroke='#999'/>"
               f"<line x1='{x0}' y1='{y1}' x2='{x0}' y2='{y0}' stroke='#999'/>")
    for v, label in hlines:  # the label above its line, or under it where another label is
        ty = sy(v) - 3 if not _hits(_text_box(x1 - 2, sy(v) - 3, label, "end"), taken) else sy(v) + 12
        taken.append(_text_box(x1 - 2, ty, label, "end"))
        out.append(f"<g class='constraint'><line x1='{x0}' y1='{sy(v):.1f}' x2='{x1}' y2='{sy(v):.1f}' "
                   f"stroke='{BOUND}' stroke-width='1.5' stroke-dasharray='5,3'/><text x='{x1 - 2}' "
                   f"y='{ty:.1f}' text-anchor='end' fill='{BOUND}'>{html.escape(label)}</text></g>")
    for v, label in vlines:
        ty = y1 + 9 if not _hits(_text_box(sx(v) + 3, y1 + 9, label), taken) else y1 + 21
        taken.append(_text_box(sx(v) + 3, ty, label))
        out.append(f"<g class='constraint'><line x1='{sx(v):.1f}' y1='{y1}' x2='{sx(v):.1f}' y2='{y0}' "
                   f"stroke='{BOUND}' stroke-width='1.5' stroke-dasharray='5,3'/><text x='{sx(v) + 3:.1f}' "
                   f"y='{ty:.1f}' fill='{BOUND}'>{html.escape(label)}</text></g>")
    order = {"infeasible": 0, "case": 1, "feasible": 2, "best": 4}
    drawn = sorted(enumerate(points), key=lambda ip: (order[ip[1][3]], ip[0]))
    spread: dict[float, int] = {}
    placed = []
    for _, (x, y, tip, kind) in drawn:
        px = sx(x)
        if xticks and kind != "best":  # spread a category's points over a few px, in case order
            k = spread[x] = spread.get(x, -1) + 1
            px += ((k % 9) - 4) * 2.5
        placed.append((px, sy(y), tip, kind))
    if line:
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(line))
        out.append(f"<polyline class='front' points='{pts}' fill='none' stroke='{FRONT}' stroke-width='2'/>")
    for px, py, tip, kind in placed:
        if kind == "best":  # drawn below, last
            continue
        out.append(_marker(px, py, tip, kind))
    for px, py, tip, kind in placed:  # the winner over the front and every other case
        if kind == "best":
            out.append(_marker(px, py, tip, kind))
            name = tip.split(":")[0]  # the only point named on the chart (the others: hover, their <title>)
            lx, ly, _ = _label_at(px, py, name, taken, (x0, y1, x1, y0))
            out.append(f"<text x='{lx:.1f}' y='{ly:.1f}' font-weight='bold' "
                       f"fill='{COLOURS['best']}'>{html.escape(name)}</text>")
    out.append(f"<text x='{(x0 + x1) / 2:.0f}' y='{H - 8}' font-size='11' text-anchor='middle'>"
               f"{html.escape(xtitle or title_of(xmetric))}</text>"
               f"<text transform='translate(12,{(y0 + y1) / 2:.0f}) rotate(-90)' font-size='11' "
               f"text-anchor='middle'>{html.escape(title_of(ymetric))}</text>"
               f"</svg><figcaption>{html.escape(title)}</figcaption></figure>")
    return "".join(out)


LEGEND = (f"<p class='legend'><span style='color:{COLOURS['best']}'>&#11044;</span> best feasible case (drawn on "
          f"top, named) &nbsp; <span style='color:{COLOURS['feasible']}'>&#9679;</span> feasible &nbsp; "
          f"<span style='color:{COLOURS['infeasible']}'>&#10005;</span> infeasible (breaks a constraint) &nbsp; "
          f"<span style='color:{FRONT}'>&#9473;</span> Pareto front &nbsp; <span style='color:{BOUND}'>"
          "&#9476;</span> constraint threshold. Each mark: one case, its mean over seeds.</p>")


def render(plan: Plan, out: Path, rows: list[dict[str, Any]], answer: Answer | None) -> str:
    cases = list(case_table(plan, rows).values())
    metrics = metric_names(plan.sweep)
    axes = plan.axes
    feasible = {c["case"] for c in answer.feasible} if answer else set()
    best = answer.best["case"] if answer and answer.best else None

    def kind(c: dict[str, Any]) -> str:
        if answer is None:
            return "case"
        return "best" if c["case"] == best else "feasible" if c["case"] in feasible else "infeasible"

    def bounds_on(metric: str) -> list[tuple[float, str]]:
        """The constraints on a metric, as thresholds to draw: (value, "makespan <= 2h30m")."""
        return [(float(b.value), b.text) for b in (answer.bounds if answer else []) if b.metric == metric
                and _num(b.value) is not None]

    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>kubetwin sweep report: "
             f"{html.escape(plan.sweep.metadata.name)}</title><style>body{{font-family:sans-serif;margin:24px}}"
             "figure{display:inline-block;margin:6px}figcaption{font-size:12px;text-align:center}"
             "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left}"
             "tr:nth-child(even){background:#f6f6f6}.best{font-weight:bold}.legend{font-size:13px}</style></head><body>",
             f"<h1>kubetwin sweep report: {html.escape(plan.sweep.metadata.name)}</h1>",
             f"<p>{len(cases)} cases, {len(rows)} runs (cases &times; seeds); failed runs: "
             f"{sum(1 for r in rows if r.get('error'))}.</p>", LEGEND if answer is not None else
             "<p class='legend'>Each dot: one case, its mean over seeds.</p>"]
    if answer is not None:
        goal = f"{'minimize' if answer.minimize else 'maximize'} {answer.objective}" + (
            f" subject to {', '.join(b.label for b in answer.bounds)}" if answer.bounds else "")
        found = (f"best feasible case: <b>{answer.best['case']}</b> (" + ", ".join(
            f"{html.escape(k)}={html.escape(_short(v))}" for k, v in answer.best["values"].items()) +
            f"), {html.escape(answer.objective)} "
            f"{html.escape(fmt(answer.objective, answer.best['metrics'][answer.objective]))}"
            if answer.best else "no feasible case")
        parts.append(f"<h2>Goal</h2><p>{html.escape(goal)}: {found}; {len(answer.feasible)} of {len(cases)} "
                     "cases feasible.</p>")
        if answer.best is not None:  # the winner seed by seed: what each constraint was judged on
            b = answer.best
            parts.append(f"<table><caption>{html.escape(b['case'])} seed by seed</caption><tr><th></th>" + "".join(
                f"<th>seed {s}</th>" for s in b["seed_ids"]) + "<th>judged</th><th>holds</th></tr>")
            judged_metrics = [answer.objective] + [bd.metric for bd in answer.bounds]  # by_seed's rows, in order
            for judged, m in zip(by_seed(answer, b), judged_metrics, strict=True):
                ok = "" if judged["ok"] is None else "yes" if judged["ok"] else "no"
                parts.append(f"<tr><td>{html.escape(judged['what'])}</td>" + "".join(
                    f"<td title='{html.escape(_short(v))}'>{html.escape(fmt(m, v))}</td>" for v in judged["values"])
                    + f"<td title='{html.escape(_short(judged['judged']))}'>{html.escape(fmt(m, judged['judged']))}"
                    f"</td><td>{ok}</td></tr>")
            parts.append("</table>")
        obj = answer.objective
        for metric, front in answer.fronts.items():
            pts = [(x, y, f"{c['case']}: {obj} {fmt(obj, x)}, {metric} {fmt(metric, y)}", kind(c))
                   for c in cases if (x := _num(c["metrics"].get(obj))) is not None
                   and (y := _num(c["metrics"].get(metric))) is not None]
            line = [(x, y) for c in front if (x := _num(c["metrics"][obj])) is not None
                    and (y := _num(c["metrics"][metric])) is not None]
            parts.append(_svg(f"Pareto front: {obj} against {metric} (orange line; dashed: the constraint)", obj,
                              metric, pts, None, line, hlines=bounds_on(metric), vlines=bounds_on(obj)))
    parts.append("<h2>Metrics against each axis</h2>")
    for m in metrics:
        parts.append(f"<h3>{html.escape(m)}</h3>")
        for a_i, a in enumerate(axes):
            labels = [_short(v) for v in a.labels]
            pts = [(float(plan.case(int(c["case"][1:])).choice[a_i]), y,
                    f"{c['case']}: {a.name}={_short(c['values'][a.name])}, {m} {fmt(m, y)}", kind(c))
                   for c in cases if (y := _num(c["metrics"].get(m), inf=True)) is not None]
            parts.append(_svg(f"{m} against {a.name}", a.name, m, pts, labels, hlines=bounds_on(m),
                              xtitle=f"{a.name} ({a.object} {a.path or 'patch'})"))
    head = ["case", *(a.name for a in axes), *metrics, "seeds", "run folders", "errors"]
    parts.append("<h2>Cases</h2><table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
    for c in cases:
        links = []
        for r in sorted((r for r in rows if r["case"] == c["case"]), key=lambda r: r["seed"]):
            report = out / "runs" / f"{c['case']}-s{r['seed']}" / "report.html"
            if report.is_file():
                links.append(f"<a href='runs/{c['case']}-s{r['seed']}/report.html'>seed {r['seed']}</a>")
        cls = " class='best'" if c["case"] == best else ""
        parts.append(f"<tr{cls}><td>{c['case']}</td>" + "".join(
            f"<td>{html.escape(_short(c['values'][a.name]))}</td>" for a in axes) + "".join(
            f"<td title='{html.escape(_short(c['metrics'][m]))}'>{html.escape(fmt(m, c['metrics'][m]))}</td>"
            for m in metrics) +
            f"<td>{c['seeds']}</td><td>{' '.join(links)}</td><td>{html.escape('; '.join(c['errors']))}</td></tr>")
    parts.append("</table></body></html>\n")
    return "".join(parts)


def write_report(plan: Plan, out: Path, rows: list[dict[str, Any]], answer: Answer | None) -> Path:
    path = out / "report.html"
    write_atomic(path, render(plan, out, rows, answer).encode())
    return path

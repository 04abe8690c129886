"""report.html for a sweep: each metric against each axis (mean over seeds, one dot per case), the Pareto front of
the objective against each constrained metric, and a table of the cases linking to their run folders' reports.
Self-contained (inline SVG, no script) and deterministic: the same results give the same bytes."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from kubetwin.sweep.cases import Plan
from kubetwin.sweep.goals import Answer, by_seed, case_table
from kubetwin.sweep.results import cell, write_atomic
from kubetwin.validation.sweep import metric_names

W, H, PAD = 320, 200, 40


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _short(v: Any) -> str:
    return cell(round(v, 4) if isinstance(v, float) and math.isfinite(v) else v)


def _scale(lo: float, hi: float, a: float, b: float) -> Any:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _svg(title: str, xlabel: str, ylabel: str, points: list[tuple[float, float, str, str]], xticks: list[str] | None,
         line: list[tuple[float, float]] | None = None) -> str:
    """A scatter plot: points (x, y, tooltip, colour); categorical x when xticks is given."""
    if not points:
        return f"<figure><figcaption>{html.escape(title)}: no values</figcaption></figure>"
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    sx = _scale(min(xs) - (0.5 if xticks else 0), max(xs) + (0.5 if xticks else 0), PAD, W - 10)
    sy = _scale(min(ys), max(ys), H - PAD, 10)
    out = [f"<figure><svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' role='img'>",
           f"<line x1='{PAD}' y1='{H - PAD}' x2='{W - 10}' y2='{H - PAD}' stroke='#999'/>",
           f"<line x1='{PAD}' y1='10' x2='{PAD}' y2='{H - PAD}' stroke='#999'/>",
           f"<text x='{PAD - 4}' y='14' font-size='10' text-anchor='end'>{_short(max(ys))}</text>",
           f"<text x='{PAD - 4}' y='{H - PAD}' font-size='10' text-anchor='end'>{_short(min(ys))}</text>"]
    if xticks:
        for i, t in enumerate(xticks):
            out.append(f"<text x='{sx(i):.1f}' y='{H - PAD + 14}' font-size='10' text-anchor='middle'>"
                       f"{html.escape(t)}</text>")
    else:
        out.append(f"<text x='{PAD}' y='{H - PAD + 14}' font-size='10'>{_short(min(xs))}</text>")
        out.append(f"<text x='{W - 10}' y='{H - PAD + 14}' font-size='10' text-anchor='end'>{_short(max(xs))}</text>")
    if line:
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in line)
        out.append(f"<polyline points='{pts}' fill='none' stroke='#d62728' stroke-width='1.5'/>")
    for x, y, tip, colour in points:
        out.append(f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='4' fill='{colour}'><title>{html.escape(tip)}"
                   "</title></circle>")
    out.append(f"<text x='{(W + PAD) / 2:.0f}' y='{H - 6}' font-size='11' text-anchor='middle'>"
               f"{html.escape(xlabel)}</text></svg><figcaption>{html.escape(title)}</figcaption></figure>")
    return "".join(out)


def render(plan: Plan, out: Path, rows: list[dict[str, Any]], answer: Answer | None) -> str:
    cases = list(case_table(plan, rows).values())
    metrics = metric_names(plan.sweep)
    axes = plan.axes
    feasible = {c["case"] for c in answer.feasible} if answer else set()
    best = answer.best["case"] if answer and answer.best else None

    def colour(c: dict[str, Any]) -> str:
        return "#d62728" if c["case"] == best else "#2ca02c" if c["case"] in feasible else "#1f77b4"

    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>kubetwin sweep report: "
             f"{html.escape(plan.sweep.metadata.name)}</title><style>body{{font-family:sans-serif;margin:24px}}"
             "figure{display:inline-block;margin:6px}figcaption{font-size:12px;text-align:center}"
             "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left}"
             "tr:nth-child(even){background:#f6f6f6}.best{font-weight:bold}</style></head><body>",
             f"<h1>kubetwin sweep report: {html.escape(plan.sweep.metadata.name)}</h1>",
             f"<p>{len(cases)} cases, {len(rows)} runs (cases &times; seeds); failed runs: "
             f"{sum(1 for r in rows if r.get('error'))}. Dots: mean over seeds; red: best feasible case, green: "
             "feasible cases.</p>"]
    if answer is not None:
        goal = f"{'minimize' if answer.minimize else 'maximize'} {answer.objective}" + (
            f" subject to {', '.join(b.label for b in answer.bounds)}" if answer.bounds else "")
        found = (f"best feasible case: <b>{answer.best['case']}</b> (" + ", ".join(
            f"{html.escape(k)}={html.escape(_short(v))}" for k, v in answer.best["values"].items()) +
            f"), {html.escape(answer.objective)} {_short(answer.best['metrics'][answer.objective])}"
            if answer.best else "no feasible case")
        parts.append(f"<h2>Goal</h2><p>{html.escape(goal)}: {found}; {len(answer.feasible)} of {len(cases)} "
                     "cases feasible.</p>")
        if answer.best is not None:  # the winner seed by seed: what each constraint was judged on
            b = answer.best
            parts.append(f"<table><caption>{html.escape(b['case'])} seed by seed</caption><tr><th></th>" + "".join(
                f"<th>seed {s}</th>" for s in b["seed_ids"]) + "<th>judged</th><th>holds</th></tr>")
            for judged in by_seed(answer, b):
                ok = "" if judged["ok"] is None else "yes" if judged["ok"] else "no"
                parts.append(f"<tr><td>{html.escape(judged['what'])}</td>" + "".join(
                    f"<td>{html.escape(_short(v))}</td>" for v in judged["values"]) +
                    f"<td>{html.escape(_short(judged['judged']))}</td><td>{ok}</td></tr>")
            parts.append("</table>")
        for metric, front in answer.fronts.items():
            pts = [(x, y, f"{c['case']}: {answer.objective} {_short(x)}, {metric} {_short(y)}", colour(c))
                   for c in cases if (x := _num(c["metrics"].get(answer.objective))) is not None
                   and (y := _num(c["metrics"].get(metric))) is not None]
            line = [(x, y) for c in front if (x := _num(c["metrics"][answer.objective])) is not None
                    and (y := _num(c["metrics"][metric])) is not None]
            parts.append(_svg(f"Pareto front: {answer.objective} against {metric} (red line)", answer.objective,
                              metric, pts, None, line))
    parts.append("<h2>Metrics against each axis</h2>")
    for m in metrics:
        parts.append(f"<h3>{html.escape(m)}</h3>")
        for a_i, a in enumerate(axes):
            labels = [_short(v) for v in a.labels]
            pts = [(float(plan.case(int(c["case"][1:])).choice[a_i]), y,
                    f"{c['case']}: {a.name}={_short(c['values'][a.name])}, {m} {_short(y)}", colour(c))
                   for c in cases if (y := _num(c["metrics"].get(m))) is not None]
            parts.append(_svg(f"{m} against {a.name}", a.name, m, pts, labels))
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
            f"<td>{html.escape(_short(c['metrics'][m]))}</td>" for m in metrics) +
            f"<td>{c['seeds']}</td><td>{' '.join(links)}</td><td>{html.escape('; '.join(c['errors']))}</td></tr>")
    parts.append("</table></body></html>\n")
    return "".join(parts)


def write_report(plan: Plan, out: Path, rows: list[dict[str, Any]], answer: Answer | None) -> Path:
    path = out / "report.html"
    write_atomic(path, render(plan, out, rows, answer).encode())
    return path

"""report.html: one self-contained page (plotly.js inlined once), byte-identical for identical inputs.

Built from a run folder's files only (kubetwin.report.rundata), so the run writes it at its end and
`kubetwin report RUN [RUN ...]` rebuilds it or puts several runs side by side. docs/report.md describes the page.
"""

from __future__ import annotations

import html
import shutil
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from kubetwin.k8s.units import short_duration
from kubetwin.report.axes import SYNC_JS, TimeAxis
from kubetwin.report.compare import difference
from kubetwin.report.headline import headline_rows
from kubetwin.report.pagebounds import bound_figure, bound_headline, bound_rows
from kubetwin.report.panels import Panel, page_axis, panels, timeline_figure
from kubetwin.report.rundata import HistoryFeed, RunData, Version, load_run
from kubetwin.report.timeline import Row, rows_of

__all__ = ["compare_page", "write_report"]

_SEED = "n/a: a seed, not a quantity"  # the difference column's cell for the seed row

STYLE = ("body{font-family:sans-serif;margin:24px;max-width:1200px}th{text-align:left;padding-right:24px}"
         "td{padding-right:24px}table{border-collapse:collapse}tr:nth-child(even){background:#f6f6f6}"
         "h2{border-bottom:1px solid #ccc;margin-top:32px}.look li{margin:2px 0}pre{font-size:12px}"
         ".timeline{max-height:900px;overflow-y:auto;border:1px solid #eee}"
         # every time panel the same box as the timeline's (border, scrollbar gutter), so their plot areas align
         "section.timed{position:relative;border:1px solid transparent;overflow-y:auto;scrollbar-gutter:stable}"
         "section.timed.timeline{border-color:#eee}"
         ".kt-cross{position:absolute;width:0;border-left:1px solid #444;pointer-events:none;display:none;z-index:5}"
         # the values at the cursor above the plot area, not in it (report.axes.SYNC_JS): plotly's unified hover
         # box, drawn over the series, is read and hidden
         "section.timed .hoverlayer .legend{visibility:hidden}"
         ".kt-readout{position:absolute;font-size:12px;line-height:16px;background:rgba(255,255,255,0.92);"
         "pointer-events:none;display:none;z-index:6;padding:0 4px;box-sizing:border-box}"
         ".kt-readout i{display:inline-block;width:14px;height:3px;margin:0 4px 3px 10px;vertical-align:middle}"
         "td.diff{color:#555}")


def _fig_html(fig: go.Figure, div_id: str, note: str = "", bounded: list[str] | None = None) -> str:
    """The figure's div, bounded in size (report.pagebounds; `bounded`: the notes of a figure bounded before), after
    a line on what the bounds left out."""
    notes = ([note] if note else []) + (bounded or []) + bound_figure(fig)
    fig.update_layout(template="plotly_white")
    if fig.layout.margin.autoexpand is not False:  # a time panel's margins are the page's (report.axes.place)
        fig.update_layout(margin={"l": 60, "r": 20, "t": fig.layout.margin.t or 60, "b": 50})
    if fig.layout.height is None:
        fig.update_layout(height=380)
    if fig.layout.showlegend is None:  # plotly hides a lone trace's legend, and with it the pool's name
        fig.update_layout(showlegend=True)
    text = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes)
    return text + fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})


def headline(run: RunData) -> list[tuple[str, str]]:
    """The header's numbers: what ran, how long, then the run's headline rows (report.headline, as the console)."""
    s = run.summary
    rows = [("scenario", str((s.get("scenario") or {}).get("name") or run.name)), ("run folder", run.name),
            ("simulated time", short_duration(run.duration)),
            ("seed", str((s.get("scenario") or {}).get("seed", "-")))]
    rows += [("pods", str(s["pods"]["total"]))] if "total" in s["pods"] else []
    # The console prints waits in seconds (a contract); the page writes them as a person would (23h30m).
    return rows + headline_rows(s, run.training)


def look_at(run: RunData, rows: list[Row]) -> list[str]:
    """A short list of what deserves a look: pods that never ran, the longest waits, money on idle GPUs."""
    out = []
    never = run.never_bound
    if never:
        names = ", ".join(f"{ns}/{n}" for _, ns, n in never[:8]) + (f" and {len(never) - 8} more" if len(never) > 8
                                                                   else "")
        out.append(f"{len(never)} pod(s) never ran (never bound to a node): {names}")
    waited = ((r.seconds_in("Pending") + r.seconds_in("QuotaReserved"), r.label) for r in rows)
    waits = sorted((w for w in waited if w[0] >= 300), key=lambda w: (-w[0], w[1]))
    if waits:
        out.append("waited longest before running: " + ", ".join(
            f"{label} ({short_duration(w)})" for w, label in waits[:5]))
    lost = [(r.label, n) for r in rows if (n := sum(s in ("Preempted", "Evicted") for s in r.states()))]
    if lost:
        out.append("preempted or evicted: " + ", ".join(f"{label} ({n}x)" for label, n in lost[:6])
                   + (f" and {len(lost) - 6} more" if len(lost) > 6 else ""))
    failed = [r.label for r in rows if r.segments and r.segments[-1].state == "Failed"]
    if failed:
        out.append("ended Failed: " + ", ".join(failed[:6]) + (f" and {len(failed) - 6} more" if len(failed) > 6
                                                               else ""))
    cost = run.summary["cost"]
    idle = []
    for pool, g in sorted(run.summary["gpu_allocation"].items()):
        alloc, req = g.get("gpu_hours_allocatable") or 0, g.get("gpu_hours_requested") or 0
        if alloc > 0 and alloc > req:
            # Twin assumption: a GPU pool's whole node cost is for its GPUs, so the idle share of GPU-hours is the
            # idle share of the pool's cost.
            idle.append((cost["by_pool"].get(pool, 0.0) * (alloc - req) / alloc, pool, alloc - req))
    if any(usd >= 0.01 for usd, _, _ in idle):
        out.append("money on idle GPUs (allocatable, not requested): " + ", ".join(
            f"{pool} ${usd:,.2f} ({h:,.1f} GPU-h)" for usd, pool, h in sorted(idle, reverse=True) if usd >= 0.01))
    return out


def _panel_html(ps: list[Panel], start: int) -> str:
    parts, group = [], None
    for i, p in enumerate(ps, start):
        if p.group != group:
            group = p.group
            parts.append(f"<h2>{html.escape(group)}</h2>")
        parts.append(f"<section class='panel{' timed' if p.timed else ''}' data-group='{html.escape(p.group)}'>"
                     f"{_fig_html(p.fig, f'kubetwin-fig-{i}', bounded=p.bounded)}{p.text}</section>")
    return "".join(parts)


def _timeline(run: RunData, drawn: tuple[list[Row], str], title: str, index: int, axis: TimeAxis) -> str:
    rows, note = drawn
    if not rows:
        return ""
    return (f"<section class='panel timed timeline' data-group='Timeline' data-run='{html.escape(run.name)}'>"
            f"{_fig_html(timeline_figure(rows, title, axis.end, axis), f'kubetwin-fig-{index}', note)}</section>")


def _page_around(title: str) -> tuple[str, str]:
    """The page's text before and after plotly.js (inlined once, before every figure: the page works offline and
    from file://); the body goes at the end of the first."""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{STYLE}"
            "</style><script type='text/javascript'>",
            f"</script></head><body><h1>{html.escape(title)}</h1>")


def _page(title: str, body: str) -> str:
    before, after = _page_around(title)
    return f"{before}{get_plotlyjs()}{after}{body}{_SYNC}</body></html>\n"


def _write_page(path: Path, title: str, body: str) -> None:
    """_page's bytes written piece by piece: plotly.js (4.6 MB) copied from its file, never held as a string,
    nor the page (with `kubetwin run`'s objects still in memory, each copy adds to the run's peak)."""
    before, after = _page_around(title)
    bundle = resources.files("plotly") / "package_data" / "plotly.min.js"  # what get_plotlyjs() reads
    with path.open("wb") as f:
        f.write(before.encode())
        if bundle.is_file():
            with bundle.open("rb") as js:
                shutil.copyfileobj(js, f)
        else:
            f.write(get_plotlyjs().encode())
        f.write(f"{after}{body}{_SYNC}</body></html>\n".encode())


_SYNC = f"<script type='text/javascript'>{SYNC_JS}</script>"


def _look_html(items: list[str]) -> str:
    if not items:
        return "<p>Nothing stands out: every pod ran, no long waits, no evictions.</p>"
    return "<ul class='look'>" + "".join(f"<li>{html.escape(x)}</li>" for x in items) + "</ul>"


def _report_body(run: RunData) -> tuple[str, str]:
    """One run's page (title, body): header, what to look at, the timeline, then a panel group per subsystem."""
    rows = rows_of(run)
    table = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                    for k, v in bound_headline(headline(run)))
    drawn = bound_rows(rows)
    axis = page_axis([run], [drawn[0]])
    body = (f"<table class='headline'>{table}</table><h2>What to look at</h2>{_look_html(look_at(run, rows))}"
            + ("<h2>Timeline</h2>" if rows else "")
            + _timeline(run, drawn, f"Jobs, workloads and pods over time ({len(rows)} rows; hover for reasons "
                        "and events; drag to zoom)", 0, axis)
            + _panel_html(panels([run], axis), 1))
    return f"kubetwin run report: {run.name}", body


def write_report(run_dir: Path, name: str | None = None, history: Iterable[Version] | None = None,
                 path: Path | None = None, feed: HistoryFeed | None = None) -> Path:
    """Write report.html (default run_dir/report.html) from the run folder's files; `name` labels the run
    (default: the folder's); history: history.jsonl's versions when the caller holds them, feed: what the run
    built of them as it recorded them (rundata.load_run)."""
    path = path or run_dir / "report.html"
    _write_page(path, *_report_body(load_run(run_dir, name, history, feed)))
    return path


def compare_page(run_dirs: list[Path]) -> str:
    """Several runs on one page: their headline numbers side by side, each panel with the runs overlaid, and
    their timelines one under the other on the same time axis."""
    runs = [load_run(d) for d in run_dirs]
    names = [r.name for r in runs]
    for r, d in zip(runs, run_dirs, strict=True):  # two folders of one name (a/run, b/run): with their parent's
        if names.count(r.name) > 1:
            r.name = f"{d.resolve().parent.name}/{r.name}"
    tables = [dict(headline(r)) for r in runs]
    keys = list(dict.fromkeys(k for t in tables for k in t if k not in ("scenario", "run folder")))
    # Each run after the first: its difference from the first (absolute and %), number by number (report.compare).
    head = ("<tr><th></th>" + "".join(f"<th>{html.escape(r.name)}</th>" for r in runs)
            + "".join(f"<th>{html.escape(r.name)} &minus; {html.escape(runs[0].name)}</th>" for r in runs[1:])
            + "</tr>")
    body_rows = "".join(
        f"<tr><th>{html.escape(k)}</th>" + "".join(f"<td>{html.escape(t.get(k, '-'))}</td>" for t in tables)
        + "".join(f"<td class='diff'>{html.escape(_SEED if k == 'seed' else difference(tables[0].get(k), t.get(k)))}"
                  "</td>"
                  for t in tables[1:]) + "</tr>" for k in keys)
    all_rows = [rows_of(r) for r in runs]
    looks = "".join(f"<h3>{html.escape(r.name)}</h3>{_look_html(look_at(r, rows))}"
                    for r, rows in zip(runs, all_rows, strict=True))
    drawn = [bound_rows(rows) for rows in all_rows]
    axis = page_axis(runs, [d[0] for d in drawn])  # one axis: both timelines start at the same pixel and hour
    timelines = ""
    for i, (r, d) in enumerate(zip(runs, drawn, strict=True)):
        timelines += _timeline(r, d, f"{r.name}: jobs, workloads and pods ({len(all_rows[i])} rows)", i, axis)
    body = (f"<table class='headline'>{head}{body_rows}</table><h2>What to look at</h2>{looks}"
            + ("<h2>Timeline</h2>" + timelines if timelines else "")
            + _panel_html(panels(runs, axis), len(runs)))
    return _page("kubetwin comparison: " + " vs ".join(r.name for r in runs), body)

"""report.html in a real headless browser: Debian's chromium driven by Playwright (its own browser download is not
reachable here, so the system browser is launched by path; `make test` installs it when missing).

Each example's page must load from file:// with no console error, draw every panel (a plotly SVG with data, not an
empty frame) and show the states known objects went through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetwin.cli.main import app

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no /usr/bin/chromium (make test installs it)")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# Every plotly figure on the page: rendered, with at least one trace holding a point.
PANELS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
    id: gd.id,
    title: (gd.layout && gd.layout.title && (gd.layout.title.text || gd.layout.title)) || '',
    svg: !!gd.querySelector('svg.main-svg'),
    points: (gd.data || []).reduce((n, tr) => n + ((tr.x || tr.y || []).length || 0), 0),
    drawn: gd.querySelectorAll('.trace, .point, .scatterlayer path').length,
    sections: document.querySelectorAll('section.panel').length,
}))"""
# The timeline's bars: (state, row label, hover text) for every segment.
TIMELINE_JS = """() => { const gd = document.querySelector('section.timeline .js-plotly-plot');
    return gd.data.filter(tr => tr.type === 'bar')
        .flatMap(tr => tr.y.map((y, i) => [tr.name, y, tr.hovertext[i]])); }"""


def _run(tmp: Path, example: str) -> Path:
    from typer.testing import CliRunner

    out = tmp / example
    res = CliRunner().invoke(app, ["run", str(EXAMPLES / f"{example}.yaml"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out / "report.html"


@pytest.fixture(scope="module")
def browser() -> Any:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser: Any, page_path: Path) -> tuple[Any, list[str]]:
    """The page once plotly has drawn, and the console errors and page errors it raised (a list that keeps
    filling while the page is open)."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_path.as_uri())
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
    return page, errors


def _load(browser: Any, page_path: Path) -> tuple[list[dict], list[list[str]], list[str]]:
    page, errors = _open(browser, page_path)
    panels = page.evaluate(PANELS_JS)
    bars = page.evaluate(TIMELINE_JS) if page.query_selector("section.timeline") else []
    if bars:  # every row labelled: one y tick per row
        ticks = page.evaluate("() => Array.from(document.querySelectorAll('section.timeline .ytick text'))"
                              ".map(e => e.textContent)")
        assert sorted(ticks) == sorted({row for _, row, _ in bars})
    page.close()
    return panels, bars, errors


def _assert_panels(panels: list[dict]) -> None:
    assert panels and len(panels) == panels[0]["sections"]  # one figure per panel section, all of them drawn
    for p in panels:
        assert p["svg"] and p["points"] > 0 and p["drawn"] > 0, p


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("reports")
    return {e: _run(tmp, e) for e in ("kueue-cohort-borrowing", "spot-vs-on-demand", "serving-llama3-epp")}


def test_kueue_example_shows_the_reclaimed_sweeps_as_preempted(browser: Any, runs: dict[str, Path]) -> None:
    """research/sweep-c and sweep-d are evicted at 1 h when prod reclaims its quota (InCohortReclamation), run
    again from 3 h, and succeed; sweep-a never leaves the cohort's quota."""
    panels, bars, errors = _load(browser, runs["kueue-cohort-borrowing"])
    assert errors == []
    _assert_panels(panels)
    titles = " | ".join(str(p["title"]) for p in panels)
    assert "Kueue ClusterQueues" in titles and "borrowed from the cohort" in titles
    by_row: dict[str, list[tuple[str, str]]] = {}
    for state, row, hover in bars:
        by_row.setdefault(row, []).append((state, hover))
    for sweep in ("sweep-c", "sweep-d"):
        states = by_row[f"Job research/{sweep}"]
        pre = [h for s, h in states if s == "Preempted"]
        assert len(pre) == 1 and "InCohortReclamation" in pre[0] and "1.00 h - 3.00 h" in pre[0]
        assert [s for s, _ in states].count("Running") == 2 and "Succeeded" in [s for s, _ in states]
    assert "Preempted" not in [s for s, _ in by_row["Job research/sweep-a"]]
    assert len(by_row) == 5  # every Job has its row, each labelled


def test_spot_example_shows_each_preemption_and_the_restart(browser: Any, runs: dict[str, Path]) -> None:
    """Spot VMs are preempted at 3 h and 7 h: spot/train's pod is terminated by the kubelet each time and the Job
    waits for a replacement (Evicted with the reason, not Running), then runs again; the on-demand Job never stops.
    The nodes panel marks Compute Engine's preemptions."""
    panels, bars, errors = _load(browser, runs["spot-vs-on-demand"])
    assert errors == []
    _assert_panels(panels)
    titles = " | ".join(str(p["title"]) for p in panels)
    assert "Nodes per pool" in titles and "Kueue" not in titles  # no panel for a subsystem that did not run
    spot = [(s, h) for s, row, h in bars if row == "Job spot/train"]
    evicted = [h for s, h in spot if s == "Evicted"]
    assert len(evicted) == 2 and all("TerminationByKubelet" in h for h in evicted)
    assert "3.00 h - 3.08 h" in evicted[0] and "7.00 h - 7.08 h" in evicted[1]
    assert [s for s, _ in spot][-1] == "Succeeded"
    assert "Evicted" not in [s for s, row, _ in bars if row == "Job on-demand/train"]


def test_serving_example_draws_latency_cdfs_with_the_slo(browser: Any, runs: dict[str, Path]) -> None:
    """TTFT and TPOT CDFs on labelled log axes with the SLO as a dashed line; replicas over time; no Kueue."""
    panels, _, errors = _load(browser, runs["serving-llama3-epp"])
    assert errors == []
    _assert_panels(panels)
    titles = [str(p["title"]) for p in panels]
    assert any(t.startswith("Time to first token") and "SLO" in t for t in titles)
    assert any(t.startswith("Time per output token") and "SLO" in t for t in titles)
    assert any(t.startswith("Ready model-server replicas") for t in titles)
    assert not any("Kueue" in t for t in titles)


def test_compare_page_overlays_two_runs(browser: Any, runs: dict[str, Path], tmp_path: Path) -> None:
    """`kubetwin report A B --out F`: one page, both runs' timelines, the shared panels drawn with both runs."""
    from typer.testing import CliRunner

    out = tmp_path / "compare.html"
    pair = [runs["kueue-cohort-borrowing"].parent, runs["spot-vs-on-demand"].parent]
    res = CliRunner().invoke(app, ["report", *map(str, pair), "--out", str(out)])
    assert res.exit_code == 0, res.output
    page, errors = _open(browser, out)
    panels = page.evaluate(PANELS_JS)
    timelines = page.evaluate("() => Array.from(document.querySelectorAll('section.timeline')).map(s => s.dataset.run)")
    names = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => "
                          "gd.data.map(t => t.name).join('|'))")
    page.close()
    assert errors == []
    _assert_panels(panels)
    assert timelines == ["kueue-cohort-borrowing", "spot-vs-on-demand"]
    nodes = next(n for n, p in zip(names, panels, strict=True) if "Nodes per pool" in str(p["title"]))
    assert "kueue-cohort-borrowing: " in nodes and "spot-vs-on-demand: " in nodes


# ---- issue 35: pictures a person trusts (one time axis, every series visible, every axis titled) ----

# Per plotly figure: where its plot area is on the page, its x range, its axes' titles, the traces it draws (with
# something drawn: a line, a fill, a marker or a bar) and its legend's entries, and each visible scatter trace's
# data and line style.
CHARTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
    const fl = gd._fullLayout, box = gd.getBoundingClientRect();
    const axes = Object.keys(fl).filter(k => /^[xy]axis[0-9]*$/.test(k))
        .map(k => [k, (fl[k].title && fl[k].title.text) || '']);
    const drawn = Array.from(gd.querySelectorAll('.scatterlayer .trace, .barlayer .trace')).filter(g =>
        Array.from(g.querySelectorAll('path')).some(p => (p.getAttribute('d') || '').length > 2
            && getComputedStyle(p).display !== 'none' && p.style.opacity !== '0')).length;
    const lines = gd._fullData.filter(t => t.visible === true && t.type === 'scatter' && t.mode.includes('lines'))
        .map(t => ({name: t.name, x: Array.from(t.x || []), y: Array.from(t.y || []), dash: t.line.dash,
                    width: t.line.width, stack: t.stackgroup || ''}));
    return {id: gd.id, timed: !!gd.closest('section.timed'), title: (fl.title && fl.title.text) || '',
            range: fl.xaxis.range.slice(), left: box.left + fl._size.l, width: fl._size.w, axes: axes,
            drawn: drawn, legend: gd.querySelectorAll('.legend .traces').length, showlegend: fl.showlegend,
            shown: gd._fullData.filter(t => t.visible === true && t.showlegend !== false).length, lines: lines};
})"""


# Per timeline: its legend's box and the boxes it must stay off: the plot area, the title, the time axis' title and
# tick labels (on top of a tall timeline).
TIMELINE_LEGEND_JS = """() => Array.from(document.querySelectorAll('section.timeline .js-plotly-plot')).map(gd => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {legend: box(gd.querySelector('.infolayer .legend')), plot: box(gd.querySelector('.draglayer .nsewdrag')),
            others: [gd.querySelector('.gtitle'), gd.querySelector('.xtitle'),
                     ...gd.querySelectorAll('.xtick text')].filter(e => e).map(box)};
})"""


def _assert_timeline_legends(page: Any) -> None:
    """Each timeline's legend lies off its plot area (a gap of 4 px or more), its title and its time axis."""
    def meet(a: list[float], b: list[float], gap: float = 0.0) -> bool:
        return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap

    timelines = page.evaluate(TIMELINE_LEGEND_JS)
    assert timelines
    for t in timelines:
        assert not meet(t["legend"], t["plot"], 4), t
        assert not [o for o in t["others"] if meet(t["legend"], o)], t


def _step_at(xs: list[float], ys: list[float], t: float) -> float | None:
    i = max((k for k, x in enumerate(xs) if x <= t), default=-1)
    return ys[i] if i >= 0 else None


def _coincide(a: dict, b: dict) -> bool:
    """Two line series holding the same value over a tenth or more of the span they share."""
    lo, hi = max(a["x"][0], b["x"][0]), min(a["x"][-1], b["x"][-1])
    if hi <= lo:
        return False
    ts = sorted({t for t in a["x"] + b["x"] if lo <= t <= hi} | {lo, hi})
    same = sum(t1 - t0 for t0, t1 in zip(ts, ts[1:], strict=False)
               if (v := _step_at(a["x"], a["y"], t0)) is not None and v == _step_at(b["x"], b["y"], t0))
    return same >= 0.1 * (hi - lo)


def _assert_charts(figs: list[dict]) -> list[dict]:
    """Every series drawn has its legend entry and no line hides another; every axis titled; the time panels on
    one axis: the same x range and the same plot area, to the pixel. Returns the time panels."""
    for f in figs:
        if f["showlegend"]:  # visible series = legend entries
            assert f["drawn"] == f["legend"] == f["shown"], f["title"]
        else:  # a lone series (one run's cost by pool), its bars named on the axis
            assert f["drawn"] == f["shown"] == 1 and f["legend"] == 0, f["title"]
        assert all(title for _, title in f["axes"]), (f["title"], f["axes"])
        lines = [ln for ln in f["lines"] if len(ln["x"]) > 1 and isinstance(ln["x"][0], (int, float))]
        for i, a in enumerate(lines):
            for b in lines[i + 1:]:
                if not (a["stack"] and a["stack"] == b["stack"]) and _coincide(a, b):
                    assert (a["dash"], a["width"]) != (b["dash"], b["width"]), (f["title"], a["name"], b["name"])
    timed = [f for f in figs if f["timed"]]
    assert len(timed) >= 2
    for f in timed:
        assert f["range"] == timed[0]["range"], f["title"]
        assert abs(f["left"] - timed[0]["left"]) < 0.5 and abs(f["width"] - timed[0]["width"]) < 0.5, f["title"]
    return timed


def test_demo_panels_share_one_time_axis_and_show_every_series(browser: Any, tmp_path: Path) -> None:
    """The demo (24 h, four pools of which three have two nodes): every time panel spans 0-24 h at the same pixels,
    the four pools' node counts are four visible (stacked) series, every axis is titled, and the crosshair drawn
    on one panel stands at the same x in all of them."""
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "demo")])
    assert res.exit_code == 0, res.output
    page, errors = _open(browser, tmp_path / "demo" / "report.html")
    figs = page.evaluate(CHARTS_JS)
    timed = _assert_charts(figs)
    _assert_timeline_legends(page)  # a tall timeline: title, legend, time axis on top, plot; none on another
    assert timed[0]["range"] == [0, 24] and "simulated time (h)" in dict(timed[0]["axes"])["xaxis"]
    nodes = next(f for f in figs if f["title"].startswith("Nodes per pool"))
    assert nodes["legend"] == 4 and len({ln["stack"] for ln in nodes["lines"]}) == 1  # stacked: all four seen
    # the crosshair: hover the middle of the second time panel, every time panel's line at the same page x
    second = page.query_selector_all("section.timed .js-plotly-plot")[1]
    second.scroll_into_view_if_needed()
    box = second.bounding_box()
    page.mouse.move(timed[1]["left"] + timed[1]["width"] / 2, box["y"] + box["height"] / 2)
    xs = page.evaluate("() => Array.from(document.querySelectorAll('.kt-cross')).filter(d => d.style.display "
                       "=== 'block').map(d => d.getBoundingClientRect().left)")
    # the values at the cursor: every hover label shown lies off the plot area (plotly's unified box lay over the
    # series it described), and names each pool with its value
    alloc = page.query_selector_all("section.timed .js-plotly-plot")[[f["title"] for f in timed].index(
        next(t["title"] for t in timed if t["title"].startswith("GPU allocation")))]
    alloc.scroll_into_view_if_needed()
    area = alloc.query_selector(".draglayer .nsewdrag").bounding_box()
    for dx in (-3, 0):  # plotly hovers on a move inside the plot
        page.mouse.move(area["x"] + area["width"] / 2 + dx, area["y"] + area["height"] / 2)
    page.wait_for_function("gd => Array.from(gd.parentNode.querySelectorAll('.hoverlayer .legend, .kt-readout'))"
                           ".some(e => getComputedStyle(e).display !== 'none')", arg=alloc)
    labels = alloc.evaluate("""gd => Array.from(gd.parentNode.querySelectorAll('.hoverlayer .legend, .kt-readout'))
        .filter(e => getComputedStyle(e).display !== 'none' && getComputedStyle(e).visibility !== 'hidden')
        .map(e => { const r = e.getBoundingClientRect(); return {text: e.textContent, box: [r.left, r.top, r.right,
                                                                                              r.bottom]}; })""")
    assert labels and all(p in labels[0]["text"] for p in (" h", "a100-spot : ", "h100-pool : ", "l4-pool : "))
    plot = [area["x"], area["y"], area["x"] + area["width"], area["y"] + area["height"]]
    for label in labels:
        b = label["box"]
        assert not (b[0] < plot[2] and plot[0] < b[2] and b[1] < plot[3] and plot[1] < b[3]), (label, plot)
    # a zoom of one panel's time axis (drag, or the range set) is every time panel's
    page.evaluate("() => Plotly.relayout(document.querySelectorAll('section.timed .js-plotly-plot')[2], "
                  "{'xaxis.range': [2, 4]})")
    page.wait_for_function("() => Array.from(document.querySelectorAll('section.timed .js-plotly-plot'))"
                           ".every(gd => gd._fullLayout.xaxis.range[0] === 2 && gd._fullLayout.xaxis.range[1] === 4)")
    page.close()
    assert errors == []
    middle = timed[1]["left"] + timed[1]["width"] / 2
    assert len(xs) == len(timed) and max(xs) - min(xs) < 1 and abs(xs[0] - middle) < 2


def test_compare_page_aligns_the_runs_and_shows_their_differences(browser: Any, runs: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    """`kubetwin report A B`: both timelines and every overlaid panel on one axis (the longer run's), no pool
    hidden under another, and a difference column: B - A, absolute and in percent."""
    from typer.testing import CliRunner

    out = tmp_path / "compare.html"
    pair = [runs["kueue-cohort-borrowing"].parent, runs["spot-vs-on-demand"].parent]
    res = CliRunner().invoke(app, ["report", *map(str, pair), "--out", str(out)])
    assert res.exit_code == 0, res.output
    page, errors = _open(browser, out)
    figs = page.evaluate(CHARTS_JS)
    head = page.evaluate("() => Array.from(document.querySelectorAll('table.headline tr')).map(tr => "
                         "Array.from(tr.children).map(c => c.textContent))")
    _assert_timeline_legends(page)  # short timelines: the legend clear of the plot under it
    page.close()
    assert errors == []
    timed = _assert_charts(figs)
    timelines = [f for f in figs if f["id"] in ("kubetwin-fig-0", "kubetwin-fig-1")]
    assert len(timelines) == 2 and all(f in timed for f in timelines)  # the two timelines start at one pixel
    nodes = next(f for f in figs if f["title"].startswith("Nodes per pool"))
    assert nodes["legend"] == 4  # h100, a3-on-demand, a3-spot and the Spot events: none under another
    assert head[0][-1] == "spot-vs-on-demand \u2212 kueue-cohort-borrowing"
    rows = {r[0]: r[1:] for r in head[1:]}
    assert rows["cost total"][-1] == "-$2,756.91 (-65.0%)"  # $4,238.67 -> $1,481.76
    assert rows["pods"][-1].startswith("-4 (-50.0%)")


def test_sweep_report_draws_the_answer(browser: Any, tmp_path: Path) -> None:
    """A sweep of the A3 capacity mix: the winner is the last mark of each chart (drawn on top), the Pareto front
    a line, every infeasible case a grey cross, the constraint a dashed threshold, every chart's axes titled."""
    from typer.testing import CliRunner

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text((EXAMPLES / "sweeps" / "a3-capacity-mix.yaml").read_text()
                     .replace("[a3-training-queue.yaml]", f"[{EXAMPLES / 'sweeps' / 'a3-training-queue.yaml'}]")
                     .replace("values: [0, 1, 2, 3]", "values: [0, 3]").replace("values: [0, 1, 2, 3, 4]",
                                                                               "values: [0, 4]")
                     .replace("values: [0, 2, 4]", "values: [2]").replace("seeds: [0, 1, 2]", "seeds: [0]"))
    res = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(tmp_path / "out"), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    page = browser.new_page()
    page.goto((tmp_path / "out" / "report.html").as_uri())
    charts = page.evaluate("""() => Array.from(document.querySelectorAll('figure')).filter(f => f.querySelector('svg'))
        .map(f => { const svg = f.querySelector('svg');
            const marks = Array.from(svg.querySelectorAll('circle, g.infeasible'));
            const texts = Array.from(svg.querySelectorAll(':scope > text')).map(t => t.textContent);
            const boxes = Array.from(svg.querySelectorAll('text')).map(t => [t.textContent, t.getBoundingClientRect()]);
            const overlaps = [];  // two labels (ticks, thresholds, the winner's name) that cover each other
            boxes.forEach(([ta, a], i) => boxes.slice(i + 1).forEach(([tb, b]) => {
                const hit = a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
                if (hit) overlaps.push([ta, tb]);
            }));
            return {caption: f.querySelector('figcaption').textContent,
                    last: marks.length ? marks[marks.length - 1].getAttribute('class') : '',
                    best: svg.querySelectorAll('circle.best').length,
                    infeasible: svg.querySelectorAll('g.infeasible').length,
                    feasible: svg.querySelectorAll('circle.feasible').length,
                    front: svg.querySelectorAll('polyline.front').length,
                    constraints: Array.from(svg.querySelectorAll('g.constraint text')).map(t => t.textContent),
                    xtitle: texts[texts.length - 2], ytitle: texts[texts.length - 1], overlaps: overlaps}; })""")
    legend = page.evaluate("() => document.querySelector('p.legend').textContent")
    page.close()
    assert len(charts) == 1 + 7 * 3  # the Pareto front, seven metrics against three axes
    front = charts[0]
    assert front["caption"].startswith("Pareto front: cost against jobs_unfinished") and front["front"] == 1
    assert front["constraints"] == ["jobs_unfinished <= 0"]
    assert front["xtitle"] == "cost (USD)" and front["ytitle"] == "jobs_unfinished (jobs)"
    for c in charts:
        assert c["xtitle"] and c["ytitle"], c
        assert c["overlaps"] == [], (c["caption"], c["overlaps"])  # no label over another
        assert c["best"] == 1 and c["last"] == "best", c  # the winner drawn on top of every other case
        assert c["infeasible"] + c["feasible"] + c["best"] == 4, c  # every case marked as what it is
    assert front["infeasible"] >= 1
    for entry in ("best feasible case", "feasible", "infeasible", "Pareto front", "constraint threshold"):
        assert entry in legend
    makespan = next(c for c in charts if c["caption"] == "makespan against spot")
    assert makespan["ytitle"] == "makespan (duration)"
    assert makespan["infeasible"] >= 1  # a case whose Jobs never all finished: its makespan drawn at infinity

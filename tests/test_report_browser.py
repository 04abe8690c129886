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

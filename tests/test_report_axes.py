"""report.html's axes and numbers (issue 35): durations as a person writes them, the comparison's difference column,
coinciding lines drawn apart, a downsampled stack that still stacks, one time axis for every time panel."""

from __future__ import annotations

import random

import plotly.graph_objects as go
import pytest

from kubetwin.report.axes import RIGHT, human_duration, place, separate, time_axis
from kubetwin.report.compare import difference
from kubetwin.report.pagebounds import MAX_POINTS, bound_figure


@pytest.mark.parametrize(("seconds", "text"), [(9000, "2h30m"), (7470, "2h4m"), (3600, "1h"), (2700, "45m"),
                                               (330, "5m30s"), (12, "12s"), (0.35, "0.35s"), (86400, "1d"),
                                               (90000, "1d1h"), (-5400, "-1h30m")])
def test_durations_read_as_a_person_writes_them(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_the_header_writes_waits_as_durations() -> None:
    """The page's header rows are the console's (report.headline): waits already in duration form."""
    from kubetwin.report.headline import cluster_rows

    summary = {"pods": {"by_phase": {}, "pending_seconds": {"p50": 0.0, "p99": 84600.0}}, "gpu_allocation": {},
               "cost": {"by_pool": {}, "total_usd": 0.0}}
    assert dict(cluster_rows(summary))["pending p50 / p99"] == "0s / 23h30m"


@pytest.mark.parametrize(("a", "b", "diff"), [
    ("$4,238.67", "$1,481.76", "-$2,756.91 (-65.0%)"),
    ("0s / 4m30s", "4m30s / 4m35s", "+4m30s (new) / +5s (+1.9%)"),
    ("26.6%", "30.0%", "+3.4 pp (+12.8%)"),
    ("3 admitted, 1 evicted", "5 admitted, 0 evicted", "+2 (+66.7%) admitted, -1 (-100.0%) evicted"),
    ("8", "8", "0 (+0.0%)"),
    ("2 InCohortReclamation", "1 Preempted", ""),  # not the same sentence: nothing to subtract
    ("-", "4", ""),
])
def test_the_difference_column_subtracts_number_by_number(a: str, b: str, diff: str) -> None:
    assert difference(a, b) == diff


def test_a_line_on_top_of_another_is_drawn_apart_and_a_line_alone_is_left_alone() -> None:
    fig = go.Figure([go.Scatter(x=[0, 1, 2, 10], y=[0, 2, 2, 2], mode="lines", name="a"),
                     go.Scatter(x=[0, 0.5, 10], y=[0, 2, 2], mode="lines", name="b"),  # equal to a from 1 to 10
                     go.Scatter(x=[0, 10], y=[5, 5], mode="lines", name="c")])
    separate(fig)
    a, b, c = fig.data
    assert b.line.dash == "dash" and b.line.width < a.line.width  # thinner, dashed, over a thicker one
    assert c.line.dash is None and c.line.width is None


def test_a_downsampled_stack_keeps_one_set_of_instants() -> None:
    rng = random.Random(2)
    x = list(range(3 * MAX_POINTS))
    fig = go.Figure([go.Scatter(x=x, y=[rng.randint(0, 5) for _ in x], stackgroup="nodes", mode="lines")
                     for _ in range(3)])
    notes = bound_figure(fig)
    assert len(notes) == 1 and "their sum" in notes[0]
    assert len(fig.data[0].x) <= MAX_POINTS and all(list(t.x) == list(fig.data[0].x) for t in fig.data)


def test_every_time_panel_gets_the_same_plot_area_and_range() -> None:
    axis = time_axis(5400, ["Job research/a-rather-long-job-name"])
    assert axis.unit == "min" and axis.per == 60 and axis.left > 200
    figs = [place(go.Figure([go.Scatter(x=[0, 0.5], y=[1, 2], name="one")]), axis),
            place(go.Figure([go.Scatter(x=[0, 1.5], y=[1, 2], name=n) for n in "abcdefghijklmnop"]), axis)]
    for f in figs:
        assert f.layout.margin.l == axis.left and f.layout.margin.r == RIGHT
        assert f.layout.margin.autoexpand is False and tuple(f.layout.xaxis.range) == (0, 90)
        assert f.layout.xaxis.title.text == "simulated time (min)"
    assert list(figs[0].data[0].x) == [0, 30]  # built in hours, drawn in minutes
    assert figs[1].layout.height > figs[0].layout.height  # the longer legend gets its own band, not plot width

"""report.html's axes and numbers (issue 35): durations as a person writes them, the comparison's difference column,
coinciding lines drawn apart, a downsampled stack that still stacks, one time axis for every time panel."""

from __future__ import annotations

import random

import plotly.graph_objects as go
import pytest

from kubetwin.k8s.units import short_duration
from kubetwin.report.axes import RIGHT, place, separate, time_axis
from kubetwin.report.compare import difference
from kubetwin.report.pagebounds import MAX_POINTS, bound_figure


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.0004, "0.4ms"), (0.35, "350ms"), (0.9996, "1s"),  # under a second: milliseconds
    (1.5, "1.5s"), (12, "12s"), (12.345, "12.3s"), (59.96, "1m"),  # seconds: three significant digits
    (90, "1m30s"), (330, "5m30s"), (2700, "45m"),  # minutes
    (3600, "1h"), (3725, "1h2m5s"), (7201, "2h0m1s"), (7470, "2h4m30s"), (9000, "2h30m"), (84600, "23h30m"),
    (86400, "24h"), (90000, "25h"), (216000, "60h"),  # days: hours, as Go and the console write them
    (-5400, "-1h30m"), (-0.25, "-250ms")])  # a difference
def test_one_duration_rule_for_every_page(seconds: float, text: str) -> None:
    """k8s.units.short_duration is the one rule (issue 35 item 3): report.html's header, hover, notes and
    difference column and the sweep report write a duration with it, so the same value reads the same."""
    from kubetwin.report import axes, compare, html, panels
    from kubetwin.sweep import report as sweep_report

    assert short_duration(seconds) == text
    assert not hasattr(axes, "human_duration")  # no second formatter left to drift
    assert panels._dur(abs(seconds)) == short_duration(abs(seconds))  # the timeline's hover
    assert sweep_report.fmt("makespan", abs(seconds)) == short_duration(abs(seconds))
    if abs(seconds) >= 1:  # the difference column's duration is the header's
        assert compare.difference("0s", short_duration(abs(seconds))) == f"+{short_duration(abs(seconds))} (new)"
    assert html.short_duration is short_duration


def test_the_header_writes_waits_as_durations() -> None:
    """The page's header rows are the console's (report.headline): waits already in duration form."""
    from kubetwin.report.headline import cluster_rows

    summary = {"pods": {"by_phase": {}, "pending_seconds": {"p50": 0.0, "p99": 84600.0}}, "gpu_allocation": {},
               "cost": {"by_pool": {}, "total_usd": 0.0}}
    assert dict(cluster_rows(summary))["wait to schedule p50 / p99"] == "0s / 23h30m"


@pytest.mark.parametrize(("a", "b", "diff"), [
    ("$4,238.67", "$1,481.76", "-$2,756.91 (-65.0%)"),
    ("0s / 4m30s", "4m30s / 4m35s", "+4m30s (new) / +5s (+1.9%)"),
    ("26.6%", "30.0%", "+3.4 pp (+12.8%)"),
    ("3 admitted, 1 evicted", "5 admitted, 0 evicted", "+2 (+66.7%) admitted, -1 (-100.0%) evicted"),
    ("8", "8", "0 (+0.0%)"),
    ("2 InCohortReclamation", "1 Preempted", "n/a: not the same quantity"),  # not the same sentence
    ("-", "4", "n/a: no value in the first run"),
    ("slowdown x1.25, 0 OOM", "slowdown x1.40, 2 OOM", "slowdown +0.15 (+12.0%), +2 (new) OOM"),
    ("120 ms / 1.20 s / -", "100 ms / 900 ms / 1.50 s",
     "-20ms (-16.7%) / -300ms (-25.0%) / n/a: no value in the first run"),
    ("$12.50", "3", "n/a: different units (US dollars, a count)"),
    (None, "3", "n/a: not in the first run"),
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


def _summary(k: int) -> tuple[dict, dict]:
    """A run's summary.json and training.json with every headline row report.headline writes (k: which run)."""
    serving = {"requests": 100 * k, "completed": 90 * k, "rejected_429": k, "not_found_404": 0, "failed_503": k,
               "failed_other": 2 * k, "ttft_seconds": {"p50": 0.12 / k, "p90": 1.2 / k, "p99": 2.5 * k},
               "tpot_seconds": {"p50": 0.005 * k, "p90": 0.02, "p99": 0.04}, "slo_attainment": 0.9 + 0.01 * k,
               "prefix_cache_hit_rate": 0.3 * k, "gpu_hours": 4.0 * k, "usd_per_million_output_tokens": 1.5 * k}
    summary = {
        "pods": {"total": 10 * k, "by_phase": {"Succeeded": 8 * k, "Pending": k},
                 "pending_seconds": {"p50": 0.0 if k == 1 else 45.0, "p99": 3600.0 * k + 1}},
        "jobs": {"completed": 5 * k, "failed": k - 1, "unfinished": 0, "completion_seconds": {"p50": 600.0 * k,
                                                                                               "max": 7201.0 * k}},
        "gpu_allocation": {"a3": {"mean_pct": 40.0 + k, "gpu_hours_allocatable": 8}},
        "gpu_fragmentation": {"fragmented_gpu_pct_mean": 10.0 * k},
        "cost": {"by_pool": {"a3": 1234.5 * k}, "total_usd": 1234.5 * k, "on_demand_usd": 1000.0,
                 "spot_usd": 234.5 * k},
        "spot": {"preemptions": {"a3": 2 * k}}, "wasted_gpu_hours": 1.25 * k,
        "gpu_sharing": {"a3": {"gpu_oom_failures": k, "slowdown_max": 1.5, "slowdown_mean": 1.1 + 0.15 * k}},
        "cluster_autoscaler": {"scale_ups": [{}] * k, "scale_downs": [], "refusals": [{}]},
        "kueue_missing_local_queues": {"lq": k},
        "kueue": {"cq": {"admitted": 3 * k, "evicted": k, "finished": 2, "pending_at_end": {"active": k},
                         "admission_wait_s": {"p99": 300.0 * k, "max": 330.0 * k},
                         "preemptions_issued": {"InCohortReclamation": k}}},
        "serving": {"overall": serving}}
    training = {"default/llama": {"breakdown": {"step_seconds": 1.2 / k, "job_seconds": 7200.0 / k},
                                  "placement": {"mfu": 0.4 * k}, "advice": [{"change": "faster network tier",
                                                                            "saving": 0.4 / k}]}}
    return summary, training


def test_every_headline_row_has_a_difference_or_says_why_not() -> None:
    """Every row of the header (report.headline: cluster, autoscaler, Kueue, training, serving), between two runs
    whose rows say the same things with other numbers: each has a difference, none an empty or n/a cell (a slot
    with no value in one run says so)."""
    from kubetwin.report.headline import headline_rows

    a, b = (dict(headline_rows(*_summary(k))) for k in (1, 2))
    assert a.keys() == b.keys() and len(a) >= 25
    diffs = {k: difference(a[k], b[k]) for k in a}
    assert all(diffs.values()), [k for k, d in diffs.items() if not d]
    assert [k for k, d in diffs.items() if "n/a" in d] == []
    assert diffs["GPU sharing a3"] == "slowdown +0.15 (+12.0%), +1 (+100.0%) OOM"  # x1.25 against x1.40
    assert diffs["TTFT p50 / p90 / p99"] == "-60ms (-50.0%) / -600ms (-50.0%) / +2.5s (+100.0%)"
    assert diffs["wait to schedule p50 / p99"] == "+45s (new) / +1h (+100.0%)"
    assert diffs["SLO attainment"] == "+1.0 pp (+1.1%)"


def test_a_long_panel_is_bounded_before_its_lines_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """report.panels bounds a time panel (pagebounds, MAX_POINTS a series) before the coinciding-lines check
    (commit e51378b): two pools' GPU allocation of 200,000 samples each that coincide are still drawn apart (one
    dashed over the other), a third that does not is left solid, and the check walks only bounded series. Checked
    after the full series, 600,000 points x 2 pairs is past separate's budget: it dashed every line in turn,
    the third too."""
    from kubetwin.report import axes, panels
    from kubetwin.report.rundata import RunData

    n = 200_000
    t = [30.0 * i for i in range(n)]
    same = [float(25 * ((i // 5000) % 4)) for i in range(n)]
    other = [float(10 + 80 * ((i // 7000) % 2)) for i in range(n)]
    run = RunData("r", {"duration": t[-1]}, {"gpu_allocation": {p: {"gpu_hours_allocatable": 8} for p in "abc"},
                                           "cost": {"by_pool": {}, "total_usd": 0}},
                  {"t": t, "gpu_allocation_pct": {"a": same, "b": list(same), "c": other}}, {})
    walked: list[int] = []
    check = axes._coincide

    def counting(a: go.Scatter, b: go.Scatter) -> bool:
        walked.append(len(a.x) + len(b.x))
        return check(a, b)

    monkeypatch.setattr(axes, "_coincide", counting)
    alloc = next(p for p in panels.panels([run]) if p.fig.layout.title.text.startswith("GPU allocation"))
    a, b, c = alloc.fig.data
    assert a.line.dash is None and b.line.dash == "dash" and b.line.width < a.line.width  # b drawn over a, apart
    assert c.line.dash is None  # not on another line: solid
    assert walked and max(walked) <= 2 * MAX_POINTS  # each pair walks two bounded series, never 200,000 points
    assert alloc.bounded and len(a.x) <= MAX_POINTS  # and the page says what the bounds left out


@pytest.mark.parametrize("events", [[], [(3600.0, "spot", "Spot VM reclaimed", "#d9534f")]])
def test_the_nodes_panel_promises_markers_only_where_it_draws_some(events: list) -> None:
    """A run with no autoscaler, Spot or node lifecycle event said "markers: ..." over a panel with none (the demo)."""
    from kubetwin.report import panels
    from kubetwin.report.rundata import RunData

    run = RunData("r", {"duration": 7200.0}, {"cost": {"by_pool": {}, "total_usd": 0}}, {}, {})
    run.node_changes = {"spot": [(0.0, 2), (3600.0, 1)]}
    run.node_events = events
    nodes = next(p for p in panels.panels([run]) if p.fig.layout.title.text.startswith("Nodes per pool"))
    markers = [tr for tr in nodes.fig.data if tr.mode == "markers"]
    assert len(markers) == (1 if events else 0)
    assert ("markers: autoscaler" in nodes.fig.layout.title.text) == bool(events)

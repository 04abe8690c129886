"""report.html at scale (issue 32): the report reads history.jsonl in one pass and never holds it, and past
AGGREGATE_PODS pods the pods that would each be a row (a Deployment's replicas, bare pods) are one row per owner.

test_peak_rss_of_a_10000_pod_run_with_its_report is the GUARD against the regression of issue 32: report.html,
written at the end of every run by loading the whole history, tripled the peak memory of every large run
(10,000 pods onto 5,000 nodes: 787 MB at 3f002fa against 283 MB at 8c4b814, before the report existed; 275-277 MB
with the streaming report) and nothing failed. It measures the operating system's peak RSS of a real `kubetwin run`
through the CLI, report included, in a fresh child process: a figure that is not noise, unlike a timing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import load_script
from k8s_builders import make_pod, make_pool, make_scenario

import kubetwin.report.rundata as rundata
from kubetwin.report.html import write_report
from kubetwin.report.rundata import load_run
from kubetwin.report.timeline import rows_of
from kubetwin.runner import run

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

ROOT = Path(__file__).resolve().parent.parent
bench = load_script(ROOT / "benchmarks" / "bench_report.py")

# Peak RSS ceiling of the 10,000-pod run with its report: measured 277 MB (Python 3.11, 2 cores; 255 MB without
# the report, 787 MB when the report loaded the whole history); the margin absorbs other Python builds and
# libraries, not another copy of the history.
CEILING_MB = 400
# The page's own bytes past plotly.js (its <head>): the timeline of 10,000 pods is two aggregated rows, not 10,000.
BODY_CEILING_BYTES = 500_000


def test_peak_rss_of_a_10000_pod_run_with_its_report(tmp_path: Path) -> None:
    """GUARD (issue 32): `kubetwin run` of 10,000 pods onto 5,000 nodes, report.html included, stays under
    CEILING_MB of peak RSS (benchmarks/bench_report.timed: a fresh grandchild, so the high-water mark is the run's
    alone), and its page stays small."""
    scen = bench.write_scenario(tmp_path / "scenario.yaml", 5000, 10000)
    out = tmp_path / "run"
    _, peak_mb = bench.timed(ROOT / "src", ["run", str(scen), "--out", str(out)])
    assert peak_mb < CEILING_MB, f"peak RSS {peak_mb:.0f} MB over the {CEILING_MB} MB ceiling"
    page = (out / "report.html").read_text()
    body = page[page.index("</head>"):]
    assert len(body) < BODY_CEILING_BYTES
    assert len(re.findall(r"ReplicaSet default\S+-work-\S+ \(5000 pods\)", body)) >= 2


def _mixed(tmp_path: Path, name: str, hold_history: bool = True) -> Path:
    """A Job of 3 pods, 40 bare pods and a Deployment of 10 replicas on 4 nodes of 8 CPUs: most pods wait."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
           "spec": {"parallelism": 3, "completions": 3, "template": {
               "metadata": {"annotations": {"kubetwin.io/duration": "20m"}},
               "spec": {"restartPolicy": "Never", "containers": [
                   {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}}, "template": {
               "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                   {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}
    pods = [make_pod(f"bare-{i:02d}").cpu("1").duration(f"{10 + i}m").create_at(f"{i}m").obj() for i in range(40)]
    out = tmp_path / name
    scenario = make_scenario("2h").obj()
    scenario["spec"]["report"] = ["summary", "html"]
    run(objects=[scenario, make_pool("cpu", "e2-standard-8", 4).obj(), job, web, *pods], out=out,
        hold_history=hold_history)
    return out


def test_past_the_threshold_pods_of_no_job_are_one_row_per_owner(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """53 pods, threshold 50: the Job keeps its row (its pods are in it, as before), the Deployment's 10 replicas
    are one row labelled with its ReplicaSet and their count, the 40 bare pods one row of their namespace; each
    aggregated row shows the state most of its pods are in, with the counts as its reason."""
    out = _mixed(tmp_path, "mixed")
    small = {r.label: r for r in rows_of(load_run(out))}
    assert len(small) == 1 + 10 + 40  # below the threshold: a row per pod, as before
    monkeypatch.setattr(rundata, "AGGREGATE_PODS", 50)
    rows = {r.label: r for r in rows_of(load_run(out))}
    web = next(label for label in rows if label.startswith("ReplicaSet default/web-"))
    assert set(rows) == {"Job default/train", web, "Pods default/(no owner) (40 pods)"}
    assert web.endswith("(10 pods)")
    assert rows["Job default/train"].states() == small["Job default/train"].states()
    bare = rows["Pods default/(no owner) (40 pods)"]
    assert bare.states()[-1] == "Succeeded" and "Running" in bare.states()
    assert all(s.reason.startswith("of its pods: ") for s in bare.segments)
    running = next(s for s in bare.segments if s.state == "Running")
    counts = dict((state, int(n)) for n, state in re.findall(r"(\d+) (\w+)", running.reason))
    assert counts["Running"] == max(counts.values())
    text = write_report(out, path=tmp_path / "agg.html").read_text()
    assert "(40 pods)" in text and "bare-07" not in text.split("</head>")[1]


def test_the_run_writes_the_page_kubetwin_report_rebuilds_from_the_file(tmp_path: Path) -> None:
    """`kubetwin run` builds the page from the versions it holds; `kubetwin report` from history.jsonl read back:
    the same bytes (a Job, a Deployment, bare pods, Events)."""
    out = _mixed(tmp_path, "mixed")
    again = write_report(out, path=tmp_path / "again.html")
    assert again.read_bytes() == (out / "report.html").read_bytes()


@pytest.mark.parametrize("threshold", [2000, 52, 50, 10])
def test_the_page_built_as_the_run_records_is_the_page_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  threshold: int) -> None:
    """The run builds its page from the versions as the store records them (rundata.HistoryFeed), before it knows
    how many pods it will make: below the threshold, crossing it as the bare pods arrive (50, 10), or just past it
    with the last pod (52 of 53), the page is the one `kubetwin report` builds from history.jsonl told the count up
    front; and the run does not read history.jsonl back."""
    monkeypatch.setattr(rundata, "AGGREGATE_PODS", threshold)
    read = rundata._read_history

    def not_during_the_run(path: Path):  # the run's report must not parse the file back
        raise AssertionError(f"read back {path}")

    monkeypatch.setattr(rundata, "_read_history", not_during_the_run)
    # as `kubetwin run` runs it: no version held in memory, so the page comes from the feed or from the file
    out = _mixed(tmp_path, "mixed", hold_history=False)
    monkeypatch.setattr(rundata, "_read_history", read)
    again = write_report(out, path=tmp_path / "again.html")
    assert again.read_bytes() == (out / "report.html").read_bytes()
    aggregated = "(40 pods)" in again.read_text()
    assert aggregated == (threshold < 53)


def _versions() -> list[tuple[float, str, dict]]:
    """Bare pods, each with a Kueue Workload it owns (the plain-pod integration: the Workload is in its pod's row),
    an Event on one of them, one pod that fails, over a few instants."""
    def pod(name: str, phase: str, node: str | None = None) -> dict:
        return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
                "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}

    def wl(name: str, cond: str) -> dict:
        return {"kind": "Workload", "metadata": {"name": f"pod-{name}", "namespace": "ns", "ownerReferences": [
            {"kind": "Pod", "name": name, "controller": True}]},
                "status": {"conditions": [{"type": cond, "status": "True", "reason": "R"}]}}

    out: list[tuple[float, str, dict]] = []
    for i in range(4):
        n = f"p{i}"
        out += [(float(i), "ADDED", pod(n, "Pending")), (float(i), "ADDED", wl(n, "QuotaReserved")),
                (i + 0.5, "MODIFIED", wl(n, "Admitted")), (i + 1.0, "MODIFIED", pod(n, "Running", "node-a"))]
    out.append((2.0, "ADDED", {"kind": "Event", "metadata": {"name": "e", "namespace": "ns"}, "reason": "Started",
                               "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p1"}}))
    out.append((6.0, "MODIFIED", pod("p2", "Failed", "node-a")))
    return sorted(out, key=lambda v: v[0])


@pytest.mark.parametrize(("pods_seen", "aggregate"), [(2, True), (4, True), (None, False), (None, True)])
def test_a_timeline_decided_late_draws_what_one_told_up_front_draws(pods_seen: int | None, aggregate: bool) -> None:
    """Timeline(aggregate=None) builds both views; decided after `pods_seen` pods (or at the end) it gives the rows
    of a timeline built with the answer from the start: segments, marks, events, pod counts, order."""
    from kubetwin.report.timeline import Timeline

    told, late = Timeline(aggregate), Timeline(None)
    for t, etype, obj in _versions():
        told.add(t, etype, obj)
        late.add(t, etype, obj)
        if late.aggregate is None and late.pods == pods_seen:
            late.decide(aggregate)
    late.decide(aggregate)
    rows = told.rows(8.0)
    assert late.rows(8.0) == rows
    assert len(rows) == (1 if aggregate else 4) and any(r.marks for r in rows)


def test_past_max_rows_the_timeline_draws_the_lost_rows_and_one_row_for_the_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """report.pagebounds: 6 Job rows, at most 3 drawn: the one that failed first, then in creation order; the other
    3 as one row that shows, at each moment, the state most of them are in, with the counts as its reason."""
    from kubetwin.report import pagebounds
    from kubetwin.report.timeline import Row, Segment

    monkeypatch.setattr(pagebounds, "MAX_ROWS", 3)
    rows = [Row("Job", "default", f"j{i}", [Segment(i, 10, "Pending", ""), Segment(10, 20, "Running", "")])
            for i in range(6)]
    rows[4].segments.append(Segment(20, 30, "Failed", "BackoffLimitExceeded"))
    drawn, note = pagebounds.bound_rows(rows)
    assert [r.label for r in drawn] == ["Job default/j0", "Job default/j1", "Job default/j4",
                                        "Jobs default/(other 3)"]
    merged = drawn[-1]
    assert [(s.start, s.end, s.state) for s in merged.segments] == [(2, 10, "Pending"), (10, 20, "Running")]
    assert merged.segments[0].reason == "of its 3 rows: 1 Pending"
    assert merged.segments[1].reason == "of its 3 rows: 3 Running"
    assert "6 rows: 3 drawn one by one" in note
    assert pagebounds.bound_rows(rows[:3]) == (rows[:3], "")


def test_a_long_series_is_drawn_from_its_extremes_and_long_markers_are_cut() -> None:
    """A step series of 10,000 points keeps at most MAX_POINTS, its single spike among them; a short one is left
    as it is; a marker series keeps its first MAX_MARKERS with their colours and hover texts."""
    import plotly.graph_objects as go

    from kubetwin.report import pagebounds

    ys = [5.0] * 10_000
    ys[6_543] = 99.0
    ys[7_001] = -3.0
    fig = go.Figure([go.Scatter(x=list(range(10_000)), y=ys, mode="lines", name="long"),
                     go.Scatter(x=[0, 1], y=[1, 2], mode="lines", name="short"),
                     go.Scatter(x=list(range(5_000)), y=[1] * 5_000, mode="markers", name="marks",
                                hovertext=[str(i) for i in range(5_000)], marker={"color": ["red"] * 5_000})])
    notes = pagebounds.bound_figure(fig)
    long, short, marks = fig.data
    assert len(long.x) <= pagebounds.MAX_POINTS and max(long.y) == 99.0 and min(long.y) == -3.0
    assert list(long.x) == sorted(long.x) and long.x[0] == 0 and long.x[-1] == 9_999
    assert list(short.x) == [0, 1]
    assert len(marks.x) == len(marks.hovertext) == len(marks.marker.color) == pagebounds.MAX_MARKERS
    assert len(notes) == 2 and "10,000 points" in notes[0]


def test_many_cluster_queues_draw_the_first_and_the_sum_of_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_SERIES ClusterQueues the Kueue panel draws the first ones and one summed series of the rest (a
    step series: each queue's value held until its next point, 0 before its first); the header table is cut with
    a row saying how many more there are; aggregated rows in many namespaces are one row per kind."""
    from kubetwin.report import pagebounds, panels
    from kubetwin.report.rundata import ClusterQueueSeries, RunData
    from kubetwin.report.timeline import Row, Segment

    assert pagebounds.sum_steps([[(0, 1), (5, 3)], [(2, 10), (5, 0)], [(7, 4)]]) == [(0, 1), (2, 11), (5, 3), (7, 7)]
    monkeypatch.setattr(panels, "MAX_SERIES", 2)
    run = RunData("r", {"duration": 10}, {}, {}, {})
    run.cluster_queues = {f"cq{i}": ClusterQueueSeries([(i, 1.0)], [(0, 2.0)], {"cpu": [(i, 0.5)]}) for i in range(5)}
    drawn = panels._queues(run)
    assert [name for name, _ in drawn] == ["cq0", "cq1", "other 3 ClusterQueues (sum)"]
    assert drawn[-1][1].admitted == [(2, 1.0), (3, 2.0), (4, 3.0)] and drawn[-1][1].pending == [(0, 6.0)]
    assert drawn[-1][1].borrowed == {"cpu": [(2, 0.5), (3, 1.0), (4, 1.5)]}
    monkeypatch.setattr(pagebounds, "MAX_HEADLINE", 3)
    rows = [(f"k{i}", "v") for i in range(5)]
    assert pagebounds.bound_headline(rows) == rows[:3] + [("...", "2 more rows (summary.json, `kubetwin run`'s "
                                                                  "console summary)")]
    monkeypatch.setattr(pagebounds, "MAX_ROWS", 1)
    monkeypatch.setattr(pagebounds, "MAX_GROUPS", 2)
    many = [Row("Workload", f"ns{i}", "w", [Segment(0, 1, "Pending", "")]) for i in range(4)]
    drawn_rows, note = pagebounds.bound_rows(many)
    assert [r.label for r in drawn_rows] == ["Workload ns0/w", "Workloads */(other 3)"] and "per kind " in note

"""What `kubetwin run` prints: progress lines when stderr is a log or a pipe, with an ETA from the run's average
pace; a summary table with a row for each subsystem that ran (Kueue, training, autoscaler, Spot, serving)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubetwin.cli import progress
from kubetwin.cli.main import app
from kubetwin.cli.progress import Pace, ProgressLines
from kubetwin.report.headline import headline_rows
from kubetwin.runner import run
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
LINE = re.compile(r"^progress: simulated (\S+) of (\S+) \((\d+)%\), ([\d,]+) objects, ([\d,]+) writes/s, "
                  r"([\d,]+)x real time(, ETA (\S+))?$")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_few_seconds_with_time_objects_rate_and_eta() -> None:
    clock, out = Clock(), io.StringIO()
    store = Store(Environment())
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    lines = ProgressLines(out, every=5.0, clock=clock)
    for second in range(1, 21):  # 20 s of wall time, an hour of simulated time per second, a call per 0.1 s
        for tenth in range(10):
            clock.now = 100.0 + second - 1 + (tenth + 1) / 10
            lines(3600.0 * (second - 1 + (tenth + 1) / 10), 24 * 3600.0, store)
    got = out.getvalue().splitlines()
    assert len(got) == 4, got  # at 5, 10, 15 and 20 s
    first = LINE.match(got[0])
    assert first is not None, got[0]
    assert first.groups()[:5] == ("5h", "24h", "21", "1", "0")
    assert first.group(6) == "3,600" and first.group(8) == "19s"  # 19 h left at 1 h per second


def test_the_eta_follows_the_average_pace_not_the_last_burst() -> None:
    """Simulated time that comes in bursts (an idle night in one step, a busy hour in many) gives an ETA that only
    moves as the whole run's pace moves: alternating fast and slow seconds keep it on the average."""
    clock = Clock()
    pace = Pace(clock)
    t, etas = 0.0, []
    for second in range(1, 41):
        clock.now = 100.0 + second
        t += 5400.0 if second % 2 else 1800.0  # 1.5 h, then 0.5 h: 1 h per second on average
        etas.append(pace.eta(t, 48 * 3600.0))
    assert etas[0] is None  # not in the first two seconds
    steady = [e for e in etas[3:] if e is not None]
    assert all(abs(e - (48 - s) * 1.0) / (48 - s) < 0.35 for e, s in zip(steady, range(4, 41), strict=True))
    assert all(b < a for a, b in zip(steady[1::2], steady[3::2], strict=False))  # same phase: always falling


def test_a_run_piped_to_a_log_prints_progress_lines_and_ends_at_100(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    res = CliRunner().invoke(app, ["run", str(EXAMPLES / "kueue-cohort-borrowing.yaml")])
    assert res.exit_code == 0, res.output
    got = [ln for ln in res.stderr.splitlines() if ln.startswith("progress: ")]
    assert got and all(LINE.match(ln) for ln in got), got[:3]
    assert LINE.match(got[-1]).group(3) == "100"  # type: ignore[union-attr]
    assert "progress: " not in res.stdout  # the summary table stays clean on stdout


def test_a_run_shorter_than_the_line_interval_prints_no_progress_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """No line falls due, and the closing line is only for runs that printed some (the interval is made long so a
    slow machine does not make the run long)."""
    monkeypatch.setattr(progress, "LINE_EVERY_S", 600.0)
    res = CliRunner().invoke(app, ["run", str(EXAMPLES / "kueue-cohort-borrowing.yaml")])
    assert res.exit_code == 0 and "progress: " not in res.stderr


@pytest.mark.parametrize(("example", "rows"), [
    ("kueue-cohort-borrowing.yaml", {"Kueue research": "6 admitted, 2 evicted, 4 finished, 0 pending",
                                     "Kueue prod preempted": "2 InCohortReclamation",
                                     "Kueue research wait p99 / max": "2h0m1s / 2h0m1s"}),  # + the requeuer's 1 s
    ("training-llama-8b-a3.yaml", {"training default/llama-8b": "step 15.22s, job 2.11 h, MFU 40%"}),
    ("autoscaling-gpu-quota.yaml", {"cluster autoscaler": "8 scale-ups, 2 scale-downs, 6 refused by the cloud"}),
    ("spot-vs-on-demand.yaml", {"Spot preemptions a3-spot": "2"}),
])
def test_the_summary_has_a_row_for_each_subsystem_that_ran(example: str, rows: dict[str, str]) -> None:
    result = run([EXAMPLES / example])
    got = dict(headline_rows(result.summary, result.training))
    assert {k: got.get(k) for k in rows} == rows
    others = {"Kueue", "training", "cluster autoscaler", "Spot", "requests"} - {k.split()[0] for k in rows}
    assert not [k for k in got if k.split()[0] in others]  # no row for what did not run


def test_the_console_table_keeps_each_row_whole_in_a_log() -> None:
    res = CliRunner().invoke(app, ["run", str(EXAMPLES / "training-llama-8b-a3.yaml")])
    assert res.exit_code == 0, res.output
    best = [ln for ln in res.stdout.splitlines() if "best change" in ln]
    assert len(best) == 1 and "faster network tier (2x bandwidth): -42% job time" in best[0]


@pytest.mark.parametrize(("duration", "title"), [("90s", "1m30s"), ("2h30m", "2h30m"), ("6h", "6h"),
                                                 ("1d", "24h"), ("3725", "1h2m5s")])
def test_the_summary_title_says_the_simulated_time_as_a_duration(duration: str, title: str, tmp_path: Path) -> None:
    """A 90 s run is "1m30s simulated", not "0.0 h" (issue 35 item 11): Go's duration form without zero units."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
                        f"spec: {{duration: '{duration}'}}\n")
    res = CliRunner().invoke(app, ["run", str(scenario)])
    assert res.exit_code == 0, res.output
    assert f"kubetwin run — {title} simulated" in res.output

"""simulate's start-time band against realized starts (issue 36 item 3's acceptance; the full figure is
benchmarks/bench_simulate_calibration.py's 50 trials, in docs/import.md): a few seeded trials of the stochastic
mixed-jobs world, each a dump of the twin's own run at T asked of `simulate --runs` with only the run-time
distributions, against the same world continued with the job submitted at T; and what bounds the figure when the
model is right: the band's own 80 %, the backlog world's exact round trip, the best any one estimate can do."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
bench = load_script(ROOT / "benchmarks" / "bench_simulate_calibration.py")


@pytest.mark.slow
def test_the_band_holds_the_realized_start_and_beats_the_naive_estimate() -> None:
    trials, summary = bench.calibrate("mixed", trials=6, runs=12, workers=1)
    assert summary["started"] == 6
    queued = [t for t in trials if t.position > 1]
    assert queued and all(t.p10 is not None and t.p90 is not None and t.p90 - t.p10 > 60 for t in queued), \
        "the runs spread over the run times (a band, not one run's start)"
    # a calibrated band holds the realized start 80 % of the time: chance for a band this narrow would be far less
    assert summary["band_coverage"] >= 4 / 6, trials
    # the twin reads the queue and the running jobs' elapsed time; the naive estimate only the queue position
    assert summary["simulate_median_abs_error_s"] < 0.7 * summary["naive_per_slot_median_abs_error_s"], summary
    assert summary["simulate_median_abs_error_s"] < 0.3 * summary["naive_median_abs_error_s"], summary
    assert summary["simulate_p50_close"] >= summary["naive_per_slot_close"], summary


def test_the_band_of_20_runs_holds_one_more_draw_80_percent_of_the_time() -> None:
    """The P10-P90 band of 20 runs ("exclusive" ranks, Answer.start_percentiles) holds one more draw of the same
    distribution 80 % of the time: the calibration's target is reachable by a right model, and a miss rate above
    20 % is the model's, not the quantile method's (the "inclusive" ranks would hold 72 %)."""
    from kubetwin.simulate import Answer, Outcome

    r = random.Random(7)
    held = 0
    n = 6000
    for _ in range(n):
        runs = [[Outcome("Job", "default", "j", started=r.lognormvariate(8, 0.6))] for _ in range(20)]
        (row,) = Answer(3600.0, list(range(20)), runs).start_percentiles()
        held += row["p10"] <= r.lognormvariate(8, 0.6) <= row["p90"]
    assert abs(held / n - 0.80) < 0.015, held / n


def test_the_best_point_is_the_most_any_one_estimate_lands_close_to() -> None:
    """bench.best_point: the share of starts one estimate can be within 10 % (or 1 minute) of."""
    assert bench.best_point([1000.0, 1100.0, 1200.0, 5000.0]) == 0.75  # 1100 is within 10 % of all three
    assert bench.best_point([600.0, 6000.0]) == 0.5
    assert bench.best_point([10.0, 100.0]) == 1.0  # within a minute of both


def test_the_backlog_world_without_distributions_gives_the_realized_start(tmp_path: Path) -> None:
    """The twin adds no spread of its own to the backlog world (no start latency, boot or queue-order tie that the
    snapshot misses): given the run times the world drew (the dump's kubetwin.io/duration, no --runtime), simulate
    gives the realized start within the second the dump's timestamps round to."""
    from kubetwin.simulate import simulate

    t = bench.trial("backlog", 3, 1, tmp_path)
    base = tmp_path / "trial-3"
    answer = simulate([base / "incoming.yaml"], [base / "state.yaml"], duration=bench.HORIZON, runs=2, seed=11,
                      snapshot_time=bench._rfc3339(bench.T))
    assert t.realized is not None and t.realized > 3600
    assert all(o.started is not None and abs(o.started - t.realized) < 1.0 for (o,) in answer.runs), answer.runs

"""The end-to-end harness (benchmarks/bench_e2e.py) on a slice of the measured vLLM runs (tests/data/
e2e-measured-slice.yaml): the manifests it writes reproduce the measured workload, a stage's window and the
saturation rule are read as documented, and the twin stays within the accuracy the serving model claims."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_script

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "bench_e2e.py"
SLICE = ROOT / "tests" / "data" / "e2e-measured-slice.yaml"

bench = load_script(BENCH)


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    return bench.load_runs([SLICE])


@pytest.fixture(scope="module")
def simulated(runs: list[dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("e2e")
    return bench.simulate(runs, out), out


def _row(arrival: float, status: int = 200, ttft: float = 0.05, e2e: float = 2.0) -> dict:
    return {"arrival": str(arrival), "status": str(status), "ttft": f"{ttft}" if status == 200 else "",
            "e2e": f"{e2e}" if status == 200 else ""}


def test_stage_window_and_saturation_rule(runs: list[dict]) -> None:
    stage1 = next(r for r in runs if r["id"].endswith("llama-2-7b-tp1-general-stage1"))  # after a 600 s stage
    start = bench.WARMUP_S + 600.0
    rows = [_row(start - 1, ttft=9.0, e2e=20.0)]  # the previous stage's request is not this stage's
    rows += [_row(start + i, ttft=0.05 + 0.001 * i, e2e=3.0) for i in range(100)]
    s = bench.stage_stats(rows, stage1)
    assert s.ttft_p50 == pytest.approx(0.0995) and s.e2e_mean == pytest.approx(3.0)
    assert s.tpot_mean == pytest.approx((3.0 - s.ttft_mean) / (stage1["workload"]["output_tokens"] - 1))
    assert not s.saturated
    # 2 of 100 failed: above the 1 % the rule allows
    assert bench.stage_stats(rows[:-2] + [_row(start + 200, 503), _row(start + 201, 0)], stage1).saturated
    # a queue that never drains: TTFT p50 above 1 s
    assert bench.stage_stats([_row(start + i, ttft=1.5, e2e=4.0) for i in range(10)], stage1).saturated


def test_manifests_reproduce_the_measured_workload(runs: list[dict], simulated: tuple[dict, Path]) -> None:
    import csv

    _, out = simulated
    assert runs
    for r in runs:
        with open(out / bench.experiment_id(r) / "run" / "requests.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        w = r["workload"]
        start = bench.WARMUP_S + sum(s["duration_s"] for s in w["stages"][: w["stage"]])
        mine = [x for x in rows if start <= float(x["arrival"]) < start + w["duration_s"]]
        # inference-perf's constant rate: evenly spaced arrivals, rate x duration of them in the stage
        assert abs(len(mine) - w["rate"] * w["duration_s"]) <= 1
        assert {int(x["prompt_tokens"]) for x in mine} == {round(w["prompt_tokens_mean"])}
        assert {int(x["output_tokens"]) for x in mine if x["status"] == "200"} == {w["output_tokens"]}


def test_twin_within_the_accuracy_it_claims(runs: list[dict], simulated: tuple[dict, Path]) -> None:
    """The slice's five runs (Llama-2-7B TP1 at 8 and 20 req/s, where the uncalibrated twin saturated; Llama-2-70B
    TP4 and CodeLlama-34B TP2, held out from the fit): no saturation disagreement, every run's E2E and TTFT mean
    within 20 %, the median E2E error within 10 % (benchmarks/e2e/README.md has the whole set)."""
    twin, _ = simulated
    summary = bench.summarize(runs, twin)
    assert summary["saturation"]["disagreements"] == []
    e2e = [abs(summary["runs"][r["id"]]["error"]["e2e_mean"]) for r in runs]
    ttft = [abs(summary["runs"][r["id"]]["error"]["ttft_mean"]) for r in runs]
    assert max(e2e) <= 0.20 and max(ttft) <= 0.20
    assert sorted(e2e)[len(e2e) // 2] <= 0.10

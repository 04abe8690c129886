"""Same inputs and seed give byte-identical output across processes, whatever Python's string-hash seed is:
no controller may depend on set or dict order of strings (PYTHONHASHSEED randomizes it per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run_twice(example: str, tmp_path: Path, *extra: str) -> list[Path]:
    """The example run in two processes with different PYTHONHASHSEEDs; their run folders."""
    outs = []
    for seed in ("1", "3"):  # seeds that order small string sets differently (1 and 2 order {"prod", "research"} alike)
        out = tmp_path / seed / "run"  # one folder name: it is report.html's title
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "kubetwin.cli.main", "run", str(EXAMPLES / example), "--out",
                               str(out), *extra], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(out)
    return outs


@pytest.mark.parametrize("example", ["kueue-cohort-borrowing.yaml", "spot-vs-on-demand.yaml",
                                     "autoscaling-gpu-quota.yaml", "jobset-exclusive-placement.yaml"])
def test_run_folder_is_identical_under_different_hash_seeds(example: str, tmp_path: Path) -> None:
    outs = _run_twice(example, tmp_path)
    names = sorted(p.name for p in outs[0].iterdir())
    assert names == sorted(p.name for p in outs[1].iterdir())
    for name in names:  # summary, history, events, timeseries, report and Kueue's metrics.prom
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    if example.startswith("kueue"):  # the series once created in the order of a set of ClusterQueue names
        assert b'kueue_pending_workloads{cluster_queue="prod"' in (outs[0] / "metrics.prom").read_bytes()


@pytest.mark.parametrize("example, duration", [("serving-llama3-epp.yaml", None), ("serving-scale-to-zero.yaml", "2h")])
def test_serving_run_folder_is_identical_under_different_hash_seeds(example: str, duration: str | None,
                                                                     tmp_path: Path) -> None:
    """Every file of a serving run (requests.csv, metrics.prom, timeseries.json with the KEDA/HPA scaling, the
    report) is the same bytes whatever the string-hash seed."""
    outs = _run_twice(example, tmp_path, *(["--duration", duration] if duration else []))
    names = sorted(p.name for p in outs[0].iterdir())
    assert "requests.csv" in names and "metrics.prom" in names
    assert names == sorted(p.name for p in outs[1].iterdir())
    for name in names:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name

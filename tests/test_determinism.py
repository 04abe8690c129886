"""Same inputs and seed give byte-identical output across processes, whatever Python's string-hash seed is:
no controller may depend on set or dict order of strings (PYTHONHASHSEED randomizes it per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("example", ["kueue-cohort-borrowing.yaml", "spot-vs-on-demand.yaml",
                                     "autoscaling-gpu-quota.yaml", "jobset-exclusive-placement.yaml"])
def test_run_folder_is_identical_under_different_hash_seeds(example: str, tmp_path: Path) -> None:
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-m", "kubetwin.cli.main", "run", str(EXAMPLES / example), "--out",
                               str(out)], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(out)
    for name in ("summary.json", "history.jsonl"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name

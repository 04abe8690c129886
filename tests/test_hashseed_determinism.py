"""A run folder does not depend on Python's string hash seed (set iteration order differs per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_kueue_metrics_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    outs = []
    for seed in ("1", "3"):  # two seeds that ordered {"dev", "prod"} differently
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "src")}
        subprocess.run([sys.executable, "-m", "kubetwin.cli.main", "run", str(ROOT / "examples" /
                        "kueue-cohort-borrowing.yaml"), "--out", str(out)], env=env, check=True, capture_output=True)
        outs.append((out / "metrics.prom").read_bytes())
    assert outs[0] == outs[1]

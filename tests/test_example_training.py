"""examples/training-llama-8b-a3.yaml as the README runs it: the pods run for the model's time and `kubetwin explain
job` names the network as what would help most (FSDP over A3 High's TCPX is network-bound)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubetwin.cli.main import app

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "training-llama-8b-a3.yaml"


def test_training_example_runs_and_explains(tmp_path: Path) -> None:
    out = tmp_path / "train"
    res = CliRunner().invoke(app, ["run", str(EXAMPLE), "--out", str(out)])
    assert res.exit_code == 0, res.output
    rec = json.loads((out / "training.json").read_text())["default/llama-8b"]
    assert rec["placement"]["tier"] == "tcpx" and rec["placement"]["world"] == 16
    explain = CliRunner().invoke(app, ["explain", "job", "llama-8b", "--run", str(out)])
    assert explain.exit_code == 0, explain.output
    advice = explain.output.split("Which change would help most:")[1].strip().splitlines()
    assert advice[0].strip().startswith("1. faster network tier")
    assert "comm fsdp (exposed)" in explain.output and "data stall" in explain.output

"""examples/training-tas-blocks.yaml as docs/training.md runs it: the same 64-GPU Job spread over two GKE blocks by
kube-scheduler and kept in one block by Kueue's topology-aware scheduling; the network model reads the placement
from GKE's gce-topology labels, so the step, the job and `explain job`'s advice differ."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kubetwin.cli.main import app

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "training-tas-blocks.yaml"
BLOCK = "cloud.google.com/gce-topology-block"


def test_one_block_steps_faster_than_two(tmp_path: Path) -> None:
    out = tmp_path / "tas"
    res = CliRunner().invoke(app, ["run", str(EXAMPLE), "--out", str(out)])
    assert res.exit_code == 0, res.output
    jobs = json.loads((out / "training.json").read_text())
    spread, one = jobs["default/anywhere"], jobs["default/one-block"]
    assert spread["placement"]["world"] == one["placement"]["world"] == 64
    pools = {rec["name"]: rec["pool"] for rec in one["placement"]["nodes"]}
    assert {p.rsplit("-", 1)[0] for p in pools.values()} in ({"block-a"}, {"block-b"})  # Kueue kept it in a block
    assert len({rec["pool"].rsplit("-", 1)[0] for rec in spread["placement"]["nodes"]}) == 2
    assert one["breakdown"]["step_seconds"] < spread["breakdown"]["step_seconds"]
    assert one["breakdown"]["compute"] == spread["breakdown"]["compute"]  # only the network differs
    explain = CliRunner().invoke(app, ["explain", "job", "anywhere", "--run", str(out)])
    assert explain.exit_code == 0, explain.output
    assert "placement: cross_block" in explain.output
    assert f"one block (Kueue kueue.x-k8s.io/podset-required-topology: {BLOCK})" in explain.output
    explain = CliRunner().invoke(app, ["explain", "job", "one-block", "--run", str(out)])
    assert "placement: same_block" in explain.output and "one block (Kueue" not in explain.output

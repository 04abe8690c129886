"""`kubetwin get` over a saved run returns the state at the asked simulated time."""

from __future__ import annotations

import json

import pytest
from conftest import write_yaml
from k8s_builders import make_pod, make_pool, make_scenario
from typer.testing import CliRunner

from kubetwin.cli.main import app


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    objs = [make_scenario("4h").obj(),
            make_pool("gpu", "g2-standard-8", 1).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            make_pod("first").gpus(1).duration("1h").obj(),
            make_pod("second").gpus(1).duration("1h").create_at("30m").obj()]
    path = write_yaml(tmp / "s.yaml", objs)
    res = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp / "out")])
    assert res.exit_code == 0, res.output
    return tmp / "out"


def _pods(run_dir, at: str) -> dict[str, dict]:
    res = CliRunner().invoke(app, ["get", "pods", "-o", "json", "--run", str(run_dir), "--at", at])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["kind"] == "List"
    return {p["metadata"]["name"]: p for p in doc["items"]}


def test_at_start_only_first_exists_and_waits_for_a_node(run_dir) -> None:
    pods = _pods(run_dir, "0s")
    assert set(pods) == {"first"}
    assert pods["first"]["status"]["phase"] == "Pending" and not pods["first"]["spec"].get("nodeName")


def test_first_running_second_absent_at_20m(run_dir) -> None:
    pods = _pods(run_dir, "20m")
    assert set(pods) == {"first"}
    assert pods["first"]["status"]["phase"] == "Running"
    assert pods["first"]["spec"]["nodeName"].startswith("gke-kubetwin-gpu-")


def test_second_waits_for_the_only_gpu_at_45m(run_dir) -> None:
    pods = _pods(run_dir, "45m")
    assert pods["second"]["status"]["phase"] == "Pending"
    cond = next(c for c in pods["second"]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["reason"] == "Unschedulable"
    assert "1 Insufficient nvidia.com/gpu" in cond["message"]


def test_both_done_at_4h(run_dir) -> None:
    pods = _pods(run_dir, "4h")
    assert pods["first"]["status"]["phase"] == "Succeeded"
    assert pods["second"]["status"]["phase"] == "Succeeded"


def test_get_table_and_unknown_resource(run_dir) -> None:
    res = CliRunner().invoke(app, ["get", "nodes", "--run", str(run_dir)])
    assert res.exit_code == 0 and "Ready" in res.stdout
    res = CliRunner().invoke(app, ["get", "widgets", "--run", str(run_dir)])
    assert res.exit_code == 1
    assert 'the server doesn\'t have a resource type "widgets"' in res.output

"""`kubetwin simulate -f job.yaml --from SNAPSHOT` (kubetwin.simulate, issue 36 item 3): the incoming Job's admission,
start, end, placement, cost and reason for waiting are the ones a full run of the same state gives, in Kueue's and
the scheduler's words; `--runs` gives the start's spread; `-o json` for scripts."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from k8s_builders import make_job, make_scenario, static_node
from kueue_builders import make_cq, make_flavor, make_lq
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.simulate import simulate


def _write(path: Path, objs: list[dict]) -> Path:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path


def _job(name: str, duration: str) -> dict:
    job = make_job(name).cpu("2").queue("lq").obj()
    job["spec"]["template"]["metadata"]["annotations"]["kubetwin.io/duration"] = duration
    return job


def _state(tmp_path: Path) -> Path:
    """A ClusterQueue of 2 CPUs whose quota a running 30-minute Job holds."""
    return _write(tmp_path / "state.yaml", [
        make_scenario("2h").obj(), static_node("n1").obj(), make_flavor("default").obj(),
        make_cq("cq").flavor("default", cpu=2).obj(), make_lq("lq").cluster_queue("cq").obj(), _job("busy", "30m")])


def test_the_answer_is_the_full_runs_in_kueues_words(tmp_path: Path) -> None:
    state = _state(tmp_path)
    incoming = _write(tmp_path / "job.yaml", [_job("eval", "1h")])
    answer = simulate([incoming], [state], duration="2h")
    (o,) = answer.runs[0]
    full = run([state, incoming], duration="2h")
    admitted = full.first_time("Workload", lambda w: any(
        c["type"] == "Admitted" and c["status"] == "True" for c in (w.get("status") or {}).get("conditions") or []),
        prefix="job-eval-")
    assert o.admitted == admitted and 1800 <= admitted < 1860  # when the busy Job's pod ends and frees its quota
    assert o.cluster_queue == "cq" and o.flavors == ["default"]
    assert o.waited_because is not None and o.waited_because.startswith("couldn't assign flavors to pod set")
    assert "insufficient unused quota for cpu in flavor default" in o.waited_because
    assert o.started is not None and o.started >= 1800 and o.finished is not None and o.finished >= o.started + 3600
    assert o.nodes == ["n1"] and o.cost_usd == 0.0  # a static node without a price


def test_runs_give_the_start_spread_and_json(tmp_path: Path) -> None:
    state = _state(tmp_path)
    incoming = _write(tmp_path / "job.yaml", [_job("eval", "1h")])
    res = CliRunner().invoke(app, ["simulate", "-f", str(incoming), "--from", str(state), "--duration", "2h",
                                   "--runs", "3", "-o", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["seeds"] == [0, 1, 2] and len(data["runs"]) == 3
    (row,) = data["start"]
    assert row["workload"] == "Job/default/eval" and row["started_in_runs"] == 3 and row["p10"] <= row["p50"] <= \
        row["p90"]
    table = CliRunner().invoke(app, ["simulate", "-f", str(incoming), "--from", str(state), "--duration", "2h"])
    assert table.exit_code == 0 and "Job/default/eval\n  admitted  30m" in table.output
    assert "by cq (flavors: default)" in table.output and "waited    couldn't assign flavors" in table.output


def test_a_workload_that_never_fits_says_why_in_the_schedulers_words(tmp_path: Path) -> None:
    big = make_job("big").cpu("64").obj()
    incoming = _write(tmp_path / "job.yaml", [big])
    state = _write(tmp_path / "state.yaml", [make_scenario("1h").obj(), static_node("n1").obj()])
    (o,) = simulate([incoming], [state], duration="1h").runs[0]
    assert o.started is None and o.waited_because is not None
    assert o.waited_because.startswith("0/1 nodes are available: 1 Insufficient cpu")

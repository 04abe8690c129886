"""`kubetwin get -w` over simulated time as `kubectl get -w` prints a watch (issue 35 item 8): the objects at --at,
then a row per change to the end of the run, rows aligned with the header as kubectl's tabwriter remembers its
widths; --watch-only, --output-watch-events; and `-L` label columns (formatLabelHeaders: the key's last path
segment upper-cased, empty where the label is missing), before LABELS."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.report.rundir import changes_after, state_at

DEMO = Path(__file__).resolve().parents[1] / "src" / "kubetwin" / "scenarios" / "demo"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("watch") / "run"
    res = CliRunner().invoke(app, ["run", str(DEMO), "--duration", "3h", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _get(run_dir: Path, *args: str) -> list[str]:
    res = CliRunner().invoke(app, ["get", *args, "--run", str(run_dir)])
    assert res.exit_code == 0, res.output
    return res.output.splitlines()


def test_watch_prints_the_state_then_every_change_in_order(run_dir: Path) -> None:
    lines = _get(run_dir, "pods", "-n", "research", "--at", "2h", "-w")
    at_2h = {k[2] for k in state_at(run_dir, "2h", {"Pod"})[0] if k[1] == "research"}
    changes = [(etype, o) for _, etype, o in changes_after(run_dir, 7200, {"Pod"})
               if o["metadata"].get("namespace") == "research"]
    assert changes, "the demo's research Jobs keep changing after 2h"
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [ln.split()[0] for ln in lines[1:1 + len(at_2h)]] == sorted(at_2h)
    rows = lines[1 + len(at_2h):]
    assert [r.split()[0] for r in rows] == [o["metadata"]["name"] for _, o in changes]
    phases = {"Pending", "Running", "Completed", "Error", "Terminating", "ContainerCreating"}
    assert all(r.split()[2] in phases for r in rows)
    # RememberWidths: every row's STATUS starts where the header's does, unless a wider cell widened the column
    start = lines[0].index("STATUS")
    short = [r for r in rows if len(r.split()[0]) < start - 10]
    assert short and all(r[start - 1] == " " and r[start] != " " for r in short)


def test_watch_only_and_watch_events(run_dir: Path) -> None:
    only = _get(run_dir, "pods", "-n", "research", "--at", "2h", "--watch-only", "--output-watch-events")
    assert only[0].split()[:2] == ["EVENT", "NAME"]
    events = [ln.split()[0] for ln in only[1:]]
    assert set(events) <= {"ADDED", "MODIFIED", "DELETED"} and "ADDED" in events and "MODIFIED" in events
    full = _get(run_dir, "pods", "-n", "research", "--at", "2h", "-w", "--output-watch-events")
    assert len(full) > len(only) and full[1].startswith("ADDED    ")


def test_label_columns(run_dir: Path) -> None:
    lines = _get(run_dir, "pods", "-A", "--at", "2h", "-L", "batch.kubernetes.io/job-name,team", "-L", "job-name",
                 "--show-labels")
    head = lines[0]
    assert head.split()[-4:] == ["JOB-NAME", "TEAM", "JOB-NAME", "LABELS"]
    starts = [i for i in range(len(head)) if head[i] != " " and (i == 0 or head[i - 1] == " ")]

    def cells(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]

    by_name = {cells(ln)[1]: cells(ln) for ln in lines[1:]}
    job_pod = next(v for k, v in by_name.items() if k.startswith("llama-finetune-"))
    assert job_pod[-4:-1] == ["llama-finetune", "", "llama-finetune"]  # no team label: an empty cell
    assert by_name["too-big"][-4:] == ["", "", "", "<none>"]

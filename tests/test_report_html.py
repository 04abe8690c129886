"""report.html: built from the run folder, deterministic, self-contained, and true to what the objects went through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from k8s_builders import make_pod, make_pool, make_scenario
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.report.html import look_at, write_report
from kubetwin.report.rundata import load_run
from kubetwin.report.timeline import rows_of
from kubetwin.runner import run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("a") / "cohort"
    run([EXAMPLES / "kueue-cohort-borrowing.yaml"], out=out)
    return out


def test_report_is_deterministic_self_contained_and_rebuilt_from_the_folder(cohort: Path, tmp_path: Path) -> None:
    """Same inputs, same bytes: a second run into a folder of the same name, and `kubetwin report RUN`, rebuild
    exactly the page the run wrote."""
    again = tmp_path / "cohort"
    run([EXAMPLES / "kueue-cohort-borrowing.yaml"], out=again)
    written = (cohort / "report.html").read_bytes()
    assert (again / "report.html").read_bytes() == written
    (again / "report.html").unlink()
    res = CliRunner().invoke(app, ["report", str(again)])
    assert res.exit_code == 0, res.output
    assert (again / "report.html").read_bytes() == written
    text = written.decode()
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", text, flags=re.S)
    assert len([s for s in scripts if len(s) > 1_000_000]) == 1  # plotly.js inlined exactly once
    assert not re.search(r"<script[^>]*\bsrc\s*=", text)
    assert "kubetwin run report: cohort" in text and "<th>seed</th><td>1</td>" in text  # the example's seed


def test_timeline_states_come_from_the_workload_conditions(cohort: Path) -> None:
    """sweep-c was running on borrowed quota when prod reclaimed it at 1 h: Kueue's Preempted condition
    (InCohortReclamation) holds until it is admitted again at 3 h; it then runs to completion."""
    rows = {r.label: r for r in rows_of(load_run(cohort))}
    segs = [(s.start, s.end, s.state, s.reason.split(":")[0]) for s in rows["Job research/sweep-c"].segments]
    assert (3600.0, 10801.0, "Preempted", "InCohortReclamation") in segs  # 3 h + the requeuer's 1 s (#9232)
    assert [s[2] for s in segs] == ["Admitted", "Running", "Preempted", "Running", "Succeeded"]
    assert rows["Job prod/finetune"].states() == ["Running", "Succeeded"]
    assert len(rows) == 5


def test_what_to_look_at_names_the_preempted_and_the_waits(cohort: Path) -> None:
    data = load_run(cohort)
    items = look_at(data, rows_of(data))
    assert any(i.startswith("preempted or evicted: ") and "Job research/sweep-c (1x)" in i for i in items)


def test_a_pod_that_fails_shows_failed_with_its_reason(tmp_path: Path) -> None:
    """A pod wanting 30 GiB on a 3g.20gb MIG instance fails at start with CUDA out of memory: its row ends Failed
    with the container's reason, and a mark says where it failed (it was one green bar)."""
    pool = make_pool("gpu", "a2-highgpu-1g", 1).gpus("nvidia-tesla-a100", 1).gpu_partition("3g.20gb") \
        .spec(driverInstallDelay="0s").obj()
    pod = make_pod("oom").gpus(1).duration("60m").annotation("kubetwin.io/gpu-util", "0.1") \
        .annotation("kubetwin.io/gpu-memory", "30Gi").obj()
    run(objects=[make_scenario("2h").obj(), pool, pod], out=tmp_path / "oom")
    row = {r.label: r for r in rows_of(load_run(tmp_path / "oom"))}["Pod default/oom"]
    assert row.states()[-1] == "Failed" and "MIG instance 3g.20gb has 19968 MiB" in row.segments[-1].reason
    assert len(row.marks) == 1 and "Failed" in row.marks[0][1]


def test_no_panel_for_what_did_not_run(tmp_path: Path) -> None:
    """The autoscaler example ran no Kueue, no serving and no training: none of their panels are on the page."""
    out = tmp_path / "auto"
    run([EXAMPLES / "autoscaling-gpu-quota.yaml"], out=out)
    text = write_report(out).read_text()
    groups = re.findall(r"<h2>([^<]+)</h2>", text)
    assert groups == ["What to look at", "Timeline", "Nodes", "Cluster"]


def test_a_tpu_run_draws_no_gpu_allocation(tmp_path: Path) -> None:
    """The TPU slice example has no GPU: no flat-zero GPU allocation panel or headline rows."""
    out = tmp_path / "tpu"
    run([EXAMPLES / "tpu-v5e-slice.yaml"], out=out)
    text = write_report(out).read_text()
    assert "GPU allocation" not in text and "Nodes per pool" in text


def test_hundreds_of_rows_each_get_a_label(tmp_path: Path) -> None:
    """300 pods: 300 rows, every one a y tick of its own (plotly would otherwise label every other category), the
    time axis on top so a scrolled timeline still shows it."""
    from kubetwin.report.panels import timeline_figure

    pods = [make_pod(f"job-{i:03d}").cpu("1").duration(f"{10 + i % 50}m").create_at(f"{i % 60}m").obj()
            for i in range(300)]
    run(objects=[make_scenario("3h").obj(), make_pool("cpu", "e2-standard-8", 4).obj(), *pods],
        out=tmp_path / "many")
    rows = rows_of(load_run(tmp_path / "many"))
    fig = timeline_figure(rows, "t", 3 * 3600)
    assert len(rows) == 300 and list(fig.layout.yaxis.tickvals) == [r.label for r in rows]
    assert fig.layout.xaxis.side == "top" and fig.layout.height >= 300 * 20
    assert sum(r.seconds_in("Pending") > 1800 for r in rows) > 50  # 4 nodes x 8 CPUs: most wait their turn


def test_report_command_refuses_a_folder_that_is_no_run(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 1 and "not a kubetwin run folder" in res.output

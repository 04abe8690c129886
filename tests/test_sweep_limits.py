"""A sweep too big to finish is refused before it starts (issue 34 item 5): the case count at validate and at
`kubetwin sweep`'s start, a limit that --max-cases raises, cases enumerated lazily (a raised 10^9-case grid starts
its first case at once with flat memory), and each axis value checked against its object as validate checks it."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import load_paths
from kubetwin.cli.main import app
from kubetwin.serving.traces.requesttrace import load_request_trace
from kubetwin.sweep import cases
from kubetwin.validation.sweep import DEFAULT_MAX_CASES
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "examples" / "sweeps" / "a3-training-queue.yaml"
SERVING = ROOT / "examples" / "sweeps" / "azure-conv-serving.yaml"
BILLION = 10 ** 9


def _sweep(tmp_path: Path, axes: int = 9, values: int = 10, file: str = "sweep.yaml", **spec: object) -> Path:
    """A Sweep over the A3 training queue with `axes` axes of `values` values each (values ** axes cases)."""
    shutil.copy(BASE, tmp_path / "base.yaml")
    body: dict[str, object] = {"scenario": ["base.yaml"],
                               "axes": [{"name": f"a{i}", "object": "NodePool/a3-spot", "path": "spec.nodeCount",
                                         "values": list(range(values))} for i in range(axes)]}
    body.update(spec)
    f = tmp_path / file
    f.write_text(yaml.safe_dump({"apiVersion": "kubetwin.io/v1alpha1", "kind": "Sweep", "metadata": {"name": "big"},
                                 "spec": body}, sort_keys=False))
    return f


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_validate_refuses_a_billion_case_grid_with_the_count_and_the_fix(tmp_path: Path) -> None:
    f = _sweep(tmp_path)
    started = time.monotonic()
    res = CliRunner().invoke(app, ["validate", str(f)])
    took = time.monotonic() - started
    assert res.exit_code == 1, res.output
    axes_line = next(i for i, line in enumerate(f.read_text().splitlines(), 1) if line.startswith("  axes:"))
    assert (f"{f}:{axes_line}: error: Sweep/big: spec.axes: Too many: 1,000,000,000 cases: must have at most "
            f"{DEFAULT_MAX_CASES:,} (10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 grid, x 1 seed)") in res.output
    assert "fix: reduce the grid" in res.output and "pass --max-cases 1000000000" in res.output
    assert "1 objects, 1 errors" in res.output
    assert took < 30  # each of the 90 axis values validated once, not the 10^9 cases


def test_validate_prints_the_case_count_and_max_cases_raises_the_limit(tmp_path: Path) -> None:
    small = _sweep(tmp_path, axes=2, values=3, seeds=[0, 1])
    res = CliRunner().invoke(app, ["validate", str(small)])
    assert res.exit_code == 0, res.output
    assert "notice: Sweep/big: spec.axes: 9 cases (3 x 3 grid) x 2 seeds = 18 runs" in res.output
    assert "0 errors, 1 notices" in res.output
    big = _sweep(tmp_path, file="big.yaml")
    res = CliRunner().invoke(app, ["validate", "--max-cases", str(BILLION), str(big)])
    assert res.exit_code == 0, res.output
    assert "1,000,000,000 cases (10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 grid) x 1 seed" in res.output
    res = CliRunner().invoke(app, ["validate", "--max-cases", "8", str(small)])
    assert res.exit_code == 1 and "Too many: 9 cases: must have at most 8" in res.output


def test_a_random_search_counts_its_budget_and_samples_a_huge_grid_without_listing_it(tmp_path: Path) -> None:
    # 10^30 cases: more than sys.maxsize, so len(range(grid)) itself would overflow
    f = _sweep(tmp_path, axes=30, search={"strategy": "random", "budget": 50, "seed": 7})
    assert [d for d in validate(load_paths([f])) if d.severity == "error"] == []
    plan = cases.plan(f)
    assert plan.size == 10 ** 30 and plan.count == 50
    started = time.monotonic()
    picked = plan.random_cases()
    assert time.monotonic() - started < 30  # listing 10^30 cases would never end; a loaded CI core is slow, not that
    assert len({c.index for c in picked}) == 50 and [c.index for c in picked] == sorted(c.index for c in picked)
    assert picked == plan.random_cases()  # seeded: the same cases every time
    over = _sweep(tmp_path, file="over.yaml", search={"strategy": "random", "budget": DEFAULT_MAX_CASES + 1})
    errors = [d for d in validate(load_paths([over])) if d.severity == "error"]
    assert [(d.field, d.message.split(" (")[0]) for d in errors] == [
        ("spec.search.budget", f"Too many: {DEFAULT_MAX_CASES + 1:,} cases: must have at most {DEFAULT_MAX_CASES:,}")]


def test_the_grid_is_enumerated_lazily(tmp_path: Path) -> None:
    plan = cases.plan(_sweep(tmp_path), max_cases=BILLION)
    started = time.monotonic()
    first = list(itertools.islice(plan.grid(), 3))
    assert time.monotonic() - started < 10  # three cases, not a listing of 10^9 (minutes, gigabytes)
    assert [c.id for c in first] == ["c000000000", "c000000001", "c000000002"]
    assert plan.nth(BILLION - 1).choice == (9,) * 9


# runs the CLI and writes its own peak RSS (VmHWM: this process's, since its exec; a fork's ru_maxrss would carry the
# pytest worker's pages it was forked from) to argv[1] on the way out
PEAK = ("import atexit, runpy, sys\n"
        "out = sys.argv.pop(1)\n"
        "def peak():\n"
        "    hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM:')][0].split()[1]\n"
        "    open(out, 'w').write(hwm)\n"
        "atexit.register(peak)\n"
        "runpy.run_module('kubetwin.cli.main', run_name='__main__')\n")


def _run_sweep(args: list[str], out: Path) -> tuple[int, float, int, str]:
    """(exit code, wall seconds, peak RSS in MiB, stderr) of `kubetwin sweep ARGS` in a child process."""
    peak = out.with_suffix(".peak")
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-c", PEAK, str(peak), "sweep", *args], env=_env(), capture_output=True,
                         text=True, timeout=120)
    return res.returncode, time.monotonic() - started, int(peak.read_text()) // 1024, res.stderr


def test_kubetwin_sweep_refuses_a_billion_cases_at_once_with_flat_memory(tmp_path: Path) -> None:
    f = _sweep(tmp_path)
    out = tmp_path / "out"
    rc, wall, rss_mib, stderr = _run_sweep([str(f), "--out", str(out), "--jobs", "1"], out)
    assert rc == 1, stderr
    assert "spec.axes: Too many: 1,000,000,000 cases" in stderr and "--max-cases 1000000000" in stderr
    assert not out.exists()  # refused before it prepared anything
    # measured: ~0.5 s and ~85 MiB (the interpreter, the twin's imports and the scenario); before, the grid's cases
    # were listed first: nothing printed while memory grew (~37 MB/s on that machine; ~8 MB/s in the issue)
    assert wall < 60 and rss_mib < 400, (wall, rss_mib)


def test_max_cases_starts_a_billion_case_grid_at_once_with_flat_memory(tmp_path: Path) -> None:
    f = _sweep(tmp_path)
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "kubetwin.cli.main", "sweep", str(f), "--out", str(out), "--jobs",
                          "1", "--max-cases", str(BILLION), "--no-report"], env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()  # the count, printed before the first case runs
        assert line.startswith("sweep big: 1,000,000,000 cases (10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 grid)"), \
            line
        deadline = time.monotonic() + 60
        done: list[Path] = []
        while len(done) < 5 and time.monotonic() < deadline and p.poll() is None:  # the rows it reports
            done = list((out / "cases").glob("*.json")) if (out / "cases").is_dir() else []
            time.sleep(0.1)
        assert len(done) >= 5, "no case finished within 60 s"
        rss_kib = next(int(x.split()[1]) for x in Path(f"/proc/{p.pid}/status").read_text().splitlines()
                       if x.startswith("VmHWM:"))
        assert rss_kib < 400 * 1024, rss_kib  # the grid is not in memory
    finally:
        p.terminate()
        p.wait(timeout=30)
        if p.stdout is not None:
            p.stdout.close()
    assert p.returncode is not None  # no process left behind


def test_an_axis_value_is_checked_against_its_object_as_validate_and_the_run_check_it(tmp_path: Path) -> None:
    """format: vidur on Azure's CSV passed validate and failed at run; now validate gives the run's words."""
    scenario = yaml.safe_load_all(SERVING.read_text())
    objs = list(scenario)
    for o in objs:
        if o.get("kind") == "RequestTrace":
            o["spec"]["path"] = str((SERVING.parent / o["spec"]["path"]).resolve())
            trace = o
    (tmp_path / "serving.yaml").write_text(yaml.safe_dump_all(objs, sort_keys=False))
    f = tmp_path / "sweep.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "kubetwin.io/v1alpha1", "kind": "Sweep", "metadata": {"name": "fmt"},
                                 "spec": {"scenario": ["serving.yaml"], "axes": [
                                     {"name": "fmt", "object": "RequestTrace/default/azure-conv",
                                      "path": "spec.format", "values": ["azure-llm-2023", "vidur"]}]}},
                                sort_keys=False))
    errors = [d for d in validate(load_paths([f])) if d.severity == "error"]
    assert [d.field for d in errors] == ["spec.axes[0].values[1]"]
    with pytest.raises(KubetwinError) as ran:
        load_request_trace({**trace, "spec": {**trace["spec"], "format": "vidur"}}, tmp_path / "serving.yaml")
    run_says = ran.value.diagnostics[0]
    assert "not a vidur trace: missing column(s) arrived_at" in run_says.message
    assert errors[0].message == (f"fmt=\"vidur\" makes RequestTrace/default/azure-conv invalid: spec.path: "
                                 f"{run_says.message}")
    assert errors[0].hint == run_says.hint

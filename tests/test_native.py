"""The compiled hot modules (kubetwin.native, mypyc) decide and write exactly what the pure Python does, and are
used only when built from the sources as they are.

Every runnable scenario (conftest.RUNNABLE, long ones cut short) and a 2,000-pod scale run go once with
KUBETWIN_NATIVE=0 and once with the compiled modules, into same-named folders: every file, report.html included,
must be byte-identical. The test suite itself runs
the pure Python (conftest sets KUBETWIN_NATIVE=0: tests monkeypatch functions the compiled code would bind early).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import RUNNABLE, SHORT_DURATION, load_script, missing_shared_trace, with_namespaces

from kubetwin import native

ROOT = Path(__file__).resolve().parents[1]
NOT_USABLE = native.refusal(honor_env=False)
needs_build = pytest.mark.skipif(bool(NOT_USABLE), reason=f"kubetwin.native is not usable here: {NOT_USABLE} "
                                                           "(`make test` builds it where mypy and a C compiler are)")


def _env(native_on: bool) -> dict[str, str]:
    return {**os.environ, native.ENV: "1" if native_on else "0"}


def _run(args: list[str], cwd: Path, native_on: bool) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "kubetwin.cli.main", *args], cwd=cwd, env=_env(native_on),
                          capture_output=True, text=True, timeout=600)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _same_both_ways(tmp_path: Path, args: list[str], name: str) -> None:
    runs = {}
    for native_on in (False, True):
        side = tmp_path / ("native" if native_on else "pure")
        done = _run([*args, "--out", name], side, native_on)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[native_on] = _files(side / name)
    pure, compiled = runs[False], runs[True]
    assert sorted(pure) == sorted(compiled)
    differ = [f for f in pure if pure[f] != compiled[f]]
    assert not differ, f"compiled run differs from the pure Python in {differ}"


@needs_build
def test_a_process_runs_the_compiled_modules_unless_turned_off():
    code = "import kubetwin.store.store as s, kubetwin.native as n; print(n.active(), s.__file__.endswith('.py'))"
    on = subprocess.run([sys.executable, "-c", code], env=_env(True), capture_output=True, text=True, check=True)
    off = subprocess.run([sys.executable, "-c", code], env=_env(False), capture_output=True, text=True, check=True)
    assert on.stdout.split() == ["True", "False"]
    assert off.stdout.split() == ["False", "True"]


@needs_build
@pytest.mark.slow
@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
def test_every_scenario_writes_the_same_run_folder_compiled(path: Path, tmp_path: Path):
    if not path.exists() or missing_shared_trace(path):
        pytest.skip(f"{path.name}: needs ../shared")
    paths = [str(p) for p in with_namespaces(path)]
    cut = SHORT_DURATION.get(path.name)
    _same_both_ways(tmp_path, ["run", *paths, *(["--duration", cut] if cut else [])], path.stem)


@needs_build
@pytest.mark.slow
def test_a_scale_run_writes_the_same_run_folder_compiled(tmp_path: Path):
    """2,000 pods onto 1,000 nodes (benchmarks/bench_report.py's scenario): the history worker takes over, the
    scheduler's node table and the ReplicaSet controller's batches at scale."""
    bench = load_script(ROOT / "benchmarks" / "bench_report.py", "bench_report_native")
    scenario = tmp_path / "scale.yaml"
    scenario.write_text(yaml.safe_dump_all(bench.scenario(1000, 2000, True), sort_keys=False))
    _same_both_ways(tmp_path, ["run", str(scenario)], "scale")


@needs_build
def test_an_edited_source_runs_the_pure_python_until_rebuilt(tmp_path: Path):
    """A copy of the package with its build: as built it runs compiled; a source touched but unchanged still does
    (contents checked when the times differ); a source changed runs the pure Python, never a stale binary."""
    pkg = tmp_path / "src" / "kubetwin"
    shutil.copytree(native.PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    code = "import kubetwin.native as n; print(n.status())"

    def status() -> str:
        env = {**_env(True), "PYTHONPATH": str(pkg.parent)}
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              check=True, cwd=tmp_path).stdout.strip()

    assert status().startswith("native (mypyc)")  # copytree keeps the contents: the content fingerprint holds
    store = pkg / "store" / "store.py"
    store.write_text(store.read_text() + "\n# edited\n")
    assert status() == "pure Python: sources changed since the build"


@needs_build
@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["demo", "scale"])
def test_a_compiled_run_makes_no_cyclic_garbage(scenario: str, tmp_path: Path):
    """The run pauses the cyclic GC (tests/test_run_gc.py checks the pure Python); compiled, a closure that another
    closure keeps is a reference cycle (mypyc's environment objects), so the compiled modules are checked too: the
    demo (Jobs, Spot, the autoscaler) and a 2,000-pod run."""
    if scenario == "demo":
        path = ROOT / "src" / "kubetwin" / "scenarios" / "demo"
    else:
        bench = load_script(ROOT / "benchmarks" / "bench_report.py", "bench_report_native_gc")
        path = tmp_path / "scale.yaml"
        path.write_text(yaml.safe_dump_all(bench.scenario(1000, 2000, True), sort_keys=False))
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "cyclic_garbage.py"), str(path)], env=_env(True),
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "0"


"""A run's history files handed to a forked worker (report.historyworker) are the files the run writes itself, byte
for byte, whatever the compression, wherever Auto switches and whenever the hand-over comes (frames still being
compressed, a plain file half written); the worker's failures reach the run; no worker outlives its run, killed or
not."""

from __future__ import annotations

import html
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from k8s_builders import make_pod, make_pool, make_priority_class, make_scenario

from kubetwin.report import historylog, historyworker
from kubetwin.runner import run
from kubetwin.sim import historyfile, seekable

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker is a Linux fork")


def _objects(compression: str = "Auto") -> list[dict]:
    pcs = [make_priority_class(n).value(v).obj() for n, v in (("low", 10), ("high", 1000))]
    return [make_scenario("2h").spec(historyCompression=compression, report=["summary", "html"]).obj(), *pcs,
            make_pool("gpu", "g2-standard-8", 2).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            *(make_pod(f"low{i}").gpus(1).priority_class("low").duration("30m").create_at(f"{i * 3}m").obj()
              for i in range(8)),
            make_pod("vip").gpus(1).priority_class("high").create_at("10m").obj()]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hand_over: int = 37, **kwargs) -> tuple[Path, Path]:
    """The same run written by a worker (from version `hand_over` on) and by the run itself (folders of one name:
    report.html's title)."""
    outs = []
    for worker in (True, False):
        with monkeypatch.context() as mp:
            mp.setattr(historyworker, "available", lambda w=worker: w)
            mp.setattr(historylog, "HAND_OVER", hand_over)
            out = tmp_path / ("worker" if worker else "inline") / "run"
            run(out=out, **kwargs)
            outs.append(out)
    return outs[0], outs[1]


@pytest.mark.parametrize("hand_over", [1, 37, 250])
@pytest.mark.parametrize("compression", ["Auto", "Zstd", "None"])
def test_the_worker_writes_the_files_the_run_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   compression: str, hand_over: int) -> None:
    monkeypatch.setattr(seekable, "FRAME_BYTES", 4096)  # many frames: some in the zstd thread at the hand-over
    worker, inline = _both(tmp_path, monkeypatch, hand_over, objects=_objects(compression))
    assert _files(worker) == _files(inline)
    assert "report.html" in _files(worker) and len(_files(worker)["history.index"]) > 0


def test_auto_switching_inside_a_chunk_of_lines_writes_the_same_files(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Auto compresses at the line that passes AUTO_BYTES; the worker, handed ~1 MiB chunks, sees that line in the
    middle of one. Compressing what was written plain cuts the frames single lines cut, so the files are the same."""
    monkeypatch.setattr(seekable, "FRAME_BYTES", 4096)
    monkeypatch.setattr(historyfile, "AUTO_BYTES", 30_000)
    worker, inline = _both(tmp_path, monkeypatch, objects=_objects("Auto"))
    assert "history.jsonl.zst" in _files(worker) and "history.jsonl" not in _files(worker)
    assert _files(worker) == _files(inline)


@pytest.mark.parametrize("example", ["kueue-cohort-borrowing.yaml", "serving-llama3-epp.yaml",
                                     "tpu-v5e-multihost-preemption.yaml"])
def test_examples_write_the_same_folders_with_and_without_the_worker(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     example: str) -> None:
    worker, inline = _both(tmp_path, monkeypatch, paths=[EXAMPLES / example])
    assert _files(worker) == _files(inline)


def test_the_history_reads_back_from_what_the_worker_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(historyworker, "available", lambda: True)
    monkeypatch.setattr(historylog, "HAND_OVER", 10)
    held = run(objects=_objects(), out=tmp_path / "held")  # versions kept in memory and written by the worker
    bare = run(objects=_objects(), out=tmp_path / "bare", hold_history=False)  # read back from the files
    assert not bare.history.in_memory and list(bare.history) == list(held.history)
    assert bare.history.compressed is False


def test_a_failure_in_the_worker_fails_the_run_and_leaves_no_folder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker is a fork: what the run's process has patched, it has too; what it raises, the run raises."""
    import kubetwin.report.html as html

    def boom(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(historyworker, "available", lambda: True)
    monkeypatch.setattr(historylog, "HAND_OVER", 10)
    monkeypatch.setattr(html, "write_report", boom)
    with pytest.raises(OSError, match="No space left") as err:
        run(objects=_objects(), out=tmp_path / "r")
    assert any("in the history worker" in note for note in getattr(err.value, "__notes__", []))
    assert list(tmp_path.iterdir()) == []
    assert _children(os.getpid()) == []


def test_no_worker_is_left_after_runs_that_end_or_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubetwin.sim.env import Environment

    monkeypatch.setattr(historyworker, "available", lambda: True)
    monkeypatch.setattr(historylog, "HAND_OVER", 10)
    run(objects=_objects(), out=tmp_path / "ok")
    assert _children(os.getpid()) == []

    def boom(self, *a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(Environment, "run", boom)  # fails before the hand-over
    with pytest.raises(RuntimeError, match="boom"):
        run(objects=_objects(), out=tmp_path / "failed")
    assert not (tmp_path / "failed").exists() and _children(os.getpid()) == []


def test_a_run_that_fails_after_the_hand_over_leaves_no_folder_and_no_worker(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(historyworker, "available", lambda: True)
    monkeypatch.setattr(historylog, "HAND_OVER", 10)
    append = historylog.HistoryLog.append

    def failing(self: historylog.HistoryLog, entry: tuple) -> None:
        if self.count == 60:
            raise RuntimeError("the clock failed")
        append(self, entry)

    monkeypatch.setattr(historylog.HistoryLog, "append", failing)
    with pytest.raises(RuntimeError, match="the clock failed"):
        run(objects=_objects(), out=tmp_path / "r")
    assert list(tmp_path.iterdir()) == [] and _children(os.getpid()) == []


def test_a_small_run_writes_its_files_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below HAND_OVER versions no worker is forked (forking every run slowed small ones down)."""
    def no_fork(*_a, **_k):
        raise AssertionError("forked")

    monkeypatch.setattr(historyworker, "available", lambda: True)
    monkeypatch.setattr(historylog, "HistoryWorker", no_fork)
    res = run(objects=_objects(), out=tmp_path / "r")
    assert 0 < len(res.history) < historylog.HAND_OVER


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return out


def test_the_worker_dies_with_a_killed_run(tmp_path: Path) -> None:
    """kill -9 of `kubetwin run` mid-run: its worker sees the pipe end and exits, writing nothing more."""
    pool = make_pool("cpu", "n2-standard-8", 400).spec(bootDelay="0s").obj()
    pods = [make_pod(f"p{i}").cpu("1").duration("1m").create_at(f"{i % 600}s").obj() for i in range(6000)]
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump_all([make_scenario("2h").obj(), pool, *pods]))
    env = {**os.environ, historyworker.DISABLE_ENV: "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kubetwin.cli.main", "run", str(path), "--out",
                             str(tmp_path / "out")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            workers = _children(proc.pid)
        if not workers:
            pytest.skip("the run ended before its worker was seen (one core: no worker)")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(w) for w in workers)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited (init reaps it)


def test_no_worker_from_a_thread_or_beside_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork is not safe while gRPC's threads run (grpc doc/fork_support.md: a Ray worker, the live tools), nor
    from a thread other than the main one; the run then writes its files itself."""
    import threading
    import types

    monkeypatch.delenv(historyworker.DISABLE_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.delitem(sys.modules, "grpc", raising=False)
    assert historyworker.available()
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(historyworker.available()))
    thread.start()
    thread.join()
    assert seen == [False]
    monkeypatch.setitem(sys.modules, "grpc", types.ModuleType("grpc"))
    assert not historyworker.available()
    monkeypatch.delitem(sys.modules, "grpc")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert not historyworker.available()  # one core: nothing to run it on
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setenv(historyworker.DISABLE_ENV, "0")
    assert not historyworker.available()


def test_a_run_folder_name_with_spaces_tabs_and_newlines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report command carries the folder and the run's name through the pipe as JSON: any character survives."""
    monkeypatch.setattr(historyworker, "available", lambda: True)
    monkeypatch.setattr(historylog, "HAND_OVER", 10)
    out = tmp_path / "a run\twith\nodd name"
    run(objects=_objects(), out=out)
    page = (out / "report.html").read_text()
    assert f"<title>kubetwin run report: {html.escape(out.name)}</title>" in page
    assert (out / "history.index").stat().st_size > 0 and _children(os.getpid()) == []

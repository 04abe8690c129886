"""A run with a folder writes its history as the clock runs (report.historylog): past KEEP versions it stops
holding them, and everything read back — RunResult's history, the report, every file — is what a run that held
them all gives, byte for byte."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
from k8s_builders import make_pod, make_pool, make_priority_class, make_scenario

from kubetwin.report import historylog
from kubetwin.runner import run


def _objects() -> list[dict]:
    pcs = [make_priority_class(n).value(v).obj() for n, v in (("low", 10), ("high", 1000))]
    return [make_scenario("2h").obj(), *pcs,
            make_pool("gpu", "g2-standard-8", 2).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            *(make_pod(f"low{i}").gpus(1).priority_class("low").duration("30m").create_at(f"{i * 3}m").obj()
              for i in range(5)),
            make_pod("vip").gpus(1).priority_class("high").create_at("10m").obj()]


def test_a_streamed_history_reads_back_as_the_one_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    held = run(objects=_objects(), out=tmp_path / "held")
    monkeypatch.setattr(historylog, "KEEP", 50)
    streamed = run(objects=_objects(), out=tmp_path / "streamed")
    assert isinstance(streamed.history, historylog.HistoryLog) and not streamed.history.in_memory
    assert len(streamed.history) > 50
    assert list(streamed.history) == list(held.history)
    assert streamed.last("Pod", "vip") == held.last("Pod", "vip")
    files = sorted(p.name for p in (tmp_path / "held").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "streamed").iterdir())
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "held", tmp_path / "streamed", files, shallow=False)
    assert mismatch == [] and errors == []


def test_a_run_that_fails_on_the_clock_leaves_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubetwin.sim.env import Environment

    def boom(self, *a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(Environment, "run", boom)
    with pytest.raises(RuntimeError):
        run(objects=_objects(), out=tmp_path / "r")
    assert list(tmp_path.iterdir()) == []


def test_kubetwin_run_holds_none_of_the_history(tmp_path: Path) -> None:
    """`kubetwin run` (hold_history=False) writes the same folder with no version held in memory."""
    held = run(objects=_objects(), out=tmp_path / "held")
    bare = run(objects=_objects(), out=tmp_path / "bare", hold_history=False)
    assert isinstance(bare.history, historylog.HistoryLog) and not bare.history.in_memory
    assert list(bare.history) == list(held.history)
    files = sorted(p.name for p in (tmp_path / "held").iterdir())
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "held", tmp_path / "bare", files, shallow=False)
    assert mismatch == [] and errors == []

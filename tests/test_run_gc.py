"""The run pauses the cyclic GC while the clock runs; that is only safe while the controllers make no cycles."""

from __future__ import annotations

import gc
from importlib import resources

import pytest
from cyclic_garbage import cycles_left
from k8s_builders import make_pod, make_pool, make_priority_class, make_scenario

from kubetwin.runner import run

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out


def _preemption_scenario() -> list[dict]:
    pcs = [make_priority_class(n).value(v).obj() for n, v in (("low", 10), ("high", 1000))]
    return [make_scenario("2h").obj(), *pcs,
            make_pool("gpu", "g2-standard-8", 2).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            *(make_pod(f"low{i}").gpus(1).priority_class("low").duration("30m").obj() for i in range(3)),
            make_pod("vip").gpus(1).priority_class("high").create_at("10m").obj(),
            make_pod("too-big").gpus(4).obj()]


@pytest.mark.parametrize("source", ["demo", "preemption"])
def test_run_makes_no_cyclic_garbage(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    demo = resources.files("kubetwin").joinpath("scenarios", "demo")

    def once() -> None:
        if source == "demo":
            with resources.as_file(demo) as path:
                run([path])
        else:
            run(objects=_preemption_scenario())

    assert cycles_left(monkeypatch, once) == 0


def test_run_restores_the_collector() -> None:
    assert gc.isenabled()
    run(objects=[make_scenario("10m").obj(), make_pool("cpu", "e2-standard-8", 1).obj(), make_pod("p").cpu("1").obj()])
    assert gc.isenabled()


def test_kubetwin_run_in_process_restores_the_collector(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the `kubetwin` executable (cli.main.main, whose process ends with the command) leaves the collector off
    after `run`; the app invoked in-process (tests, a notebook) gets it back."""
    import yaml
    from typer.testing import CliRunner

    from kubetwin.cli import main as cli

    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump_all([make_scenario("10m").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
                                            make_pod("p").cpu("1").obj()]))
    assert gc.isenabled()
    assert CliRunner().invoke(cli.app, ["run", str(scenario), "--out", str(tmp_path / "r")]).exit_code == 0
    assert gc.isenabled()
    monkeypatch.setattr(cli, "_PROCESS_ENDS_AFTER_COMMAND", True)
    try:
        assert CliRunner().invoke(cli.app, ["run", str(scenario), "--out", str(tmp_path / "r2")]).exit_code == 0
        assert not gc.isenabled()
    finally:
        gc.enable()

"""docs/kubectl.md's examples run as printed: each ```console block's `$ kubetwin ...` command, on a fresh run of
the example the page names, prints exactly the lines below it (stdout then stderr) with kubectl's exit code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubetwin.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "kubectl.md"


def examples() -> list[tuple[str, str]]:
    blocks = re.findall(r"```console\n\$ (kubetwin [^\n]+)\n(.*?)```", DOC.read_text(), re.S)
    return [(cmd, out) for cmd, out in blocks]


@pytest.fixture(scope="module")
def kueue_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "kueue"
    res = CliRunner().invoke(app, ["run", str(ROOT / "examples" / "kueue-cohort-borrowing.yaml"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_the_page_has_examples_of_every_command() -> None:
    cmds = [c for c, _ in examples()]
    assert len(cmds) >= 14
    for verb in ("get", "describe", "version", "api-resources"):
        assert any(c.split()[1] == verb for c in cmds), verb


@pytest.mark.parametrize(("cmd", "expected"), examples(), ids=[c for c, _ in examples()])
def test_example_prints_what_the_page_shows(cmd: str, expected: str, kueue_run: Path) -> None:
    args = [str(kueue_run) if a == "runs/kueue" else a for a in shlex.split(cmd)[1:]]
    res = CliRunner().invoke(app, args)
    want = expected.rstrip("\n")
    assert (res.stdout + res.stderr).rstrip("\n") == want
    failed = want.startswith(("error:", "Error from server"))
    assert res.exit_code == (1 if failed else 0), res.output

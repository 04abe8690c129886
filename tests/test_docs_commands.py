"""The README tour and every docs page's commands run as printed, each page on a fresh checkout-shaped folder.

A page's ```sh blocks (each a bash script, `-e -o pipefail`; `\\` continues a line) and ```console blocks (each
`$ ` line on its own, with the exit code its output shows) run in order, from a folder shaped like the repository
after `make demo`: `examples/`, `src/`, `benchmarks/` and `tests/` linked in, `.venv/bin/{kubetwin,python,pytest}`
running this interpreter, `kubetwin` on PATH too, and `make demo` doing what the Makefile's demo recipe does
(checked below). ```python blocks run in the same folder. A block a test must not run is preceded by
`<!-- not run: REASON -->`.
kubectl.md's and explain.md's tests also compare outputs; this one checks exit codes and that nothing is a
traceback.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHARED = ROOT.parent / "shared"
RUN = ("sh", "console", "python")
NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")
FENCE = re.compile(r"^```(\w*)\s*$")
COMMAND = re.compile(r"^(\$ )?(\.venv/bin/|kubetwin |make |python )")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    not_run: str | None

    def commands(self) -> list[str]:
        """The block's commands: sh lines (continuations joined), console `$ ` lines; comments stay (bash drops
        them)."""
        lines = self.text.splitlines()
        if self.lang == "console":
            lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
        out: list[str] = []
        for ln in lines:
            if out and out[-1].endswith("\\"):
                out[-1] = out[-1][:-1] + " " + ln.strip()
            elif ln.strip() and not ln.lstrip().startswith("#"):
                out.append(ln)
        return out


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        reason = NOT_RUN.match(before.strip())
        found.append(Block(page, i + 1, m.group(1), "\n".join(lines[i + 1:end]), reason.group(1) if reason else None))
        i = end + 1
    return found


def _shim(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def checkout(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A folder shaped like the repository after `make demo`, and the environment its commands run in."""
    repo = tmp / "kubetwin"
    (repo / ".venv" / "bin").mkdir(parents=True)
    for name in ("examples", "src", "benchmarks", "tests", "docs", "Makefile", "pyproject.toml"):
        (repo / name).symlink_to(ROOT / name)
    if SHARED.is_dir():
        (tmp / "shared").symlink_to(SHARED)
    bin_ = repo / ".venv" / "bin"
    _shim(bin_ / "kubetwin", f'exec "{sys.executable}" -m kubetwin.cli.main "$@"')
    _shim(bin_ / "python", f'exec "{sys.executable}" "$@"')
    _shim(bin_ / "pytest", f'exec "{sys.executable}" -m pytest "$@"')
    path = tmp / "path"
    path.mkdir()
    (path / "kubetwin").symlink_to(bin_ / "kubetwin")
    _shim(path / "make", '[ "$1" = demo ] && [ $# -eq 1 ] || { echo "the doc-test runs only make demo" >&2; exit 2; }\n'
          'exec .venv/bin/kubetwin demo --out runs/demo')
    env = {**os.environ, "PATH": f"{path}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT / "src"),
           "COLUMNS": "200", "PYTHONHASHSEED": "0"}
    return repo, env


def test_make_demo_is_what_the_shim_runs() -> None:
    """The doc-test's `make demo` runs the Makefile's demo recipe (after its install step)."""
    recipe = re.search(r"^demo: install\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None and recipe.group(1) == "$(VENV)/bin/kubetwin demo --out runs/demo"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_command_hides_outside_a_runnable_block(page: Path) -> None:
    """A command written in a block the test does not run (no language, yaml, text) would never be checked."""
    hidden = {f"{page.name}:{b.line} ```{b.lang}": [ln for ln in b.text.splitlines() if COMMAND.match(ln)]
              for b in blocks(page) if b.lang not in RUN or (b.lang == "console" and "$ " not in b.text)}
    assert not {where: cmds for where, cmds in hidden.items() if cmds}, "commands in blocks that are not run"


def test_not_run_blocks_are_few_and_say_why() -> None:
    skipped = [b for p in PAGES for b in blocks(p) if b.lang in RUN and b.not_run]
    # each a command of minutes (the FGD studies, the scale-to-zero and serving studies, the 30-minute gateway soak)
    # whose code path a shorter run on the same page or a test already covers, or make test itself
    assert len(skipped) <= 7, [(b.page.name, b.line, b.not_run) for b in skipped]
    assert all(len(b.not_run or "") >= 15 for b in skipped)


def test_the_readme_is_a_short_tour() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    first = blocks(ROOT / "README.md")[0]
    assert first.text.splitlines() == [
        "make demo   # creates .venv, installs kubetwin, runs the built-in scenario, writes runs/demo/report.html",
        "make test   # installs the test extras (and Debian's chromium when missing), runs ruff, mypy, "
        "import-linter, pytest"]
    for link in re.findall(r"\]\(([^)#]+)", text) + re.findall(r'src="([^"]+)"', text):
        assert (ROOT / link).exists(), link


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang in RUN for b in blocks(p))], ids=lambda p: p.name)
def test_the_commands_run_as_printed(page: Path, tmp_path: Path) -> None:
    runnable = [b for b in blocks(page) if b.lang in RUN and not b.not_run]
    assert runnable, f"{page.name}: every runnable block is marked not run"
    text = "\n".join(b.text for b in runnable)
    if "../shared" in text and not SHARED.is_dir():
        pytest.skip("the page's commands read ../shared (the public traces), which is not beside this checkout")
    repo, env = checkout(tmp_path)
    for b in runnable:
        if b.lang == "python":
            res = subprocess.run([sys.executable, "-c", b.text], cwd=repo, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert res.returncode == 0, f"{page.name}:{b.line}: python block failed\n{res.stderr[-3000:]}"
            continue
        # an sh block is one script (a server started with `&` can be stopped by a later line); a console
        # transcript's commands run one by one, each with the exit code its output shows
        scripts = ["\n".join(b.commands())] if b.lang == "sh" else b.commands()
        for cmd in scripts:
            res = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=repo, env=env, capture_output=True,
                                 text=True, timeout=600)
            out = res.stdout + res.stderr
            assert "Traceback (most recent call last)" not in out, f"{page.name}:{b.line}: {cmd}\n{out[-3000:]}"
            expect_failure = b.lang == "console" and _shows_failure(b.text, cmd)
            assert (res.returncode != 0) == expect_failure, \
                f"{page.name}:{b.line}: `{cmd}` exited {res.returncode}\n{out[-3000:]}"


def _shows_failure(block: str, cmd: str) -> bool:
    """A console transcript whose output for `cmd` is kubectl's error (`error: ...`, `Error from server ...`)."""
    after = block.split("$ " + cmd, 1)[1].lstrip("\n").splitlines()
    first = next((ln for ln in after if ln.strip()), "")
    return first.startswith(("error:", "Error from server"))

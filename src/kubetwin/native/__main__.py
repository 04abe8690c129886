"""`python -m kubetwin.native build [--force]`: compile kubetwin.native.MODULES with mypyc into kubetwin/native/lib.

Up to date: nothing to do. Otherwise mypyc type-checks the modules with the project's mypy configuration and the C
compiler builds them in a temporary folder, which replaces lib/ only when every module built: an interrupted or
failed build leaves the previous one (or none) and the pure Python runs. `status` prints what a run would use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kubetwin import native

_SETUP = """
import sys
from mypyc.build import mypycify
from setuptools import setup
paths = sys.argv[1:]
sys.argv = [sys.argv[0], "build_ext", "--build-lib", "out", "--build-temp", "tmp"]
setup(name="kubetwin-native", ext_modules=mypycify(paths, opt_level="3", group_name={group!r},
                                                   target_dir="c"))
"""


def build(force: bool = False) -> int:
    if not force and not native.refusal(honor_env=False):
        print("kubetwin.native: up to date")
        return 0
    try:
        import mypyc  # noqa: F401 (the compiler ships with mypy)
    except ImportError:
        print("kubetwin.native: mypy (mypyc) is not installed: the pure Python runs", file=sys.stderr)
        return 1
    src = native.PACKAGE.parent
    config = src.parent / "pyproject.toml"
    before = native.fingerprint(content=True)
    paths = [str(src.joinpath(*m.split(".")).with_suffix(".py")) for m in native.MODULES]
    with tempfile.TemporaryDirectory(prefix="kubetwin-native-") as tmp:
        work = Path(tmp)
        (work / "setup.py").write_text(_SETUP.format(group=native.GROUP))
        args = [sys.executable, "setup.py", *([f"--config-file={config}"] if config.is_file() else []), *paths]
        env = {**os.environ, "MYPYPATH": str(src)}
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout[-4000:] + done.stderr[-4000:], file=sys.stderr)
            print("kubetwin.native: the build failed: the pure Python runs", file=sys.stderr)
            return 1
        if native.fingerprint(content=True) != before:
            print("kubetwin.native: sources changed during the build: not installed", file=sys.stderr)
            return 1
        staged = work / "lib"
        shutil.copytree(work / "out", staged)
        (staged / native.MANIFEST).write_text(json.dumps({
            "abi": native.abi(), "modules": list(native.MODULES), "stat": native.fingerprint(),
            "content": before}, indent=1) + "\n")
        old = native.LIB.with_name("lib.old")
        shutil.rmtree(old, ignore_errors=True)
        if native.LIB.exists():
            native.LIB.rename(old)
        shutil.move(str(staged), native.LIB)
        shutil.rmtree(old, ignore_errors=True)
    print(f"kubetwin.native: built {len(native.MODULES)} modules into {native.LIB}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["status"]:
        print(native.status())
        return 0
    if argv[:1] == ["build"]:
        return build(force="--force" in argv[1:])
    print(__doc__.strip().splitlines()[0], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

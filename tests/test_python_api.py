"""The notebook API as the README shows it: `kubetwin.run(...)` from a fresh interpreter, in either import order."""

from __future__ import annotations

import subprocess
import sys

import pytest

POD = ("{'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'}, 'spec': {'containers': "
       "[{'name': 'c', 'image': 'x'}]}}")


@pytest.mark.parametrize("first", ["import kubetwin", "import kubetwin.run; import kubetwin",
                                   "from kubetwin.cli.main import main; import kubetwin"])
def test_kubetwin_run_is_the_function_in_any_import_order(first: str) -> None:
    code = (f"{first}\nr = kubetwin.run(objects=[{POD}], duration='1m')\n"
            "assert isinstance(r, kubetwin.RunResult), type(r)\nprint(sorted(r.summary['pods']['by_phase']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['Pending']"

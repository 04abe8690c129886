"""docs/explain.md's commands run as printed (in a scratch folder, the repository's examples and scenarios beside
it) and print what the page says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "explain.md"


def test_the_pages_commands_run_as_printed(tmp_path: Path) -> None:
    block = re.search(r"```sh\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    commands = [c for c in block.group(1).splitlines() if c.strip()]
    assert len(commands) == 5 and all(c.startswith(".venv/bin/kubetwin ") for c in commands)
    for name in ("examples", "src"):
        (tmp_path / name).symlink_to(ROOT / name)
    outputs = []
    for command in commands:
        args = command.split()[1:]
        res = subprocess.run([sys.executable, "-m", "kubetwin.cli.main", *args], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
        assert res.returncode == 0, (command, res.stderr)
        outputs.append(res.stdout)
    seed_pod, fine_tune, sweep = outputs[1], outputs[3], outputs[4]
    assert "FailedScheduling: 0/7 nodes are available: 7 Insufficient nvidia.com/gpu." in seed_pod
    assert "Selected node: gke-demo-a100-spot-f67dfbfc-b0ae" in seed_pod
    assert "h100     Preempt   0        Reclaim      insufficient unused quota for nvidia.com/gpu in flavor h100, " \
        "16 more needed" in fine_tune
    assert "research/job-sweep-d-9ae17 (ClusterQueue research): InCohortReclamation" in fine_tune
    assert "0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in sweep

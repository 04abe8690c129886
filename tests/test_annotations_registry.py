"""The one registry of the twin's annotations (api/annotations.py): every key the code reads is in it, and the
docs/scenarios.md's table is the generated one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kubetwin.validation import annotations

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- annotations:begin -->", "<!-- annotations:end -->"


def test_every_twin_key_the_code_reads_is_registered() -> None:
    keys = set()
    for f in (ROOT / "src" / "kubetwin").rglob("*.py"):
        keys |= set(re.findall(r'"((?:training\.)?kubetwin\.io/[a-z][a-z0-9-]*)"', f.read_text()))
    keys.discard("kubetwin.io/v1alpha1")
    registered = {r.key for r in annotations.rows()} | set(annotations.LABELS)
    assert keys - registered == set()
    assert {"kubetwin.io/fail-after", "kubetwin.io/create-at", "training.kubetwin.io/steps"} <= registered


def test_markdown_table_from_the_command_line() -> None:
    out = subprocess.run([sys.executable, "-m", "kubetwin.validation.annotations", "--markdown"], capture_output=True,
                         text=True, check=True).stdout
    assert out == annotations.markdown()
    assert out.startswith("| annotation | on | value (example) | meaning |")
    kinds = ("Pod, Job, JobSet, Deployment, ReplicaSet, LeaderWorkerSet, PyTorchJob, TrainingRuntime, "
             "ClusterTrainingRuntime")
    assert f"| `kubetwin.io/fail-after` | {kinds} (pod template) | `20m` |" in out


def test_docs_table_is_the_generated_one() -> None:
    readme = (ROOT / "docs" / "scenarios.md").read_text()
    assert BEGIN in readme and END in readme, f"docs/scenarios.md lost its {BEGIN}/{END} markers"
    table = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert table == annotations.markdown(), "regenerate: python -m kubetwin.validation.annotations --markdown"


def test_register_refuses_a_second_row_for_a_key() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        annotations.register(annotations.REGISTRY["kubetwin.io/duration"])

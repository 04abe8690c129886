"""The serving examples validate clean, and a RequestTrace whose file is missing or has a bad row is a diagnostic
naming the manifest, the field and the trace's line: no traceback, and nothing written to --out."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import missing_shared_trace
from typer.testing import CliRunner

from kubetwin.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCENARIO = """apiVersion: kubetwin.io/v1alpha1
kind: Scenario
metadata: {name: s}
spec: {duration: 10m, seed: 0}
---
apiVersion: kubetwin.io/v1alpha1
kind: RequestTrace
metadata: {name: t, namespace: default}
spec:
  format: mooncake
  path: trace.jsonl
  target: {kind: InferencePool, name: pool}
  model: meta-llama/Llama-3.1-8B-Instruct
"""
GOOD = '{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n'


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("serving-*.yaml")))
def test_serving_examples_validate_without_errors(example: str) -> None:
    missing = missing_shared_trace(EXAMPLES / example)
    if missing:
        pytest.skip(f"{example} reads {missing}, which needs ../shared")
    res = CliRunner().invoke(app, ["validate", str(EXAMPLES / example)])
    assert res.exit_code == 0 and " 0 errors" in res.output, res.output


@pytest.mark.parametrize("rows, validate_says, run_says", [
    (None, "trace file not found", "trace file not found"),
    (GOOD + "not json\n", None, "trace.jsonl:2: not JSON"),
    (GOOD + '{"timestamp": 1, "input_length": 10}\n', None, "trace.jsonl:2: missing key 'output_length'"),
])
def test_a_bad_request_trace_is_a_diagnostic_and_writes_nothing(tmp_path: Path, rows: str | None,
                                                                 validate_says: str | None, run_says: str) -> None:
    manifest = tmp_path / "s.yaml"
    manifest.write_text(SCENARIO)
    if rows is not None:
        (tmp_path / "trace.jsonl").write_text(rows)
    checked = CliRunner().invoke(app, ["validate", str(manifest)])
    if validate_says:  # a missing file is caught without running; a bad row only when the run reads the file
        assert checked.exit_code == 1 and f"{manifest}:11: error: RequestTrace/default/t: spec.path: " \
            f"{validate_says}" in checked.output, checked.output
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", str(manifest), "--out", str(out)])
    assert res.exit_code == 1
    assert f"{manifest}:11: error: RequestTrace/default/t: spec.path: " in res.output and run_says in res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)  # a clean exit, not a crash
    assert not out.exists()

"""The mutation fuzzer (benchmarks/fuzz_validate.py) with a fixed seed: a few hundred mutations of examples/*.yaml
(dropped fields, wrong types, huge and negative numbers, unicode, deep nesting, alias bombs, duplicate keys,
non-UTF-8 bytes, YAML tags, truncation, bad twin annotations). Validate never raises anything but a clean
KubetwinError; what it accepts, run runs; every batch stays under a 3 GiB address-space cap and a time limit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_validate.py"


def _fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_validate", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_validate", mod)
    spec.loader.exec_module(mod)
    return mod


def test_mutations_are_deterministic_and_cover_every_kind() -> None:
    fz = _fuzzer()
    a, b = list(fz.mutations(11, 60)), list(fz.mutations(11, 60))
    assert a == b
    ops = {op for _, op, _ in fz.mutations(11, 300)}
    assert ops == set(fz.STRUCTURAL) | set(fz.TEXTUAL)


def test_fuzzed_inputs_validate_cleanly_and_accepted_ones_run() -> None:
    fz = _fuzzer()
    items = list(fz.mutations(16, 300))
    results = []
    for i in range(0, len(items), 150):
        results += fz.check_batch(items[i:i + 150], run_budget=25, mem_gib=3.0, timeout=240)
    bad = fz.findings(results)
    assert not bad, "\n".join(f"{r.get('example')} {r.get('op')}: {r.get('error')}" for r in bad[:3])
    outcomes = {r["outcome"] for r in results}
    assert {"rejected", "ran"} <= outcomes  # the fuzzer reaches both validate errors and real runs
    assert max(r["seconds"] for r in results) < 30

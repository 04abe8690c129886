"""The scheduling trace: what the schedulers decided and why, recorded only when a run asks for it
(`kubetwin run --trace-scheduling`, `Scenario.spec.traceScheduling: true`).

One record per kube-scheduler attempt and per Kueue workload per cycle, stamped with the simulated time, kept in
the order they happened and written as `scheduling-trace.jsonl` (one JSON object a line, keys sorted). The
records' shapes are the schedulers' own (scheduler/trace.py, kueue/cycle.py); this sink only holds them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubetwin.sim.env import Environment

FILE = "scheduling-trace.jsonl"


class SchedulingTrace:
    """The records, each with `t` (simulated seconds) and `kind` ("Pod" or "Workload")."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.records: list[dict[str, Any]] = []

    def add(self, kind: str, record: dict[str, Any]) -> dict[str, Any]:
        """Record one attempt or cycle; the record, which its writer may complete later in the same instant."""
        stamped = {"t": self.env.now, "kind": kind, **record}
        self.records.append(stamped)
        return stamped

    def lines(self) -> str:
        return "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in self.records)


def read(path: Path) -> list[dict[str, Any]]:
    """The records of a run folder's trace file."""
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]

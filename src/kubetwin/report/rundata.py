"""A run folder read back for report.html: its files, and every version of the objects the report draws.

The report is built from these files only (never from the live run), so `kubetwin report RUN` rebuilds the page a
run wrote and can put several runs side by side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetwin.report.rundir import run_meta

__all__ = ["Key", "Record", "RunData", "load_run"]

Key = tuple[str, str, str]  # (kind, namespace, name)
# The kinds the report's timeline and panels read; the rest of history.jsonl is skipped while reading.
KINDS = frozenset({"Job", "JobSet", "Workload", "Pod", "ClusterQueue", "Node", "Event"})


@dataclass(frozen=True)
class Record:
    """One line of history.jsonl: the object as it was stored at simulated time t (seq: its line number)."""

    seq: int
    t: float
    type: str
    obj: dict[str, Any]


@dataclass
class RunData:
    """One run folder: run.json, summary.json, timeseries.json, training.json and the versions the report reads."""

    name: str
    meta: dict[str, Any]
    summary: dict[str, Any]
    timeseries: dict[str, Any]
    training: dict[str, Any]
    versions: dict[Key, list[Record]] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return float(self.meta["duration"])

    def of_kind(self, kind: str) -> dict[Key, list[Record]]:
        """Every object of one kind that the run stored, in the order it was first created."""
        return {k: v for k, v in self.versions.items() if k[0] == kind}


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def load_run(run_dir: Path, name: str | None = None) -> RunData:
    """Read a run folder; KubetwinError when it is not one. `name` labels it (default: the folder's name)."""
    meta = run_meta(run_dir, "summary.json")
    hist = run_dir / "history.jsonl"
    data = RunData(name=name or run_dir.resolve().name, meta=meta,
                   summary=_json(run_dir / "summary.json"), timeseries=_json(run_dir / "timeseries.json"),
                   training=_json(run_dir / "training.json"))
    with hist.open() as f:
        for seq, line in enumerate(f):
            rec = json.loads(line)
            obj = rec["object"]
            if obj["kind"] not in KINDS:
                continue
            data.versions.setdefault(key_of(obj), []).append(Record(seq, rec["t"], rec["type"], obj))
    return data

"""Read a run folder back: the object state at any simulated moment, replayed from history.jsonl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic, KubetwinError

__all__ = ["kind_of", "state_at"]


def kind_of(resource: str) -> str:
    """The kind a kubectl resource name means (plural, singular, short name, kind, optionally .group)."""
    info = kinds.REGISTRY.resolve(resource)
    if info is None:
        raise KubetwinError([Diagnostic("-", 0, "-", "", f'the server doesn\'t have a resource type "{resource}"',
                                        "known: " + ", ".join(sorted({i.plural for i in kinds.REGISTRY})))])
    return info.kind


def state_at(run_dir: Path, at: float | None) -> tuple[dict[tuple[str, str, str], dict], float, dict]:
    """Objects alive at time `at` (end of run if None), keyed by (kind, namespace, name)."""
    hist = run_dir / "history.jsonl"
    meta_file = run_dir / "run.json"
    if not hist.is_file() or not meta_file.is_file():
        raise KubetwinError([Diagnostic(str(run_dir), 0, "-", "", "not a kubetwin run folder (no history.jsonl)",
                                        "pass the --out folder of a `kubetwin run`")])
    meta = json.loads(meta_file.read_text())
    until = meta["duration"] if at is None else at
    objs: dict[tuple[str, str, str], dict] = {}
    with hist.open() as f:
        for line in f:
            rec: dict[str, Any] = json.loads(line)
            if rec["t"] > until:
                break
            o = rec["object"]
            key = (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"])
            if rec["type"] == "DELETED":
                objs.pop(key, None)
            else:
                objs[key] = o
    return objs, until, meta

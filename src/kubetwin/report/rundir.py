"""Read a run folder back: the object state at any simulated moment, replayed from history.jsonl (or
history.jsonl.zst)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.report import historyindex as history_index
from kubetwin.sim.historyfile import HISTORY_FILE, history_path, open_history

__all__ = ["changes_after", "history_file", "kind_info", "kind_of", "run_meta", "seconds_at", "state_at"]


def kind_info(resource: str) -> kinds.KindInfo:
    """The kind a kubectl resource name means (plural, singular, short name, kind, optionally .group)."""
    info = kinds.REGISTRY.resolve(resource)
    if info is None:
        raise KubetwinError([Diagnostic("-", 0, "-", "", f'the server doesn\'t have a resource type "{resource}"',
                                        "known: " + ", ".join(sorted({i.plural for i in kinds.REGISTRY})))])
    return info


def kind_of(resource: str) -> str:
    return kind_info(resource).kind


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$")


def _instant(text: str) -> datetime:
    t = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)  # no offset: UTC, the run's clock


def _exact(seconds: float) -> str:
    """A duration as --at takes it, exactly (6h, 1h30m, 90s): kubectl's age format rounds (60m for 1h)."""
    rest, out = int(seconds), ""
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return out or "0s"


def seconds_at(meta: dict, at: str) -> float:
    """--at as simulated seconds: a duration since the run's start (2h, 90m) or an RFC 3339 time on the run's clock
    (run.json's startTime + simulated seconds, the clock every object's timestamps are written on)."""
    from datetime import timedelta

    from kubetwin.k8s.units import UnitError, parse_duration

    if _RFC3339.match(at.strip()):
        start = _instant(meta["startTime"])
        seconds = (_instant(at.strip()) - start).total_seconds()
        if seconds < 0:
            raise KubetwinError([Diagnostic("--at", 0, "-", "", f"{at} is before the run started ({meta['startTime']})",
                                            f"e.g. --at {meta['startTime']}")])
    else:
        try:
            seconds = parse_duration(at)
        except UnitError as exc:
            raise KubetwinError([Diagnostic("--at", 0, "-", "", str(exc),
                                            "e.g. --at 2h or --at 2026-01-01T02:00:00Z")]) from exc
    duration = meta.get("duration")
    if isinstance(duration, (int, float)) and seconds > duration:  # the history holds nothing after the end
        end = (_instant(meta["startTime"]) + timedelta(seconds=duration)).strftime("%Y-%m-%dT%H:%M:%SZ")
        ended = _exact(duration)
        raise KubetwinError([Diagnostic("--at", 0, "-", "", f"{at} is after the end of the run: the run ended at "
                                        f"{ended} ({end})", f"e.g. --at {ended} (the run's last state)")])
    return seconds


def run_meta(run_dir: Path, *also: str) -> dict:
    """A run folder's run.json; the one "not a kubetwin run folder" error when it, history.jsonl (or
    history.jsonl.zst) or one of the files `also` names is missing."""
    missing = [f for f in ("run.json", *also) if not (run_dir / f).is_file()]
    if history_path(run_dir) is None:
        missing.insert(0, HISTORY_FILE)
    if missing:
        raise KubetwinError([Diagnostic(str(run_dir), 0, "-", "", "not a kubetwin run folder (no "
                                        f"{', '.join(missing)})", "pass the --out folder of a `kubetwin run`")])
    return json.loads((run_dir / "run.json").read_text())


def history_file(run_dir: Path) -> Path:
    """The run folder's history file, plain or compressed (historyfile); the run_meta error when it has none."""
    path = history_path(run_dir)
    if path is None:
        run_meta(run_dir)  # raises "not a kubetwin run folder"
        raise AssertionError(run_dir)
    return path


def state_at(run_dir: Path, at: float | str | None, only_kinds: Collection[str] | None = None,
             needles: Mapping[str, Sequence[bytes]] | None = None,
             ) -> tuple[dict[tuple[str, str, str], dict], float, dict]:
    """Objects alive at time `at` (end of run if None; a string is read by seconds_at), keyed by (kind, namespace,
    name). What a command prints narrows the reading: only `only_kinds` when given, and of a kind in `needles` only
    the versions whose line holds one of its needles (byte strings of a field that never changes once set, such as
    '"name":"web-0"'; the caller still checks the field). The rest of the history is skipped unparsed.

    Lines are parsed with orjson (3x the standard library here); it reads an integer beyond 64 bits as a float,
    which no object the API server stores can hold (its integers are int64)."""
    meta = run_meta(run_dir)
    until = meta["duration"] if at is None else seconds_at(meta, at) if isinstance(at, str) else at
    wanted = None if only_kinds is None else frozenset(only_kinds)
    needles = needles or {}
    # a line whose kind only parsing tells is read unless every kind wanted has needles and it holds none of them
    unknown_read = wanted is None or any(k not in needles for k in wanted)
    every_needle = tuple(n for ns in needles.values() for n in ns)

    def read(line: bytes) -> bool:
        kind = history_index.line_kind(line)
        if kind is None:
            return unknown_read or any(n in line for n in every_needle)
        if wanted is not None and kind not in wanted:
            return False
        ns = needles.get(kind)
        return ns is None or any(n in line for n in ns)

    objs: dict[tuple[str, str, str], dict] = {}
    snapshot = history_index.snapshot_before(run_dir, until)  # the live objects at a point before `until`
    with open_history(history_file(run_dir)) as source:
        if snapshot is not None:
            for kind in sorted(snapshot.kinds) if wanted is None else sorted(wanted):
                for rec in history_index.read_versions(source, snapshot.offsets(kind), read):
                    objs[history_index.object_key(rec["object"])] = rec["object"]
        for line in source.lines(snapshot.offset if snapshot is not None else 0):
            if history_index.line_time(line) > until:
                break
            if wanted is not None and not read(line):
                continue
            rec: dict[str, Any] = orjson.loads(line)
            o = rec["object"]
            key = history_index.object_key(o)
            if wanted is not None and key[0] not in wanted:
                continue
            if rec["type"] == "DELETED":
                objs.pop(key, None)
            else:
                objs[key] = o
    return objs, until, meta


def changes_after(run_dir: Path, after: float, only_kinds: Collection[str]) -> Iterator[tuple[float, str, dict]]:
    """(t, watch event type, object) of every version of `only_kinds` written after simulated time `after`, to the
    end of the run, in the order the store recorded them: what a watch started at `after` sees (`get -w`)."""
    wanted = frozenset(only_kinds)
    snapshot = history_index.snapshot_before(run_dir, after)
    with open_history(history_file(run_dir)) as source:
        for line in source.lines(snapshot.offset if snapshot is not None else 0):
            t = history_index.line_time(line)
            if t <= after:
                continue
            kind = history_index.line_kind(line)
            if kind is not None and kind not in wanted:
                continue
            rec: dict[str, Any] = orjson.loads(line)
            if rec["object"]["kind"] in wanted:
                yield t, rec["type"], rec["object"]

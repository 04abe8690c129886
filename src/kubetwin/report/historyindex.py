"""history.jsonl's line format, and history.index: snapshots of the live objects at points of the history, so reading
the state at a moment (`kubetwin get/describe --at`) reads only the kinds asked for and replays at most one interval
of lines instead of the whole history (issue 32: under 2 s on a run of a million pods).

Each snapshot is taken between two lines of history.jsonl: the byte offset where the next line starts, the simulated
time of the last line before it, and per kind the byte offsets of the latest version of every object of that kind
alive there, in the order a replay from the start would have first met them (so the state read is the same, order
included). A reader takes the last snapshot whose time is not after the moment asked for, reads the objects of the
kinds it needs (in file order), then replays the lines from the snapshot's offset, skipping other kinds' lines
before parsing them. The index names the size of the history it was written for; one that does not match
(history.jsonl edited or cut) is ignored, never trusted.

Format: per snapshot and kind, a zstd frame of a JSON array -- the first offset, then each offset's difference from
the one before (~0.4 bytes an offset: 32x smaller than the plain array, which made the index of a 1,000,000-pod day
851 MB, two and a half times its compressed history) -- and a newline; the last line is the table
{"format": FORMAT, "historyBytes": N, "snapshots": [{"t": T, "offset": O, "kinds": {KIND: [START, LENGTH]}}]} giving
where each frame lies in the file. The table comes last so the snapshots stream to disk as the history is written.
historyBytes is the history's decompressed size when it is history.jsonl.zst. An index of FORMAT_V2 (plain JSON
arrays of offsets, run folders written before) is read as well.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson
import zstandard

from kubetwin.sim.historyfile import HistorySource, history_path, open_history

__all__ = ["EVERY_BYTES", "FORMAT", "INDEX_FILE", "IndexWriter", "Snapshot", "line_kind", "line_time",
           "object_key", "read_versions", "snapshot_before"]

INDEX_FILE = "history.index"
FORMAT, FORMAT_V2 = "kubetwin.history.index/v3", "kubetwin.history.index/v2"
# Twin choice: a snapshot per 32 MiB of history at least (~30,000 lines to replay at most), further apart when the
# live set is large (SPACING bytes of history per byte of snapshot), so the index stays a small fraction of the
# history whatever the run. A history under 32 MiB gets the table and no snapshot.
EVERY_BYTES = 32 * 2**20
SPACING = 16

# history.jsonl's lines are written with sorted keys (historylog.encode_line):
# {"object":{"apiVersion":..,"kind":..,...},
# "rv":..,"t":..,"type":..}. When the object's kind follows its apiVersion (every kind whose other fields all sort
# after "kind": not Event, ConfigMap or Secret), it is read from the line's start without parsing the line.
_HEAD = re.compile(rb'\{"object":\{"apiVersion":"[^"]*","kind":"([^"]+)"')


def line_kind(line: bytes) -> str | None:
    """The kind of the object on a history.jsonl line, read from its start; None when only parsing can tell."""
    m = _HEAD.match(line)
    return m.group(1).decode() if m is not None else None


def object_key(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name): an object's identity in history.jsonl (namespace "" when cluster-scoped)."""
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


@dataclass
class IndexWriter:
    """Fed every history line as it is written (`add`); `close` writes the table. The snapshots go to `path` as
    they are taken, so the writer holds only the live objects' offsets."""

    path: Path
    every: int = EVERY_BYTES
    offset: int = 0
    _t: float = 0.0
    _next: int = 0
    _live: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> uid -> offset (creation order)
    _table: list[dict[str, Any]] = field(default_factory=list)
    _pos: int = 0

    def __post_init__(self) -> None:
        self._next = self.every
        self._file: IO[bytes] = self.path.open("wb")
        self._compressor = zstandard.ZstdCompressor(level=1)

    def add(self, t: float, etype: str, obj: dict[str, Any], size: int) -> None:
        """One line of `size` bytes holding version `obj` at time t, event type etype (ADDED/MODIFIED/DELETED)."""
        live = self._live.get(obj["kind"])
        if live is None:
            live = self._live[obj["kind"]] = {}
        # by uid, the string the object already holds (no key to build): a name deleted and created again is a
        # new uid, placed last, as a replay keyed by name places it
        key = obj["metadata"]["uid"]
        if etype == "DELETED":
            live.pop(key, None)
        else:
            live[key] = self.offset
        self.offset += size
        self._t = t
        if self.offset >= self._next:
            self._snapshot()

    def _snapshot(self) -> None:
        kinds: dict[str, list[int]] = {}
        for kind, live in self._live.items():
            if live:
                offsets = np.fromiter(live.values(), dtype=np.int64, count=len(live))
                deltas = np.diff(offsets, prepend=np.int64(0))
                data = self._compressor.compress(orjson.dumps(deltas, option=orjson.OPT_SERIALIZE_NUMPY)) + b"\n"
                self._file.write(data)
                kinds[kind] = [self._pos, len(data)]
                self._pos += len(data)
        self._table.append({"t": self._t, "offset": self.offset, "kinds": kinds})
        live_objects = sum(len(live) for live in self._live.values())
        self._next = self.offset + max(self.every, SPACING * 12 * live_objects)  # ~12 bytes an offset

    def suspend(self) -> None:
        """Before a fork: the snapshots so far in the file."""
        self._file.flush()

    def abandon(self) -> None:
        """In the process that stops writing after the fork: its copy closed, the table not written."""
        self._file.close()

    def close(self) -> None:
        self._file.write(orjson.dumps({"format": FORMAT, "historyBytes": self.offset, "snapshots": self._table},
                                      option=orjson.OPT_APPEND_NEWLINE))
        self._file.close()


@dataclass(frozen=True)
class Snapshot:
    t: float  # the simulated time of the last history line before `offset`
    offset: int  # where the first line after the snapshot starts
    index: Path
    kinds: dict[str, list[int]]  # kind -> [start, length] of its offsets in the index
    format: str = FORMAT

    def offsets(self, kind: str) -> list[int]:
        """The offsets of the live objects of `kind`, in the order they were first created."""
        if kind not in self.kinds:
            return []
        start, length = self.kinds[kind]
        with self.index.open("rb") as f:
            f.seek(start)
            data = f.read(length)
        if self.format == FORMAT_V2:
            found: list[int] = orjson.loads(data)
            return found
        return list(accumulate(orjson.loads(zstandard.ZstdDecompressor().decompress(data[:-1]))))


def _table(index: Path) -> dict[str, Any] | None:
    """The index's last line, parsed; None when it is not one."""
    with index.open("rb") as f:
        end = f.seek(0, 2)
        size = 1 << 16
        while True:
            f.seek(max(0, end - size))
            chunk = f.read()
            body = chunk[:-1] if chunk.endswith(b"\n") else chunk
            cut = body.rfind(b"\n")
            if cut >= 0 or size >= end:
                break
            size *= 4
    try:
        table = json.loads(body[cut + 1:])
    except ValueError:
        return None
    return table if isinstance(table, dict) else None


def snapshot_before(run_dir: Path, until: float) -> Snapshot | None:
    """The last snapshot at or before simulated time `until`, or None (no index, none that early, or an index
    written for another history.jsonl than the folder holds)."""
    index, history = run_dir / INDEX_FILE, history_path(run_dir)
    if not index.is_file() or history is None:
        return None
    table = _table(index)
    if table is None or table.get("format") not in (FORMAT, FORMAT_V2):
        return None
    with open_history(history) as source:  # history.jsonl.zst: the decompressed size its seek table gives
        if table.get("historyBytes") != source.size:
            return None
    best = None
    for snap in table.get("snapshots") or ():
        if snap["t"] > until:
            break
        best = snap
    return None if best is None else Snapshot(best["t"], best["offset"], index, best["kinds"], table["format"])


def read_versions(source: HistorySource, offsets: list[int], keep: Callable[[bytes], bool] | None = None,
                  ) -> list[dict[str, Any]]:
    """The history records at `offsets` of the open history file, in the order given (read in file order); only
    the lines `keep` accepts, when given, are parsed."""
    found: dict[int, dict[str, Any]] = {}
    for off, line in source.lines_at(sorted(offsets)):
        if keep is None or keep(line):
            found[off] = orjson.loads(line)
    return [found[off] for off in offsets if off in found]


def line_time(line: bytes) -> float:
    """The simulated time of a history.jsonl line, read from its end ("t" is the key before "type")."""
    start = line.rindex(b',"t":') + 5
    return float(line[start:line.index(b",", start)])

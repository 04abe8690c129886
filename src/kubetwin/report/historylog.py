"""A run's history written to its run folder as the clock runs, instead of held until the end.

Every object version the store records goes at once to history.jsonl (and an Event's to events.jsonl, both
compressed past a size: sim/historyfile.py; and its offset to history.index), so a run's memory holds the objects
alive in the store, not every version ever made (issue 32: a day of 1,000,000 pods made some 10 GB of versions).
The first KEEP versions are also kept in memory, so a small run hands them to its report and to RunResult without
parsing its files back; past that, they are read back from the history file when asked for (the same tuples,
parsed).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from kubetwin.report import historyindex
from kubetwin.sim import historyfile
from kubetwin.sim.historyfile import (
    EVENTS_FILE,
    HISTORY_FILE,
    Compression,
    LineSink,
    history_path,
    open_history,
)

__all__ = ["EVENTS_FILE", "HISTORY_FILE", "KEEP", "Entry", "HistoryLog", "dump_text", "encode_line",
           "read_entries"]

Entry = tuple[float, int, str, dict[str, Any]]  # (t, resourceVersion, watch event type, object)
# Twin choice: versions kept in memory as well as written (a 10,000-pod run makes ~68,000; 100,000 pods ~700,000).
KEEP = 250_000

# The standard library's compact, sorted encoder: timeseries.json and run.json, and the lines orjson refuses. One
# encoder built once (json.dumps with keyword arguments builds one per call); check_circular=False: the store's
# objects are trees built from manifests, a cycle could not be stored, copied or compared either.
dump_text: Callable[[Any], str] = json.JSONEncoder(sort_keys=True, separators=(",", ":"),
                                                   check_circular=False).encode


def encode_line(obj: Any) -> bytes:
    """One history.jsonl / events.jsonl line: orjson with sorted keys, 4.8x faster than the standard library's
    encoder on a 10,000-pod run's history (0.71 -> 0.15 CPU s for 67,572 lines; issue 32). Same compact separators
    and key order; orjson writes non-ASCII text as UTF-8 (the standard library escapes it), floats under 1e-4 or
    from 1e16 in its own notation (0.00001, 4.1e-6, 1e16 for 1e-05, 4.1e-06, 1e+16) and NaN/Infinity as null, the
    JSON they should have been. What orjson refuses (an integer beyond 64 bits, a float or key of another type) goes
    through the standard library's encoder, so no object that wrote before fails now."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return (dump_text(obj) + "\n").encode()


def read_entries(path: Path) -> Iterator[Entry]:
    """The versions of a history file (plain or compressed: historyfile.history_path) as the store recorded them."""
    with open_history(path) as source:
        for line in source.lines():
            rec = json.loads(line)
            yield rec["t"], rec["rv"], rec["type"], rec["object"]


class HistoryLog:
    """The store's history sink for a run that writes a folder: `append` writes each version's line (and tells
    `listener`); iterating gives the versions back, from memory while there are at most KEEP, else from
    history.jsonl. `compression`: Scenario.spec.historyCompression (historyfile)."""

    def __init__(self, folder: Path, keep: int | None = None,
                 listener: Callable[[float, str, dict[str, Any]], None] | None = None,
                 compression: Compression = "Auto") -> None:
        self.folder = folder
        self.listener = listener  # told each version as it is written (t, type, object): the report's HistoryFeed
        self.keep = KEEP if keep is None else keep
        self.count = 0
        self._kept: list[Entry] | None = []
        self._auto = compression == "Auto"
        self._auto_bytes = historyfile.AUTO_BYTES
        self._files = contextlib.ExitStack()
        self._history = LineSink(folder, HISTORY_FILE, compression)
        self._events = LineSink(folder, EVENTS_FILE, compression)
        self._files.callback(self._history.close)
        self._files.callback(self._events.close)
        self._index = self._files.enter_context(contextlib.closing(
            historyindex.IndexWriter(folder / historyindex.INDEX_FILE, historyindex.EVERY_BYTES)))

    def append(self, entry: Entry) -> None:
        t, rv, etype, obj = entry
        line = encode_line({"t": t, "rv": rv, "type": etype, "object": obj})
        self._history.write(line)
        self._index.add(t, etype, obj, len(line))
        if obj["kind"] == "Event":
            self._events.write(line)
        if self._auto and self._index.offset >= self._auto_bytes:  # both files compressed from here on
            self._auto = False
            self._history.compress()
            self._events.compress()
        if self.listener is not None:
            self.listener(t, etype, obj)
        self.count += 1
        if self._kept is not None:
            if self.count <= self.keep:
                self._kept.append(entry)
            else:
                self._kept = None  # from here on the versions are read back from the file

    def close(self) -> None:
        """Flush and close the files (the index writes its table)."""
        self._files.close()

    def moved(self, folder: Path) -> None:
        """The run folder was renamed to `folder` (the files are read back from there)."""
        self.folder = folder

    @property
    def compressed(self) -> bool:
        """Whether the history went to history.jsonl.zst (historyfile)."""
        return self._history.compressed

    @property
    def in_memory(self) -> bool:
        return self._kept is not None

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Entry]:
        if self._kept is not None:
            return iter(self._kept)
        path = history_path(self.folder)
        assert path is not None, self.folder
        return read_entries(path)

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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from kubetwin.report import historyindex, historyworker
from kubetwin.report.historyworker import HistoryWorker
from kubetwin.report.rundata import HistoryFeed, Version
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


class _HistoryFiles:
    """history.jsonl, events.jsonl, history.index and the report's feed, built from the history's lines: one at a
    time with its object at hand (`add`, in the run's process), or whole chunks of lines parsed back (`add_lines`,
    in the history worker). Both write the same bytes (FrameWriter cuts chunks where single lines would cut)."""

    def __init__(self, folder: Path, compression: Compression, feed: HistoryFeed | None) -> None:
        self.feed = feed
        self._auto = compression == "Auto"
        self._auto_bytes = historyfile.AUTO_BYTES
        self._files = contextlib.ExitStack()
        self._history = LineSink(folder, HISTORY_FILE, compression)
        self._files.callback(self._history.close)
        self._events = LineSink(folder, EVENTS_FILE, compression)
        self._files.callback(self._events.close)
        self._index = self._files.enter_context(contextlib.closing(
            historyindex.IndexWriter(folder / historyindex.INDEX_FILE, historyindex.EVERY_BYTES)))

    def add(self, t: float, etype: str, obj: dict[str, Any], line: bytes) -> None:
        self._history.write(line)
        self._index.add(t, etype, obj, len(line))
        if obj["kind"] == "Event":
            self._events.write(line)
        if self._auto and self._index.offset >= self._auto_bytes:
            self._compress()
        if self.feed is not None:
            self.feed.add(t, etype, obj)

    def add_lines(self, data: bytes) -> None:
        """Whole lines (data ends with a newline), each parsed back for the index and the feed."""
        self._history.write_lines(data)
        index_add, feed = self._index.add, self.feed
        events = []
        for line in data.split(b"\n")[:-1]:
            rec = orjson.loads(line)
            t, etype, obj = rec["t"], rec["type"], rec["object"]
            index_add(t, etype, obj, len(line) + 1)
            if obj["kind"] == "Event":
                events.append(line)
            if feed is not None:
                feed.add(t, etype, obj)
        if events:
            events.append(b"")
            self._events.write_lines(b"\n".join(events))
        if self._auto and self._index.offset >= self._auto_bytes:
            self._compress()

    def suspend(self) -> None:
        """Before the fork that hands the files to the worker: every byte so far in the files, no thread left."""
        self._history.suspend()
        self._events.suspend()
        self._index.suspend()

    def resume(self) -> None:
        """In the worker, which goes on writing; the feed from here on holds parsed versions, slimmed."""
        self._history.resume()
        self._events.resume()
        if self.feed is not None:
            self.feed.timeline.live = False

    def abandon(self) -> None:
        """In the run, which stops writing: its copies of the files closed, nothing written."""
        self._history.abandon()
        self._events.abandon()
        self._index.abandon()
        self.feed = None

    def _compress(self) -> None:
        """Auto past its size: both files compressed from here on, what was written included."""
        self._auto = False
        self._history.compress()
        self._events.compress()

    def close(self) -> None:
        self._files.close()

    def write_report(self, folder: Path, name: str, versions: Iterable[Version] | None) -> None:
        """report.html from the feed (built as the lines came) or `versions`, with the run's other files in `folder`."""
        from kubetwin.report.html import write_report

        feed, self.feed = self.feed, None  # used once (it ends the timeline's segments)
        write_report(folder, name, versions, feed=feed)


# Twin choice: the worker takes over past this many versions (~2 MB of history). The hand-over (flush, fork)
# takes the run 15-19 ms (measured in the 10,000-pod run), and copy-on-write faults follow on every page it then
# writes; each line after it saves the run ~10 us, so runs a few thousand versions past it gain, smaller ones would
# not (measured: forking every run made the test suite's small runs ~13 % slower; 2,000 instead of 10,000 made the
# 10,000-pod run x0.97 in wall time, 7 pairs).
HAND_OVER = 2_000


def _warm() -> None:
    """The report's imports (plotly: ~0.15 s), made by the worker while the run goes on."""
    import kubetwin.report.html  # noqa: F401


class HistoryLog:
    """The store's history sink for a run that writes a folder: `append` writes each version's line; iterating
    gives the versions back, from memory while there are at most KEEP, else from history.jsonl.
    `compression`: Scenario.spec.historyCompression (historyfile). `report`: build report.html's share of the history
    as it is written (`write_report` writes the page once the run's other files are in the folder).
    `worker`: past HAND_OVER versions, hand the files to a forked process when historyworker.available() says a
    second core can run it (the run then only encodes each line); the files are the same either way."""

    def __init__(self, folder: Path, keep: int | None = None, compression: Compression = "Auto",
                 report: bool = False, worker: bool = False) -> None:
        self.folder = folder
        self.keep = KEEP if keep is None else keep
        self.count = 0
        self._kept: list[Entry] | None = []
        self._compression = compression
        self._bytes = 0  # of history written: whether Auto compressed it (`compressed`)
        self._report = report
        self._files: _HistoryFiles | None = _HistoryFiles(folder, compression,
                                                          HistoryFeed(live=True) if report else None)
        self._worker: HistoryWorker | None = None
        self._hand_over_at = HAND_OVER if worker and historyworker.available() else 0
        self._closed = False

    def _hand_over(self) -> None:
        """Fork the worker, which takes the files (and the report's feed) as they stand and writes the rest."""
        files = self._files
        assert files is not None
        files.suspend()
        self._worker = HistoryWorker(self._served(files), files.resume, _warm if self._report else None)
        files.abandon()
        self._files = None

    @staticmethod
    def _served(files: _HistoryFiles) -> Callable[[bytes | str], None]:
        """What the worker does with lines and commands (historyworker)."""
        def serve(item: bytes | str) -> None:
            if isinstance(item, bytes):
                files.add_lines(item)
            elif item == "close":
                files.close()
            else:  # "report" and the JSON of [folder, name] (any character, newlines included, survives)
                folder, name = json.loads(item.split(" ", 1)[1])
                files.write_report(Path(folder), name, None)
        return serve

    def append(self, entry: Entry) -> None:
        t, rv, etype, obj = entry
        line = encode_line({"t": t, "rv": rv, "type": etype, "object": obj})
        self._bytes += len(line)
        self.count += 1
        if self._files is not None:
            self._files.add(t, etype, obj, line)
            if self.count == self._hand_over_at:
                self._hand_over()
        else:
            assert self._worker is not None
            self._worker.write(line)
        if self._kept is not None:
            if self.count <= self.keep:
                self._kept.append(entry)
            else:
                self._kept = None  # from here on the versions are read back from the file

    def close(self) -> None:
        """Flush and close the files (the index writes its table)."""
        if self._closed:
            return
        self._closed = True
        if self._worker is not None:
            self._worker.request("close")
        else:
            assert self._files is not None
            self._files.close()

    def write_report(self, name: str) -> None:
        """report.html into the folder (after `close`, with the run's other files there); `name` labels the run."""
        assert self._closed and self._report
        if self._worker is not None:
            self._worker.request("report " + json.dumps([str(self.folder), name]))
        else:
            assert self._files is not None
            self._files.write_report(self.folder, name, ((t, etype, obj) for t, _, etype, obj in self)
                                     if self.in_memory else None)

    def release(self) -> None:
        """End the worker, if any, or close the run's own files if `close` was not reached (idempotent; a run that
        fails calls it, and then removes the folder)."""
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.stop()
        elif not self._closed and self._files is not None:
            with contextlib.suppress(Exception):  # the run is failing already: its own error is the one to raise
                self._files.close()
        self._closed = True

    def moved(self, folder: Path) -> None:
        """The run folder was renamed to `folder` (the files are read back from there)."""
        self.folder = folder

    @property
    def compressed(self) -> bool:
        """Whether the history went to history.jsonl.zst (historyfile)."""
        return self._compression == "Zstd" or (self._compression == "Auto" and self._bytes >= historyfile.AUTO_BYTES)

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

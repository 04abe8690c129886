"""The record of every request the data plane (and the live load generator) sees end: one row per request, the rows
requests.csv and summary.json's serving section are made of (serving.observe.results). Columnar lists while the clock
runs, numpy at the end. Split from observe/results.py so the data plane writes its log without importing the
observation that reads it."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from kubetwin.serving.types import Request

# requests.csv columns' compact storage while the run goes on (RequestLog.COLS order): times float64, ids and
# priorities int64, everything else (label indices, status, token counts, preemptions) int32
_COMPACT = {"arrival": np.float64, "scheduled": np.float64, "first": np.float64, "finish": np.float64,
            "id": np.int64, "priority": np.int64}
_CHUNK = 1 << 16  # rows per compact chunk: the tuples alive at once stay a few MB


@dataclass
class RequestLog:
    """Every request that ended (done, shed, failed) and those still in flight at the end.

    One tuple per request (COLS order) while the clock runs: a single append per request is the cheapest record
    Python has (a run logs millions of them). Every _CHUNK rows the tuples become compact columns (about 90 bytes a
    request instead of about 400 as tuples of Python numbers), so a fleet-scale run's log stays small; arrays()
    joins the columns once, at the end. Every value goes through float64 on the way, as arrays() always read them:
    ids, counts and statuses far below 2**53 are exact."""

    names: dict[str, int] = field(default_factory=dict)  # trace / pool / pod name -> index into `labels`
    labels: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)  # the rows not yet in `chunks`
    chunks: list[dict[str, np.ndarray]] = field(default_factory=list)  # compact columns, _CHUNK rows each
    flushed: int = 0  # rows in `chunks`
    starts: list[int] = field(default_factory=list)  # the first row of each chunk (a reader from row r skips to it)

    COLS = ("id", "trace", "pool", "arrival", "pod", "status", "scheduled", "first", "finish", "prompt", "output",
            "cached", "preempt", "priority", "model", "reason", "requested")
    FLOAT_COLS = frozenset(("arrival", "scheduled", "first", "finish"))  # times; every other column is an integer

    def __len__(self) -> int:
        return self.flushed + len(self.rows)

    def _idx(self, name: str) -> int:
        i = self.names.get(name)
        if i is None:
            i = self.names[name] = len(self.labels)
            self.labels.append(name)
        return i

    def add(self, req: Request, trace: str, pool: str) -> None:
        names = self.names
        # routed as: the picker's target (also when it is the base model and `lora` was cleared), else the adapter
        # or model the request named; the same on served, 404, 429 and 503 rows
        model = req.target or req.lora or req.model
        ti, pi, di, mi, ri, qi = names.get(trace), names.get(pool), names.get(req.pod), names.get(model), names.get(
            req.reason), names.get(req.model)
        if ti is None or pi is None or di is None or mi is None or ri is None or qi is None:
            ti, pi, di = self._idx(trace), self._idx(pool), self._idx(req.pod)
            mi, ri, qi = self._idx(model), self._idx(req.reason), self._idx(req.model)
        rows = self.rows
        rows.append((req.id, ti, pi, req.arrival, di, req.status, req.scheduled, req.first_token, req.finish,
                     req.prompt_tokens, req.output_tokens, req.cached_tokens, req.preemptions, req.priority, mi,
                     ri, qi))
        if len(rows) >= _CHUNK:
            self._flush()

    def _flush(self) -> None:
        """The buffered tuples into one compact chunk."""
        m = _matrix(self.rows, len(self.COLS))
        self.chunks.append({k: m[:, j].astype(_COMPACT.get(k, np.int32)) for j, k in enumerate(self.COLS)})
        self.starts.append(self.flushed)
        self.flushed += len(self.rows)
        self.rows = []

    def columns(self, start: int, cols: tuple[str, ...]) -> dict[str, np.ndarray]:
        """The named columns (float64, as the rows read) of rows start.. in the order they were logged: what a
        reader that consumes the log as it grows (serving.observe.histograms) has not seen yet."""
        parts: dict[str, list[np.ndarray]] = {k: [] for k in cols}
        first = max(0, bisect_right(self.starts, start) - 1)  # the chunk that holds row `start`: none before it
        for pos, chunk in zip(self.starts[first:], self.chunks[first:], strict=True):
            if pos + len(chunk["id"]) > start:
                for k in cols:
                    parts[k].append(chunk[k][max(0, start - pos):].astype(np.float64))
        tail = self.rows[max(0, start - self.flushed):]
        if tail:
            m = _matrix(tail, len(self.COLS))
            for k in cols:
                parts[k].append(m[:, self.COLS.index(k)])
        return {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}

    def arrays(self, release: bool = False) -> dict[str, np.ndarray]:
        """Every row's columns, sorted by (arrival, id): floats as float64, the rest as int64. `release` (the log's
        last read, at the end of a run): each column's chunks are dropped once it is joined, so a fleet's log (about
        1 GB at 10 M requests) is not held beside the sorted columns; the log is empty after."""
        if not len(self):
            return {k: np.asarray([]) for k in self.COLS}
        if self.rows:
            self._flush()
        chunks = self.chunks
        order = np.lexsort((np.concatenate([c["id"] for c in chunks]), np.concatenate([c["arrival"] for c in chunks])))
        # a column at a time, so only one unsorted column exists beside the sorted ones
        out = {}
        for k in self.COLS:
            col = np.concatenate([c[k] for c in chunks])
            if release:
                for c in chunks:
                    del c[k]
            out[k] = col[order].astype(np.float64 if k in self.FLOAT_COLS else np.int64, copy=False)
        if release:
            self.chunks, self.starts, self.flushed = [], [], 0
        return out


def _matrix(rows: list[tuple], width: int) -> np.ndarray:
    """Rows of numbers as one float64 matrix: one pass over every value (fromiter: about 3x faster than a column per
    zip)."""
    return np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=len(rows) * width).reshape(len(rows), width)

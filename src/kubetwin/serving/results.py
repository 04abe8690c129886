"""What the serving data plane records: one row per request (requests.csv), the serving section of summary.json and
the per-pool time series the report plots. Columnar lists while the clock runs, numpy at the end."""

from __future__ import annotations

import csv
import io
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from kubetwin.serving.types import Request

# Default SLO when a pool or trace names none: Vidur-Search's TTFT p90 < 2 s and TBT p99 < 200 ms
# (Agrawal et al., "Vidur", MLSys'24, section 6), applied per request: TTFT <= 2 s and TPOT <= 200 ms.
DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT = 2.0, 0.2
# `model`: the model the request was routed as, on every row whatever its status: the InferenceModel target the
# endpoint picker rewrote it to (the Inference Extension's target_model_name), else the LoRA adapter or model it
# named; `requested_model` (added after `reason`: columns are only ever appended): the model the client asked for
# (the extension's model_name, an InferenceModel's modelName).
CSV_FIELDS = ("id", "trace", "pool", "arrival", "pod", "status", "ttft", "tpot", "e2e", "queue", "prompt_tokens",
              "output_tokens", "cached_tokens", "preemptions", "priority", "model", "reason", "requested_model")


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
        reader that consumes the log as it grows (serving.histograms) has not seen yet."""
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


def latencies(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    done = a["status"] == 200
    ttft = np.where(done, a["first"] - a["arrival"], np.nan)
    e2e = np.where(done, a["finish"] - a["arrival"], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(done & (a["output"] > 1), (a["finish"] - a["first"]) / np.maximum(a["output"] - 1, 1), np.nan)
    queue = np.where(a["scheduled"] >= 0, a["scheduled"] - a["arrival"], np.nan)
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e, "queue": queue, "done": done}


def _pct(x: np.ndarray) -> dict[str, float | None]:
    x = x[~np.isnan(x)]
    if not len(x):
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"p50": round(float(p50), 4), "p90": round(float(p90), 4), "p99": round(float(p99), 4),
            "mean": round(float(x.mean()), 4)}


def summarize(a: dict[str, np.ndarray], slo: tuple[float, float]) -> dict[str, Any]:
    """Latency percentiles, SLO attainment, and throughput and goodput over the makespan (first arrival to last
    response), so routers compare on what they served rather than on the offered load."""
    lat = latencies(a)
    done = lat["done"]
    n = len(a["id"])
    span = float(a["finish"][done].max() - a["arrival"].min()) if done.any() else 0.0
    ok = done & (np.nan_to_num(lat["ttft"], nan=np.inf) <= slo[0]) & (np.nan_to_num(lat["tpot"], nan=0.0) <= slo[1])
    out_tokens = int(a["output"][done].sum())
    queried = int(a["prompt"][done].sum())
    return {
        "requests": n, "completed": int(done.sum()),
        "rejected_429": int((a["status"] == 429).sum()), "failed_503": int((a["status"] == 503).sum()),
        "failed_other": int(((a["status"] != 200) & (a["status"] != 429) & (a["status"] != 503)
                             & (a["status"] != 0)).sum()),
        "not_found_404": int((a["status"] == 404).sum()),  # vLLM's unknown model; also within failed_other
        "in_flight_at_end": int((a["status"] == 0).sum()),
        "ttft_seconds": _pct(lat["ttft"]), "tpot_seconds": _pct(lat["tpot"]), "e2e_seconds": _pct(lat["e2e"]),
        "queue_seconds": _pct(lat["queue"]),
        "slo": {"ttft_seconds": slo[0], "tpot_seconds": slo[1]},
        "slo_attainment": round(float(ok.sum() / n), 4) if n else None, "makespan_seconds": round(span, 3),
        "goodput_rps": round(float(ok.sum() / span), 4) if span > 0 else None,
        "throughput_output_tokens_per_s": round(out_tokens / span, 2) if span > 0 else None,
        "output_tokens": out_tokens, "prompt_tokens": queried,
        "request_prefix_hit_rate": round(float(a["cached"][done].sum() / queried), 4) if queried else None,
        "preemptions": int(a["preempt"].sum()),
    }


def overall_slo(slos: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """The objective of the whole run's attainment: the pools' common one, else the default."""
    return next(iter(slos.values())) if len(set(slos.values())) == 1 else (DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT)


def write_csv(a: dict[str, np.ndarray], labels: list[str]) -> str:
    """requests.csv as one string (csv_chunks joined): for what needs the text whole, a small run's or loadgen's."""
    return "".join(csv_chunks(a, labels))


def csv_chunks(a: dict[str, np.ndarray], labels: list[str]) -> Iterator[str]:
    """requests.csv: one row per request, sorted by arrival; times in seconds from the run's start. The header,
    then the rows a bounded chunk at a time, so the runner streams a fleet's file (GBs) into the run folder instead
    of holding it whole.

    Formatted a chunk of rows per `%` operation (one format string, the chunk's values flattened) rather than a
    csv.writer call per row: a million rows take about a second instead of ten. Labels are quoted by the csv module
    once each, numbers never need quoting, a NaN latency is an empty field; the bytes are csv.writer's."""
    lat = latencies(a)
    n = len(a["id"])
    quoted = [_csv_field(x) for x in labels]
    row = "%d,%s,%s,%.6f,%s,%d,%s,%s,%s,%s,%d,%d,%d,%d,%d,%s,%s,%s\n"
    yield ",".join(CSV_FIELDS) + "\n"
    step = 1 << 15  # rows per chunk: bounds the Python objects alive at once (a few MB)
    for lo in range(0, n, step):
        sl = slice(lo, min(n, lo + step))
        cols: list[list] = [
            a["id"][sl].tolist(), [quoted[i] for i in a["trace"][sl].tolist()],
            [quoted[i] for i in a["pool"][sl].tolist()], a["arrival"][sl].tolist(),
            [quoted[i] for i in a["pod"][sl].tolist()], a["status"][sl].tolist(),
            *(_fixed6_or_empty(lat[k][sl]) for k in ("ttft", "tpot", "e2e", "queue")),
            *(a[k][sl].tolist() for k in ("prompt", "output", "cached", "preempt", "priority")),
            [quoted[i] for i in a["model"][sl].tolist()], [quoted[i] for i in a["reason"][sl].tolist()],
            [quoted[i] for i in a["requested"][sl].tolist()]]
        yield row * len(cols[0]) % tuple(chain.from_iterable(zip(*cols, strict=True)))


def _fixed6_or_empty(x: np.ndarray) -> list[str]:
    """Each value as "%.6f", NaN as "" (one `%` over the column; "nan" is the only output ending in "n")."""
    if not len(x):
        return []
    text = ("%.6f\n" * len(x)) % tuple(x.tolist())
    return text.replace("nan\n", "\n").split("\n")[:-1]


def _csv_field(s: str) -> str:
    """`s` as csv.writer writes it inside a row (quoted only when it holds a comma, quote or line break)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow((s, ""))
    return buf.getvalue()[:-2]

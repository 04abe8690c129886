"""Request traces as columnar arrays: loaders for the public LLM traces, the RequestTrace kind's loader, a lazy
Request iterator and summary statistics.

Arrays rather than Request objects because a day of traffic is millions of requests: the engine pulls Request
objects one at a time from `requests()`, so only the in-flight ones exist as Python objects.

Traces read here (all staged under shared/traces/ and shared/profiles/):
- Azure LLM inference 2023 (Azure/AzurePublicDataset@b469a113:data/AzureLLMInferenceTrace_{code,conv}.csv;
  CC-BY-4.0; Patel et al., Splitwise, ISCA'24): TIMESTAMP, ContextTokens, GeneratedTokens.
- Mooncake FAST'25 (kvcache-ai/Mooncake@3b5a5941:FAST25-release/traces/*.jsonl; Apache-2.0; Qin et al.,
  FAST'25): JSON lines {timestamp (ms), input_length, output_length, hash_ids}, one hash id per 512-token
  prefix block.
- Vidur's processed Azure traces (microsoft/vidur@7d475133:data/processed_traces/splitwise_*.csv; MIT):
  arrived_at (s), num_prefill_tokens, num_decode_tokens.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kubetwin.serving.types import Request

MOONCAKE_BLOCK_TOKENS = 512  # Mooncake README: "hash_ids ... each block 512 tokens" (FAST25-release/traces)
FORMATS = ("azure-llm-2023", "mooncake", "vidur")

_U64 = np.uint64
# splitmix64's constants and mix's multiplier, shared by the numpy functions and their int twins (mix_int)
_GOLDEN_I, _SM1_I, _SM2_I, _MIX_I = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93
_GOLDEN = _U64(_GOLDEN_I)


class TraceError(ValueError):
    """A trace file that cannot be read; `field` is the spec field to blame, `hint` how to fix it."""

    def __init__(self, message: str, hint: str = "", field: str = "spec.path"):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.field = field


# ---- deterministic 64-bit hashing (never Python's hash(): it is salted per process by PYTHONHASHSEED) ----


def splitmix64(x: np.ndarray | int) -> np.ndarray:
    """Vectorized splitmix64 finalizer (Steele et al., "Fast splittable pseudorandom number generators")."""
    z = np.asarray(x, dtype=_U64) + _GOLDEN
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _U64(30))) * _U64(_SM1_I)
        z = (z ^ (z >> _U64(27))) * _U64(_SM2_I)
    return z ^ (z >> _U64(31))


def mix(prev: np.ndarray | int, value: np.ndarray | int) -> np.ndarray:
    """Chain a segment onto a prefix hash: mix(prev, id) differs for the same id after a different prefix,
    as vLLM's block hash includes its parent's hash."""
    p = np.asarray(prev, dtype=_U64)
    with np.errstate(over="ignore"):
        return splitmix64(splitmix64(p) ^ (np.asarray(value, dtype=_U64) * _U64(_MIX_I)))


_M64 = (1 << 64) - 1


def _splitmix64_int(z: int) -> int:
    z = (z + _GOLDEN_I) & _M64
    z = ((z ^ (z >> 30)) * _SM1_I) & _M64
    z = ((z ^ (z >> 27)) * _SM2_I) & _M64
    return z ^ (z >> 31)


def mix_int(prev: int, value: int) -> int:
    """`mix` on Python ints, for chains built one link at a time (a numpy scalar call costs ~15 us, this ~1 us):
    the same value as int(mix(prev, value))."""
    return _splitmix64_int(_splitmix64_int(prev & _M64) ^ ((value * _MIX_I) & _M64))


def name_salt(*parts: object) -> int:
    """A stable 64-bit salt from names (blake2b), so two traces' unique segments never collide."""
    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


# ---- the columnar trace ----


@dataclass
class TraceArrays:
    """A trace as columns, sorted by arrival. Request i's prompt is segments seg_offsets[i]:seg_offsets[i+1] of
    seg_hashes (chained: each identifies the whole prefix through that segment) and seg_tokens."""

    arrival: np.ndarray  # float64 seconds from the trace start, non-decreasing
    prompt: np.ndarray  # int32
    output: np.ndarray  # int32
    seg_offsets: np.ndarray  # int64, len n+1 (CSR)
    seg_hashes: np.ndarray  # uint64
    seg_tokens: np.ndarray  # int32
    lora: np.ndarray | None = None  # int32 index into lora_names, -1 = base model
    lora_names: list[str] = field(default_factory=list)
    session: np.ndarray | None = None  # int64 session id, -1 = none

    def __len__(self) -> int:
        return int(self.arrival.shape[0])

    def check(self) -> None:
        """Invariants every producer keeps (used by tests and after transformations)."""
        n = len(self)
        assert self.prompt.shape == (n,) and self.output.shape == (n,)
        assert self.seg_offsets.shape == (n + 1,) and self.seg_offsets[0] == 0
        assert self.seg_offsets[-1] == self.seg_hashes.shape[0] == self.seg_tokens.shape[0]
        assert n == 0 or bool(np.all(np.diff(self.arrival) >= 0))
        sums = np.add.reduceat(self.seg_tokens.astype(np.int64), self.seg_offsets[:-1]) if n else np.zeros(0)
        empty = np.diff(self.seg_offsets) == 0
        assert np.array_equal(np.where(empty, 0, sums), self.prompt)

    def take(self, idx: np.ndarray) -> TraceArrays:
        """The requests at `idx` (in that order), segments carried along."""
        idx = np.asarray(idx, dtype=np.int64)
        starts, ends = self.seg_offsets[idx], self.seg_offsets[idx + 1]
        counts = ends - starts
        offsets = np.zeros(idx.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        seg_idx = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1], dtype=np.int64)
        return TraceArrays(self.arrival[idx], self.prompt[idx], self.output[idx], offsets, self.seg_hashes[seg_idx],
                           self.seg_tokens[seg_idx], None if self.lora is None else self.lora[idx],
                           list(self.lora_names), None if self.session is None else self.session[idx])


def unique_segments(prompt: np.ndarray, salt: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One segment per request with a hash of its own: a trace without prefix information shares nothing."""
    n = prompt.shape[0]
    hashes = mix(_U64(salt), np.arange(n, dtype=_U64))
    return np.arange(n + 1, dtype=np.int64), hashes, prompt.astype(np.int32)


def requests(arrays: TraceArrays, model: str, priority: int = 0, start_id: int = 0,
             chunk: int = 4096) -> Iterator[Request]:
    """Request objects one at a time, built from the arrays in chunks (tolist() per chunk keeps it fast)."""
    n = len(arrays)
    offs = arrays.seg_offsets
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        arr = arrays.arrival[lo:hi].tolist()
        pr = arrays.prompt[lo:hi].tolist()
        out = arrays.output[lo:hi].tolist()
        base = int(offs[lo])
        o = (offs[lo:hi + 1] - base).tolist()
        hs = arrays.seg_hashes[base:int(offs[hi])].tolist()
        ts = arrays.seg_tokens[base:int(offs[hi])].tolist()
        lo_ra = arrays.lora[lo:hi].tolist() if arrays.lora is not None else None
        ses = arrays.session[lo:hi].tolist() if arrays.session is not None else None
        names = arrays.lora_names
        for k in range(hi - lo):
            a, b = o[k], o[k + 1]
            lora = names[lo_ra[k]] if lo_ra is not None and lo_ra[k] >= 0 else None
            session = str(ses[k]) if ses is not None and ses[k] >= 0 else None
            yield Request(start_id + lo + k, arr[k], pr[k], out[k], tuple(hs[a:b]), tuple(ts[a:b]), model=model,
                          lora=lora, priority=priority, session=session)


# ---- loaders ----


def _open(path: Path) -> Any:
    if not path.is_file():
        raise TraceError(f"trace file not found: {path}", "check spec.path; it is resolved relative to the "
                         "folder of the manifest that declares the RequestTrace")
    return path.open(newline="", encoding="utf-8")


CSV_COLUMNS = {"azure-llm-2023": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
               "vidur": ("arrived_at", "num_prefill_tokens", "num_decode_tokens")}


def _header_index(path: Path, header: list[str] | None, columns: tuple[str, ...], fmt: str) -> list[int]:
    """Where the format's columns are in the header row; TraceError when it is not the format's."""
    if header is None:
        raise TraceError(f"{path}: empty file", f"a {fmt} trace has a header row {','.join(columns)}")
    header = [h.strip() for h in header]
    missing = [c for c in columns if c not in header]
    if missing:
        raise TraceError(f"{path}:1: not a {fmt} trace: missing column(s) {', '.join(missing)} (header: "
                         f"{','.join(header)})", f"a {fmt} trace has columns {','.join(columns)}; check "
                         "spec.format")
    return [header.index(c) for c in columns]


def _csv_columns(path: Path, columns: tuple[str, ...], fmt: str) -> list[list[str]]:
    """The named columns of every non-empty row, checked against the header."""
    with _open(path) as f:
        reader = csv.reader(f)
        idx = _header_index(path, next(reader, None), columns, fmt)
        rows = [[r[i] for i in idx] if len(r) > max(idx) else r for r in reader if r]
    return rows


def check_format(fmt: str, path: str | Path) -> None:
    """What `kubetwin validate` checks of a trace file without reading it whole (a trace can be gigabytes): it
    exists and its first record is the format's (a CSV's header, a Mooncake file's first line), with the errors the
    loader gives when `kubetwin run` reads it. TraceError otherwise."""
    p = Path(path)
    if fmt in CSV_COLUMNS:
        with _open(p) as f:
            _header_index(p, next(csv.reader(f), None), CSV_COLUMNS[fmt], fmt)
    elif fmt == "mooncake":
        with _open(p) as f:
            for line, text in enumerate(f, start=1):
                if text.strip():
                    _mooncake_line(p, line, text)
                    return


def _ints(rows: list[list[str]], col: int, name: str, path: Path) -> np.ndarray:
    try:
        out = np.array([r[col] for r in rows], dtype=np.int64)
    except (ValueError, IndexError):
        for line, r in enumerate(rows, start=2):
            try:
                int(r[col])
            except (ValueError, IndexError):
                got = r[col] if col < len(r) else "<missing>"
                raise TraceError(f"{path}:{line}: {name} must be an integer, got {got!r}",
                                 "fix or remove that row") from None
        raise
    if out.size and out.min() < 0:
        line = int(np.argmax(out < 0)) + 2
        raise TraceError(f"{path}:{line}: {name} must be >= 0, got {out[line - 2]}", "fix or remove that row")
    return out


def load_azure(path: str | Path, salt: int = 0) -> TraceArrays:
    """Azure LLM inference trace 2023: absolute TIMESTAMPs (7 fractional digits) become seconds from the first."""
    p = Path(path)
    rows = _csv_columns(p, CSV_COLUMNS["azure-llm-2023"], "azure-llm-2023")
    try:
        ts = np.array([r[0].strip().replace(" ", "T") for r in rows], dtype="datetime64[ns]")
    except ValueError:
        for line, r in enumerate(rows, start=2):
            try:
                np.datetime64(r[0].strip().replace(" ", "T"))
            except ValueError:
                raise TraceError(f"{p}:{line}: TIMESTAMP {r[0]!r} is not a date-time like 2023-11-16 18:15:46.6805900",
                                 "fix or remove that row") from None
        raise
    prompt = _ints(rows, 1, "ContextTokens", p)
    output = _ints(rows, 2, "GeneratedTokens", p)
    secs = (ts - ts.min()).astype(np.int64) / 1e9 if len(ts) else np.zeros(0)
    return _finish(secs, prompt, output, None, salt)


def load_vidur(path: str | Path, salt: int = 0) -> TraceArrays:
    """Vidur's processed traces: arrived_at already in seconds from the start."""
    p = Path(path)
    rows = _csv_columns(p, CSV_COLUMNS["vidur"], "vidur")
    try:
        secs = np.array([r[0] for r in rows], dtype=np.float64)
    except ValueError:
        raise TraceError(f"{p}: arrived_at must be numbers of seconds", "fix the rows that are not") from None
    return _finish(secs, _ints(rows, 1, "num_prefill_tokens", p), _ints(rows, 2, "num_decode_tokens", p), None, salt)


def load_mooncake(path: str | Path, salt: int = 0) -> TraceArrays:
    """Mooncake JSON lines: one segment per hash id (512 tokens; the last holds the rest), hashes chained so the
    same id after a different prefix is a different segment."""
    p = Path(path)
    ts: list[float] = []
    ins: list[int] = []
    outs: list[int] = []
    ids: list[int] = []
    counts: list[int] = []
    with _open(p) as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            t, n_in, n_out, h = _mooncake_line(p, line, text)
            ts.append(float(t))
            ins.append(n_in)
            outs.append(n_out)
            ids.extend(h)
            counts.append(len(h))
    prompt = np.array(ins, dtype=np.int64)
    cnt = np.array(counts, dtype=np.int64)
    offsets = np.zeros(cnt.shape[0] + 1, dtype=np.int64)
    np.cumsum(cnt, out=offsets[1:])
    raw = np.array(ids, dtype=np.int64)
    if raw.size and raw.min() < 0:
        raise TraceError(f"{p}: hash ids must be >= 0", "fix the lines that are not")
    tokens = np.full(raw.shape[0], MOONCAKE_BLOCK_TOKENS, dtype=np.int32)
    if cnt.size:
        tokens[offsets[1:] - 1] = (prompt - MOONCAKE_BLOCK_TOKENS * (cnt - 1)).astype(np.int32)
    hashes = chain_hashes(offsets, raw.astype(_U64), salt)
    segs = (offsets, hashes, tokens)
    return _finish(np.array(ts, dtype=np.float64) / 1000.0, prompt, np.array(outs, dtype=np.int64), segs, salt)


def _mooncake_line(p: Path, line: int, text: str) -> tuple[Any, int, int, list]:
    """(timestamp, input_length, output_length, hash_ids) of one Mooncake line; TraceError with its line."""
    try:
        d = json.loads(text)
        t, n_in, n_out, h = d["timestamp"], int(d["input_length"]), int(d["output_length"]), d["hash_ids"]
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p}:{line}: not JSON: {exc.msg}", "each line is one JSON object") from None
    except KeyError as exc:
        raise TraceError(f"{p}:{line}: missing key {exc.args[0]!r}",
                         "a mooncake line has timestamp, input_length, output_length, hash_ids") from None
    except (TypeError, ValueError):
        raise TraceError(f"{p}:{line}: input_length/output_length must be integers",
                         "fix or remove that line") from None
    if not isinstance(h, list) or not h:
        raise TraceError(f"{p}:{line}: hash_ids must be a non-empty list of block ids", "fix or remove that line")
    if not MOONCAKE_BLOCK_TOKENS * (len(h) - 1) < n_in <= MOONCAKE_BLOCK_TOKENS * len(h):
        raise TraceError(f"{p}:{line}: input_length {n_in} does not fit {len(h)} hash ids of "
                         f"{MOONCAKE_BLOCK_TOKENS} tokens", "each hash id covers 512 prompt tokens; the "
                         "last may be partial")
    return t, n_in, n_out, h


def chain_hashes(offsets: np.ndarray, ids: np.ndarray, salt: int) -> np.ndarray:
    """Chained hashes for CSR rows of ids: h[0] = mix(salt, id0), h[j] = mix(h[j-1], id_j); one vectorized pass
    per position, so the loop runs max-row-length times, not once per segment."""
    counts = np.diff(offsets)
    out = np.empty(ids.shape[0], dtype=_U64)
    if not ids.size:
        return out
    pos = np.arange(ids.shape[0], dtype=np.int64) - np.repeat(offsets[:-1], counts)
    order = np.argsort(pos, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(pos))))
    for j in range(bounds.shape[0] - 1):
        sel = order[bounds[j]:bounds[j + 1]]
        out[sel] = mix(_U64(salt) if j == 0 else out[sel - 1], ids[sel])
    return out


def _finish(secs: np.ndarray, prompt: np.ndarray, output: np.ndarray,
            segs: tuple[np.ndarray, np.ndarray, np.ndarray] | None, salt: int) -> TraceArrays:
    """Sort by arrival (stable: ties keep file order) and build unique segments where the trace has none."""
    secs = np.asarray(secs, dtype=np.float64)
    if secs.size:
        secs = secs - secs.min()
    if segs is None:
        segs = unique_segments(prompt, salt)
    arr = TraceArrays(secs, prompt.astype(np.int32), output.astype(np.int32), *segs)
    if secs.size and np.any(np.diff(secs) < 0):
        arr = arr.take(np.argsort(secs, kind="stable"))
    return arr


LOADERS = {"azure-llm-2023": load_azure, "mooncake": load_mooncake, "vidur": load_vidur}


def load_trace(fmt: str, path: str | Path, salt: int = 0) -> TraceArrays:
    if fmt not in LOADERS:
        raise TraceError(f"unknown trace format {fmt!r}", f"use one of {', '.join(FORMATS)}", "spec.format")
    return LOADERS[fmt](path, salt)


# ---- replay transformations ----


def replay(arrays: TraceArrays, time_scale: float = 1.0, start_offset: float = 0.0, limit: int | None = None,
           loop: bool = False, horizon: float | None = None) -> TraceArrays:
    """Apply a RequestTrace's replay fields: skip the first `start_offset` seconds (of the trace's own clock),
    scale time, repeat until `horizon` (seconds) when looping, then keep the first `limit` requests. A looped
    replay keeps the segment hashes: the same prompts come again."""
    keep = np.flatnonzero(arrays.arrival >= start_offset)
    arr = arrays.take(keep) if keep.shape[0] != len(arrays) else arrays
    arr.arrival = (arr.arrival - start_offset) * time_scale
    if loop and len(arr) and horizon is not None:
        # one period = the span plus one mean gap, so the copies do not pile up at the seam
        span = float(arr.arrival[-1])
        period = span + (span / max(len(arr) - 1, 1) if len(arr) > 1 else 1.0)
        copies = int(np.ceil(horizon / period)) if period > 0 else 1
        if limit is not None:
            copies = min(copies, -(-limit // len(arr)))
        if copies > 1:
            base = arr
            arr = base.take(np.tile(np.arange(len(base)), copies))
            arr.arrival = arr.arrival + np.repeat(np.arange(copies) * period, len(base))
    if horizon is not None and len(arr) and loop:
        arr = arr.take(np.flatnonzero(arr.arrival < horizon))
    if limit is not None and len(arr) > limit:
        arr = arr.take(np.arange(limit))
    return arr


# ---- statistics ----


def trace_stats(arrays: TraceArrays) -> dict[str, float]:
    """Count, span, mean rate, prompt/output mean/p50/p99 and the infinite-cache prefix reuse: the share of
    segments (and of prompt tokens) whose chained hash already appeared in an earlier request."""
    n = len(arrays)
    out: dict[str, float] = {"count": n}
    span = float(arrays.arrival[-1] - arrays.arrival[0]) if n > 1 else 0.0
    out["span_s"] = span
    out["rate_per_s"] = n / span if span > 0 else float("nan")
    for name, col in (("prompt", arrays.prompt), ("output", arrays.output)):
        c = col.astype(np.float64)
        out[f"{name}_mean"] = float(c.mean()) if n else float("nan")
        out[f"{name}_p50"] = float(np.percentile(c, 50)) if n else float("nan")
        out[f"{name}_p99"] = float(np.percentile(c, 99)) if n else float("nan")
    total = arrays.seg_hashes.shape[0]
    if total:
        _, first = np.unique(arrays.seg_hashes, return_index=True)
        reused = np.ones(total, dtype=bool)
        reused[first] = False
        out["prefix_reuse_segments"] = float(reused.mean())
        tok = arrays.seg_tokens.astype(np.int64)
        out["prefix_reuse_tokens"] = float(tok[reused].sum() / max(tok.sum(), 1))
    else:
        out["prefix_reuse_segments"] = out["prefix_reuse_tokens"] = 0.0
    return out

"""The results table: one row per case and seed (the axes' values, the metrics, the error), sorted by case and
seed, written as results.csv (fixed formatting: byte-identical for the same rows) and results.parquet."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

Row = dict[str, Any]


def cell(v: Any) -> str:
    """One CSV cell: empty for None, true/false, integers as written, floats as Python's shortest repr (the same
    float prints the same digits everywhere), inf for an infinite value, text as is, lists and maps as JSON."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "inf" if math.isinf(v) and v > 0 else "-inf" if math.isinf(v) else repr(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def sort_rows(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r["case"], r["seed"]))


def csv_text(rows: list[Row], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in sort_rows(rows):
        w.writerow([cell(r.get(c)) for c in columns])
    return buf.getvalue()


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file whole or not at all; a unique hidden temporary name, so concurrent writers (the pods of an
    Indexed Job on one volume) never rename each other's file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_tables(out: Path, rows: list[Row], axes: list[str], metrics: list[str]) -> list[Path]:
    """results.csv, and results.parquet when pyarrow is installed (the sweep extra)."""
    columns = ["case", "seed", *axes, *metrics, "error"]
    written = [out / "results.csv"]
    write_atomic(written[0], csv_text(rows, columns).encode())
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    rows = sort_rows(rows)
    arrays = {}
    for c in columns:
        values = [r.get(c) for r in rows]
        if c in metrics:
            arrays[c] = pa.array([float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
                                  for v in values], pa.float64())
        elif c == "seed":
            arrays[c] = pa.array(values, pa.int64())
        elif c in axes and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            kind = pa.int64() if all(isinstance(v, int) for v in values) else pa.float64()
            arrays[c] = pa.array(values, kind)
        elif c in axes and all(isinstance(v, bool) for v in values):
            arrays[c] = pa.array(values, pa.bool_())
        else:
            arrays[c] = pa.array([cell(v) if c in axes else v for v in values], pa.string())
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table(arrays), buf)
    write_atomic(out / "results.parquet", buf.getvalue().to_pybytes())
    written.append(out / "results.parquet")
    return written

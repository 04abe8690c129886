"""What the serving data plane recorded, as a user reads it: latencies per request, the serving section of summary.json
(percentiles, SLO attainment) and requests.csv, from the columns of the request log (dataplane.requestlog)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from itertools import chain
from typing import Any

import numpy as np

# Default SLO when a pool or trace names none: Vidur-Search's TTFT p90 < 2 s and TBT p99 < 200 ms
# (Agrawal et al., "Vidur", MLSys'24, section 6), applied per request: TTFT <= 2 s and TPOT <= 200 ms.
DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT = 2.0, 0.2
# `model`: the model the request was routed as, on every row whatever its status: the InferenceModel target the
# endpoint picker rewrote it to (the Inference Extension's target_model_name), else the LoRA adapter or model it
# named; `requested_model` (added after `reason`: columns are only ever appended): the model the client asked for
# (the extension's model_name, an InferenceModel's modelName).
CSV_FIELDS = ("id", "trace", "pool", "arrival", "pod", "status", "ttft", "tpot", "e2e", "queue", "prompt_tokens",
              "output_tokens", "cached_tokens", "preemptions", "priority", "model", "reason", "requested_model")


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

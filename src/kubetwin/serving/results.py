"""What the serving data plane records: one row per request (requests.csv), the serving section of summary.json and
the per-pool time series the report plots. Columnar lists while the clock runs, numpy at the end."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubetwin.serving.types import Request

# Default SLO when a pool or trace names none: Vidur-Search's TTFT p90 < 2 s and TBT p99 < 200 ms
# (Agrawal et al., "Vidur", MLSys'24, section 6), applied per request: TTFT <= 2 s and TPOT <= 200 ms.
DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT = 2.0, 0.2
CSV_FIELDS = ("id", "trace", "pool", "arrival", "pod", "status", "ttft", "tpot", "e2e", "queue", "prompt_tokens",
              "output_tokens", "cached_tokens", "preemptions", "priority")


@dataclass
class RequestLog:
    """Every request that ended (done, shed, failed) and those still in flight at the end."""

    names: dict[str, int] = field(default_factory=dict)  # trace / pool / pod name -> index into `labels`
    labels: list[str] = field(default_factory=list)
    cols: dict[str, list] = field(default_factory=lambda: {k: [] for k in (
        "id", "trace", "pool", "arrival", "pod", "status", "scheduled", "first", "finish", "prompt", "output",
        "cached", "preempt", "priority")})

    def _idx(self, name: str) -> int:
        i = self.names.get(name)
        if i is None:
            i = self.names[name] = len(self.labels)
            self.labels.append(name)
        return i

    def add(self, req: Request, trace: str, pool: str) -> None:
        c = self.cols
        c["id"].append(req.id)
        c["trace"].append(self._idx(trace))
        c["pool"].append(self._idx(pool))
        c["arrival"].append(req.arrival)
        c["pod"].append(self._idx(req.pod))
        c["status"].append(req.status)
        c["scheduled"].append(req.scheduled)
        c["first"].append(req.first_token)
        c["finish"].append(req.finish)
        c["prompt"].append(req.prompt_tokens)
        c["output"].append(req.output_tokens)
        c["cached"].append(req.cached_tokens)
        c["preempt"].append(req.preemptions)
        c["priority"].append(req.priority)

    def arrays(self) -> dict[str, np.ndarray]:
        out = {k: np.asarray(v) for k, v in self.cols.items()}
        order = np.lexsort((out["id"], out["arrival"])) if len(out["id"]) else np.arange(0)
        return {k: v[order] for k, v in out.items()}


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


def summarize(a: dict[str, np.ndarray], span: float, slo: tuple[float, float]) -> dict[str, Any]:
    """Latency percentiles, SLO attainment and goodput of one set of requests over `span` seconds."""
    lat = latencies(a)
    done = lat["done"]
    n = len(a["id"])
    ok = done & (np.nan_to_num(lat["ttft"], nan=np.inf) <= slo[0]) & (np.nan_to_num(lat["tpot"], nan=0.0) <= slo[1])
    out_tokens = int(a["output"][done].sum())
    queried = int(a["prompt"][done].sum())
    return {
        "requests": n, "completed": int(done.sum()),
        "rejected_429": int((a["status"] == 429).sum()), "failed_503": int((a["status"] == 503).sum()),
        "failed_other": int(((a["status"] != 200) & (a["status"] != 429) & (a["status"] != 503)
                             & (a["status"] != 0)).sum()),
        "in_flight_at_end": int((a["status"] == 0).sum()),
        "ttft_seconds": _pct(lat["ttft"]), "tpot_seconds": _pct(lat["tpot"]), "e2e_seconds": _pct(lat["e2e"]),
        "queue_seconds": _pct(lat["queue"]),
        "slo": {"ttft_seconds": slo[0], "tpot_seconds": slo[1]},
        "slo_attainment": round(float(ok.sum() / n), 4) if n else None,
        "goodput_rps": round(float(ok.sum() / span), 4) if span > 0 else None,
        "throughput_output_tokens_per_s": round(out_tokens / span, 2) if span > 0 else None,
        "output_tokens": out_tokens, "prompt_tokens": queried,
        "request_prefix_hit_rate": round(float(a["cached"][done].sum() / queried), 4) if queried else None,
        "preemptions": int(a["preempt"].sum()),
    }


def write_csv(a: dict[str, np.ndarray], labels: list[str]) -> str:
    """requests.csv: one row per request, sorted by arrival; times in seconds from the run's start."""
    lat = latencies(a)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)

    def f(x: float) -> str:
        return "" if np.isnan(x) else f"{x:.6f}"

    for i in range(len(a["id"])):
        w.writerow((int(a["id"][i]), labels[a["trace"][i]], labels[a["pool"][i]], f"{a['arrival'][i]:.6f}",
                    labels[a["pod"][i]], int(a["status"][i]), f(lat["ttft"][i]), f(lat["tpot"][i]),
                    f(lat["e2e"][i]), f(lat["queue"][i]), int(a["prompt"][i]), int(a["output"][i]),
                    int(a["cached"][i]), int(a["preempt"][i]), int(a["priority"][i])))
    return buf.getvalue()

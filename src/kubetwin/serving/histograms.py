"""vLLM's latency histograms per pod, filled from the request log as requests end: time to first token, time per
output token and end-to-end latency, with vLLM's own bucket bounds (vllm/v1/metrics/loggers.py; the same lists as
llm-d-inference-sim's docs/metrics.md, reference section 2.3). vLLM observes TPOT once per generated token after
the first; the twin observes each request's mean inter-token time (output_tokens - 1) times, which gives the same
sum and count and a histogram that is smoother than the per-token one."""

from __future__ import annotations

from itertools import chain

import numpy as np

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
               960.0, 1920.0, 7680.0)
HISTOGRAMS = {"vllm:time_to_first_token_seconds": TTFT_BUCKETS, "vllm:time_per_output_token_seconds": TPOT_BUCKETS,
              "vllm:e2e_request_latency_seconds": E2E_BUCKETS}
# RequestLog.COLS positions used here
_POD, _STATUS, _ARRIVAL, _FIRST, _FINISH, _OUTPUT = 4, 5, 3, 7, 8, 10


class RequestHistograms:
    """Per pod (the log's pod label index): per histogram, cumulative-ready bucket counts, sum and count."""

    def __init__(self) -> None:
        self.seen = 0
        self.pods: dict[int, dict[str, list]] = {}  # pod index -> name -> [counts array (buckets + 1), sum, count]

    def consume(self, rows: list[tuple]) -> None:
        """Add the log's rows appended since the last call."""
        new = rows[self.seen:]
        self.seen = len(rows)
        if not new:
            return
        m = np.fromiter(chain.from_iterable(new), dtype=np.float64, count=len(new) * len(new[0]))
        m = m.reshape(len(new), len(new[0]))
        m = m[m[:, _STATUS] == 200]
        if not len(m):
            return
        ttft = m[:, _FIRST] - m[:, _ARRIVAL]
        e2e = m[:, _FINISH] - m[:, _ARRIVAL]
        decode = np.maximum(m[:, _OUTPUT] - 1, 0)
        tpot = np.where(decode > 0, (m[:, _FINISH] - m[:, _FIRST]) / np.maximum(decode, 1), 0.0)
        pods = m[:, _POD].astype(np.int64)
        for pod in np.unique(pods):
            sel = pods == pod
            per = self.pods.setdefault(int(pod), {name: [np.zeros(len(b) + 1, dtype=np.int64), 0.0, 0]
                                                  for name, b in HISTOGRAMS.items()})
            for name, values, weights in (("vllm:time_to_first_token_seconds", ttft[sel], None),
                                          ("vllm:time_per_output_token_seconds", tpot[sel], decode[sel]),
                                          ("vllm:e2e_request_latency_seconds", e2e[sel], None)):
                bounds = HISTOGRAMS[name]
                idx = np.searchsorted(np.asarray(bounds), values, side="left")  # le: value <= bound
                w = np.ones(len(values), dtype=np.int64) if weights is None else weights.astype(np.int64)
                h = per[name]
                h[0] += np.bincount(idx, weights=w, minlength=len(bounds) + 1).astype(np.int64)
                h[1] += float((values * w).sum())
                h[2] += int(w.sum())

    def series(self, pod: int, name: str) -> list[tuple[str, float]]:
        """(le, cumulative count) for each bucket and +Inf, then ("sum", s) and ("count", n)."""
        h = self.pods.get(pod, {}).get(name)
        bounds = HISTOGRAMS[name]
        if h is None:
            return []
        cum = np.cumsum(h[0])
        out = [(_le(b), float(c)) for b, c in zip(bounds, cum[:-1], strict=True)] + [("+Inf", float(cum[-1]))]
        return out + [("sum", h[1]), ("count", float(h[2]))]


def _le(bound: float) -> str:
    return repr(float(bound))

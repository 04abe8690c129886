"""vLLM's latency histograms per pod, filled from the request log as requests end: time to first token, time per
output token and end-to-end latency, with vLLM's own bucket bounds (vllm/v1/metrics/loggers.py; the same lists as
llm-d-inference-sim's docs/metrics.md, reference section 2.3). vLLM observes TPOT once per generated token after
the first; the twin observes each request's mean inter-token time (output_tokens - 1) times, which gives the same
sum and count and a histogram that is smoother than the per-token one."""

from __future__ import annotations

import numpy as np

from kubetwin.serving.dataplane.requestlog import RequestLog

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
               960.0, 1920.0, 7680.0)
HISTOGRAMS = {"vllm:time_to_first_token_seconds": TTFT_BUCKETS, "vllm:time_per_output_token_seconds": TPOT_BUCKETS,
              "vllm:e2e_request_latency_seconds": E2E_BUCKETS}
_READ = ("pod", "status", "arrival", "first", "finish", "output")  # the RequestLog columns read here


class RequestHistograms:
    """Per pod (the log's pod label index): per histogram, cumulative-ready bucket counts, sum and count."""

    def __init__(self) -> None:
        self.seen = 0
        self.pods: dict[int, dict[str, list]] = {}  # pod index -> name -> [counts array (buckets + 1), sum, count]

    def consume(self, log: RequestLog) -> None:
        """Add the log's rows appended since the last call."""
        start, self.seen = self.seen, len(log)
        if self.seen == start:
            return
        c = log.columns(start, _READ)
        done = c["status"] == 200
        if not done.any():
            return
        arrival, first, finish, output = (c[k][done] for k in ("arrival", "first", "finish", "output"))
        ttft = first - arrival
        e2e = finish - arrival
        decode = np.maximum(output - 1, 0)
        tpot = np.where(decode > 0, (finish - first) / np.maximum(decode, 1), 0.0)
        pods = c["pod"][done].astype(np.int64)
        # grouped by pod once (a stable sort keeps each pod's rows in log order, so its sums add the same values in
        # the same order as a per-pod mask would) rather than one mask per pod: a fleet's hundreds of pods
        order = np.argsort(pods, kind="stable")
        pods = pods[order]
        uniq, starts = np.unique(pods, return_index=True)
        bounds_at = [*starts.tolist(), len(pods)]
        rank = np.repeat(np.arange(len(uniq)), np.diff(bounds_at))
        for name, values, weights in (("vllm:time_to_first_token_seconds", ttft[order], None),
                                      ("vllm:time_per_output_token_seconds", tpot[order], decode[order]),
                                      ("vllm:e2e_request_latency_seconds", e2e[order], None)):
            bounds = HISTOGRAMS[name]
            nb = len(bounds) + 1
            idx = np.searchsorted(np.asarray(bounds), values, side="left")  # le: value <= bound
            w = np.ones(len(values), dtype=np.int64) if weights is None else weights.astype(np.int64)
            counts = np.bincount(rank * nb + idx, weights=w, minlength=len(uniq) * nb).astype(np.int64)
            vw = values * w
            for r, pod in enumerate(uniq.tolist()):
                per = self.pods.setdefault(pod, {n: [np.zeros(len(b) + 1, dtype=np.int64), 0.0, 0]
                                                 for n, b in HISTOGRAMS.items()})
                lo, hi = bounds_at[r], bounds_at[r + 1]
                h = per[name]
                h[0] += counts[r * nb:(r + 1) * nb]
                h[1] += float(vw[lo:hi].sum())
                h[2] += int(w[lo:hi].sum())

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

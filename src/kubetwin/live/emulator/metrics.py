"""GET /metrics as vLLM V1 writes it: prometheus_client's text exposition (vLLM is a Python program using
prometheus_client) with vLLM's names, labels and histogram buckets.

Source: vllm-project/vllm vllm/v1/metrics/loggers.py PrometheusStatLogger -- labels `model_name` and `engine`
("0": one engine core); gauges vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc (and
the deprecated vllm:gpu_cache_usage_perc); counters vllm:prefix_cache_queries / hits, vllm:num_preemptions,
vllm:prompt_tokens, vllm:generation_tokens, vllm:request_success{finished_reason} (prometheus_client appends
_total); vllm:lora_requests_info{max_lora, waiting_lora_adapters, running_lora_adapters} set to the current time
(only with --enable-lora; no model_name label); vllm:cache_config_info (a gauge at 1 whose labels are the cache
config). Histograms: TTFT, vllm:inter_token_latency_seconds and the older vllm:time_per_output_token_seconds (the
same observations: one per output token after the first), vllm:e2e_request_latency_seconds, with the twin's copy
of vLLM's bucket bounds (serving.observe.histograms). All times are emulated seconds. The endpoint picker reads the
gauges,
lora_requests_info and cache_config_info (gateway-api-inference-extension pkg/epp/backend/metrics, model server
protocol docs/proposals/003-model-server-protocol).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    SummaryMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kubetwin.live.emulator.config import Served
from kubetwin.live.emulator.realtime import RealtimeEngine, Stream
from kubetwin.serving.observe.histograms import E2E_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS

# The emulator's lag behind the wall clock (RealtimeEngine.lag_*): a summary of every visible token's lateness and
# its maximum, read by `kubetwin loadgen --metrics-url` to say whether a comparison is valid (issue 34 item 6).
LAG_METRIC = "kubetwin_emulator_token_lag_seconds"
LAG_MAX_METRIC = "kubetwin_emulator_token_lag_max_seconds"

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LABELS = ("model_name", "engine")


class _EngineCollector(Collector):
    """The scheduler's gauges and counters, read from the engine when scraped (vLLM records them per step; reading
    at scrape time gives the values of the last step taken)."""

    def __init__(self, served: Served, model_name: str) -> None:
        self.served = served
        self.labels = [model_name, "0"]

    def collect(self) -> Iterator[Metric]:
        e = self.served.engine
        lv = self.labels
        for name, doc, value in (
                ("vllm:num_requests_running", "Number of requests in model execution batches.", e.num_running),
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", e.num_waiting),
                ("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
                                              "vllm:kv_cache_usage_perc instead.", e.kv_usage),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", e.kv_usage)):
            g = GaugeMetricFamily(name, doc, labels=LABELS)
            g.add_metric(lv, float(value))
            yield g
        for name, doc, value in (
                ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                 e.prefix_cache_queries),
                ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                 e.prefix_cache_hits),
                ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", e.num_preemptions),
                ("vllm:prompt_tokens", "Number of prefill tokens processed.", e.prompt_tokens_total),
                ("vllm:generation_tokens", "Number of generation tokens processed.", e.generation_tokens_total)):
            c = CounterMetricFamily(name, doc, labels=LABELS)
            c.add_metric(lv, float(value))
            yield c
        c = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                labels=[*LABELS, "finished_reason"])
        c.add_metric([*lv, "length"], float(e.finished))  # every request stops at max_tokens (no EOS)
        yield c
        args = self.served.args
        info = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=[
            "block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization", "num_gpu_blocks",
            "engine"])
        info.add_metric([str(e.block_size), args.kv_cache_dtype, str(args.enable_prefix_caching),
                         str(args.gpu_memory_utilization), str(e.num_gpu_blocks), "0"], 1.0)
        yield info
        if args.enable_lora:
            lora = GaugeMetricFamily("vllm:lora_requests_info", "Running stats on lora requests.",
                                     labels=["max_lora", "waiting_lora_adapters", "running_lora_adapters"])
            lora.add_metric([str(e.max_loras), ",".join(sorted(e.waiting_loras())),
                             ",".join(sorted(e.active_loras()))], time.time())
            yield lora


class _Histogram:
    """One histogram series with vLLM's buckets: observe(v, k) adds k observations of v with one bucket lookup (a
    stream's tokens that arrive together share their interval), cheaper per token than prometheus_client's
    Histogram, which the emulator would call for every streamed token."""

    def __init__(self, name: str, doc: str, bounds: tuple[float, ...]) -> None:
        self.name, self.doc, self.bounds = name, doc, bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket (le bound), the last one +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float, k: int = 1) -> None:
        if k <= 0:
            return
        self.counts[bisect.bisect_left(self.bounds, v)] += k  # le: v <= bound
        self.sum += v * k
        self.count += k

    def family(self, labels: list[str]) -> HistogramMetricFamily:
        h = HistogramMetricFamily(self.name, self.doc, labels=list(LABELS))
        cum, buckets = 0, []
        for bound, c in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts, strict=True):
            cum += c
            buckets.append((bound, float(cum)))
        h.add_metric(labels, buckets, self.sum)
        return h


class EmulatorMetrics(Collector):
    """One registry per emulated server (several may run in one test process)."""

    def __init__(self, served: Served) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.labels = [served.model_names[0], "0"]
        self.registry.register(_EngineCollector(served, served.model_names[0]))
        self.ttft = _Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                               TTFT_BUCKETS)
        self.itl = _Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                              TPOT_BUCKETS)
        self.tpot = _Histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in "
                               "seconds.", TPOT_BUCKETS)
        self.e2e = _Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                              E2E_BUCKETS)
        self.lag_source: RealtimeEngine | None = None  # set once the server's clock task exists
        self.registry.register(self)
        self.served = served
        # the last exposition and the state it was rendered from: an endpoint picker scrapes every replica every
        # 50 ms (the EPP's refresh interval) and an idle replica's exposition does not change between scrapes, so
        # rendering it again each time (~0.8 ms of prometheus_client per scrape, ~13 % of a core over eight
        # replicas) only takes CPU from the servers' streams on a shared machine
        self._rendered: tuple[tuple, bytes] | None = None

    def collect(self) -> Iterator[Metric]:
        for h in (self.ttft, self.itl, self.tpot, self.e2e):
            yield h.family(self.labels)
        rt = self.lag_source
        if rt is not None:  # the emulator's own health as a clock, not a vLLM series (kubetwin_ prefix)
            lag = SummaryMetricFamily(LAG_METRIC, "How late the emulator made tokens visible against the wall "
                                      "clock, in wall seconds (a loaded machine's lag: latencies it reports are "
                                      "that much longer than the engine's).", count_value=rt.lag_count,
                                      sum_value=rt.lag_sum)
            yield lag
            yield GaugeMetricFamily(LAG_MAX_METRIC, "The longest such lag since the server started.",
                                    value=rt.lag_max)

    def on_token(self, s: Stream, n: int, at: float) -> None:
        """n more tokens of s became visible at emulated time `at` (called before s.visible grows): the first one
        observes TTFT, each other one the time since the previous visible token shared among those that arrived
        together (vLLM observes one inter-token latency per token after the first)."""
        if s.visible == 0:
            self.ttft.observe(at - s.req.arrival)
            n -= 1
            gap = 0.0
        else:
            gap = (at - s.last_time) / n
        self.itl.observe(gap, n)
        self.tpot.observe(gap, n)

    def on_done(self, s: Stream) -> None:
        self.e2e.observe(s.req.finish - s.req.arrival)

    def state(self) -> tuple | None:
        """Every value the exposition shows (the sums move only with their counts), or None when one of them
        changes without the engine doing anything (lora_requests_info's value is the scrape's time)."""
        if self.served.args.enable_lora:
            return None
        e, rt = self.served.engine, self.lag_source
        return (e.num_running, e.num_waiting, e.kv_usage, e.prefix_cache_queries, e.prefix_cache_hits,
                e.num_preemptions, e.prompt_tokens_total, e.generation_tokens_total, e.finished, e.num_gpu_blocks,
                self.ttft.count, self.itl.count, self.tpot.count, self.e2e.count,
                None if rt is None else (rt.lag_count, rt.lag_sum, rt.lag_max))

    def render(self) -> bytes:
        """The exposition; the previous one again while the state it shows has not changed."""
        key = self.state()
        if key is not None and self._rendered is not None and self._rendered[0] == key:
            return self._rendered[1]
        text = generate_latest(self.registry)
        if key is not None:
            self._rendered = (key, text)
        return text

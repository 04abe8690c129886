"""The twin's Prometheus: scrapes every model-server pod's vLLM metrics and the gateway's EPP metrics on a fixed
interval and keeps the samples, so a KEDA prometheus trigger or an HPA External/Pods metric reads the same series,
with the same staleness, as it would from a real Prometheus. Also writes them in the exposition format for
metrics.prom.

Names and labels: vLLM's (`vllm:num_requests_waiting`, `vllm:num_requests_running`, `vllm:kv_cache_usage_perc` and
the pre-0.10 `vllm:gpu_cache_usage_perc`, `vllm:request_success_total`, `vllm:prompt_tokens_total`,
`vllm:generation_tokens_total`, `vllm:prefix_cache_{queries,hits}_total`, `vllm:num_preemptions_total`; label
`model_name`, reference section 2.3) plus the target labels Prometheus' Kubernetes discovery adds (`namespace`,
`pod`); the EPP's pool gauges (`inference_pool_average_queue_size`, `inference_pool_average_kv_cache_utilization`,
`inference_pool_ready_pods`, label `name`) and `inference_extension_flow_control_queue_size` (requests the gateway
holds, label `inference_pool`) from GIE's metrics (reference 1.12)."""

from __future__ import annotations

from collections import deque

from kubetwin.prometheus import exposition, storage
from kubetwin.prometheus.staleness import STALE_NAN, is_stale
from kubetwin.serving.dataplane.plane import ServingDataPlane
from kubetwin.serving.observe.histograms import HISTOGRAMS, RequestHistograms
from kubetwin.sim.env import Environment

SCRAPE_INTERVAL = 15.0  # a typical PodMonitoring/ServiceMonitor interval (twin assumption; Prometheus' own default
#                         scrape_interval is 1m, https://prometheus.io/docs/prometheus/latest/configuration/)
RETENTION = 3600.0  # samples older than this are dropped (queries look back at most minutes)
GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
          "vllm:gpu_cache_usage_perc")
COUNTERS = {"vllm:request_success_total": "finished", "vllm:prompt_tokens_total": "prompt_tokens_total",
            "vllm:generation_tokens_total": "generation_tokens_total",
            "vllm:prefix_cache_queries_total": "prefix_cache_queries",
            "vllm:prefix_cache_hits_total": "prefix_cache_hits", "vllm:num_preemptions_total": "num_preemptions"}
POOL_GAUGES = ("inference_pool_average_queue_size", "inference_pool_average_kv_cache_utilization",
               "inference_pool_ready_pods", "inference_extension_flow_control_queue_size")
INFO = ("vllm:cache_config_info", "vllm:lora_requests_info")
# The one series that carries demand while a pool has no pod: the requests the gateway holds. Every other series
# here is exported by the model-server pods or averaged over them (0 or absent at zero replicas).
AT_ZERO = ("inference_extension_flow_control_queue_size",)
KNOWN = (*GAUGES, *COUNTERS, *POOL_GAUGES, *INFO,
         *(f"{h}{suffix}" for h in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")))

Labels = dict[str, str]


class ServingMetricsSource:
    """A MetricsProvider (prometheus.promql) over scraped samples."""

    def __init__(self, plane: ServingDataPlane, env: Environment, interval: float = SCRAPE_INTERVAL,
                 histogram_history: bool = False) -> None:
        self.plane, self.env, self.interval = plane, env, interval
        self._series: dict[str, dict[tuple, tuple[Labels, deque]]] = {}
        self.hist = RequestHistograms()
        # histogram buckets are 20-odd series per pod each; their samples are kept only when a query reads them
        self.histogram_history = histogram_history
        self._pod_labels: dict[str, Labels] = {}
        self._live: set[tuple[str, tuple]] = set()  # (name, label key) of every series the last scrape wrote
        self._scraped: set[tuple[str, tuple]] = set()  # the same, filling during the scrape in progress
        env.after(0, self._scrape)

    def _add(self, name: str, labels: Labels, value: float) -> None:
        key = tuple(sorted(labels.items()))
        per = self._series.setdefault(name, {})
        entry = per.get(key)
        if entry is None:
            entry = per[key] = (labels, deque())
        self._scraped.add((name, key))
        self._append(entry[1], float(value))

    def _append(self, samples: deque, value: float) -> None:
        samples.append((self.env.now, value))
        while samples and samples[0][0] < self.env.now - RETENTION:
            samples.popleft()

    def _mark_stale(self) -> None:
        """Prometheus writes a staleness marker for every series the previous scrape had and this one has not (a
        deleted pod, a pool gone, an info series whose label values changed), so queries stop seeing it at once
        instead of for the 5-minute lookback. Sorted: the markers' order is part of the run's bytes."""
        for name, key in sorted(self._live - self._scraped):
            self._append(self._series[name][key][1], STALE_NAN)
        self._live, self._scraped = self._scraped, set()

    def _scrape(self) -> None:
        now = self.env.now
        for ep in self.plane.endpoints.values():
            e = ep.engine
            e.advance(now)
            labels = {"namespace": ep.namespace, "pod": ep.name, "model_name": ep.served_names[0]}
            self._pod_labels[ep.name] = labels
            self._info(ep, labels)
            self._add("vllm:num_requests_waiting", labels, e.num_waiting)
            self._add("vllm:num_requests_running", labels, e.num_running)
            self._add("vllm:kv_cache_usage_perc", labels, e.kv_usage)
            self._add("vllm:gpu_cache_usage_perc", labels, e.kv_usage)
            for name, attr in COUNTERS.items():
                self._add(name, labels, getattr(e, attr, 0))
        for pool in self.plane.pools.values():
            eps = pool.endpoints
            n = len(eps)
            self._add("inference_pool_ready_pods", {"name": pool.name, "namespace": pool.namespace}, n)
            self._add("inference_pool_average_queue_size", {"name": pool.name, "namespace": pool.namespace},
                      sum(ep.engine.num_waiting for ep in eps) / n if n else 0.0)
            self._add("inference_pool_average_kv_cache_utilization", {"name": pool.name, "namespace": pool.namespace},
                      sum(ep.engine.kv_usage for ep in eps) / n if n else 0.0)
            self._add("inference_extension_flow_control_queue_size",
                      {"inference_pool": pool.name, "namespace": pool.namespace}, len(pool.held))
        self.hist.consume(self.plane.log)
        if self.histogram_history:
            live = {ep.name for ep in self.plane.endpoints.values()}
            for name, labels, value in self._histogram_samples(live):
                self._add(name, labels, value)
        self._mark_stale()
        self.env.after(self.interval, self._scrape)

    def _info(self, ep: object, labels: Labels) -> None:
        """vLLM's info gauges: cache_config_info (the EPP's autoTune reads block_size and num_gpu_blocks) and,
        with --enable-lora, lora_requests_info (value: the time of the sample, as vLLM sets it)."""
        e, args = ep.engine, ep.args  # type: ignore[attr-defined]
        self._add("vllm:cache_config_info", {**labels, "block_size": str(e.block_size),
                                             "num_gpu_blocks": str(e.num_gpu_blocks)}, 1)
        if args is not None and args.enable_lora:
            self._add("vllm:lora_requests_info", {
                **labels, "max_lora": str(e.max_loras),
                "running_lora_adapters": ",".join(sorted(e.active_loras())),
                "waiting_lora_adapters": ",".join(sorted(e.waiting_loras()))}, self.env.now)

    def _histogram_samples(self, live: set[str] | None = None) -> list[tuple[str, Labels, float]]:
        """The histograms' series of every pod scraped so far, or only of the `live` pods (those a scrape reads)."""
        out = []
        log_labels = self.plane.log.labels
        for pod in sorted(self.hist.pods):
            labels = self._pod_labels.get(log_labels[pod])
            if labels is None or (live is not None and labels["pod"] not in live):
                continue
            for name in HISTOGRAMS:
                for le, value in self.hist.series(pod, name):
                    if le in ("sum", "count"):
                        out.append((f"{name}_{le}", labels, value))
                    else:
                        out.append((f"{name}_bucket", {**labels, "le": le}, value))
        return out

    def series(self, name: str, start: float, end: float) -> list[tuple[Labels, list[tuple[float, float]]]]:
        """MetricsProvider.series: the samples in [start, end], staleness markers included (promql drops them)."""
        return storage.select(self._series, name, start, end)

    def exposition(self) -> str:
        """The last scrape of every series and the final histograms, in Prometheus' text format, sorted for
        byte-identical output."""
        lines: list[str] = []
        for name in sorted(n for n in self._series if not n.endswith(("_bucket", "_sum", "_count"))
                           or n in COUNTERS):
            lines += exposition.header(name, "counter" if name in COUNTERS else "gauge")
            for key in sorted(self._series[name]):
                labels, samples = self._series[name][key]
                if samples and not is_stale(samples[-1][1]):  # what a scrape of the run's end would read
                    lines.append(exposition.sample(name, sorted(labels.items()), samples[-1][1]))
        self.hist.consume(self.plane.log)
        samples = self._histogram_samples()
        for hname in sorted(HISTOGRAMS):
            mine = [(n, lab, v) for n, lab, v in samples if n.startswith(hname + "_")]
            if mine:
                lines += exposition.header(hname, "histogram")
                lines += [exposition.sample(n, sorted(lab.items()), v) for n, lab, v in mine]
        return exposition.text(lines)

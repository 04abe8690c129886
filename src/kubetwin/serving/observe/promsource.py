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
holds, label `inference_pool`) from GIE's metrics (reference 1.12).

A pod served by Triton Inference Server exports Triton's names instead, labelled `model` and `version` as Triton
labels them (server docs/user_guide/metrics.md): the nv_inference_* counters, nv_inference_pending_request_count,
nv_gpu_utilization / nv_gpu_memory_{used,total}_bytes per GPU (label gpu_uuid); the TensorRT-LLM backend's
nv_trt_llm_request_metrics{request_type} and nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type} (its README's
Triton Metrics); the vLLM backend's vllm:* subset only with its REPORT_CUSTOM_METRICS parameter (vllm_backend
src/utils/metrics.py: token counters and the TTFT / TPOT / E2E histograms; no gauges). Both LLM backends are
decoupled: Triton hands each request to the engine at once and releases it, so its request, queue and compute
durations measure that hand-off (plus the dynamic batcher's wait), not the generation, and the queue the engine
holds shows in none of them."""

from __future__ import annotations

import uuid
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
TRITON_COUNTERS = ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                   "nv_inference_exec_count", "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                   "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                   "nv_inference_compute_output_duration_us")
TRITON_GAUGES = ("nv_inference_pending_request_count", "nv_gpu_utilization", "nv_gpu_memory_used_bytes",
                 "nv_gpu_memory_total_bytes", "nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics")
# What one request costs Triton's core for a decoupled LLM backend (received, handed to the backend, released):
# triton-inference-server/server#8463 measured nv_inference_request_duration_us / nv_inference_count = 858150828 /
# 3075905 = 279 us on the vLLM backend (Llama-3-8B, TP2, A100, 25.03) -- the whole duration, not the generation.
HANDOFF_US = 279.0
# The one series that carries demand while a pool has no pod: the requests the gateway holds. Every other series
# here is exported by the model-server pods or averaged over them (0 or absent at zero replicas).
AT_ZERO = ("inference_extension_flow_control_queue_size",)
KNOWN = (*GAUGES, *COUNTERS, *POOL_GAUGES, *INFO, *TRITON_COUNTERS, *TRITON_GAUGES,
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
        self._busy: dict[str, tuple[float, float]] = {}  # pod -> (time, engine busy seconds) at its last scrape
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
            if ep.args is not None and ep.args.triton is not None:
                self._triton(ep, now)
                continue
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

    def _triton(self, ep: object, now: float) -> None:
        """Triton's series for one pod (see the module docstring)."""
        e, args = ep.engine, ep.args  # type: ignore[attr-defined]
        tm = args.triton
        base = {"namespace": ep.namespace, "pod": ep.name}  # type: ignore[attr-defined]
        labels = {**base, "model": tm.name, "version": tm.version}
        if tm.report_vllm_metrics:  # the vLLM backend's token counters and histograms, Triton's labels
            self._pod_labels[ep.name] = labels  # type: ignore[attr-defined]
            self._add("vllm:prompt_tokens_total", labels, e.prompt_tokens_total)
            self._add("vllm:generation_tokens_total", labels, e.generation_tokens_total)
        handed = e.finished + e.num_running + e.num_waiting  # released by Triton once the backend holds them
        delay_us = tm.queue_delay_s * 1e6
        self._add("nv_inference_request_success", labels, handed)
        self._add("nv_inference_request_failure", {**labels, "reason": "BACKEND"}, e.rejected)
        self._add("nv_inference_count", labels, handed)
        self._add("nv_inference_exec_count", labels, handed)
        self._add("nv_inference_request_duration_us", labels, handed * (HANDOFF_US + delay_us))
        self._add("nv_inference_queue_duration_us", labels, handed * delay_us)
        self._add("nv_inference_compute_input_duration_us", labels, 0.0)
        self._add("nv_inference_compute_infer_duration_us", labels, handed * HANDOFF_US)
        self._add("nv_inference_compute_output_duration_us", labels, 0.0)
        self._add("nv_inference_pending_request_count", labels, 0)
        step = e.step
        prev_t, prev_busy = self._busy.get(ep.name, (now, e.busy_time))  # type: ignore[attr-defined]
        self._busy[ep.name] = (now, e.busy_time)  # type: ignore[attr-defined]
        util = min(1.0, (e.busy_time - prev_busy) / (now - prev_t)) if now > prev_t else 0.0
        total = float(getattr(getattr(step, "gpu", None), "hbm_bytes", 0.0))
        used = (float(getattr(step, "weight_bytes_per_gpu", 0.0)) + e.num_gpu_blocks * e.block_size
                * float(getattr(step, "kv_bytes_per_token_per_gpu", 0)) / max(1, args.pipeline_parallel_size))
        for i in range(max(1, int(ep.gpus))):  # type: ignore[attr-defined]
            gpu = {**base, "gpu_uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_OID, f"{ep.uid}/{i}"))}  # type: ignore[attr-defined]
            self._add("nv_gpu_utilization", gpu, round(util, 4))
            self._add("nv_gpu_memory_total_bytes", gpu, total)
            self._add("nv_gpu_memory_used_bytes", gpu, min(total, used) if total else used)
        if tm.backend == "tensorrtllm":
            for kind, value in (("waiting", e.num_waiting), ("context", 0), ("scheduled", e.num_running),
                                ("max", args.max_num_seqs or 0), ("active", e.num_running)):
                self._add("nv_trt_llm_request_metrics", {**labels, "request_type": kind}, value)
            used_blocks = round(e.kv_usage * e.num_gpu_blocks)
            for kind, value in (("max", e.num_gpu_blocks), ("free", e.num_gpu_blocks - used_blocks),
                                ("used", used_blocks), ("tokens_per", e.block_size),
                                ("fraction", round(e.kv_usage, 4))):  # fraction_used_blocks
                self._add("nv_trt_llm_kv_cache_block_metrics", {**labels, "kv_cache_block_type": kind}, value)

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
                           or n in COUNTERS or n in TRITON_COUNTERS or n in TRITON_GAUGES):
            lines += exposition.header(name, "counter" if name in COUNTERS or name in TRITON_COUNTERS else "gauge")
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

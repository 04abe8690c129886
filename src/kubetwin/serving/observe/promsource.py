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
from collections.abc import Callable
from typing import Any

from kubetwin.prometheus import exposition, relabel, storage, targets
from kubetwin.prometheus.staleness import STALE_NAN, is_stale
from kubetwin.serving.dataplane.plane import ServingDataPlane
from kubetwin.serving.observe.histograms import HISTOGRAMS, RequestHistograms
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj

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
KNOWN = (*GAUGES, *COUNTERS, *POOL_GAUGES, *INFO, *TRITON_COUNTERS, *TRITON_GAUGES,
         *(f"{h}{suffix}" for h in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")))

Labels = dict[str, str]


class _Loop:
    """One scrape loop's staleness bookkeeping: the series its last scrape wrote and those of the scrape in
    progress (Prometheus tracks staleness per target's scrape loop)."""

    def __init__(self) -> None:
        self.live: set[tuple[str, tuple]] = set()  # (name, label key) of every series the last scrape wrote
        self.scraped: set[tuple[str, tuple]] = set()  # the same, filling during the scrape in progress
        self.stopped = False


class ServingMetricsSource:
    """A MetricsProvider (prometheus.promql) over scraped samples.

    Without `monitors` (the run has no PodMonitoring, ClusterPodMonitoring, PodMonitor or ServiceMonitor) every
    model server is scraped every `interval`, labelled namespace / pod / model_name (the twin's assumption: the
    cluster's scrape config lives outside the manifests and collects what its autoscalers read). With them, only
    the targets they select are scraped, each job at its own interval, with the target labels and metric
    relabelling its operator writes (prometheus.targets, prometheus.relabel); the monitoring objects are read from
    the store, so one created, changed or deleted during the run takes effect then. The EPP's series are scraped
    either way (see docs/monitoring.md)."""

    def __init__(self, plane: ServingDataPlane, env: Environment, interval: float = SCRAPE_INTERVAL,
                 histogram_history: bool = False, monitors: bool = False, site: targets.Site | None = None
                 ) -> None:
        self.plane, self.env, self.interval = plane, env, interval
        self._series: dict[str, dict[tuple, tuple[Labels, deque]]] = {}
        self.hist = RequestHistograms()
        # histogram buckets are 20-odd series per pod each; their samples are kept only when a query reads them
        self.histogram_history = histogram_history
        self._pod_labels: dict[str, Labels] = {}
        self._busy: dict[str, tuple[float, float]] = {}  # pod -> (time, engine busy seconds) at its last scrape
        self._main = _Loop()
        self.site = site or targets.Site("kubetwin")
        self._jobs: dict[tuple[str, str, str], tuple[object, list[_Loop]]] = {}  # monitor -> (its spec, loops)
        # the cluster's own exporters scraped with the EPP (GKE's managed DCGM collection: workloads.dcgm samples)
        self.exporters: list[Callable[[], list[tuple[str, Labels, float]]]] = []
        if not monitors:
            env.after(0, self._scrape)
            return
        env.after(0, self._scrape_epp)
        for _, kind in sorted(targets.KINDS):
            plane.store.watch(kind, self._on_monitor)

    def _add(self, name: str, labels: Labels, value: float, loop: _Loop | None = None) -> None:
        key = tuple(sorted(labels.items()))
        per = self._series.setdefault(name, {})
        entry = per.get(key)
        if entry is None:
            entry = per[key] = (labels, deque())
        (loop or self._main).scraped.add((name, key))
        self._append(entry[1], float(value))

    def _append(self, samples: deque, value: float) -> None:
        samples.append((self.env.now, value))
        while samples and samples[0][0] < self.env.now - RETENTION:
            samples.popleft()

    def _mark_stale(self, loop: _Loop | None = None) -> None:
        """Prometheus writes a staleness marker for every series the previous scrape had and this one has not (a
        deleted pod, a pool gone, an info series whose label values changed), so queries stop seeing it at once
        instead of for the 5-minute lookback. Sorted: the markers' order is part of the run's bytes."""
        loop = loop or self._main
        for name, key in sorted(loop.live - loop.scraped):
            self._append(self._series[name][key][1], STALE_NAN)
        loop.live, loop.scraped = loop.scraped, set()

    # -- monitoring objects -------------------------------------------------------------------------------
    def _on_monitor(self, etype: str, obj: Obj, old: Obj | None) -> None:
        """A monitoring object's jobs start (created), restart (spec changed) or stop (deleted): the operator
        rewrites Prometheus' config and the old jobs' series go stale at once."""
        if not targets.is_monitor(obj):
            return
        meta = obj["metadata"]
        ref = (str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"]))
        spec = None if etype == "DELETED" else obj.get("spec")
        cur = self._jobs.get(ref)
        if cur is not None and cur[0] == spec:
            return
        for loop in cur[1] if cur is not None else []:
            loop.stopped = True
            self._mark_stale(loop)  # nothing scraped by this loop any more
        if spec is None:
            self._jobs.pop(ref, None)
            return
        loops = []
        for job in targets.jobs([obj]):
            loop = _Loop()
            loops.append(loop)
            self.env.after(0, lambda job=job, loop=loop: self._scrape_job(job, loop))
        self._jobs[ref] = (spec, loops)

    def _scrape_job(self, job: targets.ScrapeJob, loop: _Loop) -> None:
        """One scrape of every target the job selects now: each Ready model server whose pod it keeps on the
        server's port, the target labels over vLLM's own (target labels win, honor_labels false), then the
        endpoint's metric relabelling (a renamed series is stored under its new name, a dropped one not at all)."""
        if loop.stopped:
            return
        now = self.env.now
        store = self.plane.store
        services = store.list("Service") if job.kind == "ServiceMonitor" else []
        if self.histogram_history:
            self.hist.consume(self.plane.log)
        for ep in self.plane.endpoints.values():
            pod = store.get("Pod", ep.namespace, ep.name)
            port = int(getattr(ep.args, "port", 0) or 8000)
            found = job.target(pod, port, self.site, services) if pod is not None else None
            if found is None:
                continue
            ep.engine.advance(now)
            own = self._own_labels(ep)
            if _histograms_of(ep):
                self._pod_labels.setdefault(ep.name, {**own, **found})  # metrics.prom's histograms
            samples = self._server_samples(ep, own)
            if self.histogram_history:
                samples += [(n, {k: v for k, v in lab.items() if k in ("model_name", "model", "version", "le")}, v)
                            for n, lab, v in self._histogram_samples({ep.name})]
            for name, labels, value in samples:
                out = relabel.process({**labels, **found, "__name__": name}, job.rules)
                if out is not None:
                    self._add(out.pop("__name__"), out, value, loop)
        self._mark_stale(loop)
        self.env.after(job.interval, lambda: self._scrape_job(job, loop))

    def _scrape_epp(self) -> None:
        """The series that do not depend on the monitoring objects: the EPP's and the cluster's exporters'."""
        self._scrape_pools()
        for exporter in self.exporters:
            for name, labels, value in exporter():
                self._add(name, labels, value)
        self._mark_stale()
        self.env.after(self.interval, self._scrape_epp)

    def _scrape(self) -> None:
        now = self.env.now
        for ep in self.plane.endpoints.values():
            ep.engine.advance(now)
            labels = {"namespace": ep.namespace, "pod": ep.name, **self._own_labels(ep)}
            if _histograms_of(ep):
                self._pod_labels[ep.name] = labels
            for name, lab, value in self._server_samples(ep, labels):
                self._add(name, lab, value)
        self._scrape_pools()
        for exporter in self.exporters:
            for name, labels, value in exporter():
                self._add(name, labels, value)
        self.hist.consume(self.plane.log)
        if self.histogram_history:
            live = {ep.name for ep in self.plane.endpoints.values()}
            for name, labels, value in self._histogram_samples(live):
                self._add(name, labels, value)
        self._mark_stale()
        self.env.after(self.interval, self._scrape)

    @staticmethod
    def _own_labels(ep: object) -> Labels:
        """The labels a model server puts on its own series: vLLM's model_name, Triton's model and version."""
        tm = _triton_of(ep)
        if tm is not None:
            return {"model": tm.name, "version": tm.version}
        return {"model_name": ep.served_names[0]}  # type: ignore[attr-defined]

    def _server_samples(self, ep: object, labels: Labels) -> list[tuple[str, Labels, float]]:
        """One scrape of a model server's /metrics (its engine advanced to now), `labels` on every series."""
        e = ep.engine  # type: ignore[attr-defined]
        if _triton_of(ep) is not None:
            return self._triton(ep, labels)
        out = self._info(ep, labels)
        out += [("vllm:num_requests_waiting", labels, e.num_waiting), ("vllm:num_requests_running", labels,
                e.num_running), ("vllm:kv_cache_usage_perc", labels, e.kv_usage),
                ("vllm:gpu_cache_usage_perc", labels, e.kv_usage)]
        out += [(name, labels, getattr(e, attr, 0)) for name, attr in COUNTERS.items()]
        return out

    def _scrape_pools(self) -> None:
        """The EPP's pool gauges (the gateway's own exporter, not a pod of the run)."""
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

    def _triton(self, ep: object, labels: Labels) -> list[tuple[str, Labels, float]]:
        """Triton's series for one pod (see the module docstring); `labels` carry its model and version, the GPU
        series the target labels alone."""
        e, args = ep.engine, ep.args  # type: ignore[attr-defined]
        tm = args.triton
        now = self.env.now
        base = {k: v for k, v in labels.items() if k not in ("model", "version")}
        out: list[tuple[str, Labels, float]] = []
        if tm.report_vllm_metrics:  # the vLLM backend's token counters and histograms, Triton's labels
            out.append(("vllm:prompt_tokens_total", labels, e.prompt_tokens_total))
            out.append(("vllm:generation_tokens_total", labels, e.generation_tokens_total))
        handed = e.finished + e.num_running + e.num_waiting  # released by Triton once the backend holds them
        delay_us = tm.queue_delay_s * 1e6
        out.append(("nv_inference_request_success", labels, handed))
        out.append(("nv_inference_request_failure", {**labels, "reason": "BACKEND"}, e.rejected))
        out.append(("nv_inference_count", labels, handed))
        out.append(("nv_inference_exec_count", labels, handed))
        out.append(("nv_inference_request_duration_us", labels, handed * (HANDOFF_US + delay_us)))
        out.append(("nv_inference_queue_duration_us", labels, handed * delay_us))
        out.append(("nv_inference_compute_input_duration_us", labels, 0.0))
        out.append(("nv_inference_compute_infer_duration_us", labels, handed * HANDOFF_US))
        out.append(("nv_inference_compute_output_duration_us", labels, 0.0))
        out.append(("nv_inference_pending_request_count", labels, 0))
        step = e.step
        prev_t, prev_busy = self._busy.get(ep.name, (now, e.busy_time))  # type: ignore[attr-defined]
        self._busy[ep.name] = (now, e.busy_time)  # type: ignore[attr-defined]
        util = min(1.0, (e.busy_time - prev_busy) / (now - prev_t)) if now > prev_t else 0.0
        total = float(getattr(getattr(step, "gpu", None), "hbm_bytes", 0.0))
        used = (float(getattr(step, "weight_bytes_per_gpu", 0.0)) + e.num_gpu_blocks * e.block_size
                * float(getattr(step, "kv_bytes_per_token_per_gpu", 0)) / max(1, args.pipeline_parallel_size))
        for i in range(max(1, int(ep.gpus))):  # type: ignore[attr-defined]
            gpu = {**base, "gpu_uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_OID, f"{ep.uid}/{i}"))}  # type: ignore[attr-defined]
            out.append(("nv_gpu_utilization", gpu, round(util, 4)))
            out.append(("nv_gpu_memory_total_bytes", gpu, total))
            out.append(("nv_gpu_memory_used_bytes", gpu, min(total, used) if total else used))
        if tm.backend == "tensorrtllm":
            for kind, value in (("waiting", e.num_waiting), ("context", 0), ("scheduled", e.num_running),
                                ("max", args.max_num_seqs or 0), ("active", e.num_running)):
                out.append(("nv_trt_llm_request_metrics", {**labels, "request_type": kind}, value))
            used_blocks = round(e.kv_usage * e.num_gpu_blocks)
            for kind, value in (("max", e.num_gpu_blocks), ("free", e.num_gpu_blocks - used_blocks),
                                ("used", used_blocks), ("tokens_per", e.block_size),
                                ("fraction", round(e.kv_usage, 4))):  # fraction_used_blocks
                out.append(("nv_trt_llm_kv_cache_block_metrics", {**labels, "kv_cache_block_type": kind}, value))
        return out

    def _info(self, ep: object, labels: Labels) -> list[tuple[str, Labels, float]]:
        """vLLM's info gauges: cache_config_info (the EPP's autoTune reads block_size and num_gpu_blocks) and,
        with --enable-lora, lora_requests_info (value: the time of the sample, as vLLM sets it)."""
        e, args = ep.engine, ep.args  # type: ignore[attr-defined]
        out: list[tuple[str, Labels, float]] = [("vllm:cache_config_info", {
            **labels, "block_size": str(e.block_size), "num_gpu_blocks": str(e.num_gpu_blocks)}, 1)]
        if args is not None and args.enable_lora:
            out.append(("vllm:lora_requests_info", {
                **labels, "max_lora": str(e.max_loras),
                "running_lora_adapters": ",".join(sorted(e.active_loras())),
                "waiting_lora_adapters": ",".join(sorted(e.waiting_loras()))}, self.env.now))
        return out

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
        for name in sorted(n for n in self._series if (not n.endswith(("_bucket", "_sum", "_count")) or n in COUNTERS
                                                       or n in TRITON_COUNTERS or n in TRITON_GAUGES)
                           and not n.startswith("DCGM_")):
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


def _histograms_of(ep: object) -> bool:
    """Whether the pod exports the request histograms: vLLM always, Triton's vLLM backend with
    REPORT_CUSTOM_METRICS, Triton's TensorRT-LLM backend never."""
    tm = _triton_of(ep)
    return tm is None or bool(tm.report_vllm_metrics)


def _triton_of(ep: object) -> Any:
    """The pod's Triton model (serving.types TritonModel) when tritonserver serves it, else None."""
    return getattr(getattr(ep, "args", None), "triton", None)

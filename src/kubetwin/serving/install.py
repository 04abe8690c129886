"""Installs the serving stack into a run when the scenario has one: the data plane (gateway, routers, engines), the
model servers' cold start in the kubelet, the samplers, and the autoscalers that read the serving metrics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetwin.api import kinds
from kubetwin.api.loader import Manifest
from kubetwin.controllers.kubelet import Kubelet
from kubetwin.k8s.units import parse_duration
from kubetwin.serving.observe.results import DEFAULT_SLO_TPOT, DEFAULT_SLO_TTFT
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store

SERVING_KINDS = {"RequestTrace", "InferencePool", "InferenceModel", "InferenceObjective", "ScaledObject"}
SLO_TTFT, SLO_TPOT = "kubetwin.io/slo-ttft", "kubetwin.io/slo-tpot"


def wanted(manifests: list[Manifest]) -> bool:
    """The serving stack runs when the scenario has a request trace or an Inference Extension object."""
    return any(m.kind in SERVING_KINDS for m in manifests)


def has_model_servers(manifests: list[Manifest]) -> bool:
    """Any workload running vLLM, TGI or Triton: its pods pay the model server's cold start, traffic or not."""
    from kubetwin.serving.modelserver.recognize import inspect_model_server

    return any(inspect_model_server(ref.spec, ref.at("spec")) is not None
               for m in manifests if m.kind != "PodTemplate" for ref in kinds.pod_templates(m.obj))


def load_traces(manifests: list[Manifest], seed: int, horizon: float) -> dict[tuple[str, str], Any]:
    """Every RequestTrace's requests, loaded before the clock starts so a missing file or a bad row is reported
    (file, field, line) before anything runs; spec.path is relative to the file that declares the trace."""
    from kubetwin.serving.traces.requesttrace import load_request_trace

    out = {}
    for m in manifests:
        if m.kind == "RequestTrace":
            meta = m.obj.get("metadata") or {}
            out[(meta.get("namespace") or "default", meta.get("name", ""))] = load_request_trace(
                m.obj, m.file if not m.file.startswith("<") else Path.cwd() / "x", seed=seed, horizon=horizon,
                line_of=m.line_of)
    return out


def pool_slos(manifests: list[Manifest]) -> dict[str, tuple[float, float]]:
    """Pool key -> (TTFT, TPOT) objective for each InferencePool or Service annotated with one (the live load
    generator reads the same annotations, so its SLO attainment is the twin's)."""
    slos: dict[str, tuple[float, float]] = {}
    for m in manifests:
        if m.kind in ("InferencePool", "Service"):
            ann = (m.obj.get("metadata") or {}).get("annotations") or {}
            if SLO_TTFT in ann or SLO_TPOT in ann:
                meta = m.obj["metadata"]
                key = f"{m.kind}/{meta.get('namespace') or 'default'}/{meta['name']}"
                slos[key] = (parse_duration(ann.get(SLO_TTFT, f"{DEFAULT_SLO_TTFT}s")),
                             parse_duration(ann.get(SLO_TPOT, f"{DEFAULT_SLO_TPOT}s")))
    return slos


@dataclass
class ServingRun:
    plane: Any
    metrics: Any
    source: Any  # the twin's Prometheus (serving.observe.promsource), read by KEDA and the HPA
    slos: dict[str, tuple[float, float]]

    def contribute(self, until: float) -> Contribution:
        """The serving section of summary.json and timeseries.json, the twin's Prometheus series, requests.csv."""
        self.plane.finish(until)
        for key in self.plane.all_pools():
            self.slos.setdefault(key, (DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT))
        prometheus = self.source.exposition()  # reads the request log, which summary() releases
        summary = self.metrics.summary(until, self.slos)
        return Contribution(summary={"serving": summary}, timeseries={"serving": self.metrics.timeseries()},
                            prometheus=prometheus, requests_csv_chunks=self.metrics.requests_csv_chunks())


def install(store: Store, env: Environment, events: EventRecorder, kubelet: Kubelet, manifests: list[Manifest],
            seed: int, sample_interval: float, horizon: float, cluster: str = "kubetwin") -> ServingRun:
    from kubetwin.prometheus import targets
    from kubetwin.serving.dataplane.plane import ServingDataPlane
    from kubetwin.serving.observe.metrics import ServingMetrics
    from kubetwin.serving.observe.promsource import ServingMetricsSource

    plane = ServingDataPlane(store, env, events, seed, load_traces(manifests, seed, horizon), kubelet.gpus)
    slos = pool_slos(manifests)
    scalers = [m for m in manifests if m.kind in ("ScaledObject", "HorizontalPodAutoscaler")]
    # Monitoring objects anywhere in the manifests: they are the cluster's whole scrape config (docs/monitoring.md)
    monitors = any(targets.is_monitor(m.obj) for m in manifests)
    source = ServingMetricsSource(plane, env, histogram_history=any("_bucket" in str(m.obj) for m in scalers),
                                  monitors=monitors, site=targets.Site(cluster, cluster_location(manifests)))
    return ServingRun(plane, ServingMetrics(plane, env, sample_interval), source, slos)


def cluster_location(manifests: list[Manifest]) -> str:
    """GMP's `location` label: the cluster's region, read from its first NodePool's first zone ("us-central1-a" ->
    "us-central1"; a regional cluster, the twin's assumption); "" when no NodePool names a zone."""
    for m in manifests:
        if m.kind == "NodePool":
            zones = (m.obj.get("spec") or {}).get("zones") or []
            if zones:
                return str(zones[0]).rsplit("-", 1)[0]
    return ""

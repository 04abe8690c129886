"""What the scenario's monitoring objects have scraped, checked against what its autoscalers query.

With no PodMonitoring, ClusterPodMonitoring, PodMonitor or ServiceMonitor in the manifests the twin scrapes every
model server (the cluster's scrape config is assumed to live elsewhere; docs/monitoring.md). With any of them, a
series exists only when one of them selects a model server's pods on the server's port (prometheus.targets), under
the name its metric relabelling leaves (prometheus.relabel). A KEDA prometheus trigger or an HPA Pods / Object
metric that reads a series nobody scrapes gets a notice: in the run, as on the cluster, the query returns nothing,
KEDA reads 0 (ignoreNullValues defaults to true; kedacore/keda pkg/scalers/prometheus_scaler.go) and the HPA
reports FailedGetPodsMetric."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.prometheus import relabel, targets

KINDS_SAID = "PodMonitoring, ClusterPodMonitoring, PodMonitor or ServiceMonitor"


@dataclass
class Scraped:
    """The series names the monitoring objects leave in Prometheus, and which jobs scrape which servers."""

    names: set[str] = field(default_factory=set)
    servers: list[str] = field(default_factory=list)  # "Kind/ns/name" of every workload running a model server
    jobs: list[str] = field(default_factory=list)  # the jobs that scrape at least one of them


def _server_pods(manifests: list[Manifest]) -> list[tuple[str, dict, int, str]]:
    """(workload ref, a pod as its template makes it, the server's port, its served model name) of every model
    server the manifests run."""
    from kubetwin.serving.modelserver.recognize import inspect_model_server

    out = []
    for m in manifests:
        for ref in kinds.pod_templates(m.obj) if m.kind != "PodTemplate" else []:
            found = inspect_model_server(ref.spec, ref.at("spec"))
            if found is None or found[1] is None:
                continue
            args = found[1]
            meta = ref.metadata if m.kind != "Pod" else (m.obj.get("metadata") or {})
            pod = {"metadata": {"name": f"{(m.obj.get('metadata') or {}).get('name', '')}-pod",
                                "namespace": (m.obj.get("metadata") or {}).get("namespace") or "default",
                                "labels": dict(meta.get("labels") or {})}, "spec": ref.spec,
                   "status": {"phase": "Running"}}
            name = (list(args.served_model_name) or [args.model])[0]
            out.append((m.ref, pod, int(getattr(args, "port", 0) or 8000), str(name)))
    return out


def scraped(manifests: list[Manifest]) -> Scraped | None:
    """None when the manifests have no monitoring object (everything is scraped); else what their jobs scrape."""
    from kubetwin.serving.observe.histograms import HISTOGRAMS
    from kubetwin.serving.observe.promsource import COUNTERS, GAUGES, INFO, POOL_GAUGES

    monitors = [m.obj for m in manifests if targets.is_monitor(m.obj)]
    if not monitors:
        return None
    jobs = targets.jobs(monitors)
    services = [m.obj for m in manifests if m.kind == "Service"]
    site = targets.Site("kubetwin")
    server_names = [*GAUGES, *COUNTERS, *INFO,
                    *(f"{h}{suffix}" for h in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count"))]
    from kubetwin.workloads.dcgm import FIELDS

    # the EPP's and GKE's managed DCGM collection's series: scraped either way (docs/monitoring.md)
    out = Scraped(names={*POOL_GAUGES, *FIELDS})
    for ref, pod, port, model in _server_pods(manifests):
        out.servers.append(ref)
        for job in jobs:
            found = job.target(pod, port, site, services)
            if found is None:
                continue
            if job.describe() not in out.jobs:
                out.jobs.append(job.describe())
            for name in server_names:
                kept = relabel.process({"model_name": model, **found, "__name__": name}, job.rules)
                if kept is not None:
                    out.names.add(kept["__name__"])
    return out


def diagnostics(manifests: list[Manifest]) -> list[Diagnostic]:
    """A notice for each autoscaler query over a model-server series no monitoring object scrapes (only when the
    manifests have monitoring objects)."""
    from kubetwin.serving.observe.promsource import KNOWN
    from kubetwin.validation.serving import metric_names

    seen = scraped(manifests)
    if seen is None:
        return []
    out = []
    for m in manifests:
        err = targets.gmp_config_error(m.obj) if targets.is_monitor(m.obj) and str(
            m.obj.get("apiVersion", "")).startswith(targets.GMP) else None
        if err:
            out.append(Diagnostic(m.file, m.line_of("spec"), m.ref, "spec", f"GMP's operator cannot build this "
                                  f"object's scrape config ({err}): the API server stores it but nothing it selects "
                                  "is scraped", "leave the protected target labels (project_id, location, cluster, "
                                  "namespace, job, instance) alone", "warning"))
    why = (f"no {KINDS_SAID} selects the pods that export it" if not seen.jobs else
           f"the monitoring objects that scrape the model servers ({'; '.join(seen.jobs)}) leave no series of that "
           "name (their metricRelabeling drops or renames it)")
    fix = ("add a PodMonitoring in the servers' namespace whose selector matches their pod labels, with an endpoint "
           "on the container port vLLM serves /metrics on (docs/monitoring.md)")
    for m in manifests:
        reads: list[tuple[str, str]] = []  # (field, query or metric name)
        spec = m.obj.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        if m.kind == "ScaledObject":
            for i, trig in enumerate(spec.get("triggers") or []):
                meta = trig.get("metadata") if isinstance(trig, dict) else None
                query = str(meta.get("query") or "") if isinstance(meta, dict) else ""
                if isinstance(trig, dict) and trig.get("type") == "prometheus" and query:
                    reads.append((f"spec.triggers[{i}].metadata.query", query))
        elif m.kind == "HorizontalPodAutoscaler":
            for i, metric in enumerate(spec.get("metrics") or []):
                mtype = metric.get("type") if isinstance(metric, dict) else None
                source = metric.get(str(mtype).lower()) if mtype in ("Pods", "Object") else None
                name = ((source or {}).get("metric") or {}).get("name") if isinstance(source, dict) else None
                if name:
                    reads.append((f"spec.metrics[{i}]", str(name)))
        for fld, query in reads:
            names = metric_names(query) or set()
            missing = sorted(n for n in names if n in KNOWN and n not in seen.names)
            if missing:
                reader = ("KEDA reads 0 (ignoreNullValues defaults to true) and the target does not scale on it"
                          if m.kind == "ScaledObject" else
                          "the HPA reports FailedGetPodsMetric and does not scale on it")
                out.append(Diagnostic(m.file, m.line_of(fld.replace("[", ".").replace("]", "")), m.ref, fld,
                                      f"{query!r} reads {', '.join(missing)}, which nothing scrapes: {why}; the query "
                                      f"returns no series, {reader}", fix, "notice"))
    return out


def renamed(manifests: list[Manifest]) -> set[str]:
    """Series names the monitoring objects' relabelling creates (a rename of a model server's series)."""
    from kubetwin.serving.observe.promsource import KNOWN

    seen = scraped(manifests)
    return set() if seen is None else seen.names - set(KNOWN)

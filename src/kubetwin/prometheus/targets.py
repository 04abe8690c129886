"""Which pods a monitoring object has scraped, with which target labels, how often and with which metric
relabelling: Google Managed Prometheus' PodMonitoring / ClusterPodMonitoring (monitoring.googleapis.com/v1) and
prometheus-operator's PodMonitor / ServiceMonitor (monitoring.coreos.com/v1), turned into what their operators
write into Prometheus' scrape config.

GMP (GoogleCloudPlatform/prometheus-engine pkg/operator/apis/monitoring/v1/pod_config.go): one scrape job per
endpoint, named after the object (`job` = its name); a PodMonitoring keeps pods of its own namespace, a
ClusterPodMonitoring any namespace; the selector is a LabelSelector over pod labels; `filterRunning` (default true)
drops Failed/Succeeded pods; a port given by name is a regex over the pods' declared container port names
(`instance` = "<pod>:<port name>", `container` set), by number it is scraped whether declared or not (`instance` =
"<pod>:<number>", no `container`); the target labels are project_id, location, cluster, namespace (always for a
PodMonitoring), job, instance and targetLabels.metadata (defaults from the CRD: container, pod,
top_level_controller_name, top_level_controller_type, and namespace for a ClusterPodMonitoring) and
targetLabels.fromPod (pod label -> target label).

prometheus-operator (pkg/prometheus/promcfg.go generatePodMonitorConfig / generateServiceMonitorConfig): a
PodMonitor keeps pods of its namespaceSelector (`any: true`, `matchNames`, or its own namespace when unset) whose
labels match `selector`, on the container port named `port` (a regex, as the keep rule reads it), numbered
`portNumber`, or the deprecated `targetPort`; labels namespace, container, pod, job ("<namespace>/<name>", or the
pod's `jobLabel` label), endpoint (the port name) and instance (the address, "<pod IP>:<port>"). A ServiceMonitor
keeps the endpoints of Services of its namespaceSelector whose labels match `selector` (the pods each Service's
selector picks), on the Service port named `port` or the pod port `targetPort`; labels add `service` and job is the
Service's name (or its `jobLabel` label). `interval` unset: the Prometheus' scrape interval (prometheus-operator's
default 30s). The twin assumes one Prometheus that selects every ServiceMonitor and PodMonitor (empty
serviceMonitorSelector / podMonitorSelector and namespace selectors).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetwin.k8s.labels import matches, set_matches
from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.k8s.units import parse_duration
from kubetwin.prometheus.relabel import RelabelError, Rule, compile_regex, compile_rules

GMP, OPERATOR = "monitoring.googleapis.com", "monitoring.coreos.com"
KINDS = {(GMP, "PodMonitoring"), (GMP, "ClusterPodMonitoring"), (OPERATOR, "PodMonitor"), (OPERATOR, "ServiceMonitor")}
OPERATOR_INTERVAL = 30.0  # prometheus-operator's Prometheus spec.scrapeInterval default ("30s")
# GMP's metadata defaults (the CRDs' targetLabels.metadata default)
GMP_METADATA = {"PodMonitoring": ("container", "pod", "top_level_controller_name", "top_level_controller_type"),
                "ClusterPodMonitoring": ("container", "namespace", "pod", "top_level_controller_name",
                                         "top_level_controller_type")}
_HASHED = re.compile(r"(.+)-[a-z0-9]+")  # a ReplicaSet named after its Deployment plus the pod-template-hash


def is_monitor(obj: Mapping[str, Any]) -> bool:
    return (str(obj.get("apiVersion", "")).split("/")[0], str(obj.get("kind"))) in KINDS


@dataclass(frozen=True)
class Site:
    """What GMP's collector adds to every target from the cluster it runs in."""

    cluster: str
    location: str = ""
    project_id: str = ""


@dataclass
class ScrapeJob:
    """One endpoint of one monitoring object: a Prometheus scrape job."""

    obj: Mapping[str, Any]
    index: int
    interval: float
    rules: list[Rule] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace") or "default")

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.kind, self.namespace if self.kind != "ClusterPodMonitoring" else "", self.name, self.index)

    @property
    def endpoint(self) -> Mapping[str, Any]:
        spec = self.obj.get("spec") or {}
        eps = spec.get("podMetricsEndpoints") if self.kind == "PodMonitor" else spec.get("endpoints")
        return (eps or [])[self.index]

    def describe(self) -> str:
        ns = "" if self.kind == "ClusterPodMonitoring" else f"{self.namespace}/"
        return f"{self.kind} {ns}{self.name} endpoint {self.index}"

    def target(self, pod: Mapping[str, Any], port: int, site: Site,
               services: Iterable[Mapping[str, Any]] = ()) -> dict[str, str] | None:
        """The target labels when this job scrapes `pod` on container port `port` (where the pod's exporter
        serves /metrics); None when it does not (another namespace, the selector, another port, a finished pod)."""
        meta = pod.get("metadata") or {}
        ns = str(meta.get("namespace") or "default")
        labels = meta.get("labels") or {}
        spec = self.obj.get("spec") or {}
        if self.kind in ("PodMonitoring", "ClusterPodMonitoring"):
            if self.kind == "PodMonitoring" and ns != self.namespace:
                return None
            if not matches(spec.get("selector") or {}, labels):
                return None
            if spec.get("filterRunning", True) and (pod.get("status") or {}).get("phase") in ("Failed",
                                                                                                 "Succeeded"):
                return None
            return self._gmp(pod, port, site)
        if not self._in_namespaces(ns):
            return None
        if self.kind == "PodMonitor":
            if not matches(spec.get("selector") or {}, labels):
                return None
            return self._pod_monitor(pod, port)
        for svc in services:  # ServiceMonitor
            smeta = svc.get("metadata") or {}
            selector = (svc.get("spec") or {}).get("selector") or {}
            if (str(smeta.get("namespace") or "default") == ns and selector and set_matches(selector, labels)
                    and matches(spec.get("selector") or {}, smeta.get("labels") or {})):
                found = self._service_monitor(pod, port, svc)
                if found is not None:
                    return found
        return None

    # -- GMP ---------------------------------------------------------------------------------------------
    def _gmp(self, pod: Mapping[str, Any], port: int, site: Site) -> dict[str, str] | None:
        ep, meta = self.endpoint, pod["metadata"]
        spec = self.obj.get("spec") or {}
        want = ep.get("port")
        metadata = (spec.get("targetLabels") or {}).get("metadata", GMP_METADATA[self.kind])
        metadata = set(metadata or ())
        if self.kind == "PodMonitoring":
            metadata.add("namespace")  # "The namespace label is always set for PodMonitorings."
        out = {"project_id": site.project_id, "location": site.location, "cluster": site.cluster}
        if isinstance(want, str) and not want.isdigit():
            regex = compile_regex(want)
            found = next(((c, p) for c, p in _ports(pod) if p.get("name") and regex.match(str(p["name"]))
                          and int(p.get("containerPort") or 0) == port), None)
            if found is None:
                return None
            container, declared = found
            instance = f"{meta['name']}:{declared['name']}"
        elif want is not None and int(want) == port:
            container, instance = None, f"{meta['name']}:{port}"
            metadata.discard("container")  # a number does not say which container
        else:
            return None
        out.update(_metadata(pod, metadata, container))
        out["job"] = self.name
        out["instance"] = instance
        for m in (spec.get("targetLabels") or {}).get("fromPod") or []:
            value = (meta.get("labels") or {}).get(m.get("from"))
            if value:
                out[m.get("to") or m["from"]] = value
        return {k: v for k, v in out.items() if v}

    # -- prometheus-operator -----------------------------------------------------------------------------
    def _in_namespaces(self, ns: str) -> bool:
        sel = (self.obj.get("spec") or {}).get("namespaceSelector") or {}
        if sel.get("any"):
            return True
        return ns in (sel.get("matchNames") or [self.namespace])

    def _pod_monitor(self, pod: Mapping[str, Any], port: int) -> dict[str, str] | None:
        ep, meta = self.endpoint, pod["metadata"]
        found = _operator_port(pod, port, ep.get("port"), ep.get("portNumber"), ep.get("targetPort"))
        if found is None:
            return None
        spec = self.obj.get("spec") or {}
        out = {"namespace": str(meta.get("namespace") or "default"), "container": found, "pod": meta["name"]}
        out.update(_pod_target_labels(pod, spec.get("podTargetLabels")))
        return _operator_tail(out, ep, spec, f"{self.namespace}/{self.name}", meta.get("labels") or {}, pod, port)

    def _service_monitor(self, pod: Mapping[str, Any], port: int, svc: Mapping[str, Any]) -> dict[str, str] | None:
        ep, meta = self.endpoint, pod["metadata"]
        spec = self.obj.get("spec") or {}
        container = None
        for sp in (svc.get("spec") or {}).get("ports") or []:
            if ep.get("port") and sp.get("name") != ep["port"]:
                continue
            tp = sp.get("targetPort", sp.get("port"))
            if ep.get("targetPort") is not None and str(tp) != str(ep["targetPort"]):
                continue
            container = _operator_port(pod, port, None, tp if isinstance(tp, int) else None,
                                       tp if isinstance(tp, str) else None)
            if container is not None:
                break
        if container is None:
            return None
        smeta = svc["metadata"]
        out = {"namespace": str(meta.get("namespace") or "default"), "service": smeta["name"], "pod": meta["name"],
               "container": container}
        out.update(_pod_target_labels(pod, spec.get("podTargetLabels")))
        for k in spec.get("targetLabels") or []:  # Service labels onto the target
            if (smeta.get("labels") or {}).get(k):
                out[_sanitize(k)] = smeta["labels"][k]
        return _operator_tail(out, ep, spec, smeta["name"], smeta.get("labels") or {}, pod, port)


def _operator_tail(out: dict[str, str], ep: Mapping[str, Any], spec: Mapping[str, Any], job: str,
                   labelled: Mapping[str, Any], pod: Mapping[str, Any], port: int) -> dict[str, str]:
    """The target labels prometheus-operator adds last for a PodMonitor or ServiceMonitor endpoint: `job` (the
    monitor's default, or the value of spec.jobLabel on the pod / Service), `endpoint` (the port it names) and
    `instance`; empty values dropped."""
    out["job"] = job
    job_label = spec.get("jobLabel")
    if job_label and labelled.get(job_label):
        out["job"] = str(labelled[job_label])
    if ep.get("port") or ep.get("targetPort") is not None:
        out["endpoint"] = str(ep.get("port") or ep.get("targetPort"))
    out["instance"] = f"{_ip(pod)}:{port}"
    return {k: v for k, v in out.items() if v}


def _ports(pod: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(container name, declared port) of every container port of the pod (Kubernetes SD's pod role: a target
    candidate per declared port)."""
    return [(str(c.get("name") or ""), p) for c in (pod.get("spec") or {}).get("containers") or []
            for p in c.get("ports") or []]


def _operator_port(pod: Mapping[str, Any], port: int, name: str | None, number: Any,
                   target: Any) -> str | None:
    """The container (its name) whose declared port is the exporter's `port` and matches the endpoint's port name
    (a regex, as the keep rule reads it), portNumber or targetPort; None when none does."""
    for container, p in _ports(pod):
        if int(p.get("containerPort") or 0) != port:
            continue
        pname = str(p.get("name") or "")
        if name:
            ok = bool(compile_regex(name).match(pname))
        elif number:
            ok = int(number) == port
        elif target is not None:
            ok = compile_regex(str(target)).match(pname) is not None if not str(target).isdigit() \
                else int(target) == port
        else:
            ok = False
        if ok:
            return container
    return None


def _metadata(pod: Mapping[str, Any], keys: set[str], container: str | None) -> dict[str, str]:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    out: dict[str, str] = {}
    if "namespace" in keys:
        out["namespace"] = str(meta.get("namespace") or "default")
    if "pod" in keys:
        out["pod"] = meta["name"]
    if "container" in keys and container:
        out["container"] = container
    if "node" in keys and spec.get("nodeName"):
        out["node"] = spec["nodeName"]
    owner = controller_of(pod)
    if owner is not None and keys & {"top_level_controller_name", "top_level_controller_type"}:
        kind, name = owner
        hashed = _HASHED.fullmatch(name)
        if kind == "ReplicaSet" and "pod-template-hash" in (meta.get("labels") or {}) and hashed:
            kind, name = "Deployment", hashed.group(1)
        elif kind == "Job" and (cron := re.fullmatch(r"(.+)-\d{8}", name)):
            kind, name = "CronJob", cron.group(1)
        if "top_level_controller_name" in keys:
            out["top_level_controller_name"] = name
        if "top_level_controller_type" in keys:
            out["top_level_controller_type"] = kind
    return out


def _pod_target_labels(pod: Mapping[str, Any], names: Iterable[str] | None) -> dict[str, str]:
    labels = pod["metadata"].get("labels") or {}
    return {_sanitize(k): labels[k] for k in names or () if labels.get(k)}


def _sanitize(name: str) -> str:
    """prometheus-operator's sanitizeLabelName: every invalid character an underscore."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _ip(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("podIP") or pod["metadata"]["name"])


# GMP's protected target labels (pod_config.go protectedLabel): no rule of a PodMonitoring may write or drop them
PROTECTED = ("__address__", "cluster", "instance", "job", "location", "namespace", "project_id")


def gmp_config_error(obj: Mapping[str, Any]) -> str | None:
    """Why GMP's operator cannot turn a PodMonitoring / ClusterPodMonitoring into scrape configs (ScrapeConfigs'
    error: convertRelabelingRule, labelMappingRelabelConfigs), or None. The API server stores such an object; the
    operator leaves all of it out of the collectors' config, so it scrapes nothing."""
    spec = obj.get("spec") or {}
    for m in (spec.get("targetLabels") or {}).get("fromPod") or []:
        to = m.get("to") or m.get("from")
        if to in PROTECTED:
            return f'invalid pod label mapping: cannot relabel with action "replace" onto protected label "{to}"'
    for i, ep in enumerate(spec.get("endpoints") or []):
        for r in ep.get("metricRelabeling") or []:
            action = str(r.get("action") or "").lower()
            try:
                regex = compile_regex(str(r["regex"]) if r.get("regex") else "(.*)")
            except RelabelError as err:
                return f"invalid definition for endpoint with index {i}: {err}"
            protected = "[" + " ".join(PROTECTED) + "]"
            if action in ("replace", "hashmod", "") and r.get("targetLabel") in PROTECTED:
                why = (f'cannot relabel with action "{r.get("action") or ""}" onto protected label '
                       f'"{r["targetLabel"]}"')
            elif action == "labeldrop" and any(regex.match(p) for p in PROTECTED):
                why = f"regex {r.get('regex')} would drop at least one of the protected labels {protected}"
            elif action == "labelkeep" and not all(regex.match(p) for p in PROTECTED):
                why = f"regex {r.get('regex')} would drop at least one of the protected labels {protected}"
            elif action == "labelmap":
                why = f'relabeling with action "{r.get("action")}" not allowed'
            else:
                continue
            return f"invalid definition for endpoint with index {i}: {why}"
    return None


def jobs(objs: Iterable[Mapping[str, Any]]) -> list[ScrapeJob]:
    """The scrape jobs of the monitoring objects, in the objects' order then their endpoints'; an endpoint whose
    interval or relabelling the operator refuses (RelabelError, a bad duration) makes no job, as the operator
    leaves it out of the config it writes (GMP: the whole object, gmp_config_error)."""
    out = []
    for obj in objs:
        if not is_monitor(obj):
            continue
        if str(obj.get("apiVersion", "")).startswith(GMP) and gmp_config_error(obj) is not None:
            continue
        kind = str(obj["kind"])
        spec = obj.get("spec") or {}
        eps = spec.get("podMetricsEndpoints") if kind == "PodMonitor" else spec.get("endpoints")
        for i, ep in enumerate(eps or []):
            try:
                interval = parse_duration(ep["interval"]) if ep.get("interval") else (
                    OPERATOR_INTERVAL if kind in ("PodMonitor", "ServiceMonitor") else 60.0)
                rules = compile_rules(ep.get("metricRelabeling" if obj["apiVersion"].startswith(GMP)
                                             else "metricRelabelings"))
            except (RelabelError, ValueError):
                continue
            out.append(ScrapeJob(obj, i, interval, rules))
    return out

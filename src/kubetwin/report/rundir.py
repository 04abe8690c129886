"""Read a run folder back: the object state at any simulated moment, replayed from history.jsonl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.store.store import CLUSTER_SCOPED

__all__ = ["CLUSTER_SCOPED", "RESOURCES", "kind_of", "state_at"]

# kubectl resource names and short names -> kind
RESOURCES = {
    "pods": "Pod", "pod": "Pod", "po": "Pod", "nodes": "Node", "node": "Node", "no": "Node",
    "jobs": "Job", "job": "Job", "deployments": "Deployment", "deployment": "Deployment", "deploy": "Deployment",
    "replicasets": "ReplicaSet", "replicaset": "ReplicaSet", "rs": "ReplicaSet", "events": "Event",
    "event": "Event", "ev": "Event", "namespaces": "Namespace", "namespace": "Namespace", "ns": "Namespace",
    "priorityclasses": "PriorityClass", "priorityclass": "PriorityClass", "pc": "PriorityClass",
    "nodepools": "NodePool", "nodepool": "NodePool", "configmaps": "ConfigMap", "configmap": "ConfigMap",
    "cm": "ConfigMap", "resourceclaims": "ResourceClaim", "resourceclaim": "ResourceClaim",
    "resourceclaimtemplates": "ResourceClaimTemplate", "resourceclaimtemplate": "ResourceClaimTemplate",
    "resourceslices": "ResourceSlice", "resourceslice": "ResourceSlice", "deviceclasses": "DeviceClass",
    "deviceclass": "DeviceClass",
    "workloads": "Workload", "workload": "Workload", "wl": "Workload", "clusterqueues": "ClusterQueue",
    "clusterqueue": "ClusterQueue", "cq": "ClusterQueue", "localqueues": "LocalQueue", "localqueue": "LocalQueue",
    "queues": "LocalQueue", "queue": "LocalQueue", "lq": "LocalQueue", "resourceflavors": "ResourceFlavor",
    "resourceflavor": "ResourceFlavor", "flavor": "ResourceFlavor", "flavors": "ResourceFlavor",
    "rf": "ResourceFlavor", "cohorts": "Cohort", "cohort": "Cohort",
    "workloadpriorityclasses": "WorkloadPriorityClass", "workloadpriorityclass": "WorkloadPriorityClass",
    "jobsets": "JobSet", "jobset": "JobSet", "provisioningrequests": "ProvisioningRequest",
    "provisioningrequest": "ProvisioningRequest", "provreq": "ProvisioningRequest", "podtemplates": "PodTemplate",
    "podtemplate": "PodTemplate", "admissionchecks": "AdmissionCheck", "admissioncheck": "AdmissionCheck",
    "provisioningrequestconfigs": "ProvisioningRequestConfig", "provisioningrequestconfig": "ProvisioningRequestConfig",
    "services": "Service", "service": "Service", "svc": "Service",
    "horizontalpodautoscalers": "HorizontalPodAutoscaler", "horizontalpodautoscaler": "HorizontalPodAutoscaler",
    "hpa": "HorizontalPodAutoscaler", "scaledobjects": "ScaledObject", "scaledobject": "ScaledObject",
    "so": "ScaledObject", "inferencepools": "InferencePool", "inferencepool": "InferencePool",
    "infpool": "InferencePool", "inferencemodels": "InferenceModel", "inferencemodel": "InferenceModel",
    "inferenceobjectives": "InferenceObjective", "inferenceobjective": "InferenceObjective",
    "requesttraces": "RequestTrace", "requesttrace": "RequestTrace",
    "persistentvolumeclaims": "PersistentVolumeClaim", "persistentvolumeclaim": "PersistentVolumeClaim",
    "pvc": "PersistentVolumeClaim", "storageclasses": "StorageClass", "storageclass": "StorageClass",
    "sc": "StorageClass",
}


def kind_of(resource: str) -> str:
    kind = RESOURCES.get(resource.lower())
    if kind is None:
        raise KubetwinError([Diagnostic("-", 0, "-", "", f'the server doesn\'t have a resource type "{resource}"',
                                        "known: " + ", ".join(sorted({k for k in RESOURCES if k.endswith("s")})))])
    return kind


def state_at(run_dir: Path, at: float | None) -> tuple[dict[tuple[str, str, str], dict], float, dict]:
    """Objects alive at time `at` (end of run if None), keyed by (kind, namespace, name)."""
    hist = run_dir / "history.jsonl"
    meta_file = run_dir / "run.json"
    if not hist.is_file() or not meta_file.is_file():
        raise KubetwinError([Diagnostic(str(run_dir), 0, "-", "", "not a kubetwin run folder (no history.jsonl)",
                                        "pass the --out folder of a `kubetwin run`")])
    meta = json.loads(meta_file.read_text())
    until = meta["duration"] if at is None else at
    objs: dict[tuple[str, str, str], dict] = {}
    with hist.open() as f:
        for line in f:
            rec: dict[str, Any] = json.loads(line)
            if rec["t"] > until:
                break
            o = rec["object"]
            key = (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"])
            if rec["type"] == "DELETED":
                objs.pop(key, None)
            else:
                objs[key] = o
    return objs, until, meta

"""The API server's defaulting (the `SetDefaults_*` functions of kubernetes/kubernetes pkg/apis/*/v*/defaults.go)
for the built-in kinds the twin simulates, on the fields the twin or kubectl's printers read.

Why one place: the API server stores an object with its defaults filled in, so `kubectl get -o yaml` and
`kubectl describe` show them (`Parallelism: 1` for a Job that set neither completions nor parallelism) and every
controller reads the same values; the twin applies these as the first admission step on create
(`controllers.admission.api_defaults`) instead of each reader guessing its own fallback.

Sources (kubernetes/kubernetes, Kubernetes 1.34):
- batch/v1 SetDefaults_Job: completions and parallelism both 1 when both are unset, else parallelism 1;
  backoffLimit 6 (MaxInt32 with backoffLimitPerIndex, KEP-3850); template labels copied to an unlabelled Job;
  completionMode NonIndexed; suspend false; podReplacementPolicy TerminatingOrFailed (Failed with a
  podFailurePolicy, KEP-3939, beta on by default since 1.29); manualSelector false.
- apps/v1 SetDefaults_Deployment: replicas 1, strategy RollingUpdate with maxUnavailable/maxSurge 25%,
  revisionHistoryLimit 10, progressDeadlineSeconds 600; SetDefaults_ReplicaSet: replicas 1.
- scheduling/v1 SetDefaults_PriorityClass: preemptionPolicy PreemptLowerPriority.
- autoscaling/v2 SetDefaults_HorizontalPodAutoscaler: minReplicas 1; no metrics means CPU at 80% utilization.
- storage/v1 SetDefaults_StorageClass: reclaimPolicy Delete, volumeBindingMode Immediate.
- core/v1 SetDefaults_PersistentVolumeClaimSpec: volumeMode Filesystem.
Pods keep their own defaulting in `controllers.admission.pod_defaults` (the scheduler's fields); custom resources
are defaulted from their CRD schemas (`api.crd`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
MAX_INT32 = 2**31 - 1


def job_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """SetDefaults_Job on a Job spec (also a JobSet replicatedJob's template spec before its Job exists)."""
    out = dict(spec)
    if out.get("completions") is None and out.get("parallelism") is None:
        out["completions"] = 1
    if out.get("parallelism") is None:
        out["parallelism"] = 1
    if out.get("backoffLimit") is None:
        out["backoffLimit"] = MAX_INT32 if out.get("backoffLimitPerIndex") is not None else 6
    if out.get("completionMode") is None:
        out["completionMode"] = "NonIndexed"
    if out.get("suspend") is None:
        out["suspend"] = False
    if out.get("podReplacementPolicy") is None:
        out["podReplacementPolicy"] = "Failed" if out.get("podFailurePolicy") else "TerminatingOrFailed"
    if out.get("manualSelector") is None:
        out["manualSelector"] = False
    return out


def _job(obj: Obj) -> Obj:
    spec = job_spec(obj.get("spec") or {})
    meta = obj.get("metadata") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if labels is not None and not meta.get("labels"):
        meta = {**meta, "labels": dict(labels)}
    return {**obj, "metadata": meta, "spec": spec}


def _deployment(obj: Obj) -> Obj:
    spec = dict(obj.get("spec") or {})
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    strategy = dict(spec.get("strategy") or {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy["rollingUpdate"] = {"maxUnavailable": "25%", "maxSurge": "25%",
                                     **{k: v for k, v in (strategy.get("rollingUpdate") or {}).items()
                                        if v is not None}}
    spec["strategy"] = strategy
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = 600
    return {**obj, "spec": spec}


def _replicaset(obj: Obj) -> Obj:
    spec = dict(obj.get("spec") or {})
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    return {**obj, "spec": spec}


def _priorityclass(obj: Obj) -> Obj:
    return obj if obj.get("preemptionPolicy") else {**obj, "preemptionPolicy": "PreemptLowerPriority"}


def _hpa(obj: Obj) -> Obj:
    if str(obj.get("apiVersion")) != "autoscaling/v2":
        return obj
    spec = dict(obj.get("spec") or {})
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    return {**obj, "spec": spec}


def _storageclass(obj: Obj) -> Obj:
    return {**obj, "reclaimPolicy": obj.get("reclaimPolicy") or "Delete",
            "volumeBindingMode": obj.get("volumeBindingMode") or "Immediate"}


def _pvc(obj: Obj) -> Obj:
    spec = obj.get("spec") or {}
    return obj if spec.get("volumeMode") else {**obj, "spec": {**spec, "volumeMode": "Filesystem"}}


DEFAULTERS: dict[str, Callable[[Obj], Obj]] = {
    "Job": _job, "Deployment": _deployment, "ReplicaSet": _replicaset, "PriorityClass": _priorityclass,
    "HorizontalPodAutoscaler": _hpa, "StorageClass": _storageclass, "PersistentVolumeClaim": _pvc,
}


def apply(obj: Obj) -> Obj:
    """The object as the API server stores it: its kind's SetDefaults_* applied (others unchanged)."""
    fn = DEFAULTERS.get(str(obj.get("kind")))
    return fn(obj) if fn is not None else obj

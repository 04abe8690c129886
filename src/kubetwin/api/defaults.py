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
- autoscaling/v2 SetDefaults_HorizontalPodAutoscaler: minReplicas 1; no metrics means CPU at 80% utilization; a
  given behavior gets both rules filled (SetDefaults_HorizontalPodAutoscalerBehavior).
- storage/v1 SetDefaults_StorageClass: reclaimPolicy Delete, volumeBindingMode Immediate.
- core/v1 (pkg/apis/core/v1/defaults.go, and the `+default` tags of k8s.io/api core/v1 types.go its generated
  zz_generated.defaults.go applies):
  - Pod: SetDefaults_PodSpec (dnsPolicy ClusterFirst, restartPolicy Always, securityContext {},
    terminationGracePeriodSeconds 30, schedulerName default-scheduler), SetDefaults_Pod (requests default to limits
    per resource on containers and init containers -- only on a Pod, never a template --, enableServiceLinks
    true, hostNetwork ports' hostPort = containerPort), SetDefaults_Container (imagePullPolicy Always for the tag
    latest or no tag and no digest, else IfNotPresent; terminationMessagePath /dev/termination-log,
    terminationMessagePolicy File), ContainerPort protocol TCP, SetDefaults_Probe (timeoutSeconds 1,
    periodSeconds 10, successThreshold 1, failureThreshold 3) and SetDefaults_HTTPGetAction (path /, scheme
    HTTP), SetDefaults_Volume (a volume without a source is an emptyDir), configMap/secret/downwardAPI/projected
    defaultMode 0644 (420), hostPath type "". The pod strategy's PrepareForCreate sets status.phase Pending.
  - Service: sessionAffinity None (ClientIP: timeout 10800 s), type ClusterIP, port protocol TCP, targetPort =
    port, internalTrafficPolicy Cluster (ClusterIP/NodePort/LoadBalancer), externalTrafficPolicy Cluster when
    externally accessible, allocateLoadBalancerNodePorts true for LoadBalancer.
  - Namespace: the kubernetes.io/metadata.name label (SetDefaults_Namespace); the namespace strategy's
    PrepareForCreate: status.phase Active and the kubernetes finalizer (pkg/registry/core/namespace/strategy.go).
  - Node: SetDefaults_NodeStatus (allocatable = capacity when unset).
  - PersistentVolume: phase Pending, persistentVolumeReclaimPolicy Retain, volumeMode Filesystem;
    PersistentVolumeClaim: phase Pending, volumeMode Filesystem. Secret: type Opaque. LimitRange: a Container
    item's default from max, defaultRequest from default then min (SetDefaults_LimitRangeItem).
- apps/v1 SetDefaults_StatefulSet (podManagementPolicy OrderedReady, updateStrategy RollingUpdate with partition 0,
  persistentVolumeClaimRetentionPolicy Retain/Retain, replicas 1, revisionHistoryLimit 10); SetDefaults_DaemonSet
  (updateStrategy RollingUpdate, maxUnavailable 1, maxSurge 0, revisionHistoryLimit 10).
- policy/v1 (PodDisruptionBudget) has no defaulting functions.
Pod templates of Jobs, StatefulSets, DaemonSets and PodTemplates get SetDefaults_PodSpec and the container defaults
(never SetDefaults_Pod's). Not applied (left as given, said here): the pod templates of Deployments and ReplicaSets
(the twin's pod-template-hash is computed over the stored template, so defaulting it would rename every ReplicaSet
and pod; their Pods are defaulted when created), pod-level resources' defaults (defaultPodRequests/
defaultPodLimits: api.podresources reads pod-level requests from pod-level limits), the Pod's status.qosClass.
Custom resources are defaulted from their CRD schemas (`api.crd`).
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
    spec = _with_template(job_spec(obj.get("spec") or {}))
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
    if isinstance(spec.get("behavior"), dict):  # SetDefaults_HorizontalPodAutoscalerBehavior
        spec["behavior"] = {**spec["behavior"],
                            "scaleUp": _scaling_rules(spec["behavior"].get("scaleUp"), HPA_SCALE_UP),
                            "scaleDown": _scaling_rules(spec["behavior"].get("scaleDown"), HPA_SCALE_DOWN)}
    return {**obj, "spec": spec}


# GenerateHPAScaleUpRules / GenerateHPAScaleDownRules' defaults (autoscaling/v2 defaults.go); scale-down has no
# stabilization window default (the controller's --horizontal-pod-autoscaler-downscale-stabilization flag, 5 min)
HPA_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                             {"type": "Percent", "value": 100, "periodSeconds": 15}]}
HPA_SCALE_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _scaling_rules(given: dict | None, default: dict) -> dict:
    """copyHPAScalingRules: each field set in the given rules replaces the default's."""
    out = {k: (list(v) if isinstance(v, list) else v) for k, v in default.items()}
    for key in ("selectPolicy", "stabilizationWindowSeconds", "policies", "tolerance"):
        if isinstance(given, dict) and given.get(key) is not None:
            out[key] = given[key]
    return out


def _storageclass(obj: Obj) -> Obj:
    return {**obj, "reclaimPolicy": obj.get("reclaimPolicy") or "Delete",
            "volumeBindingMode": obj.get("volumeBindingMode") or "Immediate"}


def _pvc(obj: Obj) -> Obj:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if spec.get("volumeMode") and status.get("phase"):
        return obj
    return {**obj, "spec": {**spec, "volumeMode": spec.get("volumeMode") or "Filesystem"},
            "status": {**status, "phase": status.get("phase") or "Pending"}}


def _pv(obj: Obj) -> Obj:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {**obj, "spec": {**spec, "persistentVolumeReclaimPolicy": spec.get("persistentVolumeReclaimPolicy")
                            or "Retain", "volumeMode": spec.get("volumeMode") or "Filesystem"},
            "status": {**status, "phase": status.get("phase") or "Pending"}}


def _namespace(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    finalizers = list(spec.get("finalizers") or [])
    if "kubernetes" not in finalizers:
        finalizers.append("kubernetes")
    if meta.get("name"):
        meta = {**meta, "labels": {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}}
    return {**obj, "metadata": meta, "spec": {**spec, "finalizers": finalizers}, "status": {"phase": "Active"}}


def _node(obj: Obj) -> Obj:
    status = obj.get("status") or {}
    if status.get("allocatable") is not None or status.get("capacity") is None:
        return obj
    return {**obj, "status": {**status, "allocatable": dict(status["capacity"])}}


def _limitrange(obj: Obj) -> Obj:
    """SetDefaults_LimitRangeItem on each Container item: default (limit) from max, defaultRequest from default,
    then from min. (The LimitRanger admission plugin that applies them to pods is not simulated: validate says so.)"""
    spec = obj.get("spec") or {}
    items = []
    for item in spec.get("limits") or []:
        if isinstance(item, dict) and item.get("type") == "Container":
            default = {**(item.get("max") or {}), **(item.get("default") or {})}
            request = {**(item.get("min") or {}), **default, **(item.get("defaultRequest") or {})}
            item = {**item, "default": default, "defaultRequest": request}
        items.append(item)
    return {**obj, "spec": {**spec, "limits": items}} if spec.get("limits") else obj


def _secret(obj: Obj) -> Obj:
    return obj if obj.get("type") else {**obj, "type": "Opaque"}


EXTERNALLY_ACCESSIBLE = ("LoadBalancer", "NodePort")


def _service(obj: Obj) -> Obj:
    spec = dict(obj.get("spec") or {})
    spec["sessionAffinity"] = spec.get("sessionAffinity") or "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP" and (
            ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds") is None):
        spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}  # DefaultClientIPServiceAffinity
    spec["type"] = spec.get("type") or "ClusterIP"
    if spec.get("ports"):
        spec["ports"] = [{**p, "protocol": p.get("protocol") or "TCP",
                          "targetPort": p["port"] if p.get("targetPort") in (None, 0, "") else p["targetPort"]}
                         if isinstance(p, dict) else p for p in spec["ports"]]
    external = spec["type"] in EXTERNALLY_ACCESSIBLE or (spec["type"] == "ClusterIP" and spec.get("externalIPs"))
    if external and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and (spec["type"] == "ClusterIP"
                                                   or spec["type"] in EXTERNALLY_ACCESSIBLE):
        spec["internalTrafficPolicy"] = "Cluster"
    if spec["type"] == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True
    return {**obj, "spec": spec}


def _statefulset(obj: Obj) -> Obj:
    spec = dict(obj.get("spec") or {})
    spec["podManagementPolicy"] = spec.get("podManagementPolicy") or "OrderedReady"
    strategy = dict(spec.get("updateStrategy") or {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        strategy.setdefault("rollingUpdate", {})
    if strategy["type"] == "RollingUpdate" and strategy.get("rollingUpdate") is not None \
            and strategy["rollingUpdate"].get("partition") is None:
        strategy["rollingUpdate"] = {**strategy["rollingUpdate"], "partition": 0}
    spec["updateStrategy"] = strategy
    retention = dict(spec.get("persistentVolumeClaimRetentionPolicy") or {})  # StatefulSetAutoDeletePVC: GA 1.32
    spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": retention.get("whenDeleted") or "Retain",
                                                    "whenScaled": retention.get("whenScaled") or "Retain"}
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    return {**obj, "spec": _with_template(spec)}


def _daemonset(obj: Obj) -> Obj:
    spec = dict(obj.get("spec") or {})
    strategy = dict(spec.get("updateStrategy") or {})
    strategy["type"] = strategy.get("type") or "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        strategy["rollingUpdate"] = {"maxUnavailable": 1, "maxSurge": 0,
                                     **{k: v for k, v in (strategy.get("rollingUpdate") or {}).items()
                                        if v is not None}}
    spec["updateStrategy"] = strategy
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    return {**obj, "spec": _with_template(spec)}


# --- Pod ------------------------------------------------------------------------------------------------------

def image_pull_policy(image: str) -> str:
    """SetDefaults_Container's imagePullPolicy: Always when the image's tag is latest, or it has neither a tag nor
    a digest (parsers.ParseImageName then answers the default tag, latest); IfNotPresent otherwise."""
    name, _, digest = str(image).partition("@")
    last = name.rpartition("/")[2]
    tag = last.rpartition(":")[2] if ":" in last else ""
    if not tag and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def requests_with_limits(resources: dict[str, Any]) -> dict[str, Any] | None:
    """SetDefaults_Pod's rule for one container: each resource with a limit and no request gets the limit as its
    request. The requests, or None when there is nothing to request. api.podresources reads a container's
    requests through this same rule, so a manifest read before defaulting and a stored pod agree."""
    limits, requests = resources.get("limits"), resources.get("requests")
    if not limits:
        return requests
    return {**limits, **(requests or {})} if requests else dict(limits)


def _probe(probe: dict) -> dict:
    out = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3,
           **{k: v for k, v in probe.items() if v not in (None, 0)}}
    if isinstance(out.get("httpGet"), dict):
        out["httpGet"] = {**out["httpGet"], "path": out["httpGet"].get("path") or "/",
                          "scheme": out["httpGet"].get("scheme") or "HTTP"}
    return out


PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _container(c: dict, mode: str) -> dict:
    """SetDefaults_Container with its ports and probes; mode "pod" or "pod-host" (hostNetwork) adds SetDefaults_Pod's
    requests from limits and host ports, "template" (a pod template) does not."""
    if not isinstance(c, dict):
        return c
    host_network = mode == "pod-host"
    out = dict(c)
    if not out.get("imagePullPolicy"):
        out["imagePullPolicy"] = image_pull_policy(str(out.get("image") or ""))
    out["terminationMessagePath"] = out.get("terminationMessagePath") or "/dev/termination-log"
    out["terminationMessagePolicy"] = out.get("terminationMessagePolicy") or "File"
    if out.get("ports"):
        out["ports"] = [{**p, "protocol": p.get("protocol") or "TCP",
                         **({"hostPort": p.get("containerPort")} if host_network and not p.get("hostPort") else {})}
                        if isinstance(p, dict) else p for p in out["ports"]]
    for name in PROBES:
        if isinstance(out.get(name), dict):
            out[name] = _probe(out[name])
    if isinstance(out.get("env"), list):  # SetDefaults_ObjectFieldSelector: a fieldRef's apiVersion is v1
        out["env"] = [_env(e) for e in out["env"]]
    res = out.get("resources")
    if mode != "template" and isinstance(res, dict) and res.get("limits"):
        out["resources"] = {**res, "requests": requests_with_limits(res)}
    return out


def _env(e: object) -> object:
    ref = ((e.get("valueFrom") or {}).get("fieldRef") if isinstance(e, dict) else None)
    if not isinstance(ref, dict) or ref.get("apiVersion"):
        return e
    assert isinstance(e, dict)
    return {**e, "valueFrom": {**e["valueFrom"], "fieldRef": {"apiVersion": "v1", **ref}}}


VOLUME_MODES = ("configMap", "secret", "downwardAPI", "projected")


def _volume(v: dict) -> dict:
    if not isinstance(v, dict):
        return v
    if set(v) <= {"name"}:
        return {**v, "emptyDir": {}}
    out = dict(v)
    for key in VOLUME_MODES:
        if isinstance(out.get(key), dict) and out[key].get("defaultMode") is None:
            out[key] = {**out[key], "defaultMode": 420}  # 0644
    if isinstance(out.get("hostPath"), dict) and out["hostPath"].get("type") is None:
        out["hostPath"] = {**out["hostPath"], "type": ""}
    return out


class _SameList:
    """The defaulted copy of a list, remembered by the input list's identity: the pods a controller creates from
    one template share its containers list, and their defaulted lists stay one object, so every cache keyed by the
    containers' identity (api.podspec.TemplateMemo) keeps hitting (bounded)."""

    def __init__(self, limit: int = 4096) -> None:
        self._seen: dict[tuple[int, str], tuple[list, list]] = {}
        self.limit = limit

    def __call__(self, items: list, mode: str, fn: Callable[[dict, str], dict]) -> list:
        key = (id(items), mode)
        seen = self._seen.get(key)
        if seen is not None and seen[0] is items:
            return seen[1]
        out = [fn(x, mode) for x in items]
        if out == items:
            out = items
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen[key] = (items, out)
        return out


_containers, _volumes = _SameList(), _SameList()
_EMPTY: dict[str, Any] = {}  # one empty securityContext for every pod: stored objects are never mutated in place


def pod_spec(spec: dict[str, Any], template: bool = False) -> dict[str, Any]:
    """SetDefaults_PodSpec with the container, probe and volume defaults; on a Pod (template False) also
    SetDefaults_Pod's (enableServiceLinks, requests from limits, host ports), which never apply to a template."""
    out = {"restartPolicy": "Always", "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30,
           "dnsPolicy": "ClusterFirst", "securityContext": _EMPTY,
           **({} if template else {"enableServiceLinks": True}),
           **{k: v for k, v in spec.items() if v is not None}}
    mode = "template" if template else ("pod-host" if spec.get("hostNetwork") else "pod")
    for key in ("containers", "initContainers"):
        if isinstance(out.get(key), list):
            out[key] = _containers(out[key], mode, _container)
    if isinstance(out.get("volumes"), list):
        out["volumes"] = _volumes(out["volumes"], "volumes", lambda v, _m: _volume(v))
    return out


def pod(obj: Obj) -> Obj:
    """SetDefaults_Pod and SetDefaults_PodSpec with the container, probe and volume defaults, and the pod
    strategy's status.phase Pending, on a Pod."""
    out = pod_spec(obj.get("spec") or {})
    meta = {**obj["metadata"], "namespace": obj["metadata"].get("namespace") or "default"}
    return {**obj, "metadata": meta, "spec": out, "status": obj.get("status") or {"phase": "Pending"}}


def _with_template(spec: dict[str, Any], key: str = "template") -> dict[str, Any]:
    """A workload spec whose pod template (spec.template) gets SetDefaults_PodSpec and the container defaults."""
    tmpl = spec.get(key)
    if not isinstance(tmpl, dict) or not isinstance(tmpl.get("spec"), dict):
        return spec
    return {**spec, key: {**tmpl, "spec": pod_spec(tmpl["spec"], template=True)}}


def _podtemplate(obj: Obj) -> Obj:
    return _with_template(obj)


DEFAULTERS: dict[str, Callable[[Obj], Obj]] = {
    "Job": _job, "Deployment": _deployment, "ReplicaSet": _replicaset, "PriorityClass": _priorityclass,
    "HorizontalPodAutoscaler": _hpa, "StorageClass": _storageclass, "PersistentVolumeClaim": _pvc,
    "PersistentVolume": _pv, "Namespace": _namespace, "Node": _node, "Secret": _secret, "Service": _service,
    "StatefulSet": _statefulset, "DaemonSet": _daemonset, "LimitRange": _limitrange, "PodTemplate": _podtemplate,
    "Pod": pod,
}


def apply(obj: Obj) -> Obj:
    """The object as the API server stores it: its kind's SetDefaults_* applied (others unchanged)."""
    fn = DEFAULTERS.get(str(obj.get("kind")))
    return fn(obj) if fn is not None else obj

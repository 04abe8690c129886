"""Kueue's plain Pod integration (the `pod` framework): queued Pods held by a scheduling gate until admitted.

Follows kubernetes-sigs/kueue pkg/controller/jobs/pod (pod_webhook.go, pod_controller.go, constants/constants.go)
and keps/976-plain-pods:
- the webhook (PodWebhook.Default), on create of a Pod labelled `kueue.x-k8s.io/queue-name` outside kube-system
  and kueue-system whose controller is not a kind Kueue manages, adds the label `kueue.x-k8s.io/managed: "true"`,
  the scheduling gate `kueue.x-k8s.io/admission`, and for a pod group the `kueue.x-k8s.io/role-hash` annotation;
- a single Pod gets its own Workload `pod-<name>-<hash>` (one PodSet `main`, count 1, the Pod's spec as template),
  the Pod its controller;
- a pod group (label `kueue.x-k8s.io/pod-group-name`, annotation `kueue.x-k8s.io/pod-group-total-count`) gets one
  Workload named after the group once that many runnable pods exist (until then each reconcile warns
  ErrWorkloadCompose "'<group>' group has fewer runnable pods than expected"); its PodSets are the pods' roles
  (the role hash, pods counted per role, sorted by name), annotation `kueue.x-k8s.io/is-group-workload`, and every
  pod an owner (not the controller);
- on admission each gated pod is ungated with its PodSet's flavor nodeSelector and tolerations merged in (Run;
  podset.Merge), a Started event on each; a group's pods beyond their role's admitted count stay gated (Kueue
  deletes such excess pods, which the twin does not);
- finished: a single Pod when it is Succeeded or Failed (its status message); a group when all `total-count` pods
  succeeded, or none is left running and one has `kueue.x-k8s.io/retriable-in-group: "false"` ("Pods succeeded:
  n/total.", always a success, as Kueue reports it);
- on eviction (Stop) every pod that is neither gated nor terminated gets the TerminationTarget condition and is
  deleted. A plain Pod cannot be suspended: a preempted single Pod is gone, and its Workload goes with it (the
  garbage collector, once its only owner is deleted), it is not requeued. A group's Workload goes when its last pod
  is gone; while some pods remain it is requeued like a Job's.

A parent integration's pods (annotation `kueue.x-k8s.io/pod-suspending-parent`, the LeaderWorkerSet's:
`controller.lws`) are gated whatever their queue or namespace and adopted by the parent's reconciler, their group
run against the Workload it made (label `kueue.x-k8s.io/prebuilt-workload-name`: never created here; missing, the
group's running pods are stopped, "missing workload"; it stays when the group's last pod goes); a serving group
(`kueue.x-k8s.io/pod-group-serving: "true"`) never finishes; a group is PodsReady only once all its total-count
pods exist.

Not modelled: the `kueue.x-k8s.io/managed` finalizer (the twin deletes at once, so a Pod is never seen
terminating), excess pods beyond the total count (Kueue deletes the youngest), replacement pods and the
WaitingForReplacementPods condition, `pod-group-sets`, fast admission, reclaimablePods, and
podOptions / managedJobsNamespaceSelector beyond Kueue's default (kube-system and kueue-system excluded). The role
hash covers the fields Kueue hashes (getRoleHash: containers' requests and ports, nodeSelector, affinity,
tolerations, runtimeClassName, priority, topologySpreadConstraints, overhead, resourceClaims) as sorted JSON, so
its hex differs from Kueue's Go encoding.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable

from kubetwin.k8s import podgates
from kubetwin.k8s.conditions import conditions_of, is_condition_true, replace_or_append_condition
from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.kueue.controller.jobframework import (
    DEFAULT_PODSET,
    GenericJob,
    PodSetInfo,
    prebuilt_workload,
    workload_name,
)
from kubetwin.scheduler.scheduler import scheduling_gated_condition
from kubetwin.store.store import Obj, Store

FRAMEWORK = "pod"  # pod_controller.go FrameworkName
SCHEDULING_GATE = "kueue.x-k8s.io/admission"  # constants.SchedulingGateName
MANAGED_LABEL = "kueue.x-k8s.io/managed"  # constants.ManagedByKueueLabelKey, value "true"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"  # constants.GroupNameLabel
GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"  # constants.GroupTotalCountAnnotation
ROLE_HASH = "kueue.x-k8s.io/role-hash"  # constants.RoleHashAnnotation
RETRIABLE_IN_GROUP = "kueue.x-k8s.io/retriable-in-group"  # constants.RetriableInGroupAnnotationKey
IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"  # constants.IsGroupWorkloadAnnotationKey
SUSPENDED_BY_PARENT = "kueue.x-k8s.io/pod-suspending-parent"  # constants.SuspendedByParentAnnotation
GROUP_SERVING = "kueue.x-k8s.io/pod-group-serving"  # constants.GroupServingAnnotationKey, value "true"
TERMINATION_TARGET = "TerminationTarget"  # pod_controller.go ConditionTypeTerminationTarget
STOP_REASON_EVICTED = "WorkloadEvicted"  # jobframework.StopReasonWorkloadEvicted
UNMANAGED_NAMESPACES = frozenset({"kube-system", "kueue-system"})  # managedJobsNamespaceSelector's default
GROUP_PREFIX = "group/"  # a pod group's work-queue key (pod names hold no '/'); Kueue prefixes the namespace alike
_PODS = "_pods"  # a group's view: its first pod, with the group's pods under this key (never stored)


def gated(pod: Obj) -> bool:
    return podgates.has_gate(pod["spec"], SCHEDULING_GATE)


def _terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def role_hash(pod: Obj) -> str:
    """getRoleHash: the webhook's annotation, else 8 hex of sha256 over the fields that matter to admission."""
    stored = (pod["metadata"].get("annotations") or {}).get(ROLE_HASH)
    if stored:
        return stored
    spec = pod["spec"]

    def shape(containers: list | None) -> list | None:
        return [{"resources": {"requests": (c.get("resources") or {}).get("requests")}, "ports": c.get("ports")}
                for c in containers or ()] or None

    fields = {"initContainers": shape(spec.get("initContainers")), "containers": shape(spec.get("containers")),
              **{k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "priority",
                                          "topologySpreadConstraints", "overhead", "resourceClaims")}}
    blob = json.dumps({"spec": fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def webhook(managed_kinds: frozenset[str], plain: bool = True) -> Callable[[Obj], Obj]:
    """PodWebhook.Default for the Pod kinds: gate and label a queued Pod at create; a pod whose parent
    integration marked it (`kueue.x-k8s.io/pod-suspending-parent`) is gated whatever its queue or namespace,
    without the managed label (its parent's reconciler adopts it). ``plain`` False: the pod framework is only
    implicitly enabled, and unmarked pods are left alone."""

    def default(pod: Obj) -> Obj:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        if SUSPENDED_BY_PARENT in (meta.get("annotations") or {}):
            pod = {**pod, "spec": podgates.gate(pod["spec"], SCHEDULING_GATE)}
            pod["metadata"] = {**meta, "annotations": {**meta["annotations"], ROLE_HASH: role_hash(pod)}}
            return scheduling_gated_condition(pod)
        if not plain:
            return pod
        if not labels.get("kueue.x-k8s.io/queue-name") or meta.get("namespace") in UNMANAGED_NAMESPACES:
            return pod
        owner = controller_of(pod)
        if owner is not None and owner[0] in managed_kinds:  # its owner is Kueue's already
            return pod
        meta = {**meta, "labels": {**labels, MANAGED_LABEL: "true"}}
        pod = {**pod, "metadata": meta, "spec": podgates.gate(pod["spec"], SCHEDULING_GATE)}
        if labels.get(GROUP_NAME_LABEL):
            pod["metadata"] = {**meta, "annotations": {**(meta.get("annotations") or {}), ROLE_HASH: role_hash(pod)}}
        # the API server's PrepareForCreate runs after the webhooks: the gate shows as PodScheduled SchedulingGated
        return scheduling_gated_condition(pod)

    return default


class PodJob(GenericJob):
    """A single Pod, or a pod group seen through its first pod (a ComposableJob in Kueue's words)."""

    kind, api_version = "Pod", "v1"

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], dict[str, None]] = {}  # (ns, group) -> pod names, in creation order

    # -- the controller's pod watch ----------------------------------------------------------------------
    def observe(self, etype: str, pod: Obj) -> tuple[str | None, str | None]:
        """A managed Pod changed: (work-queue name to reconcile, or the name of a Workload whose last owner is
        gone and that the garbage collector deletes)."""
        meta = pod["metadata"]
        group = (meta.get("labels") or {}).get(GROUP_NAME_LABEL)
        if not group:
            return (None, workload_name(pod)) if etype == "DELETED" else (meta["name"], None)
        key = (meta["namespace"], group)
        names = self._groups.setdefault(key, {})
        if etype == "DELETED":
            names.pop(meta["name"], None)
            if not names:
                del self._groups[key]
                # a prebuilt Workload is its maker's (the LWS's), not its pods': it stays
                return None, None if prebuilt_workload(pod) else group
        else:
            names[meta["name"]] = None
        return GROUP_PREFIX + group, None

    def load(self, store: Store, ns: str, name: str) -> Obj | None:
        if not name.startswith(GROUP_PREFIX):
            pod = store.get("Pod", ns, name)
            return pod if pod is not None and not _group(pod) else None
        pods = [p for n in self._groups.get((ns, name[len(GROUP_PREFIX):]), ()) if (p := store.get("Pod", ns, n))]
        return {**pods[0], _PODS: pods} if pods else None

    # -- GenericJob ----------------------------------------------------------------------------------------
    def workload_name(self, job: Obj) -> str:
        return prebuilt_workload(job) or _group(job) or workload_name(job)

    def workload_meta(self, job: Obj) -> dict:
        pods = job.get(_PODS)
        if pods is None:
            return super().workload_meta(job)
        return {"annotations": {IS_GROUP_WORKLOAD: "true"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"],
                                     "uid": p["metadata"]["uid"]} for p in pods]}

    def compose_error(self, job: Obj) -> str | None:
        pods = job.get(_PODS)
        if pods is not None and sum(1 for p in pods if _runnable(p)) < _total(job):
            return f"'{_group(job)}' group has fewer runnable pods than expected"
        return None

    def pod_sets(self, job: Obj) -> list[dict]:
        pods = job.get(_PODS)
        if pods is None:
            return [{"name": DEFAULT_PODSET, "count": 1, "template": {"spec": copy.deepcopy(job["spec"])}}]
        roles: dict[str, dict] = {}
        for pod in pods:
            if not _runnable(pod):
                continue
            h = role_hash(pod)
            if h in roles:
                roles[h]["count"] += 1
            else:
                roles[h] = {"name": h, "count": 1, "template": {"spec": copy.deepcopy(pod["spec"])}}
        return [roles[h] for h in sorted(roles)]

    def templates(self, spec: dict) -> dict[str, dict]:
        return {}

    def finished(self, job: Obj) -> tuple[bool, bool, str]:
        pods = job.get(_PODS)
        if pods is None:
            status = job.get("status") or {}
            phase = status.get("phase")
            if phase in ("Succeeded", "Failed"):
                return True, phase == "Succeeded", status.get("message") or ""
            return False, False, ""
        if (job["metadata"].get("annotations") or {}).get(GROUP_SERVING) == "true":
            return False, True, ""  # isServing: a serving group runs until its pods are deleted
        total = _total(job)
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        active = any(not _terminated(p) for p in pods)
        unretriable = any((p["metadata"].get("annotations") or {}).get(RETRIABLE_IN_GROUP) == "false" for p in pods)
        if succeeded == total or (not active and unretriable):
            return True, True, f"Pods succeeded: {succeeded}/{total}."
        return False, False, ""

    def suspended(self, job: Obj) -> bool:
        return any(gated(p) or _terminated(p) for p in job.get(_PODS) or (job,))

    def pods_ready(self, job: Obj) -> bool:
        """PodsReady: every pod Ready, a group's only once all its total-count pods exist."""
        pods = job.get(_PODS)
        if pods is not None and len(pods) < _total(job):
            return False
        return all(is_condition_true(conditions_of(p), "Ready") for p in pods or (job,))

    def start(self, store: Store, job: Obj, infos: list[PodSetInfo]) -> list[Obj]:
        """Run: remove the gate and merge the PodSet's node selector, tolerations, labels and annotations."""
        group = job.get(_PODS)
        by_role = {i.name: i for i in infos}
        current = [c for p in group or (job,) if (c := store.get("Pod", p["metadata"]["namespace"],
                                                                  p["metadata"]["name"])) is not None]
        room = {name: info.count for name, info in by_role.items()}  # a pod beyond its role's count stays gated
        for cur in current:
            if group is not None and not gated(cur) and _runnable(cur):
                h = role_hash(cur)
                room[h] = room.get(h, 0) - 1
        out = []
        for cur in current:
            if not gated(cur):
                continue
            if group is None:
                if infos:
                    out.append(store.update(_ungate(cur, infos[0])))
                continue
            h = role_hash(cur)
            if h in by_role and room[h] > 0:
                room[h] -= 1
                out.append(store.update(_ungate(cur, by_role[h])))
        return out

    def stop_job(self, store: Store, job: Obj, original: list[dict], message: str) -> list[Obj]:
        """Stop: a running (not gated, not terminated) pod gets TerminationTarget and is deleted."""
        now = store.timestamp(store.env.now)
        out = []
        for pod in job.get(_PODS) or (job,):
            meta = pod["metadata"]
            cur = store.get("Pod", meta["namespace"], meta["name"])
            if cur is None or gated(cur) or _terminated(cur):
                continue
            status = dict(cur.get("status") or {})
            # pod_controller.go Stop: a server-side apply of the TerminationTarget condition
            status["conditions"] = replace_or_append_condition(status.get("conditions"), {
                "type": TERMINATION_TARGET, "status": "True", "reason": STOP_REASON_EVICTED, "message": message,
                "lastTransitionTime": now})
            cur = store.update({**cur, "status": status})
            store.delete("Pod", meta["namespace"], meta["name"])
            out.append(cur)
        return out

    def active(self, store: Store, job: Obj) -> bool:
        """IsActive: a pod is still Running."""
        for pod in job.get(_PODS) or (job,):
            cur = store.get("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
            if cur is not None and (cur.get("status") or {}).get("phase") == "Running":
                return True
        return False


def _group(pod: Obj) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(GROUP_NAME_LABEL)


def _total(job: Obj) -> int:
    try:
        return max(1, int((job["metadata"].get("annotations") or {}).get(GROUP_TOTAL_COUNT, "")))
    except ValueError:
        return 1


def _runnable(pod: Obj) -> bool:
    """isPodRunnableOrSucceeded (a live pod in the twin has no deletionTimestamp)."""
    return (pod.get("status") or {}).get("phase") != "Failed"


def _ungate(pod: Obj, info: PodSetInfo) -> Obj:
    spec = podgates.ungate(pod["spec"], SCHEDULING_GATE)
    if info.node_selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **info.node_selector}
    tols = list(spec.get("tolerations") or ())
    tols += [t for t in info.tolerations if t not in tols]
    if tols:
        spec["tolerations"] = tols
    meta = pod["metadata"]
    for key, extra in (("labels", info.labels), ("annotations", info.annotations)):
        if extra:
            meta = {**meta, key: {**(meta.get(key) or {}), **extra}}
    return {**pod, "metadata": meta, "spec": spec}


"""Kueue's LeaderWorkerSet integration (the `leaderworkerset.x-k8s.io/leaderworkerset` framework): one Workload
per group, the group's pods held by Kueue's scheduling gate until it is admitted.

Follows kubernetes-sigs/kueue@ff69552e pkg/controller/jobs/leaderworkerset (leaderworkerset_webhook.go,
leaderworkerset_reconciler.go, leaderworkerset_controller.go) and the pod-group side in pkg/controller/jobs/pod
(pod_webhook.go Default, pod_controller.go isServing / Finished / Stop; constants/constants.go):
- the LWS webhook (Default), for an LWS labelled `kueue.x-k8s.io/queue-name` outside kube-system and kueue-system,
  copies the queue label (and the `kueue.x-k8s.io/priority-class` label) onto the leader and worker pod templates
  and annotates both `kueue.x-k8s.io/pod-suspending-parent: leaderworkerset.x-k8s.io/leaderworkerset` and
  `kueue.x-k8s.io/pod-group-serving: "true"`; with a leader template the worker template also gets TAS's
  `kueue.x-k8s.io/pod-index-offset: "1"` (not when it names a `kueue.x-k8s.io/podset-group-name`);
- the reconciler makes one Workload per group index, `GetWorkloadName(uid, "<lws>-<index>")` (as any job's
  workload name, over the owner name "<lws>-<index>"), with PodSets `leader` (1) and `worker` (size-1) from the
  templates, or one `main` (size) without a leader template; the `leaderworkerset.sigs.k8s.io/` keys except the
  name label are dropped from the PodSet templates and duplicate env entries collapsed (SanitizePodSet). Its
  metadata: annotation `kueue.x-k8s.io/is-group-workload`, the job-owner GVK / name and
  `kueue.x-k8s.io/component-workload-index` annotations, label `kueue.x-k8s.io/job-uid`, and the LWS as a plain
  (non-controller) owner. Groups beyond spec.replicas lose their Workload (during a rollout with maxSurge the
  status' replicas count, so the surge groups keep theirs);
- the pod webhook gates every pod carrying the suspending-parent annotation (`kueue.x-k8s.io/admission`), without
  the managed label or finalizer; the reconciler then adopts each live pod of the LWS that has its group-index
  label: `kueue.x-k8s.io/managed`, `kueue.x-k8s.io/pod-group-name` and `kueue.x-k8s.io/prebuilt-workload-name`
  set to its group's Workload, `kueue.x-k8s.io/pod-group-total-count` = size, and the role hash set to its PodSet
  (`leader` / `worker` / `main`). Pod and Workload events reach this reconciler one batch later
  (constants.UpdatesBatchPeriod, 1 s, AddAfter); LWS events at once;
- from there the pod-group integration (`controller.pods`) runs the group against its prebuilt Workload: ungated
  with the flavors' nodeSelector / tolerations when admitted, its running pods deleted on eviction (the LWS
  controller makes the group again, gated), and, a serving group, never finished.

A changed queue label moves the group's Workloads to the new queue (updateWorkload). Not modelled: a priority
change on a live LWS (UpdateWorkloadPriority), the default LocalQueue, the
StatefulSet-rollout ungating of old-revision pods (ShouldUngatePod: the twin runs no StatefulSets),
AdmissionGatedBy, MultiKueue, and the webhook's validation (replicas bounds, immutable templates while managed).
The group's pods are not added as the Workload's owners (EnsureWorkloadOwnedByAllMembers): the LWS owns it and
deletes it, and the garbage collector takes it with the LWS.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Protocol

from kubetwin.controllers import lws_webhook as W
from kubetwin.k8s import podgates
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.kueue.controller.jobframework import (
    DEFAULT_PODSET,
    JOB_UID_LABEL,
    PREBUILT_WORKLOAD_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    queue_name,
    workload_name,
)
from kubetwin.kueue.controller.pods import (
    GROUP_NAME_LABEL,
    GROUP_SERVING,
    GROUP_TOTAL_COUNT,
    IS_GROUP_WORKLOAD,
    MANAGED_LABEL,
    ROLE_HASH,
    SCHEDULING_GATE,
    SUSPENDED_BY_PARENT,
    UNMANAGED_NAMESPACES,
)
from kubetwin.kueue.tas import request as tas_request
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"  # leaderworkerset_controller.go FrameworkName
KIND, API_VERSION = "LeaderWorkerSet", W.API
GVK = "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"  # schema.GroupVersionKind.String()
PREBUILT_WORKLOAD = PREBUILT_WORKLOAD_LABEL
POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"  # kueue.PodIndexOffsetAnnotation
PODSET_GROUP_NAME = "kueue.x-k8s.io/podset-group-name"  # kueue.PodSetGroupName
JOB_OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"  # constants.JobOwnerGVKAnnotation
JOB_OWNER_NAME = "kueue.x-k8s.io/job-owner-name"  # constants.JobOwnerNameAnnotation
COMPONENT_INDEX = "kueue.x-k8s.io/component-workload-index"  # constants.ComponentWorkloadIndexAnnotation
LEADER, WORKER = "leader", "worker"  # leaderPodSetName, workerPodSetName
UPDATES_BATCH_S = 1.0  # constants.UpdatesBatchPeriod: the Pod and Workload handlers' AddAfter
_LWS_PREFIX = "leaderworkerset.sigs.k8s.io"


def managed(lws: Obj) -> bool:
    """WorkloadShouldBeSuspended for an LWS: it names a queue and lives outside the unmanaged namespaces."""
    return bool(queue_name(lws)) and (lws["metadata"].get("namespace") or "default") not in UNMANAGED_NAMESPACES


def webhook(tas: bool = True) -> Callable[[Obj], Obj]:
    """The LWS webhook's Default: a managed LWS's pod templates carry the queue (and priority class) label and the
    suspending-parent and serving annotations; with TAS on, a worker template beside a leader template the pod
    index offset."""

    def default(lws: Obj) -> Obj:
        if not managed(lws):
            return lws
        labels = lws["metadata"].get("labels") or {}
        spec = copy.deepcopy(lws.get("spec") or {})
        lwt = spec.setdefault("leaderWorkerTemplate", {})
        has_leader = lwt.get("leaderTemplate") is not None
        for field, tmpl in (("leaderTemplate", lwt.get("leaderTemplate")),
                            ("workerTemplate", lwt.setdefault("workerTemplate", {}))):
            if tmpl is None:
                continue
            meta = tmpl.setdefault("metadata", {})
            tlabels = meta["labels"] = dict(meta.get("labels") or {})
            tlabels[QUEUE_LABEL] = labels[QUEUE_LABEL]
            if labels.get(PRIORITY_CLASS_LABEL):
                tlabels[PRIORITY_CLASS_LABEL] = labels[PRIORITY_CLASS_LABEL]
            ann = meta["annotations"] = dict(meta.get("annotations") or {})
            ann[SUSPENDED_BY_PARENT] = FRAMEWORK
            ann[GROUP_SERVING] = "true"
            if tas and field == "workerTemplate" and has_leader and PODSET_GROUP_NAME not in ann:
                ann[POD_INDEX_OFFSET] = "1"
        return {**lws, "spec": spec}

    return default


def group_workload_name(lws: Obj, index: int | str) -> str:
    """GetWorkloadName: the job workload name over the owner name "<lws>-<index>" (kind LeaderWorkerSet)."""
    meta = lws["metadata"]
    return workload_name({"kind": KIND, "apiVersion": API_VERSION,
                          "metadata": {"name": f"{meta['name']}-{index}", "uid": meta["uid"]}})


def _sanitized(template: dict) -> dict:
    """newPodSet's template: the LWS keys dropped (the name label kept), duplicate env names collapsed to their
    last value in first-seen order (SanitizePodSet)."""
    tmpl = copy.deepcopy(template)
    meta = tmpl.get("metadata")
    if meta:
        for key in ("labels", "annotations"):
            if meta.get(key) is not None:
                meta[key] = {k: v for k, v in meta[key].items() if not k.startswith(_LWS_PREFIX) or k == W.NAME}
    spec = tmpl.get("spec") or {}
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or ():
            if c.get("env"):
                last: dict[str, dict] = {}
                for e in c["env"]:
                    last[e.get("name")] = e
                c["env"] = list(last.values())
    return tmpl


def pod_sets(lws: Obj) -> list[dict]:
    """podSets: `leader` (1) and `worker` (size-1) with a leader template, else `main` (size); a template's TAS
    annotations become the PodSet's topologyRequest, the workers ranked by their worker-index label."""
    lwt = lws["spec"]["leaderWorkerTemplate"]
    size = int(lwt.get("size", 1))
    out = []
    name = DEFAULT_PODSET
    if lwt.get("leaderTemplate") is not None:
        name, size = WORKER, size - 1
        out.append(_pod_set(LEADER, 1, lwt["leaderTemplate"], None))
    out.append(_pod_set(name, size, lwt.get("workerTemplate") or {}, W.WORKER_INDEX))
    return out


def _pod_set(name: str, count: int, template: dict, index_label: str | None) -> dict:
    ps = {"name": name, "count": count, "template": _sanitized(template)}
    tr = tas_request.from_annotations((template.get("metadata") or {}).get("annotations"), index_label)
    if tr is not None:
        ps["topologyRequest"] = tr.to_api()
    return ps


def wanted_groups(lws: Obj) -> int:
    """filterWorkloads' count: spec.replicas, or status.replicas while a rollout with maxSurge has surge groups
    (isRollingUpdateWithSurge: maxSurge > 0 and updatedReplicas < spec.replicas)."""
    spec, status = lws["spec"], lws.get("status") or {}
    replicas = int(spec.get("replicas", 1))
    cfg = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
    surge = cfg.get("maxSurge") or 0
    surging = (int(surge) > 0 if not isinstance(surge, str) or not surge.endswith("%") else int(surge[:-1]) > 0) \
        and int(status.get("updatedReplicas") or 0) < replicas
    if int(status.get("replicas") or 0) > replicas and surging:
        return int(status["replicas"])
    return replicas


def set_default(lws: Obj, pod: Obj) -> Obj | None:
    """setDefault: the pod adopted into its group (labels and annotations), None when there is nothing to do --
    already managed, or no group-index label yet."""
    meta = pod["metadata"]
    labels = dict(meta.get("labels") or {})
    if MANAGED_LABEL in labels or W.GROUP_INDEX not in labels:
        return None
    wl = group_workload_name(lws, labels[W.GROUP_INDEX])
    ann = dict(meta.get("annotations") or {})
    labels[MANAGED_LABEL] = "true"
    if queue_name(lws) and podgates.has_gate(pod["spec"], SCHEDULING_GATE):
        labels[QUEUE_LABEL] = queue_name(lws) or ""
    labels[GROUP_NAME_LABEL] = wl
    labels[PREBUILT_WORKLOAD] = wl
    ann[GROUP_TOTAL_COUNT] = str(lws["spec"]["leaderWorkerTemplate"].get("size", 1))
    ann[ROLE_HASH] = DEFAULT_PODSET
    if lws["spec"]["leaderWorkerTemplate"].get("leaderTemplate") is not None:
        ann[ROLE_HASH] = WORKER if W.LEADER_NAME in ann else LEADER
    return {**pod, "metadata": {**meta, "labels": labels, "annotations": ann}}


class Kueue(Protocol):
    """What the reconciler asks of Kueue's manager (`controller.core.KueueController`)."""

    def create_workload(self, job: Obj, wmeta: dict, pod_sets: list[dict]) -> Obj: ...


class LeaderWorkerSetReconciler:
    """leaderworkerset_reconciler.go Reconcile: the LWS's Workloads, then its pods' defaults."""

    def __init__(self, store: Store, env: Environment, kueue: Kueue) -> None:
        self.store, self.env, self.kueue = store, env, kueue
        self._work = WorkQueue(env, self._process)
        self._later: set[tuple[str, str]] = set()  # keys waiting out their batch period
        # when each pod was first seen: a pod is adopted from the instant after (its own batch, or any later
        # reconcile), never in the instant it was created, which the watches' order would decide
        self._seen: dict[str, float] = {}
        store.watch(KIND, self._on_lws)
        store.watch("Workload", self._on_workload)
        store.watch("Pod", self._on_pod)

    # -- watches (enqueue only) ---------------------------------------------------------------------------
    def _on_lws(self, etype: str, lws: Obj, old: Obj | None) -> None:
        meta = lws["metadata"]
        ns = meta.get("namespace") or "default"
        if etype == "DELETED":  # the garbage collector: the LWS's Workloads whose owners are all gone
            uid = meta.get("uid")
            self.env.after(0, lambda: self._collect(ns, uid))
        elif managed(lws):  # the For() predicate: WorkloadShouldBeSuspended
            self._work.add((ns, meta["name"]))

    def _on_workload(self, etype: str, wl: Obj, old: Obj | None) -> None:
        for ref in wl["metadata"].get("ownerReferences") or ():
            if ref.get("kind") == KIND and ref.get("apiVersion") == API_VERSION:
                self._add_after((wl["metadata"]["namespace"], ref["name"]))
                return

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        if etype == "DELETED":
            self._seen.pop(meta.get("uid") or "", None)
            return
        if (meta.get("annotations") or {}).get(SUSPENDED_BY_PARENT) != FRAMEWORK:
            return
        self._seen.setdefault(meta.get("uid") or "", self.env.now)
        name = (meta.get("labels") or {}).get(W.NAME)
        if name is not None:
            self._add_after((meta.get("namespace") or "default", name))

    def _add_after(self, key: tuple[str, str]) -> None:
        if key not in self._later:
            self._later.add(key)
            self.env.after(UPDATES_BATCH_S, lambda: self._due(key))

    def _due(self, key: tuple[str, str]) -> None:
        self._later.discard(key)
        self._work.add(key)

    # -- reconcile -------------------------------------------------------------------------------------
    def _process(self, key: tuple[str, str]) -> None:
        ns, name = key
        lws = self.store.get(KIND, ns, name)
        if lws is None or not managed(lws):
            return
        self._workloads(lws)
        for pod in sorted(self.store.list("Pod", ns, {W.NAME: name}), key=lambda p: p["metadata"]["name"]):
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or \
                    self._seen.get(pod["metadata"].get("uid") or "", self.env.now) >= self.env.now:
                continue
            adopted = set_default(lws, pod)
            if adopted is not None:
                self.store.update(adopted)

    def _workloads(self, lws: Obj) -> None:
        """reconcileWorkloads: create the missing groups' Workloads, delete those past the wanted count."""
        meta = lws["metadata"]
        ns = meta.get("namespace") or "default"
        have = {wl["metadata"]["name"]: wl for wl in self.store.list("Workload", ns)
                if any(r.get("uid") == meta["uid"] for r in wl["metadata"].get("ownerReferences") or ())}
        for i in range(wanted_groups(lws)):
            name = group_workload_name(lws, i)
            wl = have.pop(name, None)
            if wl is None:
                self.kueue.create_workload(lws, self._workload_meta(lws, name, i), pod_sets(lws))
            elif wl["spec"].get("queueName") != queue_name(lws):  # updateWorkload: the LWS changed queue
                self.store.update({**wl, "spec": {**wl["spec"], "queueName": queue_name(lws)}})
        for name in sorted(have):
            self.store.delete("Workload", ns, name)

    @staticmethod
    def _workload_meta(lws: Obj, name: str, index: int) -> dict:
        """constructWorkload's metadata: NewGroupWorkload's annotation, the owner annotations and the LWS as
        owner (controllerutil.SetOwnerReference: not the controller)."""
        meta = lws["metadata"]
        return {"name": name, "labels": {JOB_UID_LABEL: meta["uid"]},
                "annotations": {IS_GROUP_WORKLOAD: "true", JOB_OWNER_GVK: GVK, JOB_OWNER_NAME: meta["name"],
                                COMPONENT_INDEX: str(index)},
                "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": meta["name"],
                                     "uid": meta["uid"]}]}

    def _collect(self, ns: str, uid: str | None) -> None:
        """attemptToDeleteItem for the deleted LWS's Workloads: gone once no owner of theirs is left."""
        for wl in self.store.list("Workload", ns):
            refs = wl["metadata"].get("ownerReferences") or ()
            if not any(r.get("uid") == uid for r in refs):
                continue
            live = [r for r in refs if r.get("uid") != uid and (o := self.store.get(r["kind"], ns, r["name"]))
                    is not None and o["metadata"].get("uid") == r.get("uid")]
            if not live:
                self.store.delete("Workload", ns, wl["metadata"]["name"])

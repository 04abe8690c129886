"""PodGC (kube-controller-manager pkg/controller/podgc/gc_controller.go, v1.34).

gcOrphaned: pods bound to a Node that does not exist are orphans. Their node goes in quarantine for 40 s
(quarantineTime), then, if the node is still missing, each pod is patched to phase Failed with condition
DisruptionTarget (reason DeletionByPodGC) and force-deleted. The NodePool controller calls `fail_orphans` when it
loses a node; `PodGC` covers pods created with a `spec.nodeName` that names no Node at all (they skip the
scheduler, so nothing else stops them).

gcTerminated: every gcCheckPeriod (20 s) the controller counts the terminated pods (phase Succeeded or Failed);
past --terminated-pod-gc-threshold it force-deletes the surplus, evicted pods first, then the oldest by
creationTimestamp, names breaking ties (byEvictionAndCreationTimestamp), each delete through the controller's
client (``pod-garbage-collector``: kube-controller-manager's 20 qps / 30 burst), and the next period starts when
they are all through. The twin keeps the count as pods change and wakes only on the ticks after the count has gone
past the threshold, so a run that never gets there pays nothing for it.
"""

from __future__ import annotations

import heapq
import math
from functools import partial

from kubetwin.api import twin
from kubetwin.k8s.conditions import replace_or_append_condition
from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

PODGC_QUARANTINE = 40.0
GC_CHECK_PERIOD = 20.0  # gcCheckPeriod: the controller's loop, from its start (wait.UntilWithContext)
PODGC_REASON, PODGC_MESSAGE = "DeletionByPodGC", "PodGC: node no longer exists"
TERMINAL = ("Succeeded", "Failed")


def fail_orphans(store: Store, env: Environment, node_name: str, uids: set[str]) -> list[Obj]:
    """PodGC on a missing node: the listed pods still bound to it and not finished become Failed with
    DisruptionTarget/DeletionByPodGC. Pods a Job controls are kept (the real Job controller counts them through
    its job-tracking finalizer before they go; the twin's counts the Failed pods it still sees); the others are
    force-deleted as PodGC deletes them. Returns the failed pods."""
    now = store.timestamp(env.now)
    failed = []
    for pod in store.list("Pod"):
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("uid") not in uids or pod["spec"].get("nodeName") != node_name:
            continue
        if status.get("phase") in TERMINAL:
            continue
        # markFailedAndDeletePodWithCondition: a server-side apply of phase Failed and DisruptionTarget
        conds = replace_or_append_condition(status.get("conditions"), {
            "type": "DisruptionTarget", "status": "True", "reason": PODGC_REASON, "message": PODGC_MESSAGE,
            "lastTransitionTime": now})
        pod = store.update({**pod, "status": {**status, "phase": "Failed", "conditions": conds}})
        failed.append(pod)
        owner = controller_of(pod)
        if not owner or owner[0] != "Job":
            store.delete("Pod", meta.get("namespace") or "", meta["name"])
    return failed


def _evicted(pod: Obj) -> bool:
    """eviction.PodIsEvicted: phase Failed with reason Evicted (the kubelet's node-pressure eviction)."""
    status = pod.get("status") or {}
    return status.get("phase") == "Failed" and status.get("reason") == "Evicted"


GCKey = tuple[int, str, str, str, str]  # (not evicted, creationTimestamp, name, namespace, uid)


class PodGC:
    """gcOrphaned for pods bound to a node name no Node has (quarantine, then fail and delete them), and
    gcTerminated for the terminated pods past the threshold."""

    def __init__(self, store: Store, env: Environment, terminated_threshold: int = 12_500,
                 client: ApiClient | None = None) -> None:
        self.store, self.env = store, env
        self.terminated_threshold = terminated_threshold
        self.client = client if client is not None else ApiClient(
            "pod-garbage-collector", twin.CONTROLLER_MANAGER_QPS, twin.CONTROLLER_MANAGER_BURST)
        self._loop_end = 0.0  # when the controller's last pass ended (its loop runs from the start)
        self._quarantined: dict[str, set[str]] = {}  # node name -> uids of pods waiting out the quarantine
        # the terminated pods still stored (uid -> their place in the deletion order), and that order as a heap
        # whose entries for pods deleted by others are dropped when they surface (or when they outnumber the rest)
        self._terminated: dict[str, GCKey] = {}
        self._order: list[GCKey] = []
        self._tick_armed = False
        self.collected = 0  # pods gcTerminated deleted
        store.watch("Pod", self._on_pod)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        if self.terminated_threshold > 0:
            self._count_terminated(etype, pod)
        node = pod["spec"].get("nodeName")
        if etype == "DELETED" or not node or (old is not None and (old.get("spec") or {}).get("nodeName") == node):
            return
        if (pod.get("status") or {}).get("phase") in TERMINAL or self.store.get("Node", "", node) is not None:
            return
        waiting = self._quarantined.setdefault(node, set())
        if not waiting:
            self.env.after(PODGC_QUARANTINE, lambda: self._collect(node))
        waiting.add(pod["metadata"]["uid"])

    def _collect(self, node: str) -> None:
        uids = self._quarantined.pop(node, set())
        if self.store.get("Node", "", node) is None:  # still missing after the quarantine
            fail_orphans(self.store, self.env, node, uids)

    def _count_terminated(self, etype: str, pod: Obj) -> None:
        """The watch's part of gcTerminated: keep the terminated pods' count and order; arm the next tick once the
        count is past the threshold."""
        meta = pod["metadata"]
        uid = meta["uid"]
        if etype == "DELETED":
            self._terminated.pop(uid, None)
            return
        if uid in self._terminated or (pod.get("status") or {}).get("phase") not in TERMINAL:
            return
        key = (0 if _evicted(pod) else 1, meta.get("creationTimestamp") or "", meta["name"],
               meta.get("namespace") or "", uid)
        self._terminated[uid] = key
        heapq.heappush(self._order, key)
        if len(self._terminated) > self.terminated_threshold and not self._tick_armed:
            self._tick_armed = True
            # the loop's next tick: a whole number of periods after the last pass ended (wait.Until is a sliding
            # period), at least one: a pass whose deletes are still going out has not ended yet
            ticks = max(1, math.floor((self.env.now - self._loop_end) / GC_CHECK_PERIOD) + 1)
            self.env.at(self._loop_end + ticks * GC_CHECK_PERIOD, self._gc_terminated)

    def _gc_terminated(self) -> None:
        """gcTerminated at a tick: force-delete the surplus, first in byEvictionAndCreationTimestamp order, each
        delete through the controller's client; the pass ends when the last delete is through (the loop waits for
        them: sync.WaitGroup)."""
        self._tick_armed = False
        surplus = len(self._terminated) - self.terminated_threshold
        end = self.env.now
        while surplus > 0 and self._order:
            key = heapq.heappop(self._order)
            if self._terminated.get(key[4]) != key:
                continue  # deleted by someone else since (a TTL, a Job's cleanup)
            del self._terminated[key[4]]
            end = max(end, self.client.send(self.env, "pods", "delete", partial(self._delete, key)))
            surplus -= 1
        self._loop_end = end
        if len(self._order) > 2 * len(self._terminated) + 1024:  # mostly entries of pods already gone
            self._order = sorted(self._terminated.values())

    def _delete(self, key: GCKey) -> None:
        """The force delete (grace period 0) of the pod the pass chose, if it is still that pod."""
        if self.store.current("Pod", key[3], key[2], key[4]) is not None:
            self.store.delete("Pod", key[3], key[2])
            self.collected += 1

"""PodGC (kube-controller-manager pkg/controller/podgc/gc_controller.go, v1.34): pods bound to a Node that does
not exist are orphans. gcOrphaned puts their node in quarantine for 40 s (quarantineTime), then, if the node is
still missing, patches each pod to phase Failed with condition DisruptionTarget (reason DeletionByPodGC) and
force-deletes it. The NodePool controller calls `fail_orphans` when it loses a node; `PodGC` covers pods created
with a `spec.nodeName` that names no Node at all (they skip the scheduler, so nothing else stops them)."""

from __future__ import annotations

from kubetwin.api.conditions import replace_or_append_condition
from kubetwin.controllers.common import controller_of
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

PODGC_QUARANTINE = 40.0
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


class PodGC:
    """gcOrphaned for pods bound to a node name no Node has: quarantine, then fail and delete them."""

    def __init__(self, store: Store, env: Environment) -> None:
        self.store, self.env = store, env
        self._quarantined: dict[str, set[str]] = {}  # node name -> uids of pods waiting out the quarantine
        store.watch("Pod", self._on_pod)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
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

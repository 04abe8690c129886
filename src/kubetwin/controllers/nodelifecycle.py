"""The node lifecycle controller's taints and the taint eviction controller, for Nodes whose Ready condition is not
True (a scenario's own v1 Node written NotReady, a Spot VM shutting down).

- Taints (pkg/controller/nodelifecycle/node_lifecycle_controller.go): Ready False gives
  `node.kubernetes.io/not-ready`, Ready Unknown `node.kubernetes.io/unreachable`, each with effect NoSchedule
  (TaintNodesByCondition: keeps the scheduler away) and NoExecute (taint-based eviction); Ready True removes them.
- Eviction (pkg/controller/tainteviction/taint_eviction.go): a pod on a node with NoExecute taints it does not
  tolerate is deleted at once; one tolerating them for `tolerationSeconds` (the smallest of its matching
  tolerations) is deleted that long after the taint was added, or after the pod was bound if that is later
  (processPodOnNode starts a pod's clock when it first handles the pod); before deleting, the pod gets condition
  DisruptionTarget (DeletionByTaintManager) and the event TaintManagerEviction.
- `default_toleration_seconds` is the DefaultTolerationSeconds admission plugin
  (plugin/pkg/admission/defaulttolerationseconds): every pod tolerates not-ready and unreachable NoExecute for
  300 s unless it says otherwise.

Twin simplifications: the taints are written as soon as the Ready condition changes (the real controller's
monitor period is 5 s and NoExecute tainting is rate-limited per zone, --node-eviction-rate 0.1/s); pods are
deleted without a grace period.
"""

from __future__ import annotations

from functools import partial

from kubetwin.api.podspec import SameInputs
from kubetwin.k8s.conditions import conditions_of, find_condition, replace_or_append_condition
from kubetwin.k8s.taints import tolerates
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

NOT_READY, UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
CONDITION_TAINTS = {"False": NOT_READY, "Unknown": UNREACHABLE}  # Ready status -> taint key
DEFAULT_TOLERATION_SECONDS = 300  # --default-not-ready-toleration-seconds / --default-unreachable-toleration-seconds
EVICTION_REASON, EVICTION_MESSAGE = "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"


def ready_status(node: Obj) -> str | None:
    """The node's Ready condition status ("True", "False", "Unknown"), None when it reports none."""
    c = find_condition(conditions_of(node), "Ready")
    return None if c is None else str(c.get("status"))


def node_is_ready(node: Obj) -> bool:
    """A node without conditions counts as ready (a scenario's bare Node, as KWOK fakes them)."""
    return ready_status(node) in (None, "True")


def default_toleration_seconds(obj: Obj) -> Obj:
    """DefaultTolerationSeconds: add NoExecute tolerations of not-ready and unreachable for 300 s unless the pod
    already tolerates those taints with effect NoExecute (or any effect)."""
    if obj.get("kind") != "Pod":
        return obj
    tols = _with_default_tolerations(obj["spec"].get("tolerations"))
    return {**obj, "spec": {**obj["spec"], "tolerations": tols}} if tols is not None else obj


def _default_tolerations(given: list[Obj] | None) -> list[Obj] | None:
    """The tolerations with DefaultTolerationSeconds' added, None when none is added."""
    tols = list(given or [])
    added = False
    for key in (NOT_READY, UNREACHABLE):
        if any(t.get("key") in (key, None, "") and t.get("effect") in (None, "", "NoExecute") for t in tols):
            continue
        tols.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                     "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
        added = True
    return tols if added else None


# once per tolerations list: the pods of a template share theirs, and then share the list this makes
_with_default_tolerations = SameInputs(_default_tolerations)


class NodeLifecycleController:
    """Taints nodes by their Ready condition and evicts the pods that do not tolerate the NoExecute ones."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self._queued: set[str] = set()
        self._timers: dict[str, float] = {}  # pod uid -> when its eviction is due
        self._since: dict[tuple[str, str], float] = {}  # (node, NoExecute taint key) -> when it was first seen
        self._seen: dict[tuple[str, str], float] = {}  # (pod uid, node) -> when its eviction clock started
        store.watch("Node", self._on_node)
        store.watch("Pod", self._on_pod)

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self._queue(node["metadata"]["name"])

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        node = pod["spec"].get("nodeName")
        if etype == "DELETED" and node:  # its eviction clock goes with it (the map grew by a pod per taint)
            self._seen.pop((pod["metadata"]["uid"], node), None)
        elif node and not (old or {}).get("spec", {}).get("nodeName"):
            self._queue(node)  # a pod newly bound to a node that may carry NoExecute taints

    def _queue(self, name: str) -> None:
        if name not in self._queued:
            self._queued.add(name)
            self.env.after(0, lambda: self._sync(name))

    def _sync(self, name: str) -> None:
        self._queued.discard(name)
        node = self.store.get("Node", "", name)
        if node is None:
            return
        node = self._taint(node)
        no_execute = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]
        for key in [k for k in self._since if k[0] == name and k[1] not in {t["key"] for t in no_execute}]:
            del self._since[key]  # the taint went away: a later one counts from then
        if no_execute:
            self._evict(node, no_execute)

    def _taint(self, node: Obj) -> Obj:
        """Make the node's condition taints match its Ready status."""
        want = CONDITION_TAINTS.get(ready_status(node) or "True")
        taints = list((node.get("spec") or {}).get("taints") or [])
        keep = [t for t in taints if t.get("key") not in (NOT_READY, UNREACHABLE) or t.get("key") == want]
        now = self.store.timestamp(self.env.now)
        for effect in ("NoSchedule", "NoExecute") if want else ():
            if not any(t.get("key") == want and t.get("effect") == effect for t in keep):
                keep.append({"key": want, "effect": effect, **({"timeAdded": now} if effect == "NoExecute" else {})})
        if keep == taints:
            return node
        return self.store.update({**node, "spec": {**(node.get("spec") or {}), "taints": keep}})

    def _evict(self, node: Obj, taints: list[Obj]) -> None:
        name = node["metadata"]["name"]
        for pod in self.store.list("Pod"):
            if pod["spec"].get("nodeName") != name or (pod.get("status") or {}).get("phase") in ("Succeeded",
                                                                                                  "Failed"):
                continue
            tols = pod["spec"].get("tolerations") or []
            if not all(tolerates(tols, t) for t in taints):
                self._delete(pod)
                continue
            due = self._due_time(name, pod["metadata"]["uid"], tols, taints)
            if due == float("inf"):
                continue  # tolerated forever
            uid = pod["metadata"]["uid"]
            if self._timers.get(uid, float("inf")) > due:
                self._timers[uid] = due
                self.env.at(due, partial(self._due, pod))

    def _due(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self._timers.pop(meta["uid"], None)
        cur = self.store.get("Pod", meta.get("namespace") or "", meta["name"])
        if cur is None or cur["metadata"]["uid"] != meta["uid"]:
            return
        name = cur["spec"].get("nodeName") or ""
        node = self.store.get("Node", "", name)
        taints = [t for t in ((node or {}).get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]
        if not taints:
            return
        due = self._due_time(name, meta["uid"], cur["spec"].get("tolerations") or [], taints)
        if due <= self.env.now:
            self._delete(cur)
        elif due != float("inf"):  # the taint went and came back since this timer was set: its clock restarted
            self._timers[meta["uid"]] = due
            self.env.at(due, lambda: self._due(cur))

    def _due_time(self, node: str, uid: str, tolerations: list[Obj], taints: list[Obj]) -> float:
        """When the pod's toleration of the node's NoExecute taints runs out, the soonest wins; inf when tolerated
        forever. processPodOnNode starts a pod's clock when it first handles the pod on the tainted node: for a
        pod already there, when the taint appeared (a taint removed and added again counts anew); for a pod bound
        later, when it was bound."""
        seen = self._seen.setdefault((uid, node), self.env.now)
        return min(max(self._since.setdefault((node, t["key"]), self.env.now), seen) + max(min(
            (float(tl["tolerationSeconds"]) for tl in tolerations if tl.get("tolerationSeconds") is not None
             and tolerates([tl], t)), default=float("inf")), 0.0) for t in taints)

    def _delete(self, pod: Obj) -> None:
        meta = pod["metadata"]
        ns = meta.get("namespace") or "default"
        self.events.event(pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {ns}/{meta['name']}",
                          "taint-eviction-controller")
        status = pod.get("status") or {}
        # addConditionAndDeletePod: a server-side apply of DisruptionTarget, then the delete
        conds = replace_or_append_condition(status.get("conditions"), {
            "type": "DisruptionTarget", "status": "True", "reason": EVICTION_REASON, "message": EVICTION_MESSAGE,
            "lastTransitionTime": self.store.timestamp(self.env.now)})
        self.store.update({**pod, "status": {**status, "conditions": conds}})
        self.store.delete("Pod", ns, meta["name"])

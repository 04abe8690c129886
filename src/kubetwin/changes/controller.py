"""The Change controller: at each Change's `spec.at`, the write it names, made through the store.

Status (the twin's own shape): `phase` Pending -> Applied | Draining -> Drained | Failed, `lastTransitionTime`, and
`message` (the API server's or kubectl's words when it failed, kubectl's warnings of a drain). An Event on the
Change says the same (reason Applied, Drained or Failed).
"""

from __future__ import annotations

from typing import Any

from kubetwin.api import kinds
from kubetwin.api.patch import PatchError, apply_patch
from kubetwin.changes import drain
from kubetwin.controllers.disruption import VIOLATES_BUDGET, evict
from kubetwin.k8s.units import go_duration, parse_duration
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

__all__ = ["SOURCE", "ChangeController"]

SOURCE = "kubetwin-change"  # the Events' source component: the user, or the operator, the Change stands for


class ChangeController:
    """Schedules every Change when it is created and makes its write at its time."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        store.watch("Change", self._on_change)

    def _on_change(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype == "ADDED":
            name, uid = obj["metadata"]["name"], obj["metadata"].get("uid")
            at = max(parse_duration(obj["spec"]["at"]), self.env.now)
            self.env.at(at, lambda: self._apply(name, uid))

    # -- status ---------------------------------------------------------------------------------------
    def _status(self, change: Obj, phase: str, message: str = "") -> Obj:
        status: dict[str, Any] = {"phase": phase, "lastTransitionTime": self.store.timestamp(self.env.now)}
        if message:
            status["message"] = message
        out = self.store.update({**change, "status": status})
        reason = {"Failed": "Failed", "Drained": "Drained", "Draining": "Draining"}.get(phase, "Applied")
        self.events.event(out, "Warning" if phase == "Failed" else "Normal", reason, message or _what(change),
                          SOURCE)
        return out

    # -- the write ------------------------------------------------------------------------------------
    def _apply(self, name: str, uid: str | None) -> None:
        change = self.store.current("Change", "", name, uid)
        if change is None:
            return  # deleted before its time
        spec = change["spec"]
        t = spec["target"]
        ns = t.get("namespace") or ("" if kinds.REGISTRY.is_cluster_scoped(t["kind"]) else "default")
        cur = self.store.get(t["kind"], ns, t["name"])
        if cur is None:
            self._status(change, "Failed", f"{_resource(t)} \"{t['name']}\" not found")
            return
        action = spec.get("action")
        if action is None:
            group = t["apiVersion"].rpartition("/")[0]
            try:
                patched = apply_patch(cur, spec["patch"], spec.get("patchType", "strategic"),
                                      custom=kinds.REGISTRY.is_custom(group, t["kind"]))
            except PatchError as e:
                self._status(change, "Failed", str(e))
                return
            if patched != cur:
                self.store.update(patched)
            self._status(change, "Applied", f"{_resource(t)}/{t['name']} patched" if patched != cur else
                         f"{_resource(t)}/{t['name']} patched (no change)")
        elif action in ("Cordon", "Uncordon"):
            want = action == "Cordon"
            if bool((cur.get("spec") or {}).get("unschedulable")) != want:
                self.store.update(_unschedulable(cur, want))
            self._status(change, "Applied", f"node/{t['name']} {'cordoned' if want else 'uncordoned'}")
        elif action == "Drain":
            self._drain(change, cur)
        elif action == "Delete":
            self.store.delete(t["kind"], ns, t["name"])
            self._status(change, "Applied", f"{_resource(t)} \"{t['name']}\" deleted")
        elif action == "Scale":  # a NodePool's size is its nodeCount per zone (the NodePool controller resizes)
            field = "nodeCount" if t["kind"] == "NodePool" else "replicas"
            self.store.update({**cur, "spec": {**cur.get("spec", {}), field: int(spec["replicas"])}})
            self._status(change, "Applied", f"{_resource(t)}/{t['name']} scaled")
        else:  # Suspend / Resume
            self.store.update({**cur, "spec": {**cur.get("spec", {}), "suspend": action == "Suspend"}})
            self._status(change, "Applied", f"{_resource(t)}/{t['name']} {action.lower()}d")

    def _drain(self, change: Obj, node: Obj) -> None:
        """kubectl drain: cordon, sort the pods (drain.sort_pods), evict, retry what a budget refuses."""
        opts = change["spec"].get("drain") or {}
        name = node["metadata"]["name"]
        if not (node.get("spec") or {}).get("unschedulable"):
            self.store.update(_unschedulable(node, True))
        pods = [p for p in self.store.list("Pod") if (p.get("spec") or {}).get("nodeName") == name]
        sorted_pods = drain.sort_pods(pods, bool(opts.get("ignoreDaemonSets")), bool(opts.get("deleteEmptyDirData")),
                                      bool(opts.get("force")))
        if sorted_pods.errors:  # kubectl stops before evicting anything; the node stays cordoned
            self._status(change, "Failed", f'unable to drain node "{name}" due to error: {sorted_pods.error_text()}')
            return
        change = self._status(change, "Draining", sorted_pods.warning_text())
        timeout = parse_duration(opts.get("timeout", "0s"))
        self._evict(change["metadata"]["name"], change["metadata"].get("uid"), name, sorted_pods.evict,
                    (self.env.now + timeout, timeout) if timeout > 0 else None, sorted_pods.warning_text())

    def _evict(self, change_name: str, uid: str | None, node: str, pods: list[Obj],
               deadline: tuple[float, float] | None, warnings: str) -> None:
        """Evict each pod; those a budget refuses again after drain.RETRY_S, until the deadline (time, timeout)."""
        change = self.store.current("Change", "", change_name, uid)
        if change is None:
            return
        refused: list[Obj] = []
        for pod in pods:
            answer = evict(self.store, pod)
            if answer == VIOLATES_BUDGET:
                refused.append(pod)
            elif answer is not None:
                meta = pod["metadata"]
                self._status(change, "Failed", f'unable to drain node "{node}" due to error: error when evicting '
                             f'pods/"{meta["name"]}" -n "{meta.get("namespace") or "default"}": {answer}')
                return
        if not refused:
            self._status(change, "Drained", f"node/{node} drained" + (f" ({warnings})" if warnings else ""))
            return
        if deadline is not None and self.env.now + drain.RETRY_S > deadline[0]:
            pod = refused[0]["metadata"]
            self._status(change, "Failed", f'unable to drain node "{node}" due to error: error when evicting '
                         f'pods/"{pod["name"]}" -n "{pod.get("namespace") or "default"}": global timeout reached: '
                         f"{go_duration(deadline[1])}")
            return
        self.env.after(drain.RETRY_S, lambda: self._evict(change_name, uid, node, refused, deadline, warnings))


def _unschedulable(node: Obj, value: bool) -> Obj:
    """kubectl cordon / uncordon: spec.unschedulable set, or removed."""
    spec = {k: v for k, v in (node.get("spec") or {}).items() if k != "unschedulable"}
    return {**node, "spec": {**spec, "unschedulable": True} if value else spec}


def _resource(target: dict[str, Any]) -> str:
    """The target as the API server names it in a message: plural.group ("deployments.apps", "nodes")."""
    group = target["apiVersion"].rpartition("/")[0]
    info = kinds.REGISTRY.get(group, target["kind"])
    plural = info.plural if info is not None else target["kind"].lower() + "s"
    return f"{plural}.{group}" if group else plural


def _what(change: Obj) -> str:
    spec = change["spec"]
    t = spec["target"]
    return f"{spec.get('action') or spec.get('patchType', 'strategic') + ' patch'} {t['kind']}/{t['name']}"

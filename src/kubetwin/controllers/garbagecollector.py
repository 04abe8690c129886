"""kube-controller-manager's garbage collector, background propagation: an object whose owners are all gone goes too.

`kubectl delete` and the API's default for most kinds delete an owner at once and leave its dependents to the
garbage collector (pkg/controller/garbagecollector: an object whose every ownerReference names an owner that no
longer exists, by uid, is deleted; one that still has a live owner loses the dangling reference instead), level by
level: a deleted Deployment takes its ReplicaSets, and they their pods. Without it, a Deployment, a Job or a JobSet
deleted by `kubetwin.io/delete-at`, a `Change` or a replayed recording would leave its pods running for ever.

Twin choices: dependents are found through the store's controller index (the ownerReference with controller true,
which every controller the twin runs sets); other ownerReferences are honoured when their object is examined, not
looked up from the owner. Foreground and orphan propagation are not modelled (the TTL-after-finished controller's
foreground deletion deletes the pods itself first).
"""

from __future__ import annotations

from kubetwin.api import kinds
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

__all__ = ["GarbageCollector"]


class GarbageCollector:
    """Watches every kind's deletions; the dependents of a deleted owner are examined at once after."""

    def __init__(self, store: Store, env: Environment) -> None:
        self.store, self.env = store, env
        store.watch_all(self._on_object)

    def _on_object(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            return
        meta = obj["metadata"]
        owner = (obj["kind"], meta.get("namespace") or "", meta["name"], meta.get("uid"))
        if self.store.dependents(owner[1], owner[0], owner[2]):  # most deletions (pods, Events) own nothing
            self.env.after(0, lambda: self._collect(*owner))

    def _collect(self, kind: str, ns: str, name: str, uid: str | None) -> None:
        for dep in self.store.dependents(ns, kind, name):
            refs = dep["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == uid for r in refs):
                continue  # owned by a new object of the same name
            live = [r for r in refs if self._alive(r, ns)]
            meta = dep["metadata"]
            if not live:
                self.store.delete(dep["kind"], meta.get("namespace") or "", meta["name"])
            elif len(live) != len(refs):  # a live owner keeps it: the dangling reference goes
                self.store.update({**dep, "metadata": {**meta, "ownerReferences": live}})

    def _alive(self, ref: dict, ns: str) -> bool:
        owner_ns = "" if kinds.REGISTRY.is_cluster_scoped(str(ref.get("kind"))) else ns
        cur = self.store.get(str(ref.get("kind")), owner_ns, str(ref.get("name")))
        return cur is not None and cur["metadata"].get("uid") == ref.get("uid")

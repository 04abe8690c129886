"""Deployment and ReplicaSet controllers: keep spec.replicas pods of the current template running.

The ReplicaSet controller's writes (pod creates and deletes, its status) go through its own client
(``replicaset-controller``, kube-controller-manager's 20 qps / 30 burst by default; sim/apiclient.py), a ReplicaSet
with writes in flight synced again once they are through (controllers/common.py KeyedWrites); the Deployment
controller's are not paced (a twin simplification: a few writes per rollout)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable
from functools import partial

from kubetwin.api import twin
from kubetwin.controllers.common import KeyedWrites, active_pods_rank, pod_from_template, ready_since
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.k8s.ownerrefs import controller_of, owner_ref
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store


def template_hash(template: dict) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _without_hash(template: dict) -> dict:
    meta = template.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != "pod-template-hash"}
    return {**template, "metadata": {**meta, "labels": labels}}


def find_new_replicaset(d: Obj, sets: list[Obj]) -> Obj | None:
    """The Deployment's current ReplicaSet: the oldest one whose pod template equals the Deployment's but for the
    pod-template-hash label, as the deployment controller's FindNewReplicaSet / EqualIgnoreHash
    (pkg/controller/deployment/util/deployment_util.go) finds it, whatever its name's hash (an imported cluster's
    ReplicaSets are named by Kubernetes' FNV hash, the twin's by its own)."""
    want = _without_hash(d["spec"]["template"])
    same = [rs for rs in sets if _without_hash(rs["spec"]["template"]) == want]
    return min(same, key=lambda rs: (rs["metadata"].get("creationTimestamp") or "", rs["metadata"]["name"]),
               default=None)


class ReplicaSetController:
    def __init__(self, store: Store, env: Environment, events: EventRecorder, names: NameGenerator,
                 client: ApiClient | None = None) -> None:
        self.store, self.env, self.events, self.names = store, env, events, names
        self._dirty: set[tuple[str, str, str]] = set()
        self.client = client if client is not None else ApiClient(
            "replicaset-controller", twin.CONTROLLER_MANAGER_QPS, twin.CONTROLLER_MANAGER_BURST)
        self._writes = KeyedWrites(env, self.client, self._requeue)
        store.watch("Deployment", partial(self._on_owner, "Deployment"))
        store.watch("ReplicaSet", partial(self._on_owner, "ReplicaSet"))
        store.watch("Pod", self._on_pod, owner_kind="ReplicaSet")

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)
        if owner:
            if not self._dirty:
                self.env.after(0, self._sync_all)
            self._dirty.add(("ReplicaSet", pod["metadata"].get("namespace") or "default", owner[1]))

    def _on_owner(self, kind: str, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self._queue(kind, obj)

    def _queue(self, kind: str, obj: Obj) -> None:
        self._requeue((kind, obj["metadata"].get("namespace") or "default", obj["metadata"]["name"]))

    def _requeue(self, key: Hashable) -> None:
        if not self._dirty:
            self.env.after(0, self._sync_all)
        self._dirty.add(key)  # type: ignore[arg-type]

    def _sync_all(self) -> None:
        dirty, self._dirty = sorted(self._dirty), set()
        for kind, ns, name in dirty:
            if self._writes.busy((kind, ns, name)):  # its last sync's writes are in flight
                continue
            obj = self.store.get(kind, ns, name)
            if obj is not None:
                (self.sync_deployment if kind == "Deployment" else self.sync_replicaset)(obj)

    def sync_deployment(self, d: Obj) -> None:
        ns, name = d["metadata"].get("namespace") or "default", d["metadata"]["name"]
        h = template_hash(d["spec"]["template"])
        owned = self.store.owned("ReplicaSet", ns, "Deployment", name)
        found = find_new_replicaset(d, owned)  # an imported cluster's ReplicaSet, named by Kubernetes' own hash
        rs_name = found["metadata"]["name"] if found is not None else f"{name}-{h}"
        replicas = d["spec"].get("replicas", 1)
        for rs in owned:
            if rs["metadata"]["name"] != rs_name and rs["spec"].get("replicas"):
                self.store.update({**rs, "spec": {**rs["spec"], "replicas": 0}})
                self.events.event(d, "Normal", "ScalingReplicaSet", f"Scaled down replica set "
                                  f"{rs['metadata']['name']} from {rs['spec']['replicas']} to 0",
                                  "deployment-controller")
        cur = self.store.get("ReplicaSet", ns, rs_name)
        if cur is None:
            tmpl = d["spec"]["template"]
            tmeta = tmpl.get("metadata") or {}
            labels = {**(tmeta.get("labels") or {}), "pod-template-hash": h}
            self.store.create({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
                "name": rs_name, "namespace": ns, "labels": labels, "ownerReferences": [owner_ref(d)]},
                "spec": {"replicas": replicas, "selector": d["spec"].get("selector"),
                         "template": {**tmpl, "metadata": {**tmeta, "labels": labels}}}})
            self.events.event(d, "Normal", "ScalingReplicaSet", f"Scaled up replica set {rs_name} from 0 to "
                              f"{replicas}", "deployment-controller")
        elif cur["spec"].get("replicas") != replicas:
            direction = "up" if replicas > cur["spec"]["replicas"] else "down"
            self.events.event(d, "Normal", "ScalingReplicaSet", f"Scaled {direction} replica set {rs_name} from "
                              f"{cur['spec']['replicas']} to {replicas}", "deployment-controller")
            self.store.update({**cur, "spec": {**cur["spec"], "replicas": replicas}})

    def sync_replicaset(self, rs: Obj) -> None:
        ns, name = rs["metadata"].get("namespace") or "default", rs["metadata"]["name"]
        pods = [p for p in self.store.owned("Pod", ns, "ReplicaSet", name)
                if p["status"].get("phase") in ("Pending", "Running")]
        want = rs["spec"].get("replicas", 1)
        key = ("ReplicaSet", ns, name)
        for _ in range(want - len(pods)):
            self._writes.send(key, "pods", "create", lambda: self._create(rs, ns, name))
        # ActivePods' order matters only for the pods deleted: ranked only when there are some (a sync of 5,000 pods
        # ranked them all, 0.3 s of a 10,000-pod run; issue 32).
        excess = sorted(pods, key=active_pods_rank)[:len(pods) - want] if len(pods) > want else []
        for p in excess:
            self._writes.send(key, "pods", "delete", partial(self._delete, rs, p))
        ready = sum(1 for p in pods if p["status"].get("phase") == "Running" and ready_since(p) is not None)
        status = {"replicas": want,  # the sync above created or deleted pods up to spec.replicas
                  "readyReplicas": ready, "availableReplicas": ready, "observedGeneration": 1}
        if status != rs.get("status"):
            self._writes.send(key, "replicasets/status", "update", lambda: self._write_status(rs, status))
        owner = controller_of(rs)
        if owner and owner[0] == "Deployment":
            self._deployment_status(ns, owner[1])

    def _create(self, rs: Obj, ns: str, name: str) -> None:
        """One pod create; its name generated when it reaches the API server (generateName)."""
        if self._current(rs) is None:
            return
        pod_name = self.names.generate(self.store, "Pod", ns, name)
        self.store.create(pod_from_template(rs["spec"]["template"], pod_name, ns, rs, {}))
        self.events.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {pod_name}", "replicaset-controller")

    def _delete(self, rs: Obj, pod: Obj) -> None:
        meta = pod["metadata"]
        ns = meta.get("namespace") or "default"
        if self.store.current("Pod", ns, meta["name"], meta.get("uid")) is None:
            return
        self.store.delete("Pod", ns, meta["name"])
        self.events.event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}", "replicaset-controller")

    def _write_status(self, rs: Obj, status: dict) -> None:
        cur = self._current(rs)
        if cur is not None and cur.get("status") != status:
            self.store.update({**cur, "status": status})

    def _current(self, rs: Obj) -> Obj | None:
        """The ReplicaSet as stored now, None when it is gone (or is another of the same name)."""
        meta = rs["metadata"]
        return self.store.current("ReplicaSet", meta.get("namespace") or "default", meta["name"], meta.get("uid"))

    def _deployment_status(self, ns: str, name: str) -> None:
        """Roll the ReplicaSets' counts up into the Deployment's status, as the deployment controller does."""
        d = self.store.get("Deployment", ns, name)
        if d is None:
            return
        sets = self.store.owned("ReplicaSet", ns, "Deployment", name)
        found = find_new_replicaset(d, sets)
        current = found["metadata"]["name"] if found is not None else f"{name}-{template_hash(d['spec']['template'])}"
        total = {k: sum((rs.get("status") or {}).get(k, 0) for rs in sets)
                 for k in ("replicas", "readyReplicas", "availableReplicas")}
        updated = sum((rs.get("status") or {}).get("replicas", 0) for rs in sets if rs["metadata"]["name"] == current)
        status = {**total, "updatedReplicas": updated, "observedGeneration": d["metadata"].get("generation", 1)}
        if status != d.get("status"):
            self.store.update({**d, "status": status})

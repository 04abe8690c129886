"""ProvisioningRequest (autoscaling.x-k8s.io/v1) as the cluster autoscaler and GKE's Dynamic Workload Scheduler
handle it (shared/reference/controllers-kueue-dra-deviceplugin-tpu-jobset.md §6; kubernetes/autoscaler
cluster-autoscaler/provisioningrequest/).

`spec.podSets[]` name PodTemplates (`podTemplateRef.name`, `count`); the cluster autoscaler handles a request in its
loop (every 10 s, autoscaler/cluster_autoscaler.py) by class:
- `check-capacity.autoscaling.x-k8s.io`: do the pods fit the current nodes (what other requests booked counted)?
  Provisioned=True/CapacityIsFound "Capacity is found in the cluster", else Provisioned=False/CapacityIsNotFound
  "Capacity is not found, CA will try to find it later." and retried every loop; no scale-up (checkcapacity/).
- `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: pods that fit the current nodes need nothing
  (CapacityIsFound); otherwise one node group is resized for all of them at once or not at all
  (Provisioned=True/CapacityIsProvisioned, or False/CapacityIsNotFound and the group's backoff); the
  `ValidUntilSeconds` parameter ends the retries with Failed=True/Expired "ProvisioningRequest is expired"
  (besteffortatomic/provisioning_class.go, conditions/conditions.go).
- `queued-provisioning.gke.io` (GKE DWS flex-start with queued provisioning; not in OSS CA): only node pools labelled
  `cloud.google.com/gke-queued: "true"` serve it; the request waits (Provisioned=False) until Compute Engine can give
  every node at once (autoscaler/capacity.py), then all are created together, and they are deleted
  `maxRunDurationSeconds` (parameter, at most 7 days, the default) after Provisioned=True. Condition wording for
  this class is the twin's: GKE's own texts were not available to check.
Accepted=True/Accepted "ProvisioningRequest is accepted by ClusterAutoscaler" comes first. A provisioned request books
its capacity for 10 minutes (its nodes are not scaled down, check-capacity counts its pods), then
BookingExpired=True/CapacityReservationTimeExpired "Capacity reservation time is expired". Pods use the capacity with
the annotation `autoscaling.x-k8s.io/consume-provisioning-request: <name>`; the autoscaler's ordinary scale-up
leaves such pods alone. A missing PodTemplate gives Failed=True (the twin's reason FailedToCreatePods, CA's constant
for a request whose pods cannot be built). Unknown classes are left alone, as CA leaves them.
"""

from __future__ import annotations

from kubetwin.api.twin import FLEX_START_MAX_RUN
from kubetwin.autoscaler.capacity import shape_of
from kubetwin.autoscaler.cluster_autoscaler import (
    QUEUED_LABEL,
    SOURCE,
    ClusterAutoscaler,
    NodeGroup,
    Option,
    consumes,
    place,
    pod_info,
)
from kubetwin.autoscaler.simulation import Snapshot, template_copy
from kubetwin.controllers import admission
from kubetwin.k8s.conditions import conditions_of, find_condition, replace_or_append_condition
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

CHECK = "check-capacity.autoscaling.x-k8s.io"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
QUEUED = "queued-provisioning.gke.io"
CLASSES = (CHECK, ATOMIC, QUEUED)
BOOKING = 600.0  # KEP-1136 / CA: capacity stays booked 10 minutes after Provisioned=True
MAX_RUN = FLEX_START_MAX_RUN  # GKE: maxRunDurationSeconds at most 7 days (DWS flex-start's limit)
ACCEPTED_MSG = "ProvisioningRequest is accepted by ClusterAutoscaler"
NOT_FOUND_MSG = "Capacity is not found, CA will try to find it later."


def _key(pr: Obj) -> str:
    return f"{pr['metadata'].get('namespace') or 'default'}/{pr['metadata']['name']}"


class ProvisioningRequestController:
    def __init__(self, store: Store, env: Environment, events: EventRecorder, ca: ClusterAutoscaler) -> None:
        self.store, self.env, self.events, self.ca = store, env, events, ca
        ca.provreq = self
        self.provisioned_at: dict[str, float] = {}
        self.nodes_of: dict[str, list[str]] = {}
        self.done: set[str] = set()
        self.created: dict[str, float] = {}
        store.watch("ProvisioningRequest", self._on_pr)

    def _on_pr(self, etype: str, pr: Obj, old: Obj | None) -> None:
        if etype == "ADDED":
            self.created[_key(pr)] = self.env.now
            self.env.after(0, self.ca.activate)
        elif etype == "DELETED":
            key = _key(pr)
            self.ca.protected.difference_update(self.nodes_of.get(key, []))

    # -- conditions -------------------------------------------------------------------------------------
    def _cond(self, pr: Obj, ctype: str) -> dict | None:
        return find_condition(conditions_of(pr), ctype)

    def _set(self, pr: Obj, ctype: str, status: str, reason: str, message: str) -> Obj:
        """conditions.AddOrUpdateCondition: replace the condition of that type in place, or append it."""
        cur = self._cond(pr, ctype)
        if cur and (cur["status"], cur["reason"], cur["message"]) == (status, reason, message):
            return pr
        new = {"type": ctype, "status": status, "reason": reason, "message": message,
               "observedGeneration": pr["metadata"].get("generation", 1),
               "lastTransitionTime": self.store.timestamp(self.env.now)}
        conds = replace_or_append_condition((pr.get("status") or {}).get("conditions"), new)
        return self.store.update({**pr, "status": {**(pr.get("status") or {}), "conditions": conds}})

    def _true(self, pr: Obj, ctype: str) -> bool:
        c = self._cond(pr, ctype)
        return bool(c and c["status"] == "True")

    # -- pods -------------------------------------------------------------------------------------------
    def pods(self, pr: Obj) -> list[Obj] | str:
        """The request's pods, built from its PodTemplates (or what is missing)."""
        ns = pr["metadata"].get("namespace") or "default"
        out = []
        for i, ps in enumerate(pr["spec"].get("podSets") or []):
            name = ps["podTemplateRef"]["name"]
            pt = self.store.get("PodTemplate", ns, name)
            if pt is None:
                return f'PodTemplate "{name}" not found in namespace "{ns}"'
            tmpl = pt.get("template") or {}
            for j in range(int(ps.get("count", 1))):
                pod = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"{pr['metadata']['name']}-{i}-{j}", "namespace": ns,
                                    **{k: v for k, v in (tmpl.get("metadata") or {}).items() if k != "name"}},
                       "spec": dict(tmpl.get("spec") or {})}
                out.append(admission.extended_resource_toleration(pod))
        return out

    def _booked_pods(self, skip: str) -> list[Obj]:
        """Pods of other requests still booking capacity, less those already created by their consumers."""
        consumers: dict[str, int] = {}
        for p in self.store.list("Pod"):
            name = consumes(p)
            if name:
                k = f"{p['metadata'].get('namespace')}/{name}"
                consumers[k] = consumers.get(k, 0) + 1
        out: list[Obj] = []
        for pr in self.store.list("ProvisioningRequest"):
            key = _key(pr)
            if key == skip or key not in self.provisioned_at or self._true(pr, "BookingExpired"):
                continue
            pods = self.pods(pr)
            if isinstance(pods, list):
                out += pods[consumers.get(key, 0):]
        return out

    def fit_existing(self, pr: Obj, pods: list[Obj]) -> tuple[list[Obj], set[str]]:
        """Pods that do not fit the current nodes (after other bookings), and the nodes the others landed on."""
        infos = self.ca.node_infos()
        snapshot = Snapshot(infos, self.store, self.ca.features)
        for p in self._booked_pods(_key(pr)):
            place(pod_info(p), infos, snapshot)
        left, used = [], set()
        for p in pods:
            ni = place(pod_info(p), infos, snapshot)
            if ni is None:
                left.append(p)
            else:
                used.add(ni.name)
        return left, used

    def _options(self, pods: list[Obj], queued: bool) -> list[Option]:
        options = []
        snapshot = Snapshot(self.ca.node_infos(), self.store, self.ca.features)  # existing pods' terms count too
        cluster_room = self.ca.cluster_room()  # all or nothing within --max-nodes-total (cluster_autoscaler.py)
        for key in sorted(self.ca.groups):
            g = self.ca.groups[key]
            pool = self.store.get("NodePool", "", g.pool)
            if pool is None or ((pool["spec"].get("labels") or {}).get(QUEUED_LABEL) == "true") != queued:
                continue
            tmpl = self.ca.template(g)
            if tmpl is None:
                continue
            bins: list[NodeInfo] = []
            mark = snapshot.mark()  # each group's estimate is undone after it
            fits = True
            for p in pods:
                pi = pod_info(p)
                if place(pi, bins, snapshot) is None:
                    ni = template_copy(tmpl, len(bins))
                    if place(pi, [ni], snapshot) is None:
                        fits = False
                        break
                    bins.append(ni)
            snapshot.revert(mark, [b.name for b in bins])
            if fits:
                n = g.hosts if g.hosts else len(bins)
                room = (g.hosts if g.target == 0 else 0) if g.hosts else g.max - g.target
                if n <= min(room, cluster_room) and (not g.hosts or len(bins) <= g.hosts):
                    options.append(Option(g, n, pods, tmpl))
        return options

    # -- the autoscaler's loop calls this ---------------------------------------------------------------
    def reconcile(self) -> None:
        now = self.env.now
        for pr in sorted(self.store.list("ProvisioningRequest"), key=_key):
            key, cls = _key(pr), pr["spec"].get("provisioningClassName")
            if cls not in CLASSES or key in self.done:
                continue
            if self._true(pr, "Failed"):
                continue
            if not self._cond(pr, "Accepted"):
                pr = self._set(pr, "Accepted", "True", "Accepted", ACCEPTED_MSG)
            if key in self.provisioned_at:
                self._after_provisioned(pr, key, cls, now)
                continue
            pods = self.pods(pr)
            if isinstance(pods, str):
                self._set(pr, "Failed", "True", "FailedToCreatePods", f"failed to create pods: {pods}")
                continue
            params = pr["spec"].get("parameters") or {}
            if cls == QUEUED:
                self._queued(pr, key, pods, params, now)
                continue
            left, used = self.fit_existing(pr, pods)
            if not left:
                self._provisioned(pr, key, "CapacityIsFound", "Capacity is found in the cluster", sorted(used))
                continue
            if cls == CHECK:
                self._set(pr, "Provisioned", "False", "CapacityIsNotFound", NOT_FOUND_MSG)
                continue
            valid = params.get("ValidUntilSeconds")
            if valid is not None and now - self.created.get(key, 0.0) >= float(valid):
                self._set(pr, "Failed", "True", "Expired", "ProvisioningRequest is expired")
                continue
            self._atomic(pr, key, left, used)

    def _atomic(self, pr: Obj, key: str, pods: list[Obj], used: set[str]) -> None:
        options = [o for o in self._options(pods, queued=False) if self.env.now >= o.group.backoff_until]
        if options:
            o = self.ca.expand(options)
            names = self._grow(o.group, o.nodes, key)
            if names is not None:
                self._provisioned(pr, key, "CapacityIsProvisioned", "Capacity is found in the cluster",
                                  sorted(used) + names)
                return
        self._set(pr, "Provisioned", "False", "CapacityIsNotFound", NOT_FOUND_MSG)

    def _grow(self, g: NodeGroup, n: int, key: str, queued: bool = False) -> list[str] | None:
        before = len(g.added)
        g.target += n
        granted, refusal = self.ca.grow(g, n, atomic=True)
        # a scale-up like the autoscaler's own (CA's ScaleUp for the request's pods), marked with its request
        self.ca.record_scale_up(g, g.target - n, n, granted, refusal, provisioning_request=key)
        if not granted:
            if refusal is not None and not queued:
                self.ca.fail(g, refusal, n, [])
            return None
        pool = self.store.get("NodePool", "", g.pool)
        if pool is not None:  # CA's ScaledUpGroup text; CA writes it on its status ConfigMap, the twin on the pool
            self.events.event(pool, "Normal", "ScaledUpGroup", f"Scale-up: setting group {g.url} size to "
                              f"{g.target} instead of {g.target - n} (max: {g.hosts or g.max})", SOURCE)
        return g.added[before:]

    def _queued(self, pr: Obj, key: str, pods: list[Obj], params: dict, now: float) -> None:
        try:
            max_run = int(params.get("maxRunDurationSeconds", MAX_RUN))
        except ValueError:
            max_run = -1
        if not 0 < max_run <= MAX_RUN:
            self._set(pr, "Failed", "True", "InvalidParameter", f"maxRunDurationSeconds must be between 1 and "
                      f"{MAX_RUN} (7 days), got {params.get('maxRunDurationSeconds')!r}")
            return
        options = self._options(pods, queued=True)
        if not options:
            self._set(pr, "Provisioned", "False", "NoMatchingNodePool", "No node pool with queued provisioning "
                      f"enabled ({QUEUED_LABEL}=true) can host the request's pods within its max size")
            return
        o = self.ca.expand(options)
        pool = self.store.get("NodePool", "", o.group.pool)
        room, refusal = self.ca.capacity.headroom(shape_of(pool), o.group.zone) if pool else (0, None)
        names = self._grow(o.group, o.nodes, key, queued=True) if room >= o.nodes else None
        if names is None:
            why = f"{refusal.explanation}: {refusal.gce}" if refusal else "capacity"
            self._set(pr, "Provisioned", "False", "ResourcePoolExhausted" if refusal and refusal.kind == "stockout"
                      else "QuotaExceeded" if refusal else "CapacityIsNotFound",
                      f"Waiting for {o.nodes} {o.group.pool} node(s) in {o.group.zone} all at once; last attempt: "
                      f"{why}")
            return
        self._provisioned(pr, key, "Provisioned", f"Provisioning Request was successfully provisioned: {len(names)} "
                          f"node(s) in {o.group.zone}, deleted after {max_run}s", names)
        self.env.after(max_run, lambda: self._expire(key, o.group))

    def _provisioned(self, pr: Obj, key: str, reason: str, message: str, nodes: list[str]) -> None:
        self._set(pr, "Provisioned", "True", reason, message)
        self.provisioned_at[key] = self.env.now
        self.nodes_of[key] = nodes
        self.ca.protected.update(nodes)

    def _after_provisioned(self, pr: Obj, key: str, cls: str, now: float) -> None:
        if now - self.provisioned_at[key] >= BOOKING and not self._true(pr, "BookingExpired"):
            self._set(pr, "BookingExpired", "True", "CapacityReservationTimeExpired",
                      "Capacity reservation time is expired")
            self.ca.protected.difference_update(self.nodes_of.get(key, []))
            if cls != QUEUED:
                self.done.add(key)

    def _expire(self, key: str, g: NodeGroup) -> None:
        """GKE deletes a queued-provisioning request's nodes at maxRunDurationSeconds."""
        self.done.add(key)
        nodes = [n for n in self.nodes_of.get(key, []) if self.store.get("Node", "", n) is not None]
        self.ca.protected.difference_update(self.nodes_of.get(key, []))
        ns, name = key.split("/", 1)
        pr = self.store.get("ProvisioningRequest", ns, name)
        if pr is not None and nodes:
            self.events.event(pr, "Normal", "MaxRunDurationReached", f"maxRunDurationSeconds reached: deleting "
                              f"{len(nodes)} node(s) of {g.pool}", "gke-queued-provisioning")
        for n in nodes:
            self.store.delete("Node", "", n)
        g.target = max(g.min, g.target - len(nodes))

"""GKE node auto-provisioning (node pool auto-creation): the cluster autoscaler creates a node pool for pending pods
that no existing pool can take.

What it follows (https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning and
.../how-to/node-auto-provisioning): with `Scenario.spec.clusterAutoscaling.enableNodeAutoprovisioning` (GKE's
Cluster.autoscaling) a pending pod's requests and node selectors say what pool to create: a GPU type
(`cloud.google.com/gke-accelerator`) and the GPUs it requests pick the accelerator machine, a TPU type and
topology (`cloud.google.com/gke-tpu-accelerator`, `cloud.google.com/gke-tpu-topology`) a TPU slice pool,
`cloud.google.com/gke-spot: "true"` Spot VMs, `cloud.google.com/machine-family` / `node.kubernetes.io/instance-type`
the machine; other selected labels become node labels, and a selector the pod also tolerates becomes a NoSchedule
taint (GKE's workload separation). A ComputeClass with `nodePoolAutoCreation.enabled` creates pools for the pods
that select it, whether or not the cluster enables node auto-provisioning, from the first priority rule a new pool
can satisfy (the pool carries the class's label and taint). The cluster-wide `resourceLimits` (cpu cores, memory,
per accelerator type) bound every scale-up while they are set, auto-created pools or not; a scale-up past one leaves
the pod Pending with `NotTriggerScaleUp` "pod didn't trigger scale-up: 1 max cluster cpu limit reached" (upstream
CA's core/scaleup/resource manager: MaxResourceLimitReached, "max cluster %s limit reached"). Auto-created pools
have no minimum and are deleted once empty.

The same estimator as an existing pool's scale-up decides whether a candidate pool helps (ClusterAutoscaler.
estimate on the NodePool controller's template of the pool that would be created): no second scheduler.

Twin assumptions (labelled; GKE publishes neither figure): creating the pool takes `POOL_CREATION` (60 s) before
its first VM boots (then the pool's usual boot delay); an empty auto-created pool is deleted after
`EMPTY_POOL_TTL` (10 min) empty. When no memory unit is given, `memory` limits are GiB (gcloud says gigabytes).
Candidates are tried only for pods no existing pool helps (upstream also weighs them against existing groups
with the expander); among machines, the cheapest that takes the pod comes first; with no machine selector, GKE's
default E2 series (https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning, "default
machine series"). One candidate pool is created per autoscaler loop, in the first autoprovisioning location.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from kubetwin import catalog
from kubetwin.api.podresources import pod_requests
from kubetwin.api.twin import DEFAULT_ZONE, MAX_NODES_PER_POOL_ZONE, ClusterAutoscaling
from kubetwin.autoscaler.computeclass import class_of, priorities, rule_matches
from kubetwin.devices import tpu
from kubetwin.k8s.names import (
    COMPUTE_CLASS,
    GKE_ACCELERATOR,
    GKE_MACHINE_FAMILY,
    GKE_SPOT,
    GKE_TPU_ACCELERATOR,
    GKE_TPU_TOPOLOGY,
    GPU,
    INSTANCE_TYPE,
)
from kubetwin.k8s.units import parse_quantity
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.store.store import Obj

if TYPE_CHECKING:
    from kubetwin.autoscaler.cluster_autoscaler import ClusterAutoscaler

AUTOPROVISIONED = "kubetwin.io/autoprovisioned"  # GKE's NodePool.autoscaling.autoprovisioned, as an annotation
POOL_CREATION = 60.0  # twin assumption: seconds to create the pool before its first VM boots
EMPTY_POOL_TTL = 600.0  # twin assumption: an auto-created pool empty this long is deleted
DEFAULT_FAMILY = "e2"
GIB = 1024**3
# selectors GKE answers with the machine itself (not copied to the pool's labels)
_MACHINE_KEYS = {GKE_ACCELERATOR, GKE_SPOT, GKE_TPU_ACCELERATOR, GKE_TPU_TOPOLOGY, GKE_MACHINE_FAMILY, INSTANCE_TYPE,
                 COMPUTE_CLASS, "kubernetes.io/os", "kubernetes.io/arch", "topology.kubernetes.io/zone",
                 "topology.kubernetes.io/region", "cloud.google.com/gke-provisioning"}


def limit_reason(resources: list[str]) -> str:
    """Upstream CA's NotTriggerScaleUp reason for a scale-up past the cluster's resource limits."""
    return f"max cluster {', '.join(resources)} limit reached"


def node_usage(node: Obj) -> dict[str, float]:
    """What a node counts against the cluster's resource limits: cores, memory (GiB) and its accelerators."""
    cap = node["status"].get("capacity") or {}
    labels = node["metadata"].get("labels") or {}
    out = {"cpu": float(parse_quantity(cap.get("cpu", "0"))),
           "memory": float(parse_quantity(cap.get("memory", "0"))) / GIB}
    if labels.get(GKE_ACCELERATOR):  # the VM's physical GPUs, advertised yet or not (driver still installing)
        try:
            gpus = catalog.machine_type(str(labels.get(INSTANCE_TYPE))).gpu_count
        except catalog.CatalogError:
            gpus = 0
        out[labels[GKE_ACCELERATOR]] = out.get(labels[GKE_ACCELERATOR], 0) + (gpus or int(cap.get(GPU, 0)))
    if labels.get(GKE_TPU_ACCELERATOR) and cap.get(tpu.RESOURCE):
        out[labels[GKE_TPU_ACCELERATOR]] = out.get(labels[GKE_TPU_ACCELERATOR], 0) + int(cap[tpu.RESOURCE])
    return out


def _tolerated(pod: Obj, key: str, value: str) -> dict | None:
    for t in pod["spec"].get("tolerations") or []:
        if t.get("key") == key and (t.get("operator") == "Exists" or t.get("value") == value):
            return t
    return None


class NodeAutoprovisioning:
    """The autoscaler's node pool creation and empty pool deletion (module doc)."""

    def __init__(self, ca: ClusterAutoscaler, spec: ClusterAutoscaling) -> None:
        self.ca, self.spec = ca, spec
        self.enabled = spec.enableNodeAutoprovisioning
        self.limits = {r.resourceType: r.maximum for r in spec.resourceLimits}
        self.zone = (spec.autoprovisioningLocations or [DEFAULT_ZONE])[0]
        self.created: list[dict] = []
        self.deleted: list[dict] = []
        self._empty_since: dict[str, float] = {}

    def __bool__(self) -> bool:
        return bool(self.enabled or self.created or self.limits)

    # -- what pool a pod asks for ---------------------------------------------------------------------------------
    def candidates(self, pod: Obj) -> list[Obj]:
        """The pools that could be created for the pod, in preference order (not stored)."""
        sel = pod["spec"].get("nodeSelector") or {}
        klass = class_of(sel)
        if klass is not None:
            cc = self.ca.classes.classes().get(klass)
            if cc is None or not ((cc.get("spec") or {}).get("nodePoolAutoCreation") or {}).get("enabled"):
                return []
            return self._class_candidates(pod, klass, cc)
        if not self.enabled:
            return []
        req = pod_requests(pod)
        spot = sel.get(GKE_SPOT) == "true"
        topo = sel.get(GKE_TPU_TOPOLOGY)
        if sel.get(GKE_TPU_ACCELERATOR):
            chips = req.get(tpu.RESOURCE, 0)
            mts = [mt for mt in catalog.tpu_machine_types() if mt.tpu
                   and catalog.tpu_type(mt.tpu).gke_accelerator == sel[GKE_TPU_ACCELERATOR]
                   and (not chips or mt.tpu_chips == chips)]
        elif sel.get(GKE_ACCELERATOR) or req.get(GPU):
            if not sel.get(GKE_ACCELERATOR):
                return []  # GKE needs the GPU type in the pod's node selector to auto-provision GPUs
            mts = [mt for mt in catalog.machine_types() if mt.gpu == sel[GKE_ACCELERATOR]
                   and mt.gpu_count >= req.get(GPU, 0) and _auto(mt)]
        else:
            fam = sel.get(GKE_MACHINE_FAMILY, DEFAULT_FAMILY if INSTANCE_TYPE not in sel else None)
            mts = [mt for mt in catalog.machine_types() if not mt.gpu and not mt.tpu
                   and (fam is None or mt.family == fam)]
        mts = [mt for mt in mts if INSTANCE_TYPE not in sel or mt.name == sel[INSTANCE_TYPE]]
        labels = {k: v for k, v in sel.items() if k not in _MACHINE_KEYS}
        taints = []
        for k, v in sorted(sel.items()):
            tol = _tolerated(pod, k, v)
            if tol is not None and k not in (GKE_ACCELERATOR, GKE_TPU_ACCELERATOR):
                taints.append({"key": k, "value": v, "effect": tol.get("effect") or "NoSchedule"})
        return [self._pool(mt, spot, labels, taints, topo) for mt in _by_price(mts, spot)]

    def _class_candidates(self, pod: Obj, klass: str, cc: Obj) -> list[Obj]:
        """A ComputeClass's rules in priority order, each as the pools it could create (cheapest machine first)."""
        req = pod_requests(pod)
        out = []
        for rule in priorities(cc):
            if "nodepools" in rule or "reservations" in rule or "maxRunDurationSeconds" in rule:
                continue  # rules naming existing pools, or capacity a new pool cannot be given here
            spot = bool(rule.get("spot"))
            gpu, tpu_rule = rule.get("gpu") or {}, rule.get("tpu") or {}
            if "machineType" in rule:
                mts = [catalog.machine_type(rule["machineType"])]
            elif tpu_rule:
                mts = [mt for mt in catalog.tpu_machine_types() if mt.tpu
                       and catalog.tpu_type(mt.tpu).gke_accelerator == tpu_rule.get("type")]
            elif gpu:
                mts = [mt for mt in catalog.machine_types() if mt.gpu == gpu.get("type")
                       and mt.gpu_count >= req.get(GPU, 0) and _auto(mt)]
            else:
                fam = rule.get("machineFamily", DEFAULT_FAMILY)
                mts = [mt for mt in catalog.machine_types() if mt.family == fam and _auto(mt)]
            labels = {COMPUTE_CLASS: klass, **(rule.get("nodeLabels") or {})}
            taints = [{"key": COMPUTE_CLASS, "value": klass, "effect": "NoSchedule"},
                      *[dict(t) for t in rule.get("taints") or []]]
            zones = (rule.get("location") or {}).get("zones") or []
            for mt in _by_price(mts, spot):
                pool = self._pool(mt, spot, labels, taints, tpu_rule.get("topology"), zones[0] if zones else None,
                                  flex=bool((rule.get("flexStart") or {}).get("enabled")))
                if rule_matches(rule, pool):
                    out.append(pool)
        return out

    def _pool(self, mt: catalog.MachineType, spot: bool, labels: dict, taints: list[dict], topology: str | None,
              zone: str | None = None, flex: bool = False) -> Obj:
        spec: dict = {"machineType": mt.name, "autoscaling": {"minNodeCount": 0,
                                                              "maxNodeCount": MAX_NODES_PER_POOL_ZONE},
                      "zones": [zone or self.zone]}
        if spot:
            spec["spot"] = True
        if flex:
            spec["flexStart"] = True
        if labels:
            spec["labels"] = dict(labels)
        if taints:
            spec["taints"] = taints
        if topology and mt.tpu:
            spec["placementPolicy"] = {"tpuTopology": topology}
        key = repr(sorted((k, repr(v)) for k, v in spec.items()))
        # GKE's auto-created pools are named nap-<machine type>-<8 characters>
        name = f"nap-{mt.name}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool",
                "metadata": {"name": name, "annotations": {AUTOPROVISIONED: "true"}}, "spec": spec}

    # -- resource limits ------------------------------------------------------------------------------------------
    def usage(self) -> dict[str, float]:
        """The cluster's cores, memory and accelerators: every Node, and the VMs its groups have asked for that
        have not registered (as upstream counts nodes and upcoming nodes)."""
        total: dict[str, float] = {}

        def add(node: Obj, n: int) -> None:
            for k, v in node_usage(node).items():
                total[k] = total.get(k, 0.0) + v * n
        for node in self.ca.store.list("Node"):
            add(node, 1)
        registered = self.ca.pools.registered_counts()
        for g in self.ca.groups.values():
            n = max(0, g.target - registered[(g.pool, g.zone)])
            tmpl = self.ca.pools.template_node(g.pool, g.zone) if n else None
            if tmpl is not None:
                add(tmpl, n)
        return total

    def cap(self, node: Obj, n: int, usage: dict[str, float]) -> tuple[int, list[str]]:
        """How many of n nodes like `node` the resource limits allow, and which limits stop the rest."""
        if not self.limits:
            return n, []
        per = node_usage(node)
        allowed, over = n, []
        for res in ["cpu", "memory", *sorted(k for k in per if k not in ("cpu", "memory"))]:
            if res not in self.limits or not per.get(res):
                continue
            room = int((self.limits[res] - usage.get(res, 0) + 1e-9) // per[res])
            if room < n:
                over.append(res)
            allowed = min(allowed, max(0, room))
        return allowed, over

    # -- pools ------------------------------------------------------------------------------------------------------
    def exists(self, pool: Obj) -> bool:
        """A stored pool of the same configuration (the autoscaler already weighed it as a node group)."""
        spec = pool["spec"]
        keys = ("machineType", "spot", "flexStart", "labels", "taints", "placementPolicy")
        return any(p["metadata"]["name"] == pool["metadata"]["name"]
                   or all((p["spec"].get(k) or None) == (spec.get(k) or None) for k in keys)
                   for p in self.ca.store.list("NodePool"))

    def template(self, pool: Obj) -> tuple[Obj, NodeInfo, int]:
        """The candidate's template node (the NodePool controller's), and its hosts when a multi-host TPU slice."""
        node = self.ca.pools.template_for(pool, pool["spec"]["zones"][0])
        topo = tpu.pool_topology(pool["spec"])
        hosts = (tpu.slice_shape(pool["spec"]["machineType"], topo)[1]
                 if topo is not None and tpu.is_multi_host(pool["spec"]["machineType"], topo) else 0)
        return node, NodeInfo.from_node(node), hosts

    def create(self, pool: Obj, pods: list[Obj]) -> None:
        """Create the pool in the store, as GKE's API does (the autoscaler's NodeGroup appears with it)."""
        self.ca.store.create(pool)
        self.created.append({"t": self.ca.env.now, "pool": pool["metadata"]["name"],
                             "machineType": pool["spec"]["machineType"], "pods": len(pods)})

    def reap(self) -> None:
        """Delete auto-created pools that have been empty (no nodes, none asked for) for EMPTY_POOL_TTL."""
        now = self.ca.env.now
        for pool in self.ca.store.list("NodePool"):
            if (pool["metadata"].get("annotations") or {}).get(AUTOPROVISIONED) != "true":
                continue
            name = pool["metadata"]["name"]
            groups = [g for (pn, _), g in self.ca.groups.items() if pn == name]
            if any(g.target for g in groups) or self.ca.pools.pool_nodes(name):
                self._empty_since.pop(name, None)
                continue
            since = self._empty_since.setdefault(name, now)
            if now - since >= EMPTY_POOL_TTL:
                self._empty_since.pop(name, None)
                self.ca.store.delete("NodePool", "", name)
                self.deleted.append({"t": now, "pool": name})

    def next_reap(self) -> float | None:
        return min((t + EMPTY_POOL_TTL for t in self._empty_since.values()), default=None)

    def summary(self) -> dict:
        return {"created": self.created, "deleted": self.deleted}


def _auto(mt: catalog.MachineType) -> bool:
    """Machines auto-provisioning picks by itself: A3 Edge (a3-edgegpu-8g, H100 in a few edge regions) only when
    named; GKE's pools for nvidia-h100-80gb are A3 High."""
    return "edgegpu" not in mt.name


def _by_price(mts: list[catalog.MachineType], spot: bool) -> list[catalog.MachineType]:
    return sorted(mts, key=lambda mt: (catalog.hourly_price(mt, spot) or float("inf"), mt.name))

"""GKE node auto-provisioning (node pool auto-creation): the cluster autoscaler creates a node pool for pending pods
that no existing pool can take.

What it follows (https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning and
.../how-to/node-auto-provisioning): with `Scenario.spec.clusterAutoscaling.enableNodeAutoprovisioning` (GKE's
Cluster.autoscaling) a pending pod's requests and node selectors say what pool to create: a GPU type
(`cloud.google.com/gke-accelerator`) and the GPUs it requests pick the accelerator machine, a TPU type and
topology (`cloud.google.com/gke-tpu-accelerator`, `cloud.google.com/gke-tpu-topology`) a TPU slice pool,
`cloud.google.com/gke-spot: "true"` Spot VMs, `cloud.google.com/machine-family` / `node.kubernetes.io/instance-type`
the machine, as nodeSelector or as required node affinity (one term, `In` one value); other selected labels become
node labels, and a selector the pod also tolerates becomes a NoSchedule taint (GKE's workload separation). A GPU
or TPU type is auto-provisioned only when a machine has it (`no.scale.up.nap.pod.gpu.type.not.supported`) and the
cluster's resourceLimits give it a maximum (GKE's fork, pkg/autoprovisioning/gpu_requests_test.go "pod requesting
a GPU without a limit defined"; visibility reason `no.scale.up.nap.pod.gpu.no.limit.defined`). A ComputeClass with
`nodePoolAutoCreation.enabled` creates pools for the pods that select it, whether or not the cluster enables node
auto-provisioning, from the first priority rule a new pool can satisfy (the pool carries the class's label and
taint). An auto-created pool spans every `autoprovisioningLocations` zone (one MIG per zone, as GKE's
nodePoolCreated visibility events list them) and its nodes are spread over them as any BALANCED pool's; TPU slice
pools and a ComputeClass rule's `location.zones` keep one zone.

Resource limits (upstream CA core/scaleup/resource/manager.go, kubernetes/autoscaler@16c271a3): what is left of
each limit is its maximum less the cluster's nodes and upcoming nodes (`resources_left`; a maximum of 0 is no
limit); a node group whose next node (an atomic TPU slice: the whole slice) would take more than is left is
skipped before simulation (`exceeded`, CheckDeltaWithinLimits), and a chosen scale-up is capped to what is left
(`apply_limits`, ApplyLimits). The skipped group's reason, "max cluster <resources, sorted, joined by ', '> limit
reached" (core/scaleup/orchestrator/skippedreasons.go NewMaxResourceLimitReached), counts in the
`NotTriggerScaleUp` event of every pod left pending that loop, as it does upstream for every existing group
(processors/status/eventing_scale_up_processor.go ReasonsMessage: groups that do not exist yet, such as a pool
node auto-provisioning would create, add nothing to the event). GKE's visibility log says the same with message
ids (https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-autoscaler-visibility): a skipped pool is
noScaleUp.skippedMigs `no.scale.up.mig.skipped` ["max cluster cpu limit reached"], a pool node auto-provisioning
did not create for the limits is napFailureReasons `no.scale.up.nap.pod.zonal.resources.exceeded` [zone]; the
twin lists both in summary.json's `cluster_autoscaler.autoprovisioning.no_scale_up`.

The same estimator as an existing pool's scale-up decides whether a candidate pool helps (ClusterAutoscaler.
estimate on the NodePool controller's template of the pool that would be created): no second scheduler.

Twin assumptions (labelled; GKE publishes neither figure): creating the pool takes `POOL_CREATION` (60 s) before
its first VM boots (then the pool's usual boot delay); an empty auto-created pool is deleted after
`EMPTY_POOL_TTL` (10 min) empty. When no memory unit is given, `memory` limits are GiB (gcloud says gigabytes).
Candidates are tried only for pods no existing pool helps (GKE's fork injects them for every pending pod and weighs
them against the existing groups in its gkeprice expander, with a penalty for creating a group:
pkg/expander/gkeprice/gke_price.go GroupCreationPenalty; not ported); among machines, the cheapest that takes the
pod comes first; with no machine selector, GKE's default E2 series
(https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning, "default machine series"). One
candidate pool is created per autoscaler loop. `autoprovisioningNodePoolDefaults` is accepted and changes nothing
(kubetwin validate says so).
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
    GKE_ACCELERATOR_COUNT,
    GKE_CAPACITY_CHECK_WAIT,
    GKE_MACHINE_FAMILY,
    GKE_RECYCLE_LEAD_TIME,
    GKE_SPOT,
    GKE_TPU_ACCELERATOR,
    GKE_TPU_TOPOLOGY,
    GPU,
    INSTANCE_TYPE,
)
from kubetwin.k8s.taints import toleration_tolerates
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
_MACHINE_KEYS = {GKE_ACCELERATOR, GKE_ACCELERATOR_COUNT, GKE_SPOT, GKE_TPU_ACCELERATOR, GKE_TPU_TOPOLOGY,
                 GKE_MACHINE_FAMILY, INSTANCE_TYPE, COMPUTE_CLASS, "kubernetes.io/os", "kubernetes.io/arch",
                 "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "cloud.google.com/gke-provisioning"}


# GKE's cluster autoscaler visibility message ids (docs: cluster-autoscaler-visibility, "noScaleUp" reasons)
MIG_SKIPPED = "no.scale.up.mig.skipped"
NAP_RESOURCES_EXCEEDED = "no.scale.up.nap.pod.zonal.resources.exceeded"
NAP_GPU_NO_LIMIT = "no.scale.up.nap.pod.gpu.no.limit.defined"
NAP_GPU_NOT_SUPPORTED = "no.scale.up.nap.pod.gpu.type.not.supported"
NAP_TPU_NO_LIMIT = "no.scale.up.nap.pod.tpu.no.limit.defined"
_EPS = 1e-9


def limit_reason(resources: list[str]) -> str:
    """Upstream CA's skipped-group reason for a scale-up past the cluster's resource limits (skippedreasons.go
    NewMaxResourceLimitReached), resources in CheckDeltaWithinLimits' sorted order."""
    return f"max cluster {', '.join(sorted(resources))} limit reached"


def resources_left(limits: dict[str, float], usage: dict[str, float]) -> dict[str, float]:
    """Upstream ResourcesLeft: each limit's maximum less what the cluster has, never below 0; a maximum of 0 is
    no limit (upstream keeps "only actual limits")."""
    return {r: max(0.0, m - usage.get(r, 0.0)) for r, m in limits.items() if m > 0}


def exceeded(left: dict[str, float], delta: dict[str, float]) -> list[str]:
    """Upstream CheckDeltaWithinLimits: the limited resources `delta` would take past what is left, sorted."""
    return sorted(r for r, d in delta.items() if d > 0 and r in left and d > left[r] + _EPS)


def apply_limits(n: int, left: dict[str, float], delta: dict[str, float]) -> int:
    """Upstream ApplyLimits: n nodes of `delta` each, capped by every limit to what is left (floor)."""
    for r, d in delta.items():
        if r in left and d > 0 and n * d > left[r] + _EPS:
            n = int((left[r] + _EPS) // d)
    return n


def scaled(delta: dict[str, float], n: int) -> dict[str, float]:
    return {k: v * n for k, v in delta.items()}


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


def required_affinity_labels(pod: Obj) -> dict[str, str]:
    """The labels a pod's required node affinity names as one value each (a single nodeSelectorTerm, `In` with one
    value), read as node selectors: GKE's auto-provisioning takes a machine family, Spot or a custom label from
    node affinity as from nodeSelector (https://cloud.google.com/kubernetes-engine/docs/how-to/
    node-auto-provisioning, "workload separation"). Twin assumption: several terms or values name no label."""
    req = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return {}
    return {e["key"]: e["values"][0] for e in terms[0].get("matchExpressions") or []
            if e.get("operator") == "In" and len(e.get("values") or []) == 1}


def _tolerated(pod: Obj, key: str, value: str) -> dict | None:
    """The pod's own toleration for a `key=value` taint on the pool (k8s.taints' rule, with the toleration's effect),
    or None: a pool GKE creates for a selector the pod also tolerates carries that taint."""
    for t in pod["spec"].get("tolerations") or []:
        if t.get("key") == key and toleration_tolerates(t, {"key": key, "value": value,
                                                            "effect": t.get("effect") or "NoSchedule"}):
            return t
    return None


class NodeAutoprovisioning:
    """The autoscaler's node pool creation and empty pool deletion (module doc)."""

    def __init__(self, ca: ClusterAutoscaler, spec: ClusterAutoscaling) -> None:
        self.ca = ca
        self.enabled = spec.enableNodeAutoprovisioning
        self.limits = {r.resourceType: r.maximum for r in spec.resourceLimits}
        self.zones = list(spec.autoprovisioningLocations or [DEFAULT_ZONE])
        self.zone = self.zones[0]
        self.created: list[dict] = []
        self.deleted: list[dict] = []
        self.no_scale_up: list[dict] = []  # GKE's noScaleUp visibility reasons, first time each (module doc)
        self._noted: set[tuple] = set()
        self._loop: list[tuple[tuple, dict]] = []  # this loop's reasons, kept only if the loop scales nothing up
        self._empty_since: dict[str, float] = {}

    def __bool__(self) -> bool:
        return bool(self.enabled or self.created or self.limits)

    # -- what pool a pod asks for ---------------------------------------------------------------------------------
    def candidates(self, pod: Obj) -> list[Obj]:
        """The pools that could be created for the pod, in preference order (not stored)."""
        sel = {**required_affinity_labels(pod), **(pod["spec"].get("nodeSelector") or {})}
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
            if self.limits.get(sel[GKE_TPU_ACCELERATOR], 0) <= 0:
                self.note(NAP_TPU_NO_LIMIT, [sel[GKE_TPU_ACCELERATOR]], pod=pod)
                return []  # GKE auto-provisions a TPU type only within a limit for it
            chips = req.get(tpu.RESOURCE, 0)
            mts = [mt for mt in catalog.tpu_machine_types() if mt.tpu
                   and catalog.tpu_type(mt.tpu).gke_accelerator == sel[GKE_TPU_ACCELERATOR]
                   and (not chips or mt.tpu_chips == chips)
                   and sel.get(GKE_ACCELERATOR_COUNT, str(mt.tpu_chips)) == str(mt.tpu_chips)]
        elif sel.get(GKE_ACCELERATOR) or req.get(GPU):
            if not sel.get(GKE_ACCELERATOR):
                return []  # GKE needs the GPU type in the pod's node selector to auto-provision GPUs
            if not any(mt.gpu == sel[GKE_ACCELERATOR] for mt in catalog.machine_types()):
                self.note(NAP_GPU_NOT_SUPPORTED, [sel[GKE_ACCELERATOR]], pod=pod)
                return []  # a GPU type no machine has (the fork checks this before the limit)
            if self.limits.get(sel[GKE_ACCELERATOR], 0) <= 0:
                self.note(NAP_GPU_NO_LIMIT, [sel[GKE_ACCELERATOR]], pod=pod)
                return []  # ... and a resourceLimits maximum for that type (module doc)
            mts = [mt for mt in catalog.machine_types() if mt.gpu == sel[GKE_ACCELERATOR]
                   and mt.gpu_count >= req.get(GPU, 0) and _auto(mt)]
        elif req.get(tpu.RESOURCE):
            return []  # likewise TPUs: the TPU type (gke-tpu-accelerator) in the node selector
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
        pod_sel = {**required_affinity_labels(pod), **(pod["spec"].get("nodeSelector") or {})}
        out = []
        for rule in priorities(cc):
            if "nodepools" in rule or "reservations" in rule:
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
            # a pod's chips-per-VM selector must match a TPU machine's (injection.go: "accelerator count ... doesn't
            # match TPU machine type")
            mts = [mt for mt in mts if not mt.tpu
                   or pod_sel.get(GKE_ACCELERATOR_COUNT, str(mt.tpu_chips)) == str(mt.tpu_chips)]
            labels = {COMPUTE_CLASS: klass, **(rule.get("nodeLabels") or {})}
            flex = rule.get("flexStart") or {}
            lead = (flex.get("nodeRecycling") or {}).get("leadTimeSeconds") if flex.get("enabled") else None
            if lead is not None:  # GKE puts the rule's recycling lead time on the pool's nodes (rules/flex_start.go)
                labels[GKE_RECYCLE_LEAD_TIME] = str(int(lead))
            wait = rule.get("capacityCheckWaitTimeSeconds")
            if wait is not None:  # selfservice/capacity_check_wait_time.go: a label on the pool it creates
                labels[GKE_CAPACITY_CHECK_WAIT] = str(int(wait))
            taints = [{"key": COMPUTE_CLASS, "value": klass, "effect": "NoSchedule"},
                      *[dict(t) for t in rule.get("taints") or []]]
            zones = (rule.get("location") or {}).get("zones") or []
            for mt in _by_price(mts, spot):
                pool = self._pool(mt, spot, labels, taints, tpu_rule.get("topology"), zones[0] if zones else None,
                                  flex=bool(flex.get("enabled")), max_run=rule.get("maxRunDurationSeconds"))
                if rule_matches(rule, pool):
                    out.append(pool)
        return out

    def _pool(self, mt: catalog.MachineType, spot: bool, labels: dict, taints: list[dict], topology: str | None,
              zone: str | None = None, flex: bool = False, max_run: int | None = None) -> Obj:
        # one zone for a ComputeClass rule's location or a TPU slice pool, else every autoprovisioning location
        zones = [zone] if zone else ([self.zone] if mt.tpu else list(self.zones))
        spec: dict = {"machineType": mt.name, "autoscaling": {"minNodeCount": 0,
                                                              "maxNodeCount": MAX_NODES_PER_POOL_ZONE},
                      "zones": zones}
        if spot:
            spec["spot"] = True
        if flex:
            spec["flexStart"] = True
        if max_run is not None:  # a rule's maxRunDurationSeconds: the pool is created with --max-run-duration
            spec["maxRunDuration"] = f"{int(max_run)}s"
        if mt.tpu:  # NAP labels its TPU pools with the chips per VM (injection.go AcceleratorCountLabel)
            labels = {**labels, GKE_ACCELERATOR_COUNT: str(mt.tpu_chips)}
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

    def left(self) -> dict[str, float]:
        """What is left of each limit now (resources_left over usage())."""
        return resources_left(self.limits, self.usage()) if self.limits else {}

    # -- GKE's visibility reasons -----------------------------------------------------------------------------
    def note(self, message_id: str, parameters: list[str], pod: Obj | None = None, pool: str | None = None,
             zone: str | None = None) -> None:
        """A noScaleUp reason of this loop: kept by end_loop(False) the first time it happens (GKE logs a noScaleUp
        record per loop that scaled nothing up; the twin keeps the first of each)."""
        who = (f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}" if pod is not None
               else None)
        entry: dict = {"t": self.ca.env.now, "messageId": message_id, "parameters": list(parameters)}
        if who is not None:
            entry["pod"] = who
        if pool is not None:
            entry["mig"] = {"nodepool": pool, "zone": zone}
        self._loop.append(((message_id, tuple(parameters), who, pool, zone), entry))

    def end_loop(self, scaled_up: bool) -> None:
        """Keep this loop's reasons unless it scaled something up (a loop with a scale-up logs no noScaleUp)."""
        loop, self._loop = self._loop, []
        if scaled_up:
            return
        for key, entry in loop:
            if key not in self._noted:
                self._noted.add(key)
                self.no_scale_up.append(entry)

    # -- pools ------------------------------------------------------------------------------------------------------
    def exists(self, pool: Obj) -> bool:
        """A stored pool of the candidate's configuration (the candidate itself included) that can still be scaled
        up in every zone the candidate would cover: the autoscaler weighs it as a node group there, below its
        maximum (a multi-host slice pool: its one slice not yet provisioned). A pool without autoscaling, without
        one of those zones, or full cannot grow there, and GKE auto-provisions a pool for a pod that no existing
        pool can be scaled up to fit (https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning),
        a new one per multi-host TPU slice."""
        spec = pool["spec"]
        zones = spec.get("zones") or []
        groups = self.ca.groups
        for p in self.ca.store.list("NodePool"):
            if not all((p["spec"].get(k) or None) == (spec.get(k) or None) for k in _SAME_CONFIG):
                continue
            gs = [groups.get((p["metadata"]["name"], z)) for z in zones]
            if all(g is not None and g.target < (g.hosts or g.max) for g in gs):
                return True
        return False

    def named(self, pool: Obj) -> Obj:
        """The candidate under a name no stored pool has: GKE's nap-<machine>-<hash>, with -2, -3 ... when a full
        pool of the same configuration holds it (a second multi-host slice)."""
        name, n = pool["metadata"]["name"], 2
        while self.ca.store.get("NodePool", "", name) is not None:
            name, n = f"{pool['metadata']['name']}-{n}", n + 1
        return pool if name == pool["metadata"]["name"] else {**pool, "metadata": {**pool["metadata"], "name": name}}

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
        out: dict = {"created": self.created, "deleted": self.deleted}
        if self.no_scale_up:
            out["no_scale_up"] = self.no_scale_up
        return out


# what makes two pools the same to node auto-provisioning (one stands in for the other)
_SAME_CONFIG = ("machineType", "spot", "flexStart", "maxRunDuration", "labels", "taints", "placementPolicy")


def _auto(mt: catalog.MachineType) -> bool:
    """Machines auto-provisioning picks by itself: A3 Edge (a3-edgegpu-8g, H100 in a few edge regions) only when
    named; GKE's pools for nvidia-h100-80gb are A3 High."""
    return "edgegpu" not in mt.name


def _by_price(mts: list[catalog.MachineType], spot: bool) -> list[catalog.MachineType]:
    return sorted(mts, key=lambda mt: (catalog.hourly_price(mt, spot) or float("inf"), mt.name))

"""NodePool controller: turns a kubetwin NodePool into GKE-shaped Node objects after a boot delay.

TPU pools: a machine type such as ct5lp-hightpu-4t plus placementPolicy.tpuTopology. A single-host topology
gives nodeCount independent one-VM slices; a multi-host one makes the pool one slice (devices/tpu.py), which
GKE creates, repairs and deletes whole (shared/reference/controllers-kueue-dra-deviceplugin-tpu-jobset.md §4):
all its nodes register together after the boot delay, and when any one of them goes (deleted by anyone) the
controller deletes the others and re-creates the whole slice after the boot delay again, under the same node
names (a repaired VM keeps its instance name). Pods on a lost node fail as PodGC fails them (`fail_orphans`).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubetwin import catalog
from kubetwin.api.twin import DEFAULT_ZONE, FLEX_START_MAX_RUN
from kubetwin.autoscaler import reservations as rsv
from kubetwin.autoscaler.reservations import Reservations
from kubetwin.controllers.podgc import PODGC_QUARANTINE, fail_orphans
from kubetwin.devices import mig, sharing, tpu
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.k8s.names import (
    GKE_ACCELERATOR,
    GKE_FLEX_START,
    GKE_MACHINE_FAMILY,
    GKE_MAX_RUN_DURATION,
    GKE_NODEPOOL,
    GKE_PLACEMENT_GROUP,
    GKE_PROVISIONING,
    GKE_SPOT,
    GPU,
    HOSTNAME,
    INSTANCE_TYPE,
    MACHINE_TERMINATION,
    REGION,
    ZONE,
)
from kubetwin.k8s.units import format_bytes, parse_duration, parse_time
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}  # GKE GPU node pools
# Manual driver installation (gpuDriverInstallation INSTALLATION_DISABLED): GKE installs no driver until the NVIDIA
# driver installer DaemonSet runs (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#installing_drivers:
# GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer/cos/daemonset-preloaded.yaml, DaemonSet
# nvidia-driver-installer in kube-system). The twin does not run DaemonSet pods; the installer's presence in the
# store stands for them having run on every GPU node (after the pool's driverInstallDelay).
DRIVER_INSTALLER = ("kube-system", "nvidia-driver-installer")
# A pool whose first nodes are the scenario's own Node objects labelled with its name (an imported cluster's nodes,
# importer/convert.py): they are its VMs from t=0 under their own names, and only the rest of nodeCount boots.
ADOPT_NODES = "kubetwin.io/adopt-nodes"
NODE_VERSION = "v1.34.1-gke.1829001"


def node_capacity_type(labels: Mapping[str, str]) -> str | None:
    """spot, flex-start or reserved as a GKE node's labels say where its VM came from (gke-spot / gke-flex-start /
    gke-provisioning, the reservation labels: the labels GKE and this controller put on a node, so a dump's nodes say
    it too); None when they say nothing (on-demand, or a reservation consumed by ANY affinity, which GKE does not
    label)."""
    provisioning = labels.get(GKE_PROVISIONING)
    if labels.get(GKE_SPOT) == "true" or provisioning == "spot":
        return "spot"
    if labels.get(GKE_FLEX_START) == "true" or provisioning == "flex-start":
        return "flex-start"
    if labels.get(rsv.NAME_LABEL) or labels.get(rsv.CONSUMED_LABEL):
        return "reserved"
    return None


def pool_capacity_type(spec: Mapping[str, Any]) -> str:
    """spot, flex-start or on-demand: what a pool's new VMs are, reservations aside."""
    return "spot" if spec.get("spot") else "flex-start" if spec.get("flexStart") else "on-demand"


def network_labels(spec: dict) -> dict[str, str]:
    """A pool's networking choices on its Nodes: GKE's Fast Socket label, twin labels for gVNIC / GPUDirect
    (workloads/network.py reads them back). Only non-defaults, so existing pools' Nodes are unchanged."""
    from kubetwin.workloads import network

    out = {} if spec.get("gvnic", True) else {network.GVNIC_LABEL: "false"}
    if spec.get("fastSocket"):
        out[network.FASTSOCKET_LABEL] = "true"
    if spec.get("gpuDirect"):
        out[network.GPUDIRECT_LABEL] = spec["gpuDirect"]
    return out


def _suffix(seed: str, n: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


def group_hash(cluster: str, pool: str) -> str:
    """The 8 hex characters GKE puts in a pool's instance group and node names (gke-CLUSTER-POOL-HASH-...)."""
    return _suffix(f"{cluster}/{pool}", 8)


def pool_accelerator(spec: dict, mt: catalog.MachineType) -> tuple[dict, str | None]:
    """The pool's accelerator entry ({} when none is listed; a TPU machine type implies its chips) and the GPU type
    its nodes carry (the entry's, or the machine type's own, as an A3's H100s)."""
    accels = [] if mt.tpu else spec.get("accelerators") or []
    return (accels[0] if accels else {}), (accels[0]["type"] if accels else mt.gpu)


def _node_resources(mt: catalog.MachineType, max_pods: int) -> tuple[dict[str, str], dict[str, str]]:
    cap = {k: str(v) for k, v in catalog.capacity(mt, max_pods).items()}
    alloc = {k: str(v) for k, v in catalog.allocatable(mt, max_pods).items()}
    if "cpu" in cap:
        cap["cpu"], alloc["cpu"] = f"{mt.vcpus}", f"{alloc['cpu']}m"  # quantities as the kubelet reports them
    for res in (cap, alloc):  # the kubelet's memory in whole KiB (cAdvisor), in canonical binary-SI form
        if "memory" in res:
            res["memory"] = format_bytes(int(res["memory"]) // 1024 * 1024)
    if mt.tpu:  # the TPU device plugin advertises the VM's chips
        cap[tpu.RESOURCE] = alloc[tpu.RESOURCE] = str(mt.tpu_chips)
    return cap, alloc


_RESOURCES: dict[tuple[catalog.MachineType, int], tuple[dict[str, str], dict[str, str]]] = {}


def node_resources(mt: catalog.MachineType, max_pods: int) -> tuple[dict[str, str], dict[str, str]]:
    """status.capacity and status.allocatable of a node of this machine type, as its kubelet reports them; once per
    (machine type, maxPodsPerNode): a pool's nodes share the two dicts (stored objects are never changed in
    place; a node whose device plugin comes up gets new ones)."""
    out = _RESOURCES.get((mt, max_pods))
    if out is None:
        out = _RESOURCES[(mt, max_pods)] = _node_resources(mt, max_pods)
    return out


def node_labels_and_taints(pool: Obj, mt: catalog.MachineType, zone: str, node_name: str
                           ) -> tuple[dict[str, str], list[dict]]:
    """The labels and taints GKE gives a pool's node (shared by the controller's Node objects, the cluster
    autoscaler's template nodes and validate's pitfall checks, which need no store)."""
    spec = pool["spec"]
    pool_name = pool["metadata"]["name"]
    acc, gpu = pool_accelerator(spec, mt)
    labels = {
        HOSTNAME: node_name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": mt.name, INSTANCE_TYPE: mt.name,
        REGION: zone.rsplit("-", 1)[0], ZONE: zone,
        GKE_NODEPOOL: pool_name, GKE_MACHINE_FAMILY: mt.family,
        "cloud.google.com/gke-os-distribution": "cos", "cloud.google.com/gke-boot-disk": "pd-balanced",
        **(spec.get("labels") or {}),
    }
    taints = [dict(t) for t in spec.get("taints") or []]
    if spec.get("spot"):
        labels[GKE_SPOT] = "true"
        labels[GKE_PROVISIONING] = "spot"
    if spec.get("flexStart"):  # gke-autoscaling labels.FlexStartLabel, FlexStartProvisioningValue
        labels[GKE_FLEX_START] = "true"
        labels[GKE_PROVISIONING] = "flex-start"
    if spec.get("maxRunDuration"):  # the pool's --max-run-duration, in seconds (labels.MaxRunDurationLabelKey)
        labels[GKE_MAX_RUN_DURATION] = str(int(parse_duration(spec["maxRunDuration"])))
    partition = acc.get("gpuPartitionSize")
    if partition:
        labels[mig.PARTITION_LABEL] = partition
    _, share_labels, _ = sharing.gke_sharing(acc.get("gpuSharingConfig"))
    labels.update(share_labels)
    if gpu:
        labels[GKE_ACCELERATOR] = gpu
        labels["cloud.google.com/gke-gpu"] = "true"
        taints.append(dict(GPU_TAINT))
    placement = spec.get("placementPolicy") or {}
    if mt.tpu:  # GKE's TPU node labels and taint (§4)
        labels[tpu.ACCELERATOR_LABEL] = catalog.tpu_type(mt.tpu).gke_accelerator
        labels[tpu.TOPOLOGY_LABEL] = tpu.pool_topology(spec) or ""
        taints.append(dict(tpu.TAINT))
    if placement and (not mt.tpu or placement.get("type")):
        labels[GKE_PLACEMENT_GROUP] = f"{pool_name}-placement"
    labels.update(network_labels(spec))
    return labels, taints


@dataclass
class TpuSlice:
    """One multi-host TPU slice: the pool that holds it, its hosts' node names, and where it stands."""

    pool: str
    zone: str
    accelerator: str
    topology: str
    nodes: list[str] = field(default_factory=list)
    state: str = "Empty"  # Empty | Provisioning | Ready | Repairing | Deleted
    generation: int = 0  # bumped on every transition so a stale timer does nothing
    repairs: int = 0


def max_run_seconds(spec: Mapping[str, Any]) -> float | None:
    """How long each of the pool's VMs runs before Compute Engine deletes it: its maxRunDuration, else 7 days for
    flex-start (api.twin.FLEX_START_MAX_RUN), else None (no end)."""
    if spec.get("maxRunDuration"):
        return float(parse_duration(spec["maxRunDuration"]))
    return float(FLEX_START_MAX_RUN) if spec.get("flexStart") else None


def termination_time(meta: Mapping[str, Any], start: str) -> float | None:
    """When the node's VM ends (node.gke.io/machine-termination-datetime), in simulated seconds from `start`; None
    without the annotation or when it is no RFC 3339 time (GKE's autoscaler logs that and skips the node,
    recycling.go: time.Parse(time.RFC3339))."""
    end = parse_time((meta.get("annotations") or {}).get(MACHINE_TERMINATION))
    begin = parse_time(start)
    return None if end is None or begin is None else (end - begin).total_seconds()


def initial_node_count(spec: dict) -> int:
    """The nodes a pool starts with per zone: `nodeCount` (GKE's initial node count, the instance group's size),
    else the autoscaler's `minNodeCount`. The cluster autoscaler's target for the group starts here too: CA reads
    the instance group's current target size (gce_manager GetMigSize), so a node still booting counts as coming
    up. https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler#minimum_and_maximum_node_pool_size"""
    count = spec.get("nodeCount")
    return int(count) if count is not None else int((spec.get("autoscaling") or {}).get("minNodeCount", 0))


def pool_of_node(node: Obj) -> str:
    """The node pool a Node is counted and billed under: its GKE nodepool label; "static" for a Node given in the
    scenario without one (as KWOK fakes them)."""
    return str((node["metadata"].get("labels") or {}).get(GKE_NODEPOOL, "static"))



def _usd(total: Any) -> Any:
    """A dollar figure for summary.json, rounded to cents as Python rounds the number it is: a sum of no prices is
    the int 0 (written `0`). Typed Any so the compiled module (kubetwin.native) keeps that int where a float-typed
    value would become 0.0."""
    return round(total, 2)

class NodePoolController:
    """Creates nodeCount nodes per zone (else minNodeCount: `initial_node_count`) and tracks node lifetimes.

    Other code may call: `slice_of(node)` / `slice_nodes(pool)` to find a multi-host TPU slice, `fail_slice`
    to lose one (a Spot or failure injector may instead just delete one of its Nodes: the effect is the same),
    and `provision_slice` / `delete_slice` to scale a multi-host pool 0 <-> whole slice."""

    def __init__(self, store: Store, env: Environment, cluster: str = "kubetwin",
                 events: EventRecorder | None = None, reservations: Reservations | None = None) -> None:
        self.store, self.env, self.cluster = store, env, cluster
        self.reservations = reservations  # Compute Engine reservations the pools' VMs consume (reservations.py)
        self._capacity_type: dict[str, str] = {}  # node -> reserved | spot | flex-start | on-demand
        self.events = events if events is not None else _own_recorder(store)
        self.node_seconds: dict[str, float] = {}
        self._up_since: dict[str, float] = {}
        self.pool_of: dict[str, str] = {}
        self._price: dict[str, tuple[float, bool]] = {}  # node name -> (USD/hour, Spot), as it registered
        self.slices: dict[str, TpuSlice] = {}  # pool name -> its multi-host TPU slice
        self._slice_of: dict[str, str] = {}  # node name -> pool name, for multi-host slice hosts
        self._managed: dict[str, str] = {}  # node name -> pool uid, for nodes this controller created
        self._zone_of: dict[str, str] = {}  # node name -> zone, for nodes this controller created
        self._grown: dict[tuple[str, str], int] = {}  # (pool, zone) -> VMs added by scale()
        self._names: set[str] = set()
        self._no_driver: dict[str, int] = {}  # GPU node -> its GPUs, waiting for a manually installed driver
        # first VMs of pools without autoscaling still booting: nodes of the cluster the autoscaler's
        # --max-nodes-total must count before they register (cluster_autoscaler.cluster_room)
        self.booting = 0
        self.ran_out: Counter[str] = Counter()  # pool -> VMs Compute Engine deleted at their max run duration
        store.watch("NodePool", self._on_pool)
        store.watch("Node", self._on_node)
        store.watch("DaemonSet", self._on_daemonset)

    # -- pools ----------------------------------------------------------------------------------------
    def _on_pool(self, etype: str, pool: Obj, old: Obj | None) -> None:
        name = pool["metadata"]["name"]
        if etype == "DELETED":
            self.env.after(0, lambda: self._pool_deleted(pool))
            return
        if etype == "MODIFIED" and old is not None:
            before, after = initial_node_count(old["spec"]), initial_node_count(pool["spec"])
            if before != after and not pool["spec"].get("autoscaling"):
                self.env.after(0, lambda: self.resize(name, before, after))
            return
        if etype != "ADDED":
            return
        spec = pool["spec"]
        mt = catalog.machine_type(spec["machineType"])
        per_zone = initial_node_count(spec)
        boot = parse_duration(spec.get("bootDelay", "90s"))
        topology = tpu.pool_topology(spec)
        zones = spec.get("zones") or [DEFAULT_ZONE]
        if topology is not None and tpu.is_multi_host(mt.name, topology):
            hosts = tpu.slice_shape(mt.name, topology)[1]
            zone = zones[0]  # validate: a multi-host slice lives in one zone
            sl = self.slices[name] = TpuSlice(name, zone, catalog.tpu_type(mt.tpu or "").gke_accelerator, topology,
                                              [self._node_name(name, zone, i) for i in range(hosts)])
            for n in sl.nodes:
                self._slice_of[n] = name
            if adopts_nodes(pool):  # an imported slice: its hosts are the dump's Nodes (created this instant)
                self.env.after(0, lambda: self._adopt_slice(pool, mt, per_zone, boot))
            elif per_zone:  # validate holds it to 0 or the slice's host count
                self.provision_slice(name, boot)
            return
        fixed = not spec.get("autoscaling")  # an autoscaled pool's first VMs are the autoscaler's upcoming nodes
        if adopts_nodes(pool):  # once every object of this instant is created (the Nodes may come after the pool)
            self.env.after(0, lambda: self._adopt(pool, mt, per_zone, boot, zones, fixed))
            return
        self._boot(pool, mt, per_zone, boot, zones, fixed, {})

    def _boot(self, pool: Obj, mt: catalog.MachineType, per_zone: int, boot: float, zones: list[str], fixed: bool,
              adopted: dict[str, int]) -> None:
        """Boot the pool's first VMs: nodeCount per zone, less the nodes it adopted there."""
        name = pool["metadata"]["name"]
        for zone in zones:
            for i in range(adopted.get(zone, 0), per_zone):
                node_name = self._node_name(name, zone, i)
                self.booting += fixed
                self.env.after(boot, partial(self._first_boot, pool, mt, zone, node_name, fixed))

    def _adopt(self, pool: Obj, mt: catalog.MachineType, per_zone: int, boot: float, zones: list[str],
               fixed: bool) -> None:
        """An imported pool takes the Nodes labelled with its name in its zones as its own VMs, as they are (their
        labels, taints, allocatable and GPUs already advertised): billed at the pool's price unless a node says
        its own, scaled and preempted as the pool's; then the rest of nodeCount boots."""
        name = pool["metadata"]["name"]
        live = self._live_pool(name)
        if live is None or live["metadata"].get("uid") != pool["metadata"].get("uid"):
            return
        price = pool_hourly_price(pool, mt) or 0.0
        adopted: Counter[str] = Counter()
        for node in self.store.list("Node"):
            labels = node["metadata"].get("labels") or {}
            node_name, zone = node["metadata"]["name"], str(labels.get(ZONE, ""))
            if labels.get(GKE_NODEPOOL) != name or zone not in zones or node_name in self._managed:
                continue
            adopted[zone] += 1
            self._names.add(node_name)
            self._managed[node_name] = pool["metadata"].get("uid", "")
            self._zone_of[node_name] = zone
            self.pool_of[node_name] = name
            self._adopt_billing(node_name, labels, pool, price)
        self._boot(pool, mt, per_zone, boot, zones, fixed, dict(adopted))

    def _adopt_slice(self, pool: Obj, mt: catalog.MachineType, per_zone: int, boot: float) -> None:
        """An imported multi-host TPU slice pool takes the dump's Nodes of its pool and zone as its slice, Ready as
        they are, when they are all its hosts (the importer makes a pool only then); else it provisions its own."""
        name = pool["metadata"]["name"]
        live, sl = self._live_pool(name), self.slices.get(name)
        if live is None or sl is None or live["metadata"].get("uid") != pool["metadata"].get("uid"):
            return
        found = sorted(n["metadata"]["name"] for n in self.store.list("Node")
                       if (n["metadata"].get("labels") or {}).get(GKE_NODEPOOL) == name
                       and (n["metadata"].get("labels") or {}).get(ZONE) == sl.zone
                       and n["metadata"]["name"] not in self._managed)
        if len(found) != len(sl.nodes):
            if per_zone:
                self.provision_slice(name, boot)
            return
        price = pool_hourly_price(pool, mt) or 0.0
        for n in sl.nodes:
            self._slice_of.pop(n, None)
        sl.nodes = found
        for n in found:
            self._slice_of[n] = name
            self._names.add(n)
            self._managed[n] = pool["metadata"].get("uid", "")
            self._zone_of[n] = sl.zone
            self.pool_of[n] = name
            node = self.store.get("Node", "", n)
            self._adopt_billing(n, ((node or {}).get("metadata") or {}).get("labels") or {}, pool, price)
        sl.state = "Ready"

    def _adopt_billing(self, node_name: str, labels: Mapping[str, str], pool: Obj, price: float) -> None:
        """An adopted node bills as its labels say its VM came (a dump's Spot node is Spot), else as its pool's new
        VMs would; at the pool's price unless the node says its own."""
        kind = node_capacity_type(labels) or pool_capacity_type(pool["spec"])
        self._capacity_type[node_name] = kind
        if not self._price.get(node_name, (0.0, False))[0]:
            self._price[node_name] = (price, kind == "spot")

    def _first_boot(self, pool: Obj, mt: catalog.MachineType, zone: str, node_name: str, fixed: bool) -> None:
        self.booting -= fixed
        self._register(pool, mt, zone, node_name)

    def _node_name(self, pool: str, zone: str, i: int) -> str:
        """GKE-shaped and unique: gke-<cluster>-<pool>-<group hash>-<4 characters per instance>."""
        group = group_hash(self.cluster, pool)
        salt = 0
        node_name = f"gke-{self.cluster}-{pool}-{group}-{_suffix(f'{pool}/{zone}/{i}', 4)}"
        while node_name in self._names:  # GKE's 4-character instance suffixes are unique per group
            salt += 1
            node_name = f"gke-{self.cluster}-{pool}-{group}-{_suffix(f'{pool}/{zone}/{i}/{salt}', 4)}"
        self._names.add(node_name)
        return node_name

    def _pool_deleted(self, pool: Obj) -> None:
        """Deleting a node pool deletes its VMs (and a multi-host slice with them)."""
        uid = pool["metadata"].get("uid")
        sl = self.slices.get(pool["metadata"]["name"])
        if sl is not None:
            sl.state, sl.generation = "Deleted", sl.generation + 1
        for node_name, owner in sorted(self._managed.items()):
            if owner == uid:
                self.store.delete("Node", "", node_name)

    def _live_pool(self, name: str) -> Obj | None:
        return self.store.get("NodePool", "", name)

    # -- multi-host TPU slices ------------------------------------------------------------------------
    def slice_of(self, node_name: str) -> str | None:
        """The pool (= slice) a node is a host of, when it belongs to a multi-host TPU slice."""
        return self._slice_of.get(node_name)

    def slice_nodes(self, pool: str) -> list[str]:
        """The node names of a multi-host slice's hosts (whether or not they exist right now)."""
        sl = self.slices.get(pool)
        return list(sl.nodes) if sl else []

    def provision_slice(self, pool: str, delay: float | None = None) -> None:
        """Create the whole slice: all its nodes register together after `delay` (default: bootDelay)."""
        sl, obj = self.slices.get(pool), self._live_pool(pool)
        if sl is None or obj is None or sl.state in ("Provisioning", "Ready", "Deleted"):
            return
        if delay is None:
            delay = parse_duration(obj["spec"].get("bootDelay", "90s"))
        sl.state, sl.generation = "Provisioning", sl.generation + 1
        gen = sl.generation
        self.env.after(delay, lambda: self._slice_up(pool, gen))

    def delete_slice(self, pool: str) -> None:
        """Scale a multi-host pool to zero: delete every node of its slice, with no repair."""
        sl = self.slices.get(pool)
        if sl is None or sl.state == "Deleted":
            return
        sl.state, sl.generation = "Empty", sl.generation + 1
        for n in sl.nodes:
            self.store.delete("Node", "", n)

    def fail_slice(self, pool: str, node_name: str | None = None, cause: str = "was deleted") -> None:
        """Lose a multi-host slice as GKE does when one of its hosts fails: delete all its nodes and re-create the
        whole slice after the pool's boot delay."""
        sl, obj = self.slices.get(pool), self._live_pool(pool)
        if sl is None or obj is None or sl.state != "Ready":
            return
        lost = node_name or sl.nodes[0]
        sl.state, sl.generation, sl.repairs = "Repairing", sl.generation + 1, sl.repairs + 1
        gen = sl.generation
        others = [n for n in sl.nodes if n != lost]
        # No GKE text exists for this as a Kubernetes Event (GKE reports repairs as node pool operations); the
        # reason and message are the twin's, in the style of GKE's events.
        self.events.event(obj, "Warning", "RepairingTPUSlice",
                          f"Node {lost} of multi-host TPU slice {sl.accelerator} {sl.topology} ({len(sl.nodes)} "
                          f"nodes) {cause}; deleting the slice's other {len(others)} nodes and re-creating the "
                          "whole slice", "gke-tpu-slice-controller")
        for n in [lost, *others]:  # the lost one is usually gone already
            self.store.delete("Node", "", n)
        boot = parse_duration(obj["spec"].get("bootDelay", "90s"))
        self.env.after(boot, lambda: self._slice_up(pool, gen))

    def _slice_up(self, pool: str, gen: int) -> None:
        """All hosts of the slice register at the same instant."""
        sl, obj = self.slices.get(pool), self._live_pool(pool)
        if sl is None or obj is None or sl.generation != gen:
            return
        mt = catalog.machine_type(obj["spec"]["machineType"])
        for n in sl.nodes:
            if self.store.get("Node", "", n) is None:
                # a boot delay under PodGC's quarantine: the old node's pods are orphans all the same, and
                # must not be taken for the new node's (the same name comes back)
                fail_orphans(self.store, self.env, n, {p["metadata"]["uid"] for p in self.store.list("Pod")
                                                       if p["spec"].get("nodeName") == n})
                self._register(obj, mt, sl.zone, n)
        repaired = sl.state == "Repairing"
        sl.state = "Ready"
        if repaired:  # wording is the twin's (see fail_slice)
            self.events.event(obj, "Normal", "TPUSliceRepaired",
                              f"Multi-host TPU slice {sl.accelerator} {sl.topology} re-created: {len(sl.nodes)} "
                              "nodes registered", "gke-tpu-slice-controller")

    # -- nodes ----------------------------------------------------------------------------------------
    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self._node_gone(node)
            return
        if etype != "ADDED":
            return
        # Billing: each node's price as it registered; a node deleted before the end (a preempted Spot VM, a
        # scaled-down one) still cost what it cost while it lived.
        meta = node["metadata"]
        kind = node_capacity_type(meta.get("labels") or {})
        self._price[name] = (float((meta.get("annotations") or {}).get("kubetwin.io/hourly-price-usd", 0) or 0),
                             kind == "spot")
        at = termination_time(meta, self.store.start_time)
        if at is not None:  # the VM's end, as this controller wrote it or as an imported/given Node carries it
            self.env.after(max(0.0, at - self.env.now), partial(self._run_out, name, meta.get("uid", "")))
        if name in self._names:
            return
        self._capacity_type[name] = kind or "on-demand"
        # A Node given in the scenario itself (as KWOK fakes them): account it under its nodepool label.
        self.pool_of[name] = pool_of_node(node)
        self._up_since[name] = self.env.now

    def _node_gone(self, node: Obj) -> None:
        """Close the node's lifetime and note its pods now (a watch handler only updates its cache and enqueues);
        then PodGC takes the pods and, for a slice host, the slice is repaired."""
        name = node["metadata"]["name"]
        if self.reservations is not None:
            self.reservations.release(name, self.env.now)
        since = self._up_since.pop(name, None)
        if since is not None:
            self.node_seconds[name] = self.node_seconds.get(name, 0.0) + (self.env.now - since)
        uids = {p["metadata"]["uid"] for p in self.store.list("Pod") if p["spec"].get("nodeName") == name
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
        self.env.after(0, lambda: self._after_node_gone(node, uids))

    def _after_node_gone(self, node: Obj, uids: set[str]) -> None:
        name = node["metadata"]["name"]
        # node-lifecycle-controller's event (pkg/controller/nodelifecycle: RecordNodeEvent "RemovingNode")
        self.events.event(node, "Normal", "RemovingNode", f"Node {name} event: Removing Node {name} from Controller",
                          "node-controller")
        if uids:
            def orphaned() -> None:
                fail_orphans(self.store, self.env, name, uids)
            self.env.after(PODGC_QUARANTINE, orphaned)
        pool = self._slice_of.get(name)
        sl = self.slices.get(pool) if pool else None
        if sl is not None and sl.state == "Ready":
            self.fail_slice(sl.pool, name)

    def _register(self, pool: Obj, mt: catalog.MachineType, zone: str, node_name: str) -> None:
        pool_name = pool["metadata"]["name"]
        live = self._live_pool(pool_name)
        if live is None or live["metadata"].get("uid") != pool["metadata"].get("uid"):
            return  # the pool was deleted while the VM booted
        node, gpus, driver = self.build_node(pool, mt, zone, node_name)
        book = self.reservations
        if book is not None and book:
            if not self._reserve(pool, zone, node_name, node, book):
                return
        run = max_run_seconds(pool["spec"])
        if run is not None:
            # the VM's run counts from when Compute Engine created it, bootDelay before it registered
            end = self.env.now - parse_duration(pool["spec"].get("bootDelay", "90s")) + run
            node["metadata"].setdefault("annotations", {})[MACHINE_TERMINATION] = self.store.timestamp(end)
        self.store.create(node)  # the node watch schedules the VM's end from its annotation
        self.pool_of[node_name] = pool_name
        self._managed[node_name] = pool["metadata"].get("uid", "")
        self._zone_of[node_name] = zone
        self._up_since[node_name] = self.env.now
        # DRA node pools run the NVIDIA DRA driver (devices/dra/nvidia.py) instead of the device plugin.
        if gpus and not nvidia_dra.uses_dra(node["metadata"]["labels"]):
            if self._gets_driver(driver):
                delay = parse_duration(pool["spec"].get("driverInstallDelay", "3m"))
                self.env.after(delay, lambda: self._driver_ready(node_name, gpus))
            else:
                self._no_driver[node_name] = gpus

    def _run_out(self, node_name: str, uid: str) -> None:
        """Max run duration reached: Compute Engine deletes the VM (a multi-host slice goes whole) and the pool
        shrinks by it (the cluster autoscaler lowers its group's size, autoscaler/cluster_autoscaler.py); pods on
        it end as on any lost node (PodGC). The Node event is the twin's wording."""
        node = self.store.get("Node", "", node_name)
        if node is None or node["metadata"].get("uid") != uid:
            return
        self.events.event(node, "Normal", "MaxRunDurationReached", f"Compute Engine deleted VM {node_name}: its max "
                          "run duration was reached", "compute-engine")
        self.ran_out[self.pool_of.get(node_name, "")] += 1
        slice_pool = self._slice_of.get(node_name)
        if slice_pool is not None:
            self.delete_slice(slice_pool)
        else:
            self.store.delete("Node", "", node_name)

    def _reserve(self, pool: Obj, zone: str, node_name: str, node: Obj, book: Reservations) -> bool:
        """The VM consumes a matching reservation's slot when one is free: GKE's reservation labels and its place
        in a dense reservation's blocks on the Node, billed at the reservation's price. False: a pool that may only
        use reservations found none free (a fixed pool past its reservation), and Compute Engine refused the VM."""
        slot = book.claim(pool, zone, node_name, self.env.now)
        kind = pool_capacity_type(pool["spec"])
        if slot is None:
            if book.must_reserve(pool):
                self.events.event(pool, "Warning", "FailedToCreateInstance", f"Instance {node_name} in zone {zone}: "
                                  f"{rsv.CAPACITY_EXCEEDED}: Specified reservation {book.target_name(pool)} does "
                                  "not have available resources for the request.", "nodepool-controller")
                return False
            self._capacity_type[node_name] = kind
            return True
        node["metadata"]["labels"].update(book.node_labels(pool, slot))
        node["metadata"]["annotations"][POOL_PRICE] = f"{book.price(slot.reservation):.6f}"
        self._capacity_type[node_name] = "reserved"
        return True

    def _gets_driver(self, driver: str) -> bool:
        """GKE installs the driver, or the manual installer DaemonSet is there to do it."""
        return driver != "INSTALLATION_DISABLED" or self.store.get("DaemonSet", *DRIVER_INSTALLER) is not None

    def _on_daemonset(self, etype: str, ds: Obj, old: Obj | None) -> None:
        meta = ds["metadata"]
        if etype == "ADDED" and (meta.get("namespace"), meta["name"]) == DRIVER_INSTALLER and self._no_driver:
            self.env.after(0, self._install_waiting)

    def _install_waiting(self) -> None:
        """The driver installer DaemonSet appeared: it installs the driver on the GPU nodes waiting for one."""
        waiting, self._no_driver = self._no_driver, {}
        for node_name, gpus in sorted(waiting.items()):
            pool = self._live_pool(self.pool_of.get(node_name, ""))
            if pool is None or self.store.get("Node", "", node_name) is None:
                continue
            delay = parse_duration(pool["spec"].get("driverInstallDelay", "3m"))
            self.env.after(delay, partial(self._driver_ready, node_name, gpus))

    def build_node(self, pool: Obj, mt: catalog.MachineType, zone: str, node_name: str) -> tuple[Obj, int, str]:
        """The Node a pool's VM registers as, the nvidia.com/gpu count its device plugin will advertise, and the
        pool's driver installation mode (also the cluster autoscaler's template node, see `template_node`)."""
        spec = pool["spec"]
        labels, taints = node_labels_and_taints(pool, mt, zone, node_name)
        acc, gpu = pool_accelerator(spec, mt)
        partition = acc.get("gpuPartitionSize")
        shared = sharing.gke_sharing(acc.get("gpuSharingConfig"))[0]
        cap, alloc = node_resources(mt, int(spec.get("maxPodsPerNode", 110)))
        price = pool_hourly_price(pool, mt)
        annotations = {} if price is None else {"kubetwin.io/hourly-price-usd": f"{price:.6f}"}
        now = self.store.timestamp(self.env.now)
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name, "labels": labels, "annotations": annotations},
            "spec": {"providerID": f"gce://kubetwin/{zone}/{node_name}", "taints": taints},
            "status": {"capacity": cap, "allocatable": alloc, "nodeInfo": {"kubeletVersion": NODE_VERSION},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status", "lastTransitionTime": now}]},
        }
        gpus = (acc["count"] if acc else mt.gpu_count) if gpu else 0
        driver = acc.get("gpuDriverInstallation", "DEFAULT")
        if gpus and partition:  # GKE advertises every MIG partition as one nvidia.com/gpu
            gpus *= mig.partition_count(mig.model_of(gpu or "") or "", partition)
        gpus = shared.advertised({GPU: gpus})[GPU] if gpus else 0
        return node, gpus, driver

    # -- cluster autoscaler API -----------------------------------------------------------------------
    def template_node(self, pool: str, zone: str) -> Obj | None:
        """A node as the pool's next VM in `zone` will look once its GPU driver is up (the cluster autoscaler's
        node template, built from the pool's spec as a MIG instance template is)."""
        obj = self._live_pool(pool)
        return None if obj is None else self.template_for(obj, zone)

    def template_for(self, obj: Obj, zone: str) -> Obj:
        """`template_node` of a pool object, stored or not (node auto-provisioning's candidate pools, nap.py)."""
        pool = obj["metadata"]["name"]
        node, gpus, driver = self.build_node(obj, catalog.machine_type(obj["spec"]["machineType"]), zone,
                                             f"template-{pool}-{zone}")
        book = self.reservations
        slot = book.peek(obj, zone) if book is not None and book else None
        if book is not None and slot is not None:  # the next VM's place: pods selecting its block can scale it up
            node["metadata"]["labels"].update(book.node_labels(obj, slot))
        if gpus and self._gets_driver(driver) and not nvidia_dra.uses_dra(node["metadata"]["labels"]):
            st = node["status"]
            node = {**node, "status": {**st, "capacity": {**st["capacity"], GPU: str(gpus)},
                                       "allocatable": {**st["allocatable"], GPU: str(gpus)}}}
        return node

    def registered_counts(self) -> Counter[tuple[str, str]]:
        """Live nodes this controller created, counted per (pool, zone), in one pass (pool_nodes per group would
        sort every managed node once per group)."""
        return Counter((self.pool_of.get(n, ""), self._zone_of.get(n, "")) for n in self._managed
                       if n in self._up_since)

    def pool_nodes(self, pool: str, zone: str | None = None) -> list[str]:
        """Live nodes this controller created for the pool (in `zone`, when given), by name."""
        return sorted(n for n in self._managed if self.pool_of.get(n) == pool and n in self._up_since
                      and (zone is None or self._zone_of.get(n) == zone))

    def scale(self, pool: str, zone: str, delta: int, delay: float | None = None) -> list[str]:
        """Add `delta` VMs to the pool in `zone` (a MIG resize): they register after `delay` (default bootDelay).
        A multi-host TPU pool scales 0 <-> whole slice. Returns the names the new nodes will have."""
        obj = self._live_pool(pool)
        if obj is None or delta <= 0:
            return []
        if pool in self.slices:
            self.provision_slice(pool, delay)
            return self.slice_nodes(pool)
        if delay is None:
            delay = parse_duration(obj["spec"].get("bootDelay", "90s"))
        mt = catalog.machine_type(obj["spec"]["machineType"])
        names = []
        for _ in range(delta):
            self._grown[(pool, zone)] = i = self._grown.get((pool, zone), 0) + 1
            name = self._node_name(pool, zone, 10000 + i)
            names.append(name)
            self.env.after(delay, partial(self._register, obj, mt, zone, name))
        return names

    def resize(self, pool: str, before: int, after: int) -> None:
        """`gcloud container clusters resize --node-pool POOL --num-nodes N` (a new spec.nodeCount, per zone): more
        VMs boot as the pool's others do; fewer: in each zone the instance group removes instances "at random",
        running pods or not, and each is drained first, its pods gracefully terminated (their controllers make
        new ones elsewhere; bare pods are gone) -- gcloud container clusters resize's reference. Twin choices: the
        random pick is seeded by the cluster, pool, zone and time; graceful termination is the pods' deletion,
        at once. A multi-host TPU pool resizes whole slices (not modelled here: validate refuses it)."""
        obj = self._live_pool(pool)
        if obj is None or pool in self.slices:
            return
        for zone in obj["spec"].get("zones") or [DEFAULT_ZONE]:
            if after > before:
                self.scale(pool, zone, after - before)
                continue
            live = self.pool_nodes(pool, zone)
            gone = sorted(random.Random(f"{self.cluster}/{pool}/{zone}/{self.env.now}").sample(
                live, min(before - after, len(live))))
            leaving = set(gone)  # their pods, found in one pass over the pods
            for p in [p for p in self.store.list("Pod") if (p.get("spec") or {}).get("nodeName") in leaving]:
                self.store.delete("Pod", p["metadata"].get("namespace") or "", p["metadata"]["name"])
            for name in gone:
                self.store.delete("Node", "", name)

    def _driver_ready(self, node_name: str, gpus: int) -> None:
        """The GKE driver installer finished: the device plugin advertises nvidia.com/gpu."""
        def add(n: Obj) -> Obj:
            st = n["status"]
            return {**n, "status": {**st, "capacity": {**st["capacity"], GPU: str(gpus)},
                                    "allocatable": {**st["allocatable"], GPU: str(gpus)}}}
        self.store.patch("Node", "", node_name, add)

    def finish(self, until: float) -> None:
        """Close node lifetimes at the end of the run (for cost)."""
        for name, since in self._up_since.items():
            self.node_seconds[name] = self.node_seconds.get(name, 0.0) + (until - since)
        self._up_since.clear()

    def contribute(self, until: float) -> Contribution:
        """summary.json's cost: each node's lifetime times its hourly price, per pool, on-demand and Spot."""
        self.finish(until)
        cost_by_pool: dict[str, float] = {}
        node_hours: dict[str, float] = {}
        split: dict[str, list[float]] = {}  # pool -> [on-demand USD, Spot USD]
        for node, secs in sorted(self.node_seconds.items()):
            pool = self.pool_of[node]
            price, spot = self._price.get(node, (0.0, False))
            cost_by_pool[pool] = cost_by_pool.get(pool, 0.0) + price * secs / 3600
            node_hours[pool] = node_hours.get(pool, 0.0) + secs / 3600
            split.setdefault(pool, [0.0, 0.0])[1 if spot else 0] += price * secs / 3600
        cost = {
            "currency": "USD", "total_usd": _usd(sum(cost_by_pool.values())),
            "by_pool": {k: round(v, 2) for k, v in sorted(cost_by_pool.items())},
            "node_hours_by_pool": {k: round(v, 3) for k, v in sorted(node_hours.items())},
            "on_demand_usd": _usd(sum(v[0] for v in split.values())),
            "spot_usd": _usd(sum(v[1] for v in split.values())),
            "by_pool_provisioning": {k: {"on_demand_usd": round(v[0], 2), "spot_usd": round(v[1], 2)}
                                     for k, v in sorted(split.items())}}
        if self.reservations is not None and self.reservations:
            cost.update(self._reservation_cost(until, sum(cost_by_pool.values())))
        out: dict[str, Any] = {"cost": cost}
        if self.ran_out:
            out["max_run_duration"] = {"vms_deleted_by_pool": dict(sorted(self.ran_out.items()))}
        return Contribution(summary=out)

    def capacity_type(self, node: str) -> str:
        """reserved, spot, flex-start or on-demand: the capacity the node's VM came from."""
        return self._capacity_type.get(node, "on-demand")

    def _reservation_cost(self, until: float, nodes_usd: Any) -> dict:
        """With reservations in the scenario: the cost per capacity type (reserved, Spot, flex-start, on-demand),
        per pool too, and each reservation's used and idle VM-hours; the idle reserved VMs of the reservations the
        cluster's project owns are billed (Compute Engine bills a reservation's VMs whether or not they run) and
        added to the total."""
        types = ("reserved", "spot", "flex-start", "on-demand")
        by_type = dict.fromkeys(types, 0.0)
        by_pool: dict[str, dict[str, float]] = {}
        for node, pool, _hours, usd in self.node_costs():
            kind = self.capacity_type(node)
            by_type[kind] += usd
            by_pool.setdefault(pool, dict.fromkeys(types, 0.0))[kind] += usd
        assert self.reservations is not None
        report = self.reservations.report(until)
        idle = sum(r["idle_usd"] for r in report.values() if r["billed_to"] == rsv.PROJECT)
        return {"total_usd": _usd(nodes_usd + idle), "idle_reserved_usd": _usd(idle),
                "by_capacity_type": {**{k: round(v, 2) for k, v in by_type.items()},
                                     "idle-reserved": round(idle, 2)},
                "by_pool_capacity_type": {p: {k: round(v, 2) for k, v in t.items()} for p, t in sorted(
                    by_pool.items())},
                "reservations": report}

    def node_costs(self) -> list[tuple[str, str, float, float]]:
        """(node, pool, hours, USD) of every node whose lifetime is closed (after `finish`), in name order."""
        out = []
        for node, secs in sorted(self.node_seconds.items()):
            price, _ = self._price.get(node, (0.0, False))
            out.append((node, self.pool_of[node], secs / 3600, price * secs / 3600))
        return out

    def recreate(self, node_name: str, zone: str, delay: float | None = None) -> None:
        """The pool's managed instance group re-creates a VM that Compute Engine stopped (a Spot preemption,
        autoscaler/spot.py): the node registers again under the same instance name after `delay` (default: the
        pool's bootDelay), GPUs after the driver delay as at first boot. Multi-host slice hosts are re-created
        whole by fail_slice instead; a node that exists again, or a pool deleted meanwhile, is left alone."""
        pool_name = self.pool_of.get(node_name)
        obj = self._live_pool(pool_name) if pool_name else None
        if pool_name is None or obj is None or node_name not in self._managed or node_name in self._slice_of:
            return
        owner: str = pool_name
        uid = obj["metadata"].get("uid")
        if delay is None:
            delay = parse_duration(obj["spec"].get("bootDelay", "90s"))

        def up() -> None:
            live = self._live_pool(owner)
            if live is None or live["metadata"].get("uid") != uid or self.store.get("Node", "", node_name):
                return
            self._register(live, catalog.machine_type(live["spec"]["machineType"]), zone, node_name)
        self.env.after(delay, up)


def _own_recorder(store: Store) -> EventRecorder:
    """An EventRecorder for a controller built without the run's: its Event names are offset so they cannot
    collide with the run's recorder's (both name Events <object>.<counter>). runner.run() should pass its own."""
    rec = EventRecorder(store)
    rec._n = 0x40000000  # noqa: SLF001 - a disjoint counter range is the whole point
    return rec


POOL_PRICE = "kubetwin.io/hourly-price-usd"


def adopts_nodes(pool: dict) -> bool:
    """The NodePool adopts the scenario's Nodes labelled with its name (kubetwin.io/adopt-nodes: "true")."""
    return str(((pool.get("metadata") or {}).get("annotations") or {}).get(ADOPT_NODES, "")) == "true"


def pool_price_annotation(pool: dict) -> float | None:
    """The price per node-hour a NodePool says it pays (a negotiated or committed price, or one for a machine type
    without a published price, Ironwood); None when not given or not a positive finite number (the annotation
    registry reports a bad value at validate)."""
    raw = ((pool.get("metadata") or {}).get("annotations") or {}).get(POOL_PRICE)
    if raw is None:
        return None
    try:
        value = float(str(raw))
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


def pool_hourly_price(pool: dict, mt: catalog.MachineType) -> float | None:
    """What one of the pool's nodes costs per hour: the price the NodePool says it pays, else the catalog's
    published price (Spot or on-demand); validate refuses a pool with neither, so nothing is billed at $0. The
    pool's own figure wins: a price written on the object and then ignored would be a silent wrong answer."""
    given = pool_price_annotation(pool)
    return given if given is not None else catalog.hourly_price(mt, bool((pool.get("spec") or {}).get("spot")))

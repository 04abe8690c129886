"""Scale-down of the cluster autoscaler twin: the unneeded-node planner and its actuation (core/scaledown), a
collaborator of autoscaler/cluster_autoscaler.ClusterAutoscaler that reads its state through `ClusterView`.

Scale-down (core/scaledown): a node is unneeded while its utilization (requests / allocatable: GPU alone on a GPU
node, else the larger of cpu and memory; utils/utilization) is under the threshold (0.5) and all its pods can move;
after --scale-down-unneeded-time (10 m) it is removed unless the pool is at minNodeCount in that zone or a scale-up
happened within --scale-down-delay-after-add (10 m). Pods block removal when they have no controller, use local
storage (emptyDir/hostPath), run in kube-system, or carry cluster-autoscaler.kubernetes.io/safe-to-evict: "false";
"true" lifts the first three. A node whose pods a PodDisruptionBudget protects stays (autoscaler/pdb.py). The
node is tainted ToBeDeletedByClusterAutoscaler, gets `ScaleDown` "marked the node as toBeDeleted/unschedulable",
each pod `ScaleDown` "deleting pod for node scale down" and is deleted (its controller re-creates it), then the
node goes. Empty nodes go together, at most one non-empty node per loop.

An unready node waits --scale-down-unready-time (20 m) instead of the unneeded time (core/scaledown/unneeded
RemovableAt). A GPU node whose driver has not advertised nvidia.com/gpu yet counts as unready: CA's GPU
processor (utils/gpu FilterOutNodesWithUnreadyResources, processors/customresources) replaces it with a NotReady
copy, so a node bought for a GPU pod is not dropped before that pod can land on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from kubetwin.api.podresources import pod_requests
from kubetwin.autoscaler.pdb import blocked_by_budget
from kubetwin.autoscaler.simulation import (
    SAFE_TO_EVICT,
    SOURCE,
    TO_BE_DELETED,
    Snapshot,
    consumes,
    gpus_pending,
    place,
    pod_info,
    shape_sig,
)
from kubetwin.controllers.disruption import EVICTION_API_CONDITION
from kubetwin.controllers.nodelifecycle import node_is_ready
from kubetwin.k8s.conditions import replace_or_append_condition
from kubetwin.k8s.names import GKE_ACCELERATOR, GPU
from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.k8s.units import parse_duration
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.store.store import Obj

if TYPE_CHECKING:
    from kubetwin.api.twin import ClusterAutoscalerSpec
    from kubetwin.autoscaler.cluster_autoscaler import NodeGroup
    from kubetwin.autoscaler.computeclass import ComputeClasses
    from kubetwin.autoscaler.nodepool import NodePoolController
    from kubetwin.devices.dra.allocator import Features
    from kubetwin.sim.env import Environment
    from kubetwin.store.events import EventRecorder
    from kubetwin.store.store import Store


class ClusterView(Protocol):
    """What scale-down reads of the cluster autoscaler: its clients, options, node groups and cluster snapshot."""

    store: Store
    env: Environment
    events: EventRecorder
    pools: NodePoolController
    spec: ClusterAutoscalerSpec
    features: Features
    groups: dict[tuple[str, str], NodeGroup]
    bound: dict[str, dict[str, Obj]]  # node -> pod key -> pod
    pending: dict[str, Obj]  # unschedulable pods
    protected: set[str]  # nodes booked by ProvisioningRequests
    unneeded_time: float
    last_scale_up: float
    last_scale_down_failure: float
    dirty: bool  # a pod, node or pool changed since the last loop

    classes: ComputeClasses  # GKE ComputeClasses: a class's autoscalingPolicy replaces the thresholds below

    def registered(self, g: NodeGroup) -> list[str]: ...

    def node_infos(self, nodes: dict[str, Obj] | None = None, excluded: AbstractSet[str] = ...) -> list[NodeInfo]: ...


class ScaleDown:
    """Owns which nodes are unneeded (and since when), which are stuck or unready, and the scale-downs done."""

    def __init__(self, ca: ClusterView) -> None:
        self.ca = ca
        self.unneeded: dict[str, float] = {}  # node (or "slice/<pool>") -> since
        self._stuck: set[str] = set()  # unneeded nodes whose pods found no other place at the last try
        self._unready: set[str] = set()  # unneeded nodes that are unready (GPUs not advertised yet)
        self._delay: dict[str, float] = {}  # node -> its ComputeClass's consolidationDelayMinutes, in seconds
        self.scale_downs: list[dict] = []

    # -- scale-down -------------------------------------------------------------------------------------
    def utilization(self, node: Obj, extra: Sequence[Obj] = ()) -> tuple[float, bool]:
        """Requests / allocatable of the node's pods and of `extra` (pending pods the loop placed on it)."""
        ni = NodeInfo.from_node(node)
        req: Counter = Counter()
        for p in [*self.ca.bound.get(node["metadata"]["name"], {}).values(), *extra]:
            req.update(pod_requests(p))
        gpu = GKE_ACCELERATOR in (node["metadata"].get("labels") or {})
        if gpu:
            alloc = ni.allocatable.get(GPU, 0)
            return (req[GPU] / alloc if alloc else 0.0), True
        return max(req[r] / ni.allocatable[r] for r in ("cpu", "memory") if ni.allocatable.get(r)), False

    @staticmethod
    def unready(node: Obj) -> bool:
        """NotReady, or a device-plugin GPU node (gke-accelerator label) with no nvidia.com/gpu advertised yet."""
        return gpus_pending(node) or not node_is_ready(node)

    def blocking(self, pod: Obj) -> str | None:
        """Why this pod keeps its node (core/scaledown, simulator/drainability), or None."""
        safe = (pod["metadata"].get("annotations") or {}).get(SAFE_TO_EVICT)
        if safe == "false":
            return "pod annotated as not safe to evict"
        if safe == "true":
            return None
        if controller_of(pod) is None:
            return "pod not backed by a controller"
        if pod["metadata"].get("namespace") == "kube-system":
            return "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present"
        if any("emptyDir" in v or "hostPath" in v for v in pod["spec"].get("volumes") or []):
            return "pod with local storage present"
        return None

    def run(self) -> None:
        """Unneeded nodes are recomputed only after a pod, node or pool changed (nothing else changes them);
        their timers are checked every loop."""
        if self.ca.dirty:
            self._update_unneeded(self.ca.env.now)
        self._remove_unneeded(self.ca.env.now)

    def _update_unneeded(self, now: float) -> None:
        thr, gthr = self.ca.spec.scaleDownUtilizationThreshold, self.ca.spec.scaleDownGpuUtilizationThreshold
        nodes: dict[str, Obj] = {n["metadata"]["name"]: n for n in self.ca.store.list("Node")}
        self._stuck = set()
        self._unready = set()
        self._delay = {}
        with_classes = bool(self.ca.classes)
        hinted = self._pending_placed(nodes)
        for g in list(self.ca.groups.values()):
            if g.hosts:  # a multi-host slice goes whole, once all its hosts are empty
                hosts = self.ca.pools.slice_nodes(g.pool)
                if g.target and not any(self.ca.bound.get(n) for n in hosts) and not set(hosts) & self.ca.protected:
                    self.unneeded.setdefault(f"slice/{g.pool}", now)
                else:
                    self.unneeded.pop(f"slice/{g.pool}", None)
                continue
            for name in self.ca.registered(g):
                node = nodes.get(name)
                if node is None or name in self.ca.protected:
                    self.unneeded.pop(name, None)
                    continue
                util, gpu = self.utilization(node, hinted.get(name, []))
                pods = list(self.ca.bound.get(name, {}).values())
                limit = gthr if gpu else thr
                policy = self.ca.classes.policy(node) if with_classes else {}
                if policy:  # the node's ComputeClass autoscalingPolicy (percent; minutes)
                    key = "gpuConsolidationThreshold" if gpu else "consolidationThreshold"
                    limit = policy[key] / 100 if key in policy else limit
                    if "consolidationDelayMinutes" in policy:
                        self._delay[name] = 60.0 * policy["consolidationDelayMinutes"]
                if util >= limit or any(self.blocking(p) for p in pods):
                    self.unneeded.pop(name, None)
                    continue
                self.unneeded.setdefault(name, now)
                if self.unready(node):
                    self._unready.add(name)
        live = {n for g in self.ca.groups.values() for n in self.ca.registered(g)}
        for key in [k for k in self.unneeded if not k.startswith("slice/") and k not in live]:
            del self.unneeded[key]

    def _pending_placed(self, nodes: dict[str, Obj]) -> dict[str, list[Obj]]:
        """FilterOutSchedulable's side effect on scale-down: pending pods that fit a node now are put on it in CA's
        cluster snapshot, so that node is used, not unneeded (a GPU node whose driver just advertised its GPUs
        is not removed in the instant before the scheduler binds the pod that bought it)."""
        pods = [p for _, p in sorted(self.ca.pending.items()) if not consumes(p)]
        if not pods:
            return {}
        room = self.ca.node_infos(nodes)
        snapshot = Snapshot(room, self.ca.store, self.ca.features)
        out: dict[str, list[Obj]] = {}
        failed: set[str] = set()  # room only shrinks: a shape that found none finds none later (as in scale_up)
        for p in pods:
            sig = shape_sig(p) if not snapshot.wants(p) else None
            ni = None if sig in failed else place(pod_info(p), room, snapshot)
            if ni is not None:
                out.setdefault(ni.name, []).append(p)
            elif sig is not None:
                failed.add(sig)
        return out

    def _remove_unneeded(self, now: float) -> None:
        unready_time = parse_duration(self.ca.spec.scaleDownUnreadyTime)
        due = sorted((since, key) for key, since in self.unneeded.items()
                     if now - since >= (unready_time if key in self._unready
                                        else self._delay.get(key, self.ca.unneeded_time))
                     and key not in self._stuck)
        if not due or now - self.ca.last_scale_up < self._delay_after_add() or \
                now - self.ca.last_scale_down_failure < parse_duration(self.ca.spec.scaleDownDelayAfterFailure):
            return
        nodes: dict[str, Obj] = {n["metadata"]["name"]: n for n in self.ca.store.list("Node")}
        group_of = {n: g for g in self.ca.groups.values() for n in self.ca.registered(g)}
        size = {id(g): len(self.ca.registered(g)) for g in self.ca.groups.values()}
        drained_one = False
        gone: set[str] = set()
        for _since, key in due:
            if key.startswith("slice/"):
                g = self.ca.groups[next(k for k in self.ca.groups if k[0] == key[6:])]
                self.ca.pools.delete_slice(g.pool)
                g.target = 0
                del self.unneeded[key]
                continue
            group = group_of.get(key)
            if group is None or key not in nodes or size[id(group)] <= group.min:
                continue
            pods = list(self.ca.bound.get(key, {}).values())
            if pods:
                if drained_one:
                    continue
                if blocked_by_budget(self.ca.store, pods) or not self._fits_elsewhere(pods, nodes, gone | {key}):
                    self._stuck.add(key)  # until something changes
                    continue
                drained_one = True
            gone.add(key)
            size[id(group)] -= 1
            self.remove(nodes[key], group, pods)

    def _delay_after_add(self) -> float:
        return parse_duration(self.ca.spec.scaleDownDelayAfterAdd)

    def _fits_elsewhere(self, pods: list[Obj], nodes: dict[str, Obj], excluded: set[str]) -> bool:
        infos = self.ca.node_infos(nodes, excluded)
        snapshot = Snapshot(infos, self.ca.store, self.ca.features)
        return all(place(pod_info(p), infos, snapshot) is not None for p in pods)

    def remove(self, node: Obj, g: NodeGroup, pods: list[Obj]) -> None:
        name = node["metadata"]["name"]
        self._mark(node)
        self._evict(pods)
        self.ca.store.delete("Node", "", name)
        self.unneeded.pop(name, None)
        g.target = max(g.min, g.target - 1)
        self.scale_downs.append({"t": self.ca.env.now, "node": name, "group": f"{g.pool}/{g.zone}",
                                 "evicted": len(pods)})

    def remove_slice(self, g: NodeGroup, hosts: list[str], pods: list[Obj]) -> None:
        """Drain a multi-host TPU slice and delete it whole (its pool back to no slice), as one scale-down."""
        for name in hosts:
            node = self.ca.store.get("Node", "", name)
            if node is not None:
                self._mark(node)
        self._evict(pods)
        self.ca.pools.delete_slice(g.pool)
        g.target = 0
        self.unneeded.pop(f"slice/{g.pool}", None)
        self.scale_downs.append({"t": self.ca.env.now, "node": hosts[0], "slice": list(hosts),
                                 "group": f"{g.pool}/{g.zone}", "evicted": len(pods)})

    def _mark(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        taint = {"key": TO_BE_DELETED, "value": str(int(self.store_epoch())), "effect": "NoSchedule"}
        node = self.ca.store.patch("Node", "", name, lambda n: {**n, "spec": {**n["spec"], "taints": [
            *(n["spec"].get("taints") or []), taint]}}) or node
        self.ca.events.event(node, "Normal", "ScaleDown", "marked the node as toBeDeleted/unschedulable", SOURCE)

    def _evict(self, pods: list[Obj]) -> None:
        for p in pods:
            self.ca.events.event(p, "Normal", "ScaleDown", "deleting pod for node scale down", SOURCE)
            ns = p["metadata"].get("namespace") or "default"
            # the drain evicts through the Eviction API, which stamps DisruptionTarget before the delete
            # (pkg/registry/core/pod/storage/eviction.go; a Job's podFailurePolicy can match it)
            p = self.ca.store.patch("Pod", ns, p["metadata"]["name"], lambda cur: {**cur, "status": {
                **(cur.get("status") or {}), "conditions": replace_or_append_condition(
                    (cur.get("status") or {}).get("conditions"), {**EVICTION_API_CONDITION, "lastTransitionTime":
                                                                   self.ca.store.timestamp(self.ca.env.now)})}}) or p
            self.ca.store.delete("Pod", ns, p["metadata"]["name"])

    def store_epoch(self) -> float:
        start = datetime.fromisoformat(self.ca.store.timestamp(0).replace("Z", "+00:00"))
        return start.timestamp() + self.ca.env.now

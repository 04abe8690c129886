"""The cluster autoscaler twin: grows autoscaling node pools for unschedulable pods and removes unneeded nodes.

What it follows (kubernetes/autoscaler cluster-autoscaler, FAQ.md and core/): every --scan-interval (10 s) it takes
the pods the scheduler left PodScheduled=False/Unschedulable, first counts the room on nodes already coming up
(resized groups whose VMs have not registered, GPU nodes whose driver is not up yet), then simulates each node group
(one GKE MIG: a pool in one zone; a multi-host TPU pool is one group of a whole slice) with a template node built
exactly as the NodePool controller builds its nodes, running the scheduler's own profile (autoscaler/simulation.py:
VolumeBinding's PreFilter, every node-only Filter registered in scheduler/plugins.DEFAULT, NodeResourcesFit),
bin-packs the pods onto new template nodes up to maxNodeCount, picks one option with the expander and resizes that
group. Pods get CA's events: `TriggeredScaleUp` "pod triggered scale-up: [{<MIG URL> 1->2 (max: 4)}]" and
`NotTriggerScaleUp` "pod didn't trigger scale-up: <count reason>, ..." (reasons: the filters' texts, "max node group
size reached", "in backoff after failed scale-up"). VMs Compute Engine refuses (autoscaler/capacity.py) give GKE's
`FailedScaleUp` "Node scale up in zones <zone> associated with this pod failed: GCE quota exceeded. Pod is at risk of
not being scheduled." and put the group in backoff: 5 min doubling to 30 min, forgotten after 3 h without failure
(--initial-node-group-backoff-duration, --max-node-group-backoff-duration, --node-group-backoff-reset-timeout).

Cluster size: CA never grows the cluster past --max-nodes-total (core/scaleup/orchestrator/orchestrator.go,
kubernetes/autoscaler@bdef0a7a: the estimator's clusterCapacityThreshold stops bin-packing at the flag minus the
current nodes, registered and upcoming; an atomic group whose whole size would cross it is skipped, "atomic scale-up
exceeds cluster node count limit"; GetCappedNewNodeCount fails with "max node total count already reached"). GKE
does not publish its CA's flags; the twin's assumption is that GKE runs it at the cluster's node limit,
`api.twin.MAX_NODES_PER_CLUSTER` (15,000, https://cloud.google.com/kubernetes-engine/quotas). Pods the cap leaves
out get NotTriggerScaleUp with upstream's words for the cap, "max node total count already reached" (the twin puts
them among the reasons; upstream's estimator just stops).

Scale-down: see autoscaler/scaledown.py.

Twin simplifications (assumptions, labelled): the `price` expander ranks by the
hourly price of the nodes added per pod helped (CA's also weighs a preferred node size); ties in any expander go
to the group with fewer nodes, then by name (CA falls back to `random`); a refused VM is reported in the same loop.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubetwin import catalog
from kubetwin.api import twin
from kubetwin.api.podresources import pod_requests
from kubetwin.api.twin import DEFAULT_ZONE, ClusterAutoscalerSpec, ClusterAutoscaling
from kubetwin.autoscaler.capacity import CapacityModel, Refusal, shape_of
from kubetwin.autoscaler.computeclass import (
    MIGRATION_BACKOFF,
    MIGRATION_SCALE_UP_TIMEOUT,
    ComputeClasses,
    Migration,
    class_of,
    misconfigurations,
    status_conditions,
)
from kubetwin.autoscaler.nap import (
    MIG_SKIPPED,
    NAP_RESOURCES_EXCEEDED,
    POOL_CREATION,
    NodeAutoprovisioning,
    apply_limits,
    exceeded,
    limit_reason,
    node_usage,
    scaled,
)
from kubetwin.autoscaler.nodepool import (
    NodePoolController,
    group_hash,
    initial_node_count,
    pool_hourly_price,
    termination_time,
)
from kubetwin.autoscaler.pdb import blocked_by_budget
from kubetwin.autoscaler.scaledown import ScaleDown
from kubetwin.autoscaler.simulation import (
    CONSUME,
    IN_BACKOFF,
    MAX_NODE_GROUP_SIZE,
    PRIORITY_CM,
    QUEUED_LABEL,
    SAFE_TO_EVICT,
    SOURCE,
    TO_BE_DELETED,
    Snapshot,
    consumes,
    gpus_pending,
    place,
    pod_info,
    pod_key,
    pre_filter,
    shape_sig,
    static_reason,
    template_copy,
)
from kubetwin.devices.dra.allocator import Features
from kubetwin.k8s.conditions import conditions_of, find_condition
from kubetwin.k8s.names import GKE_CAPACITY_CHECK_WAIT, GKE_NODEPOOL, GKE_RECYCLE_LEAD_TIME, GPU, ZONE
from kubetwin.k8s.units import parse_duration
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

__all__ = ["CONSUME", "QUEUED_LABEL", "SAFE_TO_EVICT", "SOURCE", "TO_BE_DELETED", "ClusterAutoscaler", "NodeGroup",
           "Option", "consumes", "place", "pod_info", "pod_key"]


EXPENDABLE_CUTOFF = -10  # --expendable-pods-priority-cutoff
MAX_NODES_TOTAL = "max node total count already reached"  # orchestrator.go GetCappedNewNodeCount's error
RECYCLING = "recycling"  # the defrag plugin that replaces flex-start nodes before their end
RECYCLING_BACKOFF = 60.0  # defrag/plugins/recycling BackoffDuration
ATOMIC_OVER_LIMIT = "atomic scale-up exceeds cluster node count limit"  # filterValidScaleUpNodeGroups' skip reason


@dataclass
class NodeGroup:
    pool: str
    zone: str
    min: int
    max: int
    url: str
    target: int = 0
    hosts: int = 0  # >0: a multi-host TPU slice, scaled 0 <-> hosts
    backoff_until: float = -1.0
    backoff: float = 0.0
    last_failure: float = -1e18
    added: list[str] = field(default_factory=list)
    waits: list[CapacityWait] = field(default_factory=list)  # flex-start resize requests waiting for capacity


@dataclass
class CapacityWait:
    """A flex-start resize request Compute Engine could not fill when it was made: GKE's autoscaler keeps it open,
    its VMs counted as coming, for the pool's capacity-check wait time (the ComputeClass rule's
    capacityCheckWaitTimeSeconds, at least the 15 min default), taking capacity as it appears; what is still
    missing then fails the scale-up (backoff, the class falls back). GoogleCloudPlatform/cluster-autoscaler
    pkg/resizerequests/error_reporter.go handleFailedResizeRequestScaleUps, gke_manager.go
    capacityCheckWaitTimeSecondsLabelValue, gke_cloud_provider_impl.go DefaultFlexStartCapacityCheckWaitTime."""

    missing: int
    until: float
    refusal: Refusal
    pods: list[Obj]
    atomic: bool = False  # a multi-host TPU slice: all its hosts at once


@dataclass
class Option:
    group: NodeGroup
    nodes: int
    pods: list[Obj]
    template: NodeInfo


class ClusterAutoscaler:
    def __init__(self, store: Store, env: Environment, events: EventRecorder, pools: NodePoolController,
                 spec: ClusterAutoscalerSpec | None = None, capacity: CapacityModel | None = None,
                 seed: int = 0, features: Features = Features(), autoscaling: ClusterAutoscaling | None = None
                 ) -> None:
        self.store, self.env, self.events, self.pools = store, env, events, pools
        self.features = features  # the DRA feature gates, as the scheduler has them
        self.spec = spec or ClusterAutoscalerSpec()
        self.capacity = capacity or CapacityModel(store, env)
        self.rng = random.Random(f"cluster-autoscaler/{seed}")
        self.interval = parse_duration(self.spec.scanInterval)
        unneeded = self.spec.scaleDownUnneededTime or ("1m" if self.spec.autoscalingProfile ==
                                                        "optimize-utilization" else "10m")
        self.unneeded_time = parse_duration(unneeded)
        # --max-nodes-total: the twin's assumption, GKE's per-cluster node limit (module doc)
        self.max_nodes_total = twin.MAX_NODES_PER_CLUSTER
        self.groups: dict[tuple[str, str], NodeGroup] = {}
        self.pending: dict[str, Obj] = {}  # unschedulable pods
        self.bound: dict[str, dict[str, Obj]] = {}  # node -> pod key -> pod
        self.protected: set[str] = set()  # nodes booked by ProvisioningRequests
        # flex-start nodes with a recycling lead time: name -> (termination, lead time s) (defrag recycling)
        self._recyclable: dict[str, tuple[float, int]] = {}
        self.provreq: Any = None  # autoscaler/provreq.py sets itself here
        self.active = False
        self.dirty = True  # a pod, node or pool changed since the last loop
        self._wake = 0.0  # the next time a loop must redo scale-up though nothing changed (backoff, capacity)
        self._failed_since_scan = False  # a resize failed in this loop (ComputeClass fallback needs the next one)
        # a loop scaled one option up: other pending pods may need another, which CA's next loop (one
        # --scan-interval later) gives them; nothing the store sees changes until the new VMs register
        self._scaled_since_scan = False
        self._class_status = False  # a ComputeClass or NodePool changed: the classes' Health conditions again
        self.last_scale_up = self.last_scale_down_failure = -1e18
        self.scale_ups: list[dict] = []
        self.scaledown = ScaleDown(self)
        # GKE ComputeClasses: bucket order, fallback, migration, the cluster-level default class
        self.classes = ComputeClasses(store, seed, self.spec.defaultComputeClass)
        store.watch("NodePool", self._on_pool)
        store.watch("ComputeClass", self._on_class)
        # GKE node auto-provisioning and the cluster's resource limits (autoscaler/nap.py); off by default
        self.nap = NodeAutoprovisioning(self, autoscaling or ClusterAutoscaling())
        if self.nap.enabled:
            env.after(0, self.activate)

    # -- activation: nothing runs per pod unless a pool autoscales or a ProvisioningRequest exists ----------------
    def activate(self) -> None:
        if self.active:
            return
        self.active = True
        for pod in self.store.list("Pod"):
            self._on_pod("ADDED", pod, None)
        for node in self.store.list("Node"):  # nodes that registered before the autoscaler had work
            self._on_node("ADDED", node, None)
        self.store.watch("Pod", self._on_pod)
        self.store.watch("Node", self._on_node)
        self.env.after(self.interval, self._scan)

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        self.dirty = True
        if etype == "MODIFIED":  # a VM's end is read when its node registers and when it goes
            return
        meta = node["metadata"]
        end = termination_time(meta, self.store.start_time)
        if end is None:
            return
        name, labels = meta["name"], meta.get("labels") or {}
        if etype == "DELETED":
            self._recyclable.pop(name, None)
            if end <= self.env.now:  # Compute Engine deleted it at its max run duration
                g = self._group_of(labels)
                if g is not None:
                    g.target = max(g.min, g.target - 1)
        elif etype == "ADDED" and str(labels.get(GKE_RECYCLE_LEAD_TIME, "")).isdigit():
            self._recyclable[name] = (end, int(labels[GKE_RECYCLE_LEAD_TIME]))

    def _on_class(self, etype: str, cc: Obj, old: Obj | None) -> None:
        if old is not None and old.get("spec") == cc.get("spec") and etype == "MODIFIED":
            return  # its status (the Health conditions this autoscaler writes)
        self.dirty = True
        self._class_status = True
        if not self.active and ((cc.get("spec") or {}).get("nodePoolAutoCreation") or {}).get("enabled"):
            self.env.after(0, self.activate)  # the class's pods may need a pool created (autoscaler/nap.py)

    def _on_pool(self, etype: str, pool: Obj, old: Obj | None) -> None:
        name, spec = pool["metadata"]["name"], pool["spec"]
        if etype == "DELETED":
            for key in [k for k in self.groups if k[0] == name]:
                del self.groups[key]
            return
        auto = spec.get("autoscaling")
        self.dirty = True
        self._class_status = True
        if etype != "ADDED" or not auto:
            return
        hosts = len(self.pools.slice_nodes(name))
        ig_hash = group_hash(self.pools.cluster, name)
        for zone in (spec.get("zones") or [DEFAULT_ZONE])[:1 if hosts else None]:
            url = (f"https://www.googleapis.com/compute/v1/projects/kubetwin/zones/{zone}/instanceGroups/"
                   f"gke-{self.pools.cluster}-{name}-{ig_hash}-grp")
            self.groups[(name, zone)] = NodeGroup(name, zone, auto["minNodeCount"], auto["maxNodeCount"], url,
                                                  target=initial_node_count(spec), hosts=hosts)
        self.env.after(0, self.activate)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        self.dirty = True
        if class_of(pod["spec"].get("nodeSelector")) is not None:
            self.classes.observe_pod(etype, pod, self.env.now)
        key, node = pod_key(pod), pod["spec"].get("nodeName")
        if etype == "DELETED" or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self.pending.pop(key, None)
            if node:
                self.bound.get(node, {}).pop(key, None)
            return
        if node:
            self.pending.pop(key, None)
            self.bound.setdefault(node, {})[key] = pod
            return
        cond = find_condition(conditions_of(pod), "PodScheduled")
        if cond and cond["status"] == "False" and cond.get("reason") == "Unschedulable":
            self.pending[key] = pod
        else:
            self.pending.pop(key, None)

    # -- the loop ---------------------------------------------------------------------------------------
    def _scan(self) -> None:
        if self.provreq is not None:
            self.provreq.reconcile()
        if self._class_status and self.classes:
            self.class_health()
        if any(g.waits for g in self.groups.values()):
            self.retry_waits()
        if self.dirty or self.env.now >= self._wake:
            self.scale_up()
            if self.classes or self._recyclable:
                self.migrate()
        if self.spec.scaleDownEnabled:
            self.scaledown.run()
        if self.nap:
            self.nap.reap()
        self.dirty = False
        future = [g.backoff_until for g in self.groups.values() if g.backoff_until > self.env.now]
        future += [t for t in self.classes.migration_backoff.values() if t > self.env.now]
        future += [m.since + MIGRATION_SCALE_UP_TIMEOUT for m in self.classes.migrations]
        # a flex-start node becomes a recycling candidate once less than its lead time is left (whole seconds, as
        # upstream's int TTL): wake the loop just past that point
        future += [end - lead + 1 for end, lead in self._recyclable.values() if end - lead + 1 > self.env.now]
        future += [w.until for g in self.groups.values() for w in g.waits]
        if self._failed_since_scan and self.classes:
            # a rule that just failed is in backoff: CA's next loop tries the next rule (ComputeClass fallback);
            # without classes the loop is skipped until something changes, which gives the same decisions
            future.append(self.env.now + self.interval)
        self._failed_since_scan = False
        if self._scaled_since_scan:
            future.append(self.env.now + self.interval)
        self._scaled_since_scan = False
        future += self.capacity.changes_after(self.env.now)
        reap = self.nap.next_reap() if self.nap else None
        if reap is not None:
            future.append(reap)
        self._wake = min(future, default=float("inf"))
        self.env.after(self.interval, self._scan)

    def template(self, g: NodeGroup) -> NodeInfo | None:
        node = self.pools.template_node(g.pool, g.zone)
        return None if node is None else NodeInfo.from_node(node)

    def registered(self, g: NodeGroup) -> list[str]:
        return self.pools.pool_nodes(g.pool, g.zone)

    def node_infos(self, nodes: dict[str, Obj] | None = None,
                   excluded: AbstractSet[str] = frozenset()) -> list[NodeInfo]:
        """The current nodes with what their pods request (nodes being deleted left out), in name order."""
        if nodes is None:
            nodes = {n["metadata"]["name"]: n for n in self.store.list("Node")}
        infos = []
        for name in sorted(nodes):
            node = nodes[name]
            if name in excluded or any(t.get("key") == TO_BE_DELETED for t in node["spec"].get("taints") or []):
                continue
            ni = NodeInfo.from_node(node)
            for p in self.bound.get(name, {}).values():
                ni.add_pod(p, pod_requests(p))
            infos.append(ni)
        return infos

    def upcoming(self, g: NodeGroup) -> list[NodeInfo]:
        """Room on nodes coming up: VMs asked for that have not registered, and registered GPU nodes whose
        driver has not advertised nvidia.com/gpu yet (CA counts both as upcoming)."""
        tmpl_node = self.pools.template_node(g.pool, g.zone)
        if tmpl_node is None:
            return []
        names = self.registered(g)
        n = max(0, g.target - len(names))
        wants_gpu = GPU in tmpl_node["status"]["allocatable"]
        tmpl = NodeInfo.from_node(tmpl_node)
        out = [template_copy(tmpl, f"upcoming-{i}") for i in range(n)]
        for name in names if wants_gpu else ():
            node = self.store.get("Node", "", name)
            if node is not None and gpus_pending(node):
                ni = template_copy(tmpl, f"upcoming-{name}")
                for p in self.bound.get(name, {}).values():
                    ni.add_pod(p, pod_requests(p))
                out.append(ni)
        return out

    def cluster_room(self) -> int:
        """How many nodes --max-nodes-total still allows: the limit less the cluster's nodes (every Node, static
        ones too, as CA lists them) and the VMs its groups have asked for that have not registered (upstream's
        len(nodes) + len(upcomingNodes)); the twin adds the first VMs of pools without autoscaling still booting,
        which CA does not see, so that the cluster never passes GKE's limit."""
        registered = self.pools.registered_counts()
        upcoming = sum(max(0, g.target - registered[(g.pool, g.zone)]) for g in self.groups.values())
        return self.max_nodes_total - self.store.count("Node") - upcoming - self.pools.booting

    def scalable_groups(self) -> list[NodeGroup]:
        out = []
        for key in sorted(self.groups):
            g = self.groups[key]
            pool = self.store.get("NodePool", "", g.pool)
            if pool is not None and (pool["spec"].get("labels") or {}).get(QUEUED_LABEL) != "true":
                out.append(g)
        return out

    # -- scale-up ---------------------------------------------------------------------------------------
    def scale_up(self) -> None:
        # --expendable-pods-priority-cutoff (-10): pods below it never trigger a scale-up
        pods = [p for k, p in sorted(self.pending.items())
                if not consumes(p) and (p["spec"].get("priority") or 0) >= EXPENDABLE_CUTOFF]
        if not pods:
            return
        # FilterOutSchedulable: pods that fit the current nodes' free room or nodes already coming up need nothing.
        # Room only shrinks within a loop, so once a pod shape fails every later pod of that shape fails too.
        room = self.node_infos() + [ni for g in self.scalable_groups() for ni in self.upcoming(g)]
        snapshot = Snapshot(room, self.store, self.features)
        infos = {pod_key(p): pod_info(p) for p in pods}
        pre = {pod_key(p): pre_filter(self.store, p) for p in pods}  # PreFilter: no node at all can take these
        # the per-shape shortcuts hold only for pods InterPodAffinity and DynamicResources leave alone: their
        # verdicts depend on the pod's labels and claims and on the pods placed before it
        free = {pod_key(p): not snapshot.wants(p) for p in pods}
        failed: set[str] = set()
        left = []
        for p in pods:
            sig = shape_sig(p)
            if pre[pod_key(p)] is not None:
                left.append(p)
            elif (free[pod_key(p)] and sig in failed) or place(infos[pod_key(p)], room, snapshot) is None:
                failed.add(sig)
                left.append(p)
        pods = left
        if not pods:
            return
        reasons: dict[str, Counter] = {pod_key(p): Counter() for p in pods}
        options = []
        cluster_room = self.cluster_room()  # the estimator's clusterCapacityThreshold (module doc)
        with_classes = bool(self.classes)
        # the cluster's resource limits (autoscaler/nap.py): a group whose next node (or whole slice) passes one is
        # skipped before simulation, and its reason counts for every pod left pending (upstream skippedNodeGroups)
        left = self.nap.left() if self.nap.limits else None
        skipped: Counter = Counter()
        for g in self.scalable_groups():
            pool_obj = self.store.get("NodePool", "", g.pool) if with_classes else None
            if pool_obj is not None and not self.classes.eligible(pool_obj):
                continue  # a class's pool outside its rules, under DoNotScaleUp (autoscaler/computeclass.py)
            tmpl = self.template(g)
            if tmpl is None:
                continue
            if left and self.env.now >= g.backoff_until and (
                    (g.hosts and g.target == 0) or (not g.hosts and self._room(g) > 0)):
                over = exceeded(left, scaled(node_usage(tmpl.node), g.hosts or 1))
                if over:
                    skipped[limit_reason(over)] += 1
                    self.nap.note(MIG_SKIPPED, [limit_reason(over)], pool=g.pool, zone=g.zone)
                    continue
            bins, helped = self.estimate(g.hosts, tmpl, pods, infos, pre, snapshot, cluster_room, reasons)
            if not helped:
                continue
            headroom = (g.hosts if g.target == 0 else 0) if g.hosts else self._room(g)
            why = IN_BACKOFF if self.env.now < g.backoff_until else (MAX_NODE_GROUP_SIZE if headroom <= 0 else None)
            if why is None and g.hosts and g.hosts > cluster_room:
                why = ATOMIC_OVER_LIMIT
            if why is not None:
                for p, _ in helped:
                    reasons[pod_key(p)][why] += 1
                continue
            n = g.hosts if g.hosts else min(len(bins), headroom)
            options.append(Option(g, n, [p for p, b in helped if g.hosts or b < n], tmpl))
            for p, b in helped:
                if not g.hosts and b >= n:  # the estimator stopped at the group's max size
                    reasons[pod_key(p)][MAX_NODE_GROUP_SIZE] += 1
        nap_delay = None
        if not options and (self.nap or with_classes):  # node auto-provisioning: a pool for pods no pool helps
            made = self._autoprovision(pods, infos, pre, snapshot, cluster_room)
            if made is not None:
                options = [made]
                nap_delay = self._new_pool_delay(made.group.pool)
        options = self._any_policy(options)
        if with_classes and options:  # the first rule bucket with options (ComputeClass priorities)
            options = self.classes.order(options, lambda o: self.store.get("NodePool", "", o.group.pool))
        chosen = self.expand(options) if options else None
        if chosen is not None and left and not chosen.group.hosts:  # upstream ApplyLimits on the chosen option
            chosen = Option(chosen.group, apply_limits(chosen.nodes, left, node_usage(chosen.template.node)),
                            chosen.pods, chosen.template)
        if chosen is not None and chosen.nodes > 0:
            self.execute(chosen, nap_delay)
            self._scaled_since_scan = len(chosen.pods) < len(pods)  # pods it does not help: the next loop
            # upstream's eventing processor writes NotTriggerScaleUp only in a loop without a scale-up (and GKE
            # logs no noScaleUp for it)
            self.nap.end_loop(scaled_up=True)
            return
        self.nap.end_loop(scaled_up=False)
        for p in pods:
            key = pod_key(p)
            counts = reasons[key] + skipped
            msg = ", ".join(sorted(f"{c} {r}" for r, c in counts.items() if c))
            self.events.event(p, "Normal", "NotTriggerScaleUp", f"pod didn't trigger scale-up: {msg}".rstrip(),
                              SOURCE)

    def estimate(self, hosts: int, tmpl: NodeInfo, pods: list[Obj], infos: dict[str, P.PodInfo],
                 pre: dict[str, str | None], snapshot: Snapshot, cluster_room: int,
                 reasons: dict[str, Counter]) -> tuple[list[NodeInfo], list[tuple[Obj, int]]]:
        """CA's estimator for one node group: bin-pack the pods onto new template nodes (the pods' reasons when
        one cannot use it go to `reasons`); the snapshot is left as it was (CA forks it per option)."""
        bins: list[NodeInfo] = []
        helped: list[tuple[Obj, int]] = []
        verdict: dict[str, str | None] = {}  # pod shape -> why it cannot use this group's template
        mark = snapshot.mark()  # this group's estimate is undone after it (CA forks its snapshot per option)
        for p in pods:
            pi, sig = infos[pod_key(p)], shape_sig(p)
            if pre[pod_key(p)] is not None:
                reasons[pod_key(p)][pre[pod_key(p)]] += 1
                continue
            if sig not in verdict:
                why = static_reason(pi, tmpl)
                empty = NodeInfo(tmpl.name, tmpl.node, tmpl.allocatable)
                if why is None and not P.fits_request(pi.requests, empty):
                    _, fit = P.node_resources_fit(pi, empty)
                    why = fit[0] if fit else "Insufficient resources"
                verdict[sig] = why
            why = verdict[sig]
            ni = None if why is not None else place(pi, bins, snapshot)
            if why is None and ni is None and not hosts and len(bins) >= cluster_room:
                why = MAX_NODES_TOTAL
            elif why is None and ni is None:
                fresh = template_copy(tmpl, len(bins))
                why = snapshot.reason(p, fresh)
                if why is None:
                    ni = fresh
                    ni.add_pod(p, pi.requests)
                    snapshot.placed(p, ni)
                    bins.append(ni)
            if why is not None or ni is None:
                reasons[pod_key(p)][why or "Insufficient resources"] += 1
                continue
            helped.append((p, next(i for i, b in enumerate(bins) if b is ni)))
        snapshot.revert(mark, [b.name for b in bins])
        return bins, helped

    def _autoprovision(self, pods: list[Obj], infos: dict[str, P.PodInfo], pre: dict[str, str | None],
                       snapshot: Snapshot, cluster_room: int) -> Option | None:
        """Node auto-provisioning (autoscaler/nap.py): the first candidate pool of the first pod that one helps,
        within the resource limits, estimated as an existing group is; created in the store, it is the option.
        A candidate past a limit adds nothing to the pods' events (it does not exist: upstream's ReasonsMessage
        skips it); GKE logs no.scale.up.nap.pod.zonal.resources.exceeded for it."""
        left = None
        tried: set[str] = set()
        shapes: set[str] = set()  # a pod shape whose candidates were all tried gives the same answer again
        for p in pods:
            sig = shape_sig(p)
            if pre[pod_key(p)] is not None or sig in shapes:
                continue
            shapes.add(sig)
            for pool in self.nap.candidates(p):
                name = pool["metadata"]["name"]
                if name in tried or self.nap.exists(pool):
                    continue
                tried.add(name)
                pool = self.nap.named(pool)
                name = pool["metadata"]["name"]
                try:
                    node, tmpl, hosts = self.nap.template(pool)
                except (catalog.CatalogError, ValueError):
                    continue
                if left is None:
                    left = self.nap.left()
                delta = node_usage(node)
                if exceeded(left, scaled(delta, hosts or 1)):
                    for z in pool["spec"]["zones"]:
                        self.nap.note(NAP_RESOURCES_EXCEEDED, [z], pod=p)
                    continue
                scratch: dict[str, Counter] = defaultdict(Counter)
                bins, helped = self.estimate(hosts, tmpl, pods, infos, pre, snapshot, cluster_room, scratch)
                if not any(q is p for q, _ in helped) or (hosts and hosts > cluster_room):
                    continue
                chosen = [q for q, _ in helped]
                n = hosts or apply_limits(len(bins), left, delta)
                self.nap.create(pool, chosen)
                g = self.groups.get((name, pool["spec"]["zones"][0]))
                return None if g is None else Option(g, n, chosen, self.template(g) or tmpl)
        return None

    def _any_policy(self, options: list[Option]) -> list[Option]:
        """Location policy ANY (Spot pools): among one pool's zones, prefer those Compute Engine can serve now."""
        by_pool: dict[str, list[Option]] = {}
        for o in options:
            by_pool.setdefault(o.group.pool, []).append(o)
        out = []
        for name, opts in by_pool.items():
            pool = self.store.get("NodePool", "", name)
            if len(opts) > 1 and pool is not None and pool["spec"].get("spot") and self.capacity.limited:
                room = {o.group.zone: self.capacity.pool_headroom(pool, o.group.zone)[0] for o in opts}
                if any(room.values()):
                    opts = [o for o in opts if room[o.group.zone]]
            out += opts
        return out

    def expand(self, options: list[Option]) -> Option:
        """--expander: least-waste (expander/waste), price (twin simplification, see module doc), priority
        (expander/priority, the ConfigMap), most-pods, random; ties: fewer nodes in the group, then its name."""
        name = self.spec.expander
        if name == "random":
            return self.rng.choice(options)

        def tie(o: Option) -> tuple:
            return (o.group.target, o.group.pool, o.group.zone)
        if name == "least-waste":
            return min(options, key=lambda o: (waste(o), tie(o)))
        if name == "price":
            return min(options, key=lambda o: (price(self.store, o) / max(1, len(o.pods)), tie(o)))
        if name == "most-pods":
            return min(options, key=lambda o: (-len(o.pods), tie(o)))
        prios = self.priorities()
        return min(options, key=lambda o: (-max((pr for pr, rx in prios if rx.search(o.group.url)
                                                 or rx.search(o.group.pool)), default=-10**9), waste(o), tie(o)))

    def priorities(self) -> list[tuple[int, re.Pattern]]:
        cm = self.store.get("ConfigMap", *PRIORITY_CM)
        raw = ((cm or {}).get("data") or {}).get("priorities") or ""
        try:
            doc = yaml.safe_load(raw) or {}
        except yaml.YAMLError:
            return []
        return [(int(pr), re.compile(rx)) for pr, rxs in doc.items() for rx in rxs or []]

    def _siblings(self, g: NodeGroup) -> list[NodeGroup]:
        """The groups a scale-up of g may spread over: itself, and under location policy BALANCED (on-demand
        pools) the pool's other zones not in backoff."""
        pool = self.store.get("NodePool", "", g.pool)
        if g.hosts or pool is None or pool["spec"].get("spot"):
            return [g]
        return [s for (name, _), s in sorted(self.groups.items()) if name == g.pool
                and (s is g or self.env.now >= s.backoff_until)]

    def _room(self, g: NodeGroup) -> int:
        return g.max - g.target if self.env.now < g.backoff_until else sum(s.max - s.target
                                                                             for s in self._siblings(g))

    def spread(self, o: Option) -> dict[str, int]:
        """GKE's location policy: BALANCED (on-demand pools' default) spreads the new nodes over the pool's zones,
        fewest nodes first; ANY (Spot pools' default) keeps the chosen zone (which `scale_up` picked for
        obtainable capacity). https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler#location"""
        sibs = self._siblings(o.group)
        plan = {s.zone: 0 for s in sibs}
        for _ in range(o.nodes):
            room = [s for s in sibs if s.target + plan[s.zone] < s.max]
            if not room:
                break
            best = min(room, key=lambda s: (s.target + plan[s.zone], s.zone))
            plan[best.zone] += 1
        return {z: n for z, n in plan.items() if n}

    def execute(self, o: Option, delay: float | None = None) -> None:
        plan = self.spread(o)
        changes = []
        for zone, n in plan.items():
            g = self.groups[(o.group.pool, zone)]
            changes.append((g, g.target, n))
            g.target += n
        # one {group from->to (max: m)} per resized group (CA's GroupSizeChange list)
        msg = "pod triggered scale-up: [" + " ".join(f"{{{g.url} {before}->{before + n} (max: {g.hosts or g.max})}}"
                                                     for g, before, n in changes) + "]"
        for p in o.pods:
            self.events.event(p, "Normal", "TriggeredScaleUp", msg, SOURCE)
        for g, before, n in changes:
            granted, refusal = self.grow(g, n, atomic=bool(g.hosts), delay=delay, waiting=o.pods)
            self.record_scale_up(g, before, n, granted, refusal)
            if refusal is not None:
                self.fail(g, refusal, n - granted, o.pods)

    def record_scale_up(self, g: NodeGroup, before: int, n: int, granted: int, refusal: Refusal | None,
                        provisioning_request: str | None = None) -> None:
        """summary.json's scale_ups: one entry per node group resized, the autoscaler's own and those it made for a
        ProvisioningRequest (marked with it: best-effort-atomic, GKE queued provisioning), so the run's count
        includes both."""
        entry: dict = {"t": self.env.now, "group": f"{g.pool}/{g.zone}", "from": before, "to": before + n,
                       "granted": granted, "error": refusal.gce if refusal else None}
        if refusal is None and granted < n:  # a flex-start resize waiting for capacity (CapacityWait)
            entry["waiting_for_capacity"] = n - granted
        if provisioning_request is not None:
            entry["provisioning_request"] = provisioning_request
        self.scale_ups.append(entry)

    def grow(self, g: NodeGroup, n: int, atomic: bool = False, delay: float | None = None,
             waiting: list[Obj] | None = None) -> tuple[int, Refusal | None]:
        """Resize the MIG by n: Compute Engine gives what capacity and quota allow (all or none when atomic). With
        `waiting` (the scale-up's pods), a flex-start pool's stockout leaves the rest of the resize waiting for
        capacity (CapacityWait) instead of failing now: returns what was granted and no refusal."""
        pool = self.store.get("NodePool", "", g.pool)
        if pool is None:
            return 0, None
        granted, refusal = self.capacity.request(pool, g.zone, n, atomic)
        if granted:
            g.added += self.pools.scale(g.pool, g.zone, granted, delay)
            self.last_scale_up = self.env.now
        if (granted < n and waiting is not None and refusal is not None and refusal.kind == "stockout"
                and waits_for_capacity(pool)):
            until = self.env.now + capacity_check_wait(pool, multi_host=bool(g.hosts))
            g.waits.append(CapacityWait(n - granted, until, refusal, waiting, atomic))
            return granted, None
        if granted < n:
            g.target -= n - granted
        return granted, refusal

    def retry_waits(self) -> None:
        """Flex-start resize requests waiting for capacity take what has appeared; past their wait time, what is
        still missing fails as a refused resize does (CapacityWait)."""
        for g in self.groups.values():
            pool = self.store.get("NodePool", "", g.pool) if g.waits else None
            if pool is None:
                g.waits.clear()
                continue
            for w in list(g.waits):
                room, _ = self.capacity.headroom(shape_of(pool), g.zone)
                if room >= (w.missing if w.atomic else 1):
                    got, _ = self.capacity.request(pool, g.zone, min(room, w.missing), w.atomic)
                    if got:
                        g.added += self.pools.scale(g.pool, g.zone, got)
                        self.last_scale_up = self.env.now
                        w.missing -= got
                if w.missing <= 0:
                    g.waits.remove(w)
                elif self.env.now >= w.until:
                    g.waits.remove(w)
                    g.target -= w.missing
                    self.fail(g, w.refusal, w.missing, w.pods)

    def fail(self, g: NodeGroup, refusal: Refusal, failed: int, pods: list[Obj]) -> None:
        now = self.env.now
        reset = parse_duration(self.spec.nodeGroupBackoffResetTimeout)
        initial, cap = (parse_duration(self.spec.initialNodeGroupBackoffDuration),
                        parse_duration(self.spec.maxNodeGroupBackoffDuration))
        g.backoff = initial if now - g.last_failure > reset or not g.backoff else min(2 * g.backoff, cap)
        g.backoff_until, g.last_failure = now + g.backoff, now
        self._failed_since_scan = True
        for p in pods:
            self.events.event(p, "Warning", "FailedScaleUp", f"Node scale up in zones {g.zone} associated with this "
                              f"pod failed: {refusal.gke}. Pod is at risk of not being scheduled.", SOURCE)
        pool = self.store.get("NodePool", "", g.pool)
        if pool is not None:  # the Compute Engine error itself (twin's event; GKE shows it in the CA's logs)
            self.events.event(pool, "Warning", "FailedScaleUp", f"{failed} VM(s) of {g.url} could not be created "
                              f"({refusal.explanation}): {refusal.gce}", SOURCE)

    def contribute(self, until: float) -> Contribution:
        """summary.json's cluster_autoscaler section, when a pool autoscaled or a ProvisioningRequest ran."""
        if not self.active:
            return Contribution()
        out: dict = {"cluster_autoscaler": self.summary()}
        if self.classes:  # what ran per ComputeClass rule: nodes, node-hours, cost, pods' waits, migrations
            self.pools.finish(until)
            book = self.pools.reservations
            out["compute_classes"] = self.classes.report(self.pools.node_costs(), self.pools.capacity_type
                                                         if book is not None and book else None)
        return Contribution(summary=out)

    def summary(self) -> dict:
        out = {"scale_ups": self.scale_ups, "scale_downs": self.scaledown.scale_downs,
               "refusals": self.capacity.refusals}
        if self.nap.enabled or self.nap.created or self.nap.no_scale_up:
            out["autoprovisioning"] = self.nap.summary()
        return out

    # -- ComputeClass status and active migration (autoscaler/computeclass.py) -----------------------------------
    def class_health(self) -> None:
        """status.conditions of every ComputeClass, as GKE's validator writes them (Health, then one condition per
        kind of misconfiguration); written only when they change (crd.AnyConditionsChanged)."""
        self._class_status = False
        pools = self.store.list("NodePool")
        now = self.store.timestamp(self.env.now)
        for klass in self.classes.classes().values():
            conds = status_conditions(misconfigurations(klass, pools, self.classes.default_enabled), now)
            old = (klass.get("status") or {}).get("conditions") or []
            if [{k: c.get(k) for k in ("type", "status", "reason", "message")} for c in old] == [
                    {k: c[k] for k in ("type", "status", "reason", "message")} for c in conds]:
                continue
            self.store.patch("ComputeClass", "", klass["metadata"]["name"], lambda o, c=conds: {
                **o, "status": {**(o.get("status") or {}), "conditions": c}})

    def migrate(self) -> None:
        """activeMigration.optimizeRulePriority: finish the attempt under way (drain the lower-rule node once the
        higher rule's nodes are ready; give up after the scale-up timeout), else start one for one node."""
        now = self.env.now
        for m in list(self.classes.migrations):
            node = self.store.get("Node", "", m.node)
            added = [self.store.get("Node", "", n) for n in m.added]
            if node is None:
                self.classes.migrations.remove(m)
            elif all(a is not None and not self.scaledown.unready(a) for a in added):
                pods = [p for h in m.hosts or [m.node] for p in self.bound.get(h, {}).values() if not _daemon(p)]
                if blocked_by_budget(self.store, pods):
                    continue  # GKE's drain respects PodDisruptionBudgets: wait for room
                self.classes.migrations.remove(m)
                if m.hosts:
                    self.scaledown.remove_slice(m.group, m.hosts, pods)
                else:
                    self.scaledown.remove(node, m.group, pods)
                self.scaledown.scale_downs[-1]["migration" if m.plugin != RECYCLING else RECYCLING] = True
                pool = self.store.get("NodePool", "", m.group.pool) or {}
                self.classes.migrated.append({"t": now, "class": self.classes.pool_class(pool),
                                              "node": m.node, "to": m.added, "evicted": len(pods),
                                              **({"plugin": m.plugin} if m.plugin == RECYCLING else {})})
            elif now - m.since >= MIGRATION_SCALE_UP_TIMEOUT:
                self.classes.migrations.remove(m)
                self.classes.migration_backoff[m.node] = now + (
                    MIGRATION_BACKOFF if m.plugin != RECYCLING else RECYCLING_BACKOFF)
        if self.classes.migrations:
            return  # one candidate at a time (--defrag-candidate-node-limit 1)
        if self._recyclable and self.recycle():
            return
        classes = {n: c for n, c in self.classes.classes().items()
                   if ((c.get("spec") or {}).get("activeMigration") or {}).get("optimizeRulePriority")}
        if not classes:
            return
        all_classes = self.classes.classes()
        groups = self.scalable_groups()
        buckets = {}
        for g in groups:
            pool = self.store.get("NodePool", "", g.pool)
            buckets[id(g)] = self.classes.bucket_of(pool, all_classes) if pool is not None else (None, 0)
        for g in groups:
            name, b = buckets[id(g)]
            if name not in classes or b == 0:
                continue
            rank = 10**6 if b is None else b
            higher = [h for h in groups if buckets[id(h)][0] == name and buckets[id(h)][1] is not None
                      and buckets[id(h)][1] < rank and now >= h.backoff_until and h.max > h.target]
            if not higher:
                continue
            for node_name in self.registered(g):
                if self.classes.migration_backoff.get(node_name, -1.0) > now or node_name in self.protected:
                    continue
                pods = self._movable_pods([node_name])
                if not pods:
                    continue
                target = self._migration_target(pods, sorted(higher, key=lambda h: (buckets[id(h)][1], h.target,
                                                                                      h.pool, h.zone)))
                if target is None:
                    continue
                h, n = target
                before = h.target
                h.target += n
                granted, refusal = self.grow(h, n)
                self.record_scale_up(h, before, n, granted, refusal)
                self.scale_ups[-1]["migration"] = node_name
                if refusal is not None:
                    self.fail(h, refusal, n - granted, [])
                if granted == n:
                    self.classes.migrations.append(Migration(node_name, g, h.added[-n:], now))
                else:
                    self.classes.migration_backoff[node_name] = now + MIGRATION_BACKOFF
                return

    def recycle(self) -> bool:
        """Flex-start node recycling (GKE's defrag recycling plugin, pkg/defrag/plugins/recycling): a node whose
        time left before its machine-termination-datetime is under its recycle lead time is a candidate, the one
        closest to its end first (a multi-host TPU slice as a whole); a replacement for its pods is scaled up in
        the first group of its class (rule order, its own group included) whose nodes take them all, else in a pool
        node auto-provisioning creates for them, and once it is ready the node (slice) is drained as an active
        migration drains. A failed attempt waits 1 min (the plugin's BackoffDuration)."""
        now = self.env.now
        due = sorted((end, name) for name, (end, lead) in self._recyclable.items() if end - now < lead)
        if not due:
            return False
        all_classes = self.classes.classes()
        groups = self.scalable_groups()

        def rank(h: NodeGroup) -> tuple:
            pool = self.store.get("NodePool", "", h.pool)
            b = self.classes.bucket_of(pool, all_classes)[1] if pool is not None and all_classes else 0
            return (10**6 if b is None else b, h.target, h.pool, h.zone)
        for _, name in due:
            if self.classes.migration_backoff.get(name, -1.0) > now or name in self.protected:
                continue
            node = self.store.get("Node", "", name)
            g = self._group_of(node["metadata"].get("labels") or {}) if node is not None else None
            if g is None:
                continue
            slice_pool = self.pools.slice_of(name)
            hosts = self.pools.slice_nodes(slice_pool) if slice_pool is not None else [name]
            pods = self._movable_pods(hosts)
            if not pods:
                continue
            klass = self.classes.pool_class(self.store.get("NodePool", "", g.pool) or {})
            usable = [h for h in groups if now >= h.backoff_until and h.max > h.target and (
                not klass or self.classes.pool_class(self.store.get("NodePool", "", h.pool) or {}) == klass)]
            target = self._migration_target(pods, sorted(usable, key=rank))
            delay = None
            if target is None and (self.nap or self.classes):
                made = self._autoprovision(pods, {pod_key(p): pod_info(p) for p in pods},
                                           {pod_key(p): pre_filter(self.store, p) for p in pods},
                                           Snapshot(self.node_infos(), self.store, self.features), self.cluster_room())
                if made is not None:
                    target, delay = (made.group, made.nodes), self._new_pool_delay(made.group.pool)
            if target is None:
                self.classes.migration_backoff[name] = now + RECYCLING_BACKOFF
                continue
            h, n = target
            before = h.target
            h.target += n
            granted, refusal = self.grow(h, n, atomic=bool(h.hosts), delay=delay)
            self.record_scale_up(h, before, n, granted, refusal)
            self.scale_ups[-1][RECYCLING] = name
            if refusal is not None:
                self.fail(h, refusal, n - granted, [])
            if granted == n:
                self.classes.migrations.append(Migration(name, g, h.added[-n:], now, plugin=RECYCLING,
                                                         hosts=hosts if slice_pool is not None else None))
            else:
                self.classes.migration_backoff[name] = now + RECYCLING_BACKOFF
            return True
        return False

    def _new_pool_delay(self, pool: str) -> float:
        """From asking for a pool node auto-provisioning creates to its first VM registering: GKE creating the pool
        (nap.POOL_CREATION), then the VM's boot."""
        spec = (self.store.get("NodePool", "", pool) or {}).get("spec") or {}
        return POOL_CREATION + parse_duration(spec.get("bootDelay", "90s"))

    def _group_of(self, labels: dict[str, str]) -> NodeGroup | None:
        """The node group (pool, zone) a node's GKE labels place it in."""
        return self.groups.get((labels.get(GKE_NODEPOOL, ""), labels.get(ZONE, DEFAULT_ZONE)))

    def _movable_pods(self, hosts: list[str]) -> list[Obj] | None:
        """The pods a defrag attempt would move off these nodes (DaemonSet pods stay): None when a node is gone,
        not ready or already being deleted, or a pod may not be evicted; [] when there is nothing to move."""
        for h in hosts:
            node = self.store.get("Node", "", h)
            if node is None or self.scaledown.unready(node) or any(
                    t.get("key") == TO_BE_DELETED for t in node["spec"].get("taints") or []):
                return None
        pods = [p for h in hosts for p in self.bound.get(h, {}).values() if not _daemon(p)]
        return None if any(self.scaledown.blocking(p) for p in pods) else pods

    def _migration_target(self, pods: list[Obj], higher: list[NodeGroup]) -> tuple[NodeGroup, int] | None:
        """The first higher-rule group whose template nodes take all the candidate's pods, and how many."""
        for h in higher:
            tmpl = self.template(h)
            if tmpl is None:
                continue
            snapshot = Snapshot([], self.store, self.features)
            bins: list[NodeInfo] = []
            ok = True
            for p in pods:
                pi = pod_info(p)
                if place(pi, bins, snapshot) is not None:
                    continue
                fresh = template_copy(tmpl, len(bins))
                if place(pi, [fresh], snapshot) is None:
                    ok = False
                    break
                bins.append(fresh)
            if ok and bins and h.hosts and h.target == 0 and len(bins) <= h.hosts:
                return h, h.hosts  # a multi-host slice grows whole
            if ok and bins and not h.hosts and len(bins) <= h.max - h.target:
                return h, len(bins)
        return None


CAPACITY_CHECK_WAIT = 900.0  # gke_cloud_provider_impl.go DefaultFlexStartCapacityCheckWaitTime (15 min)
MAX_NODE_PROVISION_OFFSET = 900.0  # gke_cloud_provider_impl.go maxNodeProvisionTimeOffset (15 min)


def waits_for_capacity(pool: Obj) -> bool:
    """A flex-start pool that is not queued provisioning (GKE's FlexStartNonQueued MIGs: their resizes are resize
    requests that wait for capacity)."""
    spec = pool.get("spec") or {}
    return bool(spec.get("flexStart")) and (spec.get("labels") or {}).get(QUEUED_LABEL) != "true"


def capacity_check_wait(pool: Obj, multi_host: bool = False) -> float:
    """How long a flex-start pool's resize waits for capacity: its label (a ComputeClass rule's
    capacityCheckWaitTimeSeconds), never below the 15 min default (a lower or invalid value is ignored, gke_manager.go
    capacityCheckWaitTimeSecondsLabelValue). A single-host TPU pool takes no custom wait and has no capacity-check
    wait at all (customCapacityCheckWaitTimeSecondsEnabled, fetchDefaultCheckCapacityWaitTime): its scale-up times
    out at the max node provision time, the default plus its 15 min offset (getMaxNodeProvisionTime)."""
    spec = pool.get("spec") or {}
    try:
        tpu_host = bool(catalog.machine_type(str(spec.get("machineType"))).tpu)
    except catalog.CatalogError:
        tpu_host = False
    if tpu_host and not multi_host:
        return CAPACITY_CHECK_WAIT + MAX_NODE_PROVISION_OFFSET
    raw = str((spec.get("labels") or {}).get(GKE_CAPACITY_CHECK_WAIT, ""))
    return max(CAPACITY_CHECK_WAIT, float(raw) if raw.isdigit() else 0.0)


def _daemon(pod: Obj) -> bool:
    return any(r.get("kind") == "DaemonSet" for r in pod["metadata"].get("ownerReferences") or [])


def waste(o: Option) -> float:
    """expander/waste: (unused cpu / cpu) + (unused memory / memory) over the nodes added."""
    score = 0.0
    for r in ("cpu", "memory"):
        avail = o.template.allocatable.get(r, 0) * o.nodes
        used = sum(pod_requests(p).get(r, 0) for p in o.pods)
        score += (avail - used) / avail if avail else 0.0
    return score


def price(store: Store, o: Option) -> float:
    pool = store.get("NodePool", "", o.group.pool)
    if pool is None:
        return float("inf")
    hourly = pool_hourly_price(pool, catalog.machine_type(pool["spec"]["machineType"]))
    return (hourly or 0.0) * o.nodes

"""The cluster state one scheduling cycle sees: ClusterQueues and Cohorts as a quota tree, flavors, and the
workloads holding quota with their usage.

Mirrors kubernetes-sigs/kueue pkg/cache/scheduler/snapshot.go and clusterqueue_snapshot.go: inactive
ClusterQueues (a missing flavor, stopPolicy other than None, a cohort cycle) are left out of the tree and listed in
``inactive``; a cohort named by a ClusterQueue but never created exists implicitly, with no quota of its own.
A Snapshot is built when a ClusterQueue, Cohort or ResourceFlavor changes and kept between cycles: the scheduler
(`kueue.cycle`) applies the cache's changes to it before a cycle and puts back what the cycle held (assumed
admissions); simulated removals are undone as they go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubetwin.kueue.api import ClusterQueue, Cohort, ResourceFlavor, ResourceGroup, ResourceQuota, Workload
from kubetwin.kueue.quota import (
    FlavorResource,
    ResourceNode,
    add_usage,
    available,
    has_cycle,
    potential_available,
    remove_usage,
    update_tree,
)

Usage = dict[FlavorResource, int]


def admission_usage(wl: Workload) -> Usage:
    """Quota a workload holds: status.admission resourceUsage per podSet under its assigned flavors.

    When resourceUsage is missing the usage is the podSet's per-pod requests times the admitted count
    (pkg/workload/workload.go totalRequestsFromAdmission).
    """
    usage: Usage = {}
    if wl.admission is None:
        return usage
    pod_sets = {ps.name: ps for ps in wl.pod_sets}
    for psa in wl.admission.pod_set_assignments:
        flavors = dict(psa.flavors)
        amounts = dict(psa.resource_usage)
        if not amounts and psa.name in pod_sets:
            ps = pod_sets[psa.name]
            count = ps.count if psa.count is None else psa.count
            amounts = {r: v * count for r, v in ps.requests}
        for res, v in sorted(amounts.items()):
            if res in flavors and v:
                fr = (flavors[res], res)
                usage[fr] = usage.get(fr, 0) + v
    return usage


@dataclass
class WorkloadInfo:
    """A workload with the ClusterQueue it targets or holds quota in and the flavor-resource usage it holds."""

    obj: Workload
    cluster_queue: str
    usage: Usage = field(default_factory=dict)
    # (obj, evicted, quota reserved at) for candidate ordering, read once per Workload version (preemption.py)
    order_facts: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.obj.key

    @property
    def priority(self) -> int:
        return self.obj.priority

    def uses_resources(self, frs: Iterable[FlavorResource]) -> bool:
        return any(fr in self.usage for fr in frs)


class ClusterQueueSnapshot:
    """One ClusterQueue in the cycle: its spec, its quota node and the workloads holding quota in it."""

    def __init__(self, spec: ClusterQueue) -> None:
        self.spec = spec
        self.name = spec.name
        self.node = ResourceNode(spec.name, False, spec.resource_groups)
        self.node.fair_weight = spec.fair_weight
        self.workloads: dict[str, WorkloadInfo] = {}

    def __repr__(self) -> str:
        return f"ClusterQueueSnapshot({self.name})"

    @property
    def preemption(self):
        return self.spec.preemption

    @property
    def has_parent(self) -> bool:
        return self.node.parent is not None

    def rg_by_resource(self, resource: str) -> ResourceGroup | None:
        for rg in self.spec.resource_groups:
            if resource in rg.covered_resources:
                return rg
        return None

    def quota_for(self, fr: FlavorResource) -> ResourceQuota:
        return self.node.quotas.get(fr, ResourceQuota(0))

    def available(self, fr: FlavorResource) -> int:
        return available(self.node, fr)

    def potential_available(self, fr: FlavorResource) -> int:
        return potential_available(self.node, fr)

    def borrowing(self, fr: FlavorResource) -> bool:
        return self.node.borrowing(fr)

    def fits(self, usage: Usage) -> bool:
        """Every flavor-resource of usage within what is available (ClusterQueueSnapshot.Fits)."""
        return all(v <= self.available(fr) for fr, v in sorted(usage.items()))

    def add_usage(self, usage: Usage) -> None:
        for fr, v in sorted(usage.items()):
            add_usage(self.node, fr, v)

    def remove_usage(self, usage: Usage) -> None:
        for fr, v in sorted(usage.items()):
            remove_usage(self.node, fr, v)

    def path(self) -> str:
        """'/root/.../cq' as Kueue writes it in preemption messages (preemption.go buildCQPath)."""
        parts = [self.name] + [n.name for n in self.node.path_parent_to_root()]
        return "/" + "/".join(reversed(parts))


class Snapshot:
    """ClusterQueues, Cohorts and flavors for one cycle, with usage of the workloads holding quota."""

    def __init__(self) -> None:
        self.cluster_queues: dict[str, ClusterQueueSnapshot] = {}
        self.cohorts: dict[str, ResourceNode] = {}
        self.cohort_specs: dict[str, Cohort] = {}
        self.resource_flavors: dict[str, ResourceFlavor] = {}
        self.inactive: dict[str, str] = {}  # ClusterQueue name -> why
        self.tas_flavors: dict[str, Any] = {}  # TAS flavor name -> kueue.tas.snapshot.TASFlavorSnapshot, per cycle
        self._base_usage: list[tuple[ResourceNode, dict]] = []  # usage of each node before any workload

    @classmethod
    def build(cls, cluster_queues: Iterable[ClusterQueue], cohorts: Iterable[Cohort],
              flavors: Iterable[ResourceFlavor], workloads: Iterable[WorkloadInfo],
              topologies: Iterable[str] = ()) -> Snapshot:
        """``topologies``: the Topology objects that exist; a ClusterQueue with a TAS flavor whose Topology is
        missing is inactive (clusterqueue.go: TopologyNotFound)."""
        snap = cls()
        known_topologies = set(topologies)
        snap.resource_flavors = {f.name: f for f in flavors}
        snap.cohort_specs = {c.name: c for c in cohorts}
        parents: dict[str, str | None] = {c.name: c.parent for c in snap.cohort_specs.values()}
        for cq in sorted(cluster_queues, key=lambda c: c.name):
            if cq.cohort and cq.cohort not in parents:
                parents[cq.cohort] = None  # implicit cohort
        for c in list(parents.values()):
            if c and c not in parents:
                parents[c] = None
        for name in sorted(parents):
            spec = snap.cohort_specs.get(name)
            snap.cohorts[name] = ResourceNode(name, True, spec.resource_groups if spec else ())
            if spec is not None:
                snap.cohorts[name].fair_weight = spec.fair_weight
        cyclic = {name for name in parents if has_cycle(name, parents)}
        for name in sorted(parents):
            parent = parents[name]
            if parent and name not in cyclic:
                node, pnode = snap.cohorts[name], snap.cohorts[parent]
                node.parent = pnode
                pnode.child_cohorts.append(node)
        for cq in sorted(cluster_queues, key=lambda c: c.name):
            missing = sorted({fq.name for rg in cq.resource_groups for fq in rg.flavors} - set(snap.resource_flavors))
            if missing:
                snap.inactive[cq.name] = f"FlavorNotFound: {', '.join(missing)}"
                continue
            if cq.stop_policy not in ("None", "", None):
                snap.inactive[cq.name] = "Stopped"
                continue
            if cq.checks_inactive:  # AdmissionCheckNotFound / AdmissionCheckInactive (kueue.controller.admissionchecks)
                snap.inactive[cq.name] = cq.checks_inactive
                continue
            if cq.cohort and cq.cohort in cyclic:
                snap.inactive[cq.name] = "CohortCycle"
                continue
            no_topology = sorted(
                f'there is no Topology "{rf.topology_name}" for TAS flavor "{rf.name}"'
                for rf in (snap.resource_flavors[fq.name] for rg in cq.resource_groups for fq in rg.flavors)
                if rf.topology_name is not None and rf.topology_name not in known_topologies)
            if no_topology:
                snap.inactive[cq.name] = f"TopologyNotFound: {', '.join(no_topology)}"
                continue
            cqs = ClusterQueueSnapshot(cq)
            snap.cluster_queues[cq.name] = cqs
            if cq.cohort:
                pnode = snap.cohorts[cq.cohort]
                cqs.node.parent = pnode
                pnode.child_cqs.append(cqs.node)
        for cqs in snap.cluster_queues.values():
            cqs.node.subtree_quota = {fr: q.nominal for fr, q in cqs.node.quotas.items()}
        for name in sorted(snap.cohorts):
            node = snap.cohorts[name]
            if node.parent is None and name not in cyclic:
                update_tree(node)
        snap._base_usage = [(n, dict(n.usage)) for n in snap._nodes()]
        snap.fill(workloads)
        return snap

    def _nodes(self) -> list[ResourceNode]:
        return [c.node for c in self.cluster_queues.values()] + list(self.cohorts.values())

    def reset(self) -> None:
        """Back to the state `build` left before any workload: the quota tree is kept, usage and workloads go,
        so a cycle can reuse the tree while no ClusterQueue, Cohort or ResourceFlavor changed."""
        for node, usage in self._base_usage:
            node.usage = dict(usage)
        for cqs in self.cluster_queues.values():
            cqs.workloads = {}

    def fill(self, workloads: Iterable[WorkloadInfo]) -> None:
        """Add the workloads holding quota."""
        snap = self
        # Usage is added once per ClusterQueue, summed over its workloads: the same result as adding them one by
        # one (quota.add_usage pushes to the parent only what exceeds the local quota, which sums), at a cost per
        # queue instead of per workload, as Kueue's cache keeps usage per ClusterQueue.
        totals: dict[str, Usage] = {}
        for wi in workloads:  # callers pass a deterministic order (the cache's insertion order)
            cqs = snap.cluster_queues.get(wi.cluster_queue)
            if cqs is None:
                continue
            cqs.workloads[wi.key] = wi
            total = totals.setdefault(wi.cluster_queue, {})
            for fr, v in wi.usage.items():
                total[fr] = total.get(fr, 0) + v
        for name in sorted(totals):
            snap.cluster_queues[name].add_usage(totals[name])

    def cluster_queue(self, name: str) -> ClusterQueueSnapshot | None:
        return self.cluster_queues.get(name)

    def add_workload(self, wi: WorkloadInfo) -> None:
        cq = self.cluster_queues[wi.cluster_queue]
        cq.workloads[wi.key] = wi
        cq.add_usage(wi.usage)

    def remove_workload(self, wi: WorkloadInfo) -> None:
        cq = self.cluster_queues[wi.cluster_queue]
        cq.workloads.pop(wi.key, None)
        cq.remove_usage(wi.usage)

    def simulate_removal(self, workloads: Iterable[WorkloadInfo]):
        """Remove the workloads' usage; returns a function that puts it back (SimulateWorkloadRemoval)."""
        seen: set[str] = set()
        removed = []
        for w in workloads:
            if w.cluster_queue in self.cluster_queues and w.key not in seen:
                seen.add(w.key)
                removed.append(w)
        for w in removed:
            self.remove_workload(w)

        def revert() -> None:
            for w in removed:
                self.add_workload(w)
        return revert

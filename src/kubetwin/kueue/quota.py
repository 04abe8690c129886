"""Hierarchical quota arithmetic of ClusterQueues and Cohorts, ported from Kueue's resource nodes.

Source: kubernetes-sigs/kueue pkg/cache/scheduler/resource_node.go (localQuota, LocalAvailable, available,
potentialAvailable, addUsage, removeUsage, accumulateFromChild, QuantitiesFitInQuota, IsWithinNominalInResources)
and pkg/scheduler/preemption/classical/hierarchical_preemption.go (FindHeightOfLowestSubtreeThatFits).

A node is a ClusterQueue (leaf) or a Cohort. For every FlavorResource ``fr = (flavor, resource)``:

- ``SubtreeQuota(cq) = nominal``; ``SubtreeQuota(cohort) = nominal + sum(child.SubtreeQuota - child.localQuota)``;
- ``localQuota = max(0, SubtreeQuota - lendingLimit)`` with a lendingLimit, else 0 (never lent to the parent);
- ``Usage(cohort) = sum(max(0, child.Usage - child.localQuota))``.

All amounts are Python ints (Kueue's int64 milli/whole units).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from decimal import Decimal

from kubetwin.kueue.api import ResourceGroup, ResourceQuota

FlavorResource = tuple[str, str]  # (flavor, resource)


class ResourceNode:
    """A ClusterQueue or Cohort in the quota tree: its own quotas, subtree quota and usage."""

    def __init__(self, name: str, is_cohort: bool, resource_groups: Iterable[ResourceGroup] = ()) -> None:
        self.name = name
        self.is_cohort = is_cohort
        self.parent: ResourceNode | None = None
        self.child_cqs: list[ResourceNode] = []
        self.child_cohorts: list[ResourceNode] = []
        self.quotas: dict[FlavorResource, ResourceQuota] = {}
        for rg in resource_groups:
            for fq in rg.flavors:
                for res, q in fq.resources:
                    self.quotas[(fq.name, res)] = q
        self.subtree_quota: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.fair_weight = Decimal(1)  # spec.fairSharing.weight

    def __repr__(self) -> str:
        return f"{'Cohort' if self.is_cohort else 'ClusterQueue'}({self.name})"

    @property
    def has_parent(self) -> bool:
        return self.parent is not None

    def path_parent_to_root(self) -> Iterator[ResourceNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> ResourceNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree_cluster_queues(self) -> list[ResourceNode]:
        out = list(self.child_cqs)
        for c in self.child_cohorts:
            out.extend(c.subtree_cluster_queues())
        return out

    def local_quota(self, fr: FlavorResource) -> int:
        q = self.quotas.get(fr)
        if q is not None and q.lending_limit is not None:
            return max(0, self.subtree_quota.get(fr, 0) - q.lending_limit)
        return 0

    def borrowing_with(self, fr: FlavorResource, val: int) -> bool:
        """Usage + val above SubtreeQuota: the node would be using someone else's quota."""
        return self.usage.get(fr, 0) + val > self.subtree_quota.get(fr, 0)

    def borrowing(self, fr: FlavorResource) -> bool:
        return self.borrowing_with(fr, 0)


def local_available(node: ResourceNode, fr: FlavorResource) -> int:
    """Guaranteed (lending-limited) quota of this node still unused; invisible to the parent."""
    return max(0, node.local_quota(fr) - node.usage.get(fr, 0))


def available(node: ResourceNode, fr: FlavorResource) -> int:
    """Capacity left for the node, through its ancestors, capped by its borrowingLimit. May be negative."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        stored_in_parent = node.subtree_quota.get(fr, 0) - node.local_quota(fr)
        used_in_parent = max(0, node.usage.get(fr, 0) - node.local_quota(fr))
        parent_available = min(stored_in_parent - used_in_parent + q.borrowing_limit, parent_available)
    return local_available(node, fr) + parent_available


def potential_available(node: ResourceNode, fr: FlavorResource) -> int:
    """The most the node could ever get with no usage anywhere, respecting borrowingLimits."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0)
    avail = node.local_quota(fr) + potential_available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        avail = min(node.subtree_quota.get(fr, 0) + q.borrowing_limit, avail)
    return avail


def add_usage(node: ResourceNode, fr: FlavorResource, val: int) -> None:
    """Add usage and bubble the part beyond the node's local quota up to its parent."""
    local_avail = local_available(node, fr)
    node.usage[fr] = node.usage.get(fr, 0) + val
    if node.parent is not None and val > local_avail:
        add_usage(node.parent, fr, val - local_avail)


def remove_usage(node: ResourceNode, fr: FlavorResource, val: int) -> None:
    """Remove usage, and the part of it that was stored in the parent."""
    stored_in_parent = node.usage.get(fr, 0) - node.local_quota(fr)
    node.usage[fr] = node.usage.get(fr, 0) - val
    if stored_in_parent <= 0 or node.parent is None:
        return
    remove_usage(node.parent, fr, min(val, stored_in_parent))


def update_tree(root: ResourceNode) -> None:
    """Recompute SubtreeQuota and cohort Usage from the root down (updateCohortResourceNode).

    ClusterQueue usage is kept as is; cohort usage is rebuilt from the children.
    """
    if not root.is_cohort:
        root.subtree_quota = {fr: q.nominal for fr, q in root.quotas.items()}
        return
    root.subtree_quota = {fr: q.nominal for fr, q in root.quotas.items()}
    root.usage = {}
    for child in list(root.child_cohorts) + list(root.child_cqs):
        update_tree(child)
        for fr, sq in child.subtree_quota.items():
            root.subtree_quota[fr] = root.subtree_quota.get(fr, 0) + sq - child.local_quota(fr)
        for fr, u in child.usage.items():
            root.usage[fr] = root.usage.get(fr, 0) + max(0, u - child.local_quota(fr))


def quantities_fit_in_quota(node: ResourceNode, requests: dict[FlavorResource, int]
                            ) -> tuple[bool, dict[FlavorResource, int]]:
    """Whether requests fit the node's subtree quota, and what remains beyond its local (guaranteed) quota."""
    fits = True
    remaining: dict[FlavorResource, int] = {}
    for fr, v in requests.items():
        if node.usage.get(fr, 0) + v > node.subtree_quota.get(fr, 0):
            fits = False
        remaining[fr] = max(0, v - local_available(node, fr))
    return fits, remaining


def is_within_nominal(node: ResourceNode, frs: Iterable[FlavorResource]) -> bool:
    return all(node.usage.get(fr, 0) <= node.subtree_quota.get(fr, 0) for fr in frs)


def node_height(node: ResourceNode) -> int:
    """Distance to the furthest leaf (a cohort with only ClusterQueues has height 1)."""
    height = min(len(node.child_cqs) + len(node.child_cohorts), 1)
    for c in node.child_cohorts:
        height = max(height, node_height(c) + 1)
    return height


def find_height_of_lowest_subtree_that_fits(cq: ResourceNode, fr: FlavorResource, val: int) -> tuple[int, bool]:
    """Borrowing level of an extra ``val`` of fr: 0 if the CQ's own quota holds it, else the height of the lowest
    cohort subtree that does. The bool says whether that subtree is smaller than the whole tree (a reclaim within
    the hierarchy is possible)."""
    if not (cq.borrowing_with(fr, val) and cq.parent is not None):
        return 0, cq.parent is not None
    remaining = val - local_available(cq, fr)
    tracking = cq
    for tracking in cq.path_parent_to_root():
        if not tracking.borrowing_with(fr, remaining):
            return node_height(tracking), tracking.parent is not None
        remaining -= local_available(tracking, fr)
    return node_height(tracking), tracking.parent is not None


def has_cycle(name: str, parents: dict[str, str | None]) -> bool:
    """Whether following parentName from cohort ``name`` loops (pkg/cache/hierarchy HasCycle)."""
    seen = set()
    cur: str | None = name
    while cur is not None:
        if cur in seen:
            return True
        seen.add(cur)
        cur = parents.get(cur)
    return False

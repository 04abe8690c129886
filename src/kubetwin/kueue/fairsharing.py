"""Fair sharing: Dominant Resource Share (DRS) and the fair-sharing admission order. Fair-sharing preemption,
which reads these shares, is ``kueue.preemption.fairsharing``.

Ported from kubernetes-sigs/kueue:
- pkg/cache/scheduler/fair_sharing.go (dominantResourceShare, calculateLendable, CompareDRS).

DRS of a node with a parent: for each flavor-resource, borrowed = usage (+ request) - subtreeQuota when positive,
summed per resource name; ratio = borrowed * 1000 / lendable, lendable = sum over flavors of the parent's
potentialAvailable; DRS = max ratio (ties: alphabetical resource), divided by fairSharing.weight; weight 0 while
borrowing is +Inf. A root node has DRS 0.

Admission order under fair sharing (pkg/scheduler/fair_sharing_iterator.go): a tournament per cohort level, where
each child (ClusterQueue or cohort) nominates one entry and the lowest DRS *after* admitting it wins, with ties
broken by not-borrowing first (FairSharingPrioritizeNonBorrowing), priority, then FIFO. Not modelled: Admission Fair
Sharing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubetwin.kueue.quota import ResourceNode, potential_available
from kubetwin.kueue.snapshot import Usage


@dataclass(frozen=True)
class DRS:
    weight: float
    ratio: float
    resource: str = ""
    borrowing: bool = False
    borrowed_frs: tuple = ()

    def borrowing_on(self, requested: Usage) -> bool:
        """Whether the node borrows on any flavor-resource the request asks for (DRS.IsBorrowingOn)."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.borrowing

    def weighted_share(self) -> float:
        if self.zero_weight_borrows:
            return math.inf
        if self.ratio == 0:
            return 0.0
        return self.ratio / self.weight

    def rounded(self) -> int:
        """status.fairSharing.weightedShare: ceil of the weighted share (MaxInt64 for +Inf)."""
        return (1 << 63) - 1 if self.zero_weight_borrows else math.ceil(self.weighted_share())


def compare_drs(a: DRS, b: DRS) -> int:
    if a.zero_weight_borrows and b.zero_weight_borrows:
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.zero_weight_borrows:
        return 1
    if b.zero_weight_borrows:
        return -1
    x, y = a.weighted_share(), b.weighted_share()
    return (x > y) - (x < y)


def dominant_resource_share(node: ResourceNode, request: Usage | None = None) -> DRS:
    weight = float(node.fair_weight)
    if node.parent is None:
        return DRS(weight, 0.0)
    request = request or {}
    borrowed: dict[str, int] = {}
    borrowed_frs = []
    for fr in sorted(node.subtree_quota):
        amount = request.get(fr, 0) + node.usage.get(fr, 0) - node.subtree_quota[fr]
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
            borrowed_frs.append(fr)
    if not borrowed:
        return DRS(weight, 0.0)
    root = node.parent.root()
    lendable: dict[str, int] = {}
    for fr in sorted(root.subtree_quota):
        lendable[fr[1]] = lendable.get(fr[1], 0) + potential_available(node.parent, fr)
    ratio, resource = 0.0, ""
    for res in sorted(borrowed):
        lr = lendable.get(res, 0)
        if lr > 0:
            r = borrowed[res] * 1000.0 / lr
            if r > ratio:
                ratio, resource = r, res
    return DRS(weight, ratio, resource, True, tuple(borrowed_frs))


@dataclass
class _Tournament:
    """One tournament over a cohort tree: DRS per (parent cohort, entry) after admitting that entry."""

    values: dict[tuple[str, Any], tuple[bool, DRS]]
    remaining: dict[str, Any]
    priority_of: Callable[[Any], int]
    timestamp_of: Callable[[Any], float]
    key_of: Callable[[Any], Any]

    def less(self, a: Any, b: Any, cohort: str) -> bool:
        a_borrow, a_drs = self.values[(cohort, self.key_of(a))]
        b_borrow, b_drs = self.values[(cohort, self.key_of(b))]
        if a_borrow != b_borrow:
            return not a_borrow
        c = compare_drs(a_drs, b_drs)
        if c:
            return c < 0
        pa, pb = self.priority_of(a), self.priority_of(b)
        if pa != pb:
            return pa > pb
        ta, tb = self.timestamp_of(a), self.timestamp_of(b)
        if ta != tb:
            return ta < tb
        return self.key_of(a) < self.key_of(b)

    def winner(self, cohort: ResourceNode):
        candidates = [w for w in (self.winner(c) for c in cohort.child_cohorts) if w is not None]
        candidates += [self.remaining[c.name] for c in sorted(cohort.child_cqs, key=lambda n: n.name)
                       if c.name in self.remaining]
        best = None
        for cand in candidates:
            if best is None or self.less(cand, best, cohort.name):
                best = cand
        return best


def fair_sharing_order(entries: list, snapshot, usage_of, priority_of, timestamp_of, key_of) -> Iterator:
    """Yield entries (one per ClusterQueue) in fair-sharing tournament order, re-running the tournament before each
    pop so that earlier admissions in the cycle count. Entries already holding quota come first."""
    remaining: dict[str, Any] = {}
    for e in entries:
        remaining[e.info.cluster_queue] = e
    for n in [n for n in sorted(remaining) if remaining[n].info.obj.has_quota_reservation]:
        yield remaining.pop(n)
    while remaining:
        name = sorted(remaining)[0]
        node = snapshot.cluster_queues[name].node
        if node.parent is None:
            yield remaining.pop(name)
            continue
        root = node.root()
        values: dict[tuple[str, str], tuple[bool, DRS]] = {}
        for cq_node in sorted(root.subtree_cluster_queues(), key=lambda n: n.name):
            e = remaining.get(cq_node.name)
            if e is None:
                continue
            cq = snapshot.cluster_queues[cq_node.name]
            usage = usage_of(e)
            cq.add_usage(usage)
            try:
                child = cq_node
                for ancestor in cq_node.path_parent_to_root():
                    drs = dominant_resource_share(child)
                    values[(ancestor.name, key_of(e))] = (drs.borrowing_on(usage), drs)
                    child = ancestor
            finally:
                cq.remove_usage(usage)
        winner = _Tournament(values, remaining, priority_of, timestamp_of, key_of).winner(root)
        del remaining[winner.info.cluster_queue]
        yield winner

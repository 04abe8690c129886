"""Fair sharing: Dominant Resource Share (DRS) and fair-sharing preemption.

Ported from kubernetes-sigs/kueue:
- pkg/cache/scheduler/fair_sharing.go (dominantResourceShare, calculateLendable, CompareDRS);
- pkg/scheduler/preemption/fair_strategy.go (iterateWithFirstFsStrategy / iterateWithSecondFsStrategy, the
  preemptor-within-nominal shortcut, re-evaluation after same-ClusterQueue targets);
- pkg/scheduler/preemption/fairsharing/ordering.go, target.go, least_common_ancestor.go (which ClusterQueue to take
  victims from next: descend from the root to the child with the highest DRS; shares compared at the
  "almost least common ancestors" of preemptor and target);
- pkg/scheduler/preemption/preemption.go (findCandidates, LessThanOrEqualToFinalShare = rule S2-a,
  LessThanInitialShare = rule S2-b).

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
from collections.abc import Iterator
from dataclasses import dataclass

from kubetwin.kueue.api import NEVER
from kubetwin.kueue.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Target,
    _fill_back,
    _priority_too_high,
    _restore,
    _workload_fits,
    candidates_ordering_key,
)
from kubetwin.kueue.quota import ResourceNode, potential_available
from kubetwin.kueue.snapshot import Usage, WorkloadInfo

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
DEFAULT_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


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


def _find_candidates(ctx) -> list[WorkloadInfo]:
    """Same-ClusterQueue workloads allowed by withinClusterQueue, and workloads of borrowing ClusterQueues in the
    cohort tree allowed by reclaimWithinCohort, all using a flavor-resource that needs preemption."""
    out: list[WorkloadInfo] = []
    cq = ctx.cq
    if cq.preemption.within_cluster_queue != NEVER:
        out += [w for _, w in sorted(cq.workloads.items())
                if not _priority_too_high(ctx, w) and w.uses_resources(ctx.frs)]
    if cq.has_parent and cq.preemption.reclaim_within_cohort != NEVER:
        for node in sorted(cq.node.root().subtree_cluster_queues(), key=lambda n: n.name):
            if node is cq.node or not any(node.borrowing(fr) for fr in ctx.frs):
                continue
            other = ctx.snapshot.cluster_queues[node.name]
            out += [w for _, w in sorted(other.workloads.items())
                    if not _priority_too_high(ctx, w) and w.uses_resources(ctx.frs)]
    return out


class _Ordering:
    """TargetClusterQueueOrdering: which ClusterQueue to take the next candidate from."""

    def __init__(self, ctx, candidates: list[WorkloadInfo]) -> None:
        self.ctx = ctx
        self.preemptor = ctx.cq.node
        self.ancestors = list(self.preemptor.path_parent_to_root())
        self.by_cq: dict[str, list[WorkloadInfo]] = {}
        for c in candidates:
            self.by_cq.setdefault(c.cluster_queue, []).append(c)
        self.pruned_cqs: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def has_workload(self, node: ResourceNode) -> bool:
        return bool(self.by_cq.get(node.name))

    def pop(self, node: ResourceNode) -> WorkloadInfo:
        return self.by_cq[node.name].pop(0)

    def drop(self, node: ResourceNode) -> None:
        self.pruned_cqs.add(node.name)

    def targets(self) -> Iterator[ResourceNode]:
        if self.preemptor.parent is None:
            while self.has_workload(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while root.name not in self.pruned_cohorts:
            t = self._next(root)
            if t is not None:
                yield t

    def _next(self, cohort: ResourceNode) -> ResourceNode | None:
        best_cq, best_cq_drs = None, None
        for cq in cohort.child_cqs:
            if cq.name in self.pruned_cqs:
                continue
            drs = dominant_resource_share(cq)
            if (drs.ratio == 0 and cq is not self.preemptor) or not self.has_workload(cq):
                self.pruned_cqs.add(cq.name)
            elif best_cq_drs is None or compare_drs(drs, best_cq_drs) >= 0:
                best_cq, best_cq_drs = cq, drs
        best_cohort, best_cohort_drs = None, None
        for child in cohort.child_cohorts:
            if child.name in self.pruned_cohorts:
                continue
            drs = dominant_resource_share(child)
            if drs.ratio == 0 and child not in self.ancestors:
                self.pruned_cohorts.add(child.name)
            elif best_cohort_drs is None or compare_drs(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cq is None and best_cohort is None:
            self.pruned_cohorts.add(cohort.name)
            return None
        if best_cohort is not None and (best_cq is None or compare_drs(best_cohort_drs, best_cq_drs) >= 0):
            return self._next(best_cohort)
        return best_cq

    def _almost_lcas(self, target: ResourceNode) -> tuple[ResourceNode, ResourceNode]:
        lca = next(a for a in target.path_parent_to_root() if a in self.ancestors)

        def below(node: ResourceNode) -> ResourceNode:
            prev = node
            for a in node.path_parent_to_root():
                if a is lca:
                    return prev
                prev = a
            raise ValueError("no least common ancestor")
        return below(self.preemptor), below(target)

    def shares(self, target: ResourceNode) -> tuple[DRS, DRS]:
        p, t = self._almost_lcas(target)
        return dominant_resource_share(p), dominant_resource_share(t)

    def target_share_after_removal(self, target: ResourceNode, wl: WorkloadInfo) -> DRS:
        cq = self.ctx.snapshot.cluster_queues[target.name]
        cq.remove_usage(wl.usage)
        try:
            return dominant_resource_share(self._almost_lcas(target)[1])
        finally:
            cq.add_usage(wl.usage)


def _strategy(name: str, preemptor_new: DRS, target_old: DRS, target_new: DRS | None) -> bool:
    if name == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return compare_drs(preemptor_new, target_new) <= 0
    return compare_drs(preemptor_new, target_old) < 0


def _first_strategy(ctx, candidates: list[WorkloadInfo], strategy: str, within_nominal: bool, yielded: list):
    """Generator of Targets; returns the candidates to retry with rule S2-b."""
    ordering = _Ordering(ctx, candidates)
    retry: list[WorkloadInfo] = []
    for node in ordering.targets():
        cq = ctx.snapshot.cluster_queues[node.name]
        if node is ordering.preemptor:
            wl = ordering.pop(node)
            ctx.snapshot.remove_workload(wl)
            yielded.append(wl)
            yield Target(wl, IN_CLUSTER_QUEUE, cq.path())
            continue
        if within_nominal:
            wl = ordering.pop(node)
            ctx.snapshot.remove_workload(wl)
            yield Target(wl, IN_COHORT_RECLAMATION, cq.path())
            continue
        p_new, t_old = ordering.shares(node)
        if p_new.zero_weight_borrows and not t_old.zero_weight_borrows:
            while ordering.has_workload(node):
                retry.append(ordering.pop(node))
            continue
        while ordering.has_workload(node):
            wl = ordering.pop(node)
            t_new = ordering.target_share_after_removal(node, wl)
            if _strategy(strategy, p_new, t_old, t_new):
                ctx.snapshot.remove_workload(wl)
                yield Target(wl, IN_COHORT_FAIR_SHARING, cq.path())
                break
            retry.append(wl)
    return retry


def _second_strategy(ctx, candidates: list[WorkloadInfo]):
    ordering = _Ordering(ctx, candidates)
    for node in ordering.targets():
        p_new, t_old = ordering.shares(node)
        passed = _strategy(LESS_THAN_INITIAL_SHARE, p_new, t_old, None)
        wl = ordering.pop(node)
        if passed:
            ctx.snapshot.remove_workload(wl)
            yield Target(wl, IN_COHORT_FAIR_SHARING, ctx.snapshot.cluster_queues[node.name].path())
        ordering.drop(node)


def _fair_candidates(ctx, candidates: list[WorkloadInfo], strategies: tuple[str, ...]):
    within_nominal = all(not ctx.cq.node.borrowing(fr) for fr in ctx.frs)
    same_cq: list[WorkloadInfo] = []
    retry = yield from _first_strategy(ctx, candidates, strategies[0], within_nominal, same_cq)
    if same_cq:  # FairSharingReevaluatePreemptionCandidates: the preemptor's share dropped, retry the rest
        retry = yield from _first_strategy(ctx, retry, strategies[0], within_nominal, same_cq)
    if len(strategies) > 1:
        yield from _second_strategy(ctx, retry)


def validate_strategies(strategies) -> tuple[str, ...]:
    """The preemptionStrategies list as a tuple; empty or None is Kueue's default (both). Only the lists
    pkg/config/validation.go accepts are allowed: [S2-a], [S2-b] or [S2-a, S2-b]."""
    if not strategies:
        return DEFAULT_STRATEGIES
    strategies = tuple(strategies)
    if strategies not in ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,), (LESS_THAN_INITIAL_SHARE,), DEFAULT_STRATEGIES):
        raise ValueError(f"unsupported fair sharing preemption strategies {list(strategies)}: want one of "
                         f"{[LESS_THAN_OR_EQUAL_TO_FINAL_SHARE]}, {[LESS_THAN_INITIAL_SHARE]}, "
                         f"{list(DEFAULT_STRATEGIES)}")
    return strategies


def fair_targets(ctx, strategies: tuple[str, ...] | None = None) -> list:
    """Victims under fair sharing. The incoming usage is counted in the preemptor's share while candidates are
    chosen, and left out when checking whether the workload fits. ``strategies`` (the Configuration's
    preemptionStrategies, default both): the first drives the first pass; a second, if any, the retry pass
    (fair_strategy.go: runFirstFsStrategy with strategies[0], the second strategy only when there are two)."""
    strategies = validate_strategies(strategies)
    candidates = _find_candidates(ctx)
    if not candidates:
        return []
    candidates.sort(key=lambda w: candidates_ordering_key(w, ctx.cq.name, ctx.now))
    targets: list = []
    ctx.cq.add_usage(ctx.usage)
    try:
        for target in _fair_candidates(ctx, candidates, strategies):
            ctx.cq.remove_usage(ctx.usage)
            try:
                targets.append(target)
                if _workload_fits(ctx, True):
                    targets = _fill_back(ctx, targets, True)
                    _restore(ctx.snapshot, targets)
                    return targets
            finally:
                ctx.cq.add_usage(ctx.usage)
        _restore(ctx.snapshot, targets)
        return []
    finally:
        ctx.cq.remove_usage(ctx.usage)


@dataclass
class _Tournament:
    """One tournament over a cohort tree: DRS per (parent cohort, entry) after admitting that entry."""

    values: dict
    remaining: dict
    priority_of: object
    timestamp_of: object
    key_of: object

    def less(self, a, b, cohort: str) -> bool:
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
    remaining: dict[str, object] = {}
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

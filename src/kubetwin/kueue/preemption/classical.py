"""Classical preemption: which admitted workloads to evict so that a workload fits (Kueue's victim selection).

Ported from kubernetes-sigs/kueue (facts and names; the code is not copied):
- pkg/scheduler/preemption/classical_strategy.go (the allowBorrowing attempts and their order);
- pkg/scheduler/preemption/classical/candidate_generator.go and hierarchical_preemption.go (candidate classes,
  validity while iterating; FindHeightOfLowestSubtreeThatFits lives in ``quota``);
- pkg/scheduler/preemption/preemption.go (queueUnderNominalInResourcesNeedingPreemption, buildCQPath).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kubetwin.kueue.api import NEVER
from kubetwin.kueue.preemption.common import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    PreemptionContext,
    Target,
    candidates_ordering_key,
    fill_back,
    order_facts,
    priority_too_high,
    restore,
    workload_fits,
)
from kubetwin.kueue.quota import ResourceNode, is_within_nominal, quantities_fit_in_quota
from kubetwin.kueue.snapshot import ClusterQueueSnapshot, WorkloadInfo

# Candidate variants (classical/hierarchical_preemption.go).
_NEVER, _WITHIN_CQ, _HIERARCHICAL_RECLAIM, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(5)
_VARIANT_REASON = {_WITHIN_CQ: IN_CLUSTER_QUEUE, _HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
                   _RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
                   _RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING}


@dataclass
class _Candidate:
    wl: WorkloadInfo
    lca: ResourceNode | None
    variant: int


def _borrow_within_cohort(cq: ClusterQueueSnapshot) -> tuple[bool, int | None]:
    p = cq.preemption
    if p.borrow_within_cohort_policy == NEVER:
        return False, None
    return True, p.max_priority_threshold


def _classify(ctx: PreemptionContext, wi: WorkloadInfo, hierarchical_advantage: bool) -> int:
    if not wi.uses_resources(ctx.frs):
        return _NEVER
    if priority_too_high(ctx, wi):
        return _NEVER
    if wi.cluster_queue == ctx.cq.name:
        return _WITHIN_CQ
    if hierarchical_advantage:
        return _HIERARCHICAL_RECLAIM
    allowed, threshold = _borrow_within_cohort(ctx.cq)
    if not allowed:
        return _RECLAIM_WITHOUT_BORROWING
    if wi.priority >= ctx.preemptor.priority or (threshold is not None and wi.priority > threshold):
        return _RECLAIM_WITHOUT_BORROWING
    return _RECLAIM_WHILE_BORROWING


def _candidates_from_cq(ctx: PreemptionContext, cq: ClusterQueueSnapshot, lca: ResourceNode | None,
                        advantage: bool) -> list[_Candidate]:
    out = []
    for wi in cq.workloads.values():  # candidates are sorted by a key that ends in the workload's key
        variant = _classify(ctx, wi, advantage)
        if variant != _NEVER:
            out.append(_Candidate(wi, lca, variant))
    return out


def _collect_in_subtree(ctx: PreemptionContext, current: ResourceNode, subtree_root: ResourceNode,
                        skip: ResourceNode | None, advantage: bool, result: list[_Candidate]) -> None:
    for child in current.child_cohorts:
        if child is skip or is_within_nominal(child, ctx.frs):
            continue
        _collect_in_subtree(ctx, child, subtree_root, skip, advantage, result)
    for child in current.child_cqs:
        if child is ctx.cq.node:
            continue
        if not is_within_nominal(child, ctx.frs):
            result.extend(_candidates_from_cq(ctx, ctx.snapshot.cluster_queues[child.name], subtree_root, advantage))


def _hierarchical_candidates(ctx: PreemptionContext) -> tuple[list[_Candidate], list[_Candidate]]:
    hierarchy: list[_Candidate] = []
    priority: list[_Candidate] = []
    if not ctx.cq.has_parent or ctx.cq.preemption.reclaim_within_cohort == NEVER:
        return hierarchy, priority
    advantage, remaining = quantities_fit_in_quota(ctx.cq.node, ctx.usage)
    previous: ResourceNode | None = None
    for root in ctx.cq.node.path_parent_to_root():
        _collect_in_subtree(ctx, root, root, previous, advantage, hierarchy if advantage else priority)
        fits, remaining = quantities_fit_in_quota(root, remaining)
        advantage = advantage or fits
        previous = root
    return hierarchy, priority


class _CandidateIterator:
    """Ordered candidates: evicted ones of each class first, then hierarchy, priority (other-CQ), same-CQ."""

    def __init__(self, ctx: PreemptionContext) -> None:
        self.ctx = ctx
        same = _candidates_from_cq(ctx, ctx.cq, None, False) if ctx.cq.preemption.within_cluster_queue != NEVER else []
        hierarchy, priority = _hierarchical_candidates(ctx)
        for lst in (same, hierarchy, priority):
            lst.sort(key=lambda c: candidates_ordering_key(c.wl, ctx.cq.name, ctx.now))
        parts = [[c for c in lst if order_facts(c.wl)[1]] for lst in (hierarchy, priority, same)]
        parts += [[c for c in lst if not order_facts(c.wl)[1]] for lst in (hierarchy, priority, same)]
        self.candidates = [c for part in parts for c in part]
        self.no_candidate_from_other_queues = not hierarchy and not priority
        self.no_candidate_for_hierarchical_reclaim = not hierarchy

    def _valid(self, c: _Candidate, borrow: bool) -> bool:
        if c.wl.cluster_queue == self.ctx.cq.name:
            return True
        if borrow and c.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        cq = self.ctx.snapshot.cluster_queues[c.wl.cluster_queue]
        if is_within_nominal(cq.node, self.ctx.frs):
            return False
        for node in cq.node.path_parent_to_root():
            if node is c.lca:
                break
            if is_within_nominal(node, self.ctx.frs):
                return False
        return True

    def iterate(self, borrow: bool) -> Iterator[Target]:
        """Yield valid candidates; each is removed from the snapshot before it is yielded."""
        for c in self.candidates:
            if not self._valid(c, borrow):
                continue
            cq = self.ctx.snapshot.cluster_queues[c.wl.cluster_queue]
            path = cq.path()
            self.ctx.snapshot.remove_workload(c.wl)
            yield Target(c.wl, _VARIANT_REASON[c.variant], path)


def _queue_under_nominal(ctx: PreemptionContext) -> bool:
    return all(ctx.cq.quota_for(fr).nominal > ctx.cq.node.usage.get(fr, 0) for fr in ctx.frs)


def classical_targets(ctx: PreemptionContext) -> list[Target]:
    """Victims without fair sharing: try the attempts (with, then without borrowing, or the reverse) in
    classical_strategy.go's order; the first that makes the preemptor fit wins."""
    gen = _CandidateIterator(ctx)
    bwc_forbidden = ctx.cq.preemption.borrow_within_cohort_policy == NEVER
    if gen.no_candidate_from_other_queues or (bwc_forbidden and not _queue_under_nominal(ctx)):
        attempts = [True]
    elif bwc_forbidden and gen.no_candidate_for_hierarchical_reclaim:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        targets: list[Target] = []
        for target in gen.iterate(allow_borrowing):
            targets.append(target)
            if workload_fits(ctx, allow_borrowing):
                targets = fill_back(ctx, targets, allow_borrowing)
                restore(ctx.snapshot, targets)
                return targets
        restore(ctx.snapshot, targets)
    return []

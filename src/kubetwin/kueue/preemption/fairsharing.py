"""Fair-sharing preemption: victims chosen by Dominant Resource Share (rules S2-a and S2-b).

Ported from kubernetes-sigs/kueue (facts and names; the code is not copied):
- pkg/scheduler/preemption/fair_strategy.go (iterateWithFirstFsStrategy / iterateWithSecondFsStrategy, the
  preemptor-within-nominal shortcut, re-evaluation after same-ClusterQueue targets);
- pkg/scheduler/preemption/fairsharing/ordering.go, target.go, least_common_ancestor.go (which ClusterQueue to take
  victims from next: descend from the root to the child with the highest DRS; shares compared at the
  "almost least common ancestors" of preemptor and target);
- pkg/scheduler/preemption/fairsharing/strategy.go and preemption.go (findCandidates,
  LessThanOrEqualToFinalShare = rule S2-a, LessThanInitialShare = rule S2-b);
- pkg/config/validation.go (the preemptionStrategies lists accepted).

The shares themselves (DRS) are the cache's: ``kueue.fairsharing``.
"""

from __future__ import annotations

from collections.abc import Iterator

from kubetwin.kueue.api import NEVER
from kubetwin.kueue.config import (
    DEFAULT_PREEMPTION_STRATEGIES,
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    SUPPORTED_STRATEGIES,
)
from kubetwin.kueue.fairsharing import DRS, compare_drs, dominant_resource_share
from kubetwin.kueue.preemption.common import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    PreemptionContext,
    Target,
    candidates_ordering_key,
    fill_back,
    priority_too_high,
    restore,
    workload_fits,
)
from kubetwin.kueue.quota import ResourceNode
from kubetwin.kueue.snapshot import WorkloadInfo


def _find_candidates(ctx: PreemptionContext) -> list[WorkloadInfo]:
    """Same-ClusterQueue workloads allowed by withinClusterQueue, and workloads of borrowing ClusterQueues in the
    cohort tree allowed by reclaimWithinCohort, all using a flavor-resource that needs preemption."""
    out: list[WorkloadInfo] = []
    cq = ctx.cq
    if cq.preemption.within_cluster_queue != NEVER:
        out += [w for _, w in sorted(cq.workloads.items())
                if not priority_too_high(ctx, w) and w.uses_resources(ctx.frs)]
    if cq.has_parent and cq.preemption.reclaim_within_cohort != NEVER:
        for node in sorted(cq.node.root().subtree_cluster_queues(), key=lambda n: n.name):
            if node is cq.node or not any(node.borrowing(fr) for fr in ctx.frs):
                continue
            other = ctx.snapshot.cluster_queues[node.name]
            out += [w for _, w in sorted(other.workloads.items())
                    if not priority_too_high(ctx, w) and w.uses_resources(ctx.frs)]
    return out


class _Ordering:
    """TargetClusterQueueOrdering: which ClusterQueue to take the next candidate from."""

    def __init__(self, ctx: PreemptionContext, candidates: list[WorkloadInfo]) -> None:
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
        if best_cohort is not None and best_cohort_drs is not None and (
                best_cq is None or best_cq_drs is None or compare_drs(best_cohort_drs, best_cq_drs) >= 0):
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
        assert target_new is not None  # the caller computes the target's share after removal for this strategy
        return compare_drs(preemptor_new, target_new) <= 0
    return compare_drs(preemptor_new, target_old) < 0


def _first_strategy(ctx: PreemptionContext, candidates: list[WorkloadInfo], strategy: str, within_nominal: bool,
                    yielded: list):
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


def _second_strategy(ctx: PreemptionContext, candidates: list[WorkloadInfo]):
    ordering = _Ordering(ctx, candidates)
    for node in ordering.targets():
        p_new, t_old = ordering.shares(node)
        passed = _strategy(LESS_THAN_INITIAL_SHARE, p_new, t_old, None)
        wl = ordering.pop(node)
        if passed:
            ctx.snapshot.remove_workload(wl)
            yield Target(wl, IN_COHORT_FAIR_SHARING, ctx.snapshot.cluster_queues[node.name].path())
        ordering.drop(node)


def _fair_candidates(ctx: PreemptionContext, candidates: list[WorkloadInfo],
                     strategies: tuple[str, ...]) -> Iterator[Target]:
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
        return DEFAULT_PREEMPTION_STRATEGIES
    strategies = tuple(strategies)
    if strategies not in SUPPORTED_STRATEGIES:
        raise ValueError(f"unsupported fair sharing preemption strategies {list(strategies)}: want one of "
                         f"{[LESS_THAN_OR_EQUAL_TO_FINAL_SHARE]}, {[LESS_THAN_INITIAL_SHARE]}, "
                         f"{list(DEFAULT_PREEMPTION_STRATEGIES)}")
    return strategies


def fair_targets(ctx: PreemptionContext, strategies: tuple[str, ...]) -> list:
    """Victims under fair sharing. The incoming usage is counted in the preemptor's share while candidates are
    chosen, and left out when checking whether the workload fits. ``strategies`` (the Configuration's
    preemptionStrategies, default both): the first drives the first pass; a second, if any, the retry pass
    (fair_strategy.go: runFirstFsStrategy with strategies[0], the second strategy only when there are two); the
    Preemptor has validated them."""
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
                if workload_fits(ctx, True):
                    targets = fill_back(ctx, targets, True)
                    restore(ctx.snapshot, targets)
                    return targets
            finally:
                ctx.cq.add_usage(ctx.usage)
        restore(ctx.snapshot, targets)
        return []
    finally:
        ctx.cq.remove_usage(ctx.usage)

"""Classical preemption: which admitted workloads to evict so that a workload fits (Kueue's victim selection).

Ported from kubernetes-sigs/kueue:
- pkg/scheduler/preemption/preemption.go (getTargets, fillBackWorkloads, workloadFits, preemptionMessage,
  HumanReadablePreemptionReasons, queueUnderNominalInResourcesNeedingPreemption, buildCQPath);
- pkg/scheduler/preemption/classical_strategy.go (the allowBorrowing attempts and their order);
- pkg/scheduler/preemption/classical/candidate_generator.go and hierarchical_preemption.go (candidate classes,
  validity while iterating, FindHeightOfLowestSubtreeThatFits lives in ``quota``);
- pkg/scheduler/preemption/common/ordering.go (CandidatesOrdering);
- pkg/scheduler/preemption/preemption_oracle.go (SimulatePreemption, used by the flavor assigner).

Candidates are removed greedily in order until the preemptor fits, then added back in reverse order (all but the
last removed) wherever the preemptor still fits without them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kubetwin.kueue.api import ANY, LOWER_OR_NEWER_EQUAL_PRIORITY, LOWER_PRIORITY, NEVER, parse_time
from kubetwin.kueue.quota import (
    FlavorResource,
    ResourceNode,
    find_height_of_lowest_subtree_that_fits,
    is_within_nominal,
    quantities_fit_in_quota,
)
from kubetwin.kueue.snapshot import ClusterQueueSnapshot, Snapshot, Usage, WorkloadInfo

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

HUMAN_READABLE_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    "": "UNKNOWN",
}

# Preemption possibilities reported by the oracle (preemption/common PreemptionPossibility).
NO_CANDIDATES, PREEMPT, RECLAIM = "NoCandidates", "Preempt", "Reclaim"

# Candidate variants (classical/hierarchical_preemption.go).
_NEVER, _WITHIN_CQ, _HIERARCHICAL_RECLAIM, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(5)
_VARIANT_REASON = {_WITHIN_CQ: IN_CLUSTER_QUEUE, _HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
                   _RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
                   _RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING}


@dataclass(frozen=True)
class Target:
    """A victim: the workload, why (an Evicted/Preempted reason), and its ClusterQueue's path for the message."""

    workload: WorkloadInfo
    reason: str
    cq_path: str = ""

    @property
    def key(self) -> str:
        return self.workload.key


def preemption_message(preemptor: WorkloadInfo, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """The Evicted/Preempted condition message Kueue writes on a victim (preemption.go preemptionMessage)."""
    uid = preemptor.obj.uid or "UNKNOWN"
    job_uid = preemptor.obj.job_uid or "UNKNOWN"
    return (f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
            f"{HUMAN_READABLE_REASONS.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path or 'UNKNOWN'}; "
            f"preemptee path: {preemptee_path or 'UNKNOWN'}")


@dataclass
class _Candidate:
    wl: WorkloadInfo
    lca: ResourceNode | None
    variant: int


class _Context:
    """What one target search needs: the preemptor, its ClusterQueue, the snapshot and the usage to fit."""

    def __init__(self, preemptor: WorkloadInfo, cq: ClusterQueueSnapshot, snapshot: Snapshot,
                 frs_need_preemption: set[FlavorResource], usage: Usage, now: float) -> None:
        self.preemptor, self.cq, self.snapshot = preemptor, cq, snapshot
        self.frs = frs_need_preemption
        self.usage = usage
        self.now = now


def _order_facts(wi: WorkloadInfo) -> tuple:
    """(obj, evicted, QuotaReserved time or None), kept on the WorkloadInfo until its Workload object changes:
    ordering reads them for every candidate of every preemption attempt."""
    facts = wi.order_facts
    if facts is None or facts[0] is not wi.obj:
        c = wi.obj.condition("QuotaReserved")
        reserved = parse_time(c.get("lastTransitionTime")) if c is not None and c.get("status") == "True" else None
        facts = wi.order_facts = (wi.obj, wi.obj.is_evicted, reserved)
    return facts


def candidates_ordering_key(wi: WorkloadInfo, cq_name: str, now: float) -> tuple:
    """Evicted first, other ClusterQueues first, lower priority first, latest quota reservation first, UID."""
    _, evicted, reserved = _order_facts(wi)
    return (not evicted, wi.cluster_queue == cq_name, wi.priority, -(now if reserved is None else reserved),
            wi.obj.uid, wi.key)


def _priority_too_high(ctx: _Context, wi: WorkloadInfo) -> bool:
    policy = (ctx.cq.preemption.within_cluster_queue if wi.cluster_queue == ctx.cq.name
              else ctx.cq.preemption.reclaim_within_cohort)
    incoming, candidate = ctx.preemptor.priority, wi.priority
    lower = incoming > candidate
    if policy == LOWER_PRIORITY:
        return not lower
    if policy == LOWER_OR_NEWER_EQUAL_PRIORITY:
        newer_equal = incoming == candidate and ctx.preemptor.obj.queue_order_time() < wi.obj.queue_order_time()
        return not (lower or newer_equal)
    return policy != ANY


def _borrow_within_cohort(cq: ClusterQueueSnapshot) -> tuple[bool, int | None]:
    p = cq.preemption
    if p.borrow_within_cohort_policy == NEVER:
        return False, None
    return True, p.max_priority_threshold


def _classify(ctx: _Context, wi: WorkloadInfo, hierarchical_advantage: bool) -> int:
    if not wi.uses_resources(ctx.frs):
        return _NEVER
    if _priority_too_high(ctx, wi):
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


def _candidates_from_cq(ctx: _Context, cq: ClusterQueueSnapshot, lca: ResourceNode | None,
                        advantage: bool) -> list[_Candidate]:
    out = []
    for wi in cq.workloads.values():  # candidates are sorted by a key that ends in the workload's key
        variant = _classify(ctx, wi, advantage)
        if variant != _NEVER:
            out.append(_Candidate(wi, lca, variant))
    return out


def _collect_in_subtree(ctx: _Context, current: ResourceNode, subtree_root: ResourceNode,
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


def _hierarchical_candidates(ctx: _Context) -> tuple[list[_Candidate], list[_Candidate]]:
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

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx
        same = _candidates_from_cq(ctx, ctx.cq, None, False) if ctx.cq.preemption.within_cluster_queue != NEVER else []
        hierarchy, priority = _hierarchical_candidates(ctx)
        for lst in (same, hierarchy, priority):
            lst.sort(key=lambda c: candidates_ordering_key(c.wl, ctx.cq.name, ctx.now))
        parts = [[c for c in lst if _order_facts(c.wl)[1]] for lst in (hierarchy, priority, same)]
        parts += [[c for c in lst if not _order_facts(c.wl)[1]] for lst in (hierarchy, priority, same)]
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


def _workload_fits(ctx: _Context, allow_borrowing: bool) -> bool:
    for fr, v in sorted(ctx.usage.items()):
        if not allow_borrowing and ctx.cq.node.borrowing_with(fr, v):
            return False
        if v > ctx.cq.available(fr):
            return False
    return True


def _queue_under_nominal(ctx: _Context) -> bool:
    return all(ctx.cq.quota_for(fr).nominal > ctx.cq.node.usage.get(fr, 0) for fr in ctx.frs)


def _fill_back(ctx: _Context, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    for i in range(len(targets) - 2, -1, -1):
        ctx.snapshot.add_workload(targets[i].workload)
        if _workload_fits(ctx, allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            ctx.snapshot.remove_workload(targets[i].workload)
    return targets


def _restore(snapshot: Snapshot, targets: list[Target]) -> None:
    for t in targets:
        snapshot.add_workload(t.workload)


def _classical_targets(ctx: _Context) -> list[Target]:
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
            if _workload_fits(ctx, allow_borrowing):
                targets = _fill_back(ctx, targets, allow_borrowing)
                _restore(ctx.snapshot, targets)
                return targets
        _restore(ctx.snapshot, targets)
    return []


class Preemptor:
    """Finds preemption targets against a Snapshot; ``now`` stands in for victims without a reservation time.
    Under fair sharing, ``fair_sharing_strategies`` are the Configuration's preemptionStrategies (default both)."""

    def __init__(self, now: float = 0.0, fair_sharing: bool = False,
                 fair_sharing_strategies: tuple[str, ...] | None = None) -> None:
        self.now = now
        self.fair_sharing = fair_sharing
        # Configuration fairSharing.preemptionStrategies; None means Kueue's default (both, in order)
        self.fair_sharing_strategies = tuple(fair_sharing_strategies) if fair_sharing_strategies else None

    def get_targets(self, wl: WorkloadInfo, assignment, snapshot: Snapshot) -> list[Target]:
        """Victims for ``assignment`` (a flavorassigner.Assignment whose Preempt-mode flavors need room)."""
        cq = snapshot.cluster_queues[wl.cluster_queue]
        frs = assignment.flavor_resources_need_preemption()
        ctx = _Context(wl, cq, snapshot, frs, assignment.total_requests(), self.now)
        return self._targets(ctx)

    def _targets(self, ctx: _Context) -> list[Target]:
        if self.fair_sharing:
            from kubetwin.kueue.fairsharing import fair_targets  # late: fairsharing builds on this module

            return fair_targets(ctx, self.fair_sharing_strategies)
        return _classical_targets(ctx)

    def simulate_preemption(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, snapshot: Snapshot,
                            fr: FlavorResource, quantity: int) -> tuple[str, int]:
        """Whether preempting could make room for ``quantity`` of fr: NoCandidates, Preempt (some victim in the
        preemptor's own ClusterQueue) or Reclaim (victims only elsewhere), with the borrowing level afterwards."""
        ctx = _Context(wl, cq, snapshot, {fr}, {fr: quantity}, self.now)
        targets = self._targets(ctx)
        if not targets:
            return NO_CANDIDATES, find_height_of_lowest_subtree_that_fits(cq.node, fr, quantity)[0]
        revert = snapshot.simulate_removal([t.workload for t in targets])
        borrow = find_height_of_lowest_subtree_that_fits(cq.node, fr, quantity)[0]
        revert()
        if any(t.workload.cluster_queue == cq.name for t in targets):
            return PREEMPT, borrow
        return RECLAIM, borrow


def can_always_reclaim(cq: ClusterQueueSnapshot) -> bool:
    """A ClusterQueue with reclaimWithinCohort Any can always get its nominal quota back later (policy.go)."""
    return cq.preemption.reclaim_within_cohort == ANY

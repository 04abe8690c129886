"""What classical and fair-sharing preemption share: victims, reasons, candidate ordering, the preemption
policies, and the fit / fill-back steps of a target search.

Ported from kubernetes-sigs/kueue (facts and names; the code is not copied):
- pkg/scheduler/preemption/common/ordering.go (CandidatesOrdering);
- pkg/scheduler/preemption/common/preemption_policy.go (SatisfiesPreemptionPolicy);
- pkg/scheduler/preemption/common/types.go (PreemptionPossibility);
- pkg/scheduler/preemption/preemption.go (Target, preemptionCtx, workloadFits, fillBackWorkloads,
  preemptionMessage, HumanReadablePreemptionReasons); policy.go (CanAlwaysReclaim).

Candidates are removed greedily in order until the preemptor fits, then added back in reverse order (all but the
last removed) wherever the preemptor still fits without them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.kueue.api import ANY, LOWER_OR_NEWER_EQUAL_PRIORITY, LOWER_PRIORITY, parse_time
from kubetwin.kueue.quota import FlavorResource
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


class PreemptionContext:
    """What one target search needs: the preemptor, its ClusterQueue, the snapshot, the flavor-resources that
    need preemption and the usage to fit (preemption.go preemptionCtx)."""

    def __init__(self, preemptor: WorkloadInfo, cq: ClusterQueueSnapshot, snapshot: Snapshot,
                 frs_need_preemption: set[FlavorResource], usage: Usage, now: float) -> None:
        self.preemptor, self.cq, self.snapshot = preemptor, cq, snapshot
        self.frs = frs_need_preemption
        self.usage = usage
        self.now = now


def order_facts(wi: WorkloadInfo) -> tuple:
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
    _, evicted, reserved = order_facts(wi)
    return (not evicted, wi.cluster_queue == cq_name, wi.priority, -(now if reserved is None else reserved),
            wi.obj.uid, wi.key)


def priority_too_high(ctx: PreemptionContext, wi: WorkloadInfo) -> bool:
    """Whether the ClusterQueue's policy (withinClusterQueue for its own workloads, reclaimWithinCohort for
    others) forbids preempting wi: the negation of SatisfiesPreemptionPolicy."""
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


def workload_fits(ctx: PreemptionContext, allow_borrowing: bool) -> bool:
    """The preemptor's usage fits what its ClusterQueue has available now, borrowing only if allowed."""
    for fr, v in sorted(ctx.usage.items()):
        if not allow_borrowing and ctx.cq.node.borrowing_with(fr, v):
            return False
        if v > ctx.cq.available(fr):
            return False
    return True


def fill_back(ctx: PreemptionContext, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """fillBackWorkloads: add back every target but the last whose removal the preemptor does not need."""
    for i in range(len(targets) - 2, -1, -1):
        ctx.snapshot.add_workload(targets[i].workload)
        if workload_fits(ctx, allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            ctx.snapshot.remove_workload(targets[i].workload)
    return targets


def restore(snapshot: Snapshot, targets: list[Target]) -> None:
    """Put the targets' workloads back into the snapshot once the search is over."""
    for t in targets:
        snapshot.add_workload(t.workload)


def can_always_reclaim(cq: ClusterQueueSnapshot) -> bool:
    """A ClusterQueue with reclaimWithinCohort Any can always get its nominal quota back later (policy.go)."""
    return cq.preemption.reclaim_within_cohort == ANY

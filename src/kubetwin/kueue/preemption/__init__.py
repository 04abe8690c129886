"""Kueue's preemption: which admitted workloads to evict so that a workload fits.

The package follows kubernetes-sigs/kueue pkg/scheduler/preemption: this module is preemption.go's entry point
(Preemptor: GetTargets) and preemption_oracle.go (SimulatePreemption, used by the flavor assigner); ``common``
holds what both strategies share, ``classical`` the classical strategy, ``fairsharing`` the fair-sharing one.
"""

from __future__ import annotations

from kubetwin.kueue.preemption.classical import classical_targets
from kubetwin.kueue.preemption.common import (
    NO_CANDIDATES,
    PREEMPT,
    RECLAIM,
    PreemptionContext,
    Target,
)
from kubetwin.kueue.preemption.fairsharing import fair_targets, validate_strategies
from kubetwin.kueue.quota import FlavorResource, find_height_of_lowest_subtree_that_fits
from kubetwin.kueue.snapshot import ClusterQueueSnapshot, Snapshot, WorkloadInfo


class Preemptor:
    """Finds preemption targets against a Snapshot; ``now`` stands in for victims without a reservation time.
    Under fair sharing, ``fair_sharing_strategies`` are the Configuration's preemptionStrategies (default both)."""

    def __init__(self, now: float = 0.0, fair_sharing: bool = False,
                 fair_sharing_strategies: tuple[str, ...] | None = None) -> None:
        self.now = now
        self.fair_sharing = fair_sharing
        # Configuration fairSharing.preemptionStrategies, checked once here; None means Kueue's default (both)
        self.fair_sharing_strategies = validate_strategies(fair_sharing_strategies)

    def get_targets(self, wl: WorkloadInfo, assignment, snapshot: Snapshot) -> list[Target]:
        """Victims for ``assignment`` (a flavorassigner.Assignment whose Preempt-mode flavors need room)."""
        cq = snapshot.cluster_queues[wl.cluster_queue]
        frs = assignment.flavor_resources_need_preemption()
        ctx = PreemptionContext(wl, cq, snapshot, frs, assignment.total_requests(), self.now)
        return self._targets(ctx)

    def _targets(self, ctx: PreemptionContext) -> list[Target]:
        if self.fair_sharing:
            return fair_targets(ctx, self.fair_sharing_strategies)
        return classical_targets(ctx)

    def simulate_preemption(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, snapshot: Snapshot,
                            fr: FlavorResource, quantity: int) -> tuple[str, int]:
        """Whether preempting could make room for ``quantity`` of fr: NoCandidates, Preempt (some victim in the
        preemptor's own ClusterQueue) or Reclaim (victims only elsewhere), with the borrowing level afterwards."""
        ctx = PreemptionContext(wl, cq, snapshot, {fr}, {fr: quantity}, self.now)
        targets = self._targets(ctx)
        if not targets:
            return NO_CANDIDATES, find_height_of_lowest_subtree_that_fits(cq.node, fr, quantity)[0]
        revert = snapshot.simulate_removal([t.workload for t in targets])
        borrow = find_height_of_lowest_subtree_that_fits(cq.node, fr, quantity)[0]
        revert()
        if any(t.workload.cluster_queue == cq.name for t in targets):
            return PREEMPT, borrow
        return RECLAIM, borrow

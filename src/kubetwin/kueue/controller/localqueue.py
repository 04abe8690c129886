"""The LocalQueue reconciler's Active condition (kubernetes-sigs/kueue pkg/controller/core/localqueue_controller.go).

Reconcile writes, through UpdateStatusIfChanged (SetStatusCondition with the LocalQueue's generation as
observedGeneration), condition `Active`:
- True "Ready" "Can submit new workloads to localQueue" while its ClusterQueue exists and is active;
- False "ClusterQueueDoesNotExist" "Can't submit new workloads to clusterQueue" while it does not exist;
- False "ClusterQueueIsInactive" with the same message while it exists and is not active.
Upstream reads the ClusterQueue object's Active condition; the twin writes that condition only for admission-check
reasons (`kueue.controller.admissionchecks`), so the reconciler asks the cache the condition is written from
(`KueueScheduler.inactive_reason`: missing flavors, stopPolicy, admission checks, a cohort cycle) — the same answer.
A LocalQueue's own spec.stopPolicy (reason "Stopped") is not read by the twin: `kueue.api.LocalQueue` has no field
for it and workloads route through the queue as with None.
Watches only enqueue (upstream's qCQHandler enqueues a ClusterQueue's LocalQueues on its create, delete and
condition change); the reconcile runs after the instant's handlers, so the result does not depend on the order the
controllers were created in.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import cast

from kubetwin.k8s.conditions import conditions_of, set_condition
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.outcomes import condition
from kubetwin.sim.env import Environment
from kubetwin.store.store import Store

READY = (True, "Ready", "Can submit new workloads to localQueue")
CQ_INACTIVE_MESSAGE = "Can't submit new workloads to clusterQueue"  # clusterQueueIsInactiveMsg
MISSING = (False, "ClusterQueueDoesNotExist", CQ_INACTIVE_MESSAGE)
INACTIVE = (False, "ClusterQueueIsInactive", CQ_INACTIVE_MESSAGE)


class LocalQueueReconciler:
    """Writes each LocalQueue's Active condition as its ClusterQueue stands when the reconcile runs."""

    def __init__(self, store: Store, env: Environment, sched: KueueScheduler, now: Callable[[], float]) -> None:
        self.store, self.sched, self.now = store, sched, now
        self._queue = WorkQueue(env, self._reconcile)

    def enqueue_all(self) -> None:
        """A queue spec changed (a ClusterQueue, flavor, cohort, LocalQueue) or a ClusterQueue's activity did:
        every LocalQueue is reconciled once at the end of the instant (they are few)."""
        for lq in self.store.list("LocalQueue"):
            self._queue.add((lq["metadata"].get("namespace") or "default", lq["metadata"]["name"]))

    def _reconcile(self, key: Hashable) -> None:
        ns, name = cast(tuple[str, str], key)
        lq = self.store.get("LocalQueue", ns, name)
        if lq is None:
            return
        cq = (lq.get("spec") or {}).get("clusterQueue", "")
        reason = self.sched.inactive_reason(cq) if self.store.get("ClusterQueue", "", cq) is not None else None
        status, why, message = MISSING if reason is None else READY if reason == "" else INACTIVE
        new = {**condition("Active", status, why, message, self.now()),
               "observedGeneration": lq["metadata"].get("generation", 1)}
        conds, changed = set_condition(conditions_of(lq), new)
        if changed:
            self.store.update({**lq, "status": {**(lq.get("status") or {}), "conditions": conds}})

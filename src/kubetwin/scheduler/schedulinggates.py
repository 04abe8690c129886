"""Scheduling gates: the PodScheduled=False condition the API server gives a gated pod at create (the scheduler's
PreEnqueue SchedulingGates plugin keeps such a pod out of the queue: scheduler.py)."""

from __future__ import annotations

from kubetwin.k8s.conditions import find_condition
from kubetwin.store.store import Obj

GATED_REASON = "SchedulingGated"  # k8s.io/api/core/v1 PodReasonSchedulingGated
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def scheduling_gated_condition(pod: Obj) -> Obj:
    """The API server's pod strategy at create (pkg/registry/core/pod/strategy.go applySchedulingGatedCondition,
    after the mutating webhooks): a pod with schedulingGates and no PodScheduled condition gets PodScheduled=False,
    reason SchedulingGated. Idempotent, so a webhook that adds a gate may apply it again after itself."""
    spec = pod.get("spec")
    if not spec or not spec.get("schedulingGates"):
        return pod
    status = dict(pod.get("status") or {"phase": "Pending"})
    conds = status.get("conditions") or []
    if find_condition(conds, "PodScheduled") is not None:
        return pod
    status["conditions"] = [*conds, {"type": "PodScheduled", "status": "False", "reason": GATED_REASON,
                                     "message": GATED_MESSAGE}]
    return {**pod, "status": status}

"""What one Kueue scheduling cycle decided, per workload, in the shapes Kueue writes to the API.

``CycleResult`` lists admitted workloads (with the ``status.admission`` dict and conditions to write), workloads that
issued preemptions (with each victim's Evicted/Preempted condition), and pending workloads (the QuotaReserved=False
condition, ``status.resourceRequests``, and whether they sit in the heap or the inadmissible set).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubetwin.k8s import conditions
from kubetwin.kueue.api import format_time
from kubetwin.store.store import Obj

# QuotaReserved=False reasons (apis/kueue/v1beta2 WorkloadQuotaReservedReason*).
WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
MISCONFIGURED = "Misconfigured"
WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
PENDING = "Pending"
MANAGER = "kueue-manager"  # the event source of kueue-controller-manager's reconcilers


def condition(ctype: str, status: bool, reason: str, message: str, now: float) -> dict:
    return {"type": ctype, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": format_time(now)}


def reset_eviction(conditions: Iterable[dict], now: float) -> tuple[dict, ...]:
    """workload.SetQuotaReservation (pkg/workload/workload.go resetActiveCondition): a new reservation turns a True
    Evicted or Preempted condition False, reason QuotaReserved, "Previously: <message>"."""
    true = {c.get("type"): c for c in conditions if c.get("status") == "True"}
    return tuple(condition(ctype, False, "QuotaReserved", f"Previously: {true[ctype].get('message', '')}", now)
                 for ctype in ("Evicted", "Preempted") if ctype in true)


@dataclass(frozen=True)
class Admitted:
    """A workload that got quota in this cycle (QuotaReserved=True and, without admission checks, Admitted=True)."""

    key: str
    cluster_queue: str
    admission: dict  # status.admission exactly as Kueue writes it
    conditions: tuple[dict, ...]
    event_message: str  # the QuotaReserved event, with "Flavors considered" when any flavor was skipped
    borrowing: int = 0


@dataclass(frozen=True)
class Victim:
    """A workload to evict: set Evicted=True (reason Preempted) and Preempted=True (reason below), release quota."""

    key: str
    uid: str
    cluster_queue: str
    reason: str  # InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing, InCohortFairSharing
    message: str
    conditions: tuple[dict, ...]


@dataclass(frozen=True)
class Pending:
    """A head not admitted in this cycle; ``preempting`` lists the victims it waits for, if any."""

    key: str
    cluster_queue: str
    queue: str  # "active" (in the heap), "inadmissible", or "" when it is not queued (no such ClusterQueue)
    reason: str
    message: str
    condition: dict
    resource_requests: tuple[dict, ...] = ()
    preempting: tuple[Victim, ...] = ()


@dataclass
class CycleResult:
    now: float
    admitted: list[Admitted] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    # ClusterQueue -> preemptions skipped this cycle (overlapping targets, or no longer fitting); Kueue's
    # admission_cycle_preemption_skips metric
    skipped_preemptions: dict[str, int] = field(default_factory=dict)

    @property
    def preempting(self) -> list[Pending]:
        return [p for p in self.pending if p.preempting]

    @property
    def victims(self) -> list[Victim]:
        return [v for p in self.pending for v in p.preempting]

    @property
    def settled(self) -> bool:
        """Nothing admitted, preempted or set aside into an inadmissible set: every head went back to its heap, so
        another cycle at this instant would pop the same heads and decide the same. Kueue's scheduler keeps
        cycling while there are heads (scheduler.go Start: wait.UntilWithBackoff(schedule), SlowDown after a cycle
        that admits nothing); the twin runs the cycles of one instant until one is settled."""
        return not self.admitted and not self.victims and all(p.queue != "inadmissible" for p in self.pending)

    def get(self, key: str) -> Admitted | Pending | None:
        for o in list(self.admitted) + list(self.pending):
            if o.key == key:
                return o
        return None


# Reading and writing status.conditions: apimeta's helpers (api.conditions) over an object.
def find_condition(obj: Obj, ctype: str) -> dict | None:
    return conditions.find_condition(conditions.conditions_of(obj), ctype)


def is_true(obj: Obj, ctype: str) -> bool:
    return conditions.is_condition_true(conditions.conditions_of(obj), ctype)


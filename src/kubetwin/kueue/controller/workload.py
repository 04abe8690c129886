"""Writing a Workload's status, the one way every Kueue controller in the twin does it (kubernetes-sigs/kueue
pkg/workload: the status fields replaced, conditions merged by type with SetStatusCondition)."""

from __future__ import annotations

from kubetwin.k8s.conditions import set_conditions
from kubetwin.kueue.outcomes import condition
from kubetwin.store.store import Obj, Store


def update_status(store: Store, wl: Obj, conditions: list[dict] | tuple[dict, ...] = (), **fields: object) -> Obj:
    """Write ``fields`` into wl's status (None removes a field) and merge ``conditions``; returns the stored
    Workload."""
    status = dict(wl.get("status") or {})
    for k, v in fields.items():
        if v is None:
            status.pop(k, None)
        else:
            status[k] = v
    status["conditions"] = set_conditions(status.get("conditions") or [], conditions)
    return store.update({**wl, "status": status})


def get(store: Store, key: str) -> Obj | None:
    """The Workload of a "namespace/name" key (the scheduler's and queues' key), None when it is gone."""
    ns, name = key.split("/", 1)
    return store.get("Workload", ns, name)


def set_evicted(store: Store, wl: Obj, reason: str, message: str, now: float, *,
                requeue_state: dict | None = None, deactivate: bool = False) -> Obj:
    """workload.SetEvictedCondition, written with what goes with it: a deactivation sets spec.active false and
    drops requeueState; a requeue replaces requeueState. Returns the stored Workload."""
    status = dict(wl.get("status") or {})
    if deactivate:
        status.pop("requeueState", None)
    elif requeue_state is not None:
        status["requeueState"] = requeue_state
    status["conditions"] = set_conditions(status.get("conditions") or [],
                                          [condition("Evicted", True, reason, message, now)])
    spec = {**wl["spec"], "active": False} if deactivate else wl["spec"]
    return store.update({**wl, "spec": spec, "status": status})

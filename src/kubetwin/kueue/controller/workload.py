"""Writing a Workload's status, the one way every Kueue controller in the twin does it (kubernetes-sigs/kueue
pkg/workload: the status fields replaced, conditions merged by type with SetStatusCondition)."""

from __future__ import annotations

from kubetwin.api.conditions import set_conditions
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

"""PodDisruptionBudgets as the cluster autoscaler's drain reads them.

The disruptions each budget allows are the disruption controller's arithmetic (controllers/disruption.py, which
the eviction subresource spends too). The autoscaler's
drain (cluster-autoscaler simulator/drainability/rules/pdb) refuses to move a pod when a budget covering it has
no disruption left: "not enough pod disruption budget to move <ns>/<pod>". Spot preemption ignores budgets (node
shutdown is not an eviction, autoscaler/spot.py).
"""

from __future__ import annotations

from kubetwin.controllers.disruption import covers, disruptions_allowed
from kubetwin.store.store import Obj, Store


def blocked_by_budget(store: Store, pods: list[Obj]) -> str | None:
    """Why draining these pods together would break a budget, or None (each eviction uses one disruption)."""
    budgets = [[pdb, allowed] for pdb, allowed in disruptions_allowed(store)]
    if not budgets:
        return None
    for pod in pods:
        meta = pod["metadata"]
        for entry in budgets:
            if not covers(entry[0], pod):  # the one rule of which pods a budget selects (controllers.disruption)
                continue
            if entry[1] <= 0:
                return f"not enough pod disruption budget to move {meta.get('namespace')}/{meta['name']}"
            entry[1] -= 1
    return None

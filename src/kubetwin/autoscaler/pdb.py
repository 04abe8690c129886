"""PodDisruptionBudgets as the cluster autoscaler's drain reads them.

The disruption controller (kubernetes pkg/controller/disruption/disruption.go) keeps `status.disruptionsAllowed`
= max(0, currentHealthy - desiredHealthy): desiredHealthy is minAvailable (a count, or a percentage of the
expected pods rounded up) or expected - maxUnavailable (a percentage rounded up); expected is the number of pods
the selector matches (the twin counts them, as the controller does for minAvailable counts). The autoscaler's
drain (cluster-autoscaler simulator/drainability/rules/pdb) refuses to move a pod when a budget covering it has
no disruption left: "not enough pod disruption budget to move <ns>/<pod>". Spot preemption ignores budgets (node
shutdown is not an eviction, autoscaler/spot.py).
"""

from __future__ import annotations

import math

from kubetwin.k8s.labels import matches
from kubetwin.store.store import Obj, Store


def _scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with roundUp=true."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def disruptions_allowed(store: Store) -> list[tuple[Obj, int]]:
    """Every PodDisruptionBudget with the disruptions it allows now."""
    out = []
    for pdb in store.list("PodDisruptionBudget"):
        ns, spec = pdb["metadata"].get("namespace") or "default", pdb.get("spec") or {}
        selector = spec.get("selector")
        pods = [p for p in store.list("Pod", ns) if selector is not None and matches(selector,
                p["metadata"].get("labels")) and (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        expected = len(pods)
        healthy = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
        if "minAvailable" in spec:
            desired = _scaled(spec["minAvailable"], expected)
        else:
            desired = expected - _scaled(spec.get("maxUnavailable", 0), expected)
        out.append((pdb, max(0, healthy - desired)))
    return out


def blocked_by_budget(store: Store, pods: list[Obj]) -> str | None:
    """Why draining these pods together would break a budget, or None (each eviction uses one disruption)."""
    budgets = [[pdb, allowed] for pdb, allowed in disruptions_allowed(store)]
    if not budgets:
        return None
    for pod in pods:
        meta = pod["metadata"]
        for entry in budgets:
            pdb = entry[0]
            if (pdb["metadata"].get("namespace") or "default") != meta.get("namespace") or not matches(
                    (pdb.get("spec") or {}).get("selector") or {"matchLabels": {"": ""}}, meta.get("labels")):
                continue
            if entry[1] <= 0:
                return f"not enough pod disruption budget to move {meta.get('namespace')}/{meta['name']}"
            entry[1] -= 1
    return None

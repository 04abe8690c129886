"""PodDisruptionBudgets: the disruptions a budget allows, and the API server's eviction subresource that spends them.

The disruption controller (kubernetes pkg/controller/disruption/disruption.go) keeps `status.disruptionsAllowed`
= max(0, currentHealthy - desiredHealthy): desiredHealthy is minAvailable (a count, or a percentage of the
expected pods rounded up) or expected - maxUnavailable (a percentage rounded up); expected is the number of pods
the selector matches (the twin counts them, as the controller does for minAvailable counts). The twin computes it
when asked, as a controller that never lags would.

An eviction (POST pods/<name>/eviction; pkg/registry/core/pod/storage/eviction.go) of a pod that is Pending,
Succeeded or Failed, or already being deleted, ignores budgets (canIgnorePDB); otherwise the pod's budget must allow
a disruption: more than one budget is a 500 ("This pod has more than one PodDisruptionBudget, which the eviction
subresource does not support."), none left a 429 ("Cannot evict pod as it would violate the pod's disruption
budget."). An allowed eviction stamps the DisruptionTarget condition (reason EvictionByEvictionAPI), then deletes.
"""

from __future__ import annotations

import math

from kubetwin.k8s.conditions import replace_or_append_condition
from kubetwin.k8s.labels import matches
from kubetwin.store.store import Obj, Store

__all__ = ["EVICTION_API_CONDITION", "MULTIPLE_BUDGETS", "VIOLATES_BUDGET", "budgets_of", "covers",
           "disruptions_allowed", "evict"]

EVICTION_API_CONDITION = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                          "message": "Eviction API: evicting"}
VIOLATES_BUDGET = "Cannot evict pod as it would violate the pod's disruption budget."  # 429 TooManyRequests
MULTIPLE_BUDGETS = ("This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
                    "support.")  # 500


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


def covers(pdb: Obj, pod: Obj) -> bool:
    """Whether the budget's selector selects the pod (policy/v1: an empty selector selects every pod of its
    namespace, a missing one none)."""
    meta = pod["metadata"]
    selector = (pdb.get("spec") or {}).get("selector")
    return ((pdb["metadata"].get("namespace") or "default") == (meta.get("namespace") or "default")
            and selector is not None and matches(selector, meta.get("labels")))


def budgets_of(store: Store, pod: Obj) -> list[tuple[Obj, int]]:
    """The budgets that cover the pod, with the disruptions each allows."""
    return [(pdb, allowed) for pdb, allowed in disruptions_allowed(store) if covers(pdb, pod)]


def evict(store: Store, pod: Obj) -> str | None:
    """POST the pod's eviction: None when it was evicted (DisruptionTarget, then the delete), else the API
    server's refusal (VIOLATES_BUDGET: retry later; MULTIPLE_BUDGETS: an error)."""
    meta = pod["metadata"]
    ns, name = meta.get("namespace") or "default", meta["name"]
    cur = store.get("Pod", ns, name)
    if cur is None:
        return None  # gone already: kubectl counts it as evicted
    phase = (cur.get("status") or {}).get("phase")
    if phase not in ("Pending", "Succeeded", "Failed") and not cur["metadata"].get("deletionTimestamp"):
        budgets = budgets_of(store, cur)
        if len(budgets) > 1:
            return MULTIPLE_BUDGETS
        if budgets and budgets[0][1] <= 0:
            return VIOLATES_BUDGET
    store.patch("Pod", ns, name, lambda p: {**p, "status": {**(p.get("status") or {}), "conditions":
                replace_or_append_condition((p.get("status") or {}).get("conditions"), {
                    **EVICTION_API_CONDITION, "lastTransitionTime": store.timestamp(store.env.now)})}})
    store.delete("Pod", ns, name)
    return None

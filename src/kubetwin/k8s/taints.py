"""Taints and tolerations: the one copy of v1.Toleration.ToleratesTaint (k8s.io/api core/v1 toleration.go, and
component-helpers' TolerationsTolerateTaint) that the scheduler's TaintToleration, the taint-eviction controller,
the DRA allocator's device taints and Kueue's flavor assigner all use.

A toleration matches a taint when its effect is empty or equal, its key is empty or equal, and its operator is
Exists, or Equal (the default) with an equal value. The API server refuses an empty key with Equal, so such a
toleration is read as matching nothing; an unknown operator matches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """One toleration against one taint."""
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return op == "Equal" and bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether any of the tolerations tolerates the taint."""
    return any(toleration_tolerates(t, taint) for t in tolerations)

"""status.conditions, read and written the way apimachinery's meta helpers do, for the twin's immutable dicts.

Ported from k8s.io/apimachinery/pkg/api/meta/conditions.go (FindStatusCondition, IsStatusConditionTrue,
IsStatusConditionFalse, SetStatusCondition, RemoveStatusCondition):
https://github.com/kubernetes/apimachinery/blob/v0.34.0/pkg/api/meta/conditions.go
The Go helpers mutate the slice in place; these return new lists and never change a stored dict.
Conditions are matched by `type`; a missing list is an empty one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Condition = dict[str, Any]


def conditions_of(obj: dict[str, Any]) -> Sequence[Condition]:
    """obj.status.conditions, or () when the object has none."""
    return (obj.get("status") or {}).get("conditions") or ()


def find_condition(conditions: Sequence[Condition] | None, ctype: str) -> Condition | None:
    """FindStatusCondition: the condition of that type, or None."""
    for c in conditions or ():
        if c.get("type") == ctype:
            return c
    return None


def is_condition_true(conditions: Sequence[Condition] | None, ctype: str) -> bool:
    """IsStatusConditionTrue: present with status "True"."""
    c = find_condition(conditions, ctype)
    return c is not None and c.get("status") == "True"


def is_condition_false(conditions: Sequence[Condition] | None, ctype: str) -> bool:
    """IsStatusConditionFalse: present with status "False" (absent is neither true nor false)."""
    c = find_condition(conditions, ctype)
    return c is not None and c.get("status") == "False"


def set_condition(conditions: Sequence[Condition] | None, new: Condition) -> tuple[list[Condition], bool]:
    """SetStatusCondition: add `new`, or replace the condition of its type where it stands in the list.

    status, reason, message and observedGeneration become new's (a field new lacks is Go's zero value: absent);
    lastTransitionTime changes only when the status changes, else the old time is kept. Returns the new list and
    whether anything changed. `new` carries the lastTransitionTime to use on a change (the twin's clock, where
    Go takes time.Now() when it is unset).
    """
    out = list(conditions or ())
    for i, old in enumerate(out):
        if old.get("type") != new["type"]:
            continue
        merged = dict(new)
        if old.get("status") == new["status"] and "lastTransitionTime" in old:
            merged["lastTransitionTime"] = old["lastTransitionTime"]
        if merged == old:
            return out, False
        out[i] = merged
        return out, True
    out.append(dict(new))
    return out, True


def set_conditions(conditions: Sequence[Condition] | None, new: Sequence[Condition]) -> list[Condition]:
    """SetStatusCondition for each of `new`, in order."""
    out = list(conditions or ())
    for c in new:
        out, _ = set_condition(out, c)
    return out


def replace_or_append_condition(conditions: Sequence[Condition] | None, new: Condition) -> list[Condition]:
    """ReplaceOrAppendPodCondition (k8s.io/kubernetes pkg/util/pod/pod.go): `new` exactly as given, where the
    condition of its type stands or at the end; lastTransitionTime is new's (a server-side apply of one list-map
    item, keyed by type, has the same effect)."""
    out = list(conditions or ())
    for i, old in enumerate(out):
        if old.get("type") == new["type"]:
            out[i] = dict(new)
            return out
    out.append(dict(new))
    return out


def remove_condition(conditions: Sequence[Condition] | None, ctype: str) -> tuple[list[Condition], bool]:
    """RemoveStatusCondition: the list without the condition of that type, and whether one was removed."""
    out = [c for c in conditions or () if c.get("type") != ctype]
    return out, len(out) != len(conditions or ())

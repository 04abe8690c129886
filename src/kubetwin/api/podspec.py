"""Per-template memos over pod specs.

Pods made from one template (a Job's, a ReplicaSet's) share the template's containers list, so a value derived
from a pod's containers can be computed once per template and found again by the list's identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class TemplateMemo(Generic[T]):
    """fn(pod) cached by the identity of the pod's containers, initContainers, overhead and pod-level resources
    (bounded)."""

    def __init__(self, fn: Callable[[dict[str, Any]], T], limit: int = 1024) -> None:
        self.fn, self.limit = fn, limit
        self._seen: dict[int, tuple[object, object, object, object, T]] = {}

    def __call__(self, pod: dict[str, Any]) -> T:
        spec = pod["spec"]
        containers, init, overhead = spec.get("containers"), spec.get("initContainers"), spec.get("overhead")
        pod_level = spec.get("resources")
        seen = self._seen.get(id(containers))
        if (seen is not None and seen[0] is containers and seen[1] is init and seen[2] is overhead
                and seen[3] is pod_level):
            return seen[4]
        value = self.fn(pod)
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen[id(containers)] = (containers, init, overhead, pod_level, value)
        return value



class SameInputs(Generic[T]):
    """fn(*values) remembered by the identity of the values (held, so their ids are not reused; bounded). For
    values derived from lists or dicts the pods of one template share: an admission plugin's output then stays one
    object for them too (stored objects are never changed in place), so caches keyed by identity keep hitting
    downstream."""

    def __init__(self, fn: Callable[..., T], limit: int = 1024) -> None:
        self.fn, self.limit = fn, limit
        self._seen: dict[tuple[int, ...], tuple[tuple[object, ...], T]] = {}

    def __call__(self, *values: object) -> T:
        key = tuple(map(id, values))
        seen = self._seen.get(key)
        if seen is not None:  # the entry holds its values alive, so no other object has their ids: the same ones
            return seen[1]
        out = self.fn(*values)
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen[key] = (values, out)
        return out

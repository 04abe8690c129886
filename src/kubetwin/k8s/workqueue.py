"""A controller's work queue, as client-go's util/workqueue deduplicates a key until it is processed
(kubernetes/client-go util/workqueue/queue.go: a key added while dirty is not added twice), on the simulated clock."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol


class Clock(Protocol):
    """What the queue needs of the clock (kubetwin.sim.env.Environment): run a callback after a delay."""

    def after(self, delay: float, fn: Callable[[], None]) -> None: ...


class WorkQueue:
    """A controller's work queue: keys added during one instant are processed once each, in sorted order, right
    after the instant's other work (client-go's workqueue deduplicates a key until it is processed)."""

    def __init__(self, env: Clock, process: Callable[[Any], None]) -> None:
        self.env, self.process = env, process
        self._dirty: set[Hashable] = set()

    def add(self, key: Hashable) -> None:
        if not self._dirty:
            self.env.after(0, self._drain)
        self._dirty.add(key)

    def _drain(self) -> None:
        dirty, self._dirty = sorted(self._dirty), set()  # type: ignore[type-var]
        for key in dirty:
            self.process(key)

"""A tiny SimPy-like core: a clock and a heap of timed callbacks, nothing more."""

from __future__ import annotations

import heapq
from collections.abc import Callable


class Environment:
    """Simulated time in seconds. Callbacks at equal times run in the order they were scheduled."""

    def __init__(self) -> None:
        self.now: float = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, when: float, fn: Callable[[], None]) -> None:
        """Run fn at absolute time `when` (never in the past)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, fn))

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        self.at(self.now + delay, fn)

    def run(self, until: float, on_advance: Callable[[float], None] | None = None) -> None:
        """Process events up to and including `until`; on_advance(t) is told when the clock moves."""
        heap = self._heap
        while heap and heap[0][0] <= until:
            when, _, fn = heapq.heappop(heap)
            if when != self.now:
                if on_advance:
                    on_advance(when)
                self.now = when
            fn()
        self.now = until

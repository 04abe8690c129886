"""A tiny SimPy-like core: a clock and a heap of timed callbacks, nothing more."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable


class Environment:
    """Simulated time in seconds. Callbacks at equal times run in the order they were scheduled."""

    def __init__(self) -> None:
        self.now: float = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._until = -math.inf  # the horizon of the run() in progress
        self._on_advance: Callable[[float], None] | None = None

    def at(self, when: float, fn: Callable[[], None]) -> None:
        """Run fn at absolute time `when` (never in the past)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, fn))

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        self.at(self.now + delay, fn)

    def peek(self) -> float:
        """Time of the earliest queued callback (inf when none is queued)."""
        return self._heap[0][0] if self._heap else math.inf

    def claim(self, when: float) -> bool:
        """Move the clock to `when` for the running callback's own next step, skipping the heap round trip, when
        that step would run next anyway: `when` is not in the past, within the run's horizon, and strictly before
        every queued callback (on a tie the queued one was scheduled first and runs first, so the caller must
        schedule instead). True: the clock is at `when` (on_advance told) and the caller does the step now.
        A source of a million timed events (request arrivals) drains them this way between other events."""
        if when < self.now or when > self._until or (self._heap and self._heap[0][0] <= when):
            return False
        if when != self.now:
            if self._on_advance:
                self._on_advance(when)
            self.now = when
        return True

    def run(self, until: float, on_advance: Callable[[float], None] | None = None) -> None:
        """Process events up to and including `until`; on_advance(t) is told when the clock moves."""
        heap = self._heap
        self._until, self._on_advance = until, on_advance
        try:
            while heap and heap[0][0] <= until:
                when, _, fn = heapq.heappop(heap)
                if when != self.now:
                    if on_advance:
                        on_advance(when)
                    self.now = when
                fn()
        finally:
            self._until, self._on_advance = -math.inf, None
        self.now = until

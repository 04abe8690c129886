"""A long run's progress: a bar on a terminal, a line every few seconds otherwise (CI logs, pipes), both with an
ETA from the run's average pace so far, which does not swing with each burst of events."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text

from kubetwin.k8s.units import format_duration
from kubetwin.store.store import Store

LINE_EVERY_S = 5.0  # twin choice: a line every 5 s of wall time when stderr is not a terminal
BAR_EVERY_S = 0.1  # the bar is redrawn at most this often (rich redraws at 10 Hz anyway)
ETA_AFTER_S = 2.0  # no ETA before this much wall time: the first seconds (loading, wiring) say little


class Pace:
    """Wall time per simulated second, averaged over the whole run so far: the ETA it gives moves smoothly even
    when simulated time advances in bursts (an idle night passes in a step, a busy hour takes seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.start = clock()

    def eta(self, t: float, until: float) -> float | None:
        elapsed = self.clock() - self.start
        if t <= 0 or elapsed < ETA_AFTER_S:
            return None
        return elapsed * (until - t) / t


def _sim(seconds: float) -> str:
    return format_duration(seconds) if seconds >= 1 else "0s"


class ProgressLines:
    """`progress: simulated 3h of 24h (12%), 4,210 objects, 21,334 writes/s, 2,160x real time, ETA 1m5s` on
    `stream`, at most every `every` seconds, and once at the end."""

    def __init__(self, stream: TextIO, every: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.every, self.clock = stream, LINE_EVERY_S if every is None else every, clock
        self.pace = Pace(clock)
        self._next = self.pace.start + self.every
        self._t, self._until, self._store = 0.0, 0.0, None  # type: tuple[float, float, Store | None]

    def __call__(self, t: float, until: float, store: Store) -> None:
        self._t, self._until, self._store = t, until, store
        now = self.clock()
        if now >= self._next:
            self._next = now + self.every
            self.write()

    def write(self) -> None:
        t, until, store = self._t, self._until, self._store
        elapsed = max(self.clock() - self.pace.start, 1e-9)
        pct = 100 * t / until if until else 100.0
        parts = [f"simulated {_sim(t)} of {_sim(until)} ({pct:.0f}%)"]
        if store is not None:
            parts += [f"{store.count():,} objects", f"{store.rv / elapsed:,.0f} writes/s"]
        parts.append(f"{t / elapsed:,.0f}x real time")
        eta = self.pace.eta(t, until)
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        self.stream.write("progress: " + ", ".join(parts) + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """The last line, when the run took long enough to have printed any."""
        if self._store is not None and self.clock() - self.pace.start >= self.every:
            self._t = self._until
            self.write()


class _Eta(ProgressColumn):
    def __init__(self, pace: Pace) -> None:
        super().__init__()
        self.pace = pace

    def render(self, task: Task) -> Text:
        eta = self.pace.eta(task.completed, task.total or 0.0)
        return Text("ETA " + (format_duration(eta) if eta is not None else "-:--"), style="progress.remaining")


class ProgressBar:
    """The terminal's bar, redrawn at most every BAR_EVERY_S, with the same stable ETA."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.pace = Pace(clock)
        self.bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                            TextColumn("{task.fields[objects]}"), _Eta(self.pace), console=console, transient=True)
        self.task = self.bar.add_task("run", total=1.0, objects="")
        self._next = 0.0

    def __call__(self, t: float, until: float, store: Store) -> None:
        now = self.clock()
        if now >= self._next:
            self._next = now + BAR_EVERY_S
            self.bar.update(self.task, completed=t, total=until or 1.0, objects=f"{store.count():,} objects")

    def __enter__(self) -> ProgressBar:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

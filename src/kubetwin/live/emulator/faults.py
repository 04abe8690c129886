"""Failure injection for tests of what sits in front of a model server (the live gateway, the load generator): a
slow start, a process that dies mid-stream, a stream that stalls, requests answered 500, a /metrics endpoint that
fails or hangs. Decisions are seeded (`--seed`) so a test sees the same faults every run."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from kubetwin.live.emulator.config import EmulatorConfig


class EmulatedCrash(Exception):
    """Raised inside a response stream to cut its connection without the closing chunk, as a server process
    that dies mid-stream leaves its clients (uvicorn closes the transport when the app fails after the response
    started)."""


class Faults:
    def __init__(self, config: EmulatorConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.ready_at = clock() + config.startup_delay
        self.crash_after = config.crash_after_tokens
        self.hang_after = config.hang_after_tokens
        self.error_rate = config.error_rate
        self.metrics_fail = config.metrics_fail
        self._rng = random.Random(config.seed)

    def ready(self) -> bool:
        """False during --startup-delay (vLLM's /health answers only once the engine is up)."""
        return self.clock() >= self.ready_at

    def inject_error(self) -> bool:
        """Whether this request is answered 500 (--error-rate, drawn in arrival order from --seed)."""
        return self.error_rate > 0 and self._rng.random() < self.error_rate

    def limit(self) -> tuple[int | None, str]:
        """(tokens a stream may send, then what happens: "crash" or "hang"); (None, "") without such a fault.
        With both set, the earlier one wins."""
        options = [(n, kind) for n, kind in ((self.crash_after, "crash"), (self.hang_after, "hang")) if n is not None]
        if not options:
            return None, ""
        return min(options)

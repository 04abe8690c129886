"""The cyclic garbage collector paused around a piece of work that only makes acyclic data (issue 32).

A run's object versions and a `get --at`'s parsed history are JSON-shaped dicts and lists, freed by reference
counting; each collection would only rescan all of them (20-30 % of a large run's CPU, a third of `get events -A`
at a 1,000,000-pod day's end, measured). The collector is turned back on after, if it was on before.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic GC for the block; restore it as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()

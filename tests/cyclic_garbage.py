"""Counting the reference cycles a run leaves while the clock runs (kubetwin pauses the cyclic GC then:
runner.no_cyclic_gc). Used in-process by tests/test_run_gc.py and, compiled, by tests/test_native.py as a script:
`python tests/cyclic_garbage.py SCENARIO` prints the count of the second run."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


def cycles_left(monkeypatch: pytest.MonkeyPatch | None, once: Callable[[], None]) -> int:
    """Run `once` twice (libraries initialise lazily, and may leave cycles, on first use) with the run's GC pause
    replaced by one that counts what a collection finds unreachable when the clock stops; the second run's count."""
    import kubetwin.runner as run_module

    found: list[int] = []

    @contextlib.contextmanager
    def counting() -> Iterator[None]:
        gc.collect()
        gc.disable()
        try:
            yield
        finally:
            found.append(gc.collect())  # unreachable cycles made while the clock ran
            gc.enable()

    if monkeypatch is not None:
        monkeypatch.setattr(run_module, "no_cyclic_gc", counting)
    else:
        run_module.no_cyclic_gc = counting
    once()
    once()
    return found[-1]


if __name__ == "__main__":
    from kubetwin.runner import run

    print(cycles_left(None, lambda: run([sys.argv[1]])))

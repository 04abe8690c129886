"""The event loop the live tools run on: uvloop (libuv's loop for asyncio) when it is installed, else asyncio's own.

vLLM's OpenAI server runs on uvloop (vllm/entrypoints/openai/api_server.py: `uvloop.run(run_server(args))`), and so
does `kubetwin emulate vllm` (uvicorn's loop "auto" takes uvloop when it can import it); the gateway stands for
Envoy and a Go endpoint picker and the load generator for a client outside the servers, so the less of their own
time they add to each request the better. Measured on the Azure code slice (benchmarks/live_vs_twin.py, 2 cores):
live minus twin TTFT at the median of the requests within 15 ms of the twin's (where both made the same picks) fell
from 4.0-4.2 ms to 2.7-2.9 ms with every process on uvloop (two runs each; docs/live-gateway.md). The `live`
extra installs it; without it the results are the same, a little slower.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's new_event_loop when uvloop imports, else None (asyncio's default loop)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main) on uvloop when it is installed."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)

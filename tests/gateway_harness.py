"""A standalone gateway on its own event loop thread, for the live gateway tests and the benchmark."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from kubetwin.live.gateway.config import GatewayConfig
from kubetwin.live.gateway.standalone import StandaloneGateway


class GatewayThread:
    def __init__(self, cfg: GatewayConfig) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.gw = StandaloneGateway(cfg)
        self.call(self.gw.start())

    def call(self, coro: Any, timeout: float = 15.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn: Any, *args: Any) -> Any:
        async def _f() -> Any:
            return fn(*args)
        return self.call(_f())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gw.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.gw.admin_port}"

    def close(self, drain: float = 2.0) -> None:
        if not self.gw.draining:
            try:
                self.call(self.gw.drain(drain), timeout=drain + 10)
            except Exception:  # noqa: BLE001 - teardown
                pass
        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(5)
        except Exception:  # noqa: BLE001 - teardown
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

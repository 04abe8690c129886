"""A standalone gateway on its own event loop thread, for the live gateway tests and the benchmark."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
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
    def picker(self) -> Any:
        return self.gw.picker

    def until_picker(self, pred: Any, timeout: float = 10.0) -> Any:
        """Wait until the picker's own endpoint snapshot satisfies pred (tests sequence by what the gateway has
        scraped, never by sleeps); the snapshot."""
        deadline = time.monotonic() + timeout
        while True:
            snap = self.run(self.picker.current)
            if pred(snap):
                return snap
            assert time.monotonic() < deadline, f"the picker's endpoints never got there: {snap}"
            time.sleep(0.01)

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
        self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class EnvoyThread(GatewayThread):
    """Envoy (a child process) + the ext_proc server on a loop thread; start_extproc=False leaves the picker down."""

    def __init__(self, cfg: GatewayConfig, start_extproc: bool = True) -> None:
        from kubetwin.live.gateway.envoy import EnvoyGateway

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.eg = EnvoyGateway(cfg, start_extproc=start_extproc)
        try:
            self.call(self.eg.start(), timeout=40)
        except BaseException:
            self.close()
            raise

    @property
    def picker(self) -> Any:
        return self.eg.picker

    @property
    def url(self) -> str:
        return f"http://{self.eg.listen_address}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.eg.admin_address}"

    def close(self, drain: float = 2.0) -> None:
        try:
            self.call(self.eg.stop(), timeout=30)
        except Exception:  # noqa: BLE001 - teardown
            pass
        self._stop_loop()


def envoy_log(path: Path, n: int, timeout: float = 5.0) -> list[dict]:
    """Envoy's JSON access log once it has n lines (Envoy flushes it on its own timer, 0.2 s here)."""
    deadline = time.monotonic() + timeout
    rows: list[dict] = []
    while time.monotonic() < deadline:
        rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        if len(rows) >= n:
            break
        time.sleep(0.05)
    return rows

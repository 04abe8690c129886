"""The live tools' event loop: uvloop when installed (vLLM's API server runs on it), asyncio's own otherwise."""

from __future__ import annotations

import asyncio
import sys

import pytest

from kubetwin.live import eventloop


async def _loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")
    assert eventloop.run(_loop_type()).startswith("uvloop")


def test_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert eventloop.loop_factory() is None
    assert eventloop.run(_loop_type()).startswith("asyncio")


"""The emulator's HTTP/1.1 protocol: uvicorn's h11 protocol (what `vllm serve` runs: uvicorn, with httptools absent
h11) bounded against slow and hostile clients (issue 34):

- the request head must be in within `header_timeout` seconds of the connection opening or of the previous response
  ending (uvicorn has no such timer: a client that connects and sends nothing, or half a head, held its connection
  for ever); a partial head gets 408, an empty connection is closed;
- a head over h11's max_incomplete_event_size (vLLM's --h11-max-incomplete-event-size, default 4 MB,
  vllm/entrypoints/constants.py H11_MAX_INCOMPLETE_EVENT_SIZE_DEFAULT) gets 431, the status h11 itself hints
  (RemoteProtocolError error_status_hint=431) where uvicorn sends 400;
- after such an error reply the connection is half-closed and what the client still sends is read and dropped for
  LINGER_S before the close (nginx's lingering close), so the reply is not lost to a TCP reset.
The connection cap is uvicorn's own limit_concurrency (503 "Service Unavailable" once that many connections are
open)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from kubetwin.live.requestbody import error_json

DEFAULT_HEADER_TIMEOUT = 10.0
H11_DEFAULT_MAX_INCOMPLETE_EVENT_SIZE = 16 * 1024  # h11's own default (uvicorn's when none is given)
LINGER_S = 2.0
REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large"}


class BoundedH11Protocol(H11Protocol):
    """H11Protocol with the head timer, 431 and the lingering close (module docstring)."""

    header_timeout = DEFAULT_HEADER_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        size = self.config.h11_max_incomplete_event_size
        self.max_head = size if size is not None else H11_DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_cycle: object | None = None
        self._head_bytes = False
        self._discard = False

    def _arm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_cycle = self.cycle
        self._head_bytes = False
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_expired)

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._discard:
            return
        cycle = self.cycle
        if cycle is not self._head_cycle or (cycle is not None and not cycle.response_complete):
            return  # a request came in (and may still be running)
        if self._head_bytes:
            self.reply_and_close(408, "Request timeout: the request head did not arrive in time.")
        else:
            self.transport.close()

    def reply_and_close(self, status: int, message: str) -> None:
        """A JSON error (vLLM's ErrorResponse shape) with connection: close, then the lingering close."""
        body = json.dumps(error_json(status, message, "BadRequestError"), separators=(",", ":")).encode()
        self.transport.write(f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\ncontent-type: application/json"
                             f"\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        self._discard = True
        if self._head_timer is not None:
            self._head_timer.cancel()
        try:
            self.transport.write_eof()
        except (OSError, RuntimeError, NotImplementedError):
            self.transport.close()
            return
        self.transport.resume_reading()
        self.loop.call_later(LINGER_S, self.transport.close)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._discard:
            return
        if data:
            self._head_bytes = True
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        if len(self.conn.trailing_data[0]) > self.max_head:  # h11's "Receive buffer too long" (hint 431)
            self.reply_and_close(431, "Request header fields too large.")
            return
        super().send_400_response(msg)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self._discard:
            self._arm()


def protocol_class(header_timeout: float) -> type[BoundedH11Protocol]:
    """BoundedH11Protocol with this head timeout (uvicorn builds protocols from a class)."""
    return type("BoundedH11Protocol", (BoundedH11Protocol,), {"header_timeout": header_timeout})

"""X-Request-Start: when the front proxy received a request, stamped by the proxy for the servers behind it.

The convention of nginx (`proxy_set_header X-Request-Start "t=${msec}"`), Heroku's router and Envoy configs
(`t=%START_TIME(%s.%6f)%`), read by APM agents (New Relic, Datadog, Scout) as the request's queueing time before the
application: `t=` and the Unix time in seconds, milliseconds or microseconds (told apart by magnitude, as those
agents do). The first proxy stamps it; a proxy behind another keeps the value it got.

The live gateways stamp it (Envoy by its bootstrap's request_headers_to_add, the value above); the emulator starts
a request's API-server share there (live.emulator.realtime): in the twin a request reaches the engine the moment it
reaches the gateway, and the share it adds afterwards stands for the whole way from the client to the engine and
back, so the way from the gateway to the emulator's engine is counted in it, not on top of it.
"""

from __future__ import annotations

import math
import time

REQUEST_START_HEADER = "x-request-start"
# The other header every hop passes on: the request's id as the client gave it. vLLM takes X-Request-Id as its
# request id (serving_engine.py _base_request_id: "cmpl-<id>"), Envoy logs it as %REQ(X-REQUEST-ID)%; `kubetwin
# loadgen` sends the trace's request id, the gateways' access logs carry it as request_id.
REQUEST_ID_HEADER = "x-request-id"


def stamp(now: float | None = None) -> str:
    """The header's value for a request received at Unix time `now` (default: now), in seconds to the µs."""
    return f"t={time.time() if now is None else now:.6f}"


def parse(value: str | None) -> float | None:
    """The Unix time in seconds a header value says, or None when it says none (absent, malformed, not positive)."""
    if not value:
        return None
    v = value.strip()
    if v.startswith("t="):
        v = v[2:]
    try:
        t = float(v)
    except ValueError:
        return None
    if not (math.isfinite(t) and t > 0):
        return None
    if t > 1e14:  # microseconds
        return t / 1e6
    if t > 1e11:  # milliseconds
        return t / 1e3
    return t

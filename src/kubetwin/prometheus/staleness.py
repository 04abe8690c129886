"""Prometheus' staleness marker (model/value.StaleNaN): the sample a scrape writes for a series that has gone (its
target, or the series from its target), so queries stop seeing it at once rather than for the 5-minute lookback.
Instant selectors treat a series whose newest sample is a marker as absent; range selectors skip markers. Shared by
the twin's Prometheus (promsource, which writes them) and its readers (promql, the HPA's custom metrics)."""

from __future__ import annotations

import struct

LOOKBACK = 300.0  # Prometheus --query.lookback-delta default 5m (cmd/prometheus/main.go)
_STALE_BITS = 0x7FF0000000000002  # a NaN with this payload, told apart from a real NaN by its bits
STALE_NAN: float = struct.unpack("<d", struct.pack("<Q", _STALE_BITS))[0]


def is_stale(v: float) -> bool:
    """Whether a sample is the staleness marker (value.IsStaleNaN)."""
    return v != v and struct.unpack("<Q", struct.pack("<d", v))[0] == _STALE_BITS


def newest(samples: list[tuple[float, float]], t: float) -> float | None:
    """An instant selector's value at t: the newest sample in (t - LOOKBACK, t], None when there is none or it is
    a staleness marker (the series went away)."""
    inside = [v for ts, v in samples if t - LOOKBACK < ts <= t]
    return inside[-1] if inside and not is_stale(inside[-1]) else None

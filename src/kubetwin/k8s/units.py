"""Kubernetes quantities, times and kubetwin durations, parsed once into integers/floats."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation

# Suffixes as in k8s.io/apimachinery/pkg/api/resource/quantity.go.
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


# RFC 3339 as Go's time.RFC3339 reads it (metav1.Time, OpenAPI format date-time): seconds and an offset required
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time (RFC3339 above) as an aware datetime; None for anything else (a date alone, no offset)."""
    if not isinstance(value, str) or not RFC3339.match(value):
        return None
    try:
        return datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:  # well-formed but impossible: month 13, hour 25
        return None


class UnitError(ValueError):
    """A quantity or duration that does not parse; the message says what is accepted."""


def parse_quantity(value: object) -> Decimal:
    """Parse a resource.Quantity ("500m", "256Gi", 4) into a Decimal of base units."""
    if isinstance(value, bool):
        raise UnitError(f"quantities must match the regular expression "
                        f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m:
        raise UnitError(f"quantities must match the regular expression "
                        f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {text!r}")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation as exc:  # pragma: no cover - regex already guards
        raise UnitError(f"invalid quantity {text!r}") from exc
    suffix = m.group(2) or ""
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def format_bytes(n: int) -> str:
    """A byte count as Kubernetes writes a binary-SI quantity (resource.Quantity's canonical form, apimachinery
    pkg/api/resource/quantity.go CanonicalizeBytes): the largest of Ki..Ei that divides it exactly, else plain."""
    for suffix, size in reversed(_BINARY.items()):
        if n and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


# A run parses the same few quantity strings ("4", "16Gi", "500m") tens of thousands of times (every node's
# allocatable, every pod's requests): their integers, memoized by the string (bounded; errors are not cached).
_MEMO_LIMIT = 4096
_milli_of: dict[str, int] = {}
_int_of: dict[str, int] = {}


def _memo(cache: dict[str, int], text: str, value: int) -> int:
    if len(cache) >= _MEMO_LIMIT:
        cache.clear()
    cache[text] = value
    return value


def to_milli(value: object) -> int:
    """CPU-like quantity in milli-units, rounded up as the API server does."""
    if type(value) is str:
        got = _milli_of.get(value)
        if got is not None:
            return got
    q = parse_quantity(value) * 1000
    out = int(q.to_integral_value(rounding="ROUND_CEILING"))
    return _memo(_milli_of, value, out) if type(value) is str else out


def to_int(value: object) -> int:
    """Integer quantity (memory bytes, GPUs), rounded up."""
    if type(value) is str:
        got = _int_of.get(value)
        if got is not None:
            return got
    out = int(parse_quantity(value).to_integral_value(rounding="ROUND_CEILING"))
    return _memo(_int_of, value, out) if type(value) is str else out


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


# Go's time.Duration is int64 nanoseconds: time.ParseDuration refuses anything longer ("time: invalid duration").
MAX_DURATION_S = (2**63 - 1) / 1e9


def parse_duration(value: object) -> float:
    """Parse "90s", "10m", "2h", "7d", "1h30m" or a number of seconds into seconds (at most Go's time.Duration,
    about 292 years)."""
    seconds = _parse_duration(value)
    if not seconds <= MAX_DURATION_S:  # also NaN
        raise UnitError(f"invalid duration {str(value)[:80]!r}: longer than a Go time.Duration (about 292 years)")
    return seconds


def parse_positive_duration(value: object) -> float:
    """parse_duration for periods that must pass (a sampling interval, a checkpoint interval): more than 0 s."""
    seconds = parse_duration(value)
    if seconds <= 0:
        raise UnitError(f"must be greater than 0, got {value!r}")
    return seconds


def _parse_duration(value: object) -> float:
    if isinstance(value, bool):
        raise UnitError(f"invalid duration {value!r}: use a number of seconds or forms like 90s, 10m, 2h, 7d")
    if isinstance(value, (int, float)):
        if not value >= 0:
            raise UnitError(f"invalid duration {value!r}: must not be negative")
        return float(value)
    text = str(value).strip()
    if len(text) > 64:
        raise UnitError(f"invalid duration {text[:64]!r}...: use a number of seconds or forms like 90s, 10m, 2h, 7d")
    m = _DURATION.match(text)
    if m:
        return float(m.group(1)) * _SECONDS[m.group(2) or "s"]
    parts = _DURATION_PART.findall(text)
    if parts and "".join(n + u for n, u in parts) == text.replace(" ", ""):
        return sum(float(n) * _SECONDS[u] for n, u in parts)
    raise UnitError(f"invalid duration {text!r}: use a number of seconds or forms like 90s, 10m, 2h, 7d, 1h30m")


def format_duration(seconds: float) -> str:
    """kubectl-style short age: 45s, 12m, 3h5m, 2d4h."""
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 3 * 3600:
        return f"{s // 60}m"
    if s < 8 * 3600:
        h, m = divmod(s // 60, 60)
        return f"{h}h{m}m" if m else f"{h}h"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d{h}h" if h and d < 8 else f"{d}d"


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration.String prints it (1m2.5s, 1h0m0s, 850ms): kubelet events, kubectl."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    m, sec = divmod(seconds, 60)
    h, m = divmod(int(m), 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if h or m else "")
    return out + f"{sec:.3f}".rstrip("0").rstrip(".") + "s"


def short_duration(seconds: float) -> str:
    """A duration as kubetwin writes it everywhere a person reads one (the console, report.html's headline, hover,
    difference column and time notes, the sweep report's values and ticks): Go's time.Duration form
    (go_duration) without its zero trailing units, the way a duration is written in a manifest. Hours do not roll
    into days, as in Go (a day is 24h, parse_duration reads it back). From a minute up, whole seconds (2h30m, 6h,
    2h0m1s, 1m30s); under a minute three significant digits (12.3s, 1.5s); under a second, milliseconds (350ms);
    a negative duration (a difference) with its sign (-1h30m)."""
    if seconds < 0:
        return "-" + short_duration(-seconds)
    if seconds == 0:
        return "0s"
    if seconds < 1 and round(seconds * 1000, 12) < 999.5:
        return f"{seconds * 1000:.3g}ms"
    if seconds < 59.95:
        return f"{seconds:.3g}s"
    whole = round(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    parts = [(h, "h"), (m, "m"), (s, "s")]
    while parts[0][0] == 0:
        parts.pop(0)
    while parts[-1][0] == 0:
        parts.pop()
    return "".join(f"{n}{unit}" for n, unit in parts)

"""k8s.units.parse_time: RFC 3339 as Go's time.RFC3339 reads it (metav1.Time; a CRD's format: date-time), the one
reader for GKE's node.gke.io/machine-termination-datetime and the CRD schema check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from kubetwin.k8s.units import RFC3339, parse_time


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-01-08T12:00:00Z", datetime(2026, 1, 8, 12, tzinfo=UTC)),
    ("2026-01-08t12:00:00z", datetime(2026, 1, 8, 12, tzinfo=UTC)),
    ("2026-01-08T12:00:00.250Z", datetime(2026, 1, 8, 12, 0, 0, 250000, tzinfo=UTC)),
    ("2026-01-08T17:30:00+05:30", datetime(2026, 1, 8, 17, 30, tzinfo=timezone(timedelta(hours=5, minutes=30)))),
    ("2026-01-08 12:00:00-08:00", datetime(2026, 1, 8, 12, tzinfo=timezone(timedelta(hours=-8)))),
])
def test_rfc3339_times_parse_aware(text: str, expected: datetime) -> None:
    t = parse_time(text)
    assert t == expected and t is not None and t.tzinfo is not None


@pytest.mark.parametrize("text", ["2026-01-08", "2026-01-08T12:00:00", "2026-01-08T12:00Z", "2026-13-08T12:00:00Z",
                                  "2026-01-08T25:00:00Z", "soon", "", None, 1767873600])
def test_anything_else_is_none(text: object) -> None:
    assert parse_time(text) is None
    if isinstance(text, str) and text[:4].isdigit() and "-13-" not in text and "T25" not in text:
        assert not RFC3339.match(text)  # the format itself refuses these, as the CRD check does

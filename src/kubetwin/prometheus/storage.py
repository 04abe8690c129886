"""The read side of the twin's in-memory series stores: Prometheus' storage.Querier.Select over one metric name
(prometheus/prometheus storage/interface.go), the samples of [start, end] that a MetricsProvider returns. One copy
for every store kept as {metric name: {series key: (labels, time-ordered samples)}}: serving's simulated Prometheus
(serving.observe.promsource) and the live supervisor's scrapes (live.supervisor)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def select(store: Mapping[str, Mapping[Any, tuple[Mapping[str, str], Iterable[tuple[float, float]]]]], name: str,
           start: float, end: float) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """Every series of `name` with its samples in [start, end], staleness markers included (promql drops them),
    in the store's order; a series with no sample in the range is left out."""
    out = []
    for labels, samples in store.get(name, {}).values():
        pts = [(t, v) for t, v in samples if start <= t <= end]
        if pts:
            out.append((dict(labels), pts))
    return out

"""The EPP's filter plugins: the legacy (v0.3 / v0.5) ones, GIE@v0.5.1 pkg/epp/scheduling/framework/plugins/filter
(least-queue, least-kv-cache, low-queue, lora-affinity) with thresholds from GIE@v0.3.0 pkg/epp/scheduling/
scheduler.go, and `FILTERS`, the plugin-type registry config loading resolves (which also holds the utilization
detector used as a filter). A filter narrows the candidate indices: filter(req, snap, idx, state, rng) -> idx."""

from __future__ import annotations

import numpy as np

from kubetwin.serving.router.saturation import UtilizationDetector
from kubetwin.serving.types import EndpointSnapshot, Request

# GIE@v0.3.0 scheduler.go: QUEUING_THRESHOLD_LORA / LORA_AFFINITY_THRESHOLD defaults
QUEUEING_THRESHOLD_LORA = 128
LORA_AFFINITY_THRESHOLD = 0.999


class LeastQueueFilter:
    """Keep endpoints with waiting in [min, min + (max-min)//N] (Go integer division)."""

    type = "least-queue"

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        q = snap.waiting[idx].astype(np.int64)
        lo, hi = int(q.min()), int(q.max())
        return idx[(q >= lo) & (q <= lo + (hi - lo) // len(idx))]


class LeastKVCacheFilter:
    """Keep endpoints with kv in [min, min + (max-min)/N]."""

    type = "least-kv-cache"

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        kv = snap.kv_usage[idx]
        lo, hi = float(kv.min()), float(kv.max())
        return idx[(kv >= lo) & (kv <= lo + (hi - lo) / len(idx))]


class LowQueueFilter:
    """Keep endpoints with waiting < 128 (QUEUING_THRESHOLD_LORA); an empty result is a failure."""

    type = "low-queue"

    def __init__(self, threshold: int = QUEUEING_THRESHOLD_LORA, name: str | None = None) -> None:
        self.threshold = threshold
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        return idx[snap.waiting[idx] < self.threshold]


def _lora_sets(req: Request, snap: EndpointSnapshot, idx: np.ndarray) -> tuple[list[int], list[int]]:
    """(affinity, available): endpoints running the adapter; endpoints with a free adapter slot."""
    target = req.lora or req.model
    affinity: list[int] = []
    available: list[int] = []
    for i in idx.tolist():
        active = snap.active_loras[i] if snap.active_loras else frozenset()
        if target in active:
            affinity.append(i)
        elif snap.max_loras is not None and len(active) < int(snap.max_loras[i]):
            available.append(i)
    return affinity, available


class LoraAffinityFilter:
    """loRASoftAffinity: with probability 0.999 the endpoints running the adapter, else those with a free slot;
    whichever group is non-empty otherwise (empty = failure)."""

    type = "lora-affinity"

    def __init__(self, threshold: float = LORA_AFFINITY_THRESHOLD, name: str | None = None) -> None:
        self.threshold = threshold
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        affinity, available = _lora_sets(req, snap, idx)
        if affinity and available:
            return np.asarray(affinity if rng.random() < self.threshold else available, dtype=np.intp)
        return np.asarray(affinity or available, dtype=np.intp)


FILTERS: dict[str, type] = {
    c.type: c for c in (UtilizationDetector, LeastQueueFilter, LeastKVCacheFilter, LowQueueFilter, LoraAffinityFilter)
}

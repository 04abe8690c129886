"""The EPP's saturation detector, `utilization-detector` (GIE pkg/epp/framework/plugins/flowcontrol/
saturationdetector/utilization/{config.go,detector.go}): the saturation number admission sheds sheddable requests on
(GIE requestcontrol/admission.go, applied in `EppRouter.pick`), and the same thresholds as a scheduling filter. Apart
from the scheduling plugins because admission uses it before any profile runs."""

from __future__ import annotations

import numpy as np

from kubetwin.serving.router.cycle import CycleState, take_rows
from kubetwin.serving.types import EndpointSnapshot, Request

# GIE utilization/config.go defaults
QUEUE_DEPTH_THRESHOLD = 5
KV_CACHE_UTIL_THRESHOLD = 0.8


class UtilizationDetector:
    """`utilization-detector`: saturation = mean over candidates of max(waiting/5, kv/0.8), a stale endpoint counts
    1.0, no candidates 1.0. As a filter it keeps fresh endpoints under both thresholds, failing open."""

    type = "utilization-detector"

    def __init__(
        self,
        queue_depth_threshold: float = QUEUE_DEPTH_THRESHOLD,
        kv_cache_util_threshold: float = KV_CACHE_UTIL_THRESHOLD,
        headroom: float = 0.0,
        name: str | None = None,
    ) -> None:
        self.q = float(queue_depth_threshold)
        self.kv = float(kv_cache_util_threshold)
        self.headroom = float(headroom)
        self.name = name or self.type

    def saturation(self, snap: EndpointSnapshot, idx: np.ndarray | None = None) -> float:
        n = len(snap) if idx is None else len(idx)
        if n == 0:
            return 1.0
        s = np.maximum(take_rows(snap.waiting, idx) / self.q, take_rows(snap.kv_usage, idx) / self.kv)
        s = np.where(take_rows(snap.fresh, idx), s, 1.0)
        return float(s.mean())

    def filter(self, req: Request, snap: EndpointSnapshot, idx: np.ndarray, state: CycleState, rng) -> np.ndarray:
        f = 1.0 + self.headroom
        ok = snap.fresh[idx] & (snap.waiting[idx] < self.q * f) & (snap.kv_usage[idx] < self.kv * f)
        kept = idx[ok]
        return kept if len(kept) else idx  # fail open

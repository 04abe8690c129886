"""Partial admission: the largest uniform reduction of podSet counts (down to minCount) that can be admitted.

Ported from kubernetes-sigs/kueue pkg/scheduler/flavorassigner/podset_reducer.go. With delta_k = count_k - minCount_k
and totalDelta = sum(delta_k), step i gives count_k = count_k - floor(delta_k * i / totalDelta) (integer math); a
binary search (Go's sort.Search over [0, totalDelta]) finds the smallest step that ``fits``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from kubetwin.kueue.api import PodSet

R = TypeVar("R")


class PodSetReducer(Generic[R]):
    """Searches reduced counts; ``fits(counts)`` returns (result, ok) for a candidate list of counts."""

    def __init__(self, pod_sets: tuple[PodSet, ...] | list[PodSet], fits: Callable[[list[int]], tuple[R | None, bool]]
                 ) -> None:
        self.full_counts = [ps.count for ps in pod_sets]
        self.deltas = [ps.count - (ps.count if ps.min_count is None else ps.min_count) for ps in pod_sets]
        self.total_delta = sum(self.deltas)
        self.fits = fits

    def counts_for(self, step: int) -> list[int]:
        return [full - (d * step) // self.total_delta for full, d in zip(self.full_counts, self.deltas, strict=True)]

    def search(self) -> tuple[R | None, bool]:
        """The result for the smallest fitting step, as sort.Search finds it (assumes fitting is monotonic)."""
        if self.total_delta <= 0:
            return None, False
        lo, hi = 0, self.total_delta + 1
        last: R | None = None
        found = False
        while lo < hi:
            mid = (lo + hi) // 2
            result, ok = self.fits(self.counts_for(mid))
            if ok:
                hi = mid
                last, found = result, True
            else:
                lo = mid + 1
        return (last, True) if found and lo <= self.total_delta else (None, False)

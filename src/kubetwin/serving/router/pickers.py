"""The EPP's picker plugins: pick(scores, rng) -> position among the candidates, and `PICKERS`, the plugin-type
registry. Sources: GIE picker/{max_score,random,weighted_random}; LLMD@5155e4cb picker/common.go (the rotate
tie-break). Apart from the scorers because a profile has exactly one picker and the tie-break is its own question."""

from __future__ import annotations

from typing import Any

import numpy as np


def max_num_of_endpoints(picker_type: str, params: dict[str, Any]) -> int | None:
    """GIE's picker parameter maxNumOfEndpoints (picker.PickerParameters): how many endpoints a pick names, best
    first; None when not set. The twin's data plane sends a request to the first (it has no retries); the live
    gateway hands the rest to Envoy as fallbacks."""
    n = params.get("maxNumOfEndpoints")
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{picker_type} maxNumOfEndpoints must be an integer >= 1, not {n!r}")
    return n


class MaxScorePicker:
    """max-score-picker: GIE shuffles then stable-sorts by score and takes the first, i.e. a uniformly random one of
    the top-scored (tie_break "random"); newer llm-d-router rotates through the tied tier instead ("rotate")."""

    type = "max-score-picker"

    def __init__(self, name: str | None = None, tie_break: str = "random", **params: Any) -> None:
        self.max_num_of_endpoints = max_num_of_endpoints(self.type, params)
        if tie_break not in ("random", "rotate"):
            raise ValueError(f"max-score-picker tie_break must be 'random' or 'rotate', not {tie_break!r}")
        self.name = name or self.type
        self.rotate = tie_break == "rotate"
        self.counter = 0

    def pick(self, scores: np.ndarray, rng: np.random.Generator) -> int:
        best = scores.argmax()
        ties = (scores == scores[best]).nonzero()[0]
        n = len(ties)
        if n == 1:
            return int(best)
        if self.rotate:  # LLMD picker/common.go RotateScoredEndpoints
            r = self.counter % n
            self.counter += 1
            if self.counter >= n:
                self.counter = 0
            return int(ties[r])
        return int(ties[rng.integers(n)])


class RandomPicker:
    """random-picker: uniform over the candidates."""

    type = "random-picker"

    def __init__(self, name: str | None = None, **params: Any) -> None:
        self.name = name or self.type
        self.max_num_of_endpoints = max_num_of_endpoints(self.type, params)

    def pick(self, scores, rng):
        return int(rng.integers(len(scores)))


class WeightedRandomPicker:
    """weighted-random-picker (A-Res): key = U^(1/score), score <= 0 gets key 0, top key wins; all-zero scores fall
    back to uniform."""

    type = "weighted-random-picker"

    def __init__(self, name: str | None = None, **params: Any) -> None:
        self.name = name or self.type
        self.max_num_of_endpoints = max_num_of_endpoints(self.type, params)

    def pick(self, scores, rng):
        pos = scores > 0
        if not pos.any():
            return int(rng.integers(len(scores)))
        u = rng.random(len(scores))
        u[u == 0] = 1e-10
        keys = np.zeros(len(scores))
        keys[pos] = u[pos] ** (1.0 / scores[pos])
        return int(np.argmax(keys))


PICKERS: dict[str, type] = {c.type: c for c in (MaxScorePicker, RandomPicker, WeightedRandomPicker)}

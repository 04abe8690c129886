"""What one EPP scheduling cycle carries between its plugins: `CycleState` (the prefix match PrepareData computes,
which the prefix scorers read and PreRequest writes back) and `take_rows`, the candidate-subset helper every filter and
scorer uses. Its own module so the detector, filters, scorers and the router can all import it without importing each
other (GIE's CycleState / PluginState in pkg/epp/scheduling/types)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class CycleState:
    """What one scheduling cycle computes and PreRequest reads back (GIE's CycleState / PluginState)."""

    keys: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    total: int = 0
    counts: np.ndarray | None = None  # matched blocks per candidate (snapshot order), None if no match
    cold: bool = True


def take_rows(a: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    return a if idx is None else a[idx]

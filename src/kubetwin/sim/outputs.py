"""What a subsystem adds to a run's outputs once the clock stops: the one contract between the subsystems (Kueue,
serving, training, the cluster autoscaler) and the runner that writes the run folder.

Each subsystem reads the store and its own state and answers `contribute(until)`; the runner merges the
contributions in a fixed order (scheduler, node pools, kubelet, Spot, Kueue, cluster autoscaler, serving,
training) and writes them. Subsystems never
write run-folder files themselves, and the runner never reaches into a subsystem's internals.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Contribution:
    summary: dict[str, Any] = field(default_factory=dict)  # summary.json sections, by key
    timeseries: dict[str, Any] = field(default_factory=dict)  # timeseries.json sections, by key
    prometheus: str | None = None  # metrics.prom exposition lines; None: the subsystem exports no series
    # requests.csv (serving), a chunk of rows at a time: the runner streams it into the run folder (a fleet's is GBs
    # as one string) and joins it only for a run without a folder
    requests_csv_chunks: Iterator[str] | None = None
    training: dict[str, Any] | None = None  # training.json (training)


class Subsystem(Protocol):
    def contribute(self, until: float) -> Contribution: ...


class Sampler(Protocol):
    """A subsystem whose gauges are sampled on the run's sampling clock (Scenario.spec.sampleInterval), in the
    same instant as the run's own series: `sample()` returns one value per series name."""

    def sample(self) -> dict[str, float | None]: ...

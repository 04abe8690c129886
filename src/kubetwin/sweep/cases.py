"""A Sweep's cases: the base scenario loaded once, each axis value a patch on one named object.

The grid is the product of the axes' values in the order written (the last axis varies fastest); a case's id is
its index in that grid (`c0007`), whatever strategy picked it, so ids, run folders and rows do not depend on the
search or on the backend.

Cases are enumerated lazily (itertools.product over the axes' value indices; a random sample drawn as indices), so
the driver holds the cases it runs, never the grid: `kubetwin sweep` of a huge grid raised with --max-cases starts
its first case at once with flat memory.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.loader import Manifest, load_paths
from kubetwin.api.patch import PatchError
from kubetwin.api.sweep import Axis, Sweep, apply_axis, find_object, scenario_paths


@dataclass(frozen=True)
class Case:
    """One configuration: its grid index and each axis' value index."""

    index: int
    choice: tuple[int, ...]
    width: int

    @property
    def id(self) -> str:
        return f"c{self.index:0{self.width}d}"


@dataclass
class Plan:
    """A loaded Sweep: its model, the file it came from, the base manifests and the grid's size."""

    sweep: Sweep
    manifest: Manifest
    base: list[Manifest]
    base_dir: Path  # the folder every scenario file lies under (shipped to Ray workers)

    @property
    def axes(self) -> list[Axis]:
        return self.sweep.spec.axes

    @property
    def size(self) -> int:
        return self.sweep.spec.grid_size

    @property
    def count(self) -> int:
        """The cases this sweep runs (the grid, or the random / Bayesian budget)."""
        return self.sweep.spec.case_count

    @property
    def width(self) -> int:
        return max(4, len(str(self.size - 1)))

    def case(self, index: int) -> Case:
        choice = []
        for a in reversed(self.axes):
            index, i = divmod(index, len(a.labels))
            choice.append(i)
        return Case(self.index_of(tuple(reversed(choice))), tuple(reversed(choice)), self.width)

    def index_of(self, choice: tuple[int, ...]) -> int:
        index = 0
        for a, i in zip(self.axes, choice, strict=True):
            index = index * len(a.labels) + i
        return index

    def grid(self) -> Iterator[Case]:
        """Every case in grid order, one at a time (never the whole grid in memory)."""
        for c in itertools.product(*(range(len(a.labels)) for a in self.axes)):
            yield Case(self.index_of(c), c, self.width)

    def cases(self) -> Iterator[Case]:
        """The cases a grid or random search runs, in the order their rows are numbered (--index)."""
        return self.grid() if self.sweep.spec.search.strategy == "grid" else iter(self.random_cases())

    def nth(self, position: int) -> Case:
        """The `position`-th case of `cases()` without enumerating the ones before it (grid: the grid index)."""
        return self.case(position) if self.sweep.spec.search.strategy == "grid" else self.random_cases()[position]

    def values(self, case: Case) -> dict[str, Any]:
        return {a.name: a.labels[i] for a, i in zip(self.axes, case.choice, strict=True)}

    def seeds(self) -> list[int]:
        if self.sweep.spec.seeds is not None:
            return list(self.sweep.spec.seeds)
        scenario = next((m for m in self.base if m.kind == "Scenario"), None)
        spec = (scenario.obj.get("spec") or {}) if scenario is not None else {}
        return [int(spec.get("seed", 0))]

    def random_cases(self) -> list[Case]:
        """search.strategy random: `budget` distinct grid cases drawn with search.seed (all when fewer), as grid
        indices: random.sample over a range never lists the range. A grid past sys.maxsize cases (len() of such a
        range overflows) is drawn index by index with the same generator."""
        s = self.sweep.spec.search
        size = self.size
        budget = min(s.budget or size, size)
        rng = random.Random(s.seed)
        if size <= sys.maxsize:
            picked = rng.sample(range(size), budget)
        else:  # budget <= 100,000 out of > 9.2e18: a collision is all but impossible, still skipped
            seen: set[int] = set()
            while len(seen) < budget:
                seen.add(rng.randrange(size))
            picked = list(seen)
        return [self.case(i) for i in sorted(picked)]

    def manifests(self, case: Case) -> list[Manifest]:
        """The base manifests with this case's patches applied (file and line kept: diagnostics still point at
        the scenario's files)."""
        out = list(self.base)
        for axis, i in zip(self.axes, case.choice, strict=True):
            at = find_object(out, axis.object)
            if at is None:  # validate_sweep reports it with the Sweep's line; here a bare failure
                raise KubetwinError([Diagnostic(self.manifest.file, self.manifest.line, self.manifest.ref,
                                                f"spec.axes[{axis.name}].object",
                                                f"no object {axis.object} in the scenario", "")])
            m = out[at]
            try:
                obj = apply_axis(m.obj, axis, i)
            except PatchError as exc:
                raise KubetwinError([Diagnostic(self.manifest.file, self.manifest.line, self.manifest.ref,
                                                f"spec.axes[{axis.name}]", str(exc), "")]) from None
            out[at] = Manifest(obj, m.file, m.line, m.lines, m.flags)
        return out


def plan(path: str | Path, max_cases: int | None = None) -> Plan:
    """Load a Sweep file and its base scenario; KubetwinError with validate's diagnostics when either is invalid,
    or when it has more cases than `max_cases` (None: validation.sweep.DEFAULT_MAX_CASES)."""
    from kubetwin.validation.sweep import case_limit, validate_sweep_file

    with case_limit(max_cases):
        sweep_manifest, sweep, base = validate_sweep_file(path)
    files = sorted({str(Path(m.file).resolve().parent) for m in base})
    import os

    base_dir = Path(os.path.commonpath(files)) if files else Path(sweep_manifest.file).parent
    return Plan(sweep, sweep_manifest, base, base_dir)


def load_base(m: Manifest, sweep: Sweep) -> list[Manifest]:
    return load_paths(list(scenario_paths(m, sweep)))

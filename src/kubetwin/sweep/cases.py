"""A Sweep's cases: the base scenario loaded once, each axis value a patch on one named object.

The grid is the product of the axes' values in the order written (the last axis varies fastest); a case's id is
its index in that grid (`c0007`), whatever strategy picked it, so ids, run folders and rows do not depend on the
search or on the backend.
"""

from __future__ import annotations

import itertools
import math
import random
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
        return math.prod(len(a.labels) for a in self.axes)

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

    def grid(self) -> list[Case]:
        return [Case(self.index_of(c), c, self.width)
                for c in itertools.product(*(range(len(a.labels)) for a in self.axes))]

    def values(self, case: Case) -> dict[str, Any]:
        return {a.name: a.labels[i] for a, i in zip(self.axes, case.choice, strict=True)}

    def seeds(self) -> list[int]:
        if self.sweep.spec.seeds is not None:
            return list(self.sweep.spec.seeds)
        scenario = next((m for m in self.base if m.kind == "Scenario"), None)
        spec = (scenario.obj.get("spec") or {}) if scenario is not None else {}
        return [int(spec.get("seed", 0))]

    def random_cases(self) -> list[Case]:
        """search.strategy random: `budget` distinct grid cases drawn with search.seed (all when fewer)."""
        s = self.sweep.spec.search
        budget = min(s.budget or self.size, self.size)
        picked = sorted(random.Random(s.seed).sample(range(self.size), budget))
        return [self.case(i) for i in picked]

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


def plan(path: str | Path) -> Plan:
    """Load a Sweep file and its base scenario; KubetwinError with validate's diagnostics when either is invalid."""
    from kubetwin.validation.sweep import validate_sweep_file

    sweep_manifest, sweep, base = validate_sweep_file(path)
    files = sorted({str(Path(m.file).resolve().parent) for m in base})
    import os

    base_dir = Path(os.path.commonpath(files)) if files else Path(sweep_manifest.file).parent
    return Plan(sweep, sweep_manifest, base, base_dir)


def load_base(m: Manifest, sweep: Sweep) -> list[Manifest]:
    return load_paths(list(scenario_paths(m, sweep)))

"""The Sweep kind (kubetwin.io/v1alpha1): a base scenario, the axes that vary it, seeds and metrics (issue 21).

    apiVersion: kubetwin.io/v1alpha1
    kind: Sweep
    metadata: {name: a3-size}
    spec:
      scenario: [../training-llama-8b-a3.yaml]     # files or folders, relative to this file
      axes:
      - name: nodes
        object: NodePool/a3-high                   # Kind/name or Kind/namespace/name in the scenario
        path: spec.nodeCount                       # each value replaces this field (a JSON patch "replace",
        values: [2, 4, 8]                          #   or "add" when the field is absent)
      - name: queue
        object: ClusterQueue/team-a
        patches:                                   # or: one labelled patch per value
        - {value: small, jsonPatch: [{op: replace, path: /spec/..., value: 8}]}
        - {value: big, strategicMerge: {spec: {...}}}
      seeds: [0, 1]
      metrics: [cost, pending_p99, {name: p90, path: serving.overall.ttft_seconds.p90}]
      search: {strategy: grid}                     # or random / bayesian (optuna TPE) with a budget
      goal: {minimize: cost, subjectTo: ["pending_p99 <= 30m", {constraint: "cost <= 900", overSeeds: mean}]}

A constraint holds when every seed meets it (overSeeds: all, the default), or when an aggregate of its seeds'
values does (mean, median, min, max, pNN: the nearest-rank percentile over the seeds); `goal.overSeeds` sets the
default for the goal's constraints, a constraint written as an object its own. The objective is the mean over seeds.

The case grid is the product of the axes' values in the order written; a case's id is its index in that grid, so
random and Bayesian search name the same configuration the same way as the grid does.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kubetwin.api.loader import Manifest
from kubetwin.api.patch import PatchError, field_pointer, json_patch, strategic_merge
from kubetwin.api.twin import MAX_SEED, Metadata

# Named metrics: name -> (what it is, unit). The summary.json paths and run-history computations are in
# kubetwin/sweep/metrics.py; this table is what validate accepts.
NAMED_METRICS: dict[str, tuple[str, str]] = {
    "cost": ("cost.total_usd: node cost of the run", "USD"),
    "on_demand_cost": ("cost.on_demand_usd", "USD"),
    "spot_cost": ("cost.spot_usd", "USD"),
    "gpu_allocation": ("GPU hours requested / allocatable over every pool", "%"),
    "pending_p50": ("pods.pending_seconds.p50", "s"),
    "pending_p99": ("pods.pending_seconds.p99", "s"),
    "pending_max": ("pods.pending_seconds.max", "s"),
    "never_scheduled": ("pods.never_scheduled", "pods"),
    "wasted_gpu_hours": ("wasted_gpu_hours", "GPU h"),
    "jobs": ("Jobs and JobSets created (child Jobs of a JobSet not counted)", "jobs"),
    "jobs_unfinished": ("Jobs and JobSets not Complete at the end of the run", "jobs"),
    "jct_p50": ("job completion time (creation to Complete), p50 over finished jobs", "s"),
    "jct_p99": ("job completion time, p99 over finished jobs", "s"),
    "makespan": ("when the last job completed (infinite while any is unfinished)", "s"),
    "ttft_p50": ("serving.overall.ttft_seconds.p50", "s"),
    "ttft_p90": ("serving.overall.ttft_seconds.p90", "s"),
    "ttft_p99": ("serving.overall.ttft_seconds.p99", "s"),
    "tpot_p90": ("serving.overall.tpot_seconds.p90", "s"),
    "e2e_p99": ("serving.overall.e2e_seconds.p99", "s"),
    "slo_attainment": ("serving.overall.slo_attainment", "fraction"),
    "goodput_rps": ("serving.overall.goodput_rps", "req/s"),
    "usd_per_million_output_tokens": ("serving.overall.usd_per_million_output_tokens", "USD"),
    "serving_gpu_cost": ("serving.overall.gpu_cost_usd", "USD"),
}
SECONDS_METRICS = frozenset(n for n, (_, unit) in NAMED_METRICS.items() if unit == "s")
CONSTRAINT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|<|>|==)\s*(\S+)\s*$")
AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_COLUMNS = frozenset({"case", "seed", "error"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


class AxisPatch(_Strict):
    """One value of an axis given as a patch on the axis' object: a JSON patch or a strategic merge patch."""

    value: str | int | float | bool
    jsonPatch: list[dict[str, Any]] | None = None
    strategicMerge: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> AxisPatch:
        if (self.jsonPatch is None) == (self.strategicMerge is None):
            raise ValueError("give exactly one of jsonPatch or strategicMerge")
        return self


class Axis(_Strict):
    name: str = Field(pattern=AXIS_NAME.pattern, max_length=63)
    object: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]*/([a-z0-9.-]+/)?[a-z0-9.-]+$")
    path: str | None = None
    values: list[Any] | None = Field(default=None, min_length=1)
    patches: list[AxisPatch] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> Axis:
        if self.patches is None and (self.path is None or self.values is None):
            raise ValueError("give path and values, or patches")
        if self.patches is not None and (self.path is not None or self.values is not None):
            raise ValueError("patches replace path and values: give one or the other")
        return self

    @property
    def labels(self) -> list[Any]:
        """The axis' values as the results table shows them."""
        return [p.value for p in self.patches] if self.patches is not None else list(self.values or [])


class PathMetric(_Strict):
    name: str = Field(pattern=AXIS_NAME.pattern, max_length=63)
    path: str = Field(min_length=1)


class Search(_Strict):
    strategy: Literal["grid", "random", "bayesian"] = "grid"
    budget: int | None = Field(default=None, ge=1, le=100_000)  # cases to run (random, bayesian)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)  # the sampler's seed
    batch: int = Field(default=4, ge=1, le=256)  # bayesian: cases asked per round (results do not depend on --jobs)

    @model_validator(mode="after")
    def _budget(self) -> Search:
        if self.strategy != "grid" and self.budget is None:
            raise ValueError(f"strategy {self.strategy} needs a budget (the number of cases to run)")
        return self


# How a constraint is judged over a case's seeds: every seed meets it, or an aggregate of the seeds' values does.
OVER_SEEDS = r"^(all|mean|median|min|max|p([1-9]|[1-9][0-9]))$"


class Constraint(_Strict):
    """A constraint with its own aggregation over the seeds: {constraint: "makespan <= 12h", overSeeds: p90}."""

    constraint: str
    overSeeds: str | None = Field(default=None, pattern=OVER_SEEDS)


class Goal(_Strict):
    minimize: str | None = None
    maximize: str | None = None
    subjectTo: list[str | Constraint] = Field(default_factory=list)
    overSeeds: str = Field(default="all", pattern=OVER_SEEDS)  # the constraints' default: every seed meets them

    @model_validator(mode="after")
    def _one(self) -> Goal:
        if (self.minimize is None) == (self.maximize is None):
            raise ValueError("give exactly one of minimize or maximize")
        return self

    @property
    def objective(self) -> str:
        return self.minimize or self.maximize or ""

    def constraints(self) -> list[tuple[str, str, str]]:
        """(text, over seeds, field path) of each constraint, the goal's overSeeds where one sets none."""
        out = []
        for i, c in enumerate(self.subjectTo):
            if isinstance(c, Constraint):
                out.append((c.constraint, c.overSeeds or self.overSeeds, f"spec.goal.subjectTo[{i}].constraint"))
            else:
                out.append((c, self.overSeeds, f"spec.goal.subjectTo[{i}]"))
        return out


class SweepSpec(_Strict):
    scenario: list[str] = Field(min_length=1)
    axes: list[Axis] = Field(min_length=1)
    seeds: list[int] | None = Field(default=None, min_length=1)
    metrics: list[str | PathMetric] = Field(default_factory=lambda: list[str | PathMetric](
        ["cost", "gpu_allocation", "pending_p99"]))
    search: Search = Field(default_factory=Search)
    goal: Goal | None = None

    @property
    def grid_size(self) -> int:
        """The number of configurations the axes span: the product of their value counts (an int of any size)."""
        return math.prod(len(a.labels) for a in self.axes)

    @property
    def case_count(self) -> int:
        """The cases the sweep runs: the whole grid, or the budget of a random or Bayesian search (at most the
        grid). What `--max-cases` bounds; each runs once per seed."""
        size = self.grid_size
        return size if self.search.strategy == "grid" else min(self.search.budget or size, size)


class Sweep(_Strict):
    apiVersion: Literal["kubetwin.io/v1alpha1"]
    kind: Literal["Sweep"]
    metadata: Metadata
    spec: SweepSpec


def find_object(manifests: list[Manifest], ref: str) -> int | None:
    """The index of the object `Kind/name` or `Kind/namespace/name` (a namespaced object without a namespace is
    in default, as kubectl apply puts it)."""
    parts = ref.split("/")
    kind, name = parts[0], parts[-1]
    namespace = parts[1] if len(parts) == 3 else None
    for i, m in enumerate(manifests):
        meta = m.obj.get("metadata") if isinstance(m.obj.get("metadata"), dict) else {}
        if m.kind != kind or (meta or {}).get("name") != name:
            continue
        if namespace is None or (meta or {}).get("namespace", "default") == namespace:
            return i
    return None


def apply_axis(obj: dict[str, Any], axis: Axis, i: int) -> dict[str, Any]:
    """The object with value `i` of the axis applied (PatchError when it does not apply)."""
    if axis.patches is not None:
        p = axis.patches[i]
        if p.jsonPatch is not None:
            return dict(json_patch(obj, p.jsonPatch))
        return dict(strategic_merge(obj, p.strategicMerge or {}))
    assert axis.path is not None and axis.values is not None
    pointer = field_pointer(obj, axis.path)
    try:
        field_pointer(obj, axis.path, must_exist=True)
        op = "replace"
    except PatchError:
        op = "add"
    return dict(json_patch(obj, [{"op": op, "path": pointer, "value": copy.deepcopy(axis.values[i])}]))


def scenario_paths(m: Manifest, sweep: Sweep) -> list[Path]:
    """spec.scenario's paths, relative to the Sweep's file."""
    base = Path(m.file).parent if not m.file.startswith("<") else Path.cwd()
    return [(base / p) for p in sweep.spec.scenario]

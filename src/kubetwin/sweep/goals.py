"""A Sweep's goal: the objective over each case's mean over seeds, the constraints judged over the seeds as each
says (`overSeeds`: every seed meets it by default, or the mean, median, min, max or a percentile of the seeds'
values), the best feasible case and the Pareto front of the objective against each constrained metric.

Why every seed by default: a "best feasible" configuration whose makespan limit holds on the mean but not in one
seed misses the deadline in one run of N; the user asked for the limit, not for its average."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from kubetwin.api.sweep import CONSTRAINT, Goal
from kubetwin.sweep.cases import Plan
from kubetwin.validation.sweep import constraint_bound, metric_names

Row = dict[str, Any]


@dataclass(frozen=True)
class Bound:
    metric: str
    op: str
    value: float
    text: str
    over: str = "all"  # how the seeds are judged: api.sweep.OVER_SEEDS

    @property
    def label(self) -> str:
        """The constraint with its aggregation, as printed: "makespan <= 12h in every seed"."""
        return f"{self.text} " + ("in every seed" if self.over == "all" else f"on the {self.over} over seeds")

    def judged(self, values: list[Any]) -> float | None:
        """The value compared with the bound: the seeds' aggregate (for `all`, the worst seed's); None when a seed
        has no value."""
        nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not values or len(nums) != len(values):
            return None
        over = self.over
        if over == "all":
            over = "max" if self.lower_is_better and self.op != "==" else "min"
        if over == "mean":
            return sum(nums) / len(nums)
        ordered = sorted(nums)
        if over == "min":
            return ordered[0]
        if over == "max":
            return ordered[-1]
        if over == "median":
            return statistics.median(ordered)
        return ordered[max(0, math.ceil(int(over[1:]) / 100 * len(ordered)) - 1)]  # nearest rank

    def satisfied(self, values: list[Any]) -> bool:
        """Whether a case's seeds meet the constraint as `over` says."""
        if self.over == "all":
            return bool(values) and all(self.holds(v) for v in values)
        return self.holds(self.judged(values))

    @property
    def lower_is_better(self) -> bool:
        return self.op in ("<=", "<", "==")

    def holds(self, v: float | None) -> bool:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return False
        return {"<=": v <= self.value, "<": v < self.value, ">=": v >= self.value, ">": v > self.value,
                "==": v == self.value}[self.op]


def constraints(goal: Goal) -> list[Bound]:
    out = []
    for t, over, _ in goal.constraints():
        found = CONSTRAINT.match(t)
        assert found is not None  # validated
        metric, op, raw = found.groups()
        out.append(Bound(metric, op, constraint_bound(metric, raw), t.strip(), over))
    return out


def violation(b: Bound, case: dict[str, Any]) -> float:
    """optuna's constraint value for a case: <= 0 when the bound holds over its seeds, else how far the judged
    value is off (for `all`, the worst seed's; 1e12 when unmeasured)."""
    values = case["per_seed"].get(b.metric) or []
    v = b.judged(values)
    if v is None or math.isnan(v):
        return 1e12
    if b.satisfied(values):
        return 0.0
    return min(abs(float(v) - b.value), 1e12) or 1e-9


def _mean(values: list[Any]) -> Any:
    if any(v is None for v in values) or not values:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return values[0] if len(set(map(str, values))) == 1 else None
    return sum(values) / len(values) if len(values) > 1 else values[0]


def case_table(plan: Plan, rows: list[Row]) -> dict[str, dict[str, Any]]:
    """case id -> {values, metrics (mean over seeds), per_seed (each metric's value in each seed, in seed order),
    seed_ids, errors, seeds}, in case order."""
    by_case: dict[str, list[Row]] = {}
    for r in sorted(rows, key=lambda r: (r["case"], r["seed"])):
        by_case.setdefault(r["case"], []).append(r)
    axes = [a.name for a in plan.axes]
    names = metric_names(plan.sweep)
    out = {}
    for case, rs in by_case.items():
        ok = [r for r in rs if not r.get("error")]
        out[case] = {"case": case, "values": {a: rs[0][a] for a in axes},
                     "metrics": {m: _mean([r.get(m) for r in ok]) if len(ok) == len(rs) else None for m in names},
                     "per_seed": {m: [None if r.get("error") else r.get(m) for r in rs] for m in names},
                     "seed_ids": [r["seed"] for r in rs],
                     "errors": [r["error"] for r in rs if r.get("error")], "seeds": len(rs)}
    return out


@dataclass
class Answer:
    objective: str
    minimize: bool
    bounds: list[Bound]
    cases: list[dict[str, Any]]  # every case, in case order
    feasible: list[dict[str, Any]]
    best: dict[str, Any] | None
    fronts: dict[str, list[dict[str, Any]]]  # constrained metric -> Pareto front (objective against it)


def pareto(cases: list[dict[str, Any]], objective: str, minimize: bool, metric: str,
           lower_is_better: bool) -> list[dict[str, Any]]:
    """The cases no other case beats on both the objective and `metric` (ties kept once, first case wins),
    sorted by the objective."""
    def key(c: dict[str, Any]) -> tuple[float, float]:
        o, m = c["metrics"][objective], c["metrics"][metric]
        return (o if minimize else -o, m if lower_is_better else -m)

    pts = [c for c in cases if isinstance(c["metrics"].get(objective), (int, float))
           and isinstance(c["metrics"].get(metric), (int, float))]
    front: list[dict[str, Any]] = []
    best_second = math.inf
    for c in sorted(pts, key=lambda c: (*key(c), c["case"])):
        if key(c)[1] < best_second:
            front.append(c)
            best_second = key(c)[1]
    return front


def answer(plan: Plan, rows: list[Row]) -> Answer | None:
    goal = plan.sweep.spec.goal
    if goal is None:
        return None
    bounds = constraints(goal)
    cases = list(case_table(plan, rows).values())
    minimize = goal.minimize is not None
    objective = goal.objective
    feasible = [c for c in cases if not c["errors"] and isinstance(c["metrics"].get(objective), (int, float))
                and all(b.satisfied(c["per_seed"].get(b.metric) or []) for b in bounds)]
    best = min(feasible, key=lambda c: (c["metrics"][objective] if minimize else -c["metrics"][objective],
                                        c["case"])) if feasible else None
    fronts = {b.metric: pareto(cases, objective, minimize, b.metric, b.lower_is_better) for b in bounds}
    return Answer(objective, minimize, bounds, cases, feasible, best, fronts)


def by_seed(ans: Answer, case: dict[str, Any]) -> list[dict[str, Any]]:
    """A case's values seed by seed, as the CLI and report.html show the winner: the objective (judged on the mean)
    and each constraint (judged over the seeds as it says), with the judged value and whether it holds."""
    obj = ans.objective
    out = [{"what": f"{obj} (objective, mean over seeds)", "values": case["per_seed"].get(obj) or [],
            "judged": case["metrics"].get(obj), "ok": None}]
    for b in ans.bounds:
        values = case["per_seed"].get(b.metric) or []
        out.append({"what": b.label, "values": values, "judged": b.judged(values), "ok": b.satisfied(values)})
    return out

"""A Sweep's goal: the objective and constraints over each case's mean over seeds, the best feasible case and the
Pareto front of the objective against each constrained metric."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kubetwin.api.sweep import CONSTRAINT
from kubetwin.sweep.cases import Plan
from kubetwin.validation.sweep import constraint_bound, metric_names

Row = dict[str, Any]


@dataclass(frozen=True)
class Bound:
    metric: str
    op: str
    value: float
    text: str

    @property
    def lower_is_better(self) -> bool:
        return self.op in ("<=", "<", "==")

    def holds(self, v: float | None) -> bool:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return False
        return {"<=": v <= self.value, "<": v < self.value, ">=": v >= self.value, ">": v > self.value,
                "==": v == self.value}[self.op]


def constraints(texts: list[str]) -> list[Bound]:
    out = []
    for t in texts:
        found = CONSTRAINT.match(t)
        assert found is not None  # validated
        metric, op, raw = found.groups()
        out.append(Bound(metric, op, constraint_bound(metric, raw), t.strip()))
    return out


def violation(b: Bound, metrics: dict[str, Any]) -> float:
    """optuna's constraint value: <= 0 when the bound holds, else how far it is off (1e12 when unmeasured)."""
    v = metrics.get(b.metric)
    if v is None or not isinstance(v, (int, float)) or math.isnan(v):
        return 1e12
    if b.holds(v):
        return 0.0
    return min(abs(float(v) - b.value), 1e12) or 1e-9


def _mean(values: list[Any]) -> Any:
    if any(v is None for v in values) or not values:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return values[0] if len(set(map(str, values))) == 1 else None
    return sum(values) / len(values) if len(values) > 1 else values[0]


def case_table(plan: Plan, rows: list[Row]) -> dict[str, dict[str, Any]]:
    """case id -> {values, metrics (mean over seeds), errors, seeds}, in case order."""
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
    bounds = constraints(goal.subjectTo)
    cases = list(case_table(plan, rows).values())
    minimize = goal.minimize is not None
    objective = goal.objective
    feasible = [c for c in cases if not c["errors"] and isinstance(c["metrics"].get(objective), (int, float))
                and all(b.holds(c["metrics"].get(b.metric)) for b in bounds)]
    best = min(feasible, key=lambda c: (c["metrics"][objective] if minimize else -c["metrics"][objective],
                                        c["case"])) if feasible else None
    fronts = {b.metric: pareto(cases, objective, minimize, b.metric, b.lower_is_better) for b in bounds}
    return Answer(objective, minimize, bounds, cases, feasible, best, fronts)

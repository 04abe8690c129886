"""`kubetwin validate SWEEP.yaml`: a Sweep's base scenario, and every axis value applied to it, checked as
`kubetwin run` would check the case, with each finding at the Sweep's file:line and field path.

Each axis value is checked once, applied alone to the base object (the axes are independent patches), not each case:
a grid of 10^9 cases is validated in the time of its few dozen values. The case count is checked against a limit
(`DEFAULT_MAX_CASES`, raised per command with `--max-cases`) before anything runs, so a grid too big to finish is
refused at validate and at `kubetwin sweep`'s start instead of filling memory with cases it never reaches."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.limits import shown
from kubetwin.api.loader import Manifest, load_paths
from kubetwin.api.patch import PatchError, field_pointer
from kubetwin.api.sweep import (
    CONSTRAINT,
    NAMED_METRICS,
    RESERVED_COLUMNS,
    SECONDS_METRICS,
    Sweep,
    apply_axis,
    find_object,
    scenario_paths,
)
from kubetwin.k8s.units import parse_duration

# The most cases a sweep runs unless --max-cases says otherwise (a twin choice, docs/sweep.md "Size"): 100x the
# shipped examples' 60 cases, and at the measured ~600 small cases a minute per core (docs/sweep.md "Throughput")
# about 17 core-minutes per seed; a realistic scenario (seconds a run) takes hours. Past it a grid is more likely a
# typo (an axis of 1000 values, one axis too many) than a plan, and random or Bayesian search with a budget is the
# way to explore it.
DEFAULT_MAX_CASES = 10_000
_MAX_CASES: ContextVar[int] = ContextVar("max_cases", default=DEFAULT_MAX_CASES)


@contextlib.contextmanager
def case_limit(n: int | None) -> Iterator[int]:
    """Validate (and plan) sweeps with at most `n` cases inside the block (None: the default limit): the
    `--max-cases` flag of `kubetwin validate` and `kubetwin sweep`."""
    token = _MAX_CASES.set(DEFAULT_MAX_CASES if n is None else n)
    try:
        yield _MAX_CASES.get()
    finally:
        _MAX_CASES.reset(token)


def max_cases() -> int:
    return _MAX_CASES.get()


def _grid(sweep: Sweep) -> str:
    spec = sweep.spec
    dims = " x ".join(str(len(a.labels)) for a in spec.axes)
    return (f"{dims} grid" if spec.search.strategy == "grid" else
            f"{spec.search.strategy} search of a {spec.grid_size:,}-case {dims} grid")


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def case_summary(sweep: Sweep, seeds: int) -> str:
    """How many cases and runs: "60 cases (4 x 5 x 3 grid) x 3 seeds = 180 runs" (random and Bayesian search: the
    budget "of a N-case grid")."""
    count = sweep.spec.case_count
    return (f"{count:,} case{'s' if count != 1 else ''} ({_grid(sweep)}) x {_seeds(seeds)} = "
            f"{count * seeds:,} run{'s' if count * seeds != 1 else ''}")


def _size(m: Manifest, sweep: Sweep) -> Diagnostic:
    """The case count as a notice, or an error past the limit (API server words: field.TooMany)."""
    spec = sweep.spec
    seeds = len(spec.seeds or [0])
    count, limit = spec.case_count, max_cases()
    summary = case_summary(sweep, seeds)
    if count <= limit:
        return Diagnostic(m.file, m.line_of("spec.axes"), m.ref, "spec.axes", summary, "", "notice")
    field = "spec.axes" if spec.search.strategy == "grid" else "spec.search.budget"
    fix = ("reduce the grid (fewer axes or values), or sample it: search: {strategy: random, budget: N}"
           if spec.search.strategy == "grid" else "lower spec.search.budget")
    return Diagnostic(m.file, m.line_of(field), m.ref, field,
                      f"Too many: {count:,} cases: must have at most {limit:,} ({_grid(sweep)}, x {_seeds(seeds)})",
                      f"{fix}; or pass --max-cases {count} to run them all")


def metric_names(sweep: Sweep) -> list[str]:
    return [m if isinstance(m, str) else m.name for m in sweep.spec.metrics]


def constraint_bound(metric: str, raw: str) -> float:
    """A constraint's right-hand side: a number, or a duration (30m) for a metric in seconds."""
    try:
        return float(raw)
    except ValueError:
        if metric in NAMED_METRICS and metric not in SECONDS_METRICS:
            raise
        return parse_duration(raw)  # a UnitError is a ValueError


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """The Sweep's own cross-checks (its shape was validated by the model): base scenario, axes, metrics, goal."""
    sweep = Sweep.model_validate(m.obj)
    out: list[Diagnostic] = []
    names = metric_names(sweep)
    for i, name in enumerate(names):
        spec_metric = sweep.spec.metrics[i]
        if isinstance(spec_metric, str) and name not in NAMED_METRICS:
            out.append(Diagnostic(m.file, m.line_of(f"spec.metrics[{i}]"), m.ref, f"spec.metrics[{i}]",
                                  f'Unsupported value: "{shown(name)}": not a named metric',
                                  f"use one of {', '.join(NAMED_METRICS)}, or {{name: N, path: a.b.c}} for a "
                                  "path into summary.json"))
    axis_names = [a.name for a in sweep.spec.axes]
    for i, a in enumerate(sweep.spec.axes):
        if a.name in RESERVED_COLUMNS or a.name in names or axis_names.index(a.name) != i:
            out.append(Diagnostic(m.file, m.line_of(f"spec.axes[{i}].name"), m.ref, f"spec.axes[{i}].name",
                                  f'Duplicate value: "{a.name}": a results column of that name exists',
                                  "give each axis a name no other axis, metric, case, seed or error has"))
    if len(set(names)) != len(names):
        out.append(Diagnostic(m.file, m.line_of("spec.metrics"), m.ref, "spec.metrics",
                              "Duplicate value: two metrics have the same name", "name each metric once"))
    out += _goal(m, sweep, names)
    if sweep.spec.search.strategy == "bayesian" and sweep.spec.goal is None:
        out.append(Diagnostic(m.file, m.line_of("spec.search.strategy"), m.ref, "spec.search.strategy",
                              "Required value: a Bayesian search needs spec.goal (the objective it optimizes)",
                              "add spec.goal: {minimize: METRIC}, or use strategy grid or random"))
    out.append(_size(m, sweep))
    seeds = sweep.spec.seeds or []
    if len(set(seeds)) != len(seeds):
        out.append(Diagnostic(m.file, m.line_of("spec.seeds"), m.ref, "spec.seeds", "Duplicate value: a seed is "
                              "listed twice", "list each seed once"))
    try:
        base = load_paths(list(scenario_paths(m, sweep)))
    except KubetwinError as exc:
        return out + [Diagnostic(m.file, m.line_of("spec.scenario"), m.ref, "spec.scenario",
                                 "the base scenario does not load", "fix the scenario's files (below)")] + \
            exc.diagnostics
    from kubetwin.validation.validate import validate, validate_one

    base_diags = validate(base)
    if any(d.severity == "error" for d in base_diags):
        return out + [Diagnostic(m.file, m.line_of("spec.scenario"), m.ref, "spec.scenario",
                                 "the base scenario is invalid", "fix the scenario's files (below)")] + \
            [d for d in base_diags if d.severity == "error"]
    for i, a in enumerate(sweep.spec.axes):
        at = find_object(base, a.object)
        if at is None:
            known = sorted({f"{b.kind}/{(b.obj.get('metadata') or {}).get('name')}" for b in base})
            out.append(Diagnostic(m.file, m.line_of(f"spec.axes[{i}].object"), m.ref, f"spec.axes[{i}].object",
                                  f'Not found: "{a.object}": no such object in the scenario',
                                  f"name one of {', '.join(known[:8])}{' ...' if len(known) > 8 else ''}"))
            continue
        target = base[at]
        if a.path is not None:
            try:
                field_pointer(target.obj, a.path)
            except PatchError as exc:
                out.append(Diagnostic(m.file, m.line_of(f"spec.axes[{i}].path"), m.ref, f"spec.axes[{i}].path",
                                      f"Invalid value: {exc}", f"write a field path of {a.object}, e.g. spec.x"))
                continue
        where = "values" if a.patches is None else "patches"
        for j in range(len(a.labels)):
            field = f"spec.axes[{i}].{where}[{j}]"
            try:
                obj = apply_axis(target.obj, a, j)
            except PatchError as exc:
                out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, f"the patch does not apply to "
                                      f"{a.object}: {exc}", "patch fields the object has (or add with op: add)"))
                continue
            patched = Manifest(obj, target.file, target.line, target.lines)
            for d in validate_one(patched):
                if d.severity == "error":
                    out.append(Diagnostic(m.file, m.line_of(field), m.ref, field,
                                          f"{a.name}={json.dumps(a.labels[j], default=str)} makes {a.object} "
                                          f"invalid: {d.field}: {d.message}", d.hint))
    return out


def _goal(m: Manifest, sweep: Sweep, names: list[str]) -> list[Diagnostic]:
    goal = sweep.spec.goal
    if goal is None:
        return []
    out = []
    key = "spec.goal.minimize" if goal.minimize is not None else "spec.goal.maximize"
    if goal.objective not in names:
        out.append(Diagnostic(m.file, m.line_of(key), m.ref, key, f'Invalid value: "{shown(goal.objective)}": not '
                              "one of the sweep's metrics",
                              f"add it to spec.metrics, or use one of {', '.join(names)}"))
    for c, _, field in goal.constraints():
        found = CONSTRAINT.match(c)
        if found is None:
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, f'Invalid value: "{shown(c)}": not a '
                                  "constraint",
                                  'write METRIC OP VALUE, e.g. "pending_p99 <= 30m" (OP: <=, >=, <, >, ==)'))
            continue
        metric, _, raw = found.groups()
        if metric not in names:
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, f'Invalid value: "{metric}": not one of the '
                                  "sweep's metrics", f"add it to spec.metrics, or use one of {', '.join(names)}"))
            continue
        try:
            constraint_bound(metric, raw)
        except ValueError:
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, f'Invalid value: "{shown(raw)}": not a '
                                  "number" + (" or a duration" if metric in SECONDS_METRICS else ""),
                                  "write a number (0.99), or a duration (30m) for a metric in seconds"))
    return out


def validate_sweep_file(path: str | Path) -> tuple[Manifest, Sweep, list[Manifest]]:
    """The Sweep in `path` (the only object there), validated, and its base scenario; KubetwinError otherwise."""
    from kubetwin.validation.validate import validate

    manifests = load_paths([path])
    sweeps = [m for m in manifests if m.kind == "Sweep"]
    if len(sweeps) != 1 or len(manifests) != 1:
        raise KubetwinError([Diagnostic(str(path), manifests[0].line if manifests else 0, "-", "",
                                        f"expected one Sweep object, found {len(sweeps)} Sweep(s) among "
                                        f"{len(manifests)} object(s)", "give kubetwin sweep a file that holds "
                                        "only the Sweep; its spec.scenario names the scenario's files")])
    errors = [d for d in validate(sweeps) if d.severity == "error"]
    if errors:
        raise KubetwinError(errors)
    sweep = Sweep.model_validate(sweeps[0].obj)
    return sweeps[0], sweep, load_paths(list(scenario_paths(sweeps[0], sweep)))

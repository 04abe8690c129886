"""The sweep driver: the cases to run, each case's row saved as it arrives (cases/<case>-s<seed>.json), cases
already done skipped on a rerun, then the results table over every case and seed.

The output folder remembers which sweep it holds (sweep.json: a digest of the Sweep and its base scenario), so a
rerun resumes only the same sweep; a changed Sweep or scenario needs a new --out.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.sweep import backends
from kubetwin.sweep.cases import Case, Plan
from kubetwin.sweep.results import Row, sort_rows, write_atomic, write_tables
from kubetwin.sweep.worker import Task
from kubetwin.validation.sweep import metric_names

Progress = Callable[[int, int, Task, Row], None]
POOL_CHUNK = 2_000  # tasks handed to a process pool or Ray at once (a new pool per chunk: ~1 s of 2,000 runs' minutes)


@dataclass
class Outcome:
    rows: list[Row]  # every case and seed the sweep ran (or had run before), sorted by case and seed
    ran: int = 0
    skipped: int = 0
    files: list[Path] = field(default_factory=list)

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.get("error")]


def fingerprint(plan: Plan) -> str:
    """A digest of what decides the results: the Sweep's spec and the base scenario's objects."""
    h = hashlib.sha256()
    h.update(json.dumps(plan.sweep.spec.model_dump(mode="json"), sort_keys=True).encode())
    for m in plan.base:
        h.update(json.dumps([os.path.relpath(Path(m.file).resolve(), plan.base_dir), m.obj], sort_keys=True,
                            default=str).encode())
    return h.hexdigest()


def _refuse(out: Path, message: str, fix: str) -> KubetwinError:
    return KubetwinError([Diagnostic(str(out), 0, "kubetwin sweep", "--out", message, fix)])


def prepare(out: Path, plan: Plan) -> None:
    """Create `out`, or check that it holds this sweep (a resume)."""
    marker = out / "sweep.json"
    digest = fingerprint(plan)
    if out.exists() and not out.is_dir():
        raise _refuse(out, "Invalid value: it exists and is not a folder", "choose a new folder for --out")
    if marker.is_file():
        held = json.loads(marker.read_text()).get("fingerprint")
        if held != digest:
            raise _refuse(out, "Invalid value: the folder holds the results of a different sweep (the Sweep or its "
                          "scenario changed since)", "choose a new --out, or delete the folder to start over")
        return
    if out.is_dir() and any(not p.name.startswith(".") for p in out.iterdir()):  # .partial: another writer's
        raise _refuse(out, "Invalid value: the folder is not empty and holds no sweep", "choose a new --out")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(marker, (json.dumps({"name": plan.sweep.metadata.name, "fingerprint": digest}, sort_keys=True)
                          + "\n").encode())  # first: a concurrent --index run then sees this sweep's folder
    (out / "cases").mkdir(exist_ok=True)


def tasks(plan: Plan, cases: Iterable[Case], out: Path | None, keep_runs: bool) -> Iterator[Task]:
    """Each case with each seed, with its patched scenario (files relative to the scenario's folder), one at a time
    as the backend asks for them (a big sweep's cases are never all in memory before the first runs)."""
    seeds = plan.seeds()
    for c in cases:
        error = ""
        try:
            manifests = tuple(m if m.file.startswith("<") else
                              type(m)(m.obj, os.path.relpath(Path(m.file).resolve(), plan.base_dir), m.line,
                                      m.lines, m.flags)
                              for m in plan.manifests(c))
        except KubetwinError as exc:  # this case fails; the others run
            manifests, error = (), "; ".join(d.render().replace("\n", " ") for d in exc.diagnostics)
        for s in seeds:
            key = f"{c.id}-s{s}"
            yield Task(c.id, c.index, s, plan.values(c), manifests, str(plan.base_dir), plan.sweep,
                       str(out / "runs" / key) if keep_runs and out is not None else None, error)


def _done(out: Path, task: Task) -> Row | None:
    f = out / "cases" / f"{task.key}.json"
    if not f.is_file():
        return None
    row: Row = json.loads(f.read_text())
    return None if row.get("error") else row  # a failed case runs again


def _save(out: Path, task: Task, row: Row) -> None:
    write_atomic(out / "cases" / f"{task.key}.json", (json.dumps(row, sort_keys=True) + "\n").encode())


class _Run:
    """The backend with the resume logic around it: skip done tasks, save each row as it arrives."""

    def __init__(self, out: Path, plan: Plan, backend: str, jobs: int, address: str | None,
                 progress: Progress | None, total: int):
        self.out, self.progress, self.total = out, progress, total
        self.go = backends.runner(backend, jobs, address, str(plan.base_dir))
        # a pool or Ray submits every task it is given at once: hand it POOL_CHUNK at a time, so a sweep raised with
        # --max-cases holds a chunk of patched scenarios, not all of them (a sweep that fits runs in one call)
        self.chunk = None if backend == "process" and jobs <= 1 else POOL_CHUNK
        self.rows: dict[str, Row] = {}
        self.ran = self.skipped = 0

    def __call__(self, todo: Iterable[Task]) -> None:
        fresh = self._fresh(todo)
        if self.chunk is None:  # in this process: one task at a time
            self._run(fresh)
            return
        while chunk := list(itertools.islice(fresh, self.chunk)):
            self._run(chunk)

    def _run(self, todo: Iterable[Task]) -> None:
        for t, row in self.go(todo):
            _save(self.out, t, row)
            self.rows[t.key] = row
            self.ran += 1
            self._tick(t, row)

    def _fresh(self, todo: Iterable[Task]) -> Iterator[Task]:
        """The tasks not done yet, lazily; the done ones are counted as skipped on the way."""
        for t in todo:
            row = self.rows.get(t.key) or _done(self.out, t)
            if row is None:
                yield t
                continue
            if t.key not in self.rows:
                self.skipped += 1
                self.rows[t.key] = row
                self._tick(t, row)

    def _tick(self, t: Task, row: Row) -> None:
        if self.progress is not None:
            self.progress(len(self.rows), self.total, t, row)


def execute(plan: Plan, out: Path, *, backend: str = "process", jobs: int = 1, address: str | None = None,
            keep_runs: bool = False, progress: Progress | None = None) -> Outcome:
    """Run the sweep into `out` (resumable) and write results.csv / results.parquet."""
    prepare(out, plan)
    strategy = plan.sweep.spec.search.strategy
    seeds = len(plan.seeds())
    runner = _Run(out, plan, backend, jobs, address, progress, plan.count * seeds)
    if strategy == "bayesian":
        _bayesian(plan, out, keep_runs, runner)
    else:
        runner(tasks(plan, plan.cases(), out, keep_runs))
    rows = sort_rows(list(runner.rows.values()))
    files = write_tables(out, rows, [a.name for a in plan.axes], metric_names(plan.sweep))
    return Outcome(rows, runner.ran, runner.skipped, files)


def run_index(plan: Plan, out: Path, index: int, keep_runs: bool = False) -> Row:
    """Run the index-th case and seed of the grid (or random sample) alone: one completion of an Indexed Job."""
    if plan.sweep.spec.search.strategy == "bayesian":
        raise _refuse(out, "Invalid value: a Bayesian search picks its cases from earlier results; it cannot run "
                      "one case per index", "use search.strategy grid or random for --index / --emit-job")
    total = task_count(plan)
    if not 0 <= index < total:
        raise _refuse(out, f"Invalid value: --index {index}: the sweep has {total} cases and seeds",
                      f"give an index from 0 to {total - 1}")
    seeds = len(plan.seeds())
    task = next(t for t in tasks(plan, [plan.nth(index // seeds)], out, keep_runs) if t.seed ==
                plan.seeds()[index % seeds])  # the index-th task without listing the ones before it
    prepare(out, plan)
    runner = _Run(out, plan, "process", 1, None, None, 1)
    runner([task])
    return runner.rows[task.key]


def task_count(plan: Plan) -> int:
    return plan.count * len(plan.seeds())


def case_means(plan: Plan, rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Per case: the axes' values and each metric's mean over the seeds (None when a seed lacks it or failed)."""
    from kubetwin.sweep.goals import case_table

    return case_table(plan, rows)


def _bayesian(plan: Plan, out: Path, keep_runs: bool, run: _Run) -> None:
    """optuna's TPE sampler (seeded by search.seed) over the axes' value indices, `batch` cases a round, told in
    the order asked: the cases picked depend on results only, not on the backend or --jobs. Constraints go to TPE
    as constraint values (<= 0 feasible; Trial.set_constraint, optuna's constraints_func before 5.0)."""
    import optuna

    from kubetwin.sweep.goals import constraints as parse_constraints
    from kubetwin.sweep.goals import violation

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec = plan.sweep.spec
    goal = spec.goal
    assert goal is not None  # validate requires a goal for bayesian search
    bounds = parse_constraints(goal)
    budget = min(spec.search.budget or plan.size, plan.size)
    per_trial = hasattr(optuna.trial.Trial, "set_constraint")  # optuna >= 5; constraints_func before
    options: dict[str, Any] = {} if per_trial else {"constraints_func": lambda t: t.user_attrs["c"]}
    sampler = optuna.samplers.TPESampler(seed=spec.search.seed, n_startup_trials=min(10, budget), **options)
    study = optuna.create_study(direction="minimize" if goal.minimize else "maximize", sampler=sampler)
    done: set[int] = set()
    asks = 0
    while len(done) < budget and asks < budget * 10:
        trials = []
        for _ in range(min(spec.search.batch, budget - len(done))):
            trial = study.ask()
            choice = tuple(trial.suggest_categorical(a.name, list(range(len(a.labels)))) for a in plan.axes)
            trials.append((trial, plan.case(plan.index_of(choice))))
            asks += 1
        fresh = list({c.index: c for _, c in trials if c.index not in done}.values())
        run(tasks(plan, sorted(fresh, key=lambda c: c.index), out, keep_runs))
        done.update(c.index for c in fresh)
        means = case_means(plan, list(run.rows.values()))
        for trial, c in trials:
            m = means[c.id]
            value = m["metrics"].get(goal.objective)
            violations = [violation(b, m) for b in bounds]
            if per_trial:
                for b, v in zip(bounds, violations, strict=True):
                    trial.set_constraint(b.text, v)
            else:
                trial.set_user_attr("c", violations)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, float(value))

"""`kubetwin sweep SWEEP.yaml --out DIR [--jobs N | --ray [ADDRESS]]`: run a Sweep's cases, write the results
table, print the answer to its goal, export the winning configuration or emit a Kubernetes Indexed Job."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.cli.output import console as make_console
from kubetwin.cli.output import fail

console = make_console()
err = make_console(stderr=True)


def _fmt(v: Any) -> str:
    from kubetwin.sweep.results import cell

    return cell(round(v, 4) if isinstance(v, float) and v == v and abs(v) != float("inf") else v)


class _Lines:
    """Progress on a log or a pipe: a line at most every few seconds, and the last one."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, done: int, total: int, task: Any, row: dict) -> None:
        now = time.monotonic()
        if done == total or now - self.last >= 5:
            self.last = now
            sys.stderr.write(f"sweep: {done}/{total} cases done\n")
            sys.stderr.flush()


def _print_answer(plan: Any, rows: list[dict]) -> Any:
    from kubetwin.sweep.goals import answer

    ans = answer(plan, rows)
    if ans is None:
        return None
    axes = [a.name for a in plan.axes]
    sense = "minimize" if ans.minimize else "maximize"
    goal = f"{sense} {ans.objective}" + (f" subject to {', '.join(b.label for b in ans.bounds)}" if ans.bounds else "")
    if ans.best is None:
        console.print(f"no feasible case: {goal} ({len(ans.cases)} cases)", highlight=False)
    else:
        b = ans.best
        where = ", ".join(f"{a}={_fmt(b['values'][a])}" for a in axes)
        console.print(f"best feasible case: {b['case']} ({where}): "
                      f"{ans.objective} {_fmt(b['metrics'][ans.objective])}; {goal}; "
                      f"{len(ans.feasible)} of {len(ans.cases)} cases feasible", highlight=False)
        from kubetwin.sweep.goals import by_seed

        t = Table(title=f"{b['case']} seed by seed")
        for head in ("", *(f"seed {s}" for s in b["seed_ids"]), "judged", "holds"):
            t.add_column(head)
        for judged in by_seed(ans, b):
            t.add_row(judged["what"], *(_fmt(v) for v in judged["values"]), _fmt(judged["judged"]),
                      "" if judged["ok"] is None else "yes" if judged["ok"] else "no")
        console.print(t)
    for metric, front in ans.fronts.items():
        t = Table(title=f"Pareto front: {ans.objective} against {metric}")
        for c in ("case", *axes, ans.objective, metric, "feasible"):
            t.add_column(c)
        feasible = {c["case"] for c in ans.feasible}
        for c in front:
            t.add_row(c["case"], *(_fmt(c["values"][a]) for a in axes), _fmt(c["metrics"][ans.objective]),
                      _fmt(c["metrics"][metric]), "yes" if c["case"] in feasible else "no")
        console.print(t)
    return ans


def sweep_cmd(ctx: typer.Context,
              sweep_file: Path = typer.Argument(..., metavar="SWEEP.yaml", help="the Sweep (kubetwin.io/v1alpha1)"),
              out: Optional[Path] = typer.Option(None, "--out", "-o", help="results folder (resumable: a rerun "
                                                 "skips the cases already done)"),
              jobs: int = typer.Option(0, "--jobs", "-j", help="parallel cases (default: one per CPU; 1 runs in "
                                       "this process)"),
              ray: bool = typer.Option(False, "--ray", help="run each case as a Ray task: --ray starts a local Ray "
                                       "on loopback, --ray ADDRESS joins a cluster (needs the ray extra of kubetwin)"),
              keep_runs: bool = typer.Option(False, "--keep-runs/--drop-runs", help="keep each case's run folder "
                                             "(DIR/runs/CASE-sSEED) for kubetwin get/describe/report"),
              export: Optional[Path] = typer.Option(None, "--export", help="write the best feasible case's "
                                                    "manifests and diff.patch against the base here"),
              report: bool = typer.Option(True, "--report/--no-report", help="write DIR/report.html"),
              emit_job: Optional[Path] = typer.Option(None, "--emit-job", help="write a Kubernetes Indexed Job "
                                                      "(with its ConfigMap and PVC) that runs the cases; runs none"),
              image: str = typer.Option("kubetwin:latest", "--image", help="--emit-job: the container image with "
                                        "kubetwin installed"),
              index: Optional[int] = typer.Option(None, "--index", help="run only this case and seed (a completion "
                                                  "index of the emitted Job), then stop"),
              max_cases: Optional[int] = typer.Option(None, "--max-cases", min=1, help="run a sweep of up to N "
                                                      "cases (default 10,000: a bigger one is refused before it "
                                                      "starts; docs/sweep.md)")) -> None:
    """Run a Sweep: the base scenario varied along its axes, each case with each seed; results.csv/.parquet."""
    from kubetwin.sweep import backends, cases, execute

    address: Optional[str] = None
    if ctx.args:  # --ray ADDRESS: click reads the address as an extra argument
        if not ray or len(ctx.args) != 1 or ctx.args[0].startswith("-"):
            err.print(f"error: unexpected argument {ctx.args[0]!r}", highlight=False)
            raise typer.Exit(2)
        address = ctx.args[0]
        if not sweep_file.is_file() and Path(address).is_file():  # kubetwin sweep --ray ADDRESS SWEEP.yaml
            sweep_file, address = Path(address), str(sweep_file)
    try:
        plan = cases.plan(sweep_file, max_cases)
        if emit_job is not None:
            from kubetwin.sweep.emitjob import emit

            written = emit(plan, sweep_file, emit_job, image=image, parallelism=jobs or 4)
            console.print(f"wrote {written}: an Indexed Job of {execute.task_count(plan)} completions "
                          f"(apply with kubectl apply -f {written})", highlight=False)
            return
        if out is None:
            raise KubetwinError([Diagnostic("", 0, "-", "--out", "Required value: the results folder",
                                            "pass --out DIR")])
        if index is not None:
            row = execute.run_index(plan, out, index, keep_runs)
            console.print(f"{row['case']} seed {row['seed']}: " + (f"failed: {row['error']}" if row["error"]
                                                                 else "done"), highlight=False)
            raise typer.Exit(1 if row["error"] else 0)
        jobs = jobs or backends.default_jobs()
        total = execute.task_count(plan)
        from kubetwin.validation.sweep import case_summary

        console.print(f"sweep {plan.sweep.metadata.name}: {case_summary(plan.sweep, len(plan.seeds()))}",
                      highlight=False)
        started = time.monotonic()
        if err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=err, transient=True) as bar:
                bar_task = bar.add_task("sweep", total=total)
                outcome = execute.execute(plan, out, backend="ray" if ray else "process", jobs=jobs,
                                          address=address, keep_runs=keep_runs,
                                          progress=lambda d, t, *_: bar.update(bar_task, completed=d, total=t))
        else:
            outcome = execute.execute(plan, out, backend="ray" if ray else "process", jobs=jobs, address=address,
                                      keep_runs=keep_runs, progress=_Lines())
        elapsed = time.monotonic() - started
        console.print(f"{len(outcome.rows)} cases and seeds: {outcome.ran} run, {outcome.skipped} already done, "
                      f"{len(outcome.failed)} failed, in {elapsed:.1f} s", highlight=False)
        for r in outcome.failed:
            err.print(f"{r['case']} seed {r['seed']}: {r['error']}", markup=False, highlight=False)
        for f in outcome.files:
            console.print(f"results: {f}", highlight=False)
        ans = _print_answer(plan, outcome.rows)
        if report:
            from kubetwin.sweep.report import write_report

            console.print(f"report: {write_report(plan, out, outcome.rows, ans).resolve()}", highlight=False)
        if export is not None:
            from kubetwin.sweep.export import export_case

            if ans is None or ans.best is None:
                raise KubetwinError([Diagnostic(str(sweep_file), plan.manifest.line, plan.manifest.ref,
                                                "spec.goal", "no feasible case to export" if ans is not None else
                                                "Required value: --export needs spec.goal to pick a case",
                                                "relax the constraints or widen the axes" if ans is not None
                                                else "add spec.goal: {minimize: METRIC, subjectTo: [...]}")])
            files = export_case(plan, plan.case(int(ans.best["case"][1:])), export)
            console.print(f"exported {ans.best['case']}: {', '.join(str(f) for f in files)}", highlight=False)
    except KubetwinError as exc:
        fail(exc)
    if outcome.failed:
        raise typer.Exit(1)

"""`kubetwin run | validate | import | get | describe | explain | demo | version | api-resources`: typer + rich, errors
printed without tracebacks."""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.measure import Measurement
from rich.table import Table

from kubetwin.api.errors import KubetwinError
from kubetwin.cli import emulate, experiment
from kubetwin.cli.gateway import gateway as gateway_cmd
from kubetwin.cli.importer import import_cmd
from kubetwin.cli.loadgen import loadgen as loadgen_cmd
from kubetwin.cli.output import console as make_console
from kubetwin.cli.output import fail
from kubetwin.cli.report import report as report_cmd
from kubetwin.cli.simulate import simulate_cmd
from kubetwin.cli.supervise import supervise as supervise_cmd
from kubetwin.cli.sweep import sweep_cmd

if TYPE_CHECKING:
    from kubetwin.runner import RunResult

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="A digital twin of a GKE AI/ML accelerator platform.")
app.add_typer(experiment.app, name="experiment")
app.add_typer(emulate.app, name="emulate")
app.command("gateway")(gateway_cmd)
app.command("report")(report_cmd)
app.command("import")(import_cmd)
app.command("simulate")(simulate_cmd)
app.command("sweep", context_settings={"allow_extra_args": True})(sweep_cmd)
app.command("loadgen")(loadgen_cmd)
app.command("supervise")(supervise_cmd)
console = make_console()
err = make_console(stderr=True)


def _print_summary(summary: dict, out: Path | None, training: dict | None = None) -> None:
    from kubetwin.k8s.units import short_duration
    from kubetwin.report.headline import headline_rows

    t = Table(title=f"kubetwin run — {short_duration(summary['duration_seconds'])} simulated")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in headline_rows(summary, training):
        t.add_row(k, v)
    # a log or a pipe has no width to fit: rows stay whole (on a terminal the table fits the window)
    wide = console if console.is_terminal else make_console(file=sys.stdout, width=Measurement.get(
        console, console.options.update(max_width=1000), t).maximum)
    wide.print(t)
    for n in summary.get("notices", []):
        err.print(n, markup=False, highlight=False)
    if out is not None:
        console.print(f"run folder: {out}")
        from kubetwin.sim.historyfile import HISTORY_FILE, ZSTD_SUFFIX

        compressed = out / (HISTORY_FILE + ZSTD_SUFFIX)
        if compressed.exists():
            console.print(f"history: {compressed} (zstd; read with `zstdcat FILE | jq`; kubetwin get, "
                          "describe, explain and report read it as it is)", highlight=False)
        if (out / "report.html").exists():
            console.print(f"report: {(out / 'report.html').resolve()}")
    else:
        console.print("no run folder written: pass --out DIR to keep summary.json, history.jsonl and events.jsonl "
                      "for kubetwin get/describe/explain", highlight=False)


def _run(paths: list[str], out: Optional[Path], duration: Optional[str], seed: Optional[int],
         overwrite: bool = False, trace_scheduling: bool = False) -> None:
    from kubetwin.cli.progress import ProgressBar, ProgressLines

    # The cyclic GC paused while the runner's modules load: importing them creates tens of thousands of long-lived
    # objects (classes, functions, pydantic and jsonschema tables) that the collector would only rescan, ~40 ms of
    # a run's ~0.55 s of imports (issue 32). The run itself pauses it again while the clock runs (runner.run).
    # A `kubetwin` process that ends after this command (main) keeps it paused: turned back on, its first
    # collection scans every object the run made (0.45 s on a 10,000-pod run) and the interpreter's exit collects
    # again, only to find the history that exiting frees anyway (~9 % of that run's CPU, measured). runner.run turns
    # it back on only where it found it on.
    was = gc.isenabled()
    gc.disable()
    try:
        from kubetwin.runner import run
    finally:
        if was and not _PROCESS_ENDS_AFTER_COMMAND:
            gc.enable()

    def go(progress: Callable[[float, float, Any], None]) -> RunResult:
        try:
            return run(paths, out=out, duration=duration, seed=seed, overwrite=overwrite,
                       trace_scheduling=trace_scheduling, progress=progress, hold_history=False)
        except KubetwinError as exc:
            fail(exc)

    if err.is_terminal:
        with ProgressBar(err) as bar:
            result = go(bar)
    else:  # a log or a pipe: a line every few seconds on stderr
        lines = ProgressLines(sys.stderr)
        result = go(lines)
        lines.finish()
    _print_summary(result.summary, result.out, result.training)
    global _RAN
    _RAN = True


def _end_process(code: int) -> None:
    """End a `kubetwin` process whose run is written and printed, without the interpreter's teardown: exiting would
    tear down every module and collect what is left, for a process that ends anyway (0.37 of a 100-Job churn day's
    6.14 CPU seconds, measured; issue 32). The output streams are flushed and logging shut down first, as exiting
    does; a run starts no child process for multiprocessing's exit hook to join."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


@app.command("run")
def run_cmd(paths: list[str] = typer.Argument(..., help="YAML files or folders"),
            out: Optional[Path] = typer.Option(None, "--out", "-o", help="run folder to write"),
            duration: Optional[str] = typer.Option(None, help="simulated time, e.g. 1d (overrides Scenario)"),
            seed: Optional[int] = typer.Option(None, help="random seed (overrides Scenario)"),
            overwrite: bool = typer.Option(False, "--overwrite", help="replace the run folder --out if it holds "
                                           "a previous run"),
            trace_scheduling: bool = typer.Option(False, "--trace-scheduling", help="record why each pod and "
                                                  "Workload was (not) scheduled, for kubetwin explain pod|workload")
            ) -> None:
    """Apply manifests to a simulated GKE cluster and run the clock."""
    _run(paths, out, duration, seed, overwrite, trace_scheduling)


DEMOS = ("demo", "gpu-sharing", "dra")


@app.command()
def demo(name: str = typer.Argument("demo", help="demo (the default), gpu-sharing or dra"),
         out: Optional[Path] = typer.Option(None, "--out", "-o", help="run folder (default runs/NAME)")) -> None:
    """Run a built-in scenario. demo: L4, A3 (H100) and spot A2 pools, the seed's Job and Pod, a day of jobs;
    gpu-sharing: one inference batch on MIG, time-sharing and MPS A100 pools side by side;
    dra: H100 and A100 pools on the NVIDIA DRA driver, the seed's claim corrected, a prioritized-list template."""
    if name not in DEMOS:
        err.print(f"error: no built-in scenario {name!r}\n    fix: use one of {', '.join(DEMOS)}", highlight=False)
        raise typer.Exit(1)
    out = out or Path("runs") / name
    folder = resources.files("kubetwin").joinpath("scenarios", name)
    with resources.as_file(folder) as path:  # a demo replaces its own previous run folder (make demo reruns it)
        _run([str(path)], out, None, None, overwrite=True)


@app.command("validate")
def validate_cmd(paths: list[str] = typer.Argument(..., help="YAML files or folders"),
                 max_cases: Optional[int] = typer.Option(None, "--max-cases", min=1, help="a Sweep may have up "
                                                         "to N cases (default 10,000, as kubetwin sweep)")) -> None:
    """Check manifests against the real API shapes; exit 1 on any error."""
    from kubetwin.importer import sources as import_sources
    from kubetwin.validation.sweep import case_limit
    from kubetwin.validation.validate import validate

    try:
        manifests, report = import_sources.load(paths)  # a cluster's dump is imported first (docs/import.md)
    except KubetwinError as exc:
        fail(exc)
    with case_limit(max_cases):
        diags = (report.diagnostics() if report is not None else []) + validate(manifests)
    for d in diags:
        (err if d.severity == "error" else console).print(d.render(), markup=False, highlight=False)
    errors = sum(1 for d in diags if d.severity == "error")
    warnings = sum(1 for d in diags if d.severity == "warning")
    shown = f", {warnings} warnings" if warnings else ""
    console.print(f"{len(manifests)} objects, {errors} errors{shown}, {len(diags) - errors - warnings} notices")
    if errors:
        raise typer.Exit(1)


_RUN = typer.Option(..., "--run", help="run folder (the --out of a kubetwin run)")
_AT = typer.Option(None, "--at", help="simulated time: a duration since the start (2h) or an RFC 3339 time")


@app.command(context_settings={"allow_interspersed_args": True})
def get(args: list[str] = typer.Argument(None, help="TYPE[,TYPE...] [NAME...] | TYPE/NAME... | all"),
        namespace: str = typer.Option("default", "--namespace", "-n"),
        all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A"),
        output: Optional[str] = typer.Option(None, "--output", "-o", help="json|yaml|name|wide|jsonpath=...|"
                                             "jsonpath-as-json=...|custom-columns=... (docs/kubectl.md)"),
        selector: Optional[str] = typer.Option(None, "--selector", "-l", help="label selector, e.g. app=x,tier!=db"),
        field_selector: Optional[str] = typer.Option(None, "--field-selector", help="e.g. status.phase=Running"),
        sort_by: Optional[str] = typer.Option(None, "--sort-by", help="JSONPath, e.g. .metadata.creationTimestamp"),
        no_headers: bool = typer.Option(False, "--no-headers"),
        show_labels: bool = typer.Option(False, "--show-labels"),
        label_columns: Optional[list[str]] = typer.Option(None, "--label-columns", "-L",
                                                          help="label keys to show as columns (repeat or comma-"
                                                          "separate: -L app,tier)"),
        watch: bool = typer.Option(False, "--watch", "-w", help="then every change after --at, to the end of the "
                                   "run, as kubectl get -w prints it"),
        watch_only: bool = typer.Option(False, "--watch-only", help="only the changes after --at"),
        output_watch_events: bool = typer.Option(False, "--output-watch-events",
                                                 help="with -w: an EVENT column (ADDED, MODIFIED, DELETED)"),
        run_dir: Path = _RUN, at: Optional[str] = _AT) -> None:
    """Print objects like kubectl get, at any simulated moment of a saved run."""
    from kubetwin.cli.get import GetOptions, get_objects, run

    columns = [key.strip() for value in label_columns or [] for key in value.split(",") if key.strip()]
    opts = GetOptions(namespace, all_namespaces, output, selector, field_selector, sort_by, no_headers, show_labels,
                      at, columns, watch, watch_only, output_watch_events)
    raise typer.Exit(run(get_objects, run_dir, list(args or []), opts))


@app.command()
def describe(args: list[str] = typer.Argument(None, help="TYPE [NAME_PREFIX...] | TYPE/NAME..."),
             namespace: str = typer.Option("default", "--namespace", "-n"),
             selector: Optional[str] = typer.Option(None, "--selector", "-l"),
             run_dir: Path = _RUN, at: Optional[str] = _AT) -> None:
    """Describe objects like kubectl describe, with their Events."""
    from kubetwin.cli.get import describe_objects, run

    raise typer.Exit(run(describe_objects, run_dir, list(args or []), namespace, at, selector))


@app.command()
def version(output: Optional[str] = typer.Option(None, "--output", "-o", help="json | yaml")) -> None:
    """kubetwin's version and the Kubernetes, Kueue, JobSet, ... versions it models."""
    from kubetwin.cli.discovery import version as body
    from kubetwin.cli.get import run

    raise typer.Exit(run(body, output))


@app.command("api-resources")
def api_resources(output: Optional[str] = typer.Option(None, "--output", "-o", help="wide | name | json | yaml"),
                  namespaced: Optional[str] = typer.Option(None, "--namespaced", help="true: only namespaced kinds, "
                                                           "false: only cluster-scoped ones (--namespaced=false)"),
                  api_group: Optional[str] = typer.Option(None, "--api-group"),
                  sort_by: Optional[str] = typer.Option(None, "--sort-by", help="name | kind"),
                  no_headers: bool = typer.Option(False, "--no-headers")) -> None:
    """The kinds the twin knows (api/kinds.py), as kubectl api-resources lists them."""
    from kubetwin.cli.discovery import api_resources as body
    from kubetwin.cli.get import run

    raise typer.Exit(run(body, output, namespaced, api_group, sort_by, no_headers))


@app.command()
def explain(resource: str = typer.Argument(..., help="pod, workload, or job (a training Job or JobSet)"),
            name: str = typer.Argument(...), namespace: str = typer.Option("default", "--namespace", "-n"),
            run_dir: Path = typer.Option(..., "--run", help="run folder"),
            at: Optional[str] = typer.Option(None, "--at", help="pod, workload: attempts up to this simulated "
                                             "time: a duration since the start (2h) or an RFC 3339 time")) -> None:
    """Why: a pod's scheduling attempts per plugin, a Workload's Kueue cycles per flavor (both need a run with
    --trace-scheduling), or where a training job's step time goes and which change helps most."""
    from kubetwin.cli import explain as body

    try:
        sys.stdout.write(body.explain(resource, name, namespace, run_dir, at) + "\n")
    except KubetwinError as exc:
        fail(exc)


# Set by main(), the `kubetwin` executable: the process ends when the command does. Not when the app is invoked
# in-process (tests, a notebook), where the collector must come back on.
_PROCESS_ENDS_AFTER_COMMAND = False
_RAN = False  # a run command finished: main ends the process without the interpreter's teardown (_end_process)


def main() -> None:
    global _PROCESS_ENDS_AFTER_COMMAND
    _PROCESS_ENDS_AFTER_COMMAND = True
    try:
        app()
    except SystemExit as exc:
        if _RAN and not exc.code:
            _end_process(0)
        raise
    except KubetwinError as exc:  # defensive: every command already handles these
        for d in exc.diagnostics:
            err.print(d.render(), markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()

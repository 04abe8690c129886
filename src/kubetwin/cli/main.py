"""`kubetwin run | validate | get | describe | explain | demo`: typer + rich, errors printed without tracebacks."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.units import UnitError, parse_duration
from kubetwin.cli import experiment

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="A digital twin of a GKE AI/ML accelerator platform.")
app.add_typer(experiment.app, name="experiment")
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def _fail(exc: KubetwinError) -> None:
    for d in exc.diagnostics:
        err.print(d.render(), markup=False, highlight=False)
    raise typer.Exit(1)


def _print_summary(summary: dict, out: Path | None) -> None:
    pods = summary["pods"]
    t = Table(title=f"kubetwin run — {summary['duration_seconds'] / 3600:.1f} h simulated")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for phase, n in pods["by_phase"].items():
        t.add_row(f"pods {phase}", str(n))
    t.add_row("pending p50 / p99", f"{pods['pending_seconds']['p50']:.0f}s / {pods['pending_seconds']['p99']:.0f}s")
    for pool, g in summary["gpu_allocation"].items():
        t.add_row(f"GPU allocation {pool}", f"{g['mean_pct']:.1f}%")
    for pool, usd in summary["cost"]["by_pool"].items():
        t.add_row(f"cost {pool}", f"${usd:,.2f}")
    t.add_row("cost total", f"${summary['cost']['total_usd']:,.2f}")
    if summary["cost"].get("spot_usd"):  # Spot VMs: what they cost, how often they went, what work was lost
        t.add_row("cost on-demand / Spot", f"${summary['cost']['on_demand_usd']:,.2f} / "
                  f"${summary['cost']['spot_usd']:,.2f}")
    for pool, n in ((summary.get("spot") or {}).get("preemptions") or {}).items():
        t.add_row(f"Spot preemptions {pool}", str(n))
    if summary.get("wasted_gpu_hours") or summary.get("wasted_tpu_chip_hours"):
        t.add_row("work lost (redone)", f"{summary.get('wasted_gpu_hours', 0):,.2f} GPU-h, "
                  f"{summary.get('wasted_tpu_chip_hours', 0):,.2f} TPU chip-h")
    for pool, g in (summary.get("gpu_sharing") or {}).items():
        if g["gpu_oom_failures"] or (g["slowdown_max"] or 1) > 1:
            t.add_row(f"GPU sharing {pool}", f"slowdown x{g['slowdown_mean'] or 0:.2f}, {g['gpu_oom_failures']} OOM")
    from kubetwin.report.serving_html import serving_rows

    for k, v in serving_rows(summary):
        t.add_row(k, v)
    console.print(t)
    for n in summary.get("notices", []):
        err.print(n, markup=False, highlight=False)
    if out is not None:
        console.print(f"run folder: {out}")
        if (out / "report.html").exists():
            console.print(f"report: {(out / 'report.html').resolve()}")
    else:
        console.print("no run folder written: pass --out DIR to keep summary.json, history.jsonl and events.jsonl "
                      "for kubetwin get/describe/explain", highlight=False)


def _run(paths: list[str], out: Optional[Path], duration: Optional[str], seed: Optional[int],
         overwrite: bool = False, trace_scheduling: bool = False) -> None:
    from kubetwin.runner import run

    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeRemainingColumn(), console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("run", total=1.0)
        try:
            result = run(paths, out=out, duration=duration, seed=seed, overwrite=overwrite,
                         trace_scheduling=trace_scheduling,
                         progress=lambda t, until: bar.update(task, completed=t / until if until else 1))
        except KubetwinError as exc:
            _fail(exc)
    _print_summary(result.summary, result.out)


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
def validate_cmd(paths: list[str] = typer.Argument(..., help="YAML files or folders")) -> None:
    """Check manifests against the real API shapes; exit 1 on any error."""
    from kubetwin.api.loader import load_paths
    from kubetwin.validation.validate import validate

    try:
        manifests = load_paths(paths)
    except KubetwinError as exc:
        _fail(exc)
    diags = validate(manifests)
    for d in diags:
        (err if d.severity == "error" else console).print(d.render(), markup=False, highlight=False)
    errors = sum(1 for d in diags if d.severity == "error")
    warnings = sum(1 for d in diags if d.severity == "warning")
    shown = f", {warnings} warnings" if warnings else ""
    console.print(f"{len(manifests)} objects, {errors} errors{shown}, {len(diags) - errors - warnings} notices")
    if errors:
        raise typer.Exit(1)


def _at(at: Optional[str]) -> Optional[float]:
    if at is None:
        return None
    try:
        return parse_duration(at)
    except UnitError as exc:
        _fail(KubetwinError([Diagnostic("--at", 0, "-", "", str(exc), "e.g. --at 2h")]))
    return None


@app.command()
def get(resource: str, name: Optional[str] = typer.Argument(None), namespace: str = typer.Option(
        "default", "--namespace", "-n"), all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A"),
        output: Optional[str] = typer.Option(None, "--output", "-o", help="wide | yaml | json"),
        run_dir: Path = typer.Option(..., "--run", help="run folder"),
        at: Optional[str] = typer.Option(None, "--at", help="simulated time, e.g. 2h")) -> None:
    """Print objects like kubectl get, at any simulated moment of a saved run."""
    from kubetwin.api.kinds import is_cluster_scoped
    from kubetwin.cli.printers import render_table, table
    from kubetwin.report.rundir import kind_of, state_at

    try:
        kind = kind_of(resource)
        objs, t, meta = state_at(run_dir, _at(at))
    except KubetwinError as exc:
        _fail(exc)
    items = [o for (k, ns, n), o in sorted(objs.items()) if k == kind
             and (all_namespaces or is_cluster_scoped(kind) or ns == namespace) and (name is None or n == name)]
    if name is not None and not items:
        err.print(f'Error from server (NotFound): {resource} "{name}" not found')
        raise typer.Exit(1)
    if output in ("json", "yaml"):
        doc = items[0] if name else {"apiVersion": "v1", "kind": "List", "items": items,
                                     "metadata": {"resourceVersion": ""}}
        if output == "json":
            sys.stdout.write(json.dumps(doc, indent=4, sort_keys=True) + "\n")
        else:
            import yaml

            sys.stdout.write(yaml.safe_dump(doc, sort_keys=True))
        return
    now = datetime.fromisoformat(meta["startTime"].replace("Z", "+00:00")) + timedelta(seconds=t)
    if not items:
        err.print(f"No resources found in {namespace} namespace." if not is_cluster_scoped(kind)
                  else "No resources found")
        return
    rows = table(kind, items, now, output == "wide")
    if all_namespaces and not is_cluster_scoped(kind):
        rows = [["NAMESPACE", *rows[0]]] + [[o["metadata"].get("namespace", ""), *r] for o, r in zip(
            sorted(items, key=lambda e: (e["lastTimestamp"], e["metadata"]["name"])) if kind == "Event" else items,
            rows[1:], strict=True)]
    sys.stdout.write(render_table(rows) + "\n")


@app.command()
def describe(resource: str, name: str, namespace: str = typer.Option("default", "--namespace", "-n"),
             run_dir: Path = typer.Option(..., "--run", help="run folder"),
             at: Optional[str] = typer.Option(None, "--at")) -> None:
    """Describe one object like kubectl describe, with its Events."""
    from kubetwin.api.kinds import is_cluster_scoped
    from kubetwin.cli.printers import describe as render
    from kubetwin.report.rundir import kind_of, state_at

    try:
        kind = kind_of(resource)
        objs, t, meta = state_at(run_dir, _at(at))
    except KubetwinError as exc:
        _fail(exc)
    ns = "" if is_cluster_scoped(kind) else namespace
    obj = objs.get((kind, ns, name))
    if obj is None:
        err.print(f'Error from server (NotFound): {resource} "{name}" not found')
        raise typer.Exit(1)
    events = [o for (k, _, _), o in objs.items() if k == "Event" and o["involvedObject"]["kind"] == kind
              and o["involvedObject"]["name"] == name and (o["involvedObject"].get("namespace") or "") == ns]
    now = datetime.fromisoformat(meta["startTime"].replace("Z", "+00:00")) + timedelta(seconds=t)
    pods = [o for (k, _, _), o in objs.items() if k == "Pod" and kind == "Node"
            and (o.get("spec") or {}).get("nodeName") == name]
    sys.stdout.write(render(obj, events, now, pods) + "\n")


@app.command()
def explain(resource: str = typer.Argument(..., help="pod, workload, or job (a training Job or JobSet)"),
            name: str = typer.Argument(...), namespace: str = typer.Option("default", "--namespace", "-n"),
            run_dir: Path = typer.Option(..., "--run", help="run folder"),
            at: Optional[str] = typer.Option(None, "--at", help="pod, workload: attempts up to this simulated "
                                             "time, e.g. 2h")) -> None:
    """Why: a pod's scheduling attempts per plugin, a Workload's Kueue cycles per flavor (both need a run with
    --trace-scheduling), or where a training job's step time goes and which change helps most."""
    from kubetwin.cli import explain as body

    try:
        sys.stdout.write(body.explain(resource, name, namespace, run_dir, _at(at)) + "\n")
    except KubetwinError as exc:
        _fail(exc)


def main() -> None:
    try:
        app()
    except KubetwinError as exc:  # defensive: every command already handles these
        for d in exc.diagnostics:
            err.print(d.render(), markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()

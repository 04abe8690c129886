"""`kubetwin simulate -f job.yaml --from SNAPSHOT`: when the incoming workload would start, where, when it would end,
what it would cost and why it would wait, on a cluster's state (kubetwin.simulate; docs/import.md)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from kubetwin.api.errors import KubetwinError
from kubetwin.cli.output import console as make_console
from kubetwin.cli.output import fail

console = make_console()


def _t(seconds: float | None) -> str:
    from kubetwin.k8s.units import short_duration

    return "-" if seconds is None else short_duration(seconds)


def simulate_cmd(files: list[str] = typer.Option(..., "--filename", "-f", help="the workload(s) to submit"),
                 sources: list[str] = typer.Option([], "--from", help="the cluster's state: kubectl dumps, the "
                                                   "simulator's export, kwokctl snapshots or manifests"),
                 duration: str = typer.Option("24h", "--duration", help="how long to look ahead"),
                 runs: int = typer.Option(1, "--runs", min=1, max=1000, help="runs over seeds 0..N-1: the start's "
                                          "P10 / P50 / P90"),
                 output: Optional[str] = typer.Option(None, "--output", "-o", help="json"),
                 runtime: list[str] = typer.Option([], "--runtime", help="OWNER=DIST: the run time of OWNER's pods "
                                                   "(job/NAME, ns/job/train-*, '*'...), drawn again each run: "
                                                   "fixed:1h, exp:mean=30m, lognormal:median=2h,sigma=0.5, "
                                                   "uniform:min=10m,max=1h, empirical:FILE; first match wins"),
                 snapshot_time: Optional[str] = typer.Option(None, "--snapshot-time", help="t=0, RFC 3339 "
                                                             "(default: the latest time the dump records)")
                 ) -> None:
    """When would this start, where, when would it end, what would it cost, and why would it wait?"""
    from kubetwin.simulate import simulate

    if output not in (None, "json"):
        console.print(f'error: unable to match a printer suitable for the output format "{output}", the formats '
                      "are: json", markup=False)
        raise typer.Exit(1)
    try:
        answer = simulate(files, sources, duration, runs, runtime=runtime, snapshot_time=snapshot_time)
    except KubetwinError as exc:
        fail(exc)
    if output == "json":
        print(json.dumps(answer.as_dict(), sort_keys=True, indent=1))
        return
    first = answer.runs[0]
    console.print(f"kubetwin simulate: {_t(answer.duration_s)} ahead, seed {answer.seeds[0]}", markup=False)
    for o in first:  # one block a workload: its reason for waiting is a sentence, too long for a table cell
        admitted = ("-" if o.admitted is None else
                    f"{_t(o.admitted)} by {o.cluster_queue or '-'} (flavors: {', '.join(o.flavors) or '-'})")
        started = "-" if o.started is None else (
            f"{_t(o.started)} on {len(o.nodes)} node{'s' if len(o.nodes) != 1 else ''} "
            f"({', '.join(o.node_pools) or 'no pool'})")
        lines = [f"{o.kind}/{o.namespace}/{o.name}", f"  admitted  {admitted}", f"  started   {started}",
                 f"  finished  {_t(o.finished)}", f"  cost      ${o.cost_usd:,.2f}"]
        if o.waited_because:
            lines.append(f"  waited    {o.waited_because}")
        console.print("\n".join(lines), markup=False, highlight=False)
    if len(answer.runs) > 1:
        for row in answer.start_percentiles():
            spread = (f"P10 {_t(row['p10'])}, P50 {_t(row['p50'])}, P90 {_t(row['p90'])}" if "p50" in row else
                      f"did not start within {_t(answer.duration_s)} in {row['runs'] - row['started_in_runs']} "
                      f"of {row['runs']} runs")
            console.print(f"{row['workload']} starts: {spread} ({row['runs']} runs)", markup=False)

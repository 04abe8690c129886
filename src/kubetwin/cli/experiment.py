"""`kubetwin experiment ...`: published studies re-run with the twin's policies."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.cli.output import console as make_console

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Re-run published experiments.")
err = make_console(stderr=True)

if TYPE_CHECKING:
    from kubetwin.devices.gpushare import FragTable


_nodes: list = []  # a worker process's copy of the node list, read once
_pods: dict[str, list] = {}  # and of each pod list it has run, read once (forked workers inherit the parent's)
_table: dict[str, FragTable] = {}  # the fragment table of the pod list it runs now, shared by its runs there


def _load(nodes_csv: str, pods_csvs: tuple[str, ...] = ()) -> None:
    from kubetwin.experiments import openb

    global _nodes
    _nodes = openb.load_nodes(nodes_csv)
    _pods.clear()
    for path in pods_csvs:
        _pods[path] = openb.load_pods(path)


def _worker(nodes_csv: str) -> None:
    """Pool initializer: a forked worker has the parent's lists already; a spawned one reads the nodes."""
    if not _nodes:
        _load(nodes_csv)


def _one(task: tuple[str, int, float, tuple[str, ...]]) -> list[list[dict]]:
    """Every policy on one pod list and seed (one pod sequence); the pod list's fragment table is kept while
    the worker's tasks stay on that list, so one-node fragments are computed once for all of them."""
    from kubetwin.experiments import fgd, openb

    pods_csv, seed, inflate, policies = task
    if pods_csv not in _pods:
        _pods[pods_csv] = openb.load_pods(pods_csv)
    pods = _pods[pods_csv]
    if pods_csv not in _table:
        _table.clear()
        _table[pods_csv] = fgd.fragment_table(_nodes, [fgd.shape_of(p) for p in pods])
    return fgd.experiments(_nodes, pods, policies, seed, inflate, _table[pods_csv])


def _pod_lists(pods: list[Path], pods_dir: Path | None, workload: list[str]) -> list[Path]:
    """--pods files as given, then --pods-dir's openb_pod_list_*.csv (by name, or the --workload names;
    `paper` names the 17 of the FGD paper's figures)."""
    from kubetwin.experiments import fgd

    files = list(pods)
    if pods_dir is not None:
        if not pods_dir.is_dir():
            raise KubetwinError([Diagnostic(str(pods_dir), 0, "experiment fgd", "--pods-dir", "no such directory",
                                            "give the folder of the openb CSVs, e.g. ../shared/traces/openb")])
        names = [n for w in workload for n in (fgd.PAPER_WORKLOADS if w == "paper" else (w,))]
        if names:
            files += [pods_dir / f"{fgd.POD_LIST_PREFIX}{n}.csv" for n in dict.fromkeys(names)]
        else:
            files += sorted(pods_dir.glob(f"{fgd.POD_LIST_PREFIX}*.csv"))
    elif workload:
        raise KubetwinError([Diagnostic("--workload", 0, "experiment fgd", "", "--workload needs --pods-dir",
                                        "give --pods-dir DIR, or the pod lists themselves with --pods")])
    if not files:
        raise KubetwinError([Diagnostic("--pods", 0, "experiment fgd", "", "no pod list given",
                                        "give --pods FILE (repeatable) or --pods-dir DIR")])
    return list(dict.fromkeys(files))


@app.command("fgd")
def fgd_cmd(nodes: Path = typer.Option(..., "--nodes", help="openb node list CSV (GPU nodes are used)"),
            pods: list[Path] = typer.Option([], "--pods", help="openb pod list CSV; repeat for several workloads"),
            pods_dir: Path | None = typer.Option(None, "--pods-dir", help="folder of openb_pod_list_*.csv: "
                                                 "every one, or those named by --workload"),
            workload: list[str] = typer.Option([], "--workload", help="with --pods-dir: a pod list's name "
                                               "(default, cpu050, gpushare40, ...) or paper (the 17 of the "
                                               "paper's figures); repeat for several"),
            policy: list[str] = typer.Option(..., "--policy", help="Random, DotProd, GpuClustering, GpuPacking, "
                                             "BestFit, FGD or all; repeat for several"),
            seed: list[int] = typer.Option([42], "--seed", help="repeat for several (the paper: 42..51)"),
            inflate: float = typer.Option(1.3, "--inflate", help="GPU demand as a multiple of GPU capacity"),
            out: Path = typer.Option(..., "--out", "-o", help="CSV to write"),
            jobs: int = typer.Option(0, "--jobs", "-j", help="parallel runs (default: one per CPU)")) -> None:
    """FGD paper protocol on Alibaba's openb trace: allocation and fragmentation as GPU demand arrives.

    With several pod lists the CSV starts with a `workload` column (the pod list's name, as the paper's
    analysis files name it); rows come in the order workload, policy, seed whatever --jobs is."""
    from kubetwin.experiments import fgd
    from kubetwin.scheduler.gpu_policies import POLICIES

    try:
        policies = list(POLICIES) if "all" in policy else policy
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise KubetwinError([Diagnostic("--policy", 0, "experiment fgd", "", f"unknown policy {unknown[0]!r}",
                                            f"use one of {', '.join(POLICIES)} or all")])
        if not 1.0 <= inflate <= 3.0:
            raise KubetwinError([Diagnostic("--inflate", 0, "experiment fgd", "", f"{inflate} is out of range",
                                            "give a ratio from 1.0 to 3.0 (the paper uses 1.3)")])
        files = [str(f) for f in _pod_lists(pods, pods_dir, workload)]
        _load(str(nodes), tuple(files))  # bad input fails here, before any run starts
    except KubetwinError as exc:
        for d in exc.diagnostics:
            err.print(d.render(), markup=False, highlight=False)
        raise typer.Exit(1) from None
    # one task per pod list and seed, the longest first (pods to place: the list's size over its GPU share of the
    # inflated capacity), a list's seeds together so that a worker keeps the list's fragment table
    size = {f: fgd.placements(_nodes, _pods[f], inflate) for f in files}
    tasks = sorted(((f, s, inflate, tuple(policies)) for f in files for s in seed), key=lambda t: -size[t[0]])
    workers = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    done: dict[tuple[str, int], list[list[dict]]] = {}
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(Progress(TextColumn("fgd runs"), BarColumn(), MofNCompleteColumn(),
                                           TimeElapsedColumn(), console=err, transient=True,
                                           disable=not err.is_terminal))
        task = bar.add_task("runs", total=len(tasks) * len(policies))
        if workers > 1:  # forked workers inherit the lists read above; spawned ones read each when first run
            pool = stack.enter_context(ProcessPoolExecutor(workers, initializer=_worker, initargs=(str(nodes),)))
            results = pool.map(_one, tasks)
        else:
            results = map(_one, tasks)
        for t, res in zip(tasks, results, strict=True):
            done[t[0], t[1]] = res
            bar.advance(task, len(policies))
    rows: list[dict] = []
    for f in files:  # workload, policy, seed order whatever --jobs is
        name = fgd.workload_name(f)
        for i, _ in enumerate(policies):
            for s in seed:
                rows.extend({"workload": name, **r} if len(files) > 1 else r for r in done[f, s][i])
    fgd.write_csv(rows, out, workloads=len(files) > 1)
    err.print(f"wrote {out} ({len(tasks) * len(policies)} runs, {len(rows)} rows)", highlight=False)


@app.command("openb-manifests")
def openb_manifests_cmd(nodes: Path = typer.Option(..., "--nodes", help="openb node list CSV"),
                        pods: Path = typer.Option(..., "--pods", help="openb pod list CSV (with creation times)"),
                        policy: str = typer.Option("", "--policy", help="GPU placement policy for the scenario "
                                                   "(Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD); "
                                                   "empty: kube-scheduler's default scoring"),
                        limit: int = typer.Option(0, "--limit", help="only the first N pods by creation time"),
                        out: Path = typer.Option(..., "--out", "-o", help="folder to write; then kubetwin run it")
                        ) -> None:
    """The openb trace as a time-driven scenario: Node objects and pods with their creation times and run times."""
    import yaml

    from kubetwin.experiments import openb, openb_replay
    from kubetwin.scheduler.gpu_policies import POLICIES

    try:
        if policy and policy not in POLICIES:
            raise KubetwinError([Diagnostic("--policy", 0, "experiment openb-manifests", "",
                                            f"unknown policy {policy!r}", f"use one of {', '.join(POLICIES)}")])
        objs = openb_replay.to_objects(openb.load_nodes(nodes), openb.load_pods(pods), policy or None, limit or None)
    except KubetwinError as exc:
        for d in exc.diagnostics:
            err.print(d.render(), markup=False, highlight=False)
        raise typer.Exit(1) from None
    out.mkdir(parents=True, exist_ok=True)
    kinds = {"cluster.yaml": ("Scenario", "Node"), "pods.yaml": ("Pod",)}
    for name, wanted in kinds.items():
        docs = [o for o in objs if o["kind"] in wanted]
        (out / name).write_text(yaml.safe_dump_all(docs, sort_keys=False))
    err.print(f"wrote {out}/cluster.yaml and {out}/pods.yaml ({len(objs) - 1} objects); run: kubetwin run {out}",
              highlight=False)


@app.command("kueue-perf")
def kueue_perf_cmd(config: str = typer.Option("baseline", "--config", help="a Kueue scheduler performance "
                                              "generator config (test/performance/scheduler/configs/*/"
                                              "generator.yaml), or a shipped one: baseline, large-scale, "
                                              "large-scale-2000"),
                   out: Path | None = typer.Option(None, "--out", "-o", help="run folder to write (optional)"),
                   manifests: Path | None = typer.Option(None, "--manifests", help="only write the scenario "
                                                         "(one YAML file) and stop; then kubetwin run it"),
                   duration: str = typer.Option("2h", "--duration", help="simulated time to run at most"),
                   feature_gates: list[str] = typer.Option([], "--feature-gate", help="a Kueue feature gate for "
                                                           "the run, NAME=true|false (repeatable), e.g. "
                                                           "SchedulingEquivalenceHashing=false")) -> None:
    """Kueue's scheduler performance test through the twin: its generator's objects, minimalkueue's client
    (QPS 50 / Burst 100), its runner finishing Workloads, its recorder's numbers next to Kueue's published ones."""
    import time

    import yaml

    from kubetwin import runner
    from kubetwin.experiments import kueue_perf

    gates: dict[str, bool] = {}
    for gate in feature_gates:
        name, _, value = gate.partition("=")
        if value.lower() not in ("true", "false"):
            err.print(f"error: --feature-gate {gate!r}: write NAME=true or NAME=false", highlight=False)
            raise typer.Exit(1)
        gates[name] = value.lower() == "true"
    path, published = kueue_perf.resolve(config, gates)
    try:
        objs = kueue_perf.to_objects(kueue_perf.load_config(path), duration=duration, feature_gates=gates)
    except (OSError, ValueError) as exc:
        err.print(f"error: {exc}", highlight=False)
        raise typer.Exit(1) from None
    if manifests is not None:
        manifests.parent.mkdir(parents=True, exist_ok=True)
        manifests.write_text(yaml.safe_dump_all(objs, sort_keys=False))
        err.print(f"wrote {manifests} ({len(objs)} objects); run: kubetwin run {manifests}", highlight=False)
        return
    start = time.perf_counter()
    try:
        result = runner.run(objects=objs, out=out)
    except KubetwinError as exc:
        for d in exc.diagnostics:
            err.print(d.render(), markup=False, highlight=False)
        raise typer.Exit(1) from None
    wall = time.perf_counter() - start
    summary = kueue_perf.record(result.history)
    width = max(len(r[0]) for r in kueue_perf.table(summary, published, wall))
    print(f"{'':{width}}  {'twin':>10}  {'Kueue':>10}")
    for name, twin, kueue, diff in kueue_perf.table(summary, published, wall):
        print(f"{name:{width}}  {twin:>10}  {kueue:>10}  {diff}".rstrip())

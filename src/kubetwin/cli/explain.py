"""`kubetwin explain pod|workload NAME --run DIR`: why, per plugin and per flavor, from a run's scheduling trace.

`explain pod` prints, per scheduling attempt, what kube-scheduler-simulator shows in its result annotations
(kubernetes-sigs/kube-scheduler-simulator simulator/scheduler/plugin: filter-result, score-result,
finalscore-result, postfilter-result, selected-node): every node's result per Filter plugin, the Score table (raw,
normalized and weighted per plugin, and the total), the chosen node or the FailedScheduling message, and the
preemption candidates with their victims. `explain workload` prints, per Kueue cycle, each pod set's flavors
tried with why (kueue pkg/scheduler/flavorassigner), the assignment mode, the preemption targets and their
reasons. Both read scheduling-trace.jsonl, which only `kubetwin run --trace-scheduling` writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.cli.output import table_text
from kubetwin.report.rundir import history_file, run_meta, seconds_at
from kubetwin.sim.historyfile import open_history
from kubetwin.sim.trace import FILE, read

MAX_NODE_ROWS = 30  # more nodes than this: nodes with the same results share a row


def load(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    """The trace's records of one kind ("Pod" or "Workload"); an error that says how to get a trace."""
    path = run_dir / FILE
    if not path.is_file():
        run_meta(run_dir)  # not a run folder at all: that error first
        raise KubetwinError([Diagnostic(str(run_dir), 0, "-", "", f"the run folder has no {FILE}: this run did not "
                                        "record its scheduling decisions",
                                        "re-run with `kubetwin run --trace-scheduling` (or set "
                                        "Scenario.spec.traceScheduling: true)")])
    return [r for r in read(path) if r["kind"] == kind]


def _seconds(run_dir: Path, at: str | None) -> float | None:
    return None if at is None else seconds_at(run_meta(run_dir), at)


def _not_found(run_dir: Path, resource: str, name: str) -> KubetwinError:
    return KubetwinError([Diagnostic(str(run_dir / FILE), 0, "-", "", f'{resource} "{name}" has no scheduling '
                                     "attempts in the trace (up to --at)",
                                     "check the name and -n NAMESPACE (kubetwin get)")])


def _clock(t: float) -> str:
    s = int(t)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


# -- pods ---------------------------------------------------------------------------------------------------------
def pod_attempts(run_dir: Path, name: str, namespace: str = "default", at: float | None = None
                 ) -> list[dict[str, Any]]:
    """The pod's attempts at or before `at` (all when None)."""
    key = f"{namespace}/{name}"
    found = [r for r in load(run_dir, "Pod") if r["pod"] == key and (at is None or r["t"] <= at)]
    if not found:
        raise _not_found(run_dir, "pod", key)
    return found


def _cell(v: dict[str, Any] | None) -> str:
    if v is None:
        return "-"
    return v.get("status") or ", ".join(v["reasons"])


def _rows(groups: list[dict[str, Any]], cells: Callable[[dict[str, Any]], list[str]]) -> list[list[str]]:
    """One row per node, or per group of nodes with the same results when there are many nodes."""
    if sum(len(g["nodes"]) for g in groups) <= MAX_NODE_ROWS:
        return [[node, *cells(g)] for g in groups for node in g["nodes"]]
    return [[f"{len(g['nodes'])} nodes: {', '.join(g['nodes'][:3])}{', ...' if len(g['nodes']) > 3 else ''}"
             if len(g["nodes"]) > 1 else g["nodes"][0], *cells(g)] for g in groups]


def _filter_rows(attempt: dict[str, Any]) -> list[list[str]]:
    plugins: list[str] = []
    for entry in attempt["filter"]:
        for v in entry["filter"]:
            if v["plugin"] not in plugins:
                plugins.append(v["plugin"])

    def cells(g: dict[str, Any]) -> list[str]:
        by = {v["plugin"]: v for v in g["filter"]}
        return [_cell(by.get(p)) for p in plugins]

    return [["NODE", *(p.upper() for p in plugins)], *_rows(attempt["filter"], cells)]


def render_attempt(a: dict[str, Any], number: int, of: int) -> str:
    """One attempt, numbered among the pod's own (`number` of `of`); the scheduler's cycle counter in brackets."""
    lines = [f"Attempt {number} of {of} at {_clock(a['t'])} (t={a['t']:g}s, scheduling cycle {a['attempt']}): "
             f"{a['numNodes']} nodes, numFeasibleNodesToFind {a['numFeasibleNodesToFind']}"]
    for plugin, msg in a["preFilter"].items():
        lines.append(f"  PreFilter {plugin}: {msg}")
    if a["filter"]:
        lines.append("  Filter:")
        lines += ["    " + line for line in table_text(_filter_rows(a)).splitlines()]
    if a["score"]:
        plugins = [s["plugin"] for s in a["score"][0]["scores"]]
        rows = [["NODE", *(p.upper() for p in plugins), "TOTAL"],
                *_rows(a["score"], lambda g: [*(f"{s['raw']} -> {s['weighted']}" for s in g["scores"]),
                                              str(g["total"])])]
        lines.append("  Score (raw -> normalized x weight):")
        lines += ["    " + line for line in table_text(rows).splitlines()]
    if a["selectedNode"]:
        by = f" (chosen by {a['selectedBy']})" if a["selectedBy"] else ""
        lines.append(f"  Selected node: {a['selectedNode']}{by}")
        if "bindingAt" in a:  # the binding cycle's Binding waited for a token of kube-scheduler's client
            lines.append(f"  Binding written at {_clock(a['bindingAt'])} (t={a['bindingAt']:g}s): it waited "
                         f"{a['bindingAt'] - a['t']:g} s for a token of kube-scheduler's API client "
                         "(summary.json scheduler_api_client)")
    else:
        lines.append(f"  FailedScheduling: {a['message']}")
    post = a["postFilter"]
    if post.get("candidates") or post.get("nominatedNode"):
        lines.append("  PostFilter DefaultPreemption candidates:")
        for c in post["candidates"]:
            victims = ", ".join(c["victims"]) if c["victims"] is not None else "none: evicting every lower-priority " \
                "pod would not make room"
            lines.append(f"    {c['node']}: victims {victims}")
        if post.get("nominatedNode"):
            lines.append(f"  Nominated node: {post['nominatedNode']}")
    return "\n".join(lines)


_SAME = ("preFilter", "filter", "score", "selectedNode", "postFilter", "message")


def explain_pod(run_dir: Path, name: str, namespace: str = "default", at: float | None = None) -> str:
    """Every attempt up to `at`; a run of attempts with the same result as the one before prints as one line."""
    attempts = pod_attempts(run_dir, name, namespace, at)
    parts = [f"Pod {namespace}/{name}: {len(attempts)} scheduling attempt(s)"]
    last: tuple | None = None
    repeats: list[dict[str, Any]] = []
    for number, a in enumerate([*attempts, None], start=1):
        same = a is not None and tuple(json.dumps(a[k], sort_keys=True) for k in _SAME)
        if a is not None and same == last:
            repeats.append(a)
            continue
        if repeats:
            first = number - len(repeats)
            which = f"attempt {first}" if len(repeats) == 1 else f"attempts {first}-{number - 1}"
            parts.append(f"... {len(repeats)} more attempt(s) with the same result ({which}), the last at "
                         f"{_clock(repeats[-1]['t'])} (t={repeats[-1]['t']:g}s)")
            repeats = []
        if a is not None:
            parts.append(render_attempt(a, number, len(attempts)))
            last = same
    return "\n\n".join(parts)


# -- workloads ----------------------------------------------------------------------------------------------------
def workload_keys(run_dir: Path, name: str, namespace: str) -> list[str]:
    """The Workloads named NAME, or owned by an object (a Job, JobSet...) named NAME, in the namespace."""
    keys: dict[str, None] = {}
    with open_history(history_file(run_dir)) as source:
        for line in source.lines():
            if b'"Workload"' not in line:
                continue
            o = json.loads(line)["object"]
            meta = o["metadata"]
            if o["kind"] != "Workload" or meta.get("namespace") != namespace:
                continue
            if meta["name"] == name or any(r.get("name") == name for r in meta.get("ownerReferences") or ()):
                keys[f"{namespace}/{meta['name']}"] = None
    return list(keys)


def workload_cycles(run_dir: Path, name: str, namespace: str = "default", at: float | None = None
                    ) -> list[dict[str, Any]]:
    """The Workload's records (a head in a Kueue cycle) at or before `at`."""
    records = load(run_dir, "Workload")
    keys = set(workload_keys(run_dir, name, namespace)) or {f"{namespace}/{name}"}
    found = [r for r in records if r["workload"] in keys and (at is None or r["t"] <= at)]
    if not found:
        raise _not_found(run_dir, "workload", f"{namespace}/{name}")
    return found


def podset_message(ps: dict[str, Any]) -> str:
    """One pod set's part of the Pending message: its error, or its reasons sorted (Status.Message)."""
    if ps["error"]:
        return f"failed to assign flavors to pod set {ps['name']}: {ps['error']}"
    return f"couldn't assign flavors to pod set {ps['name']}: {', '.join(ps['reasons'])}"


def render_cycle(r: dict[str, Any], number: int, of: int) -> str:
    """One cycle the Workload headed, numbered among its own (`number` of `of`); Kueue's cycle counter beside."""
    lines = [f"Cycle {number} of {of} at {_clock(r['t'])} (t={r['t']:g}s, Kueue cycle {r['cycle']}), ClusterQueue "
             f"{r['clusterQueue']}: "
             f"mode {r['mode'] or '-'}{', borrowing level ' + str(r['borrowing']) if r['borrowing'] else ''} -> "
             f"{r['outcome']} ({r['reason']})"]
    for ps in r["podSets"]:
        req = ", ".join(f"{k}: {v}" for k, v in ps["requests"].items())
        lines.append(f"  pod set {ps['name']} x{ps['count']} ({req})")
        for res, fa in ps["flavors"].items():
            borrow = f", borrow {fa['borrow']}" if fa["borrow"] else ""
            lines.append(f"    {res}: flavor {fa['flavor']} ({fa['mode']}{borrow})")
        rows = [["FLAVOR", "MODE", "BORROW", "PREEMPTION", "WHY"]]
        for att in ps["attempts"]:
            rows.append([att["flavor"], att["mode"], str(att["borrow"]), att["preemptionMode"] or "-",
                         "; ".join(att["reasons"]) or "-"])
        if len(rows) > 1:
            lines.append("    flavors tried:")
            lines += ["      " + line for line in table_text(rows).splitlines()]
        if ps["reasons"] or ps["error"]:
            lines.append(f"    {podset_message(ps)}")
    if r["targets"]:
        lines.append("  preemption targets:")
        lines += [f"    {t['workload']} (ClusterQueue {t['clusterQueue']}): {t['reason']}" for t in r["targets"]]
    if r["message"]:
        lines.append(f"  message: {r['message']}")
    return "\n".join(lines)


def explain_workload(run_dir: Path, name: str, namespace: str = "default", at: float | None = None) -> str:
    cycles = workload_cycles(run_dir, name, namespace, at)
    keys = sorted({r["workload"] for r in cycles})
    head = f"Workload {', '.join(keys)}: {len(cycles)} scheduling cycle(s) as a head"
    return "\n\n".join([head, *(render_cycle(r, i, len(cycles)) for i, r in enumerate(cycles, start=1))])


def explain(resource: str, name: str, namespace: str, run_dir: Path, at: str | None) -> str:
    """`kubetwin explain RESOURCE NAME`: pod, workload (Kueue), or job (training, workloads/training_explain.py);
    `at` as `get --at` reads it (a duration since the start or an RFC 3339 time, report.rundir.seconds_at)."""
    kind = resource.lower()
    if kind in ("pod", "pods", "po"):
        return explain_pod(run_dir, name, namespace, _seconds(run_dir, at))
    if kind in ("workload", "workloads", "wl"):
        return explain_workload(run_dir, name, namespace, _seconds(run_dir, at))
    from kubetwin.workloads.training_explain import JOB_RESOURCES, render
    from kubetwin.workloads.training_explain import load as load_training

    if kind not in JOB_RESOURCES:
        raise KubetwinError([Diagnostic(resource, 0, "-", "", f'cannot explain "{resource}"',
                                        "use: kubetwin explain pod|workload|job NAME --run DIR")])
    return render(load_training(run_dir, resource, name, namespace))

"""One scheduling attempt as kube-scheduler-simulator shows it: per node, each Filter plugin's result ("passed" or
its reasons) in the profile's order up to the first that rejects; per feasible node, each Score plugin's raw,
normalized and weighted score and the total; the PostFilter's candidates with their victims; the chosen node or
the FailedScheduling message.

The verdicts are computed the clear way, one node at a time with the scalar plugins of plugins.py, not read from
the node table's vectors and per-shape caches that decided the attempt: tests/test_scheduling_trace.py holds that
both agree (the feasible nodes, the chosen node, the FitError counts). The plugins that run per row after the scan
(DynamicResources, the GPU placement policy) and InterPodAffinity's mask report their per-node verdicts through
CycleState.traced while tracing. Model: kubernetes-sigs/kube-scheduler-simulator's result annotations
(simulator/scheduler/plugin/resultstore: kube-scheduler-simulator.sigs.k8s.io/filter-result, score-result,
finalscore-result, postfilter-result, selected-node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.fiterror import FIT
from kubetwin.scheduler.framework import CycleState
from kubetwin.scheduler.nodeinfo import NodeInfo

if TYPE_CHECKING:
    from kubetwin.scheduler.scheduler import Scheduler

PASSED = "passed"
BALANCED = "NodeResourcesBalancedAllocation"


def filter_verdicts(sched: Scheduler, state: CycleState, rows: np.ndarray, override: dict[int, list[str]]
                    ) -> list[dict[str, Any]]:
    """Per node of `rows` (scan order): [{plugin, status: passed} | {plugin, reasons}] up to the first rejection,
    as the framework's RunFilterPlugins stops there. Nodes with the same results share one entry ({nodes, filter},
    in order of first appearance): a large cluster's nodes mostly agree, and the file stays readable."""
    out: dict[str, dict[str, Any]] = {}
    others = [p.name for p in sched.points["pre_filter"] + sched.points["filter_rows"]
              if p.name in (state.traced or {})]
    others = list(dict.fromkeys(others))
    for r in rows.tolist():
        ni = state.table.infos[r]
        if ni is None:
            continue
        results: list[dict[str, Any]] = []
        reasons: list[str] = []
        for plugin in sched.profile.filters:
            code, reasons = plugin.check(state.pi, ni)
            results.append(_verdict(plugin.name, reasons if code != P.SUCCESS else []))
            if code != P.SUCCESS:
                break
        else:
            reasons = override[r] if r in override else P.node_resources_fit(state.pi, ni)[1]
            results.append(_verdict(FIT, reasons))
            for name in others if not reasons else ():
                why = (state.traced or {})[name].get(ni.name)
                if why is None:  # the scan stopped before this node (numFeasibleNodesToFind reached)
                    break
                results.append(_verdict(name, [] if why == PASSED else [why]))
                if why != PASSED:
                    break
        key = repr(results)
        group = out.get(key)
        if group is None:
            group = out[key] = {"nodes": [], "filter": results}
        group["nodes"].append(ni.name)
    return list(out.values())


def _verdict(plugin: str, reasons: list[str]) -> dict[str, Any]:
    return {"plugin": plugin, "reasons": list(reasons)} if reasons else {"plugin": plugin, "status": PASSED}


def passed_all(entry: dict[str, Any]) -> bool:
    """Whether the nodes of an entry passed every Filter (NodeResourcesFit ran and nothing rejected)."""
    return (any(v["plugin"] == FIT for v in entry["filter"])
            and all(v.get("status") == PASSED for v in entry["filter"]))


def scores(sched: Scheduler, state: CycleState, nodes: list[str]) -> list[dict[str, Any]]:
    """Per feasible node: each Score plugin's raw score, normalized score (DefaultNormalizeScore over the feasible
    nodes, reversed for TaintToleration) and weighted score, and their total (what selectHost compares). Nodes
    with the same scores share one entry ({nodes, scores, total}), highest total first."""
    infos: list[NodeInfo] = [sched.nodes[n] for n in nodes]
    pi = state.pi
    table: dict[str, list[tuple[int, int]]] = {}
    table["NodeResourcesFit"] = [(s, s) for s in (P.resources_fit_score(pi, ni, sched.strategy) for ni in infos)]
    table[BALANCED] = [(s, s) for s in (P.balanced_allocation_score(pi, ni) for ni in infos)]
    for plugin in sched.profile.scores:
        raw = [plugin.score(pi, ni) for ni in infos]
        peak = max(raw, default=0)
        if plugin.reverse:
            norm = [P.MAX_NODE_SCORE - s * P.MAX_NODE_SCORE // peak if peak else P.MAX_NODE_SCORE for s in raw]
        else:
            norm = [s * P.MAX_NODE_SCORE // peak if peak else 0 for s in raw]
        table[plugin.name] = list(zip(raw, norm, strict=True))
    out: dict[tuple, dict[str, Any]] = {}
    for i, name in enumerate(nodes):
        row = tuple(v[i] for v in table.values())
        group = out.get(row)
        if group is None:
            per: list[dict[str, Any]] = [{"plugin": p, "raw": v[i][0], "normalized": v[i][1],
                                          "weighted": v[i][1] * P.SCORE_WEIGHTS[p]} for p, v in table.items()]
            group = out[row] = {"nodes": [], "scores": per,
                                "total": sum(v[i][1] * P.SCORE_WEIGHTS[p] for p, v in table.items())}
        group["nodes"].append(name)
    return sorted(out.values(), key=lambda g: -g["total"])


def reason_counts(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """The FitError histogram the per-node verdicts make: each rejecting plugin's reasons, one count per node."""
    hist: dict[str, int] = {}
    for entry in nodes:
        for v in entry["filter"]:
            for reason in v.get("reasons", ()):
                hist[reason] = hist.get(reason, 0) + len(entry["nodes"])
    return hist

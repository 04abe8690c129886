"""FitError: why a pod fits no node. The reason histogram over the node table's verdicts, the plugins that
rejected it (their cluster events may requeue the pod), and the message kube-scheduler writes (FitError.Error())."""

from __future__ import annotations

import numpy as np

from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodetable import NodeTable, StaticVerdicts

FIT = "NodeResourcesFit"


def fit_error(num_nodes: int, reasons: dict[str, int], post_filter: str = "") -> str:
    """FitError.Error(): reason histogram as "count reason", sorted as strings."""
    msg = f"0/{num_nodes} nodes are available:"
    hist = sorted(f"{v} {k}" for k, v in reasons.items())
    if hist:
        msg += f" {', '.join(hist)}."
    if post_filter:
        msg += f" {post_filter}"
    return msg


def diagnose(t: NodeTable, pi: P.PodInfo, static: StaticVerdicts, failed_static: np.ndarray, cand: np.ndarray,
             override: dict[int, list[str]], rejected: dict[str, dict[str, int]] | None = None
             ) -> tuple[dict[str, int], set[str]]:
    """The reasons with their node counts and the rejecting plugins. `failed_static`: rows the node-only filters
    rejected; `cand`: rows that passed them; `override`: NodeResourcesFit's reasons for rows re-checked with
    nominated pods; `rejected`: the other plugins' reasons (plugin -> reason -> nodes)."""
    reasons: dict[str, int] = {}
    plugins: set[str] = set()
    for plugin, rs in (rejected or {}).items():
        if rs:
            reasons.update(rs)
            plugins.add(plugin)
    if len(failed_static):
        ids, counts = np.unique(static.reason[failed_static], return_counts=True)
        for rid, c in zip(ids.tolist(), counts.tolist(), strict=True):
            reasons[t.reasons[rid]] = c
            plugins.add(t.reason_plugin[t.reasons[rid]])
    if len(cand):
        plugins.add(FIT)
        plain = np.ones(len(cand), bool)
        for i, row in enumerate(cand.tolist() if override else ()):
            if row in override:
                plain[i] = False
                for r in override[row]:
                    reasons[r] = reasons.get(r, 0) + 1
        for reason, bad in t.insufficient(pi.requests, cand[plain]):
            c = int(bad.sum())
            if c:
                reasons[reason] = reasons.get(reason, 0) + c
    return reasons, plugins

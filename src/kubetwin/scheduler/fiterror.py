"""FitError: why a pod fits no node. The reason histogram over the node table's verdicts, the plugins that
rejected it (their cluster events may requeue the pod), and the message kube-scheduler writes (FitError.Error())."""

from __future__ import annotations

import numpy as np

from kubetwin.scheduler import dra as D
from kubetwin.scheduler import gpushare as G
from kubetwin.scheduler import interpodaffinity as IPA
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
             override: dict[int, list[str]], dra_reasons: dict[str, int] | None = None,
             ipa_reasons: dict[str, int] | None = None) -> tuple[dict[str, int], set[str], int]:
    """The reasons with their node counts, the rejecting plugins, and how many nodes are UnschedulableAndUnresolvable
    (preemption cannot help there). `failed_static`: rows the node-only filters rejected; `cand`: rows that passed
    them; `override`: NodeResourcesFit's reasons for rows re-checked with nominated pods."""
    reasons: dict[str, int] = dict(dra_reasons or {})
    plugins: set[str] = set()
    unresolvable = len(failed_static)
    if ipa_reasons:  # only the rows that passed the filters before it
        reasons.update(ipa_reasons)
        plugins.add(IPA.NAME)
        unresolvable += ipa_reasons.get(IPA.ERR_AFFINITY, 0)  # UnschedulableAndUnresolvable
    if dra_reasons:
        plugins.add(G.PLUGIN if G.REASON in dra_reasons else D.NAME)
        if len(dra_reasons) > (G.REASON in dra_reasons):
            plugins.add(D.NAME)
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
    return reasons, plugins, unresolvable

"""The scheduling framework's extension points, as the twin runs them over the node table.

kube-scheduler's framework (pkg/scheduler/framework/interface.go) calls each plugin of a profile at the extension
points it implements, in the profile's order. The node-only Filters and Scores (plugins.Profile) and
NodeResourcesFit run as vectors over the node table; the plugins here are the others, each one object implementing
what it needs of:

- `pre_filter(state)`: resolve what the pod needs; raise `Rejected` when no node can do (UnschedulableAndUnresolvable,
  or a scheduling error); may narrow `state.mask` (a Filter whose verdicts come as one vector over the rows, as
  InterPodAffinity's) or set `state.want = state.n` (a Filter run per node after the scan must see every node).
- `filter_rows(state, rows)`: the Filter for the rows that passed the vector filters, in scan order; count rejections
  in `state.rejected`.
- `rejections(state, rows)`: for a pod that fits nowhere, the reasons of a vector Filter over `rows` (those that
  passed the filters before it) and how many of them preemption cannot help.
- `preemptible(state, rows)`: the rows where evicting pods could help, as this plugin sees it (and in
  `state.victims` the pods that must go from a row's node for it to help).
- `select(state, rows)`: a Score that replaces the default ones (the GPU placement policies); the first that answers
  picks the node.
- `reserve(state, row, node)`: Reserve / PreBind for the chosen node; annotations to write on the bound pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kubetwin.scheduler.nodetable import NodeTable
from kubetwin.scheduler.plugins import PodInfo
from kubetwin.store.store import Obj


@dataclass(slots=True)
class CycleState:
    """What one scheduling cycle's plugins share (framework.CycleState): the pod, its PreFilter state, its shape
    (queueing hints group pods by it), the node count, how many feasible nodes the scan looks for, the feasibility
    mask over the table's rows, each Filter's rejections and each plugin's own data."""

    pod: Obj
    pi: PodInfo
    table: NodeTable
    n: int  # live nodes
    to_find: int  # numFeasibleNodesToFind
    want: int  # how many feasible nodes the scan stops at (to_find, or n for Filters run after it)
    shape: tuple
    mask: np.ndarray  # the vector Filters' verdict per row
    fit: np.ndarray  # NodeResourcesFit's verdict per row (the rows a later vector Filter's reasons count over)
    rejected: dict[str, dict[str, int]] = field(default_factory=dict)  # plugin -> reason -> nodes
    data: dict[str, object] = field(default_factory=dict)  # plugin name -> its cycle data
    # Pods a plugin's Filter needs gone from a node before the pod fits there, whatever the resources say
    # (VolumeRestrictions: the lower-priority holder of a ReadWriteOncePod claim); preemption evicts them first.
    victims: dict[str, list[Obj]] = field(default_factory=dict)
    # Only while tracing (scheduler/trace.py): plugin -> node name -> "passed" or the reason, for the plugins
    # whose verdicts come as vectors or per row after the scan. None otherwise: the plugins skip the bookkeeping.
    traced: dict[str, dict[str, str]] | None = None

    def reject(self, plugin: str, reason: str, nodes: int = 1) -> None:
        reasons = self.rejected.setdefault(plugin, {})
        reasons[reason] = reasons.get(reason, 0) + nodes


class Rejected(Exception):
    """A PreFilter's verdict for the whole cycle. Unschedulable: `message` is the reason every node shares, and
    `post_filter` says whether DefaultPreemption's message follows it; `error`: a scheduling error, `message` as
    the event says it. `shape`: what the rejecting plugin adds to the pod's shape for its queueing hints."""

    def __init__(self, plugin: str, message: str, error: bool = False, post_filter: bool = False,
                 shape: tuple = ()) -> None:
        super().__init__(message)
        self.plugin, self.message, self.error, self.post_filter, self.shape = plugin, message, error, post_filter, shape


class Plugin:
    """A scheduler plugin beyond the node-only ones: every extension point is optional (these are the no-ops)."""

    name = ""

    def pre_filter(self, state: CycleState) -> None:
        return None

    def filter_rows(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        return rows

    def rejections(self, state: CycleState, rows: np.ndarray) -> tuple[dict[str, int], int]:
        return {}, 0

    def preemptible(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        return rows

    def select(self, state: CycleState, rows: np.ndarray) -> int | None:
        return None

    def reserve(self, state: CycleState, row: int, node: str) -> dict[str, str] | None:
        return None


POINTS = ("pre_filter", "filter_rows", "rejections", "preemptible", "select", "reserve")


def extension_points(plugins: list[Plugin]) -> dict[str, list[Plugin]]:
    """Per extension point, the plugins that implement it, in the profile's order (as the framework builds its
    per-point lists from the profile's MultiPoint plugins)."""
    return {point: [p for p in plugins if getattr(type(p), point) is not getattr(Plugin, point)]
            for point in POINTS}

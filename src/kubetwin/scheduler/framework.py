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
- `pre_bind_pre_flight(key)`, `pre_bind(key, pod)`: PreBindPreFlight / PreBind (interface.go PreBindPlugin): a
  plugin whose Reserve left work to wait for (VolumeBinding's claims) holds the pod assumed on its node until
  `pre_bind` says done, fails it, or `pre_bind_timeout` runs out; `pre_bind_failed(why)` is the FailedScheduling
  message.

And the queueing side, so the scheduler core names no plugin (kube-scheduler's EnqueueExtensions and
PreEnqueuePlugin, staging/src/k8s.io/kube-scheduler/framework/interface.go and types.go, kubernetes@297a562f):

- `events_to_register()`: EnqueueExtensions.EventsToRegister, the cluster events (`ClusterEvent(resource,
  ActionType)`) that may make a pod this plugin rejected schedulable, each with an optional QueueingHintFn
  answering `Queue` or `QueueSkip` for one such pod (None: always Queue). The scheduler watches every resource a
  plugin registers and turns each change into one queue move (queue.py MoveAllToActiveOrBackoffQueue) over the
  plugins registered for it; a plugin that does not implement it gets every event, as upstream's default
  (`{Resource: WildCard, ActionType: All}`).
- `pre_enqueue(pod)`: PreEnqueue; a reason keeps the pod out of activeQ until an update of the pod lets every
  PreEnqueue plugin pass it (DynamicResources: the claim generated from a template is not named yet).
- the scheduler cache's view of assigned pods, for plugins that keep their own: `assigned_pod_added(key, pod,
  node, bound)` and `assigned_pod_deleted(key, pod, node)` update it and say whether it changed, in which case the
  plugin's Pod/Add or Pod/Delete hint is asked in a move of its own (after the cache's own move, in the profile's
  order); `binding(key, pod, node)`: the pod is assumed while its Binding is on its way; `forget(key)`: the cache
  forgets the pod (ForgetPod after a failed binding cycle, RemovePod when it goes): drop what was reserved for it.
- `expect(objs)`: the scenario's objects before they are created (the GPU placement policy counts the workload
  FGD measures fragmentation against).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag

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


class ActionType(IntFlag):
    """One type of resource change, bit-wise composable (types.go ActionType; the Node and Pod sub-updates are kept
    for registrations in upstream's words, the twin's informer reports every update as all of them)."""

    Add = 1
    Delete = 2
    UpdateNodeAllocatable = 4
    UpdateNodeLabel = 8
    UpdateNodeTaint = 16
    UpdateNodeCondition = 32
    UpdateNodeAnnotation = 64
    UpdatePodLabel = 128
    UpdatePodScaleDown = 256
    UpdatePodToleration = 512
    UpdatePodSchedulingGatesEliminated = 1024
    UpdatePodGeneratedResourceClaim = 2048
    Update = 4092  # every UpdateNodeXYZ and UpdatePodXYZ
    All = 4095


WILDCARD = "*"  # EventResource WildCard: every resource


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """How a resource's state changed (types.go ClusterEvent). `resource`: the object's kind as the store names it
    (upstream's EventResource spells the group for non-core kinds, e.g. resource.k8s.io/ResourceClaim)."""

    resource: str
    action_type: ActionType

    def matches(self, resource: str, action: ActionType) -> bool:
        return (self.resource == resource or self.resource == WILDCARD) and bool(self.action_type & action)


class QueueingHint(IntEnum):
    """A QueueingHintFn's answer (types.go): QueueSkip, the event cannot help the pod; Queue, it may."""

    QueueSkip = 0
    Queue = 1


Queue, QueueSkip = QueueingHint.Queue, QueueingHint.QueueSkip
# QueueingHintFn(pod, oldObj, newObj): the pod as the scheduler sees it (its PodInfo: `pi.pod`, `pi.requests`), and
# the object before and after the change (None on Add / Delete; Node events pass the scheduler cache's NodeInfo).
QueueingHintFn = Callable[[PodInfo, object, object], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    """types.go ClusterEventWithHint: an event and the optional hint that filters it per rejected pod."""

    event: ClusterEvent
    queueing_hint_fn: QueueingHintFn | None = None


DEADLINE_EXCEEDED = "context deadline exceeded"  # a PreBind wait past its timeout (ctx.Err())


class Plugin:
    """A scheduler plugin beyond the node-only ones: every extension point is optional (these are the no-ops)."""

    name = ""
    pre_bind_timeout = 0.0  # how long PreBind may wait (VolumeBinding's bindTimeoutSeconds)

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

    def pre_bind_pre_flight(self, key: str) -> bool:
        return False

    def pre_bind(self, key: str, pod: Obj) -> tuple[bool, str | None]:
        return True, None

    def pre_bind_failed(self, why: str) -> str:
        return f'running PreBind plugin "{self.name}": {why}'  # framework.go RunPreBindPlugins

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(WILDCARD, ActionType.All))]

    def pre_enqueue(self, pod: Obj) -> str | None:
        return None

    def assigned_pod_added(self, key: str, pod: Obj, node: str, bound: bool) -> bool:
        return False

    def assigned_pod_deleted(self, key: str, pod: Obj, node: str | None) -> bool:
        return False

    def binding(self, key: str, pod: Obj, node: str) -> None:
        return None

    def forget(self, key: str) -> None:
        return None

    def expect(self, objs: list[Obj]) -> None:
        return None


POINTS = ("pre_filter", "filter_rows", "rejections", "preemptible", "select", "reserve", "pre_bind_pre_flight",
          "pre_bind", "pre_enqueue", "assigned_pod_added", "assigned_pod_deleted", "binding", "forget", "expect")


def extension_points(plugins: list[Plugin], first: dict[str, tuple[str, ...]] | None = None
                     ) -> dict[str, list[Plugin]]:
    """Per extension point, the plugins that implement it, in the profile's order (as the framework builds its
    per-point lists from the profile's MultiPoint plugins); `first`: per point, plugin names that run there
    before the others (the profile's own order at that point)."""
    out = {point: [p for p in plugins if getattr(type(p), point) is not getattr(Plugin, point)] for point in POINTS}
    for point, names in (first or {}).items():
        out[point].sort(key=lambda p: names.index(p.name) if p.name in names else len(names))
    return out

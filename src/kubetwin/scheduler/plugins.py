"""The default kube-scheduler plugins the twin runs, in the default profile's order, and their registry.

Reason strings are kube-scheduler's own (k8s.io/kubernetes pkg/scheduler/framework/plugins/...). A node-only plugin
(one that reads the Node object and a few pod fields, nothing else) declares those pod fields in `reads`: the
scheduler caches its verdicts per pod shape, and the shape is exactly the values at the paths the registered
node-only plugins read (podshapes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kubetwin.k8s import nodeaffinity
from kubetwin.k8s.taints import tolerates
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.store.store import Obj

SUCCESS, UNSCHEDULABLE, UNRESOLVABLE = 0, 1, 2
MAX_NODE_SCORE = 100
SCORE_WEIGHTS = {"NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1, "TaintToleration": 3,
                 "NodeAffinity": 2}  # default plugin weights, pkg/scheduler/apis/config/v1/default_plugins.go


@dataclass
class PodInfo:
    """What the plugins need from a pod, computed once per scheduling attempt (the PreFilter state)."""

    pod: Obj
    requests: dict[str, int]
    tolerations: list[dict]
    node_selector: dict[str, str]
    required_terms: list[dict] | None
    preferred_terms: list[dict]
    priority: int


def node_selector_term_matches(term: dict, node: Obj) -> bool:
    """One NodeSelectorTerm against a Node (k8s.nodeaffinity, the one copy of the rule)."""
    return nodeaffinity.term_matches(term, node["metadata"].get("labels") or {}, node["metadata"]["name"])


# --- Filter plugins ---------------------------------------------------------------------------
def node_unschedulable(pi: PodInfo, ni: NodeInfo) -> tuple[int, list[str]]:
    if (ni.node.get("spec") or {}).get("unschedulable"):
        taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        if not tolerates(pi.tolerations, taint):
            return UNRESOLVABLE, ["node(s) were unschedulable"]
    return SUCCESS, []


def taint_toleration(pi: PodInfo, ni: NodeInfo) -> tuple[int, list[str]]:
    for taint in (ni.node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pi.tolerations, taint):
            return UNRESOLVABLE, [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value') or ''}}}"]
    return SUCCESS, []


def node_affinity(pi: PodInfo, ni: NodeInfo) -> tuple[int, list[str]]:
    meta = ni.node["metadata"]
    if not nodeaffinity.required_matches(pi.node_selector, pi.required_terms, meta.get("labels") or {}, meta["name"]):
        return UNRESOLVABLE, ["node(s) didn't match Pod's node affinity/selector"]
    return SUCCESS, []


def fits_request(requests: dict[str, int], ni: NodeInfo) -> bool:
    """node_resources_fit's verdict alone, without building the reasons (the scheduler's hot path)."""
    alloc, used = ni.allocatable, ni.requested
    if used.get("pods", 0) + 1 > alloc.get("pods", 0):
        return False
    for name, want in requests.items():
        if want and used.get(name, 0) + want > alloc.get(name, 0):
            return False
    return True


def node_resources_fit(pi: PodInfo, ni: NodeInfo) -> tuple[int, list[str]]:
    reasons = []
    alloc, used = ni.allocatable, ni.requested
    if used.get("pods", 0) + 1 > alloc.get("pods", 0):
        reasons.append("Too many pods")
    for name, want in pi.requests.items():
        if want and used.get(name, 0) + want > alloc.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return (UNSCHEDULABLE, reasons) if reasons else (SUCCESS, [])




# --- Score plugins ----------------------------------------------------------------------------
def resources_fit_score(pi: PodInfo, ni: NodeInfo, strategy: str) -> int:
    """NodeResourcesFit with the default resources (cpu, memory; weight 1 each)."""
    total = 0
    for name in ("cpu", "memory"):
        alloc = ni.allocatable.get(name, 0)
        want = pi.requests.get(name) or (100 if name == "cpu" else 200 * 1024 * 1024)
        req = ni.nonzero_requested[name] + want
        if alloc == 0:
            continue
        if strategy == "MostAllocated":
            total += min(req, alloc) * MAX_NODE_SCORE // alloc
        else:
            total += 0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc
    return total // 2


def balanced_allocation_score(pi: PodInfo, ni: NodeInfo) -> int:
    """NodeResourcesBalancedAllocation: (1 - std of cpu/memory fractions) * 100."""
    fracs = []
    for name in ("cpu", "memory"):
        alloc = ni.allocatable.get(name, 0)
        if alloc:
            fracs.append(min(1.0, (ni.requested.get(name, 0) + pi.requests.get(name, 0)) / alloc))
    if len(fracs) < 2:
        return MAX_NODE_SCORE
    std = abs(fracs[0] - fracs[1]) / 2
    return int((1 - std) * MAX_NODE_SCORE)


def taint_toleration_score(pi: PodInfo, ni: NodeInfo) -> int:
    """Counts intolerable PreferNoSchedule taints; normalized (reversed) by the framework caller."""
    return sum(1 for t in (ni.node.get("spec") or {}).get("taints") or []
               if t.get("effect") == "PreferNoSchedule" and not tolerates(pi.tolerations, t))


def node_affinity_score(pi: PodInfo, ni: NodeInfo) -> int:
    return sum(int(t.get("weight", 0)) for t in pi.preferred_terms
               if node_selector_term_matches(t.get("preference") or {}, ni.node))


# --- the registry -----------------------------------------------------------------------------
FilterFn = Callable[[PodInfo, NodeInfo], tuple[int, list[str]]]
PodPath = tuple[str, ...]  # a field of the pod object, as keys from the root: ("spec", "tolerations")

TOLERATIONS: PodPath = ("spec", "tolerations")
NODE_SELECTOR: PodPath = ("spec", "nodeSelector")
REQUIRED_NODE_AFFINITY: PodPath = ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
PREFERRED_NODE_AFFINITY: PodPath = ("spec", "affinity", "nodeAffinity",
                                    "preferredDuringSchedulingIgnoredDuringExecution")


@dataclass(frozen=True)
class NodeFilter:
    """A Filter whose verdict depends only on the Node object and the pod fields in `reads` (PodInfo's fields are
    derived from those paths; a filter reading `pi.pod` names what it reads there)."""

    name: str
    check: FilterFn
    reads: tuple[PodPath, ...]


@dataclass(frozen=True)
class NodeScore:
    """A Score plugin over the Node object and the pod fields in `reads`, normalized as DefaultNormalizeScore
    (`reverse`: fewer is better) and weighted by SCORE_WEIGHTS."""

    name: str
    score: Callable[[PodInfo, NodeInfo], int]
    reads: tuple[PodPath, ...]
    reverse: bool = False


class Profile:
    """The default profile's node-only plugins, in kube-scheduler's order (pkg/scheduler/apis/config/v1/
    default_plugins.go): NodeUnschedulable, TaintToleration, NodeAffinity; NodeResourcesFit runs after them as a
    vector over the node table. `shape_paths` is the union of what they read: the per-pod-shape cache key."""

    def __init__(self, filters: list[NodeFilter], scores: list[NodeScore]) -> None:
        self.filters, self.scores = list(filters), list(scores)
        self._index()

    def _index(self) -> None:
        self.by_name = {f.name: f for f in self.filters}
        paths: dict[PodPath, None] = {}
        for plugin in self.filters:
            paths.update(dict.fromkeys(plugin.reads))
        for score in self.scores:
            paths.update(dict.fromkeys(score.reads))
        self.shape_paths: tuple[PodPath, ...] = tuple(paths)

    def add_filter(self, plugin: NodeFilter, before: str | None = None) -> None:
        """Register a node-only Filter, last or ahead of the named one."""
        if plugin.name in self.by_name:
            raise ValueError(f"filter {plugin.name!r} is already registered")
        at = next(i for i, f in enumerate(self.filters) if f.name == before) if before else len(self.filters)
        self.filters.insert(at, plugin)
        self._index()

    def remove_filter(self, name: str) -> None:
        self.filters = [f for f in self.filters if f.name != name]
        self._index()

    def first_rejection(self, pi: PodInfo, ni: NodeInfo) -> tuple[str, str] | None:
        """Every node-only Filter on one node, in the profile's order: the name and first reason of the first that
        rejects, or None. The cluster autoscaler's simulations ask this (as cluster-autoscaler runs the scheduler
        framework's Filters on its snapshot's NodeInfos), so a Filter registered here binds them too."""
        for plugin in self.filters:
            code, reasons = plugin.check(pi, ni)
            if code != SUCCESS:
                return plugin.name, reasons[0] if reasons else plugin.name
        return None

    def filter_all(self, pi: PodInfo, ni: NodeInfo) -> int:
        """Every Filter on one node, NodeResourcesFit last: the code of the first that rejects (preemption's
        dry run)."""
        for plugin in self.filters:
            code, _ = plugin.check(pi, ni)
            if code != SUCCESS:
                return code
        return node_resources_fit(pi, ni)[0]


DEFAULT: Profile = Profile(
    [NodeFilter("NodeUnschedulable", node_unschedulable, (TOLERATIONS,)),
     NodeFilter("TaintToleration", taint_toleration, (TOLERATIONS,)),
     NodeFilter("NodeAffinity", node_affinity, (NODE_SELECTOR, REQUIRED_NODE_AFFINITY))],
    [NodeScore("TaintToleration", taint_toleration_score, (TOLERATIONS,), reverse=True),
     NodeScore("NodeAffinity", node_affinity_score, (PREFERRED_NODE_AFFINITY,))])


@contextmanager
def registered(plugin: NodeFilter, before: str | None = None, profile: Profile = DEFAULT) -> Iterator[NodeFilter]:
    """Register a node-only Filter for the duration of a with-block (tests, plug-ins tried out)."""
    profile.add_filter(plugin, before)
    try:
        yield plugin
    finally:
        profile.remove_filter(plugin.name)

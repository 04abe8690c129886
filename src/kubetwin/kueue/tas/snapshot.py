"""A TAS flavor's topology tree and Kueue's placement over it.

Ported from kubernetes-sigs/kueue pkg/cache/scheduler (tas_topology_tree.go, tas_flavor_snapshot.go,
tas_nodes_cache.go) at the defaults of its HEAD: TASProfileMixed on (BestFit for required and preferred
requests, LeastFreeCapacity for unconstrained ones), TASBalancedPlacement and TASRespectNodeAffinityPreferred
off. The tree holds the Ready, schedulable Nodes that carry the flavor's nodeLabels and every level's label;
a leaf's capacity is its nodes' allocatable minus what non-TAS pods bound there request and what admitted TAS
workloads' assignments hold (the caches' two kinds of usage). ``find`` fills each domain's pod and slice counts
(leaves from the remaining capacity, parents as their children's sum), takes the smallest single domain at the
requested level that fits the pod set (BestFit), otherwise -- for preferred or unconstrained requests -- climbs
a level or takes the domains greedily, and walks down level by level keeping as few domains as it can; a
pod-set group's leader goes where it fits beside its workers (the ``*_with_leader`` counts). Not modelled:
multi-layer slice constraints, balanced placement, preferred node affinity, node replacement, elastic workloads'
delta placement, the scheduler library's other filters (only taints, nodeSelector and required affinity).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubetwin.api.podresources import pod_requests, resource_value
from kubetwin.k8s.conditions import find_condition
from kubetwin.k8s.labels import requirement_matches
from kubetwin.k8s.taints import tolerates
from kubetwin.kueue.tas.assignment import Assignment
from kubetwin.kueue.tas.request import HOSTNAME, TopologyRequest, is_tas

_MAX = (1 << 31) - 1
PODS = "pods"
Requests = dict[str, int]


@dataclass(eq=False)
class Domain:
    """One topology domain: its level values from the top, its children; per-find counts live on it."""

    values: tuple[str, ...]
    parent: Domain | None = None
    children: list[Domain] = field(default_factory=list)
    pod_count: int = 0
    slice_count: int = 0
    leader_count: int = 0  # with a pod-set group: whether the group's leader fits here too
    pod_count_with_leader: int = 0
    slice_count_with_leader: int = 0
    # leaves only
    capacity: Requests = field(default_factory=dict)
    node: dict | None = None

    @property
    def id(self) -> str:
        return ",".join(self.values)


@dataclass
class PodSetRequest:
    """What the flavor assigner hands TAS for one pod set (TASPodSetRequests)."""

    name: str
    count: int
    single_pod: Requests
    topology: TopologyRequest | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: tuple[dict, ...] | None = None  # requiredDuringScheduling nodeSelectorTerms
    tolerations: tuple[dict, ...] = ()

    @property
    def implied(self) -> bool:
        """No request at all: Kueue treats the pod set as unconstrained over the lowest level (TAS-only
        ClusterQueue)."""
        return self.topology is None or (self.topology.required is None and self.topology.preferred is None
                                         and self.topology.unconstrained is None
                                         and self.topology.slice_required is None)


@dataclass
class _State:
    """One find's parameters (topologyAssignmentParameters)."""

    count: int
    slice_size: int
    leader_count: int
    required: bool
    unconstrained: bool = False
    stats: _Stats = field(default_factory=lambda: _Stats())


@dataclass
class _Stats:
    total_nodes: int = 0
    node_selector: int = 0
    affinity: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)

    def reasons(self) -> str:
        out = []
        if self.node_selector:
            out.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            out.append(f"affinity: {self.affinity}")
        out += [f'taint "{t}": {n}' for t, n in sorted(self.taints.items())]
        out += [f'resource "{r}": {n}' for r, n in sorted(self.resources.items())]
        return ", ".join(sorted(out))


def _taint_string(t: dict) -> str:
    value = t.get("value")
    return f"{t['key']}={value}:{t.get('effect', '')}" if value else f"{t['key']}:{t.get('effect', '')}"


def _ready_and_schedulable(node: dict) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    cond = find_condition((node.get("status") or {}).get("conditions") or [], "Ready")
    return cond is not None and cond.get("status") == "True"


def node_matches_flavor(labels: dict, node_labels: dict, levels: Iterable[str]) -> bool:
    """utiltas.NodeMatchesFlavor: the flavor's nodeLabels match and every level's label is there."""
    return all(labels.get(k) == v for k, v in node_labels.items()) and all(k in labels for k in levels)


def count_in(requests: Requests, capacity: Requests) -> tuple[int, str]:
    """How many times ``requests`` fit in ``capacity`` and the limiting resource (ties: alphabetical);
    resources.CountInWithLimitingResource, a negative remainder counting as none."""
    best, limiting = _MAX, ""
    for res in sorted(requests):
        val = requests[res]
        if val == 0:
            continue
        n = max(0, capacity.get(res, 0) // val)
        if n < best:
            best, limiting = n, res
    return best, limiting


class TASFlavorSnapshot:
    """The topology tree of one TAS ResourceFlavor at one instant (TASFlavorSnapshot)."""

    def __init__(self, topology_name: str, levels: Iterable[str], tolerations: Iterable[dict] = ()) -> None:
        self.topology_name = topology_name
        self.levels = tuple(levels)
        self.tolerations = tuple(tolerations)
        self.lowest_is_node = bool(self.levels) and self.levels[-1] == HOSTNAME
        self.leaves: dict[str, Domain] = {}
        self.per_level: list[dict[str, Domain]] = [{} for _ in self.levels]
        self.node_to_leaf: dict[str, str] = {}
        self.tas_usage: dict[str, Requests] = {}

    # --- building --------------------------------------------------------------------------------------------

    @classmethod
    def build(cls, topology_name: str, levels: Iterable[str], nodes: Iterable[dict], node_labels: dict | None = None,
              tolerations: Iterable[dict] = ()) -> TASFlavorSnapshot:
        """The tree of the Ready, schedulable ``nodes`` that match the flavor (tas_nodes_cache.go find)."""
        snap = cls(topology_name, levels, tolerations)
        for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
            labels = node["metadata"].get("labels") or {}
            if _ready_and_schedulable(node) and node_matches_flavor(labels, node_labels or {}, snap.levels):
                snap._add_node(node)
        return snap

    def _add_node(self, node: dict) -> None:
        labels = node["metadata"].get("labels") or {}
        values = tuple(labels[k] for k in self.levels)
        leaf_id = values[-1] if self.lowest_is_node else ",".join(values)
        leaf = self.leaves.get(leaf_id)
        if leaf is None:
            leaf = self.leaves[leaf_id] = Domain(values, node=node if self.lowest_is_node else None)
            self._link(leaf, len(values) - 1)
        for res, q in ((node.get("status") or {}).get("allocatable") or {}).items():
            leaf.capacity[res] = leaf.capacity.get(res, 0) + resource_value(res, q)
        self.node_to_leaf[node["metadata"]["name"]] = leaf_id

    def _link(self, dom: Domain, level: int) -> None:
        key = dom.values[-1] if (self.lowest_is_node and level == len(self.levels) - 1) else ",".join(dom.values)
        self.per_level[level][key] = dom
        if level == 0:
            return
        parent_values = dom.values[:level]
        pid = ",".join(parent_values)
        parent = self.per_level[level - 1].get(pid)
        if parent is None:
            parent = Domain(parent_values)
            self._link(parent, level - 1)
        dom.parent = parent
        parent.children.append(dom)

    def add_non_tas_usage(self, node_name: str, usage: Requests) -> None:
        """A non-TAS pod bound to ``node_name`` (tas_non_tas_pod_cache.go): its requests and one pod."""
        leaf_id = self.node_to_leaf.get(node_name)
        if leaf_id is None:
            return
        cap = self.leaves[leaf_id].capacity
        for res, v in usage.items():
            cap[res] = cap.get(res, 0) - v
        cap[PODS] = cap.get(PODS, 0) - 1

    def add_pods(self, pods: Iterable[dict]) -> None:
        """The usage of the non-TAS pods bound to the tree's nodes and not terminated (tas_non_tas_pod_cache.go:
        a pod counts from the moment it has a nodeName until it Succeeds or Fails; TAS pods count through their
        workload's assignment instead)."""
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or node not in self.node_to_leaf:
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            if is_tas((pod.get("metadata") or {}).get("annotations")):
                continue
            self.add_non_tas_usage(node, pod_requests(pod))

    def add_tas_usage(self, assignment: Assignment, single_pod: Requests) -> None:
        """An admitted TAS pod set's assignment held against its domains (utiltas.ComputeUsagePerDomain)."""
        for domain_id, usage in _usage_per_domain(assignment, single_pod).items():
            tgt = self.tas_usage.setdefault(domain_id, {})
            for res, v in usage.items():
                tgt[res] = tgt.get(res, 0) + v

    def fits(self, assignment: Assignment, single_pod: Requests) -> bool:
        """Whether each domain of ``assignment`` still has room for its pods (Fits: what the scheduler asks before
        admitting an entry, after others were assumed in the same cycle)."""
        per_pod = dict(single_pod)
        per_pod[PODS] = per_pod.get(PODS, 0) + 1
        for values, count in assignment.domains:
            leaf_id = ",".join(values)
            leaf = self.leaves.get(leaf_id)
            if leaf is None:
                return False
            remaining = dict(leaf.capacity)
            for res, v in self.tas_usage.get(leaf_id, {}).items():
                remaining[res] = remaining.get(res, 0) - v
            if count_in(per_pod, remaining)[0] < count:
                return False
        return True

    def free_capacity(self) -> dict[str, Requests]:
        """Each leaf's capacity left (SerializeFreeCapacityPerDomain, as a dict)."""
        return {lid: {r: v - self.tas_usage.get(lid, {}).get(r, 0) for r, v in sorted(leaf.capacity.items())}
                for lid, leaf in sorted(self.leaves.items())}

    # --- finding ---------------------------------------------------------------------------------------------

    def has_level(self, tr: TopologyRequest | None) -> bool:
        """Whether the topology has the request's level and slice level (HasLevel)."""
        key = self._level_key(tr, False)
        if key is None or key not in self.levels:
            return False
        return tr is None or tr.slice_required is None or tr.slice_required in self.levels

    def find_assignments(self, requests: list[PodSetRequest], simulate_empty: bool = False
                         ) -> dict[str, tuple[Assignment | None, str]]:
        """Assignments for a workload's pod sets on this flavor, in order, each seeing the usage the earlier
        ones assumed (FindTopologyAssignmentsForFlavor); pod sets of one ``podset-group-name`` are placed together,
        the smaller one as the leader; stops at the first that fails. ``simulate_empty``: as if every TAS workload
        were gone (WithSimulateEmpty, the check before waiting for preemption)."""
        assumed: dict[str, Requests] = {}
        out: dict[str, tuple[Assignment | None, str]] = {}
        groups: dict[str, list[PodSetRequest]] = {}
        for i, req in enumerate(requests):
            group = req.topology.group_name if req.topology is not None else None
            groups.setdefault(group if group is not None else f"#{i}", []).append(req)
        for members in groups.values():
            workers, leader = members[0], None
            if len(members) > 1:
                leader = members[1]
                if leader.count > workers.count:
                    workers, leader = members[1], members[0]
            found, reason = self.find(workers, assumed, simulate_empty, leader)
            for req in members:
                out[req.name] = (found.get(req.name), reason)
            if reason:
                return out
            for req in members:
                placed = found[req.name]
                for domain_id, usage in _usage_per_domain(placed, req.single_pod).items():
                    tgt = assumed.setdefault(domain_id, {})
                    for res, v in usage.items():
                        tgt[res] = tgt.get(res, 0) + v
        return out

    def _level_key(self, tr: TopologyRequest | None, implied: bool) -> str | None:
        if tr is not None:
            if tr.required is not None:
                return tr.required
            if tr.preferred is not None:
                return tr.preferred
            if tr.slice_required is not None:
                return self.levels[0]
            if tr.unconstrained:
                return self.levels[-1]
        return self.levels[-1] if implied else None

    def find(self, req: PodSetRequest, assumed: dict[str, Requests] | None = None, simulate_empty: bool = False,
             leader: PodSetRequest | None = None) -> tuple[dict[str, Assignment], str]:
        """The workers' (and their group leader's) assignment, or the reason none fits in Kueue's words
        (findTopologyAssignment)."""
        tr = req.topology
        if not self.levels:
            return {}, "topology level not specified"
        slice_size = 1
        if tr is not None and tr.slice_required is not None:
            if not tr.slice_size or tr.slice_size <= 0:
                return {}, "slice topology requested, but slice size not provided"
            slice_size = tr.slice_size
        implied = req.implied
        st = _State(count=req.count, slice_size=slice_size, leader_count=1 if leader is not None else 0,
                    required=tr is not None and tr.required is not None)
        slice_only = tr is not None and tr.required is None and tr.preferred is None and tr.slice_required is not None
        st.unconstrained = bool(tr is not None and tr.unconstrained) or implied or slice_only
        key = self._level_key(tr, implied)
        if key is None:
            return {}, "topology level not specified"
        if key not in self.levels:
            return {}, f"no requested topology level: {key}"
        level_idx = self.levels.index(key)
        slice_key = tr.slice_required if tr is not None and tr.slice_required is not None else self.levels[-1]
        if slice_key not in self.levels:
            return {}, f"no requested topology level for slices: {slice_key}"
        slice_level = self.levels.index(slice_key)
        if level_idx > slice_level:
            return {}, f"podset slice topology {slice_key} is above the podset topology {key}"

        st.stats = self._fill_in_counts(req, assumed or {}, slice_size, slice_level, simulate_empty, leader)
        fit_level, fit, reason = self._find_level_with_fit_domains(level_idx, st)
        if reason:
            return {}, reason
        fit = self._update_counts_to_minimum(fit, st.count, st.leader_count, slice_size, st.unconstrained, True)
        level = fit_level
        while level < min(len(self.levels) - 1, slice_level):
            lower = self._sorted([c for d in fit for c in d.children], st.unconstrained)
            fit = self._update_counts_to_minimum(lower, st.count, st.leader_count, slice_size, st.unconstrained, True)
            level += 1
        while level < len(self.levels) - 1:
            size_here = slice_size if level < slice_level else 1
            new_fit: list[Domain] = []
            for dom in fit:
                children = self._sorted(dom.children, st.unconstrained)
                new_fit += self._update_counts_to_minimum(children, dom.pod_count, dom.leader_count, size_here,
                                                          st.unconstrained, size_here > 1)
            fit = new_fit
            level += 1
        out: dict[str, Assignment] = {}
        if leader is not None:
            out[leader.name] = self._build_assignment([(d, d.leader_count) for d in fit if d.leader_count > 0])
            fit = [d for d in fit if d.pod_count > 0]
        out[req.name] = self._build_assignment([(d, d.pod_count) for d in fit])
        return out, ""

    def _fill_in_counts(self, req: PodSetRequest, assumed: dict[str, Requests], slice_size: int,
                        slice_level: int, simulate_empty: bool = False, leader: PodSetRequest | None = None
                        ) -> _Stats:
        for lvl in self.per_level:
            for d in lvl.values():
                d.pod_count = d.slice_count = d.leader_count = d.pod_count_with_leader = 0
                d.slice_count_with_leader = 0
        stats = _Stats(total_nodes=len(self.leaves))
        single = dict(req.single_pod)
        single[PODS] = single.get(PODS, 0) + 1
        leader_single = None
        if leader is not None:
            leader_single = dict(leader.single_pod)
            leader_single[PODS] = leader_single.get(PODS, 0) + 1
        tolerations = list(req.tolerations) + list(self.tolerations)
        for leaf_id, leaf in self.leaves.items():
            if self.lowest_is_node and not self._feasible(leaf.node or {}, req, tolerations, stats):
                continue
            remaining = dict(leaf.capacity)
            for res, v in ({} if simulate_empty else self.tas_usage.get(leaf_id, {})).items():
                remaining[res] = remaining.get(res, 0) - v
            for res, v in assumed.get(leaf_id, {}).items():
                remaining[res] = remaining.get(res, 0) - v
            leaf.pod_count, limiting = count_in(single, remaining)
            if leaf.pod_count == 0 and limiting:
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
            if leader_single is not None and count_in(leader_single, remaining)[0] > 0:
                leaf.leader_count = 1
                for res, v in leader_single.items():
                    remaining[res] = remaining.get(res, 0) - v
            leaf.pod_count_with_leader = count_in(single, remaining)[0]
        for root in self.per_level[0].values():
            self._roll_up(root, slice_size, slice_level, 0, leader is not None)
        return stats

    def _feasible(self, node: dict, req: PodSetRequest, tolerations: list[dict], stats: _Stats) -> bool:
        """The node-only filters Kueue's scheduler simulation runs on a hostname leaf, in kube-scheduler's order
        (TaintToleration before NodeAffinity), each rejection counted under its reason."""
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                t = _taint_string(taint)
                stats.taints[t] = stats.taints.get(t, 0) + 1
                return False
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in req.node_selector.items()):
            stats.node_selector += 1
            return False
        if req.affinity_terms is not None and not any(
                all(requirement_matches(e, labels) for e in term.get("matchExpressions") or [])
                for term in req.affinity_terms):
            stats.affinity += 1
            return False
        return True

    def _roll_up(self, dom: Domain, slice_size: int, slice_level: int, level: int, leader_required: bool) -> None:
        """A domain's counts from its children's (fillInCountsHelper): pods and slices summed; with a leader, the
        room left beside it is the sum less the smallest loss a leader-capable child takes."""
        if not dom.children:
            if level == slice_level:
                dom.slice_count = dom.pod_count // slice_size
                dom.slice_count_with_leader = dom.pod_count_with_leader // slice_size
            return
        pods = slices = leaders = 0
        contributor = False
        min_pod_diff = min_slice_diff = _MAX
        for child in dom.children:
            self._roll_up(child, slice_size, slice_level, level + 1, leader_required)
            pods += child.pod_count
            slices += child.slice_count
            if not leader_required or child.leader_count > 0:
                contributor = True
                min_pod_diff = min(min_pod_diff, child.pod_count - child.pod_count_with_leader)
                min_slice_diff = min(min_slice_diff, child.slice_count - child.slice_count_with_leader)
            leaders = max(leaders, child.leader_count)
        dom.pod_count = pods
        slices_with_leader = 0
        dom.pod_count_with_leader = 0
        if contributor:
            dom.pod_count_with_leader = pods - min_pod_diff
            slices_with_leader = slices - min_slice_diff
        dom.leader_count = leaders
        if level == slice_level:
            slices = pods // slice_size
            slices_with_leader = dom.pod_count_with_leader // slice_size
        dom.slice_count = slices
        dom.slice_count_with_leader = slices_with_leader

    def _sorted(self, domains: Iterable[Domain], unconstrained: bool) -> list[Domain]:
        """BestFit: most slices first; LeastFreeCapacity (unconstrained): fewest first; then fewer pods, then
        level values (sortedDomains)."""
        sign = 1 if unconstrained else -1
        return sorted(domains, key=lambda d: (sign * d.slice_count, d.pod_count, d.values))

    def _sorted_with_leader(self, domains: Iterable[Domain], unconstrained: bool) -> list[Domain]:
        """Domains able to hold the leader first, then as ``_sorted`` by the room beside a leader
        (sortedDomainsWithLeader)."""
        sign = 1 if unconstrained else -1
        return sorted(domains, key=lambda d: (-d.leader_count, sign * d.slice_count_with_leader,
                                              d.pod_count_with_leader, d.values))

    @staticmethod
    def _best_fit(domains: list[Domain], needed: int, slices: bool, leader_count: int = 0) -> Domain:
        """The first domain with the smallest count that still holds ``needed`` (and the leaders); else the
        first (findBestFitDomainBy)."""
        best, best_count = domains[0], _MAX
        for d in domains:
            if d.leader_count < leader_count:
                continue
            if slices:
                c = d.slice_count_with_leader if leader_count > 0 else d.slice_count
            else:
                c = d.pod_count_with_leader if leader_count > 0 else d.pod_count
            if needed <= c < best_count:
                best, best_count = d, c
        return best

    def _find_level_with_fit_domains(self, level: int, st: _State) -> tuple[int, list[Domain], str]:
        """The domains at ``level`` (or, preferred, above it) to place the pod set in (findLevelWithFitDomains)."""
        domains = list(self.per_level[level].values())
        if not domains:
            return 0, [], f"no topology domains at level: {self.levels[level]}"
        ordered = self._sorted_with_leader(domains, st.unconstrained)
        top = ordered[0]
        slice_count = st.count // st.slice_size
        if not st.unconstrained and top.slice_count_with_leader >= slice_count and top.leader_count >= st.leader_count:
            top = self._best_fit(ordered, slice_count, True, st.leader_count)
        if st.unconstrained:
            for d in ordered:
                capacity = d.slice_count
                if st.leader_count > 0:
                    if d.leader_count < st.leader_count:
                        continue
                    capacity = d.slice_count_with_leader
                if capacity >= slice_count:
                    return level, [d], ""
            if st.required:
                return 0, [], self._not_fit(ordered[-1].pod_count, slice_count, st)
        if top.slice_count_with_leader < slice_count or top.leader_count < st.leader_count:
            if st.required:
                return 0, [], self._not_fit(top.slice_count, slice_count, st)
            if level > 0 and not st.unconstrained:
                return self._find_level_with_fit_domains(level - 1, st)
            results: list[Domain] = []
            remaining, remaining_leaders = slice_count, st.leader_count
            ordered = self._prioritize_leader_domain(ordered, st.count, st.leader_count, st.slice_size, True)
            i = 0
            while remaining_leaders > 0 and i < len(ordered) and ordered[i].leader_count > 0:
                d = ordered[i]
                if not st.unconstrained and d.slice_count_with_leader >= remaining:
                    d = self._best_fit(ordered[i:], remaining, True, remaining_leaders)
                results.append(d)
                remaining_leaders -= d.leader_count
                remaining -= d.slice_count_with_leader
                i += 1
            if remaining_leaders > 0:
                return 0, [], self._not_fit(st.leader_count - remaining_leaders, slice_count, st)
            rest = self._sorted(ordered[i:], st.unconstrained)
            for j in range(len(rest)):
                if remaining <= 0:
                    break
                d = rest[j]
                if not st.unconstrained and d.slice_count >= remaining:
                    d = self._best_fit(rest[j:], remaining, True)
                results.append(d)
                remaining -= d.slice_count
            if remaining > 0:
                return 0, [], self._not_fit(slice_count - remaining, slice_count, st)
            return level, results, ""
        return level, [top], ""

    def _prioritize_leader_domain(self, domains: list[Domain], count: int, leader_count: int, slice_size: int,
                                  slices: bool) -> list[Domain]:
        """Move to the front the first leader-capable domain whose loss to the leader the others can make up
        (prioritizeLeaderDomain)."""
        if leader_count == 0 or len(domains) < 2:
            return domains
        required = count // slice_size if slices else count
        available = sum(d.slice_count if slices else d.pod_count for d in domains)
        for i, d in enumerate(domains):
            if d.leader_count < leader_count:
                continue
            penalty = (d.slice_count - d.slice_count_with_leader) if slices else (d.pod_count - d.pod_count_with_leader)
            if available - penalty < required:
                continue
            return domains if i == 0 else [d, *domains[:i], *domains[i + 1:]]
        return domains

    def _update_counts_to_minimum(self, domains: list[Domain], count: int, leader_count: int, slice_size: int,
                                  unconstrained: bool, slices: bool) -> list[Domain]:
        """Take domains in order until ``count`` pods (in whole slices when ``slices``) and the leaders are
        placed, the last one a best fit under BestFit; each kept domain's counts cut to what it takes
        (updateCountsToMinimumGeneric)."""
        domains = self._prioritize_leader_domain(domains, count, leader_count, slice_size, slices)
        result: list[Domain] = []
        remaining = count // slice_size if slices else count
        remaining_leaders = leader_count
        for i, dom in enumerate(domains):
            if remaining_leaders > 0:
                with_leader = dom.slice_count_with_leader if slices else dom.pod_count_with_leader
                if not unconstrained and with_leader >= remaining and dom.leader_count >= remaining_leaders:
                    dom = self._best_fit(domains[i:], remaining, slices, remaining_leaders)
                    with_leader = dom.slice_count_with_leader if slices else dom.pod_count_with_leader
                factor = slice_size if slices else 1
                if with_leader >= remaining and dom.leader_count >= remaining_leaders:
                    dom.leader_count = remaining_leaders
                    dom.pod_count = remaining * factor
                    if slices:
                        dom.slice_count = remaining
                    result.append(dom)
                    return result
                with_leader = min(with_leader, remaining)
                dom.leader_count = min(dom.leader_count, remaining_leaders)
                if slices:
                    dom.slice_count = with_leader
                dom.pod_count = with_leader * factor
                remaining_leaders -= dom.leader_count
                remaining -= with_leader
                result.append(dom)
                continue
            have = dom.slice_count if slices else dom.pod_count
            if not unconstrained and have >= remaining:
                dom = self._best_fit(domains[i:], remaining, slices)
                have = dom.slice_count if slices else dom.pod_count
            dom.leader_count = 0
            if have >= remaining:
                if slices:
                    dom.pod_count, dom.slice_count = remaining * slice_size, remaining
                else:
                    dom.pod_count = remaining
                result.append(dom)
                return result
            if slices:
                dom.pod_count = dom.slice_count * slice_size
            remaining -= have
            result.append(dom)
        return result

    def _not_fit(self, fit: int, total: int, st: _State) -> str:
        unit = "pod" if st.slice_size == 1 else "slice"
        if fit == 0:
            text = f'topology "{self.topology_name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{self.topology_name}" allows to fit only {fit} out of {total} {unit}(s)'
        reasons = st.stats.reasons()
        if reasons:
            text += f". Total nodes: {st.stats.total_nodes}; excluded: {reasons}"
        return text

    def _build_assignment(self, domains: list[tuple[Domain, int]]) -> Assignment:
        level_idx = len(self.levels) - 1 if self.lowest_is_node else 0
        kept = sorted(((d, n) for d, n in domains if n > 0), key=lambda dn: dn[0].values)
        return Assignment(self.levels[level_idx:], [(d.values[level_idx:], n) for d, n in kept])

def _usage_per_domain(assignment: Assignment, single_pod: Requests) -> dict[str, Requests]:
    out: dict[str, Requests] = {}
    for values, count in assignment.domains:
        usage = {r: v * count for r, v in single_pod.items()}
        usage[PODS] = usage.get(PODS, 0) + count
        out[",".join(values)] = usage
    return out

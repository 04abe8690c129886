"""The scheduler controller: scheduling queue, one scheduling cycle per pod, preemption, binding.

Mirrors kube-scheduler's schedule_one.go: Filter over nodes starting at a rotating index until
numFeasibleNodesToFind feasible nodes are found, Score those, pick the best (seeded random tie-break),
Reserve in the cache, Bind through the store. Unschedulable pods get a FailedScheduling event with
FitError's message and wait in the unschedulable set until a cluster event may help (or 5 minutes).
"""

from __future__ import annotations

import heapq
import json
import random

from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodeinfo import NodeInfo, pod_requests
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

MIN_FEASIBLE_NODES_TO_FIND = 100  # schedule_one.go minFeasibleNodesToFind
MIN_FEASIBLE_NODES_PERCENTAGE = 5  # schedule_one.go minFeasibleNodesPercentageToFind
POD_MAX_IN_UNSCHEDULABLE = 300.0  # scheduling_queue.go DefaultPodMaxInUnschedulablePodsDuration = 5m
INITIAL_BACKOFF, MAX_BACKOFF = 1.0, 10.0  # DefaultPodInitialBackoffDuration / DefaultPodMaxBackoffDuration
SCORE_WEIGHTS = {"NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1, "TaintToleration": 3,
                 "NodeAffinity": 2}  # default plugin weights, pkg/scheduler/apis/config/v1/default_plugins.go


def num_feasible_nodes_to_find(num_all: int, percentage: int = 0) -> int:
    if num_all < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all
    if percentage == 0:
        percentage = max(50 - num_all // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(num_all * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def pod_key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata']['name']}"


def fit_error(num_nodes: int, reasons: dict[str, int], post_filter: str = "") -> str:
    """FitError.Error(): reason histogram as "count reason", sorted as strings."""
    msg = f"0/{num_nodes} nodes are available:"
    hist = sorted(f"{v} {k}" for k, v in reasons.items())
    if hist:
        msg += f" {', '.join(hist)}."
    if post_filter:
        msg += f" {post_filter}"
    return msg


class Scheduler:
    """default-scheduler, one profile."""

    def __init__(self, store: Store, events: EventRecorder, seed: int = 0, strategy: str = "LeastAllocated"):
        self.store, self.events, self.strategy = store, events, strategy
        self.rng = random.Random(seed)
        self.nodes: dict[str, NodeInfo] = {}
        self.node_order: list[str] = []
        self.next_start = 0
        self._active: list[tuple[int, int, str]] = []
        self._queued: set[str] = set()
        self._unschedulable: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        self._seq = 0
        self._pending_run = False
        self._requests: dict[str, dict[str, int]] = {}
        self.schedule_attempts = 0
        self._order_dirty = False
        self._node_gen = 0
        # Node-only filter verdicts per pod shape (tolerations, selector, affinity): they change only when a
        # node does, so identical pods (a Job's, a Deployment's) skip those plugins after the first.
        self._static: dict[str, tuple[int, dict[str, tuple[int, list[str]]], dict[str, tuple[int, int]]]] = {}
        self._nominated: dict[str, dict[str, tuple[int, dict[str, int], Obj]]] = {}  # node -> pod -> (prio, req)
        store.watch("Pod", self._on_pod)
        store.watch("Node", self._on_node)

    # -- informers ------------------------------------------------------------------------------
    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self.nodes.pop(name, None)
            self._node_gen += 1
            self._order_dirty = True
            return
        self._node_gen += 1
        ni = self.nodes.get(name)
        fresh = NodeInfo.from_node(node)
        if ni is None:
            self.nodes[name] = fresh
            self._order_dirty = True
        else:
            ni.node, ni.allocatable = node, fresh.allocatable
        self._move_all("NodeChange")

    def _rebuild_order(self) -> None:
        """nodeTree order: round-robin over zones, nodes in creation order within a zone."""
        zones: dict[str, list[str]] = {}
        for name, ni in self.nodes.items():
            zone = (ni.node["metadata"].get("labels") or {}).get("topology.kubernetes.io/zone", "")
            zones.setdefault(zone, []).append(name)
        order, lists = [], [zones[z] for z in zones]
        for i in range(max((len(x) for x in lists), default=0)):
            order += [x[i] for x in lists if i < len(x)]
        self.node_order = order

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        key = pod_key(pod)
        node_name = pod["spec"].get("nodeName")
        terminal = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if etype == "DELETED" or terminal:
            self._clear_nomination(key)
            self._unschedulable.pop(key, None)
            self._queued.discard(key)
            if node_name and node_name in self.nodes:
                req = self._requests.pop(key, None)
                if req is not None:
                    self.nodes[node_name].remove_pod(pod, req)
                    self._move_all("AssignedPodDelete")
            return
        if node_name:
            if key not in self._requests and node_name in self.nodes:
                req = pod_requests(pod)
                self._requests[key] = req
                self.nodes[node_name].add_pod(pod, req)
            return
        if etype == "ADDED" and pod["spec"].get("schedulerName", "default-scheduler") == "default-scheduler":
            self._enqueue(pod)

    # -- queue ----------------------------------------------------------------------------------
    def _enqueue(self, pod: Obj) -> None:
        key = pod_key(pod)
        if key in self._queued:
            return
        self._queued.add(key)
        self._seq += 1
        heapq.heappush(self._active, (-int(pod["spec"].get("priority") or 0), self._seq, key))
        self._kick()

    def _kick(self) -> None:
        if not self._pending_run:
            self._pending_run = True
            self.store.env.after(0, self._run)

    def _move_all(self, _event: str) -> None:
        """MoveAllToActiveOrBackoffQueue: unschedulable pods retry after their backoff."""
        if not self._unschedulable:
            return
        now = self.store.env.now
        for key in list(self._unschedulable):
            n = self._attempts.get(key, 1)
            backoff = min(INITIAL_BACKOFF * 2 ** min(n - 1, 8), MAX_BACKOFF)
            self._unschedulable.pop(key)
            self.store.env.at(now + backoff, lambda k=key: self._retry(k))

    def _retry(self, key: str) -> None:
        ns, name = key.split("/", 1)
        pod = self.store.get("Pod", ns, name)
        if pod is not None and not pod["spec"].get("nodeName"):
            self._enqueue(pod)

    def _flush_unschedulable(self, key: str, since: float) -> None:
        if self._unschedulable.get(key) == since:
            self._unschedulable.pop(key)
            self._retry(key)

    # -- one cycle ------------------------------------------------------------------------------
    def _run(self) -> None:
        self._pending_run = False
        while self._active:
            _, _, key = heapq.heappop(self._active)
            if key not in self._queued:
                continue
            self._queued.discard(key)
            ns, name = key.split("/", 1)
            pod = self.store.get("Pod", ns, name)
            if pod is None or pod["spec"].get("nodeName"):
                continue
            self.schedule_one(pod)

    def _pod_info(self, pod: Obj) -> P.PodInfo:
        spec = pod["spec"]
        aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
        return P.PodInfo(pod, pod_requests(pod), spec.get("tolerations") or [], spec.get("nodeSelector") or {},
                         req.get("nodeSelectorTerms") if req else None,
                         aff.get("preferredDuringSchedulingIgnoredDuringExecution") or [],
                         int(spec.get("priority") or 0))

    def _static_verdicts(self, pi: P.PodInfo) -> tuple[dict[str, tuple[int, list[str]]], dict[str, tuple[int, int]]]:
        """Failures of the node-only filters, and node-only raw scores (taint, affinity), for this pod shape."""
        sig = json.dumps([pi.tolerations, pi.node_selector, pi.required_terms, pi.preferred_terms], sort_keys=True)
        cached = self._static.get(sig)
        if cached is not None and cached[0] == self._node_gen:
            return cached[1], cached[2]
        fails: dict[str, tuple[int, list[str]]] = {}
        scores: dict[str, tuple[int, int]] = {}
        for name, ni in self.nodes.items():
            for _, plugin in P.FILTERS[:-1]:
                code, reasons = plugin(pi, ni)
                if code != P.SUCCESS:
                    fails[name] = (code, reasons)
                    break
            else:
                scores[name] = (P.taint_toleration_score(pi, ni), P.node_affinity_score(pi, ni))
        self._static[sig] = (self._node_gen, fails, scores)
        return fails, scores

    @staticmethod
    def _filter(pi: P.PodInfo, ni: NodeInfo) -> tuple[int, list[str]]:
        for _, plugin in P.FILTERS:
            code, reasons = plugin(pi, ni)
            if code != P.SUCCESS:
                return code, reasons
        return P.SUCCESS, []

    def schedule_one(self, pod: Obj) -> str | None:
        self.schedule_attempts += 1
        pi = self._pod_info(pod)
        if self._order_dirty:
            self._rebuild_order()
            self._order_dirty = False
        order = self.node_order
        n = len(order)
        want = num_feasible_nodes_to_find(n)
        feasible: list[NodeInfo] = []
        statuses: dict[str, tuple[int, list[str]]] = {}
        processed = 0
        static_fail, static_score = self._static_verdicts(pi)
        nodes = self.nodes
        for i in range(n):
            name = order[(self.next_start + i) % n]
            processed += 1
            failed = static_fail.get(name)
            if failed is not None:
                statuses[name] = failed
                continue
            ni = nodes[name]
            code, reasons = P.node_resources_fit(pi, self._with_nominated(pi, ni))
            if code == P.SUCCESS:
                feasible.append(ni)
                if len(feasible) >= want:
                    break
            else:
                statuses[ni.name] = (code, reasons)
        if n:
            self.next_start = (self.next_start + processed) % n
        if not feasible:
            self._unschedulable_pod(pod, pi, statuses, n)
            return None
        best = self._select_host(pi, feasible, static_score)
        self._bind(pod, pi, best)
        return best.name

    def _with_nominated(self, pi: P.PodInfo, ni: NodeInfo) -> NodeInfo:
        """addNominatedPods: pods of equal or higher priority nominated to this node keep their room."""
        noms = self._nominated.get(ni.name)
        if not noms:
            return ni
        me = pod_key(pi.pod)
        keep = [(req, pod) for key, (prio, req, pod) in (noms or {}).items() if key != me and prio >= pi.priority]
        if not keep:
            return ni
        trial = NodeInfo(ni.name, ni.node, ni.allocatable, dict(ni.requested), dict(ni.nonzero_requested),
                         dict(ni.pods))
        for req, pod in keep:
            trial.add_pod(pod, req)
        return trial

    def _clear_nomination(self, key: str) -> None:
        for noms in self._nominated.values():
            noms.pop(key, None)

    def _select_host(self, pi: P.PodInfo, feasible: list[NodeInfo],
                     static_score: dict[str, tuple[int, int]]) -> NodeInfo:
        if len(feasible) == 1:
            return feasible[0]
        fit = [P.resources_fit_score(pi, ni, self.strategy) for ni in feasible]
        bal = [P.balanced_allocation_score(pi, ni) for ni in feasible]
        taint = [static_score[ni.name][0] for ni in feasible]
        aff = [static_score[ni.name][1] for ni in feasible]
        tmax, amax = max(taint), max(aff)
        best, best_score, count = feasible[0], -1, 0
        for i, ni in enumerate(feasible):
            score = (fit[i] * SCORE_WEIGHTS["NodeResourcesFit"]
                     + bal[i] * SCORE_WEIGHTS["NodeResourcesBalancedAllocation"]
                     + (P.MAX_NODE_SCORE - taint[i] * P.MAX_NODE_SCORE // tmax if tmax else P.MAX_NODE_SCORE)
                     * SCORE_WEIGHTS["TaintToleration"]
                     + (aff[i] * P.MAX_NODE_SCORE // amax if amax else 0) * SCORE_WEIGHTS["NodeAffinity"])
            if score > best_score:
                best, best_score, count = ni, score, 1
            elif score == best_score:
                count += 1
                if self.rng.randrange(count) == 0:  # reservoir sampling, as selectHost does
                    best = ni
        return best

    def _bind(self, pod: Obj, pi: P.PodInfo, ni: NodeInfo) -> None:
        key = pod_key(pod)
        self._attempts.pop(key, None)
        self._clear_nomination(key)
        self._requests[key] = pi.requests
        ni.add_pod(pod, pi.requests)
        now = self.store.timestamp(self.store.env.now)
        status = dict(pod.get("status") or {})
        conds = [c for c in status.get("conditions") or [] if c["type"] != "PodScheduled"]
        status["conditions"] = conds + [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]
        status.pop("nominatedNodeName", None)
        bound = self.store.update({**pod, "spec": {**pod["spec"], "nodeName": ni.name}, "status": status})
        ni.pods[key] = bound
        self.events.event(bound, "Normal", "Scheduled", f"Successfully assigned {key} to {ni.name}",
                          "default-scheduler")

    # -- failure and preemption -----------------------------------------------------------------
    def _unschedulable_pod(self, pod: Obj, pi: P.PodInfo, statuses: dict, n: int) -> None:
        reasons: dict[str, int] = {}
        for _, rs in statuses.values():
            for r in rs:
                reasons[r] = reasons.get(r, 0) + 1
        post, nominated = self._preempt(pod, pi, statuses, n)
        msg = fit_error(n, reasons, post) if n else "no nodes available to schedule pods"
        key = pod_key(pod)
        self._attempts[key] = self._attempts.get(key, 0) + 1
        now = self.store.timestamp(self.store.env.now)
        status = dict(pod.get("status") or {})
        status["phase"] = "Pending"
        conds = [c for c in status.get("conditions") or [] if c["type"] != "PodScheduled"]
        status["conditions"] = conds + [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                         "message": msg, "lastTransitionTime": now}]
        if nominated:
            status["nominatedNodeName"] = nominated
            self._clear_nomination(key)
            self._nominated.setdefault(nominated, {})[key] = (pi.priority, pi.requests, pod)
        old = pod.get("status", {})
        prev = next((c for c in old.get("conditions") or [] if c["type"] == "PodScheduled"), None)
        if not prev or prev.get("message") != msg or old.get("nominatedNodeName") != status.get("nominatedNodeName"):
            pod = self.store.update({**pod, "status": status})
        self.events.event(pod, "Warning", "FailedScheduling", msg, "default-scheduler")
        since = self.store.env.now
        self._unschedulable[key] = since
        self.store.env.at(since + POD_MAX_IN_UNSCHEDULABLE, lambda: self._flush_unschedulable(key, since))
        if nominated:
            self._move_all("Preemption")

    def _preempt(self, pod: Obj, pi: P.PodInfo, statuses: dict, n: int) -> tuple[str, str | None]:
        """DefaultPreemption PostFilter: find the node where evicting the fewest, least important pods fits."""
        if pod["spec"].get("preemptionPolicy") == "Never":
            return "preemption: not eligible due to preemptionPolicy=Never.", None
        helpless = sum(1 for code, _ in statuses.values() if code == P.UNRESOLVABLE)
        candidates = []
        for name, (code, _) in statuses.items():
            if code != P.UNSCHEDULABLE:
                continue
            victims = self._victims(pi, self.nodes[name])
            if victims is not None:
                candidates.append((name, victims))
        if not candidates:
            parts = {}
            if n - helpless:
                parts["No preemption victims found for incoming pod"] = n - helpless
            if helpless:
                parts["Preemption is not helpful for scheduling"] = helpless
            hist = ", ".join(sorted(f"{v} {k}" for k, v in parts.items()))
            return f"preemption: 0/{n} nodes are available: {hist}.", None

        def rank(c: tuple[str, list[Obj]]) -> tuple:
            prios = [int(v["spec"].get("priority") or 0) for v in c[1]]
            return (max(prios), sum(prios), len(prios))

        node, victims = min(candidates, key=rank)
        for v in victims:
            self.events.event(v, "Normal", "Preempted", f"Preempted by pod {pod['metadata'].get('uid')} on node "
                              f"{node}", "default-scheduler")
            ns, name = v["metadata"].get("namespace") or "", v["metadata"]["name"]
            self.store.patch("Pod", ns, name, lambda p: {**p, "status": {**p.get("status", {}), "conditions": [
                *(p.get("status", {}).get("conditions") or []),
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": "default-scheduler: preempting to accommodate a higher priority pod"}]}})
            self.store.delete("Pod", ns, name)
        return "", node

    def _victims(self, pi: P.PodInfo, ni: NodeInfo) -> list[Obj] | None:
        lower = [p for p in ni.pods.values() if int(p["spec"].get("priority") or 0) < pi.priority]
        if not lower:
            return None
        trial = NodeInfo(ni.name, ni.node, ni.allocatable, dict(ni.requested), dict(ni.nonzero_requested),
                         dict(ni.pods))
        for p in lower:
            trial.remove_pod(p, self._requests.get(pod_key(p), pod_requests(p)))
        if self._filter(pi, trial)[0] != P.SUCCESS:
            return None
        victims = []
        # Reprieve as many as possible, most important first (selectVictimsOnNode).
        for p in sorted(lower, key=lambda p: -int(p["spec"].get("priority") or 0)):
            req = self._requests.get(pod_key(p), pod_requests(p))
            trial.add_pod(p, req)
            if self._filter(pi, trial)[0] != P.SUCCESS:
                trial.remove_pod(p, req)
                victims.append(p)
        return victims

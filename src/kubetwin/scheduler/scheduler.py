"""The scheduler controller: one scheduling cycle per pod, then Reserve and Bind through the store.

Mirrors kube-scheduler's schedule_one.go: Filter over nodes starting at a rotating index until
numFeasibleNodesToFind feasible nodes are found, Score those, pick the best (seeded random among the
top scores, as selectHost), Reserve in the cache, Bind. Filter and Score run as numpy over the node
table (nodetable.py); the node-only filters (NodeUnschedulable, TaintToleration, NodeAffinity: plugins.Profile) are
evaluated once per pod shape and node change. The other plugins (registry.py builds them) run at the extension points
they implement (framework.py); this module names none of them. Unschedulable pods get a FailedScheduling event with
FitError's message and wait in the queue (queue.py) until a cluster event may help: the scheduler watches Pods,
Nodes and every resource a plugin registered (events_to_register), and each change is one queue move
(MoveAllToActiveOrBackoffQueue) over the plugins registered for it, each asked through its QueueingHint. The core's
own plugins register too: NodeResourcesFit for Node add/update (noderesources isSchedulableAfterNodeChange) and for a
pod that leaves a node, the node-only filters for Node add/update. Assigned-pod events follow the scheduler cache:
its move when the cache freed room, then one move per plugin whose own view of assigned pods changed
(framework.Plugin.assigned_pod_added/_deleted), in the profile's order.

Its writes go through its API client (sim/apiclient.py; KubeSchedulerConfiguration clientConnection, 50 qps / 100
burst by default): the binding cycle runs in a goroutine (schedule_one.go ScheduleOne: "bind the pod to its host
asynchronously (we can do this b/c of the assumption step above)"), so a pod is assumed on its node at once and its
Binding (``create pods/binding``) is written when its token is due while the next cycle goes on; the failure
handler's PodScheduled=False / nominatedNodeName patch (``updatePod`` in handleSchedulingFailure, called from
ScheduleOne itself while SchedulerAsyncAPICalls is off, its default in 1.34: kubernetes@003b4460
pkg/scheduler/schedule_one.go, pkg/features/kube_features.go) holds the scheduling loop until it is through.
Events go through the event broadcaster's own client (options.go createClients) and are not paced (a twin
assumption: the broadcaster queues them without blocking the scheduler).
"""

from __future__ import annotations

import random
from functools import partial

import numpy as np

from kubetwin.api import twin
from kubetwin.api.podresources import pod_requests
from kubetwin.k8s.conditions import find_condition, set_condition
from kubetwin.scheduler import framework as F
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler import registry as R
from kubetwin.scheduler import trace as T
from kubetwin.scheduler.fiterror import FIT, diagnose, fit_error
from kubetwin.scheduler.fragmentation import FragmentationGauge
from kubetwin.scheduler.framework import ActionType
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.scheduler.nodetable import NodeTable, ScoreCache, StaticVerdicts
from kubetwin.scheduler.podshapes import PodShapes
from kubetwin.scheduler.preemption import DefaultPreemption, pod_key, priority_of
from kubetwin.scheduler.queue import Hint, SchedulingQueue
from kubetwin.scheduler.schedulinggates import GATED_MESSAGE as GATED_MESSAGE  # re-exported
from kubetwin.scheduler.schedulinggates import scheduling_gated_condition
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.outputs import Contribution
from kubetwin.sim.trace import SchedulingTrace
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

MIN_FEASIBLE_NODES_TO_FIND = 100  # schedule_one.go minFeasibleNodesToFind
MIN_FEASIBLE_NODES_PERCENTAGE = 5  # schedule_one.go minFeasibleNodesPercentageToFind
ACTIONS = {"ADDED": ActionType.Add, "MODIFIED": ActionType.Update, "DELETED": ActionType.Delete}
_FIT = frozenset({FIT})
# A registered event's plugins: name -> its QueueingHintFns for the event (None among them: Queue)
Registrants = dict[str, list["F.QueueingHintFn | None"]]


def num_feasible_nodes_to_find(num_all: int, percentage: int = 0) -> int:
    if num_all < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all
    if percentage == 0:
        percentage = max(50 - num_all // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(num_all * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class Scheduler:
    """default-scheduler, one profile."""

    def __init__(self, store: Store, events: EventRecorder, seed: int = 0, strategy: str = "LeastAllocated",
                 features: R.Features = R.Features(), gpu_policy: str | None = None, profile: P.Profile = P.DEFAULT,
                 trace: SchedulingTrace | None = None, client: ApiClient | None = None):
        self.store, self.events, self.strategy, self.profile = store, events, strategy, profile
        # the scheduler's client (createClients: one clientset, so one token bucket, for all its requests)
        self.client = client if client is not None else ApiClient("kube-scheduler", twin.SCHEDULER_QPS,
                                                                  twin.SCHEDULER_BURST)
        self._binding: dict[str, str] = {}  # pods assumed on a node whose Binding is not written yet -> node
        self._busy_until = 0.0  # the scheduling loop waits for its synchronous writes (the failure handler's patch)
        self.trace = trace  # None: nothing recorded (the default); else every attempt, as scheduler/trace.py says
        self.rng = random.Random(seed)
        self.nodes: dict[str, NodeInfo] = {}
        self.table = NodeTable()
        self.queue = SchedulingQueue(store.env, self._kick)
        self.next_start = 0
        self._pending_run = False
        self._requests: dict[str, dict[str, int]] = {}  # bound pod -> requests, as reserved
        self._pre_enqueue_rejected: set[str] = set()  # pods a PreEnqueue plugin keeps out of the queue
        self.schedule_attempts = 0
        self._diagnosed: tuple[tuple, tuple[dict[str, int], set[str]]] | None = None  # the last FitError histogram
        self.shapes = PodShapes(self.table, profile)  # the pod's PreFilter state, cached per pod shape
        self._nominated: dict[str, dict[str, tuple[int, dict[str, int], Obj]]] = {}  # node -> pod -> (prio, req)
        self.preemption = DefaultPreemption(store, events, self._requests, self._nominated, profile, self.client)
        # The plugins beyond the node-only ones, from the registry in the profile's order (registry.py)
        self.plugins = R.build(R.Handle(store, features, gpu_policy, self.rng, self.table, self.nodes))
        self.fragmentation = FragmentationGauge(store, self.nodes, self.plugins)  # sampled by the run's metrics
        # Pods waiting in a plugin's PreBind, assumed on their node: key -> (pod, pi, node, annotations, shape,
        # cycle, attempt, the waiting plugins); the attempt tells a stale timeout from the current one.
        self._prebind: dict[str, tuple[Obj, P.PodInfo, str, dict, tuple, int, int, list[F.Plugin]]] = {}
        self._prebind_attempts = 0
        self.points = F.extension_points(self.plugins, R.FIRST)
        # the points called for every pod, as tuples (bound methods where the plugin itself is not needed)
        self._forget = tuple(p.forget for p in self.points["forget"])
        self._pre_enqueue_plugins = tuple(p.pre_enqueue for p in self.points["pre_enqueue"])
        self._pre_flight = tuple((p, p.pre_bind_pre_flight) for p in self.points["pre_bind_pre_flight"])
        self._binding_hooks = tuple(p.binding for p in self.points["binding"])
        self._added_viewers = tuple(self.points["assigned_pod_added"])
        self._added_hooks = tuple((p, p.assigned_pod_added) for p in self._added_viewers)
        self._deleted_viewers = tuple(self.points["assigned_pod_deleted"])
        # EnqueueExtensions: every plugin's registered events, in the profile's order
        self._registered = [(p.name, e) for p in self.plugins for e in p.events_to_register()]
        self._by_event: dict[tuple[str, str], Registrants] = {}
        self._node_moves: dict[str, tuple[dict, Registrants, frozenset[str]]] = {}  # per profile index
        self._cache_delete = self._cache_registrants("DELETED")
        self._add_registrants = self._cache_registrants("ADDED")[0]
        self._delete_queues_all = all(fn is None for fns in self._cache_delete[0].values() for fn in fns)
        store.admit(scheduling_gated_condition, ("Pod",))
        store.watch("Pod", self._on_pod)
        store.watch("Node", self._on_node)
        for kind in dict.fromkeys(e.event.resource for _, e in self._registered):
            if kind not in ("Pod", "Node", F.WILDCARD):  # the informers the plugins' events need
                store.watch(kind, partial(self._on_object, kind))

    def expect(self, objs: list[Obj]) -> None:
        """The scenario's objects before they are created, for the plugins that plan for them (Plugin.expect)."""
        for plugin in self.points["expect"]:
            plugin.expect(objs)

    def sample(self) -> dict[str, float | None]:
        """The run's sampled series the scheduler's cache answers (sim.outputs.Sampler): GPU fragmentation."""
        return self.fragmentation.sample()

    def contribute(self, until: float) -> Contribution:
        summary: dict = {"scheduler": {"attempts": self.schedule_attempts}, **self.fragmentation.summary()}
        if self.client.requests:
            summary["scheduler_api_client"] = self.client.summary()
        return Contribution(summary=summary)

    # -- cluster events -------------------------------------------------------------------------
    def _registrants(self, resource: str, etype: str) -> Registrants:
        """The plugins registered for a change of `resource` (`etype` as the store's watch says it), with their
        hints (buildQueueingHintMap). Cached by strings: an ActionType key would hash through Python code."""
        found = self._by_event.get((resource, etype))
        if found is None:
            found = {}
            for name, reg in self._registered:
                if reg.event.matches(resource, ACTIONS[etype]):
                    found.setdefault(name, []).append(reg.queueing_hint_fn)
            self._by_event[(resource, etype)] = found
        return found

    def _move(self, registrants: Registrants, old: object, new: object, core: Hint | None = None,
              plugins: frozenset[str] | None = None) -> None:
        """One MoveAllToActiveOrBackoffQueue for an event: a pod goes when one of the plugins that rejected it and
        registered the event says Queue (isPodWorthRequeuing); `core`: the hint of the core's own plugins
        (NodeResourcesFit, the node-only filters) for it; `plugins`: every plugin the event concerns (default: the
        registrants)."""
        def hint(plugin: str, pi: object) -> bool:
            fns = registrants.get(plugin)
            if fns is None:
                return core is not None and core(plugin, pi)
            return any(fn is None or fn(pi, old, new) is F.Queue for fn in fns)  # type: ignore[arg-type]

        self.queue.move(hint, frozenset(registrants) if plugins is None else plugins)

    def _on_object(self, kind: str, etype: str, obj: Obj, old: Obj | None) -> None:
        """An informer of a resource a plugin registered: a waiting PreBind re-checks when its plugin's hint says
        the change concerns the pod (its poll would see it), then the queue move."""
        registrants = self._registrants(kind, etype)
        if not registrants:
            return
        before, after = (obj, None) if etype == "DELETED" else (old, obj)
        for key, entry in self._prebind.items():
            if any(fn is not None and fn(entry[1], before, after) is F.Queue
                   for plugin in entry[7] for fn in registrants.get(plugin.name, ())):
                self.store.env.after(0, partial(self._check_prebind, key))
        self._move(registrants, before, after)

    def _cache_registrants(self, etype: str) -> tuple[Registrants, frozenset[str]]:
        """For an assigned pod's add or delete: the plugins registered for it that keep no view of assigned pods
        of their own, and the move's plugin names (NodeResourcesFit's too for a delete)."""
        viewers = self._added_viewers if etype == "ADDED" else self._deleted_viewers
        own = {p.name for p in viewers}
        registrants = {name: fns for name, fns in self._registrants("Pod", etype).items() if name not in own}
        return registrants, frozenset(registrants) | (_FIT if etype == "DELETED" else frozenset())

    def _assigned_pod_deleted(self, pod: Obj) -> None:
        """AssignedPodDelete as the scheduler cache saw it (room freed): one move for NodeResourcesFit and the
        plugins registered for it that keep no view of their own (those get their own moves)."""
        registrants, names = self._cache_delete
        if self._delete_queues_all:  # every one registered without a hint: Queue, nothing to ask
            self.queue.move(_queue, names)
        else:
            self._move(registrants, pod, None, _queue, names)

    def _viewer_move(self, plugin: F.Plugin, etype: str, old: Obj | None, new: Obj | None) -> None:
        """A move of its own for a plugin whose view of assigned pods changed."""
        fns = self._registrants("Pod", etype).get(plugin.name)
        if fns is not None:
            self._move({plugin.name: fns}, old, new)

    # -- informers ------------------------------------------------------------------------------
    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self.nodes.pop(name, None)
            self.table.remove(name)
            return
        fresh = NodeInfo.from_node(node)
        ni = self.nodes.get(name)
        before = None
        if ni is None:
            ni = self.nodes[name] = fresh
        else:
            before = NodeInfo(name, ni.node, ni.allocatable)
            ni.node, ni.allocatable = node, fresh.allocatable
        self.table.upsert(ni)
        change = "ADDED" if before is None else "MODIFIED"
        cached = self._node_moves.get(change)
        if cached is None or cached[0] is not self.profile.by_name:  # the core's plugins: NodeResourcesFit, filters
            registrants = self._registrants("Node", change)
            cached = self._node_moves[change] = (self.profile.by_name, registrants,
                                                 frozenset(registrants) | _FIT | frozenset(self.profile.by_name))
        regs = cached[1]
        self.queue.move(lambda plugin, pi: self._node_hint(plugin, pi, fresh, before, regs),  # type: ignore[arg-type]
                        cached[2])

    def _node_hint(self, plugin: str, pi: P.PodInfo, new: NodeInfo, old: NodeInfo | None,
                   registrants: Registrants) -> bool:
        """The QueueingHints for a Node add/update: NodeResourcesFit's and the node-only filters' (the core's), then
        those of the plugins registered for it (`registrants`, as `_move` asks them)."""
        if plugin == FIT:  # noderesources isSchedulableAfterNodeChange
            if old is not None and not any(new.allocatable.get(k, 0) > old.allocatable.get(k, 0)
                                           for k, v in pi.requests.items() if v):
                return False
            return P.node_resources_fit(pi, NodeInfo(new.name, new.node, new.allocatable))[0] == P.SUCCESS
        node_filter = self.profile.by_name.get(plugin)
        if node_filter is None:
            return any(fn is None or fn(pi, old, new) is F.Queue for fn in registrants[plugin])
        passes = node_filter.check(pi, new)[0] == P.SUCCESS
        return passes and (old is None or node_filter.check(pi, old)[0] != P.SUCCESS)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        key = pod_key(pod)
        node_name = pod["spec"].get("nodeName")
        terminal = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if etype == "DELETED" or terminal:  # the scheduler's informer drops terminal pods: a delete
            node_name = node_name or self._binding.pop(key, None)  # assumed, its Binding not written: forgotten
            if key in self._prebind:  # checkBindings: "pod does not exist any more"; the assumed pod is forgotten
                self.store.env.after(0, lambda: self._check_prebind(key))
                return
            nominated = self._clear_nomination(key)
            self.queue.forget(key)
            self._pre_enqueue_rejected.discard(key)
            for forget in self._forget:
                forget(key)
            viewers = [p for p in self._deleted_viewers if p.assigned_pod_deleted(key, pod, node_name)]
            req = self._requests.pop(key, None)
            if node_name and node_name in self.nodes and req is not None:
                self.nodes[node_name].remove_pod(pod, req)
                self.table.add_requests(node_name, req, -1)
            if (node_name and req is not None) or nominated:  # the cache freed room (or a nomination's)
                self._assigned_pod_deleted(pod)
            for plugin in viewers:  # then each plugin whose own view changed, in the profile's order
                self._viewer_move(plugin, "DELETED", pod, None)
            return
        if node_name:
            bound_now = self._binding.pop(key, None) is not None  # the scheduler's own Binding landed
            if node_name in self.nodes:
                for plugin, added in self._added_hooks:
                    if added(key, pod, node_name, bound_now):
                        self._viewer_move(plugin, "ADDED", None, pod)
            if key not in self._requests and node_name in self.nodes:
                req = pod_requests(pod)
                self._requests[key] = req
                self.nodes[node_name].add_pod(pod, req)
                self.table.add_requests(node_name, req, 1, priority_of(pod))
                if self._add_registrants:  # AssignedPodAdd for plugins registered without a view of their own
                    self._move(self._add_registrants, None, pod)
            return
        spec = pod["spec"]
        if etype == "ADDED" and spec.get("schedulerName", "default-scheduler") == "default-scheduler":
            if not spec.get("schedulingGates"):  # PreEnqueue SchedulingGates: a gated pod waits outside the queue
                self._pre_enqueue(key, pod)
        elif (old is not None and old["spec"].get("schedulingGates") and not spec.get("schedulingGates")
              and spec.get("schedulerName", "default-scheduler") == "default-scheduler"):
            self._pre_enqueue(key, pod)  # the last gate was removed: the pod update enqueues it
        elif key in self._pre_enqueue_rejected and self._pre_enqueue_status(pod) is None:
            self._pre_enqueue_rejected.discard(key)  # e.g. its claim's name is recorded: the pod update enqueues it
            self.queue.add(key, priority_of(pod))

    def _pre_enqueue_status(self, pod: Obj) -> str | None:
        """RunPreEnqueuePlugins: the first plugin's reason to keep the pod out of the queue, or None."""
        for pre_enqueue in self._pre_enqueue_plugins:
            reason = pre_enqueue(pod)
            if reason is not None:
                return reason
        return None

    def _pre_enqueue(self, key: str, pod: Obj) -> None:
        """The plugins' PreEnqueue, then into the queue (SchedulingGates' is checked by the caller). A rejected
        pod waits outside the queue until an update of it passes them all (the twin's stand-in for the rejecting
        plugin's Pod/Update events, such as a generated claim's name recorded in the pod)."""
        for pre_enqueue in self._pre_enqueue_plugins:
            if pre_enqueue(pod) is not None:
                self._pre_enqueue_rejected.add(key)
                return
        self.queue.add(key, priority_of(pod))

    def _kick(self) -> None:
        if not self._pending_run:
            self._pending_run = True
            self.store.env.after(0, self._run)

    def _run(self) -> None:
        self._pending_run = False
        while True:
            if self._busy_until > self.store.env.now:  # the loop waits for its own patch (the failure handler's)
                self._pending_run = True
                self.store.env.at(self._busy_until, self._run)
                return
            key = self.queue.pop()
            if key is None:
                return
            ns, name = key.split("/", 1)
            pod = self.store.get("Pod", ns, name)
            if pod is None or pod["spec"].get("nodeName"):
                self.queue.forget(key)
                continue
            self.schedule_one(pod)

    # -- one cycle ------------------------------------------------------------------------------
    def schedule_one(self, pod: Obj) -> str | None:
        self.schedule_attempts += 1
        cycle = self.queue.cycle
        pi, static, scores, shape = self.shapes.pod_info(pod)
        table = self.table
        order = table.scan_order()
        n = len(order)
        weights = (P.SCORE_WEIGHTS["NodeResourcesFit"], P.SCORE_WEIGHTS["NodeResourcesBalancedAllocation"])
        table.refresh(pi, scores, self.strategy, weights)
        ok_static = static.ok
        mask = ok_static & scores.fit
        override = self._nominated_fit(pi, mask) if self._nominated else {}
        to_find = num_feasible_nodes_to_find(n)
        state = F.CycleState(pod, pi, table, n, to_find, to_find, shape, mask, scores.fit)
        start = self.next_start
        if self.trace is not None:
            state.traced = {}
        try:
            if n:  # with no nodes schedulePod stops before PreFilter (ErrNoNodesAvailable)
                for plugin in self.points["pre_filter"]:
                    plugin.pre_filter(state)
            feasible, processed = table.first_feasible(state.mask, self.next_start, state.want)
            for plugin in self.points["filter_rows"]:
                feasible = plugin.filter_rows(state, feasible)
        except F.Rejected as rejected:
            self._rejected(state, rejected, cycle)
            return None
        if n:
            self.next_start = (self.next_start + processed) % n
        if not len(feasible):
            in_order = ok_static[order]
            self._unschedulable_pod(state, static, order[~in_order], order[in_order], override, cycle)
            return None
        best, selected_by = None, ""
        for plugin in self.points["select"]:  # a Score that replaces the default ones answers first
            best = plugin.select(state, feasible)
            if best is not None:
                selected_by = plugin.name
                break
        if best is None:
            best = self._select_host(pi, static, scores, feasible)
        ni = table.infos[best]
        assert ni is not None
        traced = None
        if self.trace is not None:
            traced = self._trace(state, "", T.filter_verdicts(self, state, np.roll(order, -start)[:processed],
                                                              override), feasible=feasible, selected=ni.name,
                                 selected_by=selected_by)
        annotations: dict[str, str] = {}
        for plugin in self.points["reserve"]:  # Reserve + PreBind, in the profile's order; then Bind
            annotations.update(plugin.reserve(state, best, ni.name) or {})
        key = pod_key(pod)
        waiting: list[F.Plugin] = []  # PreBindPreFlight: the plugins whose PreBind has to wait
        for plugin, pre_flight in self._pre_flight:
            if pre_flight(key):
                waiting.append(plugin)
        if waiting:  # PreBind waits (e.g. for claims to bind): the pod is assumed, not bound
            self._assume(key, pod, pi, ni)
            self._prebind_attempts += 1
            attempt = self._prebind_attempts
            self._prebind[key] = (pod, pi, ni.name, annotations, state.shape, cycle, attempt, waiting)
            self.store.env.after(0, lambda: self._check_prebind(key))
            self.store.env.after(min(p.pre_bind_timeout for p in waiting), lambda: self._check_prebind(key, attempt))
            return ni.name
        due = self._bind(pod, pi, ni, annotations or None)
        if traced is not None and due > self.store.env.now:  # explain pod: the Binding waited for a token
            traced["bindingAt"] = due
        return ni.name

    def _check_prebind(self, key: str, deadline: int | None = None) -> None:
        """The PreBind poll for a pod a plugin keeps waiting: Bind once every plugin is done; at the wait's timeout
        (`deadline`: the attempt it ends), or on a plugin's error, the binding cycle fails (schedule_one.go
        handleBindingCycleError)."""
        entry = self._prebind.get(key)
        if entry is None or (deadline is not None and entry[6] != deadline):
            return
        old, pi, node, annotations, shape, cycle, _, waiting = entry
        ns, name = key.split("/", 1)
        pod = self.store.get("Pod", ns, name)
        if pod is None or pod["metadata"].get("uid") != old["metadata"].get("uid") or (
                (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
            self._forget_assumed(key, old, node)
            return
        done, error, by = True, None, waiting[0]
        for plugin in self.points["pre_bind"]:
            plugin_done, error = plugin.pre_bind(key, pod)
            if error is not None:
                done, by = False, plugin
                break
            done = done and plugin_done
        if done:
            del self._prebind[key]
            ni = self.nodes.get(node)
            if ni is not None:
                self._bind(pod, pi, ni, annotations or None, assumed=True)
                return
            error = f'failed to get node "{node}"'
        if error is None and deadline is not None:
            error = F.DEADLINE_EXCEEDED
        if error is not None:
            self._forget_assumed(key, pod, node)
            self._failed(pod, pi, shape, cycle, by.pre_bind_failed(error), "SchedulerError", binding=True)

    def _assume(self, key: str, pod: Obj, pi: P.PodInfo, ni: NodeInfo) -> None:
        """The scheduler cache's AssumePod: the pod's requests count on the node while its binding cycle runs
        (the queue keeps its QueuedPodInfo, in flight, for a failure's requeue)."""
        self._clear_nomination(key)
        self._requests[key] = pi.requests
        ni.add_pod(pod, pi.requests)
        self.table.add_requests(ni.name, pi.requests, 1, pi.priority)

    def _forget_assumed(self, key: str, pod: Obj, node: str) -> None:
        """ForgetPod and the plugins' Unreserve after a failed binding cycle; the freed room requeues the pods
        it may help (handleBindingCycleError's AssignedPodDelete)."""
        self._prebind.pop(key, None)
        for forget in self._forget:
            forget(key)
        req = self._requests.pop(key, None)
        if req is not None and node in self.nodes:
            self.nodes[node].remove_pod(pod, req)
            self.table.add_requests(node, req, -1)
        self._assigned_pod_deleted(pod)

    def _rejected(self, state: F.CycleState, rejected: F.Rejected, cycle: int) -> None:
        """A PreFilter's rejection of every node, or a plugin's error."""
        shape = (*state.shape, *rejected.shape)
        if rejected.error:
            if self.trace is not None:
                self._trace(state, rejected.message, [], pre_filter={rejected.plugin: rejected.message})
            self._failed(state.pod, state.pi, shape, cycle, rejected.message, "SchedulerError")
            return
        msg = f"0/{state.n} nodes are available: {rejected.message}."
        if rejected.post_filter:  # all nodes UnschedulableAndUnresolvable
            post, _ = self.preemption.post_filter(state.pod, state.pi, [], state.n, state.n)
            msg += f" {post}"
        if self.trace is not None:
            self._trace(state, msg, [], pre_filter={rejected.plugin: rejected.message})
        self._failed(state.pod, state.pi, shape, cycle, msg, "Unschedulable", frozenset({rejected.plugin}))

    def _failed(self, pod: Obj, pi: P.PodInfo, shape: tuple, cycle: int, msg: str, reason: str,
                plugins: frozenset[str] = frozenset(), binding: bool = False) -> None:
        """A PreFilter rejection or a plugin error: the condition and event carry the message; `plugins` are the
        rejecting ones whose cluster events may requeue the pod (none for an error: the pod backs off). `binding`:
        a failed binding cycle, whose failure handler runs in the binding goroutine (handleBindingCycleError), so
        the scheduling loop does not wait for its patch."""
        now = self.store.timestamp(self.store.env.now)
        self._patch_status(pod, {"type": "PodScheduled", "status": "False", "reason": reason, "message": msg,
                                 "lastTransitionTime": now}, blocking=not binding)
        self.events.event(pod, "Warning", "FailedScheduling", msg, "default-scheduler")
        self.queue.failed(pod_key(pod), plugins, pi, shape, cycle)

    def _patch_status(self, pod: Obj, cond: dict, nominated: str | None = None, blocking: bool = True) -> None:
        """handleSchedulingFailure's updatePod (PatchPodStatus: the PodScheduled condition, nominatedNodeName)
        through the scheduler's client; the scheduling loop waits until it is through (`blocking`). Made on the
        pod as it is when the request goes out."""
        ns, name, uid = pod["metadata"].get("namespace") or "default", pod["metadata"]["name"], pod["metadata"].get(
            "uid")

        def write() -> None:
            cur = self.store.current("Pod", ns, name, uid)
            if cur is None or cur["spec"].get("nodeName"):
                return
            status = dict(cur.get("status") or {})
            status["phase"] = "Pending"
            status["conditions"] = _pod_scheduled(status, cond)
            if nominated:
                status["nominatedNodeName"] = nominated
            self.store.update({**cur, "status": status})

        due = self.client.send(self.store.env, "pods/status", "patch", write)
        if blocking:
            self._busy_until = max(self._busy_until, due)

    def _trace(self, state: F.CycleState, message: str, nodes: list[dict], *, feasible: np.ndarray | None = None,
               selected: str = "", selected_by: str = "", pre_filter: dict[str, str] | None = None,
               post_filter: dict | None = None) -> dict:
        """One attempt into the scheduling trace (scheduler/trace.py): the per-node Filter verdicts computed the
        scalar way (`nodes`) beside what the fast path decided (feasible nodes, chosen node, message)."""
        assert self.trace is not None
        infos = [state.table.infos[int(r)] for r in (feasible if feasible is not None else ())]
        feasible_names = [ni.name for ni in infos if ni is not None]
        return self.trace.add("Pod", {
            "pod": pod_key(state.pod), "attempt": self.schedule_attempts, "numNodes": state.n,
            "numFeasibleNodesToFind": state.to_find, "preFilter": pre_filter or {}, "filter": nodes,
            "feasibleNodes": feasible_names, "score": T.scores(self, state, feasible_names) if selected else [],
            "selectedNode": selected, "selectedBy": selected_by, "postFilter": post_filter or {},
            "message": message})

    def _nominated_fit(self, pi: P.PodInfo, mask: np.ndarray) -> dict[int, list[str]]:
        """addNominatedPods: nodes holding room for nominated pods of equal or higher priority are re-checked."""
        out: dict[int, list[str]] = {}
        me = pod_key(pi.pod)
        for node, noms in self._nominated.items():
            keep = [(req, pod) for key, (prio, req, pod) in noms.items() if key != me and prio >= pi.priority]
            r = self.table.row.get(node)
            if not keep or r is None or not mask[r]:
                continue
            ni = self.nodes[node]
            trial = NodeInfo(ni.name, ni.node, ni.allocatable, dict(ni.requested), dict(ni.nonzero_requested),
                             dict(ni.pods))
            for req, pod in keep:
                trial.add_pod(pod, req)
            code, reasons = P.node_resources_fit(pi, trial)
            mask[r] = code == P.SUCCESS
            out[r] = reasons
        return out

    def _clear_nomination(self, key: str) -> bool:
        found = False
        for noms in self._nominated.values():
            found = noms.pop(key, None) is not None or found
        return found

    def _select_host(self, pi: P.PodInfo, static: StaticVerdicts, scores: ScoreCache, rows: np.ndarray) -> int:
        if len(rows) == 1:
            return int(rows[0])
        score = scores.total[rows]
        if static.scored:  # the node-only scores, normalized as DefaultNormalizeScore (reversed for taints)
            for k, plugin in enumerate(self.profile.scores):
                raw = static.scores[k, rows]
                peak, weight = int(raw.max()), P.SCORE_WEIGHTS[plugin.name]
                if plugin.reverse:
                    score = score + ((P.MAX_NODE_SCORE - raw * P.MAX_NODE_SCORE // peak) if peak
                                     else P.MAX_NODE_SCORE) * weight
                elif peak:
                    score = score + raw * P.MAX_NODE_SCORE // peak * weight
        top = (score == score.max()).nonzero()[0]
        # selectHost samples uniformly among the nodes with the top score.
        return int(rows[top[self.rng.randrange(len(top))]]) if len(top) > 1 else int(rows[top[0]])

    def _bind(self, pod: Obj, pi: P.PodInfo, ni: NodeInfo, annotations: dict | None = None,
              assumed: bool = False) -> float:
        """The binding cycle: the pod is assumed on its node now; DefaultBinder's Binding goes through the
        scheduler's client, written when its token is due (the next cycle does not wait for it)."""
        key = pod_key(pod)
        if not assumed:
            self._assume(key, pod, pi, ni)
        self.queue.forget(key)
        self._binding[key] = ni.name
        env = self.store.env
        due = self.client.send(env, "pods/binding", "create", lambda: self._write_binding(pod, ni, annotations))
        if due > env.now:  # the cache's assumed pod counts for the plugins meanwhile
            for binding in self._binding_hooks:
                binding(key, pod, ni.name)
        return due

    def _write_binding(self, pod: Obj, ni: NodeInfo, annotations: dict | None) -> None:
        """The Binding reaches the API server: nodeName and PodScheduled=True (the pods/binding registry's
        assignPod), the scheduler's annotations; the Scheduled event (finishBinding). A pod deleted meanwhile was
        forgotten by the informer."""
        key = pod_key(pod)
        cur = self.store.current("Pod", pod["metadata"].get("namespace") or "default", pod["metadata"]["name"],
                                 pod["metadata"].get("uid"))
        if cur is None or cur["spec"].get("nodeName"):
            return
        now = self.store.timestamp(self.store.env.now)
        status = dict(cur.get("status") or {})
        status["conditions"] = _pod_scheduled(status, {"type": "PodScheduled", "status": "True",
                                                       "lastTransitionTime": now})
        status.pop("nominatedNodeName", None)
        meta = cur["metadata"]
        if annotations:
            meta = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}}
        bound = self.store.update({**cur, "metadata": meta, "spec": {**cur["spec"], "nodeName": ni.name},
                                   "status": status})
        ni.pods[key] = bound
        self.events.event(bound, "Normal", "Scheduled", f"Successfully assigned {key} to {ni.name}",
                          "default-scheduler")

    # -- failure --------------------------------------------------------------------------------
    def _unschedulable_pod(self, state: F.CycleState, static: StaticVerdicts, failed_static: np.ndarray,
                           cand: np.ndarray, override: dict[int, list[str]], cycle: int) -> None:
        t, pod, pi, n, shape = self.table, state.pod, state.pi, state.n, state.shape
        rejected = dict(state.rejected)
        unresolvable = len(failed_static)
        if len(cand):
            passed = cand[state.fit[cand]]  # the rows a vector Filter after NodeResourcesFit saw
            for plugin in self.points["rejections"]:
                reasons_of, unresolvable_of = plugin.rejections(state, passed)
                if reasons_of:
                    rejected[plugin.name] = reasons_of
                    unresolvable += unresolvable_of
        # FitError's histogram depends only on the pod's shape and the node table while no nominated pod or other
        # plugin adds reasons: pods of one shape failing one after another (a large Job that fits nowhere, after
        # each flush) share it until a node or its pods change
        memo = (shape, t.gen, t.log_base + len(t.changes)) if not override and not rejected else None
        if memo is not None and self._diagnosed is not None and self._diagnosed[0] == memo:
            reasons, plugins = self._diagnosed[1]
        else:
            reasons, plugins = diagnose(t, pi, static, failed_static, cand, override, rejected)
            if memo is not None:
                self._diagnosed = (memo, (reasons, plugins))
        victims_possible = cand[t.min_prio[cand] < pi.priority] if len(cand) else cand
        for plugin in self.points["preemptible"]:
            victims_possible = plugin.preemptible(state, victims_possible)
        considered: list[tuple[str, list[str] | None]] | None = None
        if self.trace is not None:  # the verdicts before preemption evicts anyone
            considered, verdicts = [], T.filter_verdicts(self, state, t.scan_order(), override)
        post, nominated = self.preemption.post_filter(
            pod, pi, [ni for ni in (t.infos[int(r)] for r in victims_possible) if ni is not None],
            unresolvable, n, considered, state.victims)
        msg = fit_error(n, reasons, post) if n else "no nodes available to schedule pods"
        if self.trace is not None:
            self._trace(state, msg, verdicts, post_filter={
                "message": post, "nominatedNode": nominated or "",
                "candidates": [{"node": node, "victims": v} for node, v in considered or ()]})
        key = pod_key(pod)
        now = self.store.timestamp(self.store.env.now)
        if nominated:
            self._clear_nomination(key)
            self._nominated.setdefault(nominated, {})[key] = (pi.priority, pi.requests, pod)
        old = pod.get("status", {})
        prev = find_condition(old.get("conditions"), "PodScheduled")
        if not prev or prev.get("message") != msg or (nominated and old.get("nominatedNodeName") != nominated):
            self._patch_status(pod, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": msg, "lastTransitionTime": now}, nominated)
        self.events.event(pod, "Warning", "FailedScheduling", msg, "default-scheduler")
        self.queue.failed(key, frozenset(plugins), pi, shape, cycle)


def _queue(plugin: str, pi: object) -> bool:
    """NodeResourcesFit's hint for a pod leaving a node: the room it frees may help (the twin does not narrow it to
    the resources the pending pod asks, as isSchedulableAfterPodEvent does)."""
    return True


def _pod_scheduled(status: dict, cond: dict) -> list[dict]:
    """podutil.UpdatePodCondition (pkg/api/v1/pod/util.go): PodScheduled replaced where it stands, keeping its
    lastTransitionTime while its status is unchanged (a new message is not a transition)."""
    return set_condition(status.get("conditions"), cond)[0]

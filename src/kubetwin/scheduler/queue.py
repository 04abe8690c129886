"""kube-scheduler's scheduling queue: activeQ by priority, backoff, unschedulable pods and queueing hints.

Follows pkg/scheduler/backend/queue/scheduling_queue.go: a pod that failed waits in unschedulablePods
until a cluster event that one of the plugins that rejected it registered for says it may now fit
(QueueingHint Queue), or 5 minutes pass. It then goes to activeQ once its backoff (1s doubling to 10s,
from its last attempt) has run out. A failure during whose cycle such an event happened goes straight to
backoff, so the event is not lost (moveRequestCycle).

activeQ pops in the PrioritySort plugin's order (pkg/scheduler/framework/plugins/queuesort Less): higher priority
first, then the older QueuedPodInfo.Timestamp. The Timestamp is the time the pod was first added (newQueuedPodInfo),
refreshed when it is re-added after a failed attempt (AddUnschedulableIfNotPresent), and kept when it moves from
unschedulablePods or backoffQ to activeQ; backoff counts from it (getBackoffTime). Equal priority and Timestamp (the
twin's clock gives every pod created at one instant the same time, where a real clock's nanoseconds would order them
as they were added) pop in the order they entered activeQ: deterministic, and a burst keeps its creation order.
tests/test_scheduling_queue.py ports the upstream cases (scheduling_queue_test.go).

A cluster event's move (MoveAllToActiveOrBackoffQueue) costs the number of distinct (pod group, rejecting plugins)
among the unschedulable pods, not the number of pods: they are kept in buckets by that pair, each bucket's hint is
asked once, and only the pods of buckets it moves are touched, in the order they entered unschedulablePods (upstream
ranges over a map, pkg/scheduler/backend/queue/scheduling_queue.go movePodsToActiveOrBackoffQueue, kubernetes commit
003b4460; the twin fixes that order so runs repeat). So a node pool coming up while 100,000 pods wait costs each
node's events a few hint calls instead of a pass over every waiting pod, and no event is deferred or merged (merging
the events of one instant into one move would reorder the backoff timers against the instant's other callbacks).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubetwin.sim.env import Environment

POD_MAX_IN_UNSCHEDULABLE = 300.0  # DefaultPodMaxInUnschedulablePodsDuration = 5m
INITIAL_BACKOFF, MAX_BACKOFF = 1.0, 10.0  # DefaultPodInitialBackoffDuration / DefaultPodMaxBackoffDuration
ANY_PLUGIN = "*"  # failed with no plugin to blame (no nodes at all): any event may help


@dataclass(slots=True)
class QueuedPodInfo:
    key: str
    priority: int
    attempts: int = 0
    timestamp: float = 0.0  # QueuedPodInfo.Timestamp: added, or re-added after its last failed attempt
    plugins: frozenset[str] = frozenset()  # UnschedulablePlugins of the last failure
    shape: Any = None  # what the hints need to know about the pod (the scheduler's PodInfo)
    group: Any = None  # pods of one group get the same hint verdicts (same spec as far as plugins see)
    since: float = 0.0  # when it entered unschedulablePods
    entered: int = 0  # the order it entered unschedulablePods in (moves requeue in this order)


# A hint: (plugin, pod shape) -> Queue?  The scheduler supplies one per cluster event.
Hint = Callable[[str, object], bool]


class SchedulingQueue:
    def __init__(self, env: Environment, on_ready: Callable[[], None]) -> None:
        self.env, self.on_ready = env, on_ready
        self._active: list[tuple[int, float, int, str]] = []  # (-priority, timestamp, entry order, key)
        self._in_active: dict[str, int] = {}  # key -> its live heap entry's order (older entries are stale)
        self._seq = 0
        self.info: dict[str, QueuedPodInfo] = {}
        self.unschedulable: dict[str, QueuedPodInfo] = {}
        # unschedulablePods again, by (group, UnschedulablePlugins): the pods one hint verdict covers
        self._buckets: dict[tuple[object, frozenset[str]], dict[str, QueuedPodInfo]] = {}
        self._entered = 0
        self._backoff: set[str] = set()
        self.cycle = 0
        self.move_request_cycle = -1

    def add(self, key: str, priority: int) -> None:
        """A new pending pod, or one whose backoff ended: into activeQ."""
        if key in self._in_active:
            return
        qpi = self.info.get(key)
        if qpi is None:
            qpi = self.info[key] = QueuedPodInfo(key, priority, timestamp=self.env.now)
        self._seq += 1
        self._in_active[key] = self._seq
        heapq.heappush(self._active, (-priority, qpi.timestamp, self._seq, key))
        self.on_ready()

    def pop(self) -> str | None:
        while self._active:
            _, _, seq, key = heapq.heappop(self._active)
            if self._in_active.get(key) == seq:
                del self._in_active[key]
                self._backoff.discard(key)
                self.cycle += 1
                return key
        return None

    def forget(self, key: str) -> None:
        """Bound, deleted or finished: drop it from every queue."""
        self._in_active.pop(key, None)
        self._backoff.discard(key)
        self._leave_unschedulable(key)
        self.info.pop(key, None)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + min(INITIAL_BACKOFF * 2 ** min(qpi.attempts - 1, 8), MAX_BACKOFF)

    def failed(self, key: str, plugins: frozenset[str], shape: object, group: object, cycle: int) -> None:
        """AddUnschedulableIfNotPresent after a failed cycle."""
        qpi = self.info.get(key)
        if qpi is None:
            return
        qpi.attempts += 1
        qpi.timestamp = self.env.now  # "Refresh the timestamp since the pod is re-added."
        qpi.plugins = plugins or frozenset({ANY_PLUGIN})
        qpi.shape, qpi.group = shape, group
        if self.move_request_cycle >= cycle:
            self._to_backoff(qpi)
            return
        qpi.since = self.env.now  # not in unschedulable: the pod was popped for this cycle
        self._entered += 1
        qpi.entered = self._entered
        self.unschedulable[key] = qpi
        self._buckets.setdefault((qpi.group, qpi.plugins), {})[key] = qpi
        since = qpi.since
        self.env.at(since + POD_MAX_IN_UNSCHEDULABLE, lambda: self._flush_leftover(key, since))

    def _leave_unschedulable(self, key: str) -> QueuedPodInfo | None:
        qpi = self.unschedulable.pop(key, None)
        if qpi is not None:
            bucket_key = (qpi.group, qpi.plugins)
            bucket = self._buckets[bucket_key]
            del bucket[key]
            if not bucket:
                del self._buckets[bucket_key]
        return qpi

    def _flush_leftover(self, key: str, since: float) -> None:
        qpi = self.unschedulable.get(key)
        if qpi is not None and qpi.since == since:
            self._leave_unschedulable(key)
            self._to_backoff(qpi)

    def _to_backoff(self, qpi: QueuedPodInfo) -> None:
        if qpi.key in self._backoff:
            return
        expiry = self.backoff_expiry(qpi)
        if expiry <= self.env.now:
            self.add(qpi.key, qpi.priority)
            return
        self._backoff.add(qpi.key)
        key = qpi.key
        self.env.at(expiry, lambda: self._backoff_done(key))

    def _backoff_done(self, key: str) -> None:
        if key in self._backoff:
            self._backoff.discard(key)
            qpi = self.info.get(key)
            if qpi is not None:
                self.add(key, qpi.priority)

    def move(self, hint: Hint, plugins: frozenset[str] | None = None) -> None:
        """MoveAllToActiveOrBackoffQueue: requeue the unschedulable pods the event may help.

        A pod goes when one of its rejecting plugins that the event concerns (`plugins`; None: all) says Queue for
        its group; pods of one group get one verdict per set of such plugins, asked of the first of them to have
        entered unschedulablePods, the plugins in name order."""
        self.move_request_cycle = self.cycle
        if not self.unschedulable:
            return
        asked: dict[tuple[object, frozenset[str]], QueuedPodInfo] = {}  # verdict key -> the pod it is asked for
        moving: list[tuple[tuple[object, frozenset[str]] | None, dict[str, QueuedPodInfo]]] = []  # None: any event
        for (group, rejected), bucket in self._buckets.items():
            if ANY_PLUGIN in rejected:
                moving.append((None, bucket))
                continue
            cand = rejected if plugins is None else rejected & plugins
            if not cand:
                continue
            vk = (group, cand)
            first = next(iter(bucket.values()))  # buckets keep the order pods entered in
            seen = asked.get(vk)
            if seen is None or first.entered < seen.entered:
                asked[vk] = first
            moving.append((vk, bucket))
        verdicts = {vk: any(hint(p, qpi.shape) for p in sorted(vk[1])) for vk, qpi in asked.items()}
        go = [qpi for vk, bucket in moving if vk is None or verdicts[vk] for qpi in bucket.values()]
        go.sort(key=lambda qpi: qpi.entered)
        for qpi in go:
            self._leave_unschedulable(qpi.key)
            self._to_backoff(qpi)

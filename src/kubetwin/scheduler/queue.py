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
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

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
    shape: object = None  # what the hints need to know about the pod (the scheduler's PodInfo)
    group: object = None  # pods of one group get the same hint verdicts (same spec as far as plugins see)
    since: float = 0.0  # when it entered unschedulablePods


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
        self.unschedulable.pop(key, None)
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
        qpi.since = self.env.now
        self.unschedulable[key] = qpi
        since = qpi.since
        self.env.at(since + POD_MAX_IN_UNSCHEDULABLE, lambda: self._flush_leftover(key, since))

    def _flush_leftover(self, key: str, since: float) -> None:
        qpi = self.unschedulable.get(key)
        if qpi is not None and qpi.since == since:
            del self.unschedulable[key]
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
        """MoveAllToActiveOrBackoffQueue: requeue the unschedulable pods the event may help."""
        self.move_request_cycle = self.cycle
        if not self.unschedulable:
            return
        verdicts: dict[tuple[object, frozenset[str]], bool] = {}
        for key, qpi in list(self.unschedulable.items()):
            if ANY_PLUGIN not in qpi.plugins:
                cand = qpi.plugins if plugins is None else qpi.plugins & plugins
                if not cand:
                    continue
                vk = (qpi.group, cand)
                ok = verdicts.get(vk)
                if ok is None:
                    ok = verdicts[vk] = any(hint(p, qpi.shape) for p in sorted(cand))
                if not ok:
                    continue
            del self.unschedulable[key]
            self._to_backoff(qpi)

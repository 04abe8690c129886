"""Pending workloads per ClusterQueue: a heap, the inadmissible set, and the requeue rules of the two strategies.

Ported from kubernetes-sigs/kueue pkg/cache/queue/cluster_queue.go and manager.go:

- one heap per ClusterQueue (LocalQueues only route), ordered by higher priority, then earlier queue-order
  timestamp (creation, or eviction time after a PodsReady/AdmissionCheck eviction), then UID;
- ``heads()`` pops one head per active ClusterQueue per cycle;
- after a failed attempt a workload goes back to the heap ("immediate") or to the inadmissible set:
  StrictFIFO requeues immediately for every reason except a namespace mismatch; BestEffortFIFO only after
  FailedAfterNomination, PendingPreemption or PreemptionFailed. Inadmissible workloads return to the heap only when
  something calls ``queue_inadmissible`` (workload finished or evicted, ClusterQueue/Cohort/flavor change) — or when
  such a call happened since the ClusterQueue's last pop;
- the preemptor workload (cluster_queue.go preemptorWorkload, Kueue#6929/#7101): a workload requeued with
  PendingPreemption stays at the head of its BestEffortFIFO ClusterQueue ("sticky") until it is admitted or
  deleted, so when its victims' quota is released neither a victim nor an older inadmissible workload that
  release put back in the heap pops before it (StrictFIFO tracks it too, unsticky: its order already holds);
- SchedulingEquivalenceHashing (beta, on by default since Kueue v0.18; cluster_queue.go requeueIfNotPresent): when a
  workload goes to the inadmissible set for NoFit or PreemptionNoCandidates, the workloads in the heap with the same
  scheduling hash go with it, instead of each being popped and found not to fit in cycles of their own.

Costs do not grow with the backlog beyond what moves (issue 32): the hash index covers the heap only, so a bulk
move visits the workloads it moves (Kueue's handleInadmissibleHash scans its whole heap); requeueing the inadmissible
set pushes what it moves instead of rebuilding the heap; the manager knows each workload's ClusterQueue instead of
asking every queue.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from kubetwin.kueue.api import STRICT_FIFO
from kubetwin.kueue.snapshot import WorkloadInfo

# RequeueReason values (pkg/cache/queue).
REQUEUE_GENERIC = ""
REQUEUE_FAILED_AFTER_NOMINATION = "FailedAfterNomination"
REQUEUE_NAMESPACE_MISMATCH = "NamespaceMismatch"
REQUEUE_PENDING_PREEMPTION = "PendingPreemption"
REQUEUE_PREEMPTION_FAILED = "PreemptionFailed"
REQUEUE_PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"
_BEST_EFFORT_IMMEDIATE = {REQUEUE_FAILED_AFTER_NOMINATION, REQUEUE_PENDING_PREEMPTION, REQUEUE_PREEMPTION_FAILED}
_EQUIVALENT_REASONS = {REQUEUE_GENERIC, REQUEUE_PREEMPTION_NO_CANDIDATES}  # NoFit and no candidates


def scheduling_hash(wi: WorkloadInfo) -> tuple:
    """What admission reads of a workload (workload.go computeSchedulingHash: the PodSets' shape and requests);
    the twin adds the priority, which preemption reads, so equivalent workloads are equivalent for it too."""
    return (wi.priority, tuple((ps.name, ps.count, ps.min_count, ps.requests, ps.node_selector,
                                repr(ps.required_affinity_terms), repr(ps.tolerations)) for ps in wi.obj.pod_sets))


def queue_order_key(wi: WorkloadInfo) -> tuple:
    return (-wi.priority, wi.obj.queue_order_time(), wi.obj.uid, wi.key)


@dataclass
class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue."""

    name: str
    strategy: str
    heap: list[tuple[tuple, str]] = field(default_factory=list)
    items: dict[str, WorkloadInfo] = field(default_factory=dict)  # in the heap
    inadmissible: dict[str, WorkloadInfo] = field(default_factory=dict)
    pop_cycle: int = 0
    queue_inadmissible_cycle: int = -1
    equivalence_hashing: bool = True
    # the workloads in the heap (not the inadmissible set) by scheduling hash, and each one's hash
    by_hash: dict[tuple, dict[str, None]] = field(default_factory=dict)
    hash_of: dict[str, tuple] = field(default_factory=dict)
    # per workload version: (WorkloadInfo, queue-order key, scheduling hash), computed once
    known: dict[str, tuple[WorkloadInfo, tuple, tuple]] = field(default_factory=dict)
    preemptor: str | None = None  # the sticky preemptor workload (BestEffortFIFO), popped before the heap's head

    def _facts(self, wi: WorkloadInfo) -> tuple[WorkloadInfo, tuple, tuple]:
        seen = self.known.get(wi.key)
        if seen is None or seen[0] is not wi:
            seen = self.known[wi.key] = (wi, queue_order_key(wi),
                                         scheduling_hash(wi) if self.equivalence_hashing else ())
        return seen

    def _hash(self, wi: WorkloadInfo) -> tuple:
        return self._facts(wi)[2]

    def _index(self, wi: WorkloadInfo) -> None:
        if self.equivalence_hashing:
            h = self.hash_of[wi.key] = self._hash(wi)
            self.by_hash.setdefault(h, {})[wi.key] = None

    def _unindex(self, wi: WorkloadInfo) -> None:
        h = self.hash_of.pop(wi.key, None)
        if h is not None:
            bucket = self.by_hash[h]
            bucket.pop(wi.key, None)
            if not bucket:
                del self.by_hash[h]

    def push(self, wi: WorkloadInfo) -> None:
        key = wi.key
        self.inadmissible.pop(key, None)
        old = self.items.get(key)
        if old is not wi:
            if old is not None:
                self._unindex(old)
            self._index(wi)
        self.items[key] = wi
        heapq.heappush(self.heap, (self._facts(wi)[1], key))
        if len(self.heap) > 2 * len(self.items) + 64:  # stale entries (popped sticky, updated): drop them
            self.heap = [(self._facts(w)[1], k) for k, w in self.items.items()]
            heapq.heapify(self.heap)

    def delete(self, key: str) -> WorkloadInfo | None:
        self.inadmissible.pop(key, None)
        wi = self.items.pop(key, None)  # heap entry is dropped lazily
        if wi is not None:
            self._unindex(wi)
        self.known.pop(key, None)
        if key == self.preemptor:  # cluster_queue.go delete: "Clearing preemptor workload"
            self.preemptor = None
        return wi

    def pop(self) -> WorkloadInfo | None:
        sticky = self.items.pop(self.preemptor, None) if self.preemptor is not None else None
        if sticky is not None:  # its heap entry is dropped lazily
            self._unindex(sticky)
            self.pop_cycle += 1
            return sticky
        while self.heap:
            order, key = heapq.heappop(self.heap)
            wi = self.items.get(key)
            if wi is not None and self._facts(wi)[1] == order:
                del self.items[key]
                self._unindex(wi)
                self.pop_cycle += 1
                return wi
        return None

    def requeue(self, wi: WorkloadInfo, reason: str) -> None:
        """RequeueIfNotPresent: back to the heap or into the inadmissible set, per the queueing strategy."""
        if reason == REQUEUE_PENDING_PREEMPTION and self.strategy != STRICT_FIFO:
            self.preemptor = wi.key
        if wi.key in self.items or wi.key in self.inadmissible:
            return
        if self.strategy == STRICT_FIFO:
            immediate = reason != REQUEUE_NAMESPACE_MISMATCH
        else:
            immediate = reason in _BEST_EFFORT_IMMEDIATE
        if immediate or self.queue_inadmissible_cycle >= self.pop_cycle:
            self.push(wi)
            return
        self.inadmissible[wi.key] = wi
        if self.equivalence_hashing and reason in _EQUIVALENT_REASONS:
            for key in self.by_hash.pop(self._hash(wi), ()):  # every one is in the heap: move them all
                self.hash_of.pop(key, None)
                self.inadmissible[key] = self.items.pop(key)  # its heap entry stays, stale until it comes back

    def queue_inadmissible(self) -> bool:
        """Move every inadmissible workload back to the heap."""
        self.queue_inadmissible_cycle = self.pop_cycle
        moved = bool(self.inadmissible)
        if moved:  # a push per workload moved (a heap entry it may still have is harmless: pop checks the order)
            entries = []
            for key, wi in self.inadmissible.items():
                self.items[key] = wi
                self._index(wi)
                entries.append((self._facts(wi)[1], key))
            self.inadmissible.clear()
            if len(self.heap) + len(entries) > 2 * len(self.items) + 64:  # stale entries: rebuild the heap
                self.heap = [(self._facts(wi)[1], key) for key, wi in self.items.items()]
                heapq.heapify(self.heap)
            elif 8 * len(entries) < len(self.heap):
                for entry in entries:
                    heapq.heappush(self.heap, entry)
            else:
                self.heap.extend(entries)
                heapq.heapify(self.heap)
        return moved

    def active(self) -> list[str]:
        """Keys in the heap, in pop order (the sticky preemptor first)."""
        return [wi.key for wi in sorted(self.items.values(),
                                        key=lambda wi: (wi.key != self.preemptor, queue_order_key(wi)))]

    def pending_inadmissible(self) -> list[str]:
        return sorted(self.inadmissible)


class QueueManager:
    """All ClusterQueue queues, routing through LocalQueues (namespace/name -> ClusterQueue)."""

    def __init__(self) -> None:
        self.queues: dict[str, ClusterQueueQueue] = {}
        self.local_queues: dict[tuple[str, str], str] = {}
        self.orphans: dict[str, WorkloadInfo] = {}  # pending workloads whose LocalQueue/ClusterQueue is missing
        # workload key -> the ClusterQueues it was pushed or requeued to (a superset of where it is: delete and
        # location check these instead of every queue)
        self._where: dict[str, set[str]] = {}
        self._names: list[str] | None = None  # the queue names, sorted (None: to sort again)

    def set_cluster_queue(self, name: str, strategy: str) -> None:
        q = self.queues.get(name)
        if q is None:
            self.queues[name] = ClusterQueueQueue(name, strategy)
            self._names = None
            self._adopt_orphans()
        else:
            q.strategy = strategy

    def delete_cluster_queue(self, name: str) -> None:
        q = self.queues.pop(name, None)
        self._names = None
        if q is not None:
            for wi in list(q.items.values()) + list(q.inadmissible.values()):
                self.orphans[wi.key] = wi

    def set_local_queue(self, namespace: str, name: str, cluster_queue: str) -> None:
        self.local_queues[(namespace, name)] = cluster_queue
        self._adopt_orphans()

    def delete_local_queue(self, namespace: str, name: str) -> None:
        self.local_queues.pop((namespace, name), None)
        for q in self.queues.values():
            for wi in list(q.items.values()) + list(q.inadmissible.values()):
                if wi.obj.namespace == namespace and wi.obj.queue_name == name:
                    q.delete(wi.key)
                    self.orphans[wi.key] = wi

    def cluster_queue_for(self, namespace: str, queue_name: str) -> str | None:
        return self.local_queues.get((namespace, queue_name))

    def _adopt_orphans(self) -> None:
        for key in sorted(self.orphans):
            wi = self.orphans[key]
            cq = self.cluster_queue_for(wi.obj.namespace, wi.obj.queue_name)
            if cq is not None and cq in self.queues:
                del self.orphans[key]
                wi.cluster_queue = cq
                self._push(cq, wi)

    def add_or_update(self, wi: WorkloadInfo) -> bool:
        """Queue a pending workload in its ClusterQueue's heap; False if its LocalQueue or ClusterQueue is missing."""
        self.delete(wi.key)
        cq = self.cluster_queue_for(wi.obj.namespace, wi.obj.queue_name)
        if cq is None or cq not in self.queues:
            self.orphans[wi.key] = wi
            return False
        wi.cluster_queue = cq
        self._push(cq, wi)
        return True

    def _push(self, cq: str, wi: WorkloadInfo) -> None:
        self._where.setdefault(wi.key, set()).add(cq)
        self.queues[cq].push(wi)

    def delete(self, key: str) -> None:
        self.orphans.pop(key, None)
        for name in self._where.pop(key, ()):
            q = self.queues.get(name)
            if q is not None:
                q.delete(key)

    def names(self) -> list[str]:
        """The ClusterQueue names, sorted (kept until a queue is added or deleted)."""
        if self._names is None:
            self._names = sorted(self.queues)
        return self._names

    def heads(self, active: set[str]) -> list[WorkloadInfo]:
        """Pop one head from every active ClusterQueue, in ClusterQueue name order."""
        heads = []
        for name in self.names():
            if name not in active:
                continue
            wi = self.queues[name].pop()
            if wi is not None:
                heads.append(wi)
        return heads

    def requeue(self, wi: WorkloadInfo, reason: str) -> None:
        q = self.queues.get(wi.cluster_queue)
        if q is None:
            self.orphans[wi.key] = wi
            return
        self._where.setdefault(wi.key, set()).add(wi.cluster_queue)
        q.requeue(wi, reason)

    def queue_inadmissible(self, cluster_queues: list[str]) -> None:
        for name in sorted(set(cluster_queues)):
            if name in self.queues:
                self.queues[name].queue_inadmissible()

    def admitted(self, key: str, cluster_queue: str) -> None:
        """The workload got quota: it leaves its queue (manager.go DeleteWorkload on the reservation), and stops
        being the preemptor it may have been."""
        q = self.queues.get(cluster_queue)
        if q is not None:
            q.delete(key)
        where = self._where.get(key)
        if where is not None:
            where.discard(cluster_queue)
            if not where:
                del self._where[key]

    def location(self, key: str) -> tuple[str, str] | None:
        """(ClusterQueue, 'active'|'inadmissible') of a pending workload, None if it is not queued."""
        for name in sorted(self._where.get(key, ())):
            q = self.queues.get(name)
            if q is None:
                continue
            if key in q.items:
                return name, "active"
            if key in q.inadmissible:
                return name, "inadmissible"
        return None

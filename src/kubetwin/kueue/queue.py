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
  scheduling hash go with it, instead of each being popped and found not to fit in cycles of their own; and until
  the inadmissible set is next requeued, a workload of that hash that arrives (or comes back, e.g. evicted) goes
  straight to the inadmissible set too (BestEffortFIFO: PushOrUpdate reads hashToBulkMoveReason, which
  queueInadmissibleWorkloads clears, inadmissible_workloads.go).

Costs do not grow with the backlog (issue 32): a queue keeps its workloads in batches of one scheduling hash, so a
bulk move parks the hash's batches and requeueing the inadmissible set brings each batch back whole, at a cost per
batch instead of per workload (Kueue's handleInadmissibleHash scans its whole heap and QueueInadmissibleWorkloads
pushes every workload back; the order of pops is the same); the manager knows each workload's ClusterQueue instead
of asking every queue.
"""

from __future__ import annotations

import heapq

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
                                repr(ps.required_affinity_terms), repr(ps.tolerations), ps.topology_request)
                                for ps in wi.obj.pod_sets))


def queue_order_key(wi: WorkloadInfo) -> tuple:
    return (-wi.priority, wi.obj.queue_order_time(), wi.obj.uid, wi.key)


class _Batch:
    """Workloads of one scheduling hash that entered the heap between two bulk moves, in a heap of their own: a bulk
    move parks the hash's batches (the inadmissible set) and requeueing brings them back, each as a unit."""

    __slots__ = ("hash", "heap", "members", "parked", "top")

    def __init__(self, h: tuple) -> None:
        self.hash = h
        self.heap: list[tuple[tuple, str]] = []  # (queue-order key, workload key), stale entries dropped lazily
        self.members: dict[str, WorkloadInfo] = {}
        self.parked = False
        self.top: tuple | None = None  # the order of its one current entry in the queue's heap of batches


class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue: the heap (``items``) and the inadmissible set (``inadmissible``).

    Kept as batches of equivalent workloads under a heap of batch heads, so that moving a hash's workloads to the
    inadmissible set and all of them back costs per batch, not per workload (issue 32: the cost of a cycle must not
    grow with the backlog); a popped head that goes inadmissible alone is kept apart ("loose")."""

    def __init__(self, name: str, strategy: str, equivalence_hashing: bool = True) -> None:
        self.name = name
        self.strategy = strategy
        self.pop_cycle = 0
        self.queue_inadmissible_cycle = -1
        self.equivalence_hashing = equivalence_hashing  # the SchedulingEquivalenceHashing gate
        self.preemptor: str | None = None  # the sticky preemptor workload (BestEffortFIFO), popped before the head
        # per workload version: (WorkloadInfo, queue-order key, scheduling hash), computed once
        self.known: dict[str, tuple[WorkloadInfo, tuple, tuple]] = {}
        self._batch_of: dict[str, _Batch] = {}
        self._open: dict[tuple, _Batch] = {}  # per hash, the batch arrivals join
        self._active: dict[tuple, list[_Batch]] = {}  # per hash, its batches in the heap
        self._parked: list[_Batch] = []
        # hashToBulkMoveReason's keys: the hashes bulk-moved since the inadmissible set was last requeued, and per
        # such hash the parked batch its arrivals join
        self._bulk_moved: dict[tuple, _Batch | None] = {}
        self._loose: dict[str, WorkloadInfo] = {}  # inadmissible, in no batch
        self._top: list[tuple[tuple, int, _Batch]] = []  # (batch head's order, sequence, batch)
        self._seq = 0
        self._members = 0  # workloads in batches
        self._parked_members = 0

    def _facts(self, wi: WorkloadInfo) -> tuple[WorkloadInfo, tuple, tuple]:
        seen = self.known.get(wi.key)
        if seen is None or seen[0] is not wi:
            seen = self.known[wi.key] = (wi, queue_order_key(wi),
                                         scheduling_hash(wi) if self.equivalence_hashing else ())
        return seen

    # -- views -----------------------------------------------------------------------------------------------------
    @property
    def items(self) -> dict[str, WorkloadInfo]:
        """The workloads in the heap (a copy)."""
        return {k: wi for batches in self._active.values() for b in batches for k, wi in b.members.items()}

    @property
    def inadmissible(self) -> dict[str, WorkloadInfo]:
        """The inadmissible set (a copy)."""
        return {**self._loose, **{k: wi for b in self._parked for k, wi in b.members.items()}}

    def counts(self) -> tuple[int, int]:
        """(workloads in the heap, workloads in the inadmissible set)."""
        return self._members - self._parked_members, self._parked_members + len(self._loose)

    def is_active(self, key: str) -> bool:
        b = self._batch_of.get(key)
        return b is not None and not b.parked

    def is_inadmissible(self, key: str) -> bool:
        b = self._batch_of.get(key)
        return key in self._loose or (b is not None and b.parked)

    # -- moves -----------------------------------------------------------------------------------------------------
    def _forget(self, key: str) -> None:
        self._loose.pop(key, None)
        b = self._batch_of.pop(key, None)
        if b is not None:
            del b.members[key]  # its heap entry is dropped lazily
            self._members -= 1
            if b.parked:
                self._parked_members -= 1

    def _valid(self, b: _Batch, entry: tuple[tuple, str]) -> bool:
        wi = b.members.get(entry[1])
        return wi is not None and self._facts(wi)[1] == entry[0]

    def _seat(self, b: _Batch) -> None:
        """Give the batch one current entry, for its head, in the heap of batches."""
        heap = b.heap
        while heap and not self._valid(b, heap[0]):
            heapq.heappop(heap)
        b.top = heap[0][0] if heap else None
        if heap:
            self._seq += 1
            heapq.heappush(self._top, (heap[0][0], self._seq, b))

    def push(self, wi: WorkloadInfo) -> None:
        key = wi.key
        self._forget(key)
        _, order, h = self._facts(wi)
        b = self._open.get(h)
        if b is None:
            b = self._open[h] = _Batch(h)
            self._active.setdefault(h, []).append(b)
        b.members[key] = wi
        self._batch_of[key] = b
        self._members += 1
        heapq.heappush(b.heap, (order, key))
        if len(b.heap) > 2 * len(b.members) + 64:  # stale entries (popped sticky, updated): drop them
            b.heap = [(self._facts(w)[1], k) for k, w in b.members.items()]
            heapq.heapify(b.heap)
            self._seat(b)
        elif b.heap[0][1] == key and b.heap[0][0] == order:
            b.top = order
            self._seq += 1
            heapq.heappush(self._top, (order, self._seq, b))

    def push_or_update(self, wi: WorkloadInfo, was_active: bool) -> None:
        """PushOrUpdate of an added or updated workload (not a requeue after a cycle): into the heap, or -- its
        hash bulk-moved, BestEffortFIFO, and it was not in the heap already -- into the inadmissible set, joining
        that hash's parked arrivals, so a backlog of equivalents costs nothing until quota is released."""
        if was_active or self.strategy == STRICT_FIFO or not self._bulk_moved:
            self.push(wi)
            return
        _, order, h = self._facts(wi)
        if h not in self._bulk_moved:
            self.push(wi)
            return
        b = self._bulk_moved[h]
        if b is None:
            b = self._bulk_moved[h] = _Batch(h)
            b.parked = True
            self._parked.append(b)
        self._forget(wi.key)
        b.members[wi.key] = wi
        self._batch_of[wi.key] = b
        self._members += 1
        self._parked_members += 1
        heapq.heappush(b.heap, (order, wi.key))

    def delete(self, key: str) -> WorkloadInfo | None:
        b = self._batch_of.get(key)
        wi = b.members.get(key) if b is not None and not b.parked else None
        self._forget(key)
        self.known.pop(key, None)
        if key == self.preemptor:  # cluster_queue.go delete: "Clearing preemptor workload"
            self.preemptor = None
        return wi

    def pop(self) -> WorkloadInfo | None:
        if self.preemptor is not None and self.is_active(self.preemptor):
            sticky = self._batch_of[self.preemptor].members[self.preemptor]
            self._forget(self.preemptor)
            self.pop_cycle += 1
            return sticky
        top = self._top
        while top:
            order, _, b = top[0]
            if b.parked or order != b.top:
                heapq.heappop(top)
                continue
            heap = b.heap
            while heap and not self._valid(b, heap[0]):
                heapq.heappop(heap)
            if not heap:
                heapq.heappop(top)
                b.top = None
                continue
            if heap[0][0] != order:  # its head left: seat it again
                heapq.heappop(top)
                self._seat(b)
                continue
            key = heapq.heappop(heap)[1]
            heapq.heappop(top)
            wi = b.members[key]
            self._forget(key)
            self._seat(b)
            self.pop_cycle += 1
            return wi
        return None

    def contains(self, key: str) -> bool:
        return key in self._batch_of or key in self._loose

    def requeue(self, wi: WorkloadInfo, reason: str) -> None:
        """RequeueIfNotPresent: back to the heap or into the inadmissible set, per the queueing strategy."""
        if reason == REQUEUE_PENDING_PREEMPTION and self.strategy != STRICT_FIFO:
            self.preemptor = wi.key
        if self.contains(wi.key):
            return
        if self.strategy == STRICT_FIFO:
            immediate = reason != REQUEUE_NAMESPACE_MISMATCH
        else:
            immediate = reason in _BEST_EFFORT_IMMEDIATE
        if immediate or self.queue_inadmissible_cycle >= self.pop_cycle:
            self.push(wi)
            return
        self._loose[wi.key] = wi
        if self.equivalence_hashing and reason in _EQUIVALENT_REASONS:  # the heap's equivalents go with it
            h = self._facts(wi)[2]
            self._bulk_moved.setdefault(h, None)
            self._open.pop(h, None)
            for b in self._active.pop(h, ()):
                b.parked = True
                self._parked_members += len(b.members)
                self._parked.append(b)

    def queue_inadmissible(self) -> bool:
        """Move every inadmissible workload back to the heap."""
        self.queue_inadmissible_cycle = self.pop_cycle
        self._bulk_moved = {}  # "Clear bulk-move scheduling hashes so re-queued workloads are re-evaluated fresh"
        moved = bool(self._loose) or self._parked_members > 0
        for b in self._parked:
            if b.members:
                b.parked = False
                self._active.setdefault(b.hash, []).append(b)
                self._seat(b)
        self._parked = []
        self._parked_members = 0
        loose, self._loose = self._loose, {}
        for wi in loose.values():
            self.push(wi)
        return moved

    def active(self) -> list[str]:
        """Keys in the heap, in pop order (the sticky preemptor first)."""
        return [wi.key for wi in sorted(self.items.values(),
                                        key=lambda wi: (wi.key != self.preemptor, queue_order_key(wi)))]

    def pending_inadmissible(self) -> list[str]:
        return sorted(self.inadmissible)


class QueueManager:
    """All ClusterQueue queues, routing through LocalQueues (namespace/name -> ClusterQueue)."""

    def __init__(self, equivalence_hashing: bool = True) -> None:
        self.equivalence_hashing = equivalence_hashing
        self.queues: dict[str, ClusterQueueQueue] = {}
        self.local_queues: dict[tuple[str, str], str] = {}
        self.orphans: dict[str, WorkloadInfo] = {}  # pending workloads whose LocalQueue/ClusterQueue is missing
        # workload key -> the ClusterQueues it was pushed or requeued to (a superset of where it is: delete and
        # location check these instead of every queue)
        self._where: dict[str, set[str]] = {}
        # the queues that may have workloads in their heap (a superset: heads and any_active visit these only)
        self._ready: set[str] = set()
        # the queues whose pending numbers may have changed since the last take_touched (for queue status)
        self._touched: set[str] = set()

    def set_cluster_queue(self, name: str, strategy: str) -> None:
        q = self.queues.get(name)
        if q is None:
            self.queues[name] = ClusterQueueQueue(name, strategy, equivalence_hashing=self.equivalence_hashing)
            self._touched.add(name)
            self._adopt_orphans()
        else:
            q.strategy = strategy

    def delete_cluster_queue(self, name: str) -> None:
        q = self.queues.pop(name, None)
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
                    self._touched.add(q.name)
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
        cq = self.cluster_queue_for(wi.obj.namespace, wi.obj.queue_name)
        q = self.queues.get(cq) if cq is not None else None
        was_active = q is not None and q.is_active(wi.key)
        self.delete(wi.key)
        if cq is None or q is None:
            self.orphans[wi.key] = wi
            return False
        wi.cluster_queue = cq
        self._where.setdefault(wi.key, set()).add(cq)
        self._ready.add(cq)
        self._touched.add(cq)
        q.push_or_update(wi, was_active)
        return True

    def _push(self, cq: str, wi: WorkloadInfo) -> None:
        self._where.setdefault(wi.key, set()).add(cq)
        self._ready.add(cq)
        self._touched.add(cq)
        self.queues[cq].push(wi)

    def delete(self, key: str) -> None:
        self.orphans.pop(key, None)
        for name in self._where.pop(key, ()):
            q = self.queues.get(name)
            if q is not None:
                q.delete(key)
                self._touched.add(name)

    def take_touched(self) -> set[str]:
        """The queues whose pending numbers may have changed since the last call (existing queues only)."""
        touched, self._touched = self._touched, set()
        return {name for name in touched if name in self.queues}

    def any_active(self) -> bool:
        """Whether some queue has a workload in its heap (a cost per queue that may have one, not per queue)."""
        for name in list(self._ready):  # any order: the answer is the same
            q = self.queues.get(name)
            if q is not None and q.counts()[0]:
                return True
            self._ready.discard(name)
        return False

    def heads(self, active: set[str]) -> list[WorkloadInfo]:
        """Pop one head from every active ClusterQueue, in ClusterQueue name order (only queues that may have
        one are visited: the cost of a cycle is per head, not per ClusterQueue)."""
        heads = []
        for name in sorted(self._ready):
            q = self.queues.get(name)
            if q is None or not q.counts()[0]:
                self._ready.discard(name)
                continue
            if name not in active:
                continue
            wi = q.pop()
            self._touched.add(name)
            if wi is not None:
                heads.append(wi)
        return heads

    def requeue(self, wi: WorkloadInfo, reason: str) -> None:
        q = self.queues.get(wi.cluster_queue)
        if q is None:
            self.orphans[wi.key] = wi
            return
        self._where.setdefault(wi.key, set()).add(wi.cluster_queue)
        self._ready.add(wi.cluster_queue)
        self._touched.add(wi.cluster_queue)
        q.requeue(wi, reason)

    def queue_inadmissible(self, cluster_queues: list[str]) -> None:
        for name in sorted(set(cluster_queues)):
            if name in self.queues:
                if self.queues[name].queue_inadmissible():
                    self._ready.add(name)
                    self._touched.add(name)

    def admitted(self, key: str, cluster_queue: str) -> None:
        """The workload got quota: it leaves its queue (manager.go DeleteWorkload on the reservation), and stops
        being the preemptor it may have been."""
        q = self.queues.get(cluster_queue)
        if q is not None:
            q.delete(key)
            self._touched.add(cluster_queue)
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
            if q.is_active(key):
                return name, "active"
            if q.is_inadmissible(key):
                return name, "inadmissible"
        return None

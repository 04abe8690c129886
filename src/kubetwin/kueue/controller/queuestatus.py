"""ClusterQueue and LocalQueue status, kept as Kueue's cache keeps it: incrementally.

The scheduler's cache tells this class of every workload that takes or releases quota (`KueueScheduler.listeners`),
so usage per ClusterQueue and flavor-resource is a running sum, not a scan of every admitted workload. `flush()`
writes only the queues whose numbers changed (apis/kueue/v1beta2 clusterqueue_types.go ClusterQueueStatus:
pendingWorkloads, reservingWorkloads, admittedWorkloads, flavorsReservation, flavorsUsage; localqueue_types.go).
"""

from __future__ import annotations

from collections import Counter

from kubetwin.kueue import api
from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.metrics import KueueMetrics
from kubetwin.kueue.snapshot import WorkloadInfo
from kubetwin.store.store import Obj, Store


class QueueStatus:
    def __init__(self, store: Store, sched: KueueScheduler, metrics: KueueMetrics) -> None:
        self.store, self.sched, self.metrics = store, sched, metrics
        self.usage: dict[str, Counter[tuple[str, str]]] = {}  # ClusterQueue -> (flavor, resource) -> amount
        self.reserving: Counter[str] = Counter()
        self.lq_reserving: Counter[tuple[str, str]] = Counter()
        self._dirty: set[str] = set()
        self._written: dict[str, tuple] = {}  # ClusterQueue -> the numbers last written
        self._lq_written: dict[tuple[str, str], tuple[int, int]] = {}
        self._retry: set[str] = set()  # queues whose status could not be written (spec or object missing)
        sched.listeners.append((self._reserved, self._released))

    def _reserved(self, wi: WorkloadInfo) -> None:
        self._count(wi, 1)

    def _released(self, wi: WorkloadInfo) -> None:
        self._count(wi, -1)

    def _count(self, wi: WorkloadInfo, sign: int) -> None:
        cq = wi.cluster_queue
        self.reserving[cq] += sign
        self.lq_reserving[(wi.obj.namespace, wi.obj.queue_name)] += sign
        usage = self.usage.setdefault(cq, Counter())
        for fr, v in wi.usage.items():
            usage[fr] += sign * v
        self._dirty.add(cq)

    def touch_all(self) -> None:
        """A spec changed: every queue's status may read differently."""
        self._dirty |= set(self.sched.cluster_queues)
        self._written.clear()

    def flush(self) -> None:
        """Write the queues whose numbers changed: only those the queue manager touched since the last flush (and
        the dirty ones) are looked at, so a flush costs per queue touched, not per ClusterQueue (issue 32)."""
        queues = self.sched.queues.queues
        looked = self.sched.queues.take_touched() | self._retry | {n for n in self._dirty if n in queues}
        queued = {name: queues[name].counts() for name in looked}
        changed = {cq for cq, n in queued.items() if self._written.get(cq, (None,))[0] != n} | self._dirty
        self._dirty = set()
        self._retry = set()
        if not changed:
            return
        for name in sorted(changed):
            spec = self.sched.cluster_queues.get(name)
            cq = self.store.get("ClusterQueue", "", name)
            if spec is None or cq is None:
                if name in queues:
                    self._retry.add(name)  # not written: look at it again next time
                continue
            pending = queued.get(name, (0, 0))
            usage = self.usage.get(name, Counter())
            key = (pending, self.reserving[name], tuple(sorted(usage.items())))
            if self._written.get(name) == key:
                continue
            self._written[name] = key
            self._write_cluster_queue(cq, spec, sum(pending), usage)
            self._write_local_queues(name)
        self.metrics.sample({cq: queued.get(cq, (0, 0)) for cq in changed}, self.reserving)  # sample sorts

    def _write_cluster_queue(self, cq: Obj, spec: api.ClusterQueue, pending: int,
                             usage: Counter[tuple[str, str]]) -> None:
        flavors = [{"name": fq.name, "resources": [
            {"name": r, "total": api.format_amount(r, usage[(fq.name, r)]),
             "borrowed": api.format_amount(r, max(0, usage[(fq.name, r)] - q.nominal))} for r, q in fq.resources]}
            for rg in spec.resource_groups for fq in rg.flavors]
        reserving = self.reserving[spec.name]
        status = {**(cq.get("status") or {}), "pendingWorkloads": pending, "reservingWorkloads": reserving,
                  "admittedWorkloads": reserving, "flavorsReservation": flavors, "flavorsUsage": flavors}
        if status != cq.get("status"):
            self.store.update({**cq, "status": status})

    def _write_local_queues(self, cluster_queue: str) -> None:
        """The LocalQueues routing to one ClusterQueue: their pending and admitted workloads."""
        lqs = [k for k, cq in self.sched.queues.local_queues.items() if cq == cluster_queue]
        if not lqs:
            return
        pending: Counter[tuple[str, str]] = Counter()
        q = self.sched.queues.queues.get(cluster_queue)
        if q is not None and len(lqs) == 1:
            pending[lqs[0]] = sum(q.counts())  # the one LocalQueue holds them all
        elif q is not None:
            for wi in list(q.items.values()) + list(q.inadmissible.values()):
                pending[(wi.obj.namespace, wi.obj.queue_name)] += 1
        for ns, name in sorted(lqs):
            numbers = (pending[(ns, name)], self.lq_reserving[(ns, name)])
            lq = self.store.get("LocalQueue", ns, name)
            if lq is None or self._lq_written.get((ns, name)) == numbers:
                continue
            self._lq_written[(ns, name)] = numbers
            status = {**(lq.get("status") or {}), "pendingWorkloads": numbers[0], "reservingWorkloads": numbers[1],
                      "admittedWorkloads": numbers[1]}
            if status != lq.get("status"):
                self.store.update({**lq, "status": status})

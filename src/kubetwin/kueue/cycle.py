"""One Kueue scheduling cycle, and ``KueueScheduler``: the queue manager plus the cache of quota-holding workloads.

Ported from kubernetes-sigs/kueue pkg/scheduler/scheduler.go (schedule, nominate, getInitialAssignments,
processEntry, fits, reserveCapacityForUnreclaimablePreempt, resourcesToReserve, makeClassicalIterator,
requeueAndUpdate, admit) and pkg/scheduler/preemption/preemption.go (IssuePreemptions).

Contract for the store-side controller (plain data in, decisions out; nothing here touches the store):

- Tell the scheduler about specs: ``apply(obj)`` / ``delete(kind, name, namespace)`` for ClusterQueue, Cohort,
  ResourceFlavor, LocalQueue, WorkloadPriorityClass dicts (v1beta1 or v1beta2), ``set_namespace(name, labels)``.
  Spec changes requeue every inadmissible workload, as Kueue's cluster-queue/cohort/flavor events do.
- Workloads: ``add_workload(obj)`` for a Workload dict; one holding quota (status.admission and QuotaReserved=True)
  is recorded in the cache, one that is active and pending is queued. ``remove_workload(key)`` when it is deleted,
  finished, or its quota is released after an eviction: that frees quota and requeues the inadmissible workloads of
  its cohort tree. ``queue_inadmissible(cq_or_cohort)`` does the latter explicitly.
- ``schedule(now)`` runs one cycle and returns a ``CycleResult``. Admitted workloads are assumed in the cache at once
  (write ``status.admission`` and the conditions listed). Victims stay in the cache, marked evicted, until the
  controller calls ``remove_workload`` for them (Kueue releases quota only when the eviction is observed);
  the preemptor stays queued (active) and is admitted by a later cycle once the quota is free.
- ``CycleResult.pending`` holds every head not admitted: ``queue`` says whether it went back to the heap ("active")
  or the inadmissible set; ``preempting`` lists the victims it waits for; ``skipped_preemptions`` counts per
  ClusterQueue the preemptions skipped this cycle.
- ``KueueScheduler(partial_admission=True, fair_sharing=False, fair_sharing_strategies=None)`` mirrors the
  PartialAdmission gate and the Configuration's fairSharing with its preemptionStrategies (None: Kueue's default
  [LessThanOrEqualToFinalShare, LessThanInitialShare]; [LessThanOrEqualToFinalShare] or [LessThanInitialShare]
  alone are the other accepted lists).
- Workload keys are "namespace/name". Times are epoch seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from kubetwin.k8s.conditions import set_conditions
from kubetwin.k8s.labels import selects
from kubetwin.kueue import api
from kubetwin.kueue.fairsharing import fair_sharing_order
from kubetwin.kueue.flavorassigner import (
    FIT,
    MODE_NAMES,
    NO_FIT,
    PREEMPT_MODE,
    TOPOLOGY_PLACEMENT_FAILED,
    Assignment,
    FlavorAssigner,
)
from kubetwin.kueue.outcomes import (
    EXCEEDS_MAX_QUOTA,
    MISCONFIGURED,
    NO_MATCHING_FLAVOR,
    PENDING,
    WAITING_FOR_PREEMPTED_WORKLOADS,
    WAITING_FOR_QUOTA,
    Admitted,
    CycleResult,
    Pending,
    Victim,
    condition,
    reset_eviction,
)
from kubetwin.kueue.podset_reducer import PodSetReducer
from kubetwin.kueue.preemption import Preemptor
from kubetwin.kueue.preemption.common import Target, can_always_reclaim, preemption_message
from kubetwin.kueue.preemption.fairsharing import validate_strategies
from kubetwin.kueue.queue import (
    REQUEUE_FAILED_AFTER_NOMINATION,
    REQUEUE_GENERIC,
    REQUEUE_NAMESPACE_MISMATCH,
    REQUEUE_PENDING_PREEMPTION,
    REQUEUE_PREEMPTION_NO_CANDIDATES,
    QueueManager,
)
from kubetwin.kueue.quota import ResourceNode
from kubetwin.kueue.snapshot import ClusterQueueSnapshot, Snapshot, Usage, WorkloadInfo, admission_usage
from kubetwin.kueue.tas.assignment import Assignment as TopologyAssignment
from kubetwin.kueue.tas.snapshot import TASFlavorSnapshot
from kubetwin.sim.trace import SchedulingTrace

_SEVERITY = {TOPOLOGY_PLACEMENT_FAILED: 1, WAITING_FOR_QUOTA: 2, EXCEEDS_MAX_QUOTA: 3, NO_MATCHING_FLAVOR: 4}


def no_fit_reason(assignment: Assignment) -> str:
    """The QuotaReserved=False reason of a NoFit assignment (flavorassigner.go resolveNoFitReason)."""
    overall = ""
    for ps in assignment.pod_sets:
        if ps.representative_mode() != NO_FIT:
            continue
        if ps.error is not None or not ps.attempts:
            reason = NO_MATCHING_FLAVOR
        else:
            reason = ""
            for att in ps.attempts:
                if att.mode != NO_FIT:
                    continue
                worst = max((_reason_of(r) for r in att.reasons), key=lambda r: _SEVERITY.get(r, 0),
                            default=WAITING_FOR_QUOTA)
                if not reason or _SEVERITY[worst] < _SEVERITY[reason]:
                    reason = worst
            reason = reason or WAITING_FOR_QUOTA
        if not overall or _SEVERITY[reason] > _SEVERITY[overall]:
            overall = reason
    return overall or WAITING_FOR_QUOTA


def _reason_of(text: str) -> str:
    if text == TOPOLOGY_PLACEMENT_FAILED:
        return TOPOLOGY_PLACEMENT_FAILED
    if text.startswith("insufficient quota for"):
        return EXCEEDS_MAX_QUOTA
    if text.startswith("insufficient unused quota"):
        return WAITING_FOR_QUOTA
    return NO_MATCHING_FLAVOR


@dataclasses.dataclass
class _Entry:
    info: WorkloadInfo
    assignment: Assignment = dataclasses.field(default_factory=Assignment)
    targets: list[Target] = dataclasses.field(default_factory=list)
    status: str = ""  # "", skipped, assumed
    message: str = ""
    reason: str = PENDING
    requeue_reason: str = REQUEUE_GENERIC
    victims: tuple[Victim, ...] = ()


class KueueScheduler:
    """Kueue's queue manager and scheduler cache, and the scheduling cycle over them."""

    def __init__(self, partial_admission: bool = True, fair_sharing: bool = False,
                 fair_sharing_strategies: tuple[str, ...] | list[str] | None = None,
                 trace: SchedulingTrace | None = None, equivalence_hashing: bool = True) -> None:
        self.partial_admission = partial_admission
        self.trace = trace  # None: nothing recorded (the default); else each head of each cycle (trace_entry)
        self.cycles = 0  # cycles that had heads (numbers the trace's records)
        self.fair_sharing = fair_sharing
        self.fair_sharing_strategies = validate_strategies(fair_sharing_strategies)
        self.cluster_queues: dict[str, api.ClusterQueue] = {}
        self.cohorts: dict[str, api.Cohort] = {}
        self.flavors: dict[str, api.ResourceFlavor] = {}
        self.priority_classes: dict[str, int] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.queues = QueueManager(equivalence_hashing)  # the SchedulingEquivalenceHashing gate
        self.admitted: dict[str, WorkloadInfo] = {}  # the cache: workloads holding quota
        # (the spec objects, the snapshot built from them)
        self._tree: tuple[tuple[list[Any], list[Any], list[Any]], Snapshot] | None = None
        # the cache's changes since the snapshot last saw it: (reserved?, workload), applied by the next cycle
        self._changes: list[tuple[bool, WorkloadInfo]] = []
        # quota nodes whose usage the running cycle changed for good (assumed admissions, reserved quota), with their
        # usage before the cycle: put back when it ends, so the next cycle starts from the cache
        self._touched: dict[int, tuple[ResourceNode, dict]] = {}
        # told of every change to the cache, as Kueue's cache feeds ClusterQueue status: (reserved, released)
        self.listeners: list[tuple[Callable[[WorkloadInfo], None], Callable[[WorkloadInfo], None]]] = []
        # Kueue's inadmissible-workload requeuer (pkg/cache/queue/inadmissible_workloads.go, since #9232): None
        # moves a cohort tree's inadmissible workloads back at once; else released quota asks it with (the
        # tree's root, the ClusterQueue) and it calls queue_inadmissible(ClusterQueue) when its batch is due
        self.requeuer: Callable[[str, str], None] | None = None
        # TAS: the Topology objects' levels, and the Nodes and Pods the TAS caches read (Kueue's node and pod
        # informers), asked for only in a cycle that has a TAS flavor: () -> (nodes, pods)
        self.topologies: dict[str, tuple[str, ...]] = {}
        self.tas_inputs: Callable[[], tuple[list[dict], list[dict]]] | None = None
        self._tas_in_cycle: dict[str, TASFlavorSnapshot] = {}
        self._tree_topologies: dict[str, tuple[str, ...]] | None = None  # replaced, never mutated: identity tells

    # ------------------------------------------------------------------------------------------------ specs
    def apply(self, obj: dict) -> None:
        """Add or update a ClusterQueue, Cohort, ResourceFlavor, LocalQueue, WorkloadPriorityClass or Workload."""
        kind = obj.get("kind")
        if kind == "Workload":
            self.add_workload(obj)
            return
        if kind == "Topology":
            levels = (obj.get("spec") or {}).get("levels") or []
            self.topologies = {**self.topologies,
                               obj["metadata"]["name"]: tuple(lv.get("nodeLabel", "") for lv in levels)}
            self.queue_inadmissible()
            return
        spec = api.parse_any(obj)
        if isinstance(spec, api.ClusterQueue):
            self.cluster_queues[spec.name] = spec
            self.queues.set_cluster_queue(spec.name, spec.queueing_strategy)
        elif isinstance(spec, api.Cohort):
            self.cohorts[spec.name] = spec
        elif isinstance(spec, api.ResourceFlavor):
            self.flavors[spec.name] = spec
        elif isinstance(spec, api.LocalQueue):
            self.queues.set_local_queue(spec.namespace, spec.name, spec.cluster_queue)
        elif isinstance(spec, api.WorkloadPriorityClass):
            self.priority_classes[spec.name] = spec.value
            return
        self.queue_inadmissible()

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        if kind == "ClusterQueue":
            self.cluster_queues.pop(name, None)
            self.queues.delete_cluster_queue(name)
        elif kind == "Cohort":
            self.cohorts.pop(name, None)
        elif kind == "ResourceFlavor":
            self.flavors.pop(name, None)
        elif kind == "LocalQueue":
            self.queues.delete_local_queue(namespace, name)
        elif kind == "WorkloadPriorityClass":
            self.priority_classes.pop(name, None)
        elif kind == "Topology":
            self.topologies = {k: v for k, v in self.topologies.items() if k != name}
        elif kind == "Workload":
            self.remove_workload(f"{namespace}/{name}")
        self.queue_inadmissible()

    def set_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.namespaces[name] = dict(labels or {})

    # ------------------------------------------------------------------------------------------------ workloads
    def add_workload(self, obj: dict | api.Workload) -> None:
        """Record a Workload: in the cache if it holds quota, else queued if active (re-adding replaces it)."""
        wl = obj if isinstance(obj, api.Workload) else api.parse_workload(obj, self.priority_classes)
        self.queues.delete(wl.key)
        if wl.has_quota_reservation and wl.admission is not None:
            self._reserve(WorkloadInfo(wl, wl.admission.cluster_queue, admission_usage(wl)))
            return
        released = self._release(wl.key)
        if released is not None:  # its quota was released (evicted): others in its cohort may fit now
            self._retry_inadmissible(released.cluster_queue)
        if wl.active:
            self.queues.add_or_update(WorkloadInfo(wl, ""))

    def _reserve(self, wi: WorkloadInfo) -> None:
        self._release(wi.key)
        self.admitted[wi.key] = wi
        self._changes.append((True, wi))
        for on_reserve, _ in self.listeners:
            on_reserve(wi)

    def _release(self, key: str) -> WorkloadInfo | None:
        wi = self.admitted.pop(key, None)
        if wi is not None:
            self._changes.append((False, wi))
            for _, on_release in self.listeners:
                on_release(wi)
        return wi

    def remove_workload(self, key: str) -> None:
        """The workload is gone (deleted, finished, or evicted and its quota released)."""
        self.queues.delete(key)
        wi = self._release(key)
        if wi is not None:
            self._retry_inadmissible(wi.cluster_queue)

    def _retry_inadmissible(self, cq: str) -> None:
        """Quota of `cq` was released: its cohort tree's inadmissible workloads get another look, now or when
        the requeuer's batch for the tree is due (NotifyRetryInadmissible)."""
        if self.requeuer is None:
            self.queue_inadmissible(cq)
        else:
            self.requeuer(self.tree_root(cq), cq)

    def tree_root(self, cq: str) -> str:
        """The requeuer's key for `cq`: its root Cohort ("cohort/<name>"), or "cq/<name>" without one."""
        spec = self.cluster_queues.get(cq)
        if spec is None or not spec.cohort:
            return f"cq/{cq}"
        return f"cohort/{self._root_cohort({c.name: c.parent for c in self.cohorts.values()}, spec.cohort)}"

    @staticmethod
    def _root_cohort(parent: dict[str, str | None], cohort: str) -> str:
        """The root of `cohort`'s tree (a cycle stops the climb)."""
        node, seen = cohort, set()
        while (up := parent.get(node)) and node not in seen:
            seen.add(node)
            node = up
        return node

    def set_checks_inactive(self, name: str, reason: str) -> list[WorkloadInfo] | None:
        """The cache's view of a ClusterQueue's admission checks: `reason` (AdmissionCheckNotFound /
        AdmissionCheckInactive, "" while they are active) keeps it from admitting. None when nothing changed, else
        the pending workloads, by key, of a queue that became inactive (none when it became active)."""
        spec = self.cluster_queues[name]
        if reason == spec.checks_inactive:
            return None
        self.cluster_queues[name] = dataclasses.replace(spec, checks_inactive=reason)
        q = self.queues.queues.get(name)
        if not reason or q is None:
            return []
        return sorted(list(q.items.values()) + list(q.inadmissible.values()), key=lambda w: w.key)

    def queue_inadmissible(self, cq_or_cohort: str | None = None) -> None:
        """Move inadmissible workloads back to their heaps: all, or those of the cohort tree of a CQ or cohort."""
        if cq_or_cohort is None:
            self.queues.queue_inadmissible(list(self.cluster_queues))
            return
        self.queues.queue_inadmissible(self._tree_members(cq_or_cohort))

    def _tree_members(self, cq_or_cohort: str) -> list[str]:
        """The ClusterQueues of the cohort tree a ClusterQueue or Cohort is in, from the specs alone (no
        snapshot: this runs on every workload that finishes)."""
        parent = {c.name: c.parent for c in self.cohorts.values()}
        cq = self.cluster_queues.get(cq_or_cohort)
        if cq is not None and not cq.cohort:
            return [cq_or_cohort]
        root = self._root_cohort(parent, (cq.cohort if cq is not None else None) or cq_or_cohort)
        return [name for name, spec in self.cluster_queues.items()
                if name == cq_or_cohort or (spec.cohort and self._root_cohort(parent, spec.cohort) == root)]

    def inactive_reason(self, name: str) -> str | None:
        """Why the cache holds ClusterQueue `name` inactive ("" while it is active, None when it does not exist):
        the snapshot's reasons (a missing flavor, stopPolicy, missing or inactive admission checks, a cohort
        cycle), which Kueue's cache reports as the ClusterQueue's Active condition (pkg/cache ClusterQueueActive)."""
        if name not in self.cluster_queues:
            return None
        current = self._tree is not None and self._tree_current() and self._tree_topologies is self.topologies
        snap = self._tree[1] if current and self._tree is not None else self._snapshot()
        return snap.inactive.get(name, "")  # `inactive` depends on the specs alone: no usage refill needed

    def pending(self, key: str) -> tuple[str, str] | None:
        """(ClusterQueue, 'active'|'inadmissible') of a queued workload."""
        return self.queues.location(key)

    # ------------------------------------------------------------------------------------------------ cycle
    def _snapshot(self) -> Snapshot:
        """The cycle's snapshot. The quota tree is rebuilt only when a spec object changed (specs are replaced,
        never mutated: identity tells); otherwise the last one is brought up to date with the cache's changes since
        the last cycle (a cost per change, not per workload holding quota: issue 32), or refilled from the cache
        when the changes outnumber its workloads. Usage is a function of the totals (quota.add_usage pushes to the
        parent what exceeds the local quota), so adding and removing workloads one by one gives what `fill` gives."""
        last = self._tree
        changes, self._changes = self._changes, []
        if last is not None and self._tree_current() and self._tree_topologies is self.topologies:
            snap = last[1]
            if len(changes) > len(self.admitted):
                snap.reset()
                snap.fill(self.admitted.values())  # WorkloadInfo.usage is never mutated: no copies
                return snap
            for reserved, wi in changes:
                if wi.cluster_queue in snap.cluster_queues:
                    if reserved:
                        snap.add_workload(wi)
                    else:
                        snap.remove_workload(wi)
            return snap
        specs = self._specs()
        snap = Snapshot.build(*specs, self.admitted.values(), topologies=self.topologies)
        self._tree = (specs, snap)
        self._tree_topologies = self.topologies
        return snap

    def snapshot(self) -> Snapshot:
        """The snapshot the next cycle starts from (the quota tree with the usage of the workloads holding quota)."""
        return self._snapshot()

    def _hold(self, cq: ClusterQueueSnapshot, usage: Usage) -> None:
        """Add usage to the snapshot for the rest of this cycle only (an assumed admission, quota a preemptor
        holds back): the nodes on its path keep their usage before the cycle, for `_end_cycle`."""
        node: ResourceNode | None = cq.node
        while node is not None:
            if id(node) not in self._touched:
                self._touched[id(node)] = (node, dict(node.usage))
            node = node.parent
        cq.add_usage(usage)

    def _end_cycle(self) -> None:
        """Put back the usage the cycle held (`_hold`); what it admitted reaches the snapshot as a cache change."""
        for node, usage in self._touched.values():
            node.usage = usage
        self._touched = {}

    def _tas_snapshots(self) -> dict[str, TASFlavorSnapshot]:
        """Each TAS flavor's topology tree for this cycle: the flavor's Nodes, less the non-TAS pods on them and
        the assignments the workloads holding quota have there (tas_cache.go / tas_flavor.go snapshot)."""
        tas = {f.name: f for f in self.flavors.values() if f.topology_name and f.topology_name in self.topologies}
        if not tas or self.tas_inputs is None:
            return {}
        nodes, pods = self.tas_inputs()
        out: dict[str, TASFlavorSnapshot] = {}
        for name, flavor in sorted(tas.items()):
            assert flavor.topology_name is not None
            snap = TASFlavorSnapshot.build(flavor.topology_name, self.topologies[flavor.topology_name], nodes,
                                           dict(flavor.node_labels), flavor.tolerations)
            snap.add_pods(pods)
            out[name] = snap
        for wi in self.admitted.values():
            self._add_tas_usage(out, wi.obj)
        return out

    def _tas_fits(self, e: _Entry) -> bool:
        """The TAS part of the ClusterQueue's Fits: each placed pod set's domains still have room after the
        workloads assumed earlier in this cycle (ClusterQueueSnapshot.Fits -> TASFlavorSnapshot.Fits)."""
        pod_sets = {ps.name: ps for ps in e.info.obj.pod_sets}
        for psa in e.assignment.pod_sets:
            tas = self._tas_in_cycle.get(psa.tas_flavor or "")
            if psa.topology_assignment is None or tas is None:
                continue
            if not tas.fits(psa.topology_assignment, dict(pod_sets[psa.name].requests)):
                return False
        return True

    @staticmethod
    def _add_tas_usage(tas: dict[str, TASFlavorSnapshot], wl: api.Workload) -> None:
        if wl.admission is None:
            return
        pod_sets = {ps.name: ps for ps in wl.pod_sets}
        for psa in wl.admission.pod_set_assignments:
            ps = pod_sets.get(psa.name)
            if psa.topology_assignment is None or ps is None:
                continue
            for _, flavor in psa.flavors:
                if flavor in tas:
                    levels, domains = psa.topology_assignment
                    tas[flavor].add_tas_usage(TopologyAssignment(levels, list(domains)), dict(ps.requests))
                    break

    def _specs(self) -> tuple[list[Any], list[Any], list[Any]]:
        return list(self.cluster_queues.values()), list(self.cohorts.values()), list(self.flavors.values())

    def _tree_current(self) -> bool:
        """Whether the last quota tree was built from the specs as they are now (specs are replaced, never
        mutated: identity tells)."""
        last = self._tree
        return last is not None and all(len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
                                        for a, b in zip(self._specs(), last[0], strict=True))

    def schedule(self, now: float) -> CycleResult:
        """One cycle: heads -> snapshot -> nominate -> ordered processing -> requeue."""
        if not self.queues.any_active():
            return CycleResult(now)  # no heads: nothing to snapshot
        snap = self._snapshot()
        snap.tas_flavors = self._tas_in_cycle = self._tas_snapshots()
        self.cycles += 1
        heads = self.queues.heads(set(snap.cluster_queues))
        preemptor = Preemptor(now, self.fair_sharing, self.fair_sharing_strategies)
        entries, inadmissible = self._nominate(heads, snap, preemptor)
        entries.sort(key=lambda e: (not e.info.obj.has_quota_reservation, e.assignment.borrowing,
                                    -e.info.priority, e.info.obj.queue_order_time(), e.info.key))
        order: Iterable[_Entry] = entries
        if self.fair_sharing:
            order = fair_sharing_order(entries, snap, lambda e: {} if e.info.obj.has_quota_reservation
                                       else e.assignment.total_requests(), lambda e: e.info.priority,
                                       lambda e: e.info.obj.queue_order_time(), lambda e: e.info.key)
        preempted: dict[str, WorkloadInfo] = {}
        result = CycleResult(now)
        for e in order:
            self._process(e, snap, preempted, now, result)
        self._end_cycle()
        for e in entries + inadmissible:
            if self.trace is not None:
                self.trace.add("Workload", trace_entry(e, self.cycles))
            if e.status == "assumed":
                continue
            if e.status and e.requeue_reason == REQUEUE_GENERIC:
                e.requeue_reason = REQUEUE_FAILED_AFTER_NOMINATION
            self.queues.requeue(e.info, e.requeue_reason)
            loc = self.queues.location(e.info.key)
            result.pending.append(Pending(
                e.info.key, e.info.cluster_queue, loc[1] if loc else "", e.reason, e.message,
                condition("QuotaReserved", False, e.reason, e.message, now), _resource_requests(e.info), e.victims))
        return result

    def _nominate(self, heads: list[WorkloadInfo], snap: Snapshot, preemptor: Preemptor
                  ) -> tuple[list[_Entry], list[_Entry]]:
        entries, inadmissible = [], []
        for w in heads:
            e = _Entry(w)
            cq = snap.cluster_queue(w.cluster_queue)
            labels = {"kubernetes.io/metadata.name": w.obj.namespace, **self.namespaces.get(w.obj.namespace, {})}
            if w.key in self.admitted:
                continue
            if w.cluster_queue in snap.inactive:
                e.message = f"ClusterQueue {w.cluster_queue} is inactive"
            elif cq is None:
                e.message = f"ClusterQueue {w.cluster_queue} not found"
            elif not selects(cq.spec.namespace_selector, labels):
                e.message = "workload namespace doesn't match ClusterQueue selector"
                e.reason, e.requeue_reason = MISCONFIGURED, REQUEUE_NAMESPACE_MISMATCH
            else:
                e.assignment, e.targets = self._assignments(w, cq, snap, preemptor)
                e.message = e.assignment.message()
                mode = e.assignment.representative_mode()
                e.reason = no_fit_reason(e.assignment) if mode == NO_FIT else WAITING_FOR_QUOTA
                entries.append(e)
                continue
            inadmissible.append(e)
        return entries, inadmissible

    def _assignments(self, w: WorkloadInfo, cq: ClusterQueueSnapshot, snap: Snapshot, preemptor: Preemptor
                     ) -> tuple[Assignment, list[Target]]:
        assigner = FlavorAssigner(w, cq, snap, preemptor, self.fair_sharing)
        full = assigner.assign()
        mode = full.representative_mode()
        if mode == FIT:
            return full, []
        if mode == PREEMPT_MODE and not full.tas_preempt:
            targets = preemptor.get_targets(w, full, snap)
            if targets:
                return full, targets
        if self.partial_admission and w.obj.can_be_partially_admitted():
            def fits(counts: list[int]) -> tuple[tuple[Assignment, list[Target]] | None, bool]:
                a = assigner.assign(counts)
                m = a.representative_mode()
                if m == FIT:
                    return (a, []), True
                if m == PREEMPT_MODE and not a.tas_preempt:
                    t = preemptor.get_targets(w, a, snap)
                    if t:
                        return (a, t), True
                return None, False
            found, ok = PodSetReducer(w.obj.pod_sets, fits).search()
            if ok and found is not None:
                return found
        return full, []

    def _process(self, e: _Entry, snap: Snapshot, preempted: dict[str, WorkloadInfo], now: float,
                 result: CycleResult) -> None:
        cq = snap.cluster_queues[e.info.cluster_queue]
        mode = e.assignment.representative_mode()
        if mode == NO_FIT:
            return
        if mode == PREEMPT_MODE and not e.targets:
            e.requeue_reason = REQUEUE_PREEMPTION_NO_CANDIDATES
            if not can_always_reclaim(cq):
                self._hold(cq, self._to_reserve(e, cq))
            return
        if any(t.key in preempted for t in e.targets):
            e.status, e.message = "skipped", "Workload has overlapping preemption targets with another workload"
            result.skipped_preemptions[cq.name] = result.skipped_preemptions.get(cq.name, 0) + 1
            return
        usage = {} if e.info.obj.has_quota_reservation else e.assignment.total_requests()
        revert = snap.simulate_removal(list(preempted.values()) + [t.workload for t in e.targets])
        fits = cq.fits(usage) and (e.info.obj.has_quota_reservation or self._tas_fits(e))
        revert()
        if not fits:
            e.status, e.message = "skipped", "Workload no longer fits after processing another workload"
            if mode == PREEMPT_MODE:
                result.skipped_preemptions[cq.name] = result.skipped_preemptions.get(cq.name, 0) + 1
            return
        for t in e.targets:
            preempted[t.key] = t.workload
        self._hold(cq, usage)
        if mode == PREEMPT_MODE:
            self._issue_preemptions(e, cq, now)
            return
        self._admit(e, cq, now, result)

    @staticmethod
    def _to_reserve(e: _Entry, cq: ClusterQueueSnapshot) -> Usage:
        """Quota a preemptor without candidates holds back: up to nominal, or nominal+borrowingLimit if borrowing."""
        if e.info.obj.has_quota_reservation:
            return {}
        reserved: Usage = {}
        for fr, usage in sorted(e.assignment.usage.items()):
            q = cq.quota_for(fr)
            used = cq.node.usage.get(fr, 0)
            if e.assignment.borrowing > 0:
                reserved[fr] = usage if q.borrowing_limit is None else min(usage, q.nominal + q.borrowing_limit - used)
            else:
                reserved[fr] = max(0, min(usage, q.nominal - used))
        return reserved

    def _issue_preemptions(self, e: _Entry, cq: ClusterQueueSnapshot, now: float) -> None:
        victims = []
        for t in e.targets:
            cached = self.admitted.get(t.key)
            if cached is not None and not cached.obj.is_evicted:
                msg = preemption_message(e.info, t.reason, cq.path(), t.cq_path)
                conds = (condition("Evicted", True, "Preempted", msg, now),
                         condition("Preempted", True, t.reason, msg, now))
                victims.append(Victim(t.key, t.workload.obj.uid, t.workload.cluster_queue, t.reason, msg, conds))
                cached.obj = dataclasses.replace(cached.obj, conditions=tuple(set_conditions(cached.obj.conditions,
                                                                                             conds)))
        e.victims = tuple(victims)
        e.message += f". Pending the preemption of {len(e.targets)} workload(s)"
        e.reason = WAITING_FOR_PREEMPTED_WORKLOADS
        e.requeue_reason = REQUEUE_PENDING_PREEMPTION

    def _admit(self, e: _Entry, cq: ClusterQueueSnapshot, now: float, result: CycleResult) -> None:
        admission = {"clusterQueue": cq.name, "podSetAssignments": e.assignment.to_api()}
        conds = (condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq.name}", now),
                 condition("Admitted", True, "Admitted", "The workload is admitted", now),
                 *reset_eviction(e.info.obj.conditions, now))
        # workload.QueuedWaitTime: since the Requeued condition's transition, else since creation
        requeued = e.info.obj.condition("Requeued")
        queued = api.parse_time(requeued.get("lastTransitionTime")) if requeued else e.info.obj.creation_time
        wait = max(0.0, now - queued)
        event = f"Quota reserved in ClusterQueue {cq.name}, wait time since queued was {wait:.0f}s"
        considered = e.assignment.flavors_considered()
        if considered:
            event += f"; Flavors considered: {considered}"
        e.status = "assumed"
        obj = e.info.obj
        psas = tuple(api.PodSetAssignment(ps.name, tuple(sorted((r, f.name) for r, f in ps.flavors.items())),
                                          tuple(sorted((r, ps.requests.get(r, 0)) for r in ps.flavors)), ps.count,
                                          None if ps.topology_assignment is None else
                                          (ps.topology_assignment.levels, tuple(ps.topology_assignment.domains)))
                     for ps in e.assignment.pod_sets)
        obj = dataclasses.replace(obj, admission=api.Admission(cq.name, psas),
                                  conditions=tuple(set_conditions(obj.conditions, conds)))
        if self._tas_in_cycle:
            self._add_tas_usage(self._tas_in_cycle, obj)  # the cache's TAS usage of the assumed workload
        self.queues.admitted(obj.key, cq.name)
        self._reserve(WorkloadInfo(obj, cq.name, e.assignment.total_requests()))
        result.admitted.append(Admitted(obj.key, cq.name, admission, conds, event, e.assignment.borrowing))


def trace_entry(e: _Entry, cycle: int) -> dict:
    """One head of one cycle for the scheduling trace: per pod set, the flavor chosen per resource and every flavor
    tried with its mode, borrowing, preemption possibility and reasons (flavorassigner's FlavorAttempt, the words
    of the Pending condition and of the "Flavors considered" event); the preemption targets with their reasons;
    the outcome with the condition's reason and message. Model: kueue pkg/scheduler/flavorassigner
    (flavor_assignment_attempts.go) and pkg/scheduler/preemption."""
    a = e.assignment
    outcome = "Admitted" if e.status == "assumed" else "Preempting" if e.victims else "Skipped" if e.status \
        else "Pending"
    return {
        "workload": e.info.key, "clusterQueue": e.info.cluster_queue, "cycle": cycle,
        "mode": MODE_NAMES[a.representative_mode()] if a.pod_sets else "", "borrowing": a.borrowing,
        "podSets": [{"name": ps.name, "count": ps.count,
                     "requests": {r: api.format_amount(r, v) for r, v in sorted(ps.requests.items())},
                     "flavors": {r: {"flavor": fa.name, "mode": MODE_NAMES[fa.mode], "borrow": fa.borrow}
                                 for r, fa in sorted(ps.flavors.items())},
                     "reasons": sorted(ps.reasons), "error": ps.error or "",
                     "attempts": [{"flavor": att.flavor, "mode": MODE_NAMES[att.mode], "borrow": att.borrow,
                                   "preemptionMode": att.possibility or "", "reasons": list(att.reasons)}
                                  for att in ps.attempts]}
                    for ps in a.pod_sets],
        "targets": [{"workload": t.key, "clusterQueue": t.workload.cluster_queue, "reason": t.reason}
                    for t in e.targets],
        "outcome": outcome, "reason": "QuotaReserved" if outcome == "Admitted" else e.reason, "message": e.message,
    }


def _resource_requests(wi: WorkloadInfo) -> tuple[dict, ...]:
    """status.resourceRequests: each podSet's total requests (workload.PropagateResourceRequests)."""
    return tuple({"name": ps.name, "resources": {r: api.format_amount(r, v * ps.count) for r, v in ps.requests}}
                 for ps in wi.obj.pod_sets)

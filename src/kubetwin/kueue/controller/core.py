"""Kueue's controller manager in the twin: the job reconcilers, the workload controller and the scheduler loop.

Everything goes through the store, as kueue-controller-manager talks to the API server:
- a mutating admission step (the integrations' webhook) creates queued Jobs and JobSets suspended, and queued
  plain Pods with Kueue's scheduling gate (the `pod` integration, `kueue.controller.pods`);
- the job reconciler (pkg/controller/jobframework/reconciler.go) creates one Workload per job, starts the job
  when its Workload is admitted (flavor node labels and tolerations injected), stops it when the Workload is
  evicted, releases the quota once the job is inactive, and marks the Workload Finished when the job ends;
- the scheduler (pkg/scheduler/scheduler.go, ported in `kueue.cycle`) runs cycles whenever something changed,
  at the same simulated instant, until a cycle is settled: it admits nothing, preempts nothing and moves no head
  to an inadmissible set (a BestEffortFIFO head that does not fit steps aside and the next one gets its cycle);
- ClusterQueue and LocalQueue status (pending/reserving/admitted workloads, flavor usage) is written back by the
  ClusterQueue reconciler, not the scheduler: one batch (UpdatesBatchPeriod, 1 s) after the first Workload
  change it was told of, reading the cache then (clusterqueue_controller.go NotifyWorkloadUpdate -> AddAfter),
  and at once for a ClusterQueue's own spec event; so it also moves while the scheduler waits for its writes.

The manager Configuration (`kueue.config`) switches fair sharing, the PartialAdmission gate and waitForPodsReady.
waitForPodsReady follows pkg/controller/core/workload_controller.go (reconcileNotReadyTimeout,
triggerDeactivationOrBackoffRequeue, admittedNotReadyWorkload), pkg/controller/jobframework/reconciler.go
(generatePodsReadyCondition) and pkg/workload/workload.go (UpdateRequeueState):
- the job reconciler writes the Workload's PodsReady condition from the job's ready + succeeded pods
  (True "Started"/"Recovered", False "WaitForStart" before the first time, "WaitForRecovery" after a drop);
- `timeout` after admission (or `recoveryTimeout` after PodsReady dropped) without PodsReady=True the Workload is
  evicted, reason PodsReadyTimeout, "Exceeded the PodsReady timeout <ns>/<name>"; status.requeueState gets
  count+1 and requeueAt = now + min(base * 2^(count-1), max) — without Kueue's +0.01% jitter, so runs are
  deterministic; the quota is released once the job's pods are gone and the Workload is queued again only at
  requeueAt (Requeued=True "BackoffFinished"), ordered by its eviction or, with requeuingStrategy.timestamp
  Creation, by its creation;
- past requeuingStrategy.backoffLimitCount the Workload is deactivated instead (spec.active=false, Evicted
  "DeactivatedDueToRequeuingLimitExceeded") and never queued again;
- blockAdmission: while any Workload holding quota is not PodsReady no scheduling cycle runs (Kueue's scheduler
  blocks in cache.WaitForPodsReady before admitting); they resume when it turns ready or releases its quota.
"""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.k8s.conditions import remove_condition
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.kueue import api
from kubetwin.kueue.config import KueueConfig
from kubetwin.kueue.controller import lws, workload
from kubetwin.kueue.controller.admissionchecks import AdmissionChecks
from kubetwin.kueue.controller.jobframework import (
    INTEGRATIONS,
    PRIORITY_CLASS_LABEL,
    WORKLOAD_API,
    GenericJob,
    pod_set_infos,
    prebuilt_workload,
    queue_name,
    suspend_queued_unless_admitted,
    workload_name,
)
from kubetwin.kueue.controller.localqueue import LocalQueueReconciler
from kubetwin.kueue.controller.perfrunner import PerformanceRunner
from kubetwin.kueue.controller.pods import GROUP_PREFIX, IS_GROUP_WORKLOAD, MANAGED_LABEL, PodJob
from kubetwin.kueue.controller.pods import webhook as pod_webhook
from kubetwin.kueue.controller.podsready import PodsReady
from kubetwin.kueue.controller.provisioning import PROVREQ_PREFIX, ProvisioningController
from kubetwin.kueue.controller.queuestatus import QueueStatus
from kubetwin.kueue.controller.tas import TopologyUngater
from kubetwin.kueue.controller.workload import update_status
from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.metrics import KueueMetrics
from kubetwin.kueue.outcomes import (
    MANAGER,
    Admitted,
    CycleResult,
    Pending,
    Victim,
    condition,
    find_condition,
    is_true,
    reset_eviction,
)
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.sim.trace import SchedulingTrace
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

SPEC_KINDS = ("ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue", "WorkloadPriorityClass", "Topology")
ADMISSION = "kueue-admission"  # the event source of Kueue's scheduler (cmd/kueue: constants.AdmissionName)
# the ClusterQueue reconciler batches the status updates a Workload event asks for (NotifyWorkloadUpdate ->
# AddAfter(cq, constants.UpdatesBatchPeriod), pkg/controller/core/clusterqueue_controller.go)
UPDATES_BATCH_S = 1.0
# Kueue's inadmissible-workload requeuer batches per root Cohort (or Cohort-less ClusterQueue) for this long
# (pkg/cache/queue/inadmissible_workloads.go requeueBatchPeriod, a workqueue AddAfter; since #9232, 2026-02)
REQUEUE_BATCH_S = 1.0
_MAX_CYCLES_PER_INSTANT = 10_000  # a guard: every cycle that continues admits, preempts or sets a head aside


class KueueController:
    """Kueue's reconcilers and scheduler, reading and writing only through the store."""

    # the requeuer's batch period: Kueue's since #9232 (2026-02); 0 is Kueue before it, which moved a tree's
    # inadmissible workloads back at once on every release (QueueAssociatedInadmissibleWorkloadsAfter) -- the
    # Kueue of the performance suite's 2024 trials (kueue_perf.PUBLISHED); not a Configuration field upstream
    requeue_batch_s: float = REQUEUE_BATCH_S

    def __init__(self, store: Store, env: Environment, events: EventRecorder,
                 config: KueueConfig | None = None, trace: SchedulingTrace | None = None) -> None:
        self.store, self.env, self.events = store, env, events
        self.config = config or KueueConfig()
        self.sched = KueueScheduler(partial_admission=self.config.partial_admission,
                                    fair_sharing=self.config.fair_sharing,
                                    fair_sharing_strategies=self.config.preemption_strategies, trace=trace,
                                    equivalence_hashing=self.config.equivalence_hashing)
        self.metrics = KueueMetrics(env)
        self.pods_ready = PodsReady(store, env, events, self, self.config.wait_for_pods_ready)
        self.queue_status = QueueStatus(store, self.sched, self.metrics)
        self.checks = AdmissionChecks(store, env, events, self)
        self.local_queues = LocalQueueReconciler(store, env, self.sched, self.now)  # LocalQueue Active
        self.provisioning = ProvisioningController(store, env, events, self.checks)  # the ProvisioningRequest check
        self._epoch = api.parse_time(store.start_time)
        # the manager's API client (cmd/kueue/main.go: one token bucket from clientConnection for every request)
        self.client = ApiClient("kueue-controller-manager", self.config.client_qps, self.config.client_burst)
        self._kicked = False
        self._held = False  # the scheduler waits for its own writes (a later _schedule is set)
        self._status_due = False  # a ClusterQueue status update waits for its batch
        self._requeue_due: dict[str, str] = {}  # requeuer batches waiting: tree root -> a ClusterQueue of it
        if self.requeue_batch_s > 0:  # else a release requeues its tree's inadmissible workloads at once
            self.sched.requeuer = self._requeue_inadmissible_later
        self._missing_queue: dict[str, str] = {}  # Workload key -> "ns/name" of the LocalQueue it waited on
        self._jobs = WorkQueue(env, self._reconcile_job)  # (kind, ns, name) of jobs to reconcile
        self._creating = False  # inside _create_workload's create
        managed = self.config.managed_kinds
        # the `pod` framework: plain Pods, gated; the LeaderWorkerSet framework enables it implicitly, for the pods
        # its webhook marks only (ImplicitlyEnabledFrameworkNames; pod_controller.go Skip)
        self.pods = PodJob() if PodJob.kind in managed or lws.KIND in managed else None
        self.integrations: dict[str, GenericJob] = {k: v.bind(store) for k, v in INTEGRATIONS.items()
                                                    if k in managed}
        store.admit(suspend_queued_unless_admitted(store), tuple(self.integrations))
        if self.pods is not None:
            self.integrations[PodJob.kind] = self.pods
            store.admit(pod_webhook(managed, plain=PodJob.kind in managed), (PodJob.kind,))
        self.lws = None
        if lws.KIND in managed:  # one Workload per group, the group's pods run by the pod framework
            store.admit(lws.webhook(self.config.feature_gates.get("TopologyAwareScheduling", True)), (lws.KIND,))
            self.lws = lws.LeaderWorkerSetReconciler(store, env, self)
        for kind in SPEC_KINDS:
            store.watch(kind, self._on_spec)
        store.watch("Namespace", self._on_namespace)
        store.watch("Workload", self._on_workload)
        for kind in self.integrations:
            if kind != PodJob.kind:  # Pods: the one Pod watch below serves both
                store.watch(kind, self._on_job)
        store.watch("Pod", self._on_pod)
        # TAS (pkg/controller/tas): the caches read Nodes and Pods when a cycle has a TAS flavor; a Node or a
        # non-TAS pod that changes what a TAS flavor holds retries its inadmissible workloads
        self.sched.tas_inputs = lambda: (store.list("Node"), store.list("Pod"))
        store.watch("Node", self._on_node)
        self.ungater = TopologyUngater(store, env)
        # the performance suite's runner: the job controller of the bare Workloads labelled with a run time
        self.perf_runner = PerformanceRunner(store, env)

    # -- watches ------------------------------------------------------------------------------------
    def contribute(self, until: float) -> Contribution:
        """summary.json's kueue section (per ClusterQueue admissions and waits) and the kueue_* Prometheus series."""
        summary: dict = {"kueue": self.metrics.summary()}
        if self.client.requests:
            summary["kueue_api_client"] = self.client.summary()
        if self._missing_queue:  # Workloads that waited on a LocalQueue that did not exist (when they were created)
            waited: dict[str, int] = {}
            for queue in self._missing_queue.values():
                waited[queue] = waited.get(queue, 0) + 1
            summary["kueue_missing_local_queues"] = dict(sorted(waited.items()))
        return Contribution(summary=summary, prometheus=self.metrics.exposition())

    def now(self) -> float:
        return self._epoch + self.env.now

    def _on_spec(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype == "DELETED":
            meta = obj["metadata"]
            self.sched.delete(obj["kind"], meta["name"], meta.get("namespace") or "")
        elif old is None or old.get("spec") != obj.get("spec") or obj["kind"] == "WorkloadPriorityClass":
            self.sched.apply(obj)
        else:
            return  # a status write of ours
        self.checks.refresh_cluster_queues()  # a (new) ClusterQueue spec: are its admission checks active?
        self.queue_status.touch_all()
        self.env.after(0, self.queue_status.flush)  # a ClusterQueue's own event is reconciled at once (no batch)
        self.local_queues.enqueue_all()
        self.kick()

    def _on_namespace(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self.sched.set_namespace(obj["metadata"]["name"], obj["metadata"].get("labels"))

    def _on_workload(self, etype: str, wl: Obj, old: Obj | None) -> None:
        """Only changes made by others: the controller tells the scheduler about its own writes itself. A bare
        Workload (no job owns it: created from the manifests, as Kueue's performance suite creates them) is
        queued when it appears, and released when someone else finishes it or ends its eviction (workload
        controller's Create/Update handlers: pkg/controller/core/workload_controller.go)."""
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        if etype == "DELETED":
            self.sched.remove_workload(key)
            self.metrics.forget(key)
            self.kick()
        elif etype == "MODIFIED" and old is not None and old.get("spec") != wl.get("spec"):
            self.sched.add_workload(wl)  # e.g. spec.active flipped by a user
            self.kick()
        elif not is_bare(wl):
            if etype == "ADDED" and not self._creating:  # an imported cluster's, with its status (importer/)
                self.env.after(0, lambda: self._restored(key))
            return
        elif etype == "ADDED":
            self.env.after(0, lambda: self._bare_added(key))
        elif old is not None and is_true(wl, "Finished") and not is_true(old, "Finished"):
            self.env.after(0, lambda: self._bare_finished(key))
        elif old is not None and (old.get("status") or {}).get("admission") and not (
                wl.get("status") or {}).get("admission"):
            self.env.after(0, lambda: self._bare_released(key))

    def _take_in(self, key: str) -> bool:
        """A Workload the manager did not create (bare, or restored): into the cache (admitted: holding its quota)
        or the queues (pending); False when it is gone or finished."""
        wl = workload.get(self.store, key)
        if wl is None or is_true(wl, "Finished"):
            return False
        self.sched.add_workload(wl)
        if not (wl.get("status") or {}).get("admission"):
            self._not_queued(wl)
        self.metrics.created(key, self.env.now)
        return True

    def _bare_added(self, key: str) -> None:
        if self._take_in(key):
            self._arrived()

    def _restored(self, key: str) -> None:
        """A job's Workload the manifests restore (an imported cluster's): admitted, it holds its quota in the
        cache; pending, it is queued. The cycle runs once all of the instant's objects are in, so a pending one
        never takes quota an admitted one restored after it holds."""
        if self._take_in(key):
            self.kick()

    def _bare_finished(self, key: str) -> None:
        wl = workload.get(self.store, key)
        if wl is not None:
            cond = find_condition(wl, "Finished") or {}
            self._release_finished(key, wl, cond.get("reason") != "Failed")

    def _bare_released(self, key: str) -> None:
        """Someone else ended the eviction (the performance runner, as a job controller would): the quota is
        released and the Workload queued again."""
        wl = workload.get(self.store, key)
        if wl is None or (wl.get("status") or {}).get("admission") or is_true(wl, "Finished"):
            return
        self.sched.remove_workload(key)
        self.pods_ready.released(key)
        if wl["spec"].get("active") is not False:
            self.pods_ready.queue_pending(wl)
            self.metrics.requeued(key, self.env.now)
        self.kick()

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        meta = job["metadata"]
        if etype == "DELETED":  # the garbage collector follows the owner reference
            self._collect_workload(meta["namespace"], workload_name(job))
            return
        if queue_name(job):
            self._queue_job(job["kind"], meta["namespace"], meta["name"])

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        """A stopped job becomes inactive when its last pod is gone: then the quota is released. A managed plain
        Pod is a job of its own (the pod integration)."""
        labels = pod["metadata"].get("labels") or {}
        if self.pods is not None and labels.get(MANAGED_LABEL) == "true":
            name, orphan = self.pods.observe(etype, pod)
            ns = pod["metadata"]["namespace"]
            if orphan is not None:  # the garbage collector: the Workload's last owner is gone
                self._collect_workload(ns, orphan)
            elif name is not None:
                self._queue_job(PodJob.kind, ns, name)
            return
        if self._tas_active() and etype == "MODIFIED" and old is not None and \
                (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") and \
                (old.get("status") or {}).get("phase") != (pod.get("status") or {}).get("phase"):
            self.env.after(0, self._tas_requeue)  # a terminated pod no longer holds its node's capacity
        if etype != "DELETED":
            return
        if self._tas_active() and (pod.get("spec") or {}).get("nodeName"):
            self.env.after(0, self._tas_requeue)  # tas/pod_usage_controller.go: a bound pod's usage is freed
        job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
        if job and (pod["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name"):
            if "JobSet" in self.integrations:
                self._queue_job("JobSet", pod["metadata"]["namespace"], labels["jobset.sigs.k8s.io/jobset-name"])
        elif job and "Job" in self.integrations:
            self._queue_job("Job", pod["metadata"]["namespace"], job)

    def _tas_active(self) -> bool:
        return any(f.topology_name for f in self.sched.flavors.values())

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        """tas/node_controller.go: a node added, deleted, or changed in labels, allocatable, taints or readiness
        may open a topology domain."""
        if not self._tas_active():
            return
        if old is not None and etype != "DELETED":
            keep = ("labels",)
            if all(node["metadata"].get(k) == old["metadata"].get(k) for k in keep) and \
                    node.get("spec") == old.get("spec") and \
                    (node.get("status") or {}).get("allocatable") == (old.get("status") or {}).get("allocatable") and \
                    _ready(node) == _ready(old):
                return
        self.env.after(0, self._tas_requeue)

    def _tas_requeue(self) -> None:
        self.sched.queue_inadmissible()
        self.kick()

    def _collect_workload(self, ns: str, name: str) -> None:
        """The garbage collector deletes a Workload whose owner is gone: after the event, as its own work (it is
        a separate controller, attemptToDeleteItem in pkg/controller/garbagecollector), never inside a handler."""
        def collect() -> None:
            if self.store.get("Workload", ns, name) is not None:
                self.store.delete("Workload", ns, name)
        self.env.after(0, collect)

    def _queue_job(self, kind: str, ns: str, name: str) -> None:
        self._jobs.add((kind, ns, name))

    def kick(self) -> None:
        """Run the scheduler loop at this instant (once, however many changes ask for it)."""
        if not self._kicked:
            self._kicked = True
            self.env.after(0, self._schedule)
        elif self._held:  # the scheduler waits for its writes; the ClusterQueue reconciler does not
            self._status_later()

    def _arrived(self) -> None:
        """A new bare Workload was queued (in an event of its own, after the create's watches). Kueue's
        scheduler, blocked in Heads() until some ClusterQueue has a head, pops it as soon as the queue manager has
        it (AddOrUpdateWorkload -> Broadcast; pkg/cache/queue/manager.go), and each Workload reaches Kueue as an
        event of its own (a create is one API request; the performance suite's generator makes them from one
        goroutine per ClusterQueue and workload set): so an idle scheduler runs its cycles for this Workload now,
        before the next Workload of the same instant is taken in, rather than once for all of them. A scheduler
        waiting for its own writes takes it in its next cycle. (Workloads the job reconciler creates still share
        the instant's cycle: a cycle inside the job's reconcile would race the other controllers' watches.)"""
        if self._held or self.pods_ready.blocked():
            self.kick()
        else:
            self._schedule()

    def _status_later(self) -> None:
        """The ClusterQueue reconciler writes the cache's usage and queue counts one batch after the first
        change it was told of (later changes join the batch)."""
        if not self._status_due:
            self._status_due = True
            self.env.after(UPDATES_BATCH_S, self._flush_status)

    def _flush_status(self) -> None:
        self._status_due = False
        self.queue_status.flush()

    def _requeue_inadmissible_later(self, root: str, cq: str) -> None:
        """Quota was released in `cq`'s cohort tree: as Kueue's requeuer (NotifyRetryInadmissible ->
        AddAfter(root, 1 s)), its inadmissible workloads go back to their heaps once the tree's batch is due; a
        release while one waits joins it."""
        if root not in self._requeue_due:
            self._requeue_due[root] = cq
            self.env.after(self.requeue_batch_s, lambda: self._requeue_inadmissible(root))

    def _requeue_inadmissible(self, root: str) -> None:
        cq = self._requeue_due.pop(root, None)
        if cq is not None:
            self.sched.queue_inadmissible(cq)
            self.kick()

    # -- the job reconciler ---------------------------------------------------------------------------
    def _reconcile_job(self, key: tuple[str, str, str]) -> None:
        kind, ns, name = key
        integ = self.integrations[kind]
        job = integ.load(self.store, ns, name)
        if job is not None and queue_name(job):
            self.reconcile(integ, job)

    def reconcile(self, integ: GenericJob, job: Obj) -> None:
        meta = job["metadata"]
        ns = meta["namespace"]
        wl = self.store.get("Workload", ns, integ.workload_name(job))
        finished, succeeded, message = integ.finished(job)
        if wl is None:
            if prebuilt_workload(job):  # handleJobWithNoWorkload: a prebuilt one is never made here; the job
                # stops (its running pods deleted, StopReasonNoMatchingWorkload) and waits for it
                for stopped in integ.stop_job(self.store, job, [], "missing workload"):
                    self.events.event(stopped, "Normal", "Stopped", "missing workload", MANAGER)
            elif not finished:
                self._create_workload(integ, job)
            return
        key = f"{ns}/{wl['metadata']['name']}"
        if finished:
            if not is_true(wl, "Finished"):
                reason = "Succeeded" if succeeded else "Failed"
                update_status(self.store, wl,
                              conditions=[condition("Finished", True, reason, message, self.now())])
                self._release_finished(key, wl, succeeded)
            return
        if is_true(wl, "Evicted"):
            self._stop(integ, job, wl)
            return
        if is_true(wl, "Admitted") and integ.suspended(job):
            cq = wl["status"]["admission"]["clusterQueue"]
            infos = pod_set_infos(self.store, wl, self.checks.pod_set_updates(wl))
            for started in integ.start(self.store, job, infos):
                self.events.event(started, "Normal", "Started", f"Admitted by clusterQueue {cq}", MANAGER)
        elif is_true(wl, "Admitted") and not integ.suspended(job):
            self.pods_ready.update(wl, integ.pods_ready(job))

    def _release_finished(self, key: str, wl: Obj, succeeded: bool) -> None:
        """A Finished Workload leaves the cache and the queues (workload_controller.go Update: cache.DeleteWorkload)."""
        self.sched.remove_workload(key)
        self.pods_ready.released(key)
        admission = (wl.get("status") or {}).get("admission") or {}
        self.metrics.finished(key, succeeded, admission.get("clusterQueue"))
        self.kick()

    def _create_workload(self, integ: GenericJob, job: Obj) -> None:
        error = integ.compose_error(job)
        if error:
            self.events.event(job, "Warning", "ErrWorkloadCompose", error, MANAGER)
            return
        self.create_workload(job, {"name": integ.workload_name(job), **integ.workload_meta(job)},
                             integ.pod_sets(job))

    def create_workload(self, job: Obj, wmeta: dict, pod_sets: list[dict]) -> Obj:
        """Create job's Workload (metadata `wmeta`: name, labels, annotations, owners) with these PodSets, queue
        it and say so (a CreatedWorkload event on the job); the job reconciler's, and the LWS reconciler's."""
        meta = job["metadata"]
        spec: dict = {"queueName": queue_name(job), "podSets": pod_sets, "active": True}
        spec.update(self._priority(job, spec["podSets"]))
        wmeta = {"name": wmeta["name"], "namespace": meta["namespace"], **{k: v for k, v in wmeta.items()
                                                                          if k != "name"}}
        provreq = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(PROVREQ_PREFIX)}
        if provreq:  # jobframework: the job's provreq.kueue.x-k8s.io/ annotations go to its Workload
            wmeta["annotations"] = {**(wmeta.get("annotations") or {}), **provreq}
        self._creating = True  # its own: not one restored with the manifests (_on_workload)
        try:
            wl = self.store.create({"apiVersion": WORKLOAD_API, "kind": "Workload", "metadata": wmeta,
                                    "spec": spec, "status": {}})
        finally:
            self._creating = False
        self.sched.add_workload(wl)
        self._not_queued(wl)
        self.metrics.created(f"{meta['namespace']}/{wl['metadata']['name']}", self.env.now)
        self.events.event(job, "Normal", "CreatedWorkload",
                          f"Created Workload: {meta['namespace']}/{wl['metadata']['name']}", MANAGER)
        self.kick()  # inside the job's reconcile: a cycle here would race the other controllers' watches
        return wl

    def _not_queued(self, wl: Obj) -> None:
        """A Workload no queue takes is Inadmissible, in the workload controller's words (workload_controller.go)."""
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        if self.sched.pending(key) is not None:
            self.checks.inactive_queue(wl, self.sched.pending(key)[0])
            return
        queue = wl["spec"]["queueName"]
        cq = self.sched.queues.cluster_queue_for(wl["metadata"]["namespace"], queue)
        message = f"LocalQueue {queue} doesn't exist" if cq is None else f"ClusterQueue {cq} doesn't exist"
        if cq is None:
            self._missing_queue[key] = f"{wl['metadata']['namespace']}/{queue}"
        update_status(self.store, wl,
                      conditions=[condition("QuotaReserved", False, "Inadmissible", message, self.now())])

    def _priority(self, job: Obj, pod_sets: list[dict]) -> dict:
        """WorkloadPriorityClass from the job's label, else the pods' PriorityClass (jobframework/priority.go)."""
        wpc = (job["metadata"].get("labels") or {}).get(PRIORITY_CLASS_LABEL)
        if wpc:
            obj = self.store.get("WorkloadPriorityClass", "", wpc)
            value = int(obj.get("value", 0)) if obj else 0
            return {"priority": value, "priorityClassRef": {"group": "kueue.x-k8s.io",
                                                             "kind": "WorkloadPriorityClass", "name": wpc}}
        for ps in pod_sets:
            name = (ps["template"].get("spec") or {}).get("priorityClassName")
            if name:
                pc = self.store.get("PriorityClass", "", name)
                return {"priority": int(pc.get("value", 0)) if pc else 0,
                        "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}}
        defaults = [pc for pc in self.store.list("PriorityClass") if pc.get("globalDefault")]
        return {"priority": min((int(pc.get("value", 0)) for pc in defaults), default=0)}

    def _stop(self, integ: GenericJob, job: Obj, wl: Obj) -> None:
        """Evicted: suspend the job; once it is inactive, release the quota and requeue the Workload."""
        evicted = find_condition(wl, "Evicted") or {}
        for stopped in integ.stop_job(self.store, job, wl["spec"]["podSets"], evicted.get("message", "")):
            self.events.event(stopped, "Normal", "Stopped", evicted.get("message", ""), MANAGER)
        wl = self.store.get("Workload", wl["metadata"]["namespace"], wl["metadata"]["name"])
        if wl is None or _owners_gone(self.store, wl):  # a stopped plain Pod was its Workload's last owner:
            return  # the garbage collector takes it (queued by the pod handler)
        if not (wl.get("status") or {}).get("admission") or integ.active(self.store, job):
            return
        now = self.now()
        reason, message = evicted.get("reason", ""), evicted.get("message", "")
        conds = [condition("Requeued", reason == "Preempted", reason, message, now),
                 condition("QuotaReserved", False, "Pending", message, now),
                 condition("Admitted", False, "NoReservation", "The workload has no reservation", now)]
        if find_condition(wl, "PodsReady") is not None:  # UnsetQuotaReservationWithCondition resets PodsReady
            conds.append(condition("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded", now))
        wl = update_status(self.store, wl, conditions=conds, admission=None,
                                admissionChecks=self.checks.reset_on_release(wl, now))
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        self.sched.remove_workload(key)
        self.pods_ready.released(key)
        requeue_at = ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt")
        if requeue_at and api.parse_time(requeue_at) > now and wl["spec"].get("active") is not False:
            # the queue holds it until requeueAt (workload_controller.go Update: time.AfterFunc(backoff, ...))
            self.env.at(api.parse_time(requeue_at) - self._epoch,
                        lambda: self.pods_ready.backoff_finished(key, requeue_at))
        else:
            self.pods_ready.queue_pending(wl)
            self.metrics.requeued(key, self.env.now)
        self.kick()

    # -- the scheduler loop ---------------------------------------------------------------------------
    def _schedule(self) -> None:
        self._kicked = self._held = False
        for _ in range(_MAX_CYCLES_PER_INSTANT):
            if self.pods_ready.blocked():
                break
            result = self.sched.schedule(self.now())
            busy_until = self._apply(result)
            if busy_until > self.env.now:  # the cycle waits for its own writes: the next one runs after them
                self._kicked = self._held = True
                self.env.at(busy_until, self._schedule)
                break
            if result.settled:
                break
        self._status_later()

    def _apply(self, result: CycleResult) -> float:
        """Write a cycle's decisions through the manager's client; the time its synchronous writes are done.

        As pkg/scheduler/scheduler.go does them: an admission is assumed in the cache at once and its status patch
        goes out from a goroutine (``admit``: admissionRoutineWrapper), its conditions stamped at the cycle; a
        Pending condition (``requeueAndUpdate``) and each preemption (preemption.go ``IssuePreemptions``) are
        patched by the scheduler itself, so the next cycle starts once they are through. A write that is due
        now is made now; one that waits for a token is made when it is due."""
        now = self.env.now
        busy = now
        for a in result.admitted:
            self._write("workloads/status", "patch", lambda a=a: self._admitted(a, now))
        for p in result.pending:
            for v in p.preempting:
                busy = max(busy, self._write("workloads/status", "patch",
                                             lambda v=v, cq=p.cluster_queue: self._preempted(v, cq)))
            if self._pending_changes(p):
                busy = max(busy, self._write("workloads/status", "patch", lambda p=p: self._pending(p)))
        return busy

    def _write(self, resource: str, verb: str, do: Callable[[], object]) -> float:
        """One request of the manager's client: made now when a token is there, else when it is due."""
        return self.client.send(self.env, resource, verb, do)

    def _admitted(self, a: Admitted, decided: float) -> None:
        wl = workload.get(self.store, a.key)
        if wl is None:
            return
        checks = self.checks.for_admission(a.cluster_queue, a.admission)
        if checks:  # QuotaReserved only: Admitted waits for every admission check to be Ready
            conds = tuple(remove_condition(a.conditions, "Admitted")[0])
            wl = update_status(self.store, wl, conditions=conds + self._reset_eviction(wl), admission=a.admission,
                                    admissionChecks=self.checks.initial_states(wl, checks))
            self.events.event(wl, "Normal", "QuotaReserved", a.event_message, ADMISSION)
            self.provisioning.queue_sync(a.key)
            return
        wl = update_status(self.store, wl, conditions=a.conditions + self._reset_eviction(wl),
                           admission=a.admission)
        self.events.event(wl, "Normal", "QuotaReserved", a.event_message, ADMISSION)
        self.on_admitted(a.key, a.cluster_queue, wl, decided)

    def on_admitted(self, key: str, cq: str, wl: Obj, decided: float | None = None) -> None:
        """Admitted=True was written: the event, metrics (the wait up to the cycle that ``decided`` it, as Kueue
        measures it from the conditions), the waitForPodsReady timer, and the job starts."""
        reserved = find_condition(wl, "QuotaReserved") or {}
        wait = max(0.0, self.now() - api.parse_time(reserved.get("lastTransitionTime"))) if reserved else 0.0
        self.events.event(wl, "Normal", "Admitted",
                          f"Admitted by ClusterQueue {cq}, wait time since reservation was {wait:.0f}s", ADMISSION)
        self.metrics.admitted(key, cq, self.env.now if decided is None else decided)
        self.pods_ready.admitted(key)
        self._queue_owner(wl)

    def _reset_eviction(self, wl: Obj) -> tuple[dict, ...]:
        """The admission's resets come with the cycle's conditions; the stored Workload may also carry an Evicted
        condition the scheduler's copy was handed without (requeuingStrategy.timestamp Creation,
        `PodsReady.queue_pending`): reset it from the stored conditions too (set_conditions replaces by type, so a
        repeat is harmless)."""
        return reset_eviction((wl.get("status") or {}).get("conditions") or [], self.now())

    def _preempted(self, v: Victim, preempting_cq: str) -> None:
        wl = workload.get(self.store, v.key)
        if wl is None:
            return
        wl = update_status(self.store, wl, conditions=v.conditions)
        self.events.event(wl, "Normal", "Preempted", v.message, ADMISSION)
        self.metrics.preempted(v.key, v.cluster_queue, preempting_cq, v.reason)
        self._queue_owner(wl)

    def _pending_changes(self, p: Pending) -> bool:
        """requeueAndUpdate patches only a condition that changes (PatchAdmissionStatus: updated is false)."""
        wl = workload.get(self.store, p.key)
        return wl is not None and _condition_changes(wl, p)

    def _pending(self, p: Pending) -> None:
        wl = workload.get(self.store, p.key)  # again: the patch may go out later than the cycle that decided it
        if wl is None or not _condition_changes(wl, p):
            return
        update_status(self.store, wl, conditions=[p.condition], resourceRequests=list(p.resource_requests) or None)
        self.events.event(wl, "Normal", "Pending", p.message, ADMISSION)

    def requeue_evicted(self, wl: Obj) -> None:
        """A collaborator evicted or deactivated wl: the cache sees it evicted (first in line as a preemption
        victim) and its job is reconciled (stopped)."""
        self.sched.add_workload(wl)
        self._queue_owner(wl)

    def cluster_queues_changed(self) -> None:
        """Some ClusterQueue's activity changed: inadmissible workloads get another look, every queue's status is
        rewritten, and a cycle runs."""
        self.sched.queue_inadmissible()
        self.queue_status.touch_all()
        self.local_queues.enqueue_all()
        self.kick()

    def _queue_owner(self, wl: Obj) -> None:
        if self.pods is not None and (wl["metadata"].get("annotations") or {}).get(IS_GROUP_WORKLOAD) == "true":
            self._queue_job(PodJob.kind, wl["metadata"]["namespace"], GROUP_PREFIX + wl["metadata"]["name"])
            return
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref["kind"] in self.integrations:
                self._queue_job(ref["kind"], wl["metadata"]["namespace"], ref["name"])


def _condition_changes(wl: Obj, p: Pending) -> bool:
    """The Pending result's QuotaReserved=False condition differs from the Workload's."""
    old = find_condition(wl, "QuotaReserved") or {}
    return (old.get("reason"), old.get("message"), old.get("status")) != (p.reason, p.message, "False")


def _ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def is_bare(wl: Obj) -> bool:
    """A Workload no job owns (no owner reference, not a pod group's): one created as is, as Kueue's performance
    suite creates them."""
    meta = wl["metadata"]
    return not meta.get("ownerReferences") and (meta.get("annotations") or {}).get(IS_GROUP_WORKLOAD) != "true"


def _owners_gone(store: Store, obj: Obj) -> bool:
    """Every owner of obj is gone, so the garbage collector deletes it (attemptToDeleteItem: all owners
    dangling, pkg/controller/garbagecollector/garbagecollector.go)."""
    refs = obj["metadata"].get("ownerReferences") or []
    ns = obj["metadata"].get("namespace") or ""
    return bool(refs) and all((o := store.get(r["kind"], ns, r["name"])) is None
                              or o["metadata"].get("uid") != r.get("uid") for r in refs)

"""Kueue's controller manager in the twin: the job reconcilers, the workload controller and the scheduler loop.

Everything goes through the store, as kueue-controller-manager talks to the API server:
- a mutating admission step (the integrations' webhook) creates queued Jobs and JobSets suspended;
- the job reconciler (pkg/controller/jobframework/reconciler.go) creates one Workload per job, starts the job
  when its Workload is admitted (flavor node labels and tolerations injected), stops it when the Workload is
  evicted, releases the quota once the job is inactive, and marks the Workload Finished when the job ends;
- the scheduler (pkg/scheduler/scheduler.go, ported in `kueue.cycle`) runs cycles whenever something changed,
  at the same simulated instant, until a cycle admits and preempts nothing;
- ClusterQueue and LocalQueue status (pending/reserving/admitted workloads, flavor usage) is written back.
"""

from __future__ import annotations

from collections import Counter

from kubetwin.controllers.common import owner_ref
from kubetwin.kueue import api
from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.jobframework import (
    INTEGRATIONS,
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    WORKLOAD_API,
    GenericJob,
    PodSetInfo,
    queue_name,
    suspend_queued,
    workload_name,
)
from kubetwin.kueue.metrics import KueueMetrics
from kubetwin.kueue.outcomes import Admitted, CycleResult, Pending, Victim, condition
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

SPEC_KINDS = ("ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue", "WorkloadPriorityClass")
ADMISSION = "kueue-admission"  # the event source of Kueue's scheduler (cmd/kueue: constants.AdmissionName)
MANAGER = "kueue-manager"
_MAX_CYCLES_PER_INSTANT = 10_000  # a guard: every cycle that continues admits or preempts something


def _cond(obj: Obj, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def _is_true(obj: Obj, ctype: str) -> bool:
    c = _cond(obj, ctype)
    return c is not None and c.get("status") == "True"


def _set_conditions(conds: list[dict], new: tuple[dict, ...] | list[dict]) -> list[dict]:
    """apimeta.SetStatusCondition: replace by type, keeping lastTransitionTime when the status is unchanged."""
    out = list(conds)
    for c in new:
        for i, old in enumerate(out):
            if old.get("type") == c["type"]:
                if old.get("status") == c["status"]:
                    c = {**c, "lastTransitionTime": old.get("lastTransitionTime", c["lastTransitionTime"])}
                out[i] = c
                break
        else:
            out.append(c)
    return out


class KueueController:
    """Kueue's reconcilers and scheduler, reading and writing only through the store."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self.sched = KueueScheduler()
        self.metrics = KueueMetrics(env)
        self._epoch = api.parse_time(store.start_time)
        self._kicked = False
        self._jobs: set[tuple[str, str, str]] = set()  # (kind, ns, name) to reconcile
        store.admit(suspend_queued, tuple(INTEGRATIONS))
        for kind in SPEC_KINDS:
            store.watch(kind, self._on_spec)
        store.watch("Namespace", self._on_namespace)
        store.watch("Workload", self._on_workload)
        for kind in INTEGRATIONS:
            store.watch(kind, self._on_job)
        store.watch("Pod", self._on_pod)

    # -- watches ------------------------------------------------------------------------------------
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
        self._kick()

    def _on_namespace(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self.sched.set_namespace(obj["metadata"]["name"], obj["metadata"].get("labels"))

    def _on_workload(self, etype: str, wl: Obj, old: Obj | None) -> None:
        """Only changes made by others: the controller tells the scheduler about its own writes itself."""
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        if etype == "DELETED":
            self.sched.remove_workload(key)
            self.metrics.forget(key)
            self._kick()
        elif etype == "MODIFIED" and old is not None and old.get("spec") != wl.get("spec"):
            self.sched.add_workload(wl)  # e.g. spec.active flipped by a user
            self._kick()

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        meta = job["metadata"]
        if etype == "DELETED":
            wl = self.store.get("Workload", meta["namespace"], workload_name(job))
            if wl is not None:  # the garbage collector follows the owner reference
                self.store.delete("Workload", meta["namespace"], wl["metadata"]["name"])
            return
        if queue_name(job):
            self._queue_job(job["kind"], meta["namespace"], meta["name"])

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        """A stopped job becomes inactive when its last pod is gone: then the quota is released."""
        if etype != "DELETED":
            return
        labels = pod["metadata"].get("labels") or {}
        job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
        if job and (pod["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name"):
            self._queue_job("JobSet", pod["metadata"]["namespace"], labels["jobset.sigs.k8s.io/jobset-name"])
        elif job:
            self._queue_job("Job", pod["metadata"]["namespace"], job)

    def _queue_job(self, kind: str, ns: str, name: str) -> None:
        if not self._jobs:
            self.env.after(0, self._reconcile_jobs)
        self._jobs.add((kind, ns, name))

    def _kick(self) -> None:
        if not self._kicked:
            self._kicked = True
            self.env.after(0, self._schedule)

    # -- the job reconciler ---------------------------------------------------------------------------
    def _reconcile_jobs(self) -> None:
        jobs, self._jobs = sorted(self._jobs), set()
        for kind, ns, name in jobs:
            job = self.store.get(kind, ns, name)
            if job is not None and queue_name(job):
                self.reconcile(INTEGRATIONS[kind], job)

    def reconcile(self, integ: GenericJob, job: Obj) -> None:
        meta = job["metadata"]
        ns = meta["namespace"]
        wl = self.store.get("Workload", ns, workload_name(job))
        finished, succeeded, message = integ.finished(job)
        if wl is None:
            if not finished:
                self._create_workload(integ, job)
            return
        key = f"{ns}/{wl['metadata']['name']}"
        if finished:
            if not _is_true(wl, "Finished"):
                reason = "Succeeded" if succeeded else "Failed"
                self._write_status(wl, conditions=[condition("Finished", True, reason, message, self.now())])
                self.sched.remove_workload(key)
                admission = (wl.get("status") or {}).get("admission") or {}
                self.metrics.finished(key, succeeded, admission.get("clusterQueue"))
                self._kick()
            return
        if _is_true(wl, "Evicted"):
            self._stop(integ, job, wl)
            return
        if _is_true(wl, "Admitted") and integ.suspended(job):
            cq = wl["status"]["admission"]["clusterQueue"]
            self.store.update(integ.run_with_pod_sets_info(job, self._pod_set_infos(wl)))
            self.events.event(job, "Normal", "Started", f"Admitted by clusterQueue {cq}", MANAGER)

    def _create_workload(self, integ: GenericJob, job: Obj) -> None:
        meta = job["metadata"]
        spec: dict = {"queueName": queue_name(job), "podSets": integ.pod_sets(job), "active": True}
        spec.update(self._priority(job, spec["podSets"]))
        wl = self.store.create({
            "apiVersion": WORKLOAD_API, "kind": "Workload",
            "metadata": {"name": workload_name(job), "namespace": meta["namespace"],
                         "labels": {JOB_UID_LABEL: meta["uid"]}, "ownerReferences": [owner_ref(job)]},
            "spec": spec, "status": {}})
        self.sched.add_workload(wl)
        self._not_queued(wl)
        self.metrics.created(f"{meta['namespace']}/{wl['metadata']['name']}", self.env.now)
        self.events.event(job, "Normal", "CreatedWorkload",
                          f"Created Workload: {meta['namespace']}/{wl['metadata']['name']}", MANAGER)
        self._kick()

    def _not_queued(self, wl: Obj) -> None:
        """A Workload no queue takes is Inadmissible, in the workload controller's words (workload_controller.go)."""
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        if self.sched.pending(key) is not None:
            return
        queue = wl["spec"]["queueName"]
        cq = self.sched.queues.cluster_queue_for(wl["metadata"]["namespace"], queue)
        message = f"LocalQueue {queue} doesn't exist" if cq is None else f"ClusterQueue {cq} doesn't exist"
        self._write_status(wl, conditions=[condition("QuotaReserved", False, "Inadmissible", message, self.now())])

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

    def _pod_set_infos(self, wl: Obj) -> list[PodSetInfo]:
        """Each PodSet's flavors' node labels and tolerations (podset.FromAssignment)."""
        counts = {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]}
        infos = []
        for psa in wl["status"]["admission"].get("podSetAssignments") or []:
            selector: dict[str, str] = {}
            tolerations: list[dict] = []
            for flavor in sorted(set((psa.get("flavors") or {}).values())):
                rf = self.store.get("ResourceFlavor", "", flavor)
                spec = (rf or {}).get("spec") or {}
                selector.update(spec.get("nodeLabels") or {})
                tolerations += [t for t in spec.get("tolerations") or [] if t not in tolerations]
            infos.append(PodSetInfo(psa["name"], int(psa.get("count", counts.get(psa["name"], 1))), selector,
                                    tolerations))
        return infos

    def _stop(self, integ: GenericJob, job: Obj, wl: Obj) -> None:
        """Evicted: suspend the job; once it is inactive, release the quota and requeue the Workload."""
        evicted = _cond(wl, "Evicted") or {}
        if not integ.suspended(job):
            job = self.store.update(integ.stop(job, wl["spec"]["podSets"]))
            self.events.event(job, "Normal", "Stopped", evicted.get("message", ""), MANAGER)
        if not (wl.get("status") or {}).get("admission") or self._active(job):
            return
        now = self.now()
        reason, message = evicted.get("reason", ""), evicted.get("message", "")
        conds = [condition("Requeued", reason == "Preempted", reason, message, now),
                 condition("QuotaReserved", False, "Pending", message, now),
                 condition("Admitted", False, "NoReservation", "The workload has no reservation", now)]
        wl = self._write_status(wl, conditions=conds, admission=None)
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        self.sched.remove_workload(key)
        self.sched.add_workload(wl)
        self.metrics.requeued(key, self.env.now)
        self._kick()

    def _active(self, job: Obj) -> bool:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        jobs = [job] if job["kind"] == "Job" else self.store.owned("Job", ns, job["kind"], name)
        return any(self.store.owned("Pod", ns, "Job", j["metadata"]["name"]) for j in jobs)

    def _write_status(self, wl: Obj, conditions: list[dict] | tuple[dict, ...] = (), **fields: object) -> Obj:
        status = dict(wl.get("status") or {})
        for k, v in fields.items():
            if v is None:
                status.pop(k, None)
            else:
                status[k] = v
        status["conditions"] = _set_conditions(status.get("conditions") or [], conditions)
        return self.store.update({**wl, "status": status})

    # -- the scheduler loop ---------------------------------------------------------------------------
    def _schedule(self) -> None:
        self._kicked = False
        for _ in range(_MAX_CYCLES_PER_INSTANT):
            result = self.sched.schedule(self.now())
            self._apply(result)
            if not result.admitted and not result.victims:
                break
        self._write_queue_status()

    def _apply(self, result: CycleResult) -> None:
        for a in result.admitted:
            self._admitted(a)
        for p in result.pending:
            for v in p.preempting:
                self._preempted(v, p.cluster_queue)
            self._pending(p)

    def _workload(self, key: str) -> Obj | None:
        ns, name = key.split("/", 1)
        return self.store.get("Workload", ns, name)

    def _admitted(self, a: Admitted) -> None:
        wl = self._workload(a.key)
        if wl is None:
            return
        wl = self._write_status(wl, conditions=a.conditions + self._reset_eviction(wl), admission=a.admission)
        self.events.event(wl, "Normal", "QuotaReserved", a.event_message, ADMISSION)
        self.events.event(wl, "Normal", "Admitted",
                          f"Admitted by ClusterQueue {a.cluster_queue}, wait time since reservation was 0s", ADMISSION)
        self.metrics.admitted(a.key, a.cluster_queue, self.env.now)
        self._queue_owner(wl)

    def _reset_eviction(self, wl: Obj) -> tuple[dict, ...]:
        """workload.SetQuotaReservation: a new reservation turns Evicted and Preempted False, "Previously: ..."."""
        out = []
        for ctype in ("Evicted", "Preempted"):
            c = _cond(wl, ctype)
            if c is not None and c.get("status") == "True":
                out.append({**condition(ctype, False, "QuotaReserved", f"Previously: {c.get('message', '')}",
                                        self.now())})
        return tuple(out)

    def _preempted(self, v: Victim, preempting_cq: str) -> None:
        wl = self._workload(v.key)
        if wl is None:
            return
        wl = self._write_status(wl, conditions=v.conditions)
        self.events.event(wl, "Normal", "Preempted", v.message, ADMISSION)
        self.metrics.preempted(v.key, v.cluster_queue, preempting_cq, v.reason)
        self._queue_owner(wl)

    def _pending(self, p: Pending) -> None:
        wl = self._workload(p.key)
        if wl is None:
            return
        old = _cond(wl, "QuotaReserved") or {}
        if (old.get("reason"), old.get("message"), old.get("status")) == (p.reason, p.message, "False"):
            return
        self._write_status(wl, conditions=[p.condition], resourceRequests=list(p.resource_requests) or None)
        self.events.event(wl, "Normal", "Pending", p.message, ADMISSION)

    def _queue_owner(self, wl: Obj) -> None:
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref["kind"] in INTEGRATIONS:
                self._queue_job(ref["kind"], wl["metadata"]["namespace"], ref["name"])

    def _write_local_queue_status(self) -> None:
        """LocalQueue status: its pending and admitted workloads (localqueue_types.go)."""
        pending: Counter[tuple[str, str]] = Counter()
        for q in self.sched.queues.queues.values():
            for wi in list(q.items.values()) + list(q.inadmissible.values()):
                pending[(wi.obj.namespace, wi.obj.queue_name)] += 1
        admitted = Counter((wi.obj.namespace, wi.obj.queue_name) for wi in self.sched.admitted.values())
        for (ns, name) in sorted(self.sched.queues.local_queues):
            lq = self.store.get("LocalQueue", ns, name)
            if lq is None:
                continue
            status = {**(lq.get("status") or {}), "pendingWorkloads": pending[(ns, name)],
                      "reservingWorkloads": admitted[(ns, name)], "admittedWorkloads": admitted[(ns, name)]}
            if status != lq.get("status"):
                self.store.update({**lq, "status": status})

    def _write_queue_status(self) -> None:
        """ClusterQueue status: pending, reserving and admitted workloads and flavor usage (clusterqueue_types.go)."""
        queued = {name: (len(q.items), len(q.inadmissible)) for name, q in self.sched.queues.queues.items()}
        usage: dict[str, dict[tuple[str, str], int]] = {}
        reserving: Counter[str] = Counter()
        for wi in self.sched.admitted.values():
            reserving[wi.cluster_queue] += 1
            bucket = usage.setdefault(wi.cluster_queue, {})
            for fr, v in wi.usage.items():
                bucket[fr] = bucket.get(fr, 0) + v
        for name, spec in sorted(self.sched.cluster_queues.items()):
            cq = self.store.get("ClusterQueue", "", name)
            if cq is None:
                continue
            flavors = []
            for rg in spec.resource_groups:
                for fq in rg.flavors:
                    flavors.append({"name": fq.name, "resources": [
                        {"name": r, "total": api.format_amount(r, usage.get(name, {}).get((fq.name, r), 0)),
                         "borrowed": api.format_amount(r, max(0, usage.get(name, {}).get((fq.name, r), 0)
                                                              - q.nominal))}
                        for r, q in fq.resources]})
            status = {**(cq.get("status") or {}), "pendingWorkloads": sum(queued.get(name, (0, 0))),
                      "reservingWorkloads": reserving[name], "admittedWorkloads": reserving[name],
                      "flavorsReservation": flavors, "flavorsUsage": flavors}
            if status != cq.get("status"):
                self.store.update({**cq, "status": status})
        self._write_local_queue_status()
        self.metrics.sample(queued, reserving)

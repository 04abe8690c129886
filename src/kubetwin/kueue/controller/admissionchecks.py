"""Kueue's side of admission checks: which ClusterQueues their checks keep inactive, the check states a
reservation starts with, and what the workload controller does with the states a check controller writes
(the ProvisioningRequest one is `kueue.controller.provisioning`).

Follows kubernetes-sigs/kueue (names, states, messages; the code is not copied):
- a ClusterQueue lists its checks in `admissionChecksStrategy.admissionChecks[{name, onFlavors}]` (v1beta1 also
  `admissionChecks: [names]`). A ClusterQueue with a missing or inactive check admits nothing (pkg/cache
  clusterqueue.go: AdmissionCheckNotFound / AdmissionCheckInactive): it is listed in the snapshot's `inactive`, its
  workloads wait "ClusterQueue <name> is inactive", and its status gets `Active=False` with the reason.
- pkg/scheduler/scheduler.go admit + pkg/workload/admissionchecks.go: a workload that gets quota in a ClusterQueue
  with checks (those whose onFlavors is empty or holds one of its assigned flavors) gets QuotaReserved=True and
  `status.admissionChecks[{name, state: Pending}]`, no Admitted=True: its job stays suspended.
- pkg/controller/core/workload_controller.go: a Retry check evicts the Workload (Evicted=True "AdmissionCheck",
  "At least one admission check is false"), its quota is released, the checks go back to Pending, and it is queued
  again at requeueState.requeueAt = eviction + requeueAfterSeconds, base·2^(attempt-1) capped at max (KEP-3258
  `requeueAfterSeconds`/`retryCount`; Kueue's jitter left out); the next reservation creates attempt+1. A Rejected
  check deactivates it (spec.active=false, Evicted "DeactivatedDueToAdmissionCheck", Warning event
  AdmissionCheckRejected). When every check is Ready: Admitted=True and the job starts with the podSetUpdates.

Checks with another controllerName are never marked Active by anyone in the twin, so their ClusterQueues stay
inactive (as in a cluster where that controller is not installed).
"""

from __future__ import annotations

from typing import Protocol

from kubetwin.k8s.conditions import conditions_of, set_condition
from kubetwin.kueue import api
from kubetwin.kueue.controller.workload import set_evicted, update_status
from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.metrics import KueueMetrics
from kubetwin.kueue.outcomes import condition, find_condition, is_true
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

PENDING, READY, RETRY, REJECTED = "Pending", "Ready", "Retry", "Rejected"  # kueue.CheckState*


class CheckHost(Protocol):
    """What the admission checks need from Kueue's manager (`KueueController`): the scheduler's cache (read, and
    the checks' verdict on a ClusterQueue), the metrics, the clock, and three hand-offs made at the same instant —
    upstream the workload and ClusterQueue controllers react to the same status writes through their watches."""

    sched: KueueScheduler
    metrics: KueueMetrics

    def now(self) -> float:
        """Seconds since the epoch, the clock's now."""
        ...

    def on_admitted(self, key: str, cq: str, wl: Obj) -> None:
        """Admitted=True was written (the last check turned Ready): the job starts."""
        ...

    def requeue_evicted(self, wl: Obj) -> None:
        """wl was evicted or deactivated (a Retry or Rejected check): the cache and the job follow."""
        ...

    def cluster_queues_changed(self) -> None:
        """A ClusterQueue's check-derived activity changed."""
        ...


class AdmissionChecks:
    """Kueue's admission-check rules for one manager. Workloads and ClusterQueues are written through the store;
    what the manager must do next goes through `CheckHost`."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, host: CheckHost) -> None:
        self.store, self.env, self.events, self.host = store, env, events, host

    def now(self) -> float:
        """The manager's clock (for the provisioning controller, `ProvisioningHost`)."""
        return self.host.now()

    # -- ClusterQueue Active ---------------------------------------------------------------------------------
    def _inactive_reason(self, cq: api.ClusterQueue) -> tuple[str, str]:
        names = list(dict.fromkeys(n for n, _ in cq.admission_checks))
        missing = [n for n in names if self.store.get("AdmissionCheck", "", n) is None]
        if missing:
            return "AdmissionCheckNotFound", f"references missing AdmissionCheck(s): [{' '.join(missing)}]"
        inactive = [n for n in names if not is_true(self.store.get("AdmissionCheck", "", n) or {}, "Active")]
        if inactive:
            return "AdmissionCheckInactive", f"references inactive AdmissionCheck(s): [{' '.join(inactive)}]"
        return "", ""

    def refresh_cluster_queues(self) -> None:
        """Mark ClusterQueues whose checks are missing or inactive (the snapshot leaves them out), and queue the
        write of their Active condition (this runs from watch handlers). Only ClusterQueues with admission checks
        get one."""
        sched = self.host.sched
        changed = False
        for name in sorted(sched.cluster_queues):
            spec = sched.cluster_queues[name]
            if not spec.admission_checks:
                continue
            reason, _ = self._inactive_reason(spec)
            became = sched.set_checks_inactive(name, reason)
            changed = changed or became is not None
            pending = [(wi.obj.namespace, wi.obj.name) for wi in became or ()]  # marked inactive below
            self.env.after(0, lambda name=name, pending=pending: self._write_active(name, pending))
        if changed:
            self.host.cluster_queues_changed()

    def _write_active(self, name: str, pending: list[tuple[str, str]]) -> None:
        """The ClusterQueue reconciler: write its Active condition as the queue stands now, when it reads
        differently, and mark the pending Workloads of a queue that became inactive."""
        spec = self.host.sched.cluster_queues.get(name)
        obj = self.store.get("ClusterQueue", "", name)
        if spec is None or obj is None:
            return
        reason, message = self._inactive_reason(spec)
        missing_flavors = {fq.name for rg in spec.resource_groups for fq in rg.flavors} - set(self.host.sched.flavors)
        if reason:
            new = condition("Active", False, reason, f"Can't admit new workloads: {message}.", self.host.now())
        elif missing_flavors or spec.stop_policy not in ("None", "", None):
            new = None  # the snapshot's other reasons: not written by the twin yet
        else:
            new = condition("Active", True, "Ready", "Can admit new workloads", self.host.now())
        old = find_condition(obj, "Active")
        if new is not None and (old is None or (old["status"], old["reason"], old["message"])
                                != (new["status"], new["reason"], new["message"])):
            conds, _ = set_condition(conditions_of(obj), new)  # updateCqStatusIfChanged: SetStatusCondition
            self.store.update({**obj, "status": {**(obj.get("status") or {}), "conditions": conds}})
        for ns, wl_name in pending:
            wl = self.store.get("Workload", ns, wl_name)
            if wl is not None:
                self.inactive_queue(wl, name)

    def inactive_queue(self, wl: Obj, cluster_queue: str) -> None:
        """workload_controller.go: a pending Workload of an inactive ClusterQueue is QuotaReserved=False
        Inadmissible "ClusterQueue <name> is inactive" (here: inactive because of its admission checks)."""
        spec = self.host.sched.cluster_queues.get(cluster_queue)
        if spec is None or not spec.checks_inactive:
            return
        message = f"ClusterQueue {cluster_queue} is inactive"
        old = find_condition(wl, "QuotaReserved") or {}
        if (old.get("status"), old.get("reason"), old.get("message")) != ("False", "Inadmissible", message):
            update_status(self.store, wl, conditions=[condition("QuotaReserved", False, "Inadmissible", message,
                                                              self.host.now())])

    # -- a reservation in a ClusterQueue with checks ---------------------------------------------------------
    def for_admission(self, cluster_queue: str, admission: dict) -> list[str]:
        """workload.AdmissionChecksForWorkload: the CQ's checks whose onFlavors is empty or holds an assigned
        flavor."""
        spec = self.host.sched.cluster_queues.get(cluster_queue)
        if spec is None:
            return []
        flavors = {f for psa in admission.get("podSetAssignments") or [] for f in (psa.get("flavors") or {}).values()}
        out: list[str] = []
        for name, on in spec.admission_checks:
            if name not in out and (not on or flavors & set(on)):
                out.append(name)
        return out

    def initial_states(self, wl: Obj, checks: list[str]) -> list[dict]:
        """SyncAdmittedCondition's input: one Pending state per check, keeping what an earlier attempt left."""
        old = {s["name"]: s for s in (wl.get("status") or {}).get("admissionChecks") or []}
        now = api.format_time(self.host.now())
        out = []
        for name in checks:
            s = old.get(name)
            if s is not None and s.get("state") == PENDING:
                out.append(s)
            else:
                out.append({"name": name, "state": PENDING, "message": "", "lastTransitionTime": now,
                            **({"retryCount": s["retryCount"]} if s and s.get("retryCount") else {})})
        return out

    # -- the workload controller's rules for check states ---------------------------------------------------
    def workload_rules(self, wl: Obj) -> None:
        """The workload controller on a Workload's check states: Rejected deactivates, Retry evicts, all Ready
        admits."""
        states = (wl.get("status") or {}).get("admissionChecks") or []
        if not states or is_true(wl, "Evicted") or not is_true(wl, "QuotaReserved"):
            return
        host, now = self.host, self.host.now()
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        cq = wl["status"]["admission"]["clusterQueue"]
        rejected = [s for s in states if s.get("state") == REJECTED]
        retry = [s for s in states if s.get("state") == RETRY]
        if rejected:
            names = "[" + " ".join(s["name"] for s in rejected) + "]"
            reason = "DeactivatedDueToAdmissionCheck"
            message = f"The workload is deactivated due to Admission check(s): {names}, were rejected"
            wl = set_evicted(self.store, wl, reason, message, now, deactivate=True)
            for s in rejected:
                self.events.event(wl, "Warning", "AdmissionCheckRejected", f"Deactivating workload because "
                                  f"AdmissionCheck for {s['name']} was Rejected: {s.get('message', '')}",
                                  "kueue-workload-controller")
            host.metrics.evicted(key, cq, "Deactivated")
        elif retry:
            wait = max(float(s.get("requeueAfterSeconds") or 0) for s in retry)
            message = "At least one admission check is false"
            wl = set_evicted(self.store, wl, "AdmissionCheck", message, now, requeue_state={
                **(wl["status"].get("requeueState") or {}), "requeueAt": api.format_time(now + wait)})
            self.events.event(wl, "Normal", "EvictedDueToAdmissionCheck", message, "kueue-workload-controller")
            host.metrics.evicted(key, cq, "AdmissionCheck")
        elif all(s.get("state") == READY for s in states) and not is_true(wl, "Admitted"):
            wl = update_status(self.store, wl, conditions=[condition("Admitted", True, "Admitted",
                                                              "The workload is admitted", now)])
            host.on_admitted(key, cq, wl)
            return
        else:
            return
        host.requeue_evicted(wl)

    @staticmethod
    def reset_on_release(wl: Obj, now: float) -> list[dict] | None:
        """workload.ResetChecksOnEviction: the checks go back to Pending once the quota is released."""
        states = (wl.get("status") or {}).get("admissionChecks")
        if not states:
            return None
        out = []
        for s in states:
            s = {k: v for k, v in s.items() if k not in ("podSetUpdates", "requeueAfterSeconds")}
            if s.get("state") != PENDING:
                s["state"] = PENDING
                s["lastTransitionTime"] = api.format_time(now)
            out.append(s)
        return out

    def pod_set_updates(self, wl: Obj) -> dict[str, dict]:
        """PodSet -> merged podSetUpdates (annotations, labels, nodeSelector, tolerations) of its Ready checks."""
        out: dict[str, dict] = {}
        for s in (wl.get("status") or {}).get("admissionChecks") or []:
            for u in s.get("podSetUpdates") or []:
                cur = out.setdefault(u["name"], {"annotations": {}, "labels": {}, "nodeSelector": {},
                                                 "tolerations": []})
                for k in ("annotations", "labels", "nodeSelector"):
                    cur[k].update(u.get(k) or {})
                cur["tolerations"] += [t for t in u.get("tolerations") or [] if t not in cur["tolerations"]]
        return out

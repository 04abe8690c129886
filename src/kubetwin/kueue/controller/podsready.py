"""waitForPodsReady in the workload controller (kubernetes-sigs/kueue pkg/controller/core/workload_controller.go,
pkg/workload/workload.go): the PodsReady condition, timeout and recovery-timeout evictions, requeue backoff,
deactivation past backoffLimitCount, and blockAdmission. A collaborator of `KueueController`: it keeps its own
state (which admission a timer belongs to, which workloads holding quota are ready) and reaches the manager only
through `PodsReadyHost`."""

from __future__ import annotations

from typing import Protocol

from kubetwin.k8s.conditions import conditions_of, remove_condition
from kubetwin.kueue import api
from kubetwin.kueue.config import WaitForPodsReady
from kubetwin.kueue.controller import workload
from kubetwin.kueue.controller.workload import set_evicted, update_status
from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.metrics import KueueMetrics
from kubetwin.kueue.outcomes import MANAGER, condition, find_condition, is_true
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store


class PodsReadyHost(Protocol):
    """What waitForPodsReady needs from Kueue's manager (`KueueController`)."""

    sched: KueueScheduler
    metrics: KueueMetrics

    def now(self) -> float:
        """Seconds since the epoch, the clock's now."""
        ...

    def kick(self) -> None:
        """Run a scheduling cycle at this instant (blockAdmission may have lifted, a workload is queued)."""
        ...

    def requeue_evicted(self, wl: Obj) -> None:
        """wl was evicted or deactivated: the cache and the job follow."""
        ...


class PodsReady:
    """waitForPodsReady for one manager; ``wfpr`` None (not configured) leaves only the PodsReady condition."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, host: PodsReadyHost,
                 wfpr: WaitForPodsReady | None) -> None:
        self.store, self.env, self.events, self.host, self.wfpr = store, env, events, host, wfpr
        self._admissions: dict[str, int] = {}  # key -> admission number, to tell a timer's admission from a later one
        self._ready: dict[str, bool] = {}  # workloads holding quota -> PodsReady (blockAdmission)

    def admitted(self, key: str) -> None:
        """Admitted=True was written: start the PodsReady timeout of this admission."""
        if self.wfpr is not None:
            seq = self._admissions[key] = self._admissions.get(key, 0) + 1
            self._ready[key] = False
            self.env.after(self.wfpr.timeout, lambda: self._timeout(key, seq, "WaitForStart"))

    def released(self, key: str) -> None:
        """The workload no longer holds quota (finished, or evicted and its quota released)."""
        self._ready.pop(key, None)

    def update(self, wl: Obj, ready: bool) -> None:
        """generatePodsReadyCondition, written when its status or reason changes."""
        old = find_condition(wl, "PodsReady")
        if ready:
            recovered = old is not None and old.get("reason") in ("WaitForRecovery", "Recovered")
            new = condition("PodsReady", True, "Recovered" if recovered else "Started",
                            "All pods reached readiness and the workload is running", self.host.now())
        elif old is not None and (old.get("status") == "True" or old.get("reason") == "WaitForRecovery"):
            new = condition("PodsReady", False, "WaitForRecovery",
                            "At least one pod has failed, waiting for recovery", self.host.now())
        else:
            new = condition("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded", self.host.now())
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        if key in self._ready:
            was, self._ready[key] = self._ready[key], ready
            if ready and not was:
                self.host.kick()  # blockAdmission may lift
        if old is not None and (old.get("status"), old.get("reason")) == (new["status"], new["reason"]):
            return
        update_status(self.store, wl, conditions=[new])
        if (self.wfpr is not None and self.wfpr.recovery_timeout and new["reason"] == "WaitForRecovery"
                and (old or {}).get("reason") != "WaitForRecovery"):
            seq, since = self._admissions.get(key, 0), new["lastTransitionTime"]
            self.env.after(self.wfpr.recovery_timeout,
                           lambda: self._timeout(key, seq, "WaitForRecovery", since))

    def _timeout(self, key: str, seq: int, cause: str, since: str | None = None) -> None:
        """reconcileNotReadyTimeout: evict a Workload still not PodsReady, or deactivate it past the limit.

        admittedNotReadyWorkload: `timeout` counts from the admission while PodsReady is absent or WaitForStart;
        `recoveryTimeout` from PodsReady's last transition to WaitForRecovery (`since` identifies that one)."""
        wl = workload.get(self.store, key)
        if wl is None or self.wfpr is None or self._admissions.get(key) != seq:
            return
        if wl["spec"].get("active") is False or is_true(wl, "Evicted") or not is_true(wl, "Admitted"):
            return
        ready = find_condition(wl, "PodsReady") or {}
        if ready.get("status") == "True":
            return
        if cause == "WaitForRecovery" and (ready.get("reason") != cause or ready.get("lastTransitionTime") != since):
            return
        if cause == "WaitForStart" and ready.get("reason", "WaitForStart") not in ("WaitForStart", "PodsReady"):
            return
        now = self.host.now()
        count = int(((wl.get("status") or {}).get("requeueState") or {}).get("count") or 0)
        limit = self.wfpr.backoff_limit_count
        status = dict(wl.get("status") or {})
        cq = status["admission"]["clusterQueue"]
        if limit is not None and count + 1 > limit:
            reason = "DeactivatedDueToRequeuingLimitExceeded"
            message = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
            wl = set_evicted(self.store, wl, reason, message, now, deactivate=True)
            self.host.metrics.evicted(key, cq, "Deactivated")
        else:
            reason, message = "PodsReadyTimeout", f"Exceeded the PodsReady timeout {key}"
            wl = set_evicted(self.store, wl, reason, message, now, requeue_state={
                "count": count + 1, "requeueAt": api.format_time(now + self.wfpr.backoff(count + 1))})
            self.host.metrics.evicted(key, cq, reason)
        self.events.event(wl, "Normal", f"EvictedDueTo{reason}", message, MANAGER)
        self.host.requeue_evicted(wl)

    def backoff_finished(self, key: str, requeue_at: str) -> None:
        """The requeue backoff is over: Requeued=True BackoffFinished, and the Workload is queued again."""
        wl = workload.get(self.store, key)
        if wl is None or wl["spec"].get("active") is False or (wl.get("status") or {}).get("admission"):
            return
        if ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt") != requeue_at:
            return
        wl = update_status(self.store, wl, conditions=[condition("Requeued", True, "BackoffFinished",
                                                          "The workload backoff was finished", self.host.now())])
        self.queue_pending(wl)
        self.host.metrics.requeued(key, self.env.now)
        self.host.kick()

    def queue_pending(self, wl: Obj) -> None:
        """Queue a released Workload. With requeuingStrategy.timestamp Creation the queue orders it by its
        creationTimestamp, not by its PodsReadyTimeout eviction (workload.Ordering.GetQueueOrderTimestamp): the
        scheduler is handed the Workload without its Evicted condition, which only that ordering reads while the
        Workload is pending (the store keeps the condition)."""
        if self.wfpr is not None and self.wfpr.timestamp == "Creation":
            conds, _ = remove_condition(conditions_of(wl), "Evicted")
            wl = {**wl, "status": {**wl["status"], "conditions": conds}}
        self.host.sched.add_workload(wl)

    def blocked(self) -> bool:
        """blockAdmission: some Workload holding quota is not PodsReady (cache.PodsReadyForAllAdmittedWorkloads)."""
        return (self.wfpr is not None and self.wfpr.block_admission
                and any(not self._ready.get(k, True) for k in self.host.sched.admitted))


"""waitForPodsReady in the workload controller (kubernetes-sigs/kueue pkg/controller/core/workload_controller.go,
pkg/workload/workload.go): the PodsReady condition, timeout and recovery-timeout evictions, requeue backoff,
deactivation past backoffLimitCount, and blockAdmission. A mixin of `KueueController`, kept apart to keep files
small; it uses the controller's store, scheduler, metrics and status writers."""

from __future__ import annotations

from typing import Any

from kubetwin.api.conditions import conditions_of, remove_condition, set_conditions
from kubetwin.kueue import api
from kubetwin.kueue.controller.workload import update_status
from kubetwin.kueue.outcomes import MANAGER, condition, find_condition, is_true
from kubetwin.store.store import Obj


class PodsReadyMixin:
    """Needs: store, env, events, sched, metrics, wfpr, _admissions, _pods_ready, now(), _kick(), _workload(),
    _write_status(), _queue_owner()."""

    store: Any
    env: Any
    events: Any
    sched: Any
    metrics: Any
    wfpr: Any
    _admissions: dict[str, int]
    _pods_ready: dict[str, bool]

    def _update_pods_ready(self, wl: Obj, ready: bool) -> None:
        """generatePodsReadyCondition, written when its status or reason changes."""
        old = find_condition(wl, "PodsReady")
        if ready:
            recovered = old is not None and old.get("reason") in ("WaitForRecovery", "Recovered")
            new = condition("PodsReady", True, "Recovered" if recovered else "Started",
                            "All pods reached readiness and the workload is running", self.now())
        elif old is not None and (old.get("status") == "True" or old.get("reason") == "WaitForRecovery"):
            new = condition("PodsReady", False, "WaitForRecovery",
                            "At least one pod has failed, waiting for recovery", self.now())
        else:
            new = condition("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded", self.now())
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        if key in self._pods_ready:
            was, self._pods_ready[key] = self._pods_ready[key], ready
            if ready and not was:
                self.kick()  # blockAdmission may lift
        if old is not None and (old.get("status"), old.get("reason")) == (new["status"], new["reason"]):
            return
        update_status(self.store, wl, conditions=[new])
        if (self.wfpr is not None and self.wfpr.recovery_timeout and new["reason"] == "WaitForRecovery"
                and (old or {}).get("reason") != "WaitForRecovery"):
            seq, since = self._admissions.get(key, 0), new["lastTransitionTime"]
            self.env.after(self.wfpr.recovery_timeout,
                           lambda: self._pods_ready_timeout(key, seq, "WaitForRecovery", since))

    def _pods_ready_timeout(self, key: str, seq: int, cause: str, since: str | None = None) -> None:
        """reconcileNotReadyTimeout: evict a Workload still not PodsReady, or deactivate it past the limit.

        admittedNotReadyWorkload: `timeout` counts from the admission while PodsReady is absent or WaitForStart;
        `recoveryTimeout` from PodsReady's last transition to WaitForRecovery (`since` identifies that one)."""
        wl = self._workload(key)
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
        now = self.now()
        count = int(((wl.get("status") or {}).get("requeueState") or {}).get("count") or 0)
        limit = self.wfpr.backoff_limit_count
        status = dict(wl.get("status") or {})
        cq = status["admission"]["clusterQueue"]
        if limit is not None and count + 1 > limit:
            reason = "DeactivatedDueToRequeuingLimitExceeded"
            message = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
            status.pop("requeueState", None)
            status["conditions"] = set_conditions(status.get("conditions") or [],
                                                   [condition("Evicted", True, reason, message, now)])
            wl = self.store.update({**wl, "spec": {**wl["spec"], "active": False}, "status": status})
            self.metrics.evicted(key, cq, "Deactivated")
        else:
            reason, message = "PodsReadyTimeout", f"Exceeded the PodsReady timeout {key}"
            status["requeueState"] = {"count": count + 1,
                                      "requeueAt": api.format_time(now + self.wfpr.backoff(count + 1))}
            status["conditions"] = set_conditions(status.get("conditions") or [],
                                                   [condition("Evicted", True, reason, message, now)])
            wl = self.store.update({**wl, "status": status})
            self.metrics.evicted(key, cq, reason)
        self.sched.add_workload(wl)  # the cache sees it evicted (first in line as a preemption victim)
        self.events.event(wl, "Normal", f"EvictedDueTo{reason}", message, MANAGER)
        self._queue_owner(wl)

    def _backoff_finished(self, key: str, requeue_at: str) -> None:
        """The requeue backoff is over: Requeued=True BackoffFinished, and the Workload is queued again."""
        wl = self._workload(key)
        if wl is None or wl["spec"].get("active") is False or (wl.get("status") or {}).get("admission"):
            return
        if ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt") != requeue_at:
            return
        wl = update_status(self.store, wl, conditions=[condition("Requeued", True, "BackoffFinished",
                                                          "The workload backoff was finished", self.now())])
        self._queue_pending(wl)
        self.metrics.requeued(key, self.env.now)
        self.kick()

    def _queue_pending(self, wl: Obj) -> None:
        """Queue a released Workload. With requeuingStrategy.timestamp Creation the queue orders it by its
        creationTimestamp, not by its PodsReadyTimeout eviction (workload.Ordering.GetQueueOrderTimestamp): the
        scheduler is handed the Workload without its Evicted condition, which only that ordering reads while the
        Workload is pending (the store keeps the condition)."""
        if self.wfpr is not None and self.wfpr.timestamp == "Creation":
            conds, _ = remove_condition(conditions_of(wl), "Evicted")
            wl = {**wl, "status": {**wl["status"], "conditions": conds}}
        self.sched.add_workload(wl)

    def _blocked(self) -> bool:
        """blockAdmission: some Workload holding quota is not PodsReady (cache.PodsReadyForAllAdmittedWorkloads)."""
        return (self.wfpr is not None and self.wfpr.block_admission
                and any(not self._pods_ready.get(k, True) for k in self.sched.admitted))


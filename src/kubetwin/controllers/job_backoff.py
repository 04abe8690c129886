"""The Job controller's pod-failure back-off (batch/v1, Kubernetes 1.34): after pod failures the controller waits
before it creates a replacement, 10 s after the first failure, doubling per consecutive failure, at most 10 min.

Followed files (kubernetes/kubernetes pkg/controller/job): backoff_utils.go (backoffRecord, newBackoffRecord,
getFinishedTime, getRemainingTimeForFailuresCount, getRemainingTimePerIndex) and job_controller.go
(DefaultJobPodFailureBackOff = 10 s, MaxJobPodFailureBackOff = 10 min, syncJobBatchPeriod = 1 s, the floor
enqueueSyncJobWithDelay puts on a delayed sync). Times are POSIX seconds; the pods' RFC 3339 times are read at the
API's one-second resolution, as the real controller reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kubetwin.controllers.job_policy import absolute_failure_count
from kubetwin.k8s.conditions import conditions_of, find_condition
from kubetwin.store.store import Obj

DEFAULT_POD_FAILURE_BACKOFF = 10.0  # job_controller.go DefaultJobPodFailureBackOff
MAX_POD_FAILURE_BACKOFF = 600.0  # job_controller.go MaxJobPodFailureBackOff (10 * time.Minute)
SYNC_JOB_BATCH_PERIOD = 1.0  # job_controller.go syncJobBatchPeriod: the least delay of enqueueSyncJobWithDelay


@dataclass(frozen=True)
class BackoffRecord:
    """backoffRecord: the failures since the Job's last success and when the last of them finished."""

    failures_after_last_success: int = 0
    last_failure_time: float | None = None


def seconds(timestamp: str) -> float:
    """POSIX seconds of an RFC 3339 time."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def finished_time(pod: Obj) -> float:
    """getFinishedTime: the latest finishedAt when every container (and restartable init container, a sidecar) has
    terminated; else the Ready=False condition's lastTransitionTime; else deletionTimestamp minus
    deletionGracePeriodSeconds; else the creation time."""
    meta, status = pod["metadata"], pod.get("status") or {}
    latest: float | None = None
    sidecars = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []
                if c.get("restartPolicy") == "Always"}
    statuses = [*(status.get("containerStatuses") or []),
                *(cs for cs in status.get("initContainerStatuses") or [] if cs.get("name") in sidecars)]
    for cs in statuses:
        term = (cs.get("state") or {}).get("terminated")
        if not term or not term.get("finishedAt"):
            latest = None
            break
        t = seconds(term["finishedAt"])
        latest = t if latest is None or t > latest else latest
    if latest is not None:
        return latest
    ready = find_condition(conditions_of(pod), "Ready")
    if ready is not None and ready.get("status") == "False" and ready.get("lastTransitionTime"):
        return seconds(ready["lastTransitionTime"])
    if meta.get("deletionTimestamp"):
        return seconds(meta["deletionTimestamp"]) - float(meta.get("deletionGracePeriodSeconds") or 0)
    return seconds(meta["creationTimestamp"])


def new_backoff_record(old: BackoffRecord | None, new_succeeded: list[Obj], new_failed: list[Obj]) -> BackoffRecord:
    """newBackoffRecord: the record after this sync's newly finished pods. Failures alone add up; a success resets
    the count to the failures that finished after the latest success (lastFailureTime: the latest of those)."""
    rec = old or BackoffRecord()
    failed = sorted(finished_time(p) for p in new_failed)
    if not new_succeeded:
        if not failed:
            return rec
        return BackoffRecord(rec.failures_after_last_success + len(failed), failed[-1])
    last_success = max(finished_time(p) for p in new_succeeded)
    after = [t for t in failed if t > last_success]
    return BackoffRecord(len(after), after[-1] if after else None)


def remaining_time_for_failures(failures: int, last_failure_time: float | None, now: float,
                                default: float = DEFAULT_POD_FAILURE_BACKOFF,
                                maximum: float = MAX_POD_FAILURE_BACKOFF) -> float:
    """getRemainingTimeForFailuresCount: default * 2^(failures-1), capped at the maximum, less the time since the
    last failure; 0 once that has passed or with no failures."""
    if failures == 0 or last_failure_time is None:
        return 0.0
    backoff = default
    for _ in range(1, failures):
        backoff *= 2
        if backoff >= maximum:
            backoff = maximum
            break
    elapsed = now - last_failure_time
    return 0.0 if backoff < elapsed else backoff - elapsed


def remaining_time(record: BackoffRecord, now: float, default: float = DEFAULT_POD_FAILURE_BACKOFF,
                   maximum: float = MAX_POD_FAILURE_BACKOFF) -> float:
    """backoffRecord.getRemainingTime: the Job-wide wait before a replacement pod (without backoffLimitPerIndex)."""
    return remaining_time_for_failures(record.failures_after_last_success, record.last_failure_time, now, default,
                                       maximum)


def remaining_time_per_index(last_failed: Obj | None, now: float, default: float = DEFAULT_POD_FAILURE_BACKOFF,
                             maximum: float = MAX_POD_FAILURE_BACKOFF) -> float:
    """getRemainingTimePerIndex: with backoffLimitPerIndex, the index's consecutive failures are the last failed
    pod's job-index-failure-count + job-index-ignored-failure-count + 1, counted from when that pod finished."""
    if last_failed is None:
        return 0.0
    return remaining_time_for_failures(absolute_failure_count(last_failed) + 1, finished_time(last_failed), now,
                                       default, maximum)

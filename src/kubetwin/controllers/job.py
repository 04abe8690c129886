"""Job controller: parallelism, completions (NonIndexed and Indexed), backoffLimit, suspend, podFailurePolicy,
backoffLimitPerIndex / maxFailedIndexes, successPolicy and activeDeadlineSeconds (batch/v1 semantics; the rules
themselves in controllers/job_policy.py)."""

from __future__ import annotations

from datetime import datetime

from kubetwin.api.conditions import conditions_of, find_condition, is_condition_true, replace_or_append_condition
from kubetwin.api.defaults import job_spec
from kubetwin.controllers import job_policy as policy
from kubetwin.controllers.common import NameGenerator, WorkQueue, active_pods_rank, controller_of, pod_from_template
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation and label (PodIndexLabel, GA 1.32)


class AdmissionDenied(Exception):
    """A validating admission webhook refused a create; str() is the API server's error text."""


ACTIVE = ("Pending", "Running")


def _index(pod: Obj, completions: int | None) -> int | None:
    """The pod's completion index when it is a valid one, in [0, completions) (getCompletionIndex)."""
    raw = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        idx = int(str(raw))
    except ValueError:
        return None
    return idx if 0 <= idx < (completions or 0) else None


def _ready(pod: Obj) -> bool:
    return is_condition_true(conditions_of(pod), "Ready")


def _restarts(pod: Obj) -> int:
    return sum(cs.get("restartCount", 0) for cs in pod["status"].get("containerStatuses") or [])


def _replaced(failed: list[Obj], index: int) -> Obj | None:
    """The failed pod of `index` a new pod replaces (getPodsWithDelayedDeletionPerIndex: the one with the most
    failures of the index, the latest on a tie)."""
    mine = [p for p in failed if (p["metadata"].get("annotations") or {}).get(COMPLETION_INDEX) == str(index)]
    return max(mine, key=lambda p: (policy.absolute_failure_count(p), p["metadata"].get("creationTimestamp", "")),
               default=None)


def _ranges(indexes: set[int]) -> str:
    """status.completedIndexes / failedIndexes: "1,3-5" as the Job controller writes them."""
    return policy.intervals_string(policy.to_intervals(indexes))


class JobController:
    def __init__(self, store: Store, env: Environment, events: EventRecorder, names: NameGenerator) -> None:
        self.store, self.env, self.events, self.names = store, env, events, names
        self._work = WorkQueue(env, self._process)
        self._deadlines: set[tuple[tuple[str, str], float]] = set()  # activeDeadlineSeconds re-syncs queued
        store.watch("Job", self._on_job)
        store.watch("Pod", self._on_pod, owner_kind="Job")

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self._queue(job["metadata"].get("namespace") or "default", job["metadata"]["name"])

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)
        if owner:
            self._queue(pod["metadata"].get("namespace") or "default", owner[1])

    def _queue(self, ns: str, name: str) -> None:
        self._work.add((ns, name))

    def _process(self, key: tuple[str, str]) -> None:
        job = self.store.get("Job", *key)
        if job is not None:
            self.sync(job)

    def sync(self, job: Obj) -> None:
        spec, meta = job["spec"], job["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        status = dict(job.get("status") or {})
        if any(is_condition_true(status.get("conditions"), t) for t in ("Complete", "Failed")):
            return
        pods = self.store.owned("Pod", ns, "Job", name)
        # the API server's defaults (api.defaults SetDefaults_Job) are on every stored Job; a Job written before
        # them (a test's hand-made object) reads the same way
        spec = job_spec(spec)
        completions, parallelism = spec.get("completions"), int(spec["parallelism"])
        indexed = spec.get("completionMode") == "Indexed"
        pfp = spec.get("podFailurePolicy")
        per_index = spec.get("backoffLimitPerIndex") if indexed else None
        suspended = bool(spec.get("suspend"))
        if indexed:  # only pods with a valid index count or stay (getValidPodsWithFilter, activePodsForRemoval)
            valid = [p for p in pods if _index(p, completions) is not None]
            surplus = [p for p in pods if _index(p, completions) is None and p["status"].get("phase") in ACTIVE]
            pods = valid
        else:
            surplus = []
        active = [p for p in pods if p["status"].get("phase") in ACTIVE]
        succeeded = sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
        failed_pods = [p for p in pods if policy.pod_failed(p)]
        # nonIgnoredFailedPodsCount: a failure an Ignore rule matched counts nowhere
        failed = sum(1 for p in failed_pods if policy.counts_as_failure(pfp, p))
        now = self.store.timestamp(self.env.now)
        new = {**status, "succeeded": succeeded, "failed": failed, "ready": sum(map(_ready, active))}
        if not suspended:  # the Job's first start (a resumed Job's startTime was cleared while suspended)
            new.setdefault("startTime", now)
        done_idx: set[int] = set()
        if indexed:  # succeeded counts distinct completed indexes
            done_idx = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in pods
                        if p["status"].get("phase") == "Succeeded"}
            succeeded = new["succeeded"] = len(done_idx)
            if done_idx:
                new["completedIndexes"] = _ranges(done_idx)
            # one active pod per index (appendDuplicatedIndexPodsForRemoval keeps the most active of each)
            by_index: dict[int, list[Obj]] = {}
            for p in active:
                by_index.setdefault(int(p["metadata"]["annotations"][COMPLETION_INDEX]), []).append(p)
            for same in by_index.values():
                surplus += sorted(same, key=active_pods_rank)[:-1]
            extra = {id(p) for p in surplus}
            active = [p for p in active if id(p) not in extra]
        conds = list(status.get("conditions") or [])
        finished = self._finished_condition(job, spec, conds, pods, new, failed, active, suspended)
        failed_idx: set[int] = set()
        if indexed and per_index is not None:  # calculateFailedIndexes: the status's and the newly failed ones
            failed_idx = policy.expand(policy.parse_indexes(status.get("failedIndexes"), completions or 0))
            failed_idx |= {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in failed_pods
                           if policy.index_failed(pfp, per_index, p)}
            new["failedIndexes"] = _ranges(failed_idx)
            max_failed = spec.get("maxFailedIndexes")
            if finished is None and max_failed is not None and len(failed_idx) > max_failed:
                finished = ("FailureTarget", *policy.MAX_FAILED_INDEXES)
            elif finished is None and failed_idx and len(failed_idx) + len(done_idx) >= (completions or 0):
                finished = ("FailureTarget", *policy.FAILED_INDEXES)
        if indexed and finished is None:
            msg = policy.match_success_policy(spec.get("successPolicy"), completions or 0,
                                              policy.to_intervals(done_idx))
            if msg is not None:
                finished = ("SuccessCriteriaMet", policy.SUCCESS_POLICY, msg)
        if finished is not None:  # remove the active pods, then the interim and the terminal condition
            self._finish(job, new, conds, finished, active, surplus, pfp, now)
            return
        if self._complete(job, new, conds, completions, succeeded, active, now):
            return
        if suspended:  # suspending deletes the active pods; they do not count as failures
            for p in active + surplus:
                self.store.delete("Pod", ns, p["metadata"]["name"])
            conds, changed = ensure_job_condition(conds, "Suspended", "True", "JobSuspended", "Job suspended", now)
            if changed:
                self.events.event(job, "Normal", "Suspended", "Job suspended", "job-controller")
            new.pop("startTime", None)  # cleared so the pod template may change while suspended
            self._write(job, {**new, "active": 0, "ready": 0, "conditions": conds})
            return
        if is_condition_true(conds, "Suspended"):  # kept, as False
            conds, _ = ensure_job_condition(conds, "Suspended", "False", "JobResumed", "Job resumed", now)
            self.events.event(job, "Normal", "Resumed", "Job resumed", "job-controller")
        # manageJob's wantActive: a work queue keeps whatever runs once one pod has succeeded and starts no more;
        # a completion count never runs more than the completions left
        if completions is None:
            want = len(active) if succeeded > 0 else parallelism
        else:
            want = max(0, min(parallelism, completions - succeeded))
        remove = surplus + sorted(active, key=active_pods_rank)[:max(0, len(active) - want)]
        if remove:  # deletion takes precedence: a sync either deletes or creates pods, never both
            for p in remove:
                self.store.delete("Pod", ns, p["metadata"]["name"])
            gone = {id(p) for p in remove}
            active = [p for p in active if id(p) not in gone]
            new["ready"] = sum(map(_ready, active))
        if self._complete(job, new, conds, completions, succeeded, active, now):
            return
        if remove:
            self._write(job, {**new, "active": len(active), "conditions": conds})
            return
        busy = {p["metadata"]["annotations"].get(COMPLETION_INDEX) for p in active} if indexed else set()
        # the next free indexes, lazily: completions is an int32 (up to 2^31-1) and the controller creates pods as
        # it goes (pkg/controller/job/indexed_job_utils.go firstPendingIndexes, which skips failed indexes too),
        # never a list per completion
        todo = (i for i in range(completions or 0) if i not in done_idx and i not in failed_idx
                and str(i) not in busy) if indexed else iter(())
        for _ in range(max(0, want - len(active))):
            labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": name,
                      "controller-uid": meta["uid"], "job-name": name}
            index = next(todo, None) if indexed else None
            if indexed and index is None:
                break
            if index is not None:
                labels[COMPLETION_INDEX] = str(index)
            pod_name = self.names.generate(self.store, "Pod", ns, name if index is None else f"{name}-{index}")
            pod = pod_from_template(spec["template"], pod_name, ns, job, labels)
            if index is not None:
                pod["metadata"]["annotations"][COMPLETION_INDEX] = str(index)
                pod["spec"] = {"hostname": f"{name}-{index}", **pod["spec"]}
                if per_index is not None:  # addIndexFailureCountAnnotation, from the pod it replaces
                    fails, ignored = policy.new_index_failure_counts(pfp, _replaced(failed_pods, index))
                    pod["metadata"]["annotations"][policy.INDEX_FAILURE_COUNT] = str(fails)
                    if ignored:
                        pod["metadata"]["annotations"][policy.INDEX_IGNORED_FAILURE_COUNT] = str(ignored)
            try:
                self.store.create(pod)
            except AdmissionDenied as exc:  # the slow-start batch stops at the first error; a pod change retries
                self.events.event(job, "Warning", "FailedCreate", f"Error creating: {exc}", "job-controller")
                break
            self.events.event(job, "Normal", "SuccessfulCreate", f"Created pod: {pod_name}", "job-controller")
            active.append(pod)
        self._write(job, {**new, "active": len(active), "conditions": conds})

    def _finished_condition(self, job: Obj, spec: dict, conds: list[dict], pods: list[Obj], new: dict, failed: int,
                            active: list[Obj], suspended: bool) -> tuple[str, str, str] | None:
        """syncJob's order: an interim condition already written decides; then a FailJob rule of the
        podFailurePolicy (FailureTarget, PodFailurePolicy), the backoff limit, the active deadline (a deadline
        still ahead re-syncs the Job then)."""
        for ctype in ("SuccessCriteriaMet", "FailureTarget"):
            cond = find_condition(conds, ctype)
            if cond is not None and cond.get("status") == "True":
                return ctype, cond.get("reason", ""), cond.get("message", "")
        msg = policy.fail_job_message(spec.get("podFailurePolicy"), pods)
        if msg is not None:
            return "FailureTarget", policy.POD_FAILURE_POLICY, msg
        # pastBackoffLimitOnFailure: with restartPolicy OnFailure, container restarts of active pods count
        on_failure = (spec["template"].get("spec") or {}).get("restartPolicy") == "OnFailure"
        restarts = sum(map(_restarts, active)) if on_failure else 0
        if failed > spec["backoffLimit"] or (restarts and restarts + failed >= max(spec["backoffLimit"], 1)):
            return "FailureTarget", *policy.BACKOFF_LIMIT
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is None or suspended or not new.get("startTime"):
            return None
        left = float(deadline) - (self.env.now - self._seconds(new["startTime"]))
        if left <= 0:  # pastActiveDeadline: duration >= allowedDuration
            return "FailureTarget", *policy.DEADLINE
        key = (job["metadata"].get("namespace") or "default", job["metadata"]["name"])
        due = self.env.now + left
        if (key, due) not in self._deadlines:  # queue.AddAfter(key, syncDuration)
            self._deadlines.add((key, due))
            self.env.after(left, lambda: (self._deadlines.discard((key, due)), self._queue(*key)))
        return None

    def _seconds(self, timestamp: str) -> float:
        """Simulated seconds of an RFC 3339 time the store wrote."""
        def parse(t: str) -> datetime:
            return datetime.fromisoformat(t.replace("Z", "+00:00"))
        return (parse(timestamp) - parse(self.store.start_time)).total_seconds()

    def _finish(self, job: Obj, new: dict, conds: list[dict], finished: tuple[str, str, str], active: list[Obj],
                surplus: list[Obj], pfp: dict | None, now: str) -> None:
        """deleteActivePods, then trackJobStatusAndRemoveFinalizers + enactJobFinished: the interim condition
        (FailureTarget or SuccessCriteriaMet) and the terminal one (Failed or Complete) with the same reason and
        message. The twin's pods are gone when deleted, so both are written in this sync, in that order."""
        ctype, reason, message = finished
        ns = job["metadata"].get("namespace") or "default"
        for p in active + surplus:
            self.store.delete("Pod", ns, p["metadata"]["name"])
        success = ctype == "SuccessCriteriaMet"
        if not success:  # "when the job is considered finished, every non-terminated pod is considered failed"
            # (job_controller_test.go "count ready pods when job fails": 1 failed + 2 active = 3)
            new["failed"] += sum(1 for p in active if policy.counts_as_failure(pfp, p))
        cond = {"type": ctype, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
        if find_condition(conds, ctype) is None:
            conds.append(cond)
        conds.append({**cond, "type": "Complete" if success else "Failed"})
        if success:  # recordJobFinished
            new["completionTime"] = now
            self.events.event(job, "Normal", "Completed", "Job completed", "job-controller")
        else:
            self.events.event(job, "Warning", reason, message, "job-controller")
        self._write(job, {**new, "active": 0, "ready": 0, "conditions": conds})

    def _complete(self, job: Obj, new: dict, conds: list[dict], completions: int | None, succeeded: int,
                  active: list[Obj], now: str) -> bool:
        """Complete once the completions have succeeded (a work queue: any pod) and no pod is active any more
        (job_controller.go syncJob: `succeeded >= completions && active == 0`, `succeeded > 0 && active == 0`)."""
        if active or not (succeeded > 0 if completions is None else succeeded >= completions):
            return False
        self._finish(job, new, conds, ("SuccessCriteriaMet", "CompletionsReached",
                                       "Reached expected number of succeeded pods"), [], [], None, now)
        return True

    def _write(self, job: Obj, status: dict) -> None:
        if status != job.get("status"):
            self.store.update({**job, "status": status})


def ensure_job_condition(conds: list[dict], ctype: str, status: str, reason: str, message: str,
                         now: str) -> tuple[list[dict], bool]:
    """The Job controller's ensureJobConditionStatus (pkg/controller/job/job_controller.go), not apimachinery's
    rule: a condition whose status, reason or message changes is rewritten where it stands with a new
    lastTransitionTime; a missing one is appended unless it would be False."""
    new = {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": now}
    cur = find_condition(conds, ctype)
    if cur is not None:
        if (cur.get("status"), cur.get("reason"), cur.get("message")) == (status, reason, message):
            return conds, False
        return replace_or_append_condition(conds, new), True
    if status == "False":
        return conds, False
    return [*conds, new], True

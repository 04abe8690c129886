"""Job controller: parallelism, completions (NonIndexed and Indexed), backoffLimit, suspend (batch/v1 semantics)."""

from __future__ import annotations

from kubetwin.api.conditions import conditions_of, find_condition, is_condition_true, replace_or_append_condition
from kubetwin.api.defaults import job_spec
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


def _ranges(indexes: set[int]) -> str:
    """status.completedIndexes: "1,3-5" as the Job controller writes it (indexed_job_utils.go
    orderedIntervals.String: two neighbours are "4,5", three or more a range "7-9")."""
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a},{b}" if b == a + 1 else f"{a}-{b}" for a, b in runs)


class JobController:
    def __init__(self, store: Store, env: Environment, events: EventRecorder, names: NameGenerator) -> None:
        self.store, self.env, self.events, self.names = store, env, events, names
        self._work = WorkQueue(env, self._process)
        self._counted: set[str] = set()
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
        backoff_limit = spec["backoffLimit"]
        indexed = spec.get("completionMode") == "Indexed"
        if indexed:  # only pods with a valid index count or stay (getValidPodsWithFilter, activePodsForRemoval)
            valid = [p for p in pods if _index(p, completions) is not None]
            surplus = [p for p in pods if _index(p, completions) is None and p["status"].get("phase") in ACTIVE]
            pods = valid
        else:
            surplus = []
        active = [p for p in pods if p["status"].get("phase") in ACTIVE]
        succeeded = sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
        failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
        now = self.store.timestamp(self.env.now)
        new = {**status, "succeeded": succeeded, "failed": failed, "ready": sum(map(_ready, active))}
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
        # pastBackoffLimitOnFailure: with restartPolicy OnFailure, container restarts of active pods count
        on_failure = (spec["template"].get("spec") or {}).get("restartPolicy") == "OnFailure"
        restarts = sum(map(_restarts, active)) if on_failure else 0
        if failed > backoff_limit or (restarts and restarts + failed >= max(backoff_limit, 1)):
            for p in active + surplus:
                self.store.delete("Pod", ns, p["metadata"]["name"])
            new["failed"] = failed + len(active)  # the deleted active pods end Failed (job_controller_test.go
            # "count ready pods when job fails": 1 failed + 2 active = 3)
            new["ready"] = 0
            conds.append({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                          "message": "Job has reached the specified backoff limit", "lastTransitionTime": now})
            self.events.event(job, "Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit",
                              "job-controller")
            self._write(job, {**new, "active": 0, "conditions": conds})
            return
        if self._complete(job, new, conds, completions, succeeded, active, now):
            return
        if spec.get("suspend"):  # suspending deletes the active pods; they do not count as failures
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
            new.setdefault("startTime", now)
            self._write(job, {**new, "active": len(active), "conditions": conds})
            return
        busy = {p["metadata"]["annotations"].get(COMPLETION_INDEX) for p in active} if indexed else set()
        # the next free indexes, lazily: completions is an int32 (up to 2^31-1) and the controller creates pods as
        # it goes (pkg/controller/job/indexed_job_utils.go firstPendingIndexes), never a list per completion
        todo = (i for i in range(completions or 0) if i not in done_idx and str(i) not in busy) if indexed \
            else iter(())
        for _ in range(max(0, want - len(active))):
            labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": name,
                      "controller-uid": meta["uid"], "job-name": name}
            index = next(todo, None) if indexed else None
            if index is not None:
                labels[COMPLETION_INDEX] = str(index)
            pod_name = self.names.generate(self.store, "Pod", ns, name if index is None else f"{name}-{index}")
            pod = pod_from_template(spec["template"], pod_name, ns, job, labels)
            if index is not None:
                pod["metadata"]["annotations"][COMPLETION_INDEX] = str(index)
                pod["spec"] = {"hostname": f"{name}-{index}", **pod["spec"]}
            try:
                self.store.create(pod)
            except AdmissionDenied as exc:  # the slow-start batch stops at the first error; a pod change retries
                self.events.event(job, "Warning", "FailedCreate", f"Error creating: {exc}", "job-controller")
                break
            self.events.event(job, "Normal", "SuccessfulCreate", f"Created pod: {pod_name}", "job-controller")
            active.append(pod)
        new.setdefault("startTime", now)
        self._write(job, {**new, "active": len(active), "conditions": conds})

    def _complete(self, job: Obj, new: dict, conds: list[dict], completions: int | None, succeeded: int,
                  active: list[Obj], now: str) -> bool:
        """Complete once the completions have succeeded (a work queue: any pod) and no pod is active any more
        (job_controller.go syncJob: `succeeded >= completions && active == 0`, `succeeded > 0 && active == 0`)."""
        if active or not (succeeded > 0 if completions is None else succeeded >= completions):
            return False
        conds += [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                   "message": "Reached expected number of succeeded pods", "lastTransitionTime": now},
                  {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                   "message": "Reached expected number of succeeded pods", "lastTransitionTime": now}]
        self.events.event(job, "Normal", "Completed", "Job completed", "job-controller")
        self._write(job, {**new, "active": 0, "completionTime": now, "conditions": conds})
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

"""Job controller: parallelism, completions (NonIndexed and Indexed), backoffLimit, suspend, podFailurePolicy,
backoffLimitPerIndex / maxFailedIndexes, successPolicy and activeDeadlineSeconds (batch/v1 semantics; the rules
themselves in controllers/job_policy.py), the pod-failure back-off (controllers/job_backoff.py) and the counting of
pods deleted by others (preemption, eviction) as failed, as the job-tracking finalizer lets the real one count them.

Its writes go through its own API client (kube-controller-manager's ClientBuilder: ``job-controller``, 20 qps / 30
burst by default; sim/apiclient.py): pod creates (manageJob's slowStartBatch: batches of 1, 2, 4, ... whose
requests wait on the bucket in order, so on the simulated clock the creates go out at the bucket's pace whatever the
batch boundaries), pod deletes (the tracking finalizer's removal patch, then the delete), the finalizer-removal patch
of each pod that finished (trackJobStatusAndRemoveFinalizers; the twin's pods carry no finalizer, so the request
takes its token and writes nothing), and the status update, after them. A Job whose writes wait is not synced again
until they are through (controllers/common.py KeyedWrites). Events are not paced (upstream they share the
controller's client; a twin simplification)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from itertools import islice

from kubetwin.api import twin
from kubetwin.api.defaults import job_spec
from kubetwin.controllers import job_backoff as backoff
from kubetwin.controllers import job_policy as policy
from kubetwin.controllers.common import KeyedWrites, active_pods_rank, pod_from_template
from kubetwin.k8s.conditions import conditions_of, find_condition, is_condition_true, replace_or_append_condition
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation and label (PodIndexLabel, GA 1.32)
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"  # batch.JobTrackingFinalizer
KILLED_EXIT_CODE = 137  # a container killed by SIGKILL (128 + 9): the twin deletes pods without a grace period


class AdmissionDenied(Exception):
    """A validating admission webhook refused a create; str() is the API server's error text."""


ACTIVE = ("Pending", "Running")
_EPSILON = 1e-3  # a back-off remainder below a millisecond is the clock's float sum, not time left


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



# indexed_job_utils.go addCompletionIndexEnvVariables: every container of an Indexed Job's pod reads its index from
# the pod's completion-index label (PodIndexLabel, GA in Kubernetes 1.32), unless it sets JOB_COMPLETION_INDEX itself.
INDEX_ENV = {"name": "JOB_COMPLETION_INDEX",
             "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}}


def _with_index_env(spec: dict) -> dict:
    def add(c: dict) -> dict:
        env = c.get("env") or []
        return c if any(e.get("name") == INDEX_ENV["name"] for e in env) else {**c, "env": [*env, INDEX_ENV]}
    out = {**spec, "containers": [add(c) for c in spec.get("containers") or []]}
    if spec.get("initContainers"):
        out["initContainers"] = [add(c) for c in spec["initContainers"]]
    return out


class JobController:
    def __init__(self, store: Store, env: Environment, events: EventRecorder, names: NameGenerator,
                 client: ApiClient | None = None) -> None:
        self.store, self.env, self.events, self.names = store, env, events, names
        self._work = WorkQueue(env, self._process)
        self.client = client if client is not None else ApiClient(
            "job-controller", twin.CONTROLLER_MANAGER_QPS, twin.CONTROLLER_MANAGER_BURST)
        self._writes = KeyedWrites(env, self.client, lambda key: self._queue(*key))  # type: ignore[misc]
        self._deadlines: set[tuple[tuple[str, str], float]] = set()  # activeDeadlineSeconds re-syncs queued
        self._backoffs: set[tuple[tuple[str, str], float]] = set()  # pod-failure back-off re-syncs queued
        # podBackoffStore: per Job uid, the back-off record, and the pods whose finish it has seen (the real
        # controller's "pods that still have the tracking finalizer" are the ones not yet in it)
        self._records: dict[str, backoff.BackoffRecord] = {}
        self._counted: dict[str, set[str]] = {}
        # Pods others deleted (preemption, eviction, a drain) as the Job controller saw them last, terminal: the
        # job-tracking finalizer keeps a deleted pod readable until the controller has counted it; the twin's
        # store drops it at once, so the controller keeps that last view and counts it (per Job uid, by pod uid)
        self._tombstones: dict[str, dict[str, Obj]] = {}
        self._unfinalized: set[str] = set()  # pods the controller deletes itself, its finalizer removed first
        store.watch("Job", self._on_job)
        store.watch("Pod", self._on_pod, owner_kind="Job")

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self._queue(job["metadata"].get("namespace") or "default", job["metadata"]["name"])
        else:  # removeBackoffRecord; the pods' finalizers go with the Job
            self._forget(job["metadata"]["uid"])

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)
        if not owner:
            return
        if etype == "DELETED":
            uid = pod["metadata"]["uid"]
            if uid in self._unfinalized:
                self._unfinalized.discard(uid)
            else:
                job_uid = next((r.get("uid") for r in pod["metadata"].get("ownerReferences") or []
                                if r.get("controller")), None)
                if job_uid:
                    self._tombstones.setdefault(job_uid, {})[uid] = terminated_by_deletion(pod)
        self._queue(pod["metadata"].get("namespace") or "default", owner[1])

    def _forget(self, job_uid: str) -> None:
        self._records.pop(job_uid, None)
        self._counted.pop(job_uid, None)
        self._tombstones.pop(job_uid, None)

    def _delete_pod(self, key: tuple[str, str], pod: Obj) -> None:
        """deleteJobPods: the tracking finalizer removed, then the delete; such a pod is never counted (suspend,
        surplus pods)."""
        uid = pod["metadata"]["uid"]
        self._unfinalized.add(uid)
        ns, name = pod["metadata"].get("namespace") or "default", pod["metadata"]["name"]
        self._writes.send(key, "pods", "patch", _no_finalizer)

        def delete() -> None:
            if self.store.current("Pod", ns, name, uid) is not None:
                self.store.delete("Pod", ns, name)

        self._writes.send(key, "pods", "delete", delete)

    def _queue(self, ns: str, name: str) -> None:
        self._work.add((ns, name))

    def _resync(self, timers: set[tuple[tuple[str, str], float]], key: tuple[str, str], due: float) -> None:
        """A delayed sync is due (an activeDeadlineSeconds check or a back-off): forget its timer, queue the Job."""
        timers.discard((key, due))
        self._queue(*key)

    def _process(self, key: tuple[str, str]) -> None:
        if self._writes.busy(key):  # its last sync's writes are in flight: synced again once they are through
            return
        job = self.store.get("Job", *key)
        if job is not None:
            self.sync(job)

    def sync(self, job: Obj) -> None:
        spec, meta = job["spec"], job["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        status = dict(job.get("status") or {})
        if any(is_condition_true(status.get("conditions"), t) for t in ("Complete", "Failed")):
            self._records.pop(meta["uid"], None)  # removeBackoffRecord of a finished Job
            return
        pods = self.store.owned("Pod", ns, "Job", name)
        gone = self._tombstones.get(meta["uid"])
        if gone:  # deleted pods the finalizer still holds: terminal, in the order they were created
            pods = sorted([*pods, *gone.values()], key=lambda p: p["metadata"].get("creationTimestamp", ""))
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
        # the pods by phase in one pass, each list in the pods' order (a Job of a day's churn holds up to its
        # completions' pods and syncs once per instant one of them changes; four scans were ~3 % of such a run)
        active, succeeded_pods, failed_pods = [], [], []
        for p in pods:
            phase = p["status"].get("phase")
            if phase in ACTIVE:
                active.append(p)
            elif phase == "Succeeded":
                succeeded_pods.append(p)
            elif policy.pod_failed(p):
                failed_pods.append(p)
        succeeded = len(succeeded_pods)
        # nonIgnoredFailedPodsCount: a failure an Ignore rule matched counts nowhere
        failed = sum(1 for p in failed_pods if policy.counts_as_failure(pfp, p))
        # newBackoffRecord over the pods finished since the last sync (an Ignored failure backs off too)
        counted = self._counted.setdefault(meta["uid"], set())
        new_succeeded = [p for p in succeeded_pods if p["metadata"]["uid"] not in counted]
        new_failed = [p for p in failed_pods if p["metadata"]["uid"] not in counted]
        if new_succeeded or new_failed:
            self._records[meta["uid"]] = backoff.new_backoff_record(self._records.get(meta["uid"]), new_succeeded,
                                                                    new_failed)
            counted.update(p["metadata"]["uid"] for p in new_succeeded + new_failed)
            for _ in range(len(new_succeeded) + len(new_failed)):  # removeTrackingFinalizerFromPods
                self._writes.send((ns, name), "pods", "patch", _no_finalizer)
        now = self.store.timestamp(self.env.now)
        new = {**status, "succeeded": succeeded, "failed": failed, "ready": sum(map(_ready, active))}
        if not suspended:  # the Job's first start (a resumed Job's startTime was cleared while suspended)
            new.setdefault("startTime", now)
        done_idx: set[int] = set()
        if indexed:  # succeeded counts distinct completed indexes
            done_idx = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in succeeded_pods}
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
                self._delete_pod((ns, name), p)
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
        remove = surplus + (sorted(active, key=active_pods_rank)[:len(active) - want] if len(active) > want else [])
        if remove:  # deletion takes precedence: a sync either deletes or creates pods, never both
            for p in remove:
                self._delete_pod((ns, name), p)
            removed = {id(p) for p in remove}
            active = [p for p in active if id(p) not in removed]
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
        indexes: list[int | None] = [None] * max(0, want - len(active))
        if indexed:  # firstPendingIndexes
            indexes = list(islice(todo, len(indexes)))
        wait = 0.0
        if indexes:  # manageJob: the pod-failure back-off delays the creations, and re-syncs the Job then
            at = backoff.seconds(self.store.start_time) + self.env.now
            if per_index is None:
                wait = backoff.remaining_time(self._records.get(meta["uid"]) or backoff.BackoffRecord(), at)
            else:  # getPodCreationInfoForIndependentIndexes: the indexes whose own back-off has passed, else wait
                waits = {i: backoff.remaining_time_per_index(_replaced(failed_pods, i), at) for i in indexes
                         if i is not None}
                ready = [i for i in indexes if (0.0 if i is None else waits.get(i, 0.0)) < _EPSILON]
                wait = 0.0 if ready else min(waits.values())
                indexes = list(ready)
            if wait >= _EPSILON:
                self._resync_after((ns, name), wait)
                indexes = []
        refused: list[str] = []
        for index in indexes:
            labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": name,
                      "controller-uid": meta["uid"], "job-name": name}
            if index is not None:
                labels[COMPLETION_INDEX] = str(index)
            # the pod's name is generated when the create reaches the API server (generateName)
            self._writes.send((ns, name), "pods", "create", partial(
                self._create_pod, job, spec, index, labels, pfp, per_index, failed_pods, active, refused))
            if refused:  # the slow-start batch stops at the first error; a pod change retries
                break
        self._write(job, lambda: {**new, "active": len(active), "conditions": conds})

    def _create_pod(self, job: Obj, spec: dict, index: int | None, labels: dict, pfp: dict | None,
                    per_index: int | None, failed_pods: list[Obj], active: list[Obj], refused: list[str]) -> None:
        """One pod create of the sync, when its turn comes (methods and partials, not closures: a closure kept by
        another closure is a reference cycle in the compiled module, kubetwin.native)."""
        self._create(job, partial(self._new_pod, job, spec, index, labels, pfp, per_index, failed_pods), active,
                     refused)

    def _new_pod(self, job: Obj, spec: dict, index: int | None, labels: dict, pfp: dict | None,
                 per_index: int | None, failed_pods: list[Obj]) -> Obj:
        """A pod of the Job's template, its name generated now (the API server's generateName)."""
        ns, name = job["metadata"].get("namespace") or "default", job["metadata"]["name"]
        pod_name = self.names.generate(self.store, "Pod", ns, name if index is None else f"{name}-{index}")
        pod = pod_from_template(spec["template"], pod_name, ns, job, labels)
        if index is not None:
            pod["metadata"]["annotations"][COMPLETION_INDEX] = str(index)
            pod["spec"] = {**_with_index_env(pod["spec"]), "hostname": f"{name}-{index}"}
            if per_index is not None:  # addIndexFailureCountAnnotation, from the pod it replaces
                fails, ignored = policy.new_index_failure_counts(pfp, _replaced(failed_pods, index))
                pod["metadata"]["annotations"][policy.INDEX_FAILURE_COUNT] = str(fails)
                if ignored:
                    pod["metadata"]["annotations"][policy.INDEX_IGNORED_FAILURE_COUNT] = str(ignored)
        return pod

    def _create(self, job: Obj, make: Callable[[], Obj], active: list[Obj], refused: list[str]) -> None:
        """One pod create of manageJob; after a refusal the creates of its sync still waiting for a token are
        dropped (slowStartBatch stops at the first error)."""
        if refused:
            return
        pod = make()
        try:
            self.store.create(pod)
        except AdmissionDenied as exc:
            refused.append(str(exc))
            self.events.event(job, "Warning", "FailedCreate", f"Error creating: {exc}", "job-controller")
            return
        self.events.event(job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}",
                          "job-controller")
        active.append(pod)

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
        left = float(deadline) - (self.env.now - self.store.seconds(new["startTime"]))
        if left <= 0:  # pastActiveDeadline: duration >= allowedDuration
            return "FailureTarget", *policy.DEADLINE
        key = (job["metadata"].get("namespace") or "default", job["metadata"]["name"])
        due = self.env.now + left
        if (key, due) not in self._deadlines:  # queue.AddAfter(key, syncDuration)
            self._deadlines.add((key, due))
            self.env.after(left, partial(self._resync, self._deadlines, key, due))
        return None

    def _resync_after(self, key: tuple[str, str], delay: float) -> None:
        """enqueueSyncJobWithDelay: a sync once the back-off has passed, never sooner than syncJobBatchPeriod."""
        delay = max(delay, backoff.SYNC_JOB_BATCH_PERIOD)
        due = self.env.now + delay
        if (key, due) not in self._backoffs:
            self._backoffs.add((key, due))
            self.env.after(delay, partial(self._resync, self._backoffs, key, due))

    def _finish(self, job: Obj, new: dict, conds: list[dict], finished: tuple[str, str, str], active: list[Obj],
                surplus: list[Obj], pfp: dict | None, now: str) -> None:
        """deleteActivePods, then trackJobStatusAndRemoveFinalizers + enactJobFinished: the interim condition
        (FailureTarget or SuccessCriteriaMet) and the terminal one (Failed or Complete) with the same reason and
        message. The twin's pods are gone when deleted, so both are written in this sync, in that order."""
        ctype, reason, message = finished
        for p in active + surplus:
            self._delete_pod((job["metadata"].get("namespace") or "default", job["metadata"]["name"]), p)
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

    def _write(self, job: Obj, status: dict | Callable[[], dict]) -> None:
        """The status update (UpdateStatus) when it changed, through the client, after the sync's other writes;
        ``status`` may be computed when it goes out (the pods created by then)."""
        make: Callable[[], dict] = status if callable(status) else partial(_given, status)
        if make() == job.get("status"):
            return
        meta = job["metadata"]
        ns, name, uid = meta.get("namespace") or "default", meta["name"], meta.get("uid")
        self._writes.send((ns, name), "jobs/status", "update", partial(self._update_status, ns, name, uid, make))

    def _update_status(self, ns: str, name: str, uid: str | None, make: Callable[[], dict]) -> None:
        """The status update as it goes out: to the Job it was meant for, only if the status still differs."""
        cur = self.store.current("Job", ns, name, uid)
        if cur is None:
            return
        final = make()
        if final != cur.get("status"):
            self.store.update({**cur, "status": final})


def _given(status: dict) -> dict:
    return status


def _no_finalizer() -> None:
    """A finalizer-removal patch: the twin's pods carry no job-tracking finalizer, so it only takes its token."""


def terminated_by_deletion(pod: Obj) -> Obj:
    """A deleted pod as the Job controller counts it through its finalizer: terminal. The kubelet kills the
    containers of a bound pod and writes phase Failed (the twin deletes without a grace period: SIGKILL, exit code
    137); PodGC fails an unscheduled one the same way; a pod that had already finished keeps its phase. The
    pod's conditions (DisruptionTarget from the scheduler's preemption or an eviction) stay as they were."""
    meta, status = pod["metadata"], dict(pod.get("status") or {})
    if status.get("phase") in ("Succeeded", "Failed"):
        return pod
    now = meta.get("deletionTimestamp")
    status["phase"] = "Failed"
    status["containerStatuses"] = [
        cs if (cs.get("state") or {}).get("terminated") else
        {**cs, "ready": False, "started": False, "state": {"terminated": {
            "exitCode": KILLED_EXIT_CODE, "reason": "Error",
            "startedAt": (cs.get("state") or {}).get("running", {}).get("startedAt"), "finishedAt": now}}}
        for cs in status.get("containerStatuses") or []]
    return {**pod, "status": status}


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

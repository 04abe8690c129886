"""JobSet controller (jobset.x-k8s.io/v1alpha2) as kubernetes-sigs/jobset runs it; webhooks: jobset_webhook.py.

Followed files (kubernetes-sigs/jobset): pkg/controllers/jobset_controller.go (child Jobs, labels, statuses,
suspend/resume, conditions), failure_policy.go, success_policy.go, startup_policy.go, ttl_after_finished.go,
pkg/webhooks/jobset_webhook.go (defaults), pkg/webhooks/pod_webhook.go (exclusive placement),
pkg/constants/constants.go and api/jobset/v1alpha2/jobset_types.go (names, reasons, messages).

Exclusive placement is the real two-step: the pod webhook gives the leader (completion index 0) a required
podAffinity to its own job-key and a required podAntiAffinity to every other job-key of the same priority
over the topology key; a follower's create is refused by the API server until the leader is bound, then it
gets `nodeSelector {<topologyKey>: <leader node's value>}`. The Job controller sees the refusal as
FailedCreate and retries when the leader pod changes (job.py AdmissionDenied).

Its writes go through the manager's API client (sim/apiclient.py): main.go sets the rest config's QPS and Burst from
the Configuration's clientConnection (api/config/v1alpha1/defaults.go: 500 / 500) and no RateLimiter, so
controller-runtime gives each resource its own bucket (as Kueue's minimalkueue). Child Job creates, updates and
deletes, the JobSet status update and the TTL delete wait on them; a JobSet whose writes wait is not synced again
until they are through (common.KeyedWrites). The twin reads no JobSet Configuration: the defaults always apply.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kubetwin.api.jobset_defaults import jobset_defaults
from kubetwin.controllers.common import KeyedWrites
from kubetwin.controllers.jobset_webhook import (
    EXCLUSIVE_KEY,
    GLOBAL_REPLICAS,
    JOB_GLOBAL_INDEX,
    JOB_INDEX,
    JOB_KEY,
    JOBSET_NAME,
    NODE_SELECTOR_STRATEGY,
    RESTARTS_KEY,
    RJOB_NAME,
    RJOB_REPLICAS,
    PodWebhook,
    job_key,
)
from kubetwin.k8s.conditions import conditions_of, find_condition, is_condition_true
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"
# the manager's clientConnection defaults (kubernetes-sigs/jobset api/config/v1alpha1/defaults.go)
CLIENT_QPS, CLIENT_BURST = 500.0, 500
COMPONENT = "jobset"  # mgr.GetEventRecorderFor("jobset")
# Condition reasons and messages, pkg/constants/constants.go
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
RESTART_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
RESTART_IGNORE_ACTION = ("RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
                         "applying RestartJobSetAndIgnoreMaxRestarts failure policy action")
SUSPENDED, RESUMED = ("SuspendedJobs", "jobset is suspended"), ("ResumeJobs", "jobset is resumed")
IN_ORDER = ("InOrderStartupPolicyInProgress", "in order startup policy is in progress")
IN_ORDER_DONE = ("InOrderStartupPolicyCompleted", "in order startup policy has completed")
_STATUS_ZERO = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}


class JobSetController:
    """Reconciles JobSets into child Jobs; registers the JobSet defaulting and the pod webhooks."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, client: ApiClient | None = None) -> None:
        self.store, self.env, self.events = store, env, events
        self._work = WorkQueue(env, self._process)
        self.client = client if client is not None else ApiClient("jobset-controller-manager", CLIENT_QPS,
                                                                  CLIENT_BURST, shared=False)
        self._writes = KeyedWrites(env, self.client, lambda key: self._queue(*key))  # type: ignore[misc]
        self._ttl: set[str] = set()  # uids whose deletion after ttlSecondsAfterFinished is scheduled
        store.admit(jobset_defaults, ("JobSet",))
        store.admit(PodWebhook(store), ("Pod",))
        store.watch("JobSet", self._on_jobset)
        store.watch("Job", self._on_job, owner_kind="JobSet")

    def contribute(self, until: float) -> Contribution:
        """summary.json's ``jobset_api_client`` (the manager's requests and their waits), when it made any."""
        return Contribution(summary={"jobset_api_client": self.client.summary()} if self.client.requests else {})

    # -- watches ---------------------------------------------------------------------------------
    def _on_jobset(self, etype: str, js: Obj, old: Obj | None) -> None:
        meta = js["metadata"]
        self._queue(meta.get("namespace") or "default", meta["name"])  # deleted: _process collects its Jobs

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        ref = next(r for r in job["metadata"]["ownerReferences"] if r.get("controller"))
        self._queue(job["metadata"].get("namespace") or "default", ref["name"])

    def _queue(self, ns: str, name: str) -> None:
        self._work.add((ns, name))

    def _process(self, key: tuple[str, str]) -> None:
        if self._writes.busy(key):  # its last sync's writes are in flight: synced again once they are through
            return
        js = self.store.get("JobSet", *key)
        if js is None:  # the garbage collector removes a deleted JobSet's child Jobs and their pods
            for job in self.store.owned("Job", key[0], "JobSet", key[1]):
                self._delete_job(job)
            return
        self.sync(js)

    # -- reconcile -------------------------------------------------------------------------------
    def sync(self, js: Obj) -> None:
        spec, meta = js["spec"], js["metadata"]
        if spec.get("managedBy", CONTROLLER_NAME) != CONTROLLER_NAME:
            return  # managed by another controller (MultiKueue)
        ns, name = meta.get("namespace") or "default", meta["name"]
        status = {"restarts": 0, **(js.get("status") or {})}
        status["conditions"] = [dict(c) for c in status.get("conditions") or []]
        events: list[tuple[str, str, str]] = []
        prev, active, ok, failed = [], [], [], []
        for job in self.store.owned("Job", ns, "JobSet", name):
            if int(job["metadata"]["labels"].get(RESTARTS_KEY, 0)) < status["restarts"]:
                prev.append(job)
                continue
            done = _finished(job)
            (active if done is None else ok if done == "Complete" else failed).append(job)
        rstat = self._replicated_statuses(spec, active, ok, failed)
        status["replicatedJobsStatus"] = rstat
        if _finished_js(status):
            for job in active:
                self._delete_job(job, js=js)
            self._schedule_ttl(js, status)
        else:
            self._reconcile(js, spec, status, events, prev, active, ok, failed, rstat)
        self._write(js, status, events)

    def _reconcile(self, js: Obj, spec: dict, status: dict, events: list, prev: list, active: list, ok: list,
                   failed: list, rstat: list[dict]) -> None:
        for job in prev:
            self._delete_job(job, js=js)
        if failed:
            self._failure_policy(spec, status, events, failed)
            return
        if ok and self._succeeded(spec, ok):
            _set_condition(status, events, "Completed", "True", COMPLETED, "Normal")
            status["terminalState"] = "Completed"
            return
        suspended = bool(spec.get("suspend"))
        in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
        existing = {j["metadata"]["name"] for j in prev + active + ok + failed}
        blocking = prev and (spec.get("failurePolicy") or {}).get("restartStrategy") == "BlockingRecreate"
        by_rjob = {s["name"]: s for s in rstat}
        for rj in spec["replicatedJobs"]:
            if not suspended and in_order and _all_started(rj, by_rjob[rj["name"]]):
                continue
            for idx in range(rj.get("replicas", 1)):
                job_name = f"{js['metadata']['name']}-{rj['name']}-{idx}"
                if job_name not in existing and not blocking:
                    self._create_job(js, self._construct_job(js, status, rj, idx))
            if not suspended and in_order:
                _set_condition(status, events, "StartupPolicyInProgress", "True", IN_ORDER, "Normal")
                break
        else:
            if not suspended and in_order:
                _set_condition(status, events, "StartupPolicyCompleted", "True", IN_ORDER_DONE, "Normal")
        if suspended:
            for job in active:
                if not job["spec"].get("suspend"):
                    self._update_job(js, job, lambda cur: {**cur, "spec": {**cur["spec"], "suspend": True}})
            _set_condition(status, events, "Suspended", "True", SUSPENDED, "Normal")
        else:
            self._resume(js, spec, status, events, active, by_rjob, in_order)

    def _resume(self, js: Obj, spec: dict, status: dict, events: list, active: list, by_rjob: dict,
                in_order: bool) -> None:
        """resumeJobsIfNecessary: unsuspend child Jobs, first merging what Kueue wrote into the JobSet's
        pod templates while it was suspended (labels, annotations, nodeSelector, tolerations, schedulingGates)."""
        for rj in spec["replicatedJobs"]:
            if in_order and _all_started(rj, by_rjob[rj["name"]]):
                continue
            tmpl = rj["template"]["spec"]["template"]
            for job in active:
                if job["metadata"]["labels"].get(RJOB_NAME) != rj["name"] or not job["spec"].get("suspend"):
                    continue
                self._update_job(js, job, lambda cur, tmpl=tmpl: _resumed(cur, tmpl))
            if in_order:
                _set_condition(status, events, "StartupPolicyInProgress", "True", IN_ORDER, "Normal")
                return
        _set_condition(status, events, "Suspended", "False", RESUMED, "Normal")

    def _failure_policy(self, spec: dict, status: dict, events: list, failed: list[Obj]) -> None:
        """executeFailurePolicy: the first rule matching a failed Job (earliest failure) decides; no rule
        matched -> RestartJobSet; no failurePolicy -> fail at once."""
        fp = spec.get("failurePolicy")
        first = min(failed, key=_failure_time)
        if fp is None:
            return _fail(status, events, FAILED_JOBS, first)
        action, job = "RestartJobSet", first
        for rule in fp.get("rules") or []:
            matched = [j for j in failed if _rule_applies(rule, j)]
            if matched:
                action, job = rule["action"], min(matched, key=_failure_time)
                break
        if action == "FailJobSet":
            return _fail(status, events, FAIL_ACTION, job)
        counts = action in ("RestartJobSet", "RestartJob")  # per-Job restarts are not modelled: the whole set
        if counts and status.get("restartsCountTowardsMax", 0) >= fp.get("maxRestarts", 0):
            return _fail(status, events, MAX_RESTARTS, job)
        reason, msg = RESTART_ACTION if counts else RESTART_IGNORE_ACTION
        status["restarts"] += 1
        if counts:
            status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
        events.append(("Warning", reason, f"{msg} (first failed job: {job['metadata']['name']})"))
        return None

    def _succeeded(self, spec: dict, ok: list[Obj]) -> bool:
        sp = spec.get("successPolicy") or {"operator": "All"}
        targets = sp.get("targetReplicatedJobs") or []
        matching = sum(1 for j in ok if not targets or j["metadata"]["labels"].get(RJOB_NAME) in targets)
        if sp.get("operator") == "Any":
            return matching >= 1
        return matching >= sum(rj.get("replicas", 1) for rj in spec["replicatedJobs"]
                               if not targets or rj["name"] in targets)

    def _replicated_statuses(self, spec: dict, active: list, ok: list, failed: list) -> list[dict]:
        out = {rj["name"]: {"name": rj["name"], **_STATUS_ZERO} for rj in spec["replicatedJobs"]}
        for job in active:
            st, js_ = out.get(job["metadata"]["labels"].get(RJOB_NAME)), job.get("status") or {}
            if st is None:
                continue
            jspec = job["spec"]
            pods = min(jspec.get("parallelism", 1), jspec.get("completions", jspec.get("parallelism", 1)))
            st["ready"] += js_.get("succeeded", 0) + js_.get("ready", 0) >= pods
            st["active"] += js_.get("active", 0) > 0
            st["suspended"] += bool(jspec.get("suspend"))
        for jobs, key in ((ok, "succeeded"), (failed, "failed")):
            for job in jobs:
                if job["metadata"]["labels"].get(RJOB_NAME) in out:
                    out[job["metadata"]["labels"][RJOB_NAME]][key] += 1
        return list(out.values())

    def _construct_job(self, js: Obj, status: dict, rj: dict, idx: int) -> Obj:
        """constructJob + labelAndAnnotateObject: the same keys as labels and annotations on Job and pod template."""
        meta, tmpl = js["metadata"], rj["template"]
        ns, name = meta.get("namespace") or "default", f"{meta['name']}-{rj['name']}-{idx}"
        global_idx = sum(r.get("replicas", 1) for r in js["spec"]["replicatedJobs"][
            :next(i for i, r in enumerate(js["spec"]["replicatedJobs"]) if r["name"] == rj["name"])]) + idx
        keys = {JOBSET_NAME: meta["name"], RJOB_NAME: rj["name"], RESTARTS_KEY: str(status["restarts"]),
                RJOB_REPLICAS: str(rj.get("replicas", 1)),
                GLOBAL_REPLICAS: str(sum(r.get("replicas", 1) for r in js["spec"]["replicatedJobs"])),
                JOB_INDEX: str(idx), JOB_KEY: job_key(ns, name), JOB_GLOBAL_INDEX: str(global_idx)}
        extra = {}
        for src in (meta.get("annotations") or {}, (tmpl.get("metadata") or {}).get("annotations") or {}):
            if EXCLUSIVE_KEY in src:  # JobSet level, then replicatedJob level
                extra[EXCLUSIVE_KEY] = src[EXCLUSIVE_KEY]
                if NODE_SELECTOR_STRATEGY in src:
                    extra[NODE_SELECTOR_STRATEGY] = src[NODE_SELECTOR_STRATEGY]

        def stamp(m: dict) -> dict:
            return {**m, "labels": {**(m.get("labels") or {}), **keys},
                    "annotations": {**(m.get("annotations") or {}), **keys, **extra}}

        jspec = dict(tmpl["spec"])
        ptmpl = dict(jspec["template"])
        ptmpl["metadata"] = stamp(ptmpl.get("metadata") or {})
        if js["spec"]["network"].get("enableDNSHostnames"):
            ptmpl["spec"] = {**ptmpl["spec"], "subdomain": js["spec"]["network"].get("subdomain") or meta["name"]}
        jspec["template"] = ptmpl
        jspec["suspend"] = bool(js["spec"].get("suspend"))
        jmeta = stamp({k: v for k, v in (tmpl.get("metadata") or {}).items() if k in ("labels", "annotations")})
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {**jmeta, "name": name, "namespace": ns, "ownerReferences": [owner_ref(js)]},
                "spec": jspec, "status": {}}

    def _send(self, js: Obj, resource: str, verb: str, do: Callable[[], object]) -> None:
        """One request of the JobSet's sync through the manager's client (now, or when its token is due)."""
        meta = js["metadata"]
        self._writes.send((meta.get("namespace") or "default", meta["name"]), resource, verb, do)

    def _create_job(self, js: Obj, job: Obj) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]

        def create() -> None:
            if self.store.get("Job", ns, name) is None:  # else AlreadyExists: the next sync sees it
                self.store.create(job)
        self._send(js, "jobs", "create", create)

    def _update_job(self, js: Obj, job: Obj, change: Callable[[Obj], Obj]) -> None:
        """An update of a child Job, made on the Job as it is when the request lands (a Job gone or replaced
        meanwhile is left alone: the API server would answer NotFound or Conflict and the next sync retries)."""
        ns, name, uid = job["metadata"].get("namespace") or "", job["metadata"]["name"], job["metadata"]["uid"]

        def update() -> None:
            cur = self.store.current("Job", ns, name, uid)
            if cur is not None:
                self.store.update(change(cur))
        self._send(js, "jobs", "update", update)

    def _delete_job(self, job: Obj, js: Obj | None = None) -> None:
        """Foreground deletion: the pods go first, then the Job. The JobSet's own delete is one request through
        its client (`js`); the garbage collector's (no `js`: the JobSet is gone) is not paced here."""
        ns, name, uid = job["metadata"].get("namespace") or "", job["metadata"]["name"], job["metadata"]["uid"]

        def delete() -> None:
            if self.store.current("Job", ns, name, uid) is None:
                return
            for pod in self.store.owned("Pod", ns, "Job", name):
                self.store.delete("Pod", ns, pod["metadata"]["name"])
            self.store.delete("Job", ns, name)
        if js is None:
            delete()
        else:
            self._send(js, "jobs", "delete", delete)

    def _schedule_ttl(self, js: Obj, status: dict) -> None:
        """ttlSecondsAfterFinished: delete the JobSet that long after its Completed/Failed transition."""
        ttl, uid = js["spec"].get("ttlSecondsAfterFinished"), js["metadata"]["uid"]
        if ttl is None or uid in self._ttl:
            return
        self._ttl.add(uid)
        ns, name = js["metadata"].get("namespace") or "", js["metadata"]["name"]

        def delete() -> None:
            if self.store.current("JobSet", ns, name, uid) is not None:
                self.store.delete("JobSet", ns, name)

        def expire() -> None:
            if self.store.current("JobSet", ns, name, uid) is not None:
                self.client.send(self.env, "jobsets", "delete", delete)
        self.env.after(float(ttl), expire)

    def _write(self, js: Obj, status: dict, events: list[tuple[str, str, str]]) -> None:
        now = self.store.timestamp(self.env.now)
        status["conditions"] = [{**c, "lastTransitionTime": c["lastTransitionTime"] or now}
                                for c in status["conditions"]]
        if status == js.get("status"):
            return
        ns, name, uid = js["metadata"].get("namespace") or "default", js["metadata"]["name"], js["metadata"]["uid"]

        def update() -> None:
            cur = self.store.current("JobSet", ns, name, uid)
            if cur is None:
                return
            cur = self.store.update({**cur, "status": status})
            for etype, reason, msg in events:  # emitted only once the status update succeeded
                self.events.event(cur, etype, reason, msg, COMPONENT)
        self._send(js, "jobsets/status", "update", update)


def _resumed(job: Obj, tmpl: dict) -> Obj:
    """resumeJobsIfNecessary's change to a suspended child Job: unsuspended, its pod template merged with what Kueue
    wrote into the JobSet's (labels, annotations, nodeSelector, tolerations, schedulingGates), startTime cleared."""
    jt = job["spec"]["template"]
    jmeta, tmeta = jt.get("metadata") or {}, tmpl.get("metadata") or {}
    pspec, tspec = dict(jt.get("spec") or {}), tmpl.get("spec") or {}
    pspec["nodeSelector"] = {**(pspec.get("nodeSelector") or {}), **(tspec.get("nodeSelector") or {})}
    for field in ("tolerations", "schedulingGates"):
        merged = list(pspec.get(field) or [])
        merged += [x for x in tspec.get(field) or [] if x not in merged]
        if merged:
            pspec[field] = merged
    if not pspec["nodeSelector"]:
        del pspec["nodeSelector"]
    new_meta = {**jmeta, "labels": {**(jmeta.get("labels") or {}), **(tmeta.get("labels") or {})},
                "annotations": {**(jmeta.get("annotations") or {}), **(tmeta.get("annotations") or {})}}
    job_status = {k: v for k, v in (job.get("status") or {}).items() if k != "startTime"}
    return {**job, "spec": {**job["spec"], "suspend": False, "template": {**jt, "metadata": new_meta, "spec": pspec}},
            "status": job_status}


def _finished(job: Obj) -> str | None:
    conds = conditions_of(job)
    return next((t for t in ("Complete", "Failed") if is_condition_true(conds, t)), None)


def _finished_js(status: dict) -> bool:
    return is_condition_true(status["conditions"], "Completed") or is_condition_true(status["conditions"], "Failed")


def _failure_time(job: Obj) -> tuple[str, str]:
    failed = find_condition(conditions_of(job), "Failed")
    cond = failed if failed is not None and failed.get("status") == "True" else {}
    return cond.get("lastTransitionTime", ""), job["metadata"]["name"]


def _rule_applies(rule: dict, job: Obj) -> bool:
    """ruleIsApplicable: the Job's failure reason (and message pattern) and its replicatedJob match."""
    cond = find_condition(conditions_of(job), "Failed") or {}  # only failed Jobs are asked
    reasons, patterns = rule.get("onJobFailureReasons") or [], rule.get("onJobFailureMessagePatterns") or []
    targets = rule.get("targetReplicatedJobs") or []
    return ((not reasons or cond.get("reason") in reasons)
            and (not patterns or any(re.search(p, cond.get("message", "")) for p in patterns))
            and (not targets or job["metadata"]["labels"].get(RJOB_NAME) in targets))


def _all_started(rj: dict, st: dict) -> bool:
    return rj.get("replicas", 1) == st["failed"] + st["ready"] + st["succeeded"]


def _fail(status: dict, events: list, reason_msg: tuple[str, str], job: Obj) -> None:
    reason, msg = reason_msg
    _set_condition(status, events, "Failed", "True", (reason, f"{msg} (first failed job: {job['metadata']['name']})"),
                   "Warning")
    status["terminalState"] = "Failed"


def _set_condition(status: dict, events: list, ctype: str, cstatus: str, reason_msg: tuple[str, str],
                   etype: str) -> None:
    """updateCondition: a changed status replaces the condition, a new True one is appended, StartupPolicy
    InProgress/Completed exclude each other; each change queues an event with the condition's reason."""
    reason, msg = reason_msg
    conds, changed, found = status["conditions"], False, False
    new = {"type": ctype, "status": cstatus, "reason": reason, "message": msg, "lastTransitionTime": ""}
    pair = {"StartupPolicyInProgress", "StartupPolicyCompleted"}
    for i, c in enumerate(conds):
        if c["type"] == ctype:
            found = True
            if c["status"] != cstatus:
                conds[i], changed = new, True
        elif {c["type"], ctype} == pair and c["status"] == "True" and cstatus == "True":
            conds[i], changed = {**c, "status": "False"}, True
    if not found and cstatus == "True":
        conds.append(new)
        changed = True
    if changed:
        events.append((etype, reason, msg))

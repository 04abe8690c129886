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
until they are through (common.KeyedWrites). The twin reads no JobSet Configuration: the defaults always apply,
except the RestartJob feature gate (the Scenario's `jobsetController.featureGates`).

The policies (failure, success, startup order, dependsOn) are pure functions in jobset_policy.py; with
`network.enableDNSHostnames` (the default) the JobSet's pods get `subdomain` and a headless Service of that name is
created, as createHeadlessSvcIfNecessary does (the twin resolves no DNS: the names are what a pod would look up).
"""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.api.jobset_defaults import jobset_defaults
from kubetwin.controllers import jobset_policy as P
from kubetwin.controllers.common import KeyedWrites
from kubetwin.controllers.jobset_webhook import (
    COORDINATOR_KEY,
    EXCLUSIVE_KEY,
    GLOBAL_REPLICAS,
    GROUP_NAME,
    GROUP_REPLICAS,
    JOB_GLOBAL_INDEX,
    JOB_GROUP_INDEX,
    JOB_INDEX,
    JOB_KEY,
    JOB_RESTARTS_KEY,
    JOBSET_NAME,
    JOBSET_UID,
    NODE_SELECTOR_STRATEGY,
    RESTARTS_KEY,
    RJOB_NAME,
    RJOB_REPLICAS,
    PodWebhook,
    job_key,
)
from kubetwin.k8s.conditions import conditions_of, is_condition_true
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
_STATUS_ZERO = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}


class JobSetController:
    """Reconciles JobSets into child Jobs and their headless Service; registers the JobSet defaulting and the pod
    webhooks. `restart_job`: the manager's RestartJob feature gate (alpha, off by default; the Scenario's
    jobsetController.featureGates turns it on), which lets failurePolicy rules recreate one failed Job."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder, client: ApiClient | None = None,
                 restart_job: bool = False) -> None:
        self.store, self.env, self.events = store, env, events
        self.restart_job = restart_job
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
        """Reconcile: the child Jobs sorted into previous attempts, active, succeeded and failed; the
        replicatedJobs' statuses; then the failure policy, the success policy, the headless Service, the
        Jobs to create, suspend or resume; one status update whose events follow it."""
        spec, meta = js["spec"], js["metadata"]
        if spec.get("managedBy", CONTROLLER_NAME) != CONTROLLER_NAME:
            return  # managed by another controller (MultiKueue)
        ns, name = meta.get("namespace") or "default", meta["name"]
        status = {"restarts": 0, **(js.get("status") or {})}
        status["conditions"] = [dict(c) for c in status.get("conditions") or []]
        status["replicatedJobsStatus"] = [dict(s) for s in status.get("replicatedJobsStatus") or []]
        events: list[P.Event] = []
        prev, active, ok, failed = [], [], [], []
        for job in self.store.owned("Job", ns, "JobSet", name):
            if self._previous(spec, status, job):
                prev.append(job)
                continue
            done = _finished(job)
            (active if done is None else ok if done == "Complete" else failed).append(job)
        rstat = self._replicated_statuses(spec, status, active, ok, failed)
        status["replicatedJobsStatus"] = rstat
        if _finished_js(status):
            for job in active:
                self._delete_job(job, js=js)
            self._schedule_ttl(js, status)
        else:
            self._reconcile(js, spec, status, events, prev, active, ok, failed, rstat)
        self._write(js, status, events)

    def _previous(self, spec: dict, status: dict, job: Obj) -> bool:
        """getChildJobs' previous attempts: restart-attempt below status.restarts; with RestartJob, also a
        job-restart-attempt below the Job's jobRestarts entry."""
        labels = job["metadata"]["labels"]
        if int(labels.get(RESTARTS_KEY, 0)) < status["restarts"]:
            return True
        if not self.restart_job or JOB_RESTARTS_KEY not in labels:
            return False
        target = P.job_restarts(spec, status, labels.get(RJOB_NAME, ""))
        idx = int(labels.get(JOB_INDEX, 0))
        return idx < len(target) and int(labels[JOB_RESTARTS_KEY]) < target[idx]

    def _reconcile(self, js: Obj, spec: dict, status: dict, events: list, prev: list, active: list, ok: list,
                   failed: list, rstat: list[dict]) -> None:
        for job in prev:
            self._delete_job(job, js=js)
        suspended = bool(spec.get("suspend"))
        if not suspended and P.all_jobs_ready(spec, rstat):
            P.restarting_false(status, events, P.JOBS_READY)
        if failed:
            P.execute_failure_policy(spec, status, events, failed)
            return
        if ok and P.succeeded(spec, ok):
            P.complete(status, events)
            return
        if spec["network"].get("enableDNSHostnames"):
            self._headless_service(js)
        self._create_jobs(js, spec, status, events, prev + active + ok + failed, bool(prev), rstat)
        if suspended:
            for job in active:
                if not job["spec"].get("suspend"):
                    self._update_job(js, job, lambda cur: {**cur, "spec": {**cur["spec"], "suspend": True}})
            P.set_condition(status, events, "Suspended", "True", P.SUSPENDED, "Normal")
            P.restarting_false(status, events, P.JOBSET_SUSPENDED)
        else:
            self._resume(js, spec, status, events, active, rstat)

    def _create_jobs(self, js: Obj, spec: dict, status: dict, events: list, owned: list, any_prev: bool,
                     rstat: list[dict]) -> None:
        """reconcileReplicatedJobs: walk the replicatedJobs in order; one whose dependsOn is not reached is
        skipped; InOrder creates one replicatedJob at a time (the next once every Job of this one is ready,
        succeeded or failed). BlockingRecreate creates nothing while a previous attempt's Jobs remain."""
        suspended, in_order = bool(spec.get("suspend")), P.in_order(spec)
        existing = {j["metadata"]["name"] for j in owned}
        blocking = any_prev and (spec.get("failurePolicy") or {}).get("restartStrategy") == "BlockingRecreate"
        by_rjob = {s["name"]: s for s in rstat}
        seen: dict[str, int] = {}
        for rj in spec["replicatedJobs"]:
            seen[rj["name"]] = rj.get("replicas", 1)
            if not P.dependency_reached(rj, seen, rstat):
                continue
            if not suspended and in_order and P.all_replicas_started(rj.get("replicas", 1), by_rjob.get(rj["name"])):
                continue
            for idx in range(rj.get("replicas", 1)):
                job_name = f"{js['metadata']['name']}-{rj['name']}-{idx}"
                if job_name not in existing and not blocking:
                    self._create_job(js, self._construct_job(js, status, rj, idx))
            if not suspended and in_order:
                P.set_condition(status, events, "StartupPolicyInProgress", "True", P.IN_ORDER, "Normal")
                return
        if not suspended and in_order:
            P.set_condition(status, events, "StartupPolicyCompleted", "True", P.IN_ORDER_DONE, "Normal")

    def _resume(self, js: Obj, spec: dict, status: dict, events: list, active: list, rstat: list[dict]) -> None:
        """resumeJobsIfNecessary: unsuspend child Jobs (replicatedJobs in order, dependsOn and InOrder as at
        creation), first merging what Kueue wrote into the JobSet's pod templates while it was suspended
        (labels, annotations, nodeSelector, tolerations, schedulingGates)."""
        in_order = P.in_order(spec)
        by_rjob = {s["name"]: s for s in rstat}
        seen: dict[str, int] = {}
        for rj in spec["replicatedJobs"]:
            seen[rj["name"]] = rj.get("replicas", 1)
            if not P.dependency_reached(rj, seen, rstat):
                continue
            if in_order and P.all_replicas_started(rj.get("replicas", 1), by_rjob.get(rj["name"])):
                continue
            tmpl = rj["template"]["spec"]["template"]
            for job in active:
                if job["metadata"]["labels"].get(RJOB_NAME) != rj["name"] or not job["spec"].get("suspend"):
                    continue
                self._update_job(js, job, lambda cur, tmpl=tmpl: _resumed(cur, tmpl))
            if in_order:
                P.set_condition(status, events, "StartupPolicyInProgress", "True", P.IN_ORDER, "Normal")
                return
        P.set_condition(status, events, "Suspended", "False", P.RESUMED, "Normal")

    def _replicated_statuses(self, spec: dict, status: dict, active: list, ok: list, failed: list) -> list[dict]:
        """calculateReplicatedJobStatuses; with RestartJob, each keeps its jobRestarts and
        jobRestartsCountTowardsMax."""
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
        if self.restart_job:
            for old in status.get("replicatedJobsStatus") or []:
                for key in ("jobRestarts", "jobRestartsCountTowardsMax"):
                    if old["name"] in out and old.get(key):
                        out[old["name"]][key] = list(old[key])
        return list(out.values())

    def _headless_service(self, js: Obj) -> None:
        """createHeadlessSvcIfNecessary: a Service named after the subdomain, clusterIP None, selecting the
        JobSet's pods, publishNotReadyAddresses from the network (default true), owned by the JobSet; an
        existing Service of that name is left as it is."""
        meta, net = js["metadata"], js["spec"]["network"]
        ns, sub = meta.get("namespace") or "default", P.subdomain(meta["name"], js["spec"])
        if self.store.get("Service", ns, sub) is not None:
            return
        svc = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": sub, "namespace": ns, "ownerReferences": [owner_ref(js)]},
               "spec": {"clusterIP": "None", "selector": {JOBSET_NAME: meta["name"]},
                        "publishNotReadyAddresses": net.get("publishNotReadyAddresses", True)}}

        def create() -> None:
            if self.store.get("Service", ns, sub) is None:
                self.store.create(svc)
        self._send(js, "services", "create", create)

    def _construct_job(self, js: Obj, status: dict, rj: dict, idx: int) -> Obj:
        """constructJob + labelAndAnnotateObject: the same keys as labels and annotations on Job and pod template
        (the coordinator's endpoint among them when spec.coordinator is set)."""
        meta, tmpl, spec = js["metadata"], rj["template"], js["spec"]
        rjobs = spec["replicatedJobs"]
        ns, name = meta.get("namespace") or "default", f"{meta['name']}-{rj['name']}-{idx}"
        before = rjobs[:next(i for i, r in enumerate(rjobs) if r["name"] == rj["name"])]
        group = rj.get("groupName", "default")
        in_group = [r.get("replicas", 1) for r in rjobs if r.get("groupName", "default") == group]
        keys = {JOBSET_NAME: meta["name"], JOBSET_UID: meta.get("uid", ""), RJOB_NAME: rj["name"],
                RESTARTS_KEY: str(status["restarts"])}
        if self.restart_job:
            keys[JOB_RESTARTS_KEY] = str(P.job_restarts(spec, status, rj["name"])[idx])
        keys |= {RJOB_REPLICAS: str(rj.get("replicas", 1)),
                 GLOBAL_REPLICAS: str(sum(r.get("replicas", 1) for r in rjobs)),
                 JOB_INDEX: str(idx), JOB_KEY: job_key(ns, name),
                 JOB_GLOBAL_INDEX: str(sum(r.get("replicas", 1) for r in before) + idx),
                 GROUP_NAME: group,
                 GROUP_REPLICAS: str(sum(in_group)),
                 JOB_GROUP_INDEX: str(sum(r.get("replicas", 1) for r in before
                                          if r.get("groupName", "default") == group) + idx)}
        if spec.get("coordinator"):
            keys[COORDINATOR_KEY] = P.coordinator_endpoint(meta["name"], spec)
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
        if spec["network"].get("enableDNSHostnames"):
            ptmpl["spec"] = {**ptmpl["spec"], "subdomain": P.subdomain(meta["name"], spec)}
        jspec["template"] = ptmpl
        jspec["suspend"] = bool(spec.get("suspend"))
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

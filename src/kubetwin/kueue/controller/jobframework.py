"""Kueue's job framework: how a Job or JobSet becomes a Workload, and how admission starts and stops it.

Follows kubernetes-sigs/kueue pkg/controller/jobframework (interface.go GenericJob, reconciler.go,
workload_names.go) and the integrations in pkg/controller/jobs/job (batch/v1 Job), jobs/jobset, jobs/trainjob
(Kubeflow Trainer's TrainJob) and jobs/kubeflow (the training operator's PyTorchJob):
- the webhook suspends a queued job on create (jobframework.ApplyDefaultForSuspend);
- the reconciler creates one Workload per job, named `<kind>-<name>-<hash>`, with one PodSet per pod group;
- on admission it injects each PodSet's flavor node labels and tolerations into the pod templates and
  unsuspends (RunWithPodSetsInfo); on eviction it suspends and restores the original templates
  (RestorePodSetsInfo);
- a pod template's TAS annotations (kueue.x-k8s.io/podset-required-topology ...) become the PodSet's
  topologyRequest, and a PodSet admitted with a topologyAssignment starts gated by kueue.x-k8s.io/topology
  (`controller.tas` lifts the gate with each pod's domain).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from kubetwin.k8s import podgates
from kubetwin.k8s.conditions import conditions_of, find_condition, is_condition_true
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.kueue.tas import request as tas_request
from kubetwin.store.store import Obj, Store

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants QueueLabel
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"  # constants.WorkloadPriorityClassLabel
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # constants.JobUIDLabel
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"  # constants.PrebuiltWorkloadLabel
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"  # jobs/job JobMinParallelismAnnotation
PODSET_LABEL = "kueue.x-k8s.io/podset"  # constants.PodSetLabel
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # batchv1.JobCompletionIndexAnnotation (and label)
JOB_INDEX = "jobset.sigs.k8s.io/job-index"  # jobsetapi.JobIndexKey
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"  # kueue.WorkloadAnnotation
DEFAULT_PODSET = "main"  # kueue.DefaultPodSetName
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"  # the storage version
_HASH_LENGTH = 5  # jobframework/workload_names.go hashLength
_MAX_PREFIX = 252 - _HASH_LENGTH


def workload_name(owner: Obj) -> str:
    """GetWorkloadNameForOwnerWithGVK: lower(kind)-name, cut to fit, then 5 hex of sha1(kind, group, name, uid)."""
    kind, meta = owner["kind"], owner["metadata"]
    group = owner["apiVersion"].split("/")[0] if "/" in owner["apiVersion"] else ""
    prefix = f"{kind.lower()}-{meta['name']}"[:_MAX_PREFIX]
    digest = hashlib.sha1("\n".join((kind, group, meta["name"], meta["uid"])).encode()).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def prebuilt_workload(obj: Obj) -> str | None:
    """PrebuiltWorkloadNameFor: the Workload another controller made for this job (the LWS reconciler's)."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL) or None


def queue_name(obj: Obj) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)


def with_topology_request(ps: dict, sub_group: tuple[str, int] | None = None) -> dict:
    """The PodSet's topologyRequest from its template's TAS annotations, when it has any, with the pods' rank
    labels (jobs/job and jobs/jobset PodSets: the completion index, and a JobSet's Job index over its replicas)."""
    tr = tas_request.from_annotations((ps["template"].get("metadata") or {}).get("annotations"),
                                      COMPLETION_INDEX, sub_group)
    if tr is not None:
        ps["topologyRequest"] = tr.to_api()
    return ps


@dataclass(frozen=True)
class PodSetInfo:
    """What admission adds to one PodSet's pod template (podset.PodSetInfo)."""

    name: str
    count: int
    node_selector: dict[str, str]
    tolerations: list[dict]
    # the admission checks' podSetUpdates (e.g. the ProvisioningRequest consume annotations)
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    scheduling_gates: list[str] = field(default_factory=list)  # TAS: kueue.x-k8s.io/topology


def pod_set_infos(store: Store, wl: Obj, updates: dict[str, dict] | None = None) -> list[PodSetInfo]:
    """Each admitted PodSet's flavors' node labels and tolerations (podset.FromAssignment), merged with
    ``updates``: the admission checks' podSetUpdates per PodSet (annotations, labels, nodeSelector, tolerations)."""
    counts = {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]}
    topology_requests = {ps["name"]: ps.get("topologyRequest") for ps in wl["spec"]["podSets"]}
    updates = updates or {}
    infos = []
    for psa in wl["status"]["admission"].get("podSetAssignments") or []:
        selector: dict[str, str] = {}
        tolerations: list[dict] = []
        for flavor in sorted(set((psa.get("flavors") or {}).values())):
            rf = store.get("ResourceFlavor", "", flavor)
            spec = (rf or {}).get("spec") or {}
            selector.update(spec.get("nodeLabels") or {})
            tolerations += [t for t in spec.get("tolerations") or [] if t not in tolerations]
        upd = updates.get(psa["name"]) or {}
        selector.update(upd.get("nodeSelector") or {})
        tolerations += [t for t in upd.get("tolerations") or [] if t not in tolerations]
        annotations, labels, gates = dict(upd.get("annotations") or {}), dict(upd.get("labels") or {}), []
        if psa.get("topologyAssignment"):
            # podset.FromAssignment: the topology gate (the ungater lifts it with each pod's domain), and for an
            # implied request the unconstrained annotation; the pod set's label and the workload's name, which
            # the ungater finds the pods by (jobframework: PodSetLabel, WorkloadAnnotation)
            request = topology_requests.get(psa["name"]) or {}
            if not any(k in request for k in ("required", "preferred", "unconstrained")):
                annotations[tas_request.UNCONSTRAINED] = "true"
            annotations[WORKLOAD_ANNOTATION] = wl["metadata"]["name"]
            labels[PODSET_LABEL] = psa["name"]
            gates.append(tas_request.TOPOLOGY_GATE)
        infos.append(PodSetInfo(psa["name"], int(psa.get("count", counts.get(psa["name"], 1))), selector,
                                tolerations, annotations, labels, gates))
    return infos


class GenericJob:
    """One integration (a kind Kueue manages); subclasses read and write that kind's spec."""

    kind = ""
    api_version = ""

    def bind(self, store: Store) -> GenericJob:
        """The integration as one run's manager holds it (one that reads other objects keeps the store)."""
        return self

    def load(self, store: Store, ns: str, name: str) -> Obj | None:
        """The job a work-queue key names (a composable job, as the Pod integration's group, builds a view)."""
        return store.get(self.kind, ns, name)

    def workload_name(self, job: Obj) -> str:
        return workload_name(job)

    def workload_meta(self, job: Obj) -> dict:
        """The Workload's labels and owner references (the job is its controller)."""
        return {"labels": {JOB_UID_LABEL: job["metadata"]["uid"]}, "ownerReferences": [owner_ref(job)]}

    def compose_error(self, job: Obj) -> str | None:
        """Why no Workload can be made for the job yet (an ErrWorkloadCompose event), or None."""
        return None

    def start(self, store: Store, job: Obj, infos: list[PodSetInfo]) -> list[Obj]:
        """startJob: run with the PodSets' info; returns the objects started (each gets a Started event)."""
        return [store.update(self.run_with_pod_sets_info(job, infos))]

    def stop_job(self, store: Store, job: Obj, original: list[dict], message: str) -> list[Obj]:
        """stopJob on eviction: suspend and restore the templates; returns the objects stopped."""
        if self.suspended(job):
            return []
        return [store.update(self.stop(job, original))]

    def active(self, store: Store, job: Obj) -> bool:
        """IsActive: the job still has pods (a stopped job releases its quota once they are gone)."""
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        jobs = [job] if job["kind"] == "Job" else store.owned("Job", ns, job["kind"], name)
        return any(store.owned("Pod", ns, "Job", j["metadata"]["name"]) for j in jobs)

    def pod_sets(self, job: Obj) -> list[dict]:
        raise NotImplementedError

    def templates(self, spec: dict) -> dict[str, dict]:
        """PodSet name -> the pod template inside `spec` it is made from."""
        raise NotImplementedError

    def finished(self, job: Obj) -> tuple[bool, bool, str]:
        """(finished, succeeded, message) from the job's conditions."""
        conds = conditions_of(job)
        if is_condition_true(conds, "Complete") or is_condition_true(conds, "Completed"):
            return True, True, "Job finished successfully"
        if is_condition_true(conds, "Failed"):
            return True, False, (find_condition(conds, "Failed") or {}).get("message") or "Job failed"
        return False, False, ""

    def suspended(self, job: Obj) -> bool:
        return bool(job["spec"].get("suspend"))

    def pods_ready(self, job: Obj) -> bool:
        """GenericJob.PodsReady: every pod the job runs is Ready or has succeeded."""
        raise NotImplementedError

    def run_with_pod_sets_info(self, job: Obj, infos: list[PodSetInfo]) -> Obj:
        """Unsuspend with each PodSet's node selector and tolerations merged into its template."""
        spec = copy.deepcopy(job["spec"])
        templates = self.templates(spec)
        for info in infos:
            tmpl = templates.get(info.name)
            if tmpl is None:
                continue
            for key, extra in (("annotations", info.annotations), ("labels", info.labels)):
                if extra:
                    meta = tmpl.setdefault("metadata", {})
                    meta[key] = {**(meta.get(key) or {}), **extra}
            pod = tmpl.setdefault("spec", {})
            for name in info.scheduling_gates:
                pod = tmpl["spec"] = podgates.gate(pod, name)
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **info.node_selector}
            tols = list(pod.get("tolerations") or [])
            pod["tolerations"] = tols + [t for t in info.tolerations if t not in tols]
            if not pod["nodeSelector"]:
                del pod["nodeSelector"]
            if not pod["tolerations"]:
                del pod["tolerations"]
        self.set_counts(spec, infos)
        spec["suspend"] = False
        return {**job, "spec": spec}

    def set_counts(self, spec: dict, infos: list[PodSetInfo]) -> None:
        """Partial admission: a reduced PodSet count becomes the job's parallelism."""

    def stop(self, job: Obj, original: list[dict]) -> Obj:
        """Suspend and restore the templates the Workload was made from (RestorePodSetsInfo)."""
        spec = copy.deepcopy(job["spec"])
        templates = self.templates(spec)
        for ps in original:
            tmpl = templates.get(ps["name"])
            if tmpl is not None:
                tmpl["spec"] = copy.deepcopy(ps["template"].get("spec") or {})
                if (tmpl.get("metadata") or {}) != (ps["template"].get("metadata") or {}):  # podSetUpdates
                    tmpl["metadata"] = copy.deepcopy(ps["template"].get("metadata") or {})
        self.restore_counts(spec, original)
        spec["suspend"] = True
        return {**job, "spec": spec}

    def restore_counts(self, spec: dict, original: list[dict]) -> None:
        pass


class BatchJob(GenericJob):
    """batch/v1 Job: one PodSet `main`, count = min(parallelism, completions) (jobs/job podsCount)."""

    kind, api_version = "Job", "batch/v1"

    def pod_sets(self, job: Obj) -> list[dict]:
        spec = job["spec"]
        count = int(spec.get("parallelism", 1))
        if spec.get("completions") is not None:
            count = min(count, int(spec["completions"]))
        ps = {"name": DEFAULT_PODSET, "count": count, "template": copy.deepcopy(spec["template"])}
        with_topology_request(ps)
        minimum = ((job["metadata"].get("annotations") or {}).get(MIN_PARALLELISM))
        if minimum is not None:
            ps["minCount"] = int(minimum)
        return [ps]

    def templates(self, spec: dict) -> dict[str, dict]:
        return {DEFAULT_PODSET: spec["template"]}

    def pods_ready(self, job: Obj) -> bool:
        """jobs/job Job.PodsReady: status.ready + status.succeeded >= podsCount (min(parallelism, completions));
        the twin's Job controller counts status.ready from the active pods' Ready condition."""
        spec, status = job["spec"], job.get("status") or {}
        count = int(spec.get("parallelism", 1))
        if spec.get("completions") is not None:
            count = min(count, int(spec["completions"]))
        return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= count

    def set_counts(self, spec: dict, infos: list[PodSetInfo]) -> None:
        for info in infos:
            if info.count < int(spec.get("parallelism", 1)):
                spec["parallelism"] = info.count

    def restore_counts(self, spec: dict, original: list[dict]) -> None:
        spec["parallelism"] = original[0]["count"] if spec.get("completions") is None else max(
            original[0]["count"], int(spec.get("parallelism", 1)))


class JobSetJob(GenericJob):
    """jobset.x-k8s.io JobSet: one PodSet per replicatedJob, count = replicas x pods per Job
    (jobs/jobset podsCount: parallelism, capped by completions)."""

    kind, api_version = "JobSet", "jobset.x-k8s.io/v1alpha2"

    def pod_sets(self, job: Obj) -> list[dict]:
        out = []
        for rj in job["spec"].get("replicatedJobs") or []:
            jspec = rj["template"].get("spec") or {}
            per_job = int(jspec.get("parallelism", 1))
            if jspec.get("completions") is not None:
                per_job = min(per_job, int(jspec["completions"]))
            replicas = int(rj.get("replicas", 1))
            out.append(with_topology_request({"name": rj["name"], "count": replicas * per_job,
                                              "template": copy.deepcopy(jspec["template"])}, (JOB_INDEX, replicas)))
        return out

    def templates(self, spec: dict) -> dict[str, dict]:
        return {rj["name"]: rj["template"]["spec"]["template"] for rj in spec.get("replicatedJobs") or []}

    def pods_ready(self, job: Obj) -> bool:
        """jobs/jobset PodsReady: replicatedJobsStatus ready + succeeded Jobs cover every replica."""
        replicas = sum(int(rj.get("replicas", 1)) for rj in job["spec"].get("replicatedJobs") or [])
        done = sum(int(st.get("ready") or 0) + int(st.get("succeeded") or 0)
                   for st in (job.get("status") or {}).get("replicatedJobsStatus") or [])
        return done >= replicas

    def finished(self, job: Obj) -> tuple[bool, bool, str]:
        conds = conditions_of(job)
        if is_condition_true(conds, "Completed"):
            return True, True, "jobset completed successfully"
        if is_condition_true(conds, "Failed"):
            return True, False, (find_condition(conds, "Failed") or {}).get("message") or "jobset failed"
        return False, False, ""


class TrainJobJob(GenericJob):
    """Kubeflow Trainer's TrainJob (kueue pkg/controller/jobs/trainjob): its PodSets are those of the JobSet the
    Trainer would build from it and its runtime (getChildJobSet, then the JobSet integration's PodSets); admission
    writes each PodSet's node selector, tolerations, labels, annotations and scheduling gates into the runtime
    patch the webhook added (manager kueue.x-k8s.io/manager) and unsuspends; eviction suspends and empties that
    patch. The Trainer then re-applies its JobSet with them (controllers/trainer.py)."""

    kind, api_version = "TrainJob", "trainer.kubeflow.org/v1alpha1"

    def __init__(self, store: Store | None = None) -> None:
        self.store = store

    def bind(self, store: Store) -> GenericJob:
        return TrainJobJob(store)

    def _jobset(self, job: Obj) -> Obj | None:
        from kubetwin.controllers import trainer_runtime as trainer

        if self.store is None:
            return None
        runtime = self.store.get(*trainer.runtime_key(job))
        return trainer.build_jobset(job, runtime) if runtime is not None else None

    def compose_error(self, job: Obj) -> str | None:
        """getChildJobSet's error while the runtime is missing."""
        from kubetwin.controllers import trainer_runtime as trainer

        if self._jobset(job) is None:
            return f"runtime '{trainer.runtime_key(job)[2]}' not found"
        return None

    def pod_sets(self, job: Obj) -> list[dict]:
        js = self._jobset(job)
        return JobSetJob().pod_sets(js) if js is not None else []

    def templates(self, spec: dict) -> dict[str, dict]:
        return {}

    def active(self, store: Store, job: Obj) -> bool:
        """IsActive: a Job of its JobSet still has active pods (status.jobsStatus[*].active)."""
        return any(int(st.get("active") or 0) > 0 for st in (job.get("status") or {}).get("jobsStatus") or [])

    def pods_ready(self, job: Obj) -> bool:
        """PodsReady: ready + succeeded Jobs over jobsStatus cover every replica of the JobSet."""
        js = self._jobset(job)
        if js is None:
            return False
        replicas = sum(int(rj.get("replicas", 1)) for rj in js["spec"].get("replicatedJobs") or [])
        done = sum(int(st.get("ready") or 0) + int(st.get("succeeded") or 0)
                   for st in (job.get("status") or {}).get("jobsStatus") or [])
        return done == replicas

    def finished(self, job: Obj) -> tuple[bool, bool, str]:
        conds = conditions_of(job)
        if is_condition_true(conds, "Complete"):
            return True, True, (find_condition(conds, "Complete") or {}).get("message") or ""
        if is_condition_true(conds, "Failed"):
            return True, False, (find_condition(conds, "Failed") or {}).get("message") or ""
        return False, False, ""

    def run_with_pod_sets_info(self, job: Obj, infos: list[PodSetInfo]) -> Obj:
        patches = []
        for info in infos:
            meta = {k: v for k, v in (("annotations", info.annotations), ("labels", info.labels)) if v}
            pod = {k: v for k, v in (("nodeSelector", info.node_selector), ("tolerations", info.tolerations),
                                     ("schedulingGates", [{"name": g} for g in info.scheduling_gates])) if v}
            tmpl: dict = {"spec": pod} if not meta else {"metadata": meta, "spec": pod}
            patches.append({"name": info.name, "template": {"spec": {"template": tmpl}}})
        spec = copy.deepcopy(job["spec"])
        _kueue_patch(spec)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = patches
        spec["suspend"] = False
        return {**job, "spec": spec}

    def stop(self, job: Obj, original: list[dict]) -> Obj:
        """Stop: suspend, then RestorePodSetsInfo empties Kueue's runtime patch."""
        spec = copy.deepcopy(job["spec"])
        _kueue_patch(spec)["trainingRuntimeSpec"]["template"]["spec"].pop("replicatedJobs", None)
        spec["suspend"] = True
        return {**job, "spec": spec}


class PyTorchJobJob(GenericJob):
    """The training operator's PyTorchJob (kueue pkg/controller/jobs/kubeflow/kubeflowjob and jobs/pytorchjob): one
    PodSet per replica type in Master, Worker order, named in lower case, count = replicas; suspended through
    runPolicy.suspend; active while a replica type has active pods; its pods are ready once it is Running."""

    kind, api_version = "PyTorchJob", "kubeflow.org/v1"
    TYPES = ("Master", "Worker")

    def pod_sets(self, job: Obj) -> list[dict]:
        specs = job["spec"].get("pytorchReplicaSpecs") or {}
        return [with_topology_request({"name": t.lower(), "count": int(specs[t].get("replicas", 1)),
                                       "template": copy.deepcopy(specs[t].get("template") or {})},
                                      ("training.kubeflow.org/replica-index", int(specs[t].get("replicas", 1))))
                for t in self.TYPES if specs.get(t) is not None]

    def templates(self, spec: dict) -> dict[str, dict]:
        specs = spec.get("pytorchReplicaSpecs") or {}
        return {t.lower(): specs[t].setdefault("template", {}) for t in self.TYPES if specs.get(t) is not None}

    def suspended(self, job: Obj) -> bool:
        return bool((job["spec"].get("runPolicy") or {}).get("suspend"))

    def active(self, store: Store, job: Obj) -> bool:
        return any(int(st.get("active") or 0) for st in ((job.get("status") or {}).get("replicaStatuses")
                                                          or {}).values())

    def pods_ready(self, job: Obj) -> bool:
        return is_condition_true(conditions_of(job), "Running")

    def finished(self, job: Obj) -> tuple[bool, bool, str]:
        for c in conditions_of(job):
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
                return True, c["type"] != "Failed", c.get("message") or ""
        return False, False, ""

    def run_with_pod_sets_info(self, job: Obj, infos: list[PodSetInfo]) -> Obj:
        return _run_policy_suspend(super().run_with_pod_sets_info(job, infos), False)

    def stop(self, job: Obj, original: list[dict]) -> Obj:
        return _run_policy_suspend(super().stop(job, original), True)


def _run_policy_suspend(out: Obj, suspend: bool) -> Obj:
    """A PyTorchJob suspends through spec.runPolicy.suspend, not spec.suspend (the generic job's field)."""
    spec = out["spec"]
    spec.pop("suspend", None)
    spec["runPolicy"] = {**(spec.get("runPolicy") or {}), "suspend": suspend}
    return out


TRAINJOB_PATCH_MANAGER = "kueue.x-k8s.io/manager"  # jobs/trainjob runtimePatchManagerName


def _kueue_patch(spec: dict) -> dict:
    """Kueue's runtime patch in a TrainJob spec (the webhook's, added again if someone removed it)."""
    patches = spec.setdefault("runtimePatches", [])
    for p in patches:
        if p.get("manager") == TRAINJOB_PATCH_MANAGER:
            p.setdefault("trainingRuntimeSpec", {}).setdefault("template", {}).setdefault("spec", {})
            return p
    patch = {"manager": TRAINJOB_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}
    patches.append(patch)
    return patch


INTEGRATIONS: dict[str, GenericJob] = {j.kind: j for j in (BatchJob(), JobSetJob(), TrainJobJob(), PyTorchJobJob())}


def suspend_queued(obj: Obj) -> Obj:
    """The integrations' mutating webhook: a job with a queue name is created suspended; a TrainJob also gets
    Kueue's empty runtime patch (jobs/trainjob TrainJobWebhook.Default), which admission fills."""
    if obj.get("kind") == "TrainJob" and queue_name(obj):
        spec = copy.deepcopy(obj.get("spec") or {})
        if not any(p.get("manager") == TRAINJOB_PATCH_MANAGER for p in spec.get("runtimePatches") or []):
            _kueue_patch(spec)
        obj = {**obj, "spec": spec}
    if obj.get("kind") == PyTorchJobJob.kind and queue_name(obj):  # kubeflowjob: runPolicy.suspend
        run = (obj.get("spec") or {}).get("runPolicy") or {}
        if not run.get("suspend"):
            return {**obj, "spec": {**(obj.get("spec") or {}), "runPolicy": {**run, "suspend": True}}}
        return obj
    if obj.get("kind") in INTEGRATIONS and queue_name(obj) and not obj.get("spec", {}).get("suspend"):
        return {**obj, "spec": {**obj["spec"], "suspend": True}}
    return obj


def suspend_queued_unless_admitted(store: Store) -> Callable[[Obj], Obj]:
    """suspend_queued, except for a job restored with its admitted Workload (an imported cluster's, importer/
    convert.py: the Workload, created before the job, names it by its uid): it was running at the snapshot and
    stays running, its Workload holding the quota. A job created without a uid (every other) never has one yet."""
    def admit(obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        if meta.get("uid") and obj.get("kind") in INTEGRATIONS and queue_name(obj):
            wl = store.get("Workload", meta.get("namespace") or "default", workload_name(obj))
            if wl is not None and (wl.get("status") or {}).get("admission"):
                return obj
        return suspend_queued(obj)
    return admit

"""The Kubeflow training operator's PyTorchJob controller (kubeflow.org/v1), as kubeflow/training-operator v1.9 runs
it (release-1.9 @078ec30f, Apache-2.0; the v1 operator's last line before Kubeflow Trainer v2 replaced it).

Followed: pkg/apis/kubeflow.org/v1/pytorch_defaults.go (defaults the controller applies in memory, never stored:
cleanPodPolicy None, replica type names in camel case, replicas 1, restartPolicy OnFailure, the `pytorchjob-port`
23456 on the `pytorch` container, nprocPerNode "auto"), pkg/controller.v1/common/job.go ReconcileJobs (finished:
clean up pods by cleanPodPolicy; suspended: delete the pods, Running False, Suspended True; resumed; the backoff
limit over running pods' restarts; activeDeadlineSeconds), common/pod.go ReconcilePods and createNewPod (one pod
`<job>-<type>-<index>` per replica with the operator's labels, a failed pod of an OnFailure / Always / retryable
ExitCode replica deleted to be made again, "Restarting"), pytorch/envvar.go and master.go (the env), pytorch/
initcontainer.go (workers wait for the master's name), pytorchjob_controller.go UpdateJobStatus and onOwnerCreateFunc
(Created, Running, Succeeded, Restarting, Failed with the operator's reasons and messages), pkg/util/status.go
(setCondition: Running and Restarting replace each other, Running turns False when the job finishes, nothing
changes once Failed). No headless Service is made per pod (the twin resolves no DNS; MASTER_ADDR is still set);
elasticPolicy's rendezvous variables and HPA are not modelled (validation says so).
"""

from __future__ import annotations

import copy

from kubetwin.k8s.conditions import is_condition_true
from kubetwin.k8s.ownerrefs import controller_of, owner_ref
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

KIND, API_VERSION = "PyTorchJob", "kubeflow.org/v1"
CONTROLLER = "pytorchjob-controller"
DEFAULT_CONTAINER, PORT_NAME, DEFAULT_PORT = "pytorch", "pytorchjob-port", 23456
REPLICA_TYPES = ("Master", "Worker")
INIT_IMAGE, INIT_TRIES = "alpine:3.10", 100  # config.PyTorchInitContainerImageDefault / MaxTriesDefault
# kubeflow.org/v1 common_types.go
OPERATOR_NAME, JOB_NAME = "training.kubeflow.org/operator-name", "training.kubeflow.org/job-name"
REPLICA_TYPE, REPLICA_INDEX = "training.kubeflow.org/replica-type", "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"
MANAGED_BY = "kubeflow.org/training-operator"  # the default (and the only non-external) runPolicy.managedBy


def defaults(job: Obj) -> Obj:
    """SetDefaults_PyTorchJob on a copy."""
    job = copy.deepcopy(job)
    spec = job.setdefault("spec", {})
    run = spec.setdefault("runPolicy", {})
    run.setdefault("cleanPodPolicy", "None")
    specs = spec.get("pytorchReplicaSpecs") or {}
    for typ in REPLICA_TYPES:  # setTypeNameToCamelCase
        for key in list(specs):
            if key.lower() == typ.lower() and key != typ:
                specs[typ] = specs.pop(key)
                break
    for rs in specs.values():
        if not isinstance(rs, dict):
            continue
        rs.setdefault("replicas", 1)
        rs["restartPolicy"] = rs.get("restartPolicy") or "OnFailure"
        pod = rs.setdefault("template", {}).setdefault("spec", {})
        ctrs = pod.get("containers") or []
        idx = next((i for i, c in enumerate(ctrs) if c.get("name") == DEFAULT_CONTAINER), 0)
        if ctrs and not any(p.get("name") == PORT_NAME for p in ctrs[idx].get("ports") or []):
            ctrs[idx]["ports"] = [*(ctrs[idx].get("ports") or []), {"name": PORT_NAME, "containerPort": DEFAULT_PORT}]
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, dict):
        lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
        if lo is None or hi is None:
            worker = (specs.get("Worker") or {}).get("replicas")
            elastic["minReplicas"] = lo if lo is not None else hi if hi is not None else worker
            elastic["maxReplicas"] = hi if hi is not None else elastic["minReplicas"]
    if (elastic is None or elastic.get("nProcPerNode") is None) and spec.get("nprocPerNode") is None:
        spec["nprocPerNode"] = "auto"
    spec["pytorchReplicaSpecs"] = specs
    return job


def replica_name(job: str, rtype: str, index: int) -> str:
    """replicaName / GenGeneralName: `<job>-<type in lower case>-<index>`."""
    return f"{job}-{rtype.lower()}-{index}".replace("/", "-")


def _nproc(spec: dict) -> int:
    """getNprocPerNodeInt: nprocPerNode as a number, else 1 ("auto", "gpu")."""
    raw = str(spec.get("nprocPerNode") or "")
    return int(raw) if raw.isdigit() else 1


def pod_env(job: Obj, rtype: str, index: int) -> list[dict]:
    """setPodEnv: what every container of the replica's pod gets appended to its env."""
    spec = job["spec"]
    specs = spec["pytorchReplicaSpecs"]
    total = sum(int(rs.get("replicas", 1)) for rs in specs.values())
    out = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    if "Master" in specs:
        port = next((p.get("containerPort") for c in specs["Master"]["template"]["spec"].get("containers") or []
                     if c.get("name") == DEFAULT_CONTAINER for p in c.get("ports") or []
                     if p.get("name") == PORT_NAME), None)
        addr = replica_name(job["metadata"]["name"], "Master", 0)
        if port is not None:  # getPortFromPyTorchJob: no port, no master env (upstream returns the error)
            out += [{"name": "MASTER_PORT", "value": str(port)}, {"name": "PET_MASTER_PORT", "value": str(port)},
                    {"name": "MASTER_ADDR", "value": addr}, {"name": "PET_MASTER_ADDR", "value": addr}]
        rank = index + 1 if rtype == "Worker" else index
        out += [{"name": "WORLD_SIZE", "value": str(total * _nproc(spec))}, {"name": "RANK", "value": str(rank)},
                {"name": "PET_NODE_RANK", "value": str(rank)}]
    if spec.get("nprocPerNode") is not None:
        out.append({"name": "PET_NPROC_PER_NODE", "value": str(spec["nprocPerNode"])})
    if spec.get("elasticPolicy") is None:
        out.append({"name": "PET_NNODES", "value": str(total)})
    return out


def init_container(job: Obj) -> dict:
    """initcontainer.go's default template: the worker waits until the master's name resolves."""
    master = replica_name(job["metadata"]["name"], "Master", 0)
    return {"name": "init-pytorch", "image": INIT_IMAGE, "imagePullPolicy": "IfNotPresent",
            "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
            "command": ["sh", "-c", f"err=1;for i in $(seq {INIT_TRIES}); do if nslookup {master}; then err=0 && "
                        "break; fi;echo waiting for master; sleep 2; done; exit $err"]}


def labels(job_name: str, rtype: str | None = None) -> dict[str, str]:
    """GenLabels, and the replica type's selector labels."""
    out = {OPERATOR_NAME: CONTROLLER, JOB_NAME: job_name.replace("/", "-")}
    if rtype is not None:
        out[REPLICA_TYPE] = rtype.lower()
    return out


def new_pod(job: Obj, rtype: str, index: int) -> Obj:
    """createNewPod: the replica's template with the operator's labels, env, init container and restart policy."""
    specs = job["spec"]["pytorchReplicaSpecs"]
    rs = specs[rtype]
    tmpl = copy.deepcopy(rs.get("template") or {})
    meta = dict(tmpl.get("metadata") or {})
    lab = {**(meta.get("labels") or {}), **labels(job["metadata"]["name"], rtype), REPLICA_INDEX: str(index)}
    if rtype == "Master" or ("Master" not in specs and index == 0):  # IsMasterRole
        lab[JOB_ROLE] = "master"
    meta.update(name=replica_name(job["metadata"]["name"], rtype, index),
                namespace=job["metadata"].get("namespace") or "default", labels=lab,
                ownerReferences=[owner_ref(job)])
    meta.pop("generateName", None)
    pod = tmpl.get("spec") or {}
    env = pod_env(job, rtype, index)
    pod["containers"] = [{**c, "env": [*(c.get("env") or []), *env]} for c in pod.get("containers") or []]
    if rtype == "Worker" and "Master" in specs:
        pod["initContainers"] = [*(pod.get("initContainers") or []), init_container(job)]
    policy = rs.get("restartPolicy") or "OnFailure"
    pod["restartPolicy"] = "Never" if policy == "ExitCode" else policy
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod}


def _retryable(code: int) -> bool:
    """util.IsRetryableExitCode: 128+ (killed by a signal) is retried, 1-127 is not."""
    return code >= 128


def _condition(status: dict, ctype: str, cstatus: str, reason: str, message: str, now: str) -> None:
    """status.go setCondition."""
    conds = status.get("conditions") or []
    if any(c["type"] == "Failed" and c["status"] == "True" for c in conds):
        return
    cur = next((c for c in conds if c["type"] == ctype), None)
    if cur is not None and cur["status"] == cstatus and cur.get("reason") == reason:
        return
    new = {"type": ctype, "status": cstatus, "reason": reason, "message": message, "lastUpdateTime": now,
           "lastTransitionTime": cur["lastTransitionTime"] if cur is not None and cur["status"] == cstatus else now}
    kept = []
    for c in conds:
        if c["type"] == ctype or {c["type"], ctype} == {"Running", "Restarting"}:
            continue
        if ctype in ("Failed", "Succeeded") and c["type"] == "Running":
            c = {**c, "status": "False"}
        kept.append(c)
    status["conditions"] = [*kept, new]


def _is(status: dict, ctype: str) -> bool:
    return is_condition_true(status.get("conditions"), ctype)


class PyTorchJobController:
    """Reconciles PyTorchJobs into their master and worker pods, and their status from those pods."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self._work = WorkQueue(env, self._process)
        self._timers: set[tuple[str, str, float]] = set()
        store.watch(KIND, self._on_job)
        store.watch("Pod", self._on_pod, owner_kind=KIND)

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self._work.add((job["metadata"].get("namespace") or "default", job["metadata"]["name"]))

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)  # a PyTorchJob: the watch is filtered on the controller's kind
        if owner is not None:
            self._work.add((pod["metadata"].get("namespace") or "default", owner[1]))

    def _process(self, key: tuple[str, str]) -> None:
        job = self.store.get(KIND, *key)
        if job is not None and not job["metadata"].get("deletionTimestamp"):
            self.reconcile(job)

    def _later(self, key: tuple[str, str], at: float) -> None:
        if (key[0], key[1], at) not in self._timers:
            self._timers.add((key[0], key[1], at))
            self.env.after(max(0.0, at - self.env.now), lambda: self._work.add(key))

    def reconcile(self, stored: Obj) -> None:
        run = (stored.get("spec") or {}).get("runPolicy") or {}
        if run.get("managedBy") not in (None, MANAGED_BY):
            return  # ManagedByExternalController (MultiKueue)
        job = defaults(stored)
        meta, spec = job["metadata"], job["spec"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        now = self.store.timestamp(self.env.now)
        status = copy.deepcopy(stored.get("status") or {})
        if not any(c["type"] == "Created" for c in status.get("conditions") or []):  # onOwnerCreateFunc
            _condition(status, "Created", "True", f"{KIND}Created", f"{KIND} {name} is created.", now)
        # terminating pods still hold their name and index (GetPodsForJob lists them), but are not deleted again
        every = self.store.owned("Pod", ns, KIND, name)
        pods = [p for p in every if not p["metadata"].get("deletionTimestamp")]
        run, specs = spec["runPolicy"], spec["pytorchReplicaSpecs"]
        finished = _is(status, "Succeeded") or _is(status, "Failed")
        if finished:
            self._clean(job, status, pods, run)
            if _is(status, "Succeeded"):
                for st in (status.get("replicaStatuses") or {}).values():
                    st["succeeded"] = int(st.get("succeeded") or 0) + int(st.get("active") or 0)
                    st["active"] = 0
            self._ttl(job, status, run)
            return self._write(stored, status)
        if run.get("suspend"):
            self._clean(job, status, pods, run)
            for st in (status.get("replicaStatuses") or {}).values():
                st["active"] = 0
            msg = f"{KIND} {name} is suspended."
            if _is(status, "Running"):
                _condition(status, "Running", "False", f"{KIND}Suspended", msg, now)
            if not _is(status, "Suspended"):
                _condition(status, "Suspended", "True", f"{KIND}Suspended", msg, now)
                self.events.event(stored, "Normal", f"{KIND}Suspended", msg, CONTROLLER)
            return self._write(stored, status)
        if _is(status, "Suspended"):
            msg = f"{KIND} {name} is resumed."
            _condition(status, "Suspended", "False", f"{KIND}Resumed", msg, now)
            status["startTime"] = now
            self.events.event(stored, "Normal", f"{KIND}Resumed", msg, CONTROLLER)
        failure = ""
        if run.get("backoffLimit") is not None and self._past_backoff(specs, pods, int(run["backoffLimit"])):
            failure = f"Job {name} has failed because it has reached the specified backoff limit"
        elif run.get("activeDeadlineSeconds") is not None and status.get("startTime") and \
                self.env.now >= self.store.seconds(status["startTime"]) + int(run["activeDeadlineSeconds"]):
            failure = f"Job {name} has failed because it was active longer than specified deadline"
        if failure:
            status.setdefault("completionTime", now)
            for p in pods:  # DeletePodsAndServices before the job is marked finished: every pod
                self.store.delete("Pod", ns, p["metadata"]["name"])
            self.events.event(stored, "Normal", f"{KIND}Failed", failure, CONTROLLER)
            _condition(status, "Failed", "True", f"{KIND}Failed", failure, now)
            self._ttl(job, status, run)
            return self._write(stored, status)
        for rtype in [t for t in REPLICA_TYPES if t in specs]:
            self._reconcile_pods(job, stored, status, every, rtype, now)
        self._update_status(job, stored, status, now)
        self._write(stored, status)

    def _past_backoff(self, specs: dict, pods: list[Obj], limit: int) -> bool:
        """core.PastBackoffLimit: container restarts of running pods of OnFailure / Always / ExitCode replicas."""
        total = 0
        for rtype, rs in specs.items():
            if rs.get("restartPolicy") not in ("OnFailure", "Always", "ExitCode"):
                continue
            for p in pods:
                if p["metadata"]["labels"].get(REPLICA_TYPE) != rtype.lower() or \
                        (p.get("status") or {}).get("phase") != "Running":
                    continue
                st = p.get("status") or {}
                total += sum(int(c.get("restartCount") or 0) for c in (st.get("initContainerStatuses") or [])
                             + (st.get("containerStatuses") or []))
        return total > 0 if limit == 0 else total >= limit

    def _reconcile_pods(self, job: Obj, stored: Obj, status: dict, pods: list[Obj], rtype: str, now: str) -> None:
        """ReconcilePods: one pod per index; a failed pod restarted by deletion or failing the job."""
        rs = job["spec"]["pytorchReplicaSpecs"][rtype]
        ns, name = job["metadata"].get("namespace") or "default", job["metadata"]["name"]
        mine = [p for p in pods if p["metadata"]["labels"].get(REPLICA_TYPE) == rtype.lower()]
        counts = {"active": 0, "succeeded": 0, "failed": 0}  # initializeReplicaStatuses
        replicas = int(rs.get("replicas", 1))
        by_index: dict[int, list[Obj]] = {}
        for p in mine:
            raw = p["metadata"]["labels"].get(REPLICA_INDEX, "")
            if raw.isdigit():
                by_index.setdefault(int(raw), []).append(p)
        for index in sorted(set(range(replicas)) | set(by_index)):
            found = by_index.get(index) or []
            if len(found) > 1:
                continue
            if not found:
                if index < replicas:
                    self.store.create(new_pod(job, rtype, index))
                continue
            pod = found[0]
            deleting = bool(pod["metadata"].get("deletionTimestamp"))
            if index >= replicas and not deleting:
                self.store.delete("Pod", ns, pod["metadata"]["name"])
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Failed" and not deleting:
                code = next((int(((cs.get("state") or {}).get("terminated") or {}).get("exitCode", 0))
                             for cs in (pod.get("status") or {}).get("containerStatuses") or []
                             if cs.get("name") == DEFAULT_CONTAINER and (cs.get("state") or {}).get("terminated")),
                            0xbeef)
                policy = rs.get("restartPolicy")
                if policy in ("OnFailure", "Always") or (policy == "ExitCode" and _retryable(code)):
                    self.store.delete("Pod", ns, pod["metadata"]["name"])
                    msg = f"job {name} is restarting because {rtype} replica(s) failed."
                    self.events.event(stored, "Warning", f"{KIND}Restarting", msg, CONTROLLER)
                    _condition(status, "Restarting", "True", f"{KIND}Restarting", msg, now)
                elif policy == "ExitCode":
                    msg = f'job "{name}" is failing because "{rtype}" replica(s) failed.'
                    self.events.event(stored, "Warning", f"{KIND}Failed", msg, CONTROLLER)
                    _condition(status, "Failed", "True", f"{KIND}Failed", msg, now)
            key = {"Running": "active", "Succeeded": "succeeded", "Failed": "failed"}.get(phase or "")
            if key:
                counts[key] += 1
        sel = ",".join(f"{k}={v}" for k, v in sorted(labels(name, rtype).items()))
        status.setdefault("replicaStatuses", {})[rtype] = {**counts, "selector": sel}

    def _update_status(self, job: Obj, stored: Obj, status: dict, now: str) -> None:
        """PyTorchJobReconciler.UpdateJobStatus."""
        name = job["metadata"]["name"]
        specs = job["spec"]["pytorchReplicaSpecs"]
        run = job["spec"]["runPolicy"]
        if not status.get("startTime"):
            status["startTime"] = now
            if run.get("activeDeadlineSeconds") is not None:
                key = (job["metadata"].get("namespace") or "default", name)
                self._later(key, self.env.now + int(run["activeDeadlineSeconds"]))
        for rtype in [t for t in REPLICA_TYPES if t in specs]:
            st = status["replicaStatuses"][rtype]
            replicas = int(specs[rtype].get("replicas", 1))
            succeeded, running, failed = st["succeeded"], st["active"], st["failed"]
            expected = replicas - succeeded
            if "Master" in specs:
                if rtype == "Master":
                    if running > 0:
                        _condition(status, "Running", "True", f"{KIND}Running", f"{KIND} {name} is running.", now)
                    if expected == 0:
                        msg = f"{KIND} {name} is successfully completed."
                        self.events.event(stored, "Normal", f"{KIND}Succeeded", msg, CONTROLLER)
                        status.setdefault("completionTime", now)
                        _condition(status, "Succeeded", "True", f"{KIND}Succeeded", msg, now)
                        return
            elif rtype == "Worker":
                ns = job["metadata"].get("namespace") or "default"
                if expected == 0 or (job["spec"].get("elasticPolicy") is not None and succeeded > 0):
                    msg = f"{KIND} {ns}/{name} successfully completed."
                    self.events.event(stored, "Normal", f"{KIND}Succeeded", msg, CONTROLLER)
                    status.setdefault("completionTime", now)
                    _condition(status, "Succeeded", "True", f"{KIND}Succeeded", msg, now)
                elif running > 0:
                    _condition(status, "Running", "True", f"{KIND}Running", f"{KIND} {ns}/{name} is running.", now)
            if failed > 0 and replicas > succeeded + running:
                if specs[rtype].get("restartPolicy") != "Never":
                    msg = f"{KIND} {name} is restarting because {failed} {rtype} replica(s) failed."
                    self.events.event(stored, "Warning", f"{KIND}Restarting", msg, CONTROLLER)
                    _condition(status, "Restarting", "True", f"{KIND}Restarting", msg, now)
                else:
                    msg = f"{KIND} {name} is failed because {failed} {rtype} replica(s) failed."
                    self.events.event(stored, "Normal", f"{KIND}Failed", msg, CONTROLLER)
                    status.setdefault("completionTime", now)
                    _condition(status, "Failed", "True", f"{KIND}Failed", msg, now)

    def _clean(self, job: Obj, status: dict, pods: list[Obj], run: dict) -> None:
        """DeletePodsAndServices: a finished job keeps its pods under cleanPodPolicy None, its finished ones under
        Running; a suspended (or failing) one loses them all."""
        finished = _is(status, "Succeeded") or _is(status, "Failed")
        policy = run.get("cleanPodPolicy") or "None"
        if finished and policy == "None":
            return
        for p in pods:
            if finished and policy == "Running" and (p.get("status") or {}).get("phase") not in ("Running",
                                                                                              "Pending"):
                continue
            self.store.delete("Pod", p["metadata"].get("namespace") or "default", p["metadata"]["name"])

    def _ttl(self, job: Obj, status: dict, run: dict) -> None:
        """CleanupJob: ttlSecondsAfterFinished after completionTime the job is deleted (its pods with it)."""
        ttl = run.get("ttlSecondsAfterFinished")
        if ttl is None or not status.get("completionTime"):
            return
        ns, name = job["metadata"].get("namespace") or "default", job["metadata"]["name"]
        due = self.store.seconds(status["completionTime"]) + int(ttl)
        if self.env.now >= due:
            self.store.delete(KIND, ns, name)
        else:
            self._later((ns, name), due)

    def _write(self, stored: Obj, status: dict) -> None:
        if status == (stored.get("status") or {}):
            return
        meta = stored["metadata"]
        cur = self.store.current(KIND, meta.get("namespace") or "default", meta["name"], meta.get("uid"))
        if cur is not None:
            self.store.update({**cur, "status": status})

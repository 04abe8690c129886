"""Kubeflow Trainer v2's TrainJob controller (trainer.kubeflow.org/v1alpha1), as kubeflow/trainer runs it.

Followed (kubeflow/trainer @8c0f5059): pkg/controller/trainjob_controller.go Reconcile (a TrainJob managed by
another controller is skipped; a runtime kind the Trainer does not know fails it "unsupported runtime"; the
runtime's objects applied while it is not finished; the Suspended condition; the status from the runtime's
plugins; activeDeadlineSeconds, counted from creation or from the last resume, fails it DeadlineExceeded and
deletes its JobSet), pkg/runtime/core/(cluster)trainingruntime.go NewObjects, and plugins/jobset/jobset.go Build:
the JobSet is applied when it does not exist and re-applied only while the TrainJob or the JobSet is suspended (so
Kueue's runtime patch reaches the pods on resume), never while both run. What the JobSet becomes is
controllers/trainer_runtime.py's. Upstream also snapshots the runtime into a ConfigMap at first build; the twin
reads the runtime each time (a runtime edited under a running TrainJob is not modelled).
"""

from __future__ import annotations

from kubetwin.controllers import trainer_runtime as R
from kubetwin.k8s.conditions import set_condition
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPONENT = "trainjob-controller"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"  # the CRD's default spec.managedBy
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
# core.errorNotFoundSpecifiedTrainingRuntime / errorNotFoundSpecifiedClusterTrainingRuntime
NOT_FOUND = {"TrainingRuntime": "TrainingRuntime specified in TrainJob is not found",
             "ClusterTrainingRuntime": "not found ClusterTrainingRuntime specified in TrainJob"}
PLURAL = {"TrainingRuntime": "trainingruntimes", "ClusterTrainingRuntime": "clustertrainingruntimes"}


def not_found_message(kind: str, name: str) -> str:
    """The API server's NotFound for the runtime, wrapped as the runtime wraps it."""
    return f'{NOT_FOUND[kind]}: {PLURAL[kind]}.{R.GROUP} "{name}" not found'


class TrainJobController:
    """Reconciles TrainJobs into the JobSets their runtimes describe, and their status from those JobSets."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self._work = WorkQueue(env, self._process)
        self._deadlines: set[tuple[str, str, str]] = set()  # (ns, name, start) whose deadline check is scheduled
        store.watch("TrainJob", self._on_trainjob)
        store.watch("JobSet", self._on_jobset, owner_kind="TrainJob")
        for kind in RUNTIME_KINDS:  # a TrainJob waiting on its runtime is retried when one appears
            store.watch(kind, self._on_runtime)

    def _on_trainjob(self, etype: str, tj: Obj, old: Obj | None) -> None:
        if etype != "DELETED":
            self._work.add((tj["metadata"].get("namespace") or "default", tj["metadata"]["name"]))

    def _on_jobset(self, etype: str, js: Obj, old: Obj | None) -> None:
        for ref in js["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "TrainJob":
                self._work.add((js["metadata"].get("namespace") or "default", ref["name"]))

    def _on_runtime(self, etype: str, rt: Obj, old: Obj | None) -> None:
        if etype != "ADDED":
            return
        for tj in self.store.list("TrainJob"):
            kind, ns, name = R.runtime_key(tj)
            if kind == rt["kind"] and name == rt["metadata"]["name"] and ns == (rt["metadata"].get("namespace")
                                                                                or ""):
                self._work.add((tj["metadata"].get("namespace") or "default", tj["metadata"]["name"]))

    def _process(self, key: tuple[str, str]) -> None:
        tj = self.store.get("TrainJob", *key)
        if tj is not None:
            self.reconcile(tj)

    def reconcile(self, tj: Obj) -> None:
        spec = tj.get("spec") or {}
        if (spec.get("managedBy") or MANAGED_BY) != MANAGED_BY:
            return  # IsManagedByExternalController: MultiKueue's copy on the manager cluster
        ns, name = tj["metadata"].get("namespace") or "default", tj["metadata"]["name"]
        now = self.store.timestamp(self.env.now)
        conds = list((tj.get("status") or {}).get("conditions") or [])
        kind, rns, rname = R.runtime_key(tj)
        jobset = self.store.get("JobSet", ns, name)
        if kind not in RUNTIME_KINDS or ((spec.get("runtimeRef") or {}).get("apiGroup") or R.GROUP) != R.GROUP:
            group = (spec.get("runtimeRef") or {}).get("apiGroup") or R.GROUP
            msg = f"unsupported runtime: {kind}.{group}"
            conds, _ = set_condition(conds, {"type": "Failed", "status": "True", "reason":
                                             "TrainingRuntimeNotSupported", "message": msg,
                                             "lastTransitionTime": now})
        elif not R.finished(tj):
            runtime = self.store.get(kind, rns, rname)
            if runtime is None:
                msg = not_found_message(kind, rname)
                self.events.event(tj, "Warning", "TrainJobResourcesCreationFailed",
                                  f"TrainJob resources reconciliation failed: {msg}", COMPONENT)
            else:
                jobset = self._apply(tj, runtime, jobset)
        status = R.trainjob_status({**tj, "status": {**(tj.get("status") or {}), "conditions": conds}},
                                   jobset, now)
        if self._deadline(tj, status, now):
            status["conditions"], _ = set_condition(status.get("conditions"), {
                "type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                "message": "TrainJob exceeded its active deadline", "lastTransitionTime": now})
            if jobset is not None:
                self.store.delete("JobSet", ns, name)
        if status != (tj.get("status") or {}):
            cur = self.store.current("TrainJob", ns, name, tj["metadata"].get("uid"))
            if cur is not None:
                self.store.update({**cur, "status": status})

    def _apply(self, tj: Obj, runtime: Obj, existing: Obj | None) -> Obj | None:
        """jobset.go Build: create the JobSet, or re-apply it while either side is suspended."""
        suspended = bool((tj.get("spec") or {}).get("suspend"))
        if existing is not None and not suspended and not (existing.get("spec") or {}).get("suspend"):
            return existing
        built = R.build_jobset(tj, runtime)
        if existing is None:
            return self.store.create(built)
        if bool((existing.get("spec") or {}).get("suspend")) == suspended:
            return existing  # both suspended: nothing the JobSet would do differently yet
        meta = {**existing["metadata"]}
        for key in ("labels", "annotations"):
            if built["metadata"].get(key):
                meta[key] = {**(meta.get(key) or {}), **built["metadata"][key]}
        return self.store.update({**existing, "metadata": meta, "spec": {**existing["spec"], **built["spec"]}})

    def _deadline(self, tj: Obj, status: dict, now: str) -> bool:
        """reconcileDeadline: whether activeDeadlineSeconds has passed since creation (or the last resume); else
        a check scheduled for when it will."""
        spec = tj.get("spec") or {}
        seconds = int(spec.get("activeDeadlineSeconds") or 0)
        if not seconds or spec.get("suspend") or R.finished({"status": status}):
            return False
        start = tj["metadata"].get("creationTimestamp") or now
        for c in status.get("conditions") or []:
            if c.get("type") == "Suspended" and c.get("status") == "False":
                start = c.get("lastTransitionTime") or start
        due = self.store.seconds(start) + seconds
        if self.env.now >= due:
            return True
        key = (tj["metadata"].get("namespace") or "default", tj["metadata"]["name"], start)
        if key not in self._deadlines:
            self._deadlines.add(key)
            self.env.after(due - self.env.now, lambda: self._work.add(key[:2]))
        return False

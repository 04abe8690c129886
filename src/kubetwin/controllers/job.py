"""Job controller: parallelism, completions, backoffLimit, suspend (batch/v1 semantics)."""

from __future__ import annotations

from kubetwin.controllers.common import NameGenerator, controller_of, pod_from_template
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store


class JobController:
    def __init__(self, store: Store, env: Environment, events: EventRecorder, names: NameGenerator) -> None:
        self.store, self.env, self.events, self.names = store, env, events, names
        self._dirty: set[tuple[str, str]] = set()
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
        if not self._dirty:
            self.env.after(0, self._sync_all)
        self._dirty.add((ns, name))

    def _sync_all(self) -> None:
        dirty, self._dirty = sorted(self._dirty), set()
        for ns, name in dirty:
            job = self.store.get("Job", ns, name)
            if job is not None:
                self.sync(job)

    def sync(self, job: Obj) -> None:
        spec, meta = job["spec"], job["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        status = dict(job.get("status") or {})
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in status.get("conditions", [])):
            return
        pods = self.store.owned("Pod", ns, "Job", name)
        active = [p for p in pods if p["status"].get("phase") in ("Pending", "Running")]
        succeeded = sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
        failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
        completions = spec.get("completions", 1 if spec.get("parallelism") is None else None)
        parallelism = spec.get("parallelism", 1)
        backoff_limit = spec.get("backoffLimit", 6)
        now = self.store.timestamp(self.env.now)
        new = {**status, "succeeded": succeeded, "failed": failed}
        conds = list(status.get("conditions") or [])
        if failed > backoff_limit:
            for p in active:
                self.store.delete("Pod", ns, p["metadata"]["name"])
            conds.append({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                          "message": "Job has reached the specified backoff limit", "lastTransitionTime": now})
            self.events.event(job, "Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit",
                              "job-controller")
            self._write(job, {**new, "active": 0, "conditions": conds})
            return
        done = succeeded >= completions if completions is not None else (succeeded > 0 and not active)
        if done:
            conds += [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                       "message": "Reached expected number of succeeded pods", "lastTransitionTime": now},
                      {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                       "message": "Reached expected number of succeeded pods", "lastTransitionTime": now}]
            self.events.event(job, "Normal", "Completed", "Job completed", "job-controller")
            self._write(job, {**new, "active": 0, "completionTime": now, "conditions": conds})
            return
        if spec.get("suspend"):
            for p in active:
                self.store.delete("Pod", ns, p["metadata"]["name"])
            if not any(c["type"] == "Suspended" for c in conds):
                conds.append({"type": "Suspended", "status": "True", "reason": "JobSuspended",
                              "message": "Job suspended", "lastTransitionTime": now})
                self.events.event(job, "Normal", "Suspended", "Job suspended", "job-controller")
            self._write(job, {**new, "active": 0, "conditions": conds})
            return
        conds = [c for c in conds if c["type"] != "Suspended"]
        want = parallelism if completions is None else min(parallelism, completions - succeeded)
        for _ in range(max(0, want - len(active))):
            pod_name = self.names.generate(self.store, "Pod", ns, name)
            pod = pod_from_template(spec["template"], pod_name, ns, job, {
                "batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": name,
                "controller-uid": meta["uid"], "job-name": name})
            self.store.create(pod)
            self.events.event(job, "Normal", "SuccessfulCreate", f"Created pod: {pod_name}", "job-controller")
            active.append(pod)
        new.setdefault("startTime", now)
        self._write(job, {**new, "active": len(active), "conditions": conds})

    def _write(self, job: Obj, status: dict) -> None:
        if status != job.get("status"):
            self.store.update({**job, "status": status})

"""The TTL-after-finished controller (kubernetes/kubernetes pkg/controller/ttlafterfinished): a finished Job
(Complete or Failed) with `spec.ttlSecondsAfterFinished` is deleted that long after it finished, with
propagationPolicy Foreground, so its pods go first and then the Job; `get jobs --at` after that shows it gone.
The delete goes through the controller's own client (``ttl-after-finished-controller``, kube-controller-manager's
20 qps / 30 burst by default); the pods' deletes are the garbage collector's, not paced here."""

from __future__ import annotations

from kubetwin.api import twin
from kubetwin.k8s.conditions import find_condition
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store


class TTLAfterFinishedController:
    """Watches Jobs; schedules each finished Job's deletion at its finish time + TTL (processJob/timeLeft)."""

    def __init__(self, store: Store, env: Environment, client: ApiClient | None = None) -> None:
        self.store, self.env = store, env
        self.client = client if client is not None else ApiClient(
            "ttl-after-finished-controller", twin.CONTROLLER_MANAGER_QPS, twin.CONTROLLER_MANAGER_BURST)
        self._scheduled: set[str] = set()  # uids whose deletion is queued
        store.watch("Job", self._on_job)

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        uid = job["metadata"].get("uid", "")
        if etype == "DELETED" or ttl is None or uid in self._scheduled:
            return
        finished = _finish_time(job)
        if finished is None:
            return
        self._scheduled.add(uid)
        at = self.store.seconds(finished) + float(ttl)  # jobFinishTime + TTL (timeLeft)
        ns, name = job["metadata"].get("namespace") or "default", job["metadata"]["name"]
        self.env.after(max(0.0, at - self.env.now), lambda: self._expire(ns, name, uid))

    def _expire(self, ns: str, name: str, uid: str) -> None:
        """processJob: the Job still exists with the same uid -> foreground deletion (its pods, then itself)."""
        self._scheduled.discard(uid)
        if self.store.current("Job", ns, name, uid) is None:
            return
        self.client.send(self.env, "jobs", "delete", lambda: self._delete(ns, name, uid))

    def _delete(self, ns: str, name: str, uid: str) -> None:
        if self.store.current("Job", ns, name, uid) is None:
            return
        for pod in self.store.owned("Pod", ns, "Job", name):
            self.store.delete("Pod", ns, pod["metadata"]["name"])
        self.store.delete("Job", ns, name)


def _finish_time(job: Obj) -> str | None:
    """jobFinishTime: the lastTransitionTime of the Job's Complete or Failed condition that is True."""
    for ctype in ("Complete", "Failed"):
        cond = find_condition((job.get("status") or {}).get("conditions"), ctype)
        if cond is not None and cond.get("status") == "True" and cond.get("lastTransitionTime"):
            return str(cond["lastTransitionTime"])
    return None

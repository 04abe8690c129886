"""Helpers shared by kube-controller-manager's workload controllers (pkg/controller/controller_utils.go): pods from a
template, the order surplus pods are deleted in, writes paced per work-queue key. Owner references, the work queue
and generateName are Kubernetes' shared rules in kubetwin.k8s."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from kubetwin.k8s.conditions import conditions_of, find_condition
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj


def pod_from_template(template: dict, name: str, ns: str, owner: Obj, extra_labels: dict) -> Obj:
    meta = template.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {**(meta.get("labels") or {}), **extra_labels},
                         "annotations": dict(meta.get("annotations") or {}), "ownerReferences": [owner_ref(owner)]},
            "spec": dict(template.get("spec") or {}), "status": {"phase": "Pending"}}


class KeyedWrites:
    """A controller's writes through its API client (sim/apiclient.py), per work-queue key. A write whose token is
    there is made at once; one that waits is made when it is due, and the key's sync counts as running until its
    last write is through: client-go's workqueue never hands a key that is being processed to a second worker, and
    a sync returns only once its requests have (a key added meanwhile is synced again after, as a dirty key is).
    A run whose client never runs out of tokens is unchanged by it."""

    def __init__(self, env: Environment, client: ApiClient, requeue: Callable[[Hashable], None]) -> None:
        self.env, self.client, self.requeue = env, client, requeue
        self._pending: dict[Hashable, int] = {}  # key -> writes of its sync not yet made
        self._again: set = set()  # keys added while their sync's writes were in flight

    def send(self, key: Hashable, resource: str, verb: str, do: Callable[[], object]) -> None:
        """One request of the sync of ``key``: ``do`` now, or when the client's token is due."""
        asked = self.env.now

        def landed() -> None:
            do()
            if self.env.now > asked:
                self._landed(key)

        if self.client.send(self.env, resource, verb, landed) > asked:
            self._pending[key] = self._pending.get(key, 0) + 1

    def busy(self, key: Hashable) -> bool:
        """True while the key's last sync has writes in flight (it is synced again once they are through)."""
        if key in self._pending:
            self._again.add(key)
            return True
        return False

    def _landed(self, key: Hashable) -> None:
        left = self._pending[key] - 1
        if left:
            self._pending[key] = left
            return
        del self._pending[key]
        if key in self._again:
            self._again.discard(key)
            self.requeue(key)


def ready_since(pod: Obj) -> str | None:
    """When the pod's Ready condition turned True, None while it is not Ready."""
    ready = find_condition(conditions_of(pod), "Ready")
    return (ready.get("lastTransitionTime") or "") if ready is not None and ready.get("status") == "True" else None


def active_pods_rank(pod: Obj) -> tuple:
    """The order a ReplicaSet or a Job deletes surplus active pods, as kube-controller-manager's ActivePods sorts them
    (pkg/controller/controller_utils.go): unscheduled first, then Pending before Running, not Ready before Ready,
    ready for less time before longer, more restarts before fewer, newer before older."""
    phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(pod["status"].get("phase", ""), 0)
    since = ready_since(pod)
    restarts = sum(cs.get("restartCount", 0) for cs in pod["status"].get("containerStatuses") or [])
    return (bool(pod["spec"].get("nodeName")), phase, since is not None, _desc(since or ""), -restarts,
            _desc(pod["metadata"].get("creationTimestamp") or ""))


def _desc(stamp: str) -> tuple[int, ...]:
    """A key that sorts RFC 3339 timestamps newest first."""
    return tuple(-ord(ch) for ch in stamp)

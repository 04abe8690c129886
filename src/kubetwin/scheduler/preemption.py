"""DefaultPreemption (PostFilter): evict the fewest, least important pods from the best candidate node.

As pkg/scheduler/framework/plugins/defaultpreemption: only nodes that failed with a resolvable status
(Unschedulable, not UnschedulableAndUnresolvable) and carry lower-priority pods are candidates; on each,
all lower-priority pods are removed, then reprieved most important first while the preemptor still fits
(selectVictimsOnNode); the node whose victims have the lowest highest priority, then the lowest sum, then
the fewest wins (pickOneNodeForPreemption, simplified to those three criteria).

The fit checks run with the pods nominated to the node at equal or higher priority counted as if they ran there
(framework.RunFilterPluginsWithNominatedPods / addGENominatedPods), and a node where the preemptor would fit
without evicting anyone is no candidate (DryRunPreemption: "expected at least one victim pod on node"): the pod
only waits for room that a more important nominated pod already holds.
Source: kubernetes pkg/scheduler/framework/preemption/preemption.go, plugins/defaultpreemption.
"""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.api.podresources import pod_requests
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.sim.apiclient import ApiClient
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store


def pod_key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata']['name']}"


def priority_of(pod: Obj) -> int:
    return int(pod["spec"].get("priority") or 0)


Nominated = dict[str, dict[str, tuple[int, dict[str, int], Obj]]]  # node -> pod key -> (priority, requests, pod)


def victims_on_node(pi: P.PodInfo, ni: NodeInfo, requests: Callable[[Obj], dict[str, int]],
                    nominated: Nominated | None = None, profile: P.Profile = P.DEFAULT,
                    required: list[Obj] | None = None) -> list[Obj] | None:
    """selectVictimsOnNode: None when even evicting every lower-priority pod would not make room, or when no
    eviction is needed at all (no victims: not a candidate). `required`: lower-priority pods a plugin's Filter
    needs gone from this node (the ReadWriteOncePod holder): never reprieved."""
    must = {pod_key(p) for p in required or ()}
    lower = [p for p in ni.pods.values() if priority_of(p) < pi.priority]
    if not lower:
        return None
    trial = NodeInfo(ni.name, ni.node, ni.allocatable, dict(ni.requested), dict(ni.nonzero_requested),
                     dict(ni.pods))
    me = pod_key(pi.pod)
    for key, (prio, req, pod) in sorted(((nominated or {}).get(ni.name) or {}).items()):
        if key != me and prio >= pi.priority and key not in ni.pods:  # addGENominatedPods
            trial.add_pod(pod, req)
    for p in lower:
        trial.remove_pod(p, requests(p))
    if profile.filter_all(pi, trial) != P.SUCCESS:
        return None
    victims = []
    for p in sorted(lower, key=lambda p: -priority_of(p)):  # reprieve the most important first
        if pod_key(p) in must:
            victims.append(p)
            continue
        req = requests(p)
        trial.add_pod(p, req)
        if profile.filter_all(pi, trial) != P.SUCCESS:
            trial.remove_pod(p, req)
            victims.append(p)
    return victims or None


class DefaultPreemption:
    def __init__(self, store: Store, events: EventRecorder, requests: dict[str, dict[str, int]],
                 nominated: Nominated | None = None, profile: P.Profile = P.DEFAULT,
                 client: ApiClient | None = None) -> None:
        self.store, self.events, self._requests, self.profile = store, events, requests, profile
        # the scheduler's client: its victims' DisruptionTarget patches and deletes go through it (None: at once)
        self.client = client
        self._nominated = nominated if nominated is not None else {}  # the scheduler's nominations, shared

    def _req(self, pod: Obj) -> dict[str, int]:
        return self._requests.get(pod_key(pod)) or pod_requests(pod)

    def post_filter(self, pod: Obj, pi: P.PodInfo, candidates: list[NodeInfo], unresolvable: int,
                    n: int, considered: list[tuple[str, list[str] | None]] | None = None,
                    required: dict[str, list[Obj]] | None = None) -> tuple[str, str | None]:
        """Returns (the "preemption: ..." part of the message, the nominated node or None). `considered`, when
        given (tracing), receives each candidate node with its victims' keys (None: no eviction makes room).
        `required`: per node, the pods a plugin needs evicted there (CycleState.victims)."""
        if pod["spec"].get("preemptionPolicy") == "Never":
            return "preemption: not eligible due to preemptionPolicy=Never.", None
        found = []
        for ni in candidates:
            victims = victims_on_node(pi, ni, self._req, self._nominated, self.profile,
                                      (required or {}).get(ni.name))
            if considered is not None:
                considered.append((ni.name, None if victims is None else [pod_key(v) for v in victims]))
            if victims is not None:
                found.append((ni.name, victims))
        if not found:
            parts = {}
            if n - unresolvable:
                parts["No preemption victims found for incoming pod"] = n - unresolvable
            if unresolvable:
                parts["Preemption is not helpful for scheduling"] = unresolvable
            hist = ", ".join(sorted(f"{v} {k}" for k, v in parts.items()))
            return f"preemption: 0/{n} nodes are available: {hist}.", None

        def rank(c: tuple[str, list[Obj]]) -> tuple:
            prios = [priority_of(v) for v in c[1]]
            return (max(prios), sum(prios), len(prios))

        node, victims = min(found, key=rank)
        for v in victims:
            self.events.event(v, "Normal", "Preempted", f"Preempted by pod {pod['metadata'].get('uid')} on node "
                              f"{node}", "default-scheduler")
            # PrepareCandidate's preemptPod: the DisruptionTarget condition (PatchPodStatus), then the delete; with
            # SchedulerAsyncPreemption (beta, on since 1.33) from a goroutine: the cycle does not wait for them
            self._send(v, "pods/status", "patch", self._disrupt)
            self._send(v, "pods", "delete", self._delete)
        return "", node

    def _send(self, victim: Obj, resource: str, verb: str, do: Callable[[str, str, str | None], None]) -> None:
        ns, name, uid = victim["metadata"].get("namespace") or "", victim["metadata"]["name"], victim[
            "metadata"].get("uid")
        if self.client is None:
            do(ns, name, uid)
        else:
            self.client.send(self.store.env, resource, verb, lambda: do(ns, name, uid))

    def _victim(self, ns: str, name: str, uid: str | None) -> bool:
        return self.store.current("Pod", ns, name, uid) is not None

    def _disrupt(self, ns: str, name: str, uid: str | None) -> None:
        if self._victim(ns, name, uid):
            self.store.patch("Pod", ns, name, lambda p: {**p, "status": {**p.get("status", {}), "conditions": [
                *(p.get("status", {}).get("conditions") or []),
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": "default-scheduler: preempting to accommodate a higher priority pod"}]}})

    def _delete(self, ns: str, name: str, uid: str | None) -> None:
        if self._victim(ns, name, uid):
            self.store.delete("Pod", ns, name)

"""The kubelet's pod admission for resources (pkg/kubelet/lifecycle/predicate.go, v1.34): a pod bound to a node,
by the scheduler or by its own `spec.nodeName`, is admitted only if its requests fit the node's allocatable minus
the requests of the pods the kubelet already admitted there (noderesources.Fits, the same arithmetic as the
scheduler's). Otherwise the kubelet rejects it: phase Failed, reason `OutOf<resource>` (the first insufficient
resource, in Fits' order: pods, cpu, memory, ephemeral-storage, then extended resources), message
"Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
(InsufficientResourceError, cpu in millicores), and a Warning event with that reason and the error text.
Extended resources the node does not advertise are left to the device manager, as the kubelet drops them from the
check (removeMissingExtendedResources)."""

from __future__ import annotations

from kubetwin.api.podresources import node_allocatable, pod_requests
from kubetwin.api.podspec import TemplateMemo
from kubetwin.store.store import Obj

ORDER = ("cpu", "memory", "ephemeral-storage")


class NodeAdmission:
    """What each node's kubelet has admitted (requests by pod uid), and the fit check for the next pod."""

    def __init__(self) -> None:
        self._admitted: dict[str, dict[str, dict[str, int]]] = {}  # node -> pod uid -> requests
        self._used: dict[str, dict[str, int]] = {}  # node -> the admitted pods' requests, summed
        # node -> (its status.allocatable as stored, parsed): a node's status is rewritten far more often than its
        # allocatable changes, and the store's dicts are never changed in place, so the same dict parses the same
        self._alloc: dict[str, tuple[object, dict[str, int]]] = {}
        self._requests = TemplateMemo(pod_requests)  # one per pod template (read-only dicts)
        self._checks: dict[int, tuple[dict[str, int], tuple[str, ...]]] = {}  # id(requests) -> Fits' order

    def release(self, node: str | None, uid: str) -> None:
        """The pod finished or went away: its requests no longer count."""
        pods = self._admitted.get(node or "")
        req = pods.pop(uid, None) if pods is not None else None
        if req:
            used = self._used[node or ""]
            for k, v in req.items():
                used[k] -= v

    def admit(self, pod: Obj, node: Obj) -> tuple[str, str] | None:
        """Admit the pod (recording its requests) or return (reason, error text) of the first resource short."""
        name, uid = node["metadata"]["name"], pod["metadata"]["uid"]
        pods = self._admitted.setdefault(name, {})
        used = self._used.setdefault(name, {})
        raw = node.get("status", {}).get("allocatable")
        cached = self._alloc.get(name)
        if cached is None or cached[0] is not raw:  # parsed once per allocatable, not per pod
            cached = self._alloc[name] = (raw, node_allocatable(node))
        alloc = cached[1]
        want = self._requests(pod)
        if len(pods) + 1 > alloc.get("pods", 0) and "pods" in alloc:
            return "OutOfpods", _error("pods", 1, len(pods), alloc["pods"])
        for res in self._order(want):
            if used.get(res, 0) + want[res] > alloc.get(res, 0) and (res in ORDER or res in alloc):
                return f"OutOf{res}", _error(res, want[res], used.get(res, 0), alloc.get(res, 0))
        pods[uid] = want
        for k, v in want.items():
            used[k] = used.get(k, 0) + v
        return None

    def _order(self, want: dict[str, int]) -> tuple[str, ...]:
        """The requested resources in Fits' order (cpu, memory, ephemeral-storage, then extended ones sorted),
        once per pod template; an extended resource the node does not advertise is skipped by the caller."""
        seen = self._checks.get(id(want))
        if seen is not None and seen[0] is want:
            return seen[1]
        order = (*(r for r in ORDER if want.get(r)), *sorted(k for k in want if k not in ORDER and want[k]))
        if len(self._checks) >= 1024:
            self._checks.clear()
        self._checks[id(want)] = (want, order)
        return order


def _error(res: str, requested: int, used: int, capacity: int) -> str:
    return f"Node didn't have enough resource: {res}, requested: {requested}, used: {used}, capacity: {capacity}"

"""The scheduler's cache of nodes and what the pods bound to them request."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetwin.api.podresources import resource_value
from kubetwin.api.podspec import SameInputs
from kubetwin.store.store import Obj

# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest: what scoring assumes for a pod requesting nothing
# (k8s.io/kubernetes pkg/scheduler/util/pod_resources.go).
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024


def _parse_allocatable(raw: dict | None) -> dict[str, int]:
    return {k: resource_value(k, v) for k, v in (raw or {}).items()}


# status.allocatable parsed once per stored dict: a node's status is rewritten far more often than its allocatable,
# and a pool's nodes share one (10k-pod benchmark: 12,500 parses of 2,502 dicts). The parsed dict is shared, so no
# NodeInfo changes its allocatable in place (they replace it).
_allocatable = SameInputs(_parse_allocatable, limit=8192)


@dataclass
class NodeInfo:
    name: str
    node: Obj
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    nonzero_requested: dict[str, int] = field(default_factory=lambda: {"cpu": 0, "memory": 0})
    pods: dict[str, Obj] = field(default_factory=dict)  # "ns/name" -> pod

    @classmethod
    def from_node(cls, node: Obj) -> NodeInfo:
        return cls(node["metadata"]["name"], node, _allocatable(node.get("status", {}).get("allocatable")))

    def add_pod(self, pod: Obj, req: dict[str, int]) -> None:
        key = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        if key in self.pods:
            return
        self.pods[key] = pod
        for k, v in req.items():
            self.requested[k] = self.requested.get(k, 0) + v
        self.requested["pods"] = self.requested.get("pods", 0) + 1
        self.nonzero_requested["cpu"] += req.get("cpu") or DEFAULT_MILLI_CPU
        self.nonzero_requested["memory"] += req.get("memory") or DEFAULT_MEMORY

    def remove_pod(self, pod: Obj, req: dict[str, int]) -> None:
        key = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        if self.pods.pop(key, None) is None:
            return
        for k, v in req.items():
            self.requested[k] = self.requested.get(k, 0) - v
        self.requested["pods"] = self.requested.get("pods", 0) - 1
        self.nonzero_requested["cpu"] -= req.get("cpu") or DEFAULT_MILLI_CPU
        self.nonzero_requested["memory"] -= req.get("memory") or DEFAULT_MEMORY

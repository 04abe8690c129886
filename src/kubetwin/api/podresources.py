"""A pod's effective resource requests and limits: the one implementation every controller uses.

Ported from k8s.io/component-helpers resource/helpers.go (PodRequests, PodLimits, AggregateContainerRequests,
AggregateContainerLimits), which kube-scheduler, the kubelet, Kueue (pkg/resources) and `kubectl describe node`
all call:
https://github.com/kubernetes/kubernetes/blob/v1.34.0/staging/src/k8s.io/component-helpers/resource/helpers.go

- Regular containers add up.
- A restartable init container (a sidecar, `restartPolicy: Always`) keeps running beside the containers, so it
  adds to their sum; and it runs beside every init container started after it.
- A regular init container runs alone (with the sidecars started before it): the pod needs at least the largest
  of those, so the result is the per-resource max of the two.
- Pod-level resources (`spec.resources`, PodLevelResources: beta and on by default in 1.34) replace the
  aggregate for the resources they name that are supported at pod level (cpu, memory: IsSupportedPodLevelResource).
- Pod overhead (RuntimeClass) is added to requests, and to limits only for resources that have a limit.

Requests missing from a container default to its limits (the API server's defaulting, pkg/apis/core/v1/defaults.go
SetDefaults_Pod: "set requests to limits if requests are not specified, but limits are").
Quantities are integers: milli-units for cpu, whole units (rounded up) for everything else, as the scheduler's
framework.Resource and Kueue's int64 amounts hold them.
"""

from __future__ import annotations

from typing import Any

from kubetwin.api.defaults import requests_with_limits
from kubetwin.api.podspec import SameInputs
from kubetwin.k8s.units import to_int, to_milli

Obj = dict[str, Any]


def resource_value(name: str, value: object) -> int:
    """A quantity as an integer: milli-cpu for cpu, whole units (rounded up) otherwise."""
    return to_milli(value) if name == "cpu" else to_int(value)


def node_allocatable(node: Obj) -> dict[str, int]:
    """A node's status.allocatable as integers: the scheduler's NodeInfo and the kubelet's admission (which upstream
    reuses the scheduler framework's NodeInfo, pkg/kubelet/lifecycle/predicate.go) read it the same way. Shared:
    callers replace it, never change it in place."""
    return _allocatable(node.get("status", {}).get("allocatable"))


def _values(rl: dict | None) -> dict[str, int]:
    return {k: resource_value(k, v) for k, v in (rl or {}).items()}


# status.allocatable parsed once per stored dict: a node's status is rewritten far more often than its allocatable,
# and a pool's nodes share one (10k-pod benchmark: 12,500 parses of 2,502 dicts).
_allocatable = SameInputs(_values, limit=8192)


def container_requests(c: Obj) -> dict[str, int]:
    """A container's requests with SetDefaults_Pod's rule (api.defaults.requests_with_limits): a stored Pod
    already carries them, a manifest's pod or a template (which the API server never defaults this way; Kueue
    and the scheduler's callers do the same for templates) gets them here."""
    return _values(requests_with_limits(c.get("resources") or {}))


def container_limits(c: Obj) -> dict[str, int]:
    """A container's limits as integers (what its devices give it: the device plugins allocate by limits)."""
    return _values((c.get("resources") or {}).get("limits"))


POD_LEVEL_RESOURCES = ("cpu", "memory")  # resourcehelper's supportedPodLevelResources


def _pod_level(spec: Obj, section: str) -> dict[str, int]:
    """spec.resources' requests (defaulted from its limits, as for containers) or limits, supported ones only."""
    res = spec.get("resources") or {}
    values = dict(res.get("limits") or {})
    if section == "requests":
        values.update(res.get("requests") or {})
    return {k: resource_value(k, v) for k, v in values.items() if k in POD_LEVEL_RESOURCES}


def _add(total: dict[str, int], extra: dict[str, int]) -> None:
    for k, v in extra.items():
        total[k] = total.get(k, 0) + v


def _aggregate(spec: Obj, per_container: Any) -> dict[str, int]:
    """AggregateContainerRequests / AggregateContainerLimits over one per-container reader."""
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        _add(total, per_container(c))
    sidecars: dict[str, int] = {}  # restartable init containers started so far
    init_max: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        own = per_container(c)
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            need = sidecars
        else:
            need = dict(own)
            _add(need, sidecars)
        for k, v in need.items():
            init_max[k] = max(init_max.get(k, 0), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    return total


def requests_key(spec: Obj) -> list:
    """What PodRequests/PodLimits read from a pod spec, for cache keys: containers' resources, init containers'
    resources (with restartPolicy where set: a sidecar counts differently), overhead and pod-level resources
    (only when set, so the keys of pods without them stay as they were)."""
    key = [[c.get("resources") for c in spec.get("containers") or []],
           [(c.get("resources"), c["restartPolicy"]) if c.get("restartPolicy") else c.get("resources")
            for c in spec.get("initContainers") or []], spec.get("overhead")]
    if spec.get("resources"):
        key.append(spec["resources"])
    return key


def pod_requests(pod: Obj) -> dict[str, int]:
    """component-helpers PodRequests: the pod's effective requests (sidecars, init containers, overhead)."""
    spec = pod["spec"]
    total = _aggregate(spec, container_requests)
    if spec.get("resources"):
        total.update(_pod_level(spec, "requests"))
    _add(total, _values(spec.get("overhead")))
    return dict(sorted(total.items()))


def pod_limits(pod: Obj) -> dict[str, int]:
    """component-helpers PodLimits: overhead is added only to resources that already have a limit."""
    spec = pod["spec"]
    total = _aggregate(spec, container_limits)
    if spec.get("resources"):
        total.update(_pod_level(spec, "limits"))
    for k, v in _values(spec.get("overhead")).items():
        if k in total:
            total[k] += v
    return dict(sorted(total.items()))

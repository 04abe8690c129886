"""The pod conditions a kubelet writes, one rule for every place the twin's kubelet changes a pod's status.

Ported from kubernetes v1.34 pkg/kubelet/status/generate.go (GeneratePodReadyToStartContainersCondition,
GeneratePodInitializedCondition, GeneratePodReadyCondition, GenerateContainersReadyCondition and the terminal-phase
variants), pkg/kubelet/kubelet_pods.go generateAPIPodStatus (the order: PodReadyToStartContainers, Initialized,
Ready, ContainersReady, PodScheduled) and pkg/kubelet/status/status_manager.go (mergePodStatus keeps the conditions
the kubelet does not own first, in their order; updateLastTransitionTime keeps a condition's time while its status
stays the same; DisruptionTarget, "shared by kubelet", is replaced where it stands or appended).
https://github.com/kubernetes/kubernetes/blob/v1.34.0/pkg/kubelet/status/generate.go

Not modelled: readiness gates (the twin runs no controller that would set their conditions, so a gated pod is
Ready when its containers are) and init containers that are still running (the twin starts containers at once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubetwin.k8s.conditions import Condition, replace_or_append_condition
from kubetwin.store.store import Obj

# kubetypes.PodConditionsByKubelet, in generateAPIPodStatus's order
KUBELET_OWNED = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
TERMINAL = ("Succeeded", "Failed")


def _containers_ready(pod: Obj, statuses: Sequence[dict] | None, phase: str) -> Condition:
    """GenerateContainersReadyCondition: every container (and sidecar) known and ready."""
    if statuses is None:
        return {"type": "ContainersReady", "status": "False", "reason": "UnknownContainerStatuses"}
    if phase == "Failed":
        return {"type": "ContainersReady", "status": "False", "reason": "PodFailed"}
    by_name = {cs.get("name"): cs for cs in statuses}
    spec = pod.get("spec") or {}
    init = spec.get("initContainers")
    names = [c["name"] for c in init if c.get("restartPolicy") == "Always"] if init else []
    names += [c["name"] for c in spec.get("containers") or []]
    unknown: list[str] = []
    unready: list[str] = []
    for n in names:  # one pass over the containers (a pod's status is synced at every start and finish)
        cs = by_name.get(n)
        if cs is None:
            unknown.append(n)
        elif not cs.get("ready"):
            unready.append(n)
    if phase == "Succeeded" and not unknown:
        return {"type": "ContainersReady", "status": "False", "reason": "PodCompleted"}
    if not unknown and not unready:
        return {"type": "ContainersReady", "status": "True"}
    # Go's %s of a []string: "[a b]"
    messages = [f"containers with {what} status: [{' '.join(ns)}]"
                for what, ns in (("unknown", unknown), ("unready", unready)) if ns]
    return {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
            "message": ", ".join(messages)}


def _generate(pod: Obj, status: dict) -> list[Condition]:
    """The kubelet's own conditions for `status`, without lastTransitionTime (fresh dicts: kubelet_conditions
    sets it on them)."""
    phase = status.get("phase") or "Pending"
    containers = _containers_ready(pod, status.get("containerStatuses"), phase)
    ready = {**containers, "type": "Ready"}  # Ready follows ContainersReady (readiness gates not modelled)
    initialized: Condition = {"type": "Initialized", "status": "True"}
    if phase == "Succeeded":
        initialized["reason"] = "PodCompleted"
    # the sandbox is torn down once every container of a finished pod has exited
    sandbox = {"type": "PodReadyToStartContainers", "status": "False" if phase in TERMINAL else "True"}
    return [sandbox, initialized, ready, containers, {"type": "PodScheduled", "status": "True"}]


def _stamp(new: Condition, old: Mapping[str, Condition], now: str) -> Condition:
    """updateLastTransitionTime, set on `new` (a dict of the caller's own, not yet stored): the old time while the
    status is unchanged, else now. `old` maps each type to its first condition (FindStatusCondition's match), built
    once per sync rather than searched per condition."""
    prev = old.get(new["type"])
    kept = prev.get("lastTransitionTime") if prev is not None and prev.get("status") == new["status"] else None
    new["lastTransitionTime"] = kept or now
    return new


def kubelet_conditions(pod: Obj, status: dict, now: str, shared: Sequence[Condition] = ()) -> list[Condition]:
    """status.conditions after the kubelet syncs `pod` to `status` (its new phase and containerStatuses) at `now`.

    The conditions the kubelet does not own stay first, in their order; `shared` are conditions the kubelet sets
    besides its own (DisruptionTarget on a node shutdown), replaced where they stand or appended.
    """
    old = (pod.get("status") or {}).get("conditions") or []
    by_type: dict[Any, Condition] = {}
    out = []
    for c in old:  # one pass: the first condition of each type, and those the kubelet does not own
        ctype = c.get("type")
        if ctype not in by_type:
            by_type[ctype] = c
        if ctype not in KUBELET_OWNED:
            out.append(c)
    out += [_stamp(c, by_type, now) for c in _generate(pod, status)]  # fresh dicts: stamped as they are
    for c in shared:
        out = replace_or_append_condition(out, _stamp(dict(c), by_type, now))
    return out

"""What the cluster autoscaler's simulations share: the scheduler's node-only filters and NodeResourcesFit run
on real or template nodes (scheduler/plugins.py, the same functions the scheduler's reference path uses), first-fit
placement, and the names CA and GKE use."""

from __future__ import annotations

from kubetwin.api.podresources import pod_requests, requests_key
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.store.store import Obj

SOURCE = "cluster-autoscaler"
CONSUME = ("autoscaling.x-k8s.io/consume-provisioning-request",
           "cluster-autoscaler.kubernetes.io/consume-provisioning-request")  # the second: the older, doc'd name
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
QUEUED_LABEL = "cloud.google.com/gke-queued"  # GKE: queued-provisioning (DWS) pools are scaled by ProvReqs only
PRIORITY_CM = ("kube-system", "cluster-autoscaler-priority-expander")
MAX_NODE_GROUP_SIZE = "max node group size reached"
IN_BACKOFF = "in backoff after failed scale-up"
STATIC = (P.node_unschedulable, P.taint_toleration, P.node_affinity)


def pod_key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def pod_info(pod: Obj) -> P.PodInfo:
    spec = pod["spec"]
    aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    return P.PodInfo(pod, pod_requests(pod), spec.get("tolerations") or [], spec.get("nodeSelector") or {},
                     req.get("nodeSelectorTerms") if req else None, [], 0)


def static_reason(pi: P.PodInfo, ni: NodeInfo) -> str | None:
    """The first node-only filter that rejects the pod on the node, in the scheduler's words."""
    for f in STATIC:
        code, reasons = f(pi, ni)
        if code != P.SUCCESS:
            return reasons[0]
    return None


def place(pi: P.PodInfo, bins: list[NodeInfo]) -> NodeInfo | None:
    """First fit of the pod on the given nodes (filters and resources); the chosen node takes its requests."""
    for ni in bins:
        if static_reason(pi, ni) is None and P.fits_request(pi.requests, ni):
            ni.add_pod(pi.pod, pi.requests)
            return ni
    return None


def consumes(pod: Obj) -> str | None:
    ann = pod["metadata"].get("annotations") or {}
    return next((ann[a] for a in CONSUME if a in ann), None)


def shape_sig(pod: Obj) -> str:
    """What the simulations read from a pod: its resources and its node constraints."""
    spec = pod["spec"]
    return repr((*requests_key(spec), spec.get("tolerations"), spec.get("nodeSelector"), spec.get("affinity")))


def gpus_pending(node: Obj) -> bool:
    """A device-plugin GPU node (gke-accelerator label, not a DRA node) whose driver has not advertised
    nvidia.com/gpu yet: cluster-autoscaler counts it as upcoming, not as an empty node to remove
    (utils/gpu FilterOutNodesWithUnreadyResources)."""
    labels = node["metadata"].get("labels") or {}
    return ("cloud.google.com/gke-accelerator" in labels and not nvidia_dra.uses_dra(labels)
            and "nvidia.com/gpu" not in ((node.get("status") or {}).get("allocatable") or {}))

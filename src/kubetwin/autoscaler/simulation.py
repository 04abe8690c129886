"""What the cluster autoscaler's simulations share: the scheduler's own profile run on real or template nodes,
first-fit placement, and the names CA and GKE use.

cluster-autoscaler builds the scheduler framework from the scheduler's configuration and runs its PreFilter and Filter
plugins on the NodeInfos of its cluster snapshot, template nodes included (simulator/clustersnapshot/predicate
SchedulerPluginRunner.RunFiltersOnNode; simulator/predicatechecker SchedulerBasedPredicateChecker before 1.31). The
twin does the same with the scheduler's registry: every node-only Filter of `plugins.DEFAULT` in its order (a Filter
registered there binds the autoscaler too), then NodeResourcesFit, after VolumeBinding's PreFilter.
"""

from __future__ import annotations

from kubetwin.api.podresources import pod_requests, requests_key
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler import volumebinding as VB
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.scheduler.podshapes import shape_key
from kubetwin.store.store import Obj, Store

SOURCE = "cluster-autoscaler"
CONSUME = ("autoscaling.x-k8s.io/consume-provisioning-request",
           "cluster-autoscaler.kubernetes.io/consume-provisioning-request")  # the second: the older, doc'd name
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
QUEUED_LABEL = "cloud.google.com/gke-queued"  # GKE: queued-provisioning (DWS) pools are scaled by ProvReqs only
PRIORITY_CM = ("kube-system", "cluster-autoscaler-priority-expander")
MAX_NODE_GROUP_SIZE = "max node group size reached"
IN_BACKOFF = "in backoff after failed scale-up"


def pod_key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def pod_info(pod: Obj) -> P.PodInfo:
    spec = pod["spec"]
    aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    return P.PodInfo(pod, pod_requests(pod), spec.get("tolerations") or [], spec.get("nodeSelector") or {},
                     req.get("nodeSelectorTerms") if req else None, [], 0)


def static_reason(pi: P.PodInfo, ni: NodeInfo, profile: P.Profile | None = None) -> str | None:
    """The first node-only Filter of the scheduler's profile that rejects the pod on the node, in its words."""
    hit = (profile or P.DEFAULT).first_rejection(pi, ni)
    return None if hit is None else hit[1]


def pre_filter(store: Store, pod: Obj) -> str | None:
    """The scheduler's PreFilter verdict for the pod on any node, or None: a pod no node can take (a claim missing or
    unbound, VolumeBinding's PreFilter) is not one a new node helps. cluster-autoscaler runs the framework's
    PreFilter before its Filters and reports a failing one as the predicate error for every node group."""
    return VB.prefilter(store, pod) if pod["spec"].get("volumes") else None


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
    """What the simulations read from a pod: its resources, its affinity and the fields the profile's node-only
    plugins read (podshapes.shape_key, the scheduler's own per-shape cache key: a registered Filter reading a pod
    label splits pods by that label here too)."""
    spec = pod["spec"]
    return repr((*requests_key(spec), spec.get("affinity"), shape_key(pod, P.DEFAULT.shape_paths)))


def gpus_pending(node: Obj) -> bool:
    """A device-plugin GPU node (gke-accelerator label, not a DRA node) whose driver has not advertised
    nvidia.com/gpu yet: cluster-autoscaler counts it as upcoming, not as an empty node to remove
    (utils/gpu FilterOutNodesWithUnreadyResources)."""
    labels = node["metadata"].get("labels") or {}
    return ("cloud.google.com/gke-accelerator" in labels and not nvidia_dra.uses_dra(labels)
            and "nvidia.com/gpu" not in ((node.get("status") or {}).get("allocatable") or {}))

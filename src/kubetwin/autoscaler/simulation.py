"""What the cluster autoscaler's simulations share: the scheduler's own profile run on real or template nodes,
first-fit placement, and the names CA and GKE use.

cluster-autoscaler builds the scheduler framework from the scheduler's configuration and runs its PreFilter and Filter
plugins on the NodeInfos of its cluster snapshot, template nodes included (simulator/clustersnapshot/predicate
SchedulerPluginRunner.RunFiltersOnNode; simulator/predicatechecker SchedulerBasedPredicateChecker before 1.31). The
twin does the same with the scheduler's registry: every node-only Filter of `plugins.DEFAULT` in its order (a Filter
registered there binds the autoscaler too), then NodeResourcesFit, after VolumeBinding's PreFilter; and the
scheduler's InterPodAffinity plugin over the simulation's own nodes and pods (`PodAffinity`), so pods placed on a new
template node in the estimate count for the next pod's (anti-)affinity, as in CA's binpacking estimator. Template
nodes are copied with names and hostname labels of their own (CA's NodeInfoSanitizer does the same), so hostname
anti-affinity tells them apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubetwin.api.podresources import pod_requests, requests_key
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.scheduler import interpodaffinity as IPA
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


HOSTNAME = "kubernetes.io/hostname"


def template_copy(tmpl: NodeInfo, suffix: object) -> NodeInfo:
    """A new node of a group's template, empty, with a name and hostname label of its own."""
    name = f"{tmpl.name}-{suffix}"
    meta = tmpl.node["metadata"]
    node = {**tmpl.node, "metadata": {**meta, "name": name, "labels": {**(meta.get("labels") or {}), HOSTNAME: name}}}
    return NodeInfo(name, node, tmpl.allocatable)


def namespace_labels(store: Store) -> Callable[[str], dict]:
    """A namespace's labels, for the namespaceSelector of affinity terms (as the scheduler reads them)."""
    return lambda ns: ((store.get("Namespace", "", ns) or {}).get("metadata") or {}).get("labels") or {}


class PodAffinity:
    """The scheduler's InterPodAffinity plugin over one simulation: the pods of the snapshot's nodes and those the
    simulation places. Nothing is indexed until a pod with terms is seen (the plugin's own lazy cache), so a cluster
    without pod (anti-)affinity pays only the check. `mark`/`revert` undo what one node group's estimate placed
    (CA forks its cluster snapshot per option and reverts it)."""

    def __init__(self, nodes: Iterable[NodeInfo], ns_labels: Callable[[str], dict]) -> None:
        self.nodes: dict[str, NodeInfo] = {ni.name: ni for ni in nodes}
        self.plugin = IPA.InterPodAffinity(self.nodes, ns_labels)
        self._gen = 0
        self._placed: list[str] = []
        first = next((k for ni in self.nodes.values() for k, p in ni.pods.items() if IPA.has_terms(p)), None)
        if first is not None:  # the first pod with terms switches the cache on: every node's pods are indexed
            ni = next(n for n in self.nodes.values() if first in n.pods)
            self.plugin.add(first, ni.pods[first], ni.name)

    def reason(self, pod: Obj, ni: NodeInfo) -> str | None:
        """InterPodAffinity's Filter for the pod on this node, in its words, or None."""
        if not self.plugin.wants(pod):
            return None
        self.nodes.setdefault(ni.name, ni)
        self._gen += 1  # the plugin caches label columns per node generation: each call is a new one-node table
        verdict = self.plugin.filter(pod, [ni], self._gen, 1)
        if verdict is None or verdict.ok[0]:
            return None
        return IPA.ERR_AFFINITY if verdict.affinity[0] else IPA.ERR_ANTI if verdict.anti[0] else IPA.ERR_EXISTING

    def placed(self, pod: Obj, ni: NodeInfo) -> None:
        """The simulation put the pod on the node: later pods see it (as the scheduler's informer would)."""
        self.nodes.setdefault(ni.name, ni)
        if self.plugin.active or IPA.has_terms(pod):
            key = pod_key(pod)
            self.plugin.add(key, pod, ni.name)
            self._placed.append(key)

    def mark(self) -> int:
        return len(self._placed)

    def revert(self, mark: int, nodes: Iterable[str] = ()) -> None:
        """Forget the pods placed since `mark` and the given (template) nodes."""
        for key in self._placed[mark:]:
            self.plugin.remove(key)
        del self._placed[mark:]
        for name in nodes:
            self.nodes.pop(name, None)


def place(pi: P.PodInfo, bins: list[NodeInfo], affinity: PodAffinity | None = None) -> NodeInfo | None:
    """First fit of the pod on the given nodes (the profile's Filters, NodeResourcesFit, InterPodAffinity when the
    simulation has one); the chosen node takes its requests."""
    for ni in bins:
        if static_reason(pi, ni) is None and P.fits_request(pi.requests, ni) and (
                affinity is None or affinity.reason(pi.pod, ni) is None):
            ni.add_pod(pi.pod, pi.requests)
            if affinity is not None:
                affinity.placed(pi.pod, ni)
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

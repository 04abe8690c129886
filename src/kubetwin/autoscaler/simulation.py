"""What the cluster autoscaler's simulations share: the scheduler's own profile run on real or template nodes,
first-fit placement, and the names CA and GKE use.

cluster-autoscaler builds the scheduler framework from the scheduler's configuration and runs its PreFilter and Filter
plugins on the NodeInfos of its cluster snapshot, template nodes included (simulator/clustersnapshot/predicate
SchedulerPluginRunner.RunFiltersOnNode; simulator/predicatechecker SchedulerBasedPredicateChecker before 1.31). The
twin does the same with the scheduler's registry: every node-only Filter of `plugins.DEFAULT` in its order (a Filter
registered there binds the autoscaler too), then NodeResourcesFit, after VolumeBinding's PreFilter; then
InterPodAffinity and DynamicResources over the simulation's own nodes and pods (`Snapshot`), so pods placed on a new
template node in the estimate count for the next pod's (anti-)affinity and devices, as in CA's binpacking estimator.
Template
nodes are copied with names and hostname labels of their own (CA's NodeInfoSanitizer does the same), so hostname
anti-affinity tells them apart.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubetwin.api.podresources import pod_requests, requests_key
from kubetwin.devices.dra import dranet
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.devices.dra.allocator import AllocationError, Allocator, DeviceID, Features, slices_by_node
from kubetwin.devices.dra.claims import claim_name
from kubetwin.k8s.names import GKE_ACCELERATOR, GKE_NODEPOOL, GPU, HOSTNAME, INSTANCE_TYPE
from kubetwin.scheduler import dra as DR
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
    return VB.prefilter(store, pod)[0] if pod["spec"].get("volumes") else None


_UNSET = object()


def template_copy(tmpl: NodeInfo, suffix: object) -> NodeInfo:
    """A new node of a group's template, empty, with a name and hostname label of its own."""
    name = f"{tmpl.name}-{suffix}"
    meta = tmpl.node["metadata"]
    node = {**tmpl.node, "metadata": {**meta, "name": name, "labels": {**(meta.get("labels") or {}), HOSTNAME: name}}}
    return NodeInfo(name, node, tmpl.allocatable)


class Snapshot:
    """The simulation's cluster snapshot, for the framework plugins that read more than the node and the pod:

    - InterPodAffinity: the scheduler's plugin over the snapshot's nodes, the pods bound to them and those the
      simulation places (nothing is indexed until a pod with terms is seen, the plugin's own lazy cache, so a
      cluster without pod (anti-)affinity pays only the check);
    - DynamicResources: the structured allocator (devices/dra/allocator.py, as the scheduler's plugin runs it) on
      each node's ResourceSlices, less the devices claims hold in the cluster and those the simulation gave earlier
      pods. A template node, or a node whose driver has not published yet, gets the slices the NVIDIA DRA driver
      will publish for it (CA simulates template ResourceSlices, and counts nodes with unready DRA resources as
      upcoming: processors/customresources). Twin simplification: shared counters of partitionable devices already
      consumed in the cluster are not subtracted, and a pod whose claim is allocated stays on that allocation's
      nodes (CA re-allocates it when it simulates a drain).

    `mark`/`revert` undo what one node group's estimate placed (CA forks its cluster snapshot per option)."""

    def __init__(self, nodes: Iterable[NodeInfo], store: Store, features: Features = Features()) -> None:
        self.store, self.features = store, features
        self.profile = P.DEFAULT  # as registered now: a simulation runs with one profile
        self._static: dict[tuple[str, str], object] = {}  # (node, pod shape) -> static_reason
        self.nodes: dict[str, NodeInfo] = {ni.name: ni for ni in nodes}
        self.affinity = IPA.InterPodAffinity(self.nodes, IPA.namespace_labels(store))
        self._gen = 0
        self._placed: list[tuple[str, str]] = []  # (pod key, node) in placement order
        self._devices: dict[str, set[DeviceID]] = {}  # node -> devices the simulation allocated there
        self._chosen: tuple[str, str, set[DeviceID]] | None = None  # the last feasible allocation, for placed()
        self._dra: tuple[dict[str, Obj], dict[str, list[Obj]], set[DeviceID]] | None = None
        self._slices: dict[str, list[Obj]] = {}  # node -> its driver's slices, for nodes not published yet
        first = next((k for ni in self.nodes.values() for k, p in ni.pods.items() if IPA.has_terms(p)), None)
        if first is not None:  # the first pod with terms switches the cache on: every node's pods are indexed
            ni = next(n for n in self.nodes.values() if first in n.pods)
            self.affinity.add(first, ni.pods[first], ni.name)

    def static_reason(self, pi: P.PodInfo, ni: NodeInfo) -> str | None:
        """`static_reason`, remembered per node and pod shape (the fields the profile's node-only plugins read, the
        scheduler's own cache key) for this simulation: first-fit asks it for every pod on every node."""
        key = (ni.name, shape_key(pi.pod, self.profile.shape_paths))
        why = self._static.get(key, _UNSET)
        if why is _UNSET:
            why = self._static[key] = static_reason(pi, ni, self.profile)
        return why  # type: ignore[return-value]

    def wants(self, pod: Obj) -> bool:
        """Whether these plugins have a say for the pod: then its verdicts depend on more than its shape."""
        return self.affinity.wants(pod) or bool(pod["spec"].get("resourceClaims"))

    def reason(self, pod: Obj, ni: NodeInfo) -> str | None:
        """The plugins' Filter for the pod on this node, in their words, or None."""
        self.nodes.setdefault(ni.name, ni)
        why = self._affinity_reason(pod, ni)
        if why is None and pod["spec"].get("resourceClaims"):
            why = self._claims_reason(pod, ni)
        return why

    def placed(self, pod: Obj, ni: NodeInfo) -> None:
        """The simulation put the pod on the node: later pods see it and the devices it took."""
        self.nodes.setdefault(ni.name, ni)
        key = pod_key(pod)
        if self.affinity.active or IPA.has_terms(pod):
            self.affinity.add(key, pod, ni.name)
        if self._chosen is not None and self._chosen[:2] == (key, ni.name):
            self._devices.setdefault(ni.name, set()).update(self._chosen[2])
        self._chosen = None
        self._placed.append((key, ni.name))

    def mark(self) -> int:
        return len(self._placed)

    def revert(self, mark: int, nodes: Iterable[str] = ()) -> None:
        """Forget the pods placed since `mark` and the given (template) nodes with what they held."""
        for key, _ in self._placed[mark:]:
            self.affinity.remove(key)
        del self._placed[mark:]
        for name in nodes:
            self.nodes.pop(name, None)
            self._devices.pop(name, None)
            self._slices.pop(name, None)

    # -- InterPodAffinity ----------------------------------------------------------------------------------
    def _affinity_reason(self, pod: Obj, ni: NodeInfo) -> str | None:
        if not self.affinity.wants(pod):
            return None
        self._gen += 1  # the plugin caches label columns per node generation: each call is a new one-node table
        verdict = self.affinity.filter(pod, [ni], self._gen, 1)
        if verdict is None or verdict.ok[0]:
            return None
        return IPA.ERR_AFFINITY if verdict.affinity[0] else IPA.ERR_ANTI if verdict.anti[0] else IPA.ERR_EXISTING

    # -- DynamicResources ----------------------------------------------------------------------------------
    def _cluster(self) -> tuple[dict[str, Obj], dict[str, list[Obj]], set[DeviceID]]:
        """DeviceClasses (the driver's own included: its chart installs them with it), slices by node, and the
        devices allocated to claims (admin access does not count), read once per simulation."""
        if self._dra is None:
            classes = {c["metadata"]["name"]: c for c in [*nvidia_dra.device_classes(), *dranet.device_classes()]}
            classes.update({c["metadata"]["name"]: c for c in self.store.list("DeviceClass")})
            used: set[DeviceID] = set()
            for claim in self.store.list("ResourceClaim"):
                for r in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                        "results") or ():
                    if not r.get("adminAccess"):
                        used.add((r["driver"], r["pool"], r["device"]))
            self._dra = classes, slices_by_node(self.store.list("ResourceSlice")), used
        return self._dra

    def _node_slices(self, ni: NodeInfo, by_node: dict[str, list[Obj]]) -> list[Obj]:
        """The node's published slices (and those reaching several nodes), or its driver's slices to come."""
        published = by_node.get(ni.name)
        if published:
            return published + by_node.get("", [])
        slices = self._slices.get(ni.name)
        if slices is None:
            labels = ni.node["metadata"].get("labels") or {}
            accel = labels.get(GKE_ACCELERATOR)
            pool = self.store.get("NodePool", "", labels.get(GKE_NODEPOOL, ""))
            slices = []
            if accel and pool is not None and nvidia_dra.uses_dra(labels):
                slices = nvidia_dra.slices_for(ni.name, accel, nvidia_dra.pool_gpu_count(pool["spec"]), labels,
                                               lambda: "simulated")
            nics = dranet.slice_for(ni.name, labels.get(INSTANCE_TYPE, ""), labels, lambda: "simulated") \
                if dranet.uses_dranet(labels) else None  # the NICs DRANET will publish on a labelled RDMA node
            if nics is not None:
                slices = [*slices, nics]
            self._slices[ni.name] = slices
        return slices + by_node.get("", [])

    def _claims_reason(self, pod: Obj, ni: NodeInfo) -> str | None:
        ns = pod["metadata"].get("namespace") or "default"
        claims = []
        for pc in pod["spec"]["resourceClaims"]:
            name = claim_name(pod, pc)
            claim = None if name is None else self.store.get("ResourceClaim", ns, name)
            if claim is None:
                return f'could not find ResourceClaim "{ns}/{name}"'
            claims.append(claim)
        if any(not DR.allocation_on_node(c, ni.node) for c in claims if (c.get("status") or {}).get("allocation")):
            return DR.NOT_ON_NODE
        pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
        if not pending:
            return None
        classes, by_node, used = self._cluster()
        slices = self._node_slices(ni, by_node)
        taken = used | self._devices.get(ni.name, set())
        try:
            chosen = Allocator(classes, slices, taken, self.features).search(ni.node, pending) if slices else None
        except AllocationError as exc:
            return str(exc)
        if chosen is None:
            return DR.CANNOT_ALLOCATE
        self._chosen = (pod_key(pod), ni.name, {d.id for _, d in chosen})
        return None


def place(pi: P.PodInfo, bins: list[NodeInfo], snapshot: Snapshot | None = None) -> NodeInfo | None:
    """First fit of the pod on the given nodes (the profile's Filters, NodeResourcesFit, then the snapshot's
    InterPodAffinity and DynamicResources); the chosen node takes its requests."""
    for ni in bins:
        if not P.fits_request(pi.requests, ni):
            continue
        if (static_reason(pi, ni) if snapshot is None else snapshot.static_reason(pi, ni)) is None and (
                snapshot is None or snapshot.reason(pi.pod, ni) is None):
            ni.add_pod(pi.pod, pi.requests)
            if snapshot is not None:
                snapshot.placed(pi.pod, ni)
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
    return (GKE_ACCELERATOR in labels and not nvidia_dra.uses_dra(labels)
            and GPU not in ((node.get("status") or {}).get("allocatable") or {}))

"""VolumeBinding and VolumeRestrictions: a pod's PersistentVolumeClaims in the scheduler.

VolumeBinding (kube-scheduler pkg/scheduler/framework/plugins/volumebinding): PreFilter fails a pod whose claim does
not exist (`persistentvolumeclaim "x" not found`) or is unbound with Immediate binding ("pod has unbound immediate
PersistentVolumeClaims"), both UnschedulableAndUnresolvable; a claim whose class binds WaitForFirstConsumer waits
for this pod. At Reserve/PreBind, for the chosen node, each such claim gets the smallest matching Available volume
(the binder writes the volume's claimRef and the PV controller completes the binding) or, with none, the
annotation volume.kubernetes.io/selected-node, which makes the PV controller provision for that node; while it is
unbound, another pod using it fits only that node (FindPodVolumes' fast path: "node(s) didn't find available
persistent volumes to bind", UnschedulableAndUnresolvable; the twin's preemption tries only that node). The Filter
(FindPodVolumes) also fails a node where a bound claim's volume's node affinity does not admit it (checkBoundClaims:
"node(s) had volume node affinity conflict", ErrReasonNodeConflict), and, with ErrReasonBindConflict, where a claim
whose class cannot provision
(`kubernetes.io/no-provisioner`, local volumes: checkVolumeProvisions) has no matching Available volume there (the
volume's node affinity must admit the node). Not modelled in the Filter: a class's allowedTopologies and
CSIStorageCapacity (every node is taken to reach every provisioned volume, GKE's zonal disks included).

PreBind (binder.go BindPodVolumes): the pod is bound to its node only once every claim it made the binder bind or
provision is Bound (checkBindings: spec.volumeName and pv.kubernetes.io/bind-completed). Meanwhile the scheduler
holds the pod assumed on the node (its requests count there) and schedules other pods. A claim provisioned for the
node whose `volume.kubernetes.io/selected-node` was removed or changed (the provisioner gave up and asks for a
reschedule) fails PreBind at once with `provisioning failed for PVC "x"`; a claim still unbound after
bindTimeoutSeconds (600 s, the KubeSchedulerConfiguration default) fails it with `context deadline exceeded`
(wait.PollUntilContextTimeout's ctx.Err()). Either way the scheduler forgets the assumed pod and records
`Warning FailedScheduling running PreBind plugin "VolumeBinding": binding volumes: <why>` with PodScheduled False
reason SchedulerError, and the pod goes back to the queue with backoff (schedule_one.go handleBindingCycleError).
The real binder polls every second; the twin binds the pod at the instant its last claim is bound (twin
assumption: the same start times as before the wait was modelled, provisioning taking no time). Generic ephemeral
volumes are not modelled.

VolumeRestrictions (pkg/scheduler/framework/plugins/volumerestrictions): a pod whose ReadWriteOncePod claim another
scheduled, unfinished pod uses fits no node ("node has pod using PersistentVolumeClaim with the same name and
ReadWriteOncePod access mode", Unschedulable on each node), and is retried when a pod using the claim goes away.
Its PreFilterExtensions (AddPod/RemovePod) let preemption clear the conflict: a higher-priority pod preempts the
claim's lower-priority holders on their node (CycleState.victims: evicted whatever the resources say).
"""

from __future__ import annotations

import numpy as np

from kubetwin.controllers import volumes as V
from kubetwin.controllers.volumes import pod_claims
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    Plugin,
    Queue,
    QueueingHint,
    QueueSkip,
    Rejected,
)
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.scheduler.preemption import pod_key, priority_of
from kubetwin.store.store import Obj, Store

NAME = "VolumeBinding"
BIND_TIMEOUT = 600.0  # VolumeBindingArgs bindTimeoutSeconds default (pkg/scheduler/apis/config/v1 defaults.go)
PREBIND_FAILED = 'running PreBind plugin "VolumeBinding": binding volumes: '  # framework.go RunPreBindPlugins
RESTRICTIONS = "VolumeRestrictions"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"  # volumebinding/volume_binding.go PreFilter
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"  # volumebinding ErrReasonBindConflict
NODE_CONFLICT = "node(s) had volume node affinity conflict"  # volumebinding ErrReasonNodeConflict
RWOP_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
                 )  # volumerestrictions/volume_restrictions.go ErrReasonReadWriteOncePodConflict



def _ns(pod: Obj) -> str:
    return pod["metadata"].get("namespace") or "default"


def prefilter(store: Store, pod: Obj) -> tuple[str | None, list[Obj]]:
    """VolumeBinding's PreFilter: (the reason the pod cannot be scheduled anywhere because of its claims, or None;
    the unbound WaitForFirstConsumer claims it would bind)."""
    ns = _ns(pod)
    unbound, delayed = False, []
    for name in pod_claims(pod):
        pvc = store.get("PersistentVolumeClaim", ns, name)
        if pvc is None:
            return f'persistentvolumeclaim "{name}" not found', []
        if pvc["metadata"].get("deletionTimestamp"):  # podHasPVCs
            return f'persistentvolumeclaim "{name}" is being deleted', []
        if V.is_bound(pvc):
            continue
        if V.delay_binding(store, pvc):
            delayed.append(pvc)
        else:
            unbound = True
    return (UNBOUND_IMMEDIATE, []) if unbound else (None, delayed)


def claims_key(pod: Obj) -> tuple:
    """What a pod rejected here adds to its shape: the queue's hints group pods by the claims they wait for."""
    return (_ns(pod), *pod_claims(pod))


def claim_changed(pi: P.PodInfo, old: object, new: object) -> QueueingHint:
    """VolumeBinding's and VolumeRestrictions' QueueingHint for a PVC add/update (isSchedulableAfter
    PersistentVolumeClaimChange): Queue for the pods that use this claim."""
    pvc = new if isinstance(new, dict) else {}
    meta = pvc.get("metadata") or {}
    return Queue if meta.get("name") in pod_claims(pi.pod) and _ns(pi.pod) == (meta.get("namespace") or "default") \
        else QueueSkip


def pod_gone(pi: P.PodInfo, old: object, new: object) -> QueueingHint:
    """VolumeRestrictions' QueueingHint for a pod that went away (isSchedulableAfterPodDeleted): Queue for the pods
    that use one of the same claims."""
    gone = old if isinstance(old, dict) else {}
    return Queue if _ns(pi.pod) == _ns(gone) and not set(pod_claims(gone)).isdisjoint(pod_claims(pi.pod)) \
        else QueueSkip


NODE_CHANGE = ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.Update))


def can_provision(store: Store, pvc: Obj) -> bool:
    """checkVolumeProvisions: the claim's class names a provisioner (not kubernetes.io/no-provisioner)."""
    cls = V.class_of(store, V.claim_class(pvc)) or {}
    return str(cls.get("provisioner") or "") not in ("", V.NO_PROVISIONER)


def check_bindings(store: Store, pod: Obj, node: str, provisions: tuple[str, ...]) -> tuple[bool, str | None]:
    """checkBindings: (every claim of the pod fully bound, the error that fails PreBind or None). `provisions`:
    the claims the binder asked to provision for `node`."""
    ns = _ns(pod)
    for name in pod_claims(pod):
        pvc = store.get("PersistentVolumeClaim", ns, name)
        if pvc is None:
            return False, f'failed to check provisioning pvc: persistentvolumeclaim "{name}" not found'
        meta = pvc["metadata"]
        if ((pvc.get("spec") or {}).get("volumeName")
                and V.BIND_COMPLETED in (meta.get("annotations") or {})):  # isPVCFullyBound
            continue
        if name in provisions and (meta.get("annotations") or {}).get(V.SELECTED_NODE) != node:
            return False, f'provisioning failed for PVC "{name}"'
        return False, None
    return True, None


def _selected_nodes(state: CycleState) -> set[str]:
    """The nodes the pod's unbound WaitForFirstConsumer claims are already provisioning for."""
    delayed = state.data.get(NAME)
    return {str(n) for c in (delayed if isinstance(delayed, list) else ())
            if (n := (c["metadata"].get("annotations") or {}).get(V.SELECTED_NODE))}


class VolumeBinding(Plugin):
    """PreFilter and Reserve/PreBind (see the module docstring)."""

    name = NAME
    pre_bind_timeout = BIND_TIMEOUT

    def __init__(self, store: Store) -> None:
        self.store = store
        # Pods Reserve left waiting in PreBind: pod key -> (node, the claims asked to provision for it)
        self.assumed: dict[str, tuple[str, tuple[str, ...]]] = {}

    def pre_filter(self, state: CycleState) -> None:
        if not state.pod["spec"].get("volumes"):
            return
        why, delayed = prefilter(self.store, state.pod)
        if why is not None:  # every node UnschedulableAndUnresolvable; DefaultPreemption still says so
            raise Rejected(NAME, why, post_filter=True, shape=(claims_key(state.pod),))
        ns = _ns(state.pod)
        affine = []  # checkBoundClaims: the bound claims' volumes whose node affinity the node must satisfy
        for name in pod_claims(state.pod):
            pvc = self.store.get("PersistentVolumeClaim", ns, name)
            pv_name = ((pvc or {}).get("spec") or {}).get("volumeName")
            pv = self.store.get("PersistentVolume", "", pv_name) if V.is_bound(pvc) and pv_name else None
            if pv is not None and ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required"):
                affine.append(pv)
        if affine:
            state.data[f"{NAME}/bound"] = affine
            state.want = state.n  # the Filter below must see every node
        if delayed:
            state.data[NAME] = delayed
            static = [c for c in delayed if V.SELECTED_NODE not in (c["metadata"].get("annotations") or {})
                      and not can_provision(self.store, c)]
            if static:
                state.data[f"{NAME}/static"] = static
            if static or any(V.SELECTED_NODE in (c["metadata"].get("annotations") or {}) for c in delayed):
                state.want = state.n

    def _filtered(self, state: CycleState) -> bool:
        return bool(_selected_nodes(state) or f"{NAME}/static" in state.data or f"{NAME}/bound" in state.data)

    def _reasons(self, state: CycleState, ni: NodeInfo, pvs: list[Obj] | None) -> list[str]:
        """The Filter (FindPodVolumes) for one node: its bound claims' volumes' node affinity (checkBoundClaims,
        ErrReasonNodeConflict); the selected node of a provisioning claim, and a matching volume there for each
        claim its class cannot provision (findMatchingVolumes / checkVolumeProvisions, ErrReasonBindConflict)."""
        labels = (ni.node.get("metadata") or {}).get("labels") or {}
        out = []
        bound = state.data.get(f"{NAME}/bound")
        if isinstance(bound, list) and not all(V.node_affinity_ok(pv, labels) for pv in bound):
            out.append(NODE_CONFLICT)
        selected = _selected_nodes(state)
        if selected and {ni.name} != selected:
            return [*out, BIND_CONFLICT]
        static = state.data.get(f"{NAME}/static")
        if isinstance(static, list) and pvs is not None:
            taken: set[str] = set()
            for pvc in static:
                pv = V.find_match(pvs, pvc, True, labels, frozenset(taken))
                if pv is None:
                    return [*out, BIND_CONFLICT]
                taken.add(pv["metadata"]["name"])
        return out

    def _volumes(self, state: CycleState) -> list[Obj] | None:
        return self.store.list("PersistentVolume") if state.data.get(f"{NAME}/static") else None

    def filter_rows(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        """FindPodVolumes over the rows the vector filters passed (see _reasons)."""
        if not len(rows) or not self._filtered(state):
            return rows
        pvs = self._volumes(state)
        infos = [state.table.infos[int(r)] for r in rows]
        verdicts = [self._reasons(state, ni, pvs) if ni is not None else [BIND_CONFLICT] for ni in infos]
        keep = [not v for v in verdicts]
        for v in verdicts:
            for reason in v:
                state.reject(NAME, reason)
        state.data[f"{NAME}/rejected"] = int(state.data.get(f"{NAME}/rejected") or 0) + len(keep) - sum(keep)
        if state.traced is not None:
            state.traced[NAME] = {ni.name: ", ".join(v) or "passed" for ni, v in zip(infos, verdicts, strict=True)
                                  if ni is not None}
        return rows[np.array(keep, dtype=bool)]

    def rejections(self, state: CycleState, rows: np.ndarray) -> tuple[dict[str, int], int]:
        """The Filter's reasons as filter_rows counted them: UnschedulableAndUnresolvable, so preemption says it
        is not helpful there."""
        mine = state.rejected.get(NAME) or {}
        return dict(mine), int(state.data.get(f"{NAME}/rejected") or 0)

    def preemptible(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        if not len(rows) or not self._filtered(state):
            return rows
        pvs = self._volumes(state)
        keep = [(ni := state.table.infos[int(r)]) is not None and not self._reasons(state, ni, pvs) for r in rows]
        return rows[np.array(keep, dtype=bool)]

    def reserve(self, state: CycleState, row: int, node: str) -> dict[str, str] | None:
        """BindPodVolumes for the chosen node: a matching static volume gets the claim's claimRef (the binder's
        half of the binding), or the claim gets the selected node for the provisioner."""
        delayed = state.data.get(NAME)
        if not isinstance(delayed, list) or not delayed:
            return None
        info = state.table.infos[row]
        labels = ((info.node if info is not None else {}).get("metadata") or {}).get("labels") or {}
        taken: set[str] = set()
        provisions: list[str] = []
        pvs = self.store.list("PersistentVolume") if delayed else []
        for pvc in delayed:
            pv = V.find_match(pvs, pvc, True, labels, frozenset(taken))
            if pv is not None:
                taken.add(pv["metadata"]["name"])
                meta = pv["metadata"]
                ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": pvc["metadata"]["name"],
                       "namespace": _ns(pvc), "uid": pvc["metadata"]["uid"]}
                self.store.update({**pv, "metadata": {**meta, "annotations": {
                    **(meta.get("annotations") or {}), V.BOUND_BY_CONTROLLER: "yes"}},
                    "spec": {**pv["spec"], "claimRef": ref}})
                continue
            cur = self.store.get("PersistentVolumeClaim", _ns(pvc), pvc["metadata"]["name"]) or pvc
            meta = cur["metadata"]
            provisions.append(meta["name"])
            if V.SELECTED_NODE not in (meta.get("annotations") or {}):
                self.store.update({**cur, "metadata": {**meta, "annotations": {
                    **(meta.get("annotations") or {}), V.SELECTED_NODE: node}}})
        self.assumed[pod_key(state.pod)] = (node, tuple(provisions))
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """volume_binding.go EventsToRegister, as far as the twin models: a claim added or updated (the pods that
        use it), a volume added or updated, a node added or changed."""
        return [ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", ActionType.Add | ActionType.Update),
                                     claim_changed),
                ClusterEventWithHint(ClusterEvent("PersistentVolume", ActionType.Add | ActionType.Update)),
                NODE_CHANGE]

    def pre_bind_pre_flight(self, key: str) -> bool:
        """PreBindPreFlight: Reserve left claims to bind or provision for this pod, so PreBind waits for them."""
        return key in self.assumed

    def pre_bind_failed(self, why: str) -> str:
        return PREBIND_FAILED + why  # volume_binding.go PreBind: "binding volumes: %w"

    def pre_bind(self, key: str, pod: Obj) -> tuple[bool, str | None]:
        """PreBind's poll for a pod Reserve left waiting: (done, the error that fails it). A pod Reserve did not
        leave waiting is done."""
        entry = self.assumed.get(key)
        if entry is None:
            return True, None
        done, error = check_bindings(self.store, pod, *entry)
        if done or error is not None:
            self.assumed.pop(key, None)
        return done, error

    def forget(self, key: str) -> None:
        """Unreserve: forget the pod's bindings (the claims' API objects keep what PreBind wrote, as upstream)."""
        self.assumed.pop(key, None)


class VolumeRestrictions(Plugin):
    """ReadWriteOncePod: one scheduled pod per claim in the whole cluster (see the module docstring)."""

    name = RESTRICTIONS

    def __init__(self, store: Store) -> None:
        self.store = store

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """volume_restrictions.go EventsToRegister: a pod deleted (its claims are free), a claim added or updated,
        a node added or changed."""
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete), pod_gone),
                ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", ActionType.Add | ActionType.Update),
                                     claim_changed),
                NODE_CHANGE]

    def assigned_pod_deleted(self, key: str, pod: Obj, node: str | None) -> bool:
        """A scheduled pod that used claims went away: its Pod/Delete hint may requeue the pods it kept out."""
        return bool(node) and bool(pod_claims(pod))

    def pre_filter(self, state: CycleState) -> None:
        pod = state.pod
        claims = pod_claims(pod) if pod["spec"].get("volumes") else []
        if not claims:
            return
        ns, me = _ns(pod), pod["metadata"].get("uid")
        rwop = set()
        for name in claims:
            pvc = self.store.get("PersistentVolumeClaim", ns, name)
            if pvc is None:  # readWriteOncePodPVCsForPod: the lister's NotFound, UnschedulableAndUnresolvable
                raise Rejected(RESTRICTIONS, f'persistentvolumeclaim "{name}" not found', post_filter=True,
                               shape=(claims_key(pod),))
            if "ReadWriteOncePod" in ((pvc.get("spec") or {}).get("accessModes") or ()):
                rwop.add(name)
        if not rwop:
            return
        holders = [other for other in self.store.list("Pod", ns)  # scheduled pods that have not finished
                   if other["metadata"].get("uid") != me and other["spec"].get("nodeName")
                   and (other.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                   and not rwop.isdisjoint(pod_claims(other))]
        if holders:
            state.data[RESTRICTIONS] = holders
            state.want = state.n  # every node gets the verdict, as the Filter runs on each
            state.shape = (*state.shape, ("rwop", *claims_key(pod)))

    def filter_rows(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        if not state.data.get(RESTRICTIONS) or not len(rows):
            return rows
        state.reject(RESTRICTIONS, RWOP_CONFLICT, len(rows))
        if state.traced is not None:
            state.traced[RESTRICTIONS] = {ni.name: RWOP_CONFLICT for ni in (state.table.infos[int(r)] for r in rows)
                                          if ni is not None}
        return rows[:0]

    def preemptible(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        """PreFilterExtensions RemovePod: preemption's dry run clears the conflict on a node by evicting the
        claim's holders there, so only the node of the holders, when all of them are lower-priority and on one
        node, is a candidate, and they are its required victims."""
        holders = state.data.get(RESTRICTIONS)
        if not isinstance(holders, list) or not holders:
            return rows
        nodes = {str(h["spec"]["nodeName"]) for h in holders}
        if len(nodes) != 1 or any(priority_of(h) >= state.pi.priority for h in holders):
            return rows[:0]
        node = next(iter(nodes))
        keep = [(ni := state.table.infos[int(r)]) is not None and ni.name == node for r in rows]
        state.victims[node] = [*state.victims.get(node, []), *holders]
        return rows[np.array(keep, dtype=bool)]

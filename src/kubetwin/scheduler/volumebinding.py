"""VolumeBinding and VolumeRestrictions: a pod's PersistentVolumeClaims in the scheduler.

VolumeBinding (kube-scheduler pkg/scheduler/framework/plugins/volumebinding): PreFilter fails a pod whose claim does
not exist (`persistentvolumeclaim "x" not found`) or is unbound with Immediate binding ("pod has unbound immediate
PersistentVolumeClaims"), both UnschedulableAndUnresolvable; a claim whose class binds WaitForFirstConsumer waits
for this pod. At Reserve/PreBind, for the chosen node, each such claim gets the smallest matching Available volume
(the binder writes the volume's claimRef and the PV controller completes the binding) or, with none, the
annotation volume.kubernetes.io/selected-node, which makes the PV controller provision for that node; while it is
unbound, another pod using it fits only that node (FindPodVolumes' fast path: "node(s) didn't find available
persistent volumes to bind", UnschedulableAndUnresolvable; the twin's preemption tries only that node). Not modelled:
the per-node Filter (a volume's node affinity, a class's allowedTopologies, CSIStorageCapacity: every node is
taken to reach every volume, GKE's zonal disks included), and PreBind's wait for the claims to be bound (up to
bindTimeoutSeconds, 600 s): the pod is bound to the node at once and its containers wait in ContainerCreating until
its claims are Bound (controllers/attachdetach.py), the same end-to-end start time with provisioning taking no
time. Generic ephemeral volumes are not modelled.

VolumeRestrictions (pkg/scheduler/framework/plugins/volumerestrictions): a pod whose ReadWriteOncePod claim another
scheduled, unfinished pod uses fits no node ("node has pod using PersistentVolumeClaim with the same name and
ReadWriteOncePod access mode", Unschedulable on each node), and is retried when a pod using the claim goes away.
Preemption of the pod that holds the claim is not modelled: the twin's preemption finds no victims for it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kubetwin.controllers import volumes as V
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.framework import CycleState, Plugin, Rejected
from kubetwin.store.store import Obj, Store

NAME = "VolumeBinding"
RESTRICTIONS = "VolumeRestrictions"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"  # volumebinding/volume_binding.go PreFilter
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"  # volumebinding ErrReasonBindConflict
RWOP_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
                 )  # volumerestrictions/volume_restrictions.go ErrReasonReadWriteOncePodConflict


def pod_claims(pod: Obj) -> list[str]:
    """The PersistentVolumeClaims the pod's volumes name (volumebinding podHasPVCs; generic ephemeral volumes are
    not modelled)."""
    return [v["persistentVolumeClaim"].get("claimName", "") for v in pod["spec"].get("volumes") or ()
            if "persistentVolumeClaim" in v]


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


def claim_hint(pvc: Obj) -> Callable[[str, P.PodInfo], bool]:
    """VolumeBinding's and VolumeRestrictions' QueueingHint for a PVC add/update (isSchedulableAfter
    PersistentVolumeClaimChange): the pods they rejected that use this claim."""
    ns, name = pvc["metadata"].get("namespace") or "default", pvc["metadata"]["name"]
    return lambda plugin, pi: (plugin in (NAME, RESTRICTIONS) and name in pod_claims(pi.pod) and _ns(pi.pod) == ns)


def pod_gone_hint(pod: Obj) -> Callable[[str, P.PodInfo], bool]:
    """VolumeRestrictions' QueueingHint for a pod that went away (isSchedulableAfterPodDeleted): the pods it
    rejected that use one of the same claims."""
    ns, claims = _ns(pod), set(pod_claims(pod))
    return lambda plugin, pi: (plugin == RESTRICTIONS and _ns(pi.pod) == ns
                               and not claims.isdisjoint(pod_claims(pi.pod)))


def _selected_nodes(state: CycleState) -> set[str]:
    """The nodes the pod's unbound WaitForFirstConsumer claims are already provisioning for."""
    delayed = state.data.get(NAME)
    return {str(n) for c in (delayed if isinstance(delayed, list) else ())
            if (n := (c["metadata"].get("annotations") or {}).get(V.SELECTED_NODE))}


class VolumeBinding(Plugin):
    """PreFilter and Reserve/PreBind (see the module docstring)."""

    name = NAME

    def __init__(self, store: Store) -> None:
        self.store = store

    def pre_filter(self, state: CycleState) -> None:
        if not state.pod["spec"].get("volumes"):
            return
        why, delayed = prefilter(self.store, state.pod)
        if why is not None:  # every node UnschedulableAndUnresolvable; DefaultPreemption still says so
            raise Rejected(NAME, why, post_filter=True, shape=(claims_key(state.pod),))
        if delayed:
            state.data[NAME] = delayed
            if any(V.SELECTED_NODE in (c["metadata"].get("annotations") or {}) for c in delayed):
                state.want = state.n  # the Filter below must see every node

    def filter_rows(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        """FindPodVolumes' fast path: a claim already provisioning for a selected node fits only that node."""
        selected = _selected_nodes(state)
        if not selected or not len(rows):
            return rows
        infos = [state.table.infos[int(r)] for r in rows]
        keep = [ni is not None and {ni.name} == selected for ni in infos]
        rejected = len(keep) - sum(keep)
        if rejected:
            state.reject(NAME, BIND_CONFLICT, rejected)
        if state.traced is not None:
            state.traced[NAME] = {ni.name: "passed" if ok else BIND_CONFLICT for ni, ok in zip(infos, keep, strict=True)
                                  if ni is not None}
        return rows[np.array(keep, dtype=bool)]

    def rejections(self, state: CycleState, rows: np.ndarray) -> tuple[dict[str, int], int]:
        """The Filter's reasons as filter_rows counted them: UnschedulableAndUnresolvable, so preemption says it
        is not helpful there."""
        mine = state.rejected.get(NAME) or {}
        return dict(mine), sum(mine.values())

    def preemptible(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        selected = _selected_nodes(state)
        if not selected or not len(rows):
            return rows
        keep = [(ni := state.table.infos[int(r)]) is not None and {ni.name} == selected for r in rows]
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
        for pvc in delayed:
            pv = V.find_match(self.store.list("PersistentVolume"), pvc, True, labels, frozenset(taken))
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
            if V.SELECTED_NODE not in (meta.get("annotations") or {}):
                self.store.update({**cur, "metadata": {**meta, "annotations": {
                    **(meta.get("annotations") or {}), V.SELECTED_NODE: node}}})
        return None


class VolumeRestrictions(Plugin):
    """ReadWriteOncePod: one scheduled pod per claim in the whole cluster (see the module docstring)."""

    name = RESTRICTIONS

    def __init__(self, store: Store) -> None:
        self.store = store

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
        for other in self.store.list("Pod", ns):  # IsPVCUsedByPods: scheduled pods that have not finished
            if (other["metadata"].get("uid") != me and other["spec"].get("nodeName")
                    and (other.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                    and not rwop.isdisjoint(pod_claims(other))):
                state.data[RESTRICTIONS] = True
                state.want = state.n  # every node gets the verdict, as the Filter runs on each
                state.shape = (*state.shape, ("rwop", *claims_key(pod)))
                return

    def filter_rows(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        if not state.data.get(RESTRICTIONS) or not len(rows):
            return rows
        state.reject(RESTRICTIONS, RWOP_CONFLICT, len(rows))
        if state.traced is not None:
            state.traced[RESTRICTIONS] = {ni.name: RWOP_CONFLICT for ni in (state.table.infos[int(r)] for r in rows)
                                          if ni is not None}
        return rows[:0]

    def preemptible(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        return rows[:0] if state.data.get(RESTRICTIONS) else rows

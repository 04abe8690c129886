"""VolumeBinding: a pod's PersistentVolumeClaims at PreFilter, and its QueueingHint for claim changes.

kube-scheduler pkg/scheduler/framework/plugins/volumebinding. The twin treats every claim as Immediate binding (no
WaitForFirstConsumer) and does not model generic ephemeral volumes.
"""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.framework import CycleState, Plugin, Rejected
from kubetwin.store.store import Obj, Store

NAME = "VolumeBinding"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"  # volumebinding/volume_binding.go PreFilter


def pod_claims(pod: Obj) -> list[str]:
    """The PersistentVolumeClaims the pod's volumes name (volumebinding podHasPVCs; generic ephemeral volumes are
    not modelled)."""
    return [v["persistentVolumeClaim"].get("claimName", "") for v in pod["spec"].get("volumes") or ()
            if "persistentVolumeClaim" in v]


def prefilter(store: Store, pod: Obj) -> str | None:
    """VolumeBinding's PreFilter: the reason the pod cannot be scheduled anywhere because of its claims, or None.

    kube-scheduler pkg/scheduler/framework/plugins/volumebinding/volume_binding.go: a claim that does not exist
    fails with the lister's error (`persistentvolumeclaim "x" not found`), one that is not bound with "pod has
    unbound immediate PersistentVolumeClaims", both UnschedulableAndUnresolvable. The twin treats every claim as
    Immediate binding (no WaitForFirstConsumer), so "not bound" means status.phase is not Bound."""
    ns = pod["metadata"].get("namespace") or "default"
    unbound = False
    for name in pod_claims(pod):
        pvc = store.get("PersistentVolumeClaim", ns, name)
        if pvc is None:
            return f'persistentvolumeclaim "{name}" not found'
        unbound = unbound or (pvc.get("status") or {}).get("phase") != "Bound"
    return UNBOUND_IMMEDIATE if unbound else None


def claims_key(pod: Obj) -> tuple:
    """What a pod rejected here adds to its shape: the queue's hints group pods by the claims they wait for."""
    return (pod["metadata"].get("namespace") or "default", *pod_claims(pod))


def claim_hint(pvc: Obj) -> Callable[[str, P.PodInfo], bool]:
    """VolumeBinding's QueueingHint for a PVC add/update (isSchedulableAfterPersistentVolumeClaimChange): the pods
    it rejected that use this claim."""
    ns, name = pvc["metadata"].get("namespace") or "default", pvc["metadata"]["name"]
    return lambda plugin, pi: (plugin == NAME and name in pod_claims(pi.pod)
                               and (pi.pod["metadata"].get("namespace") or "default") == ns)


class VolumeBinding(Plugin):
    """The plugin at its one extension point here, PreFilter."""

    name = NAME

    def __init__(self, store: Store) -> None:
        self.store = store

    def pre_filter(self, state: CycleState) -> None:
        if not state.pod["spec"].get("volumes"):
            return
        why = prefilter(self.store, state.pod)
        if why is not None:  # every node UnschedulableAndUnresolvable; DefaultPreemption still says so
            raise Rejected(NAME, why, post_filter=True, shape=(claims_key(state.pod),))

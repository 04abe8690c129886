"""The PersistentVolume controller (binding claims to volumes, dynamic provisioning through a StorageClass's
provisioner) and the GKE Volume Populator filling a claim from Cloud Storage.

Binding follows kube-controller-manager's PV controller (pkg/controller/volume/persistentvolume/pv_controller.go
syncUnboundClaim, and k8s.io/component-helpers/storage/volume FindMatchingVolume):
- A claim with `spec.volumeName` binds to that PersistentVolume when it is unclaimed or pre-bound to it (a volume
  that does not satisfy it: Warning VolumeMismatch `Cannot bind to requested volume "pv": <why>`); a missing volume
  or one another claim holds leaves the claim Pending.
- Otherwise (index.go findByClaim) the access-mode sets holding every mode the claim asks for are searched fewest modes
  first, and the first set with a match gives its smallest Available volume that matches: the claim's storageClassName
  (a claim with none gets the default class at admission, DefaultStorageClass; `""` binds only class-less volumes),
  accessModes (the claim's are a subset of the volume's), volumeMode, capacity >= the request, the claim's label
  selector; a volume pre-bound to this claim (claimRef) wins whatever its size. With WaitForFirstConsumer the PV
  controller binds only pre-bound volumes: the scheduler's VolumeBinding picks the volume, or the node to provision for
  (annotation volume.kubernetes.io/selected-node), once the claim's first pod is scheduled; until then the claim waits
  with Normal WaitForFirstConsumer "waiting for first consumer to be created before binding".
- No match: with a class, provisioning: a class that exists neither in the scenario nor among GKE's built-in classes
  (catalog.storage.GKE_STORAGE_CLASSES: a GKE cluster has standard-rwo, premium-rwo and standard without a manifest) is
  Warning ProvisioningFailed `storageclass.storage.k8s.io "x" not found` and the claim stays Pending;
  `kubernetes.io/no-provisioner` provisions nothing (Warning ProvisioningFailed `no volume plugin matched name:
  kubernetes.io/no-provisioner`: no in-tree plugin has that name); any other provisioner is assumed installed (the PD,
  Filestore, Parallelstore, Lustre and Cloud Storage FUSE CSI drivers GKE runs): Normal ExternalProvisioning (the PV
  controller), Provisioning and ProvisioningSucceeded (the external provisioner), or Warning ProvisioningFailed with
  csi-provisioner's refusal (catalog.storage.provisioning_error: a claim with a selector, ReadWriteMany on a PD
  filesystem) and the claim stays Pending; then a PersistentVolume `pvc-<claim uid>` with the claim's access modes,
  volume mode and requested size, the class's reclaimPolicy, bound to the claim. Provisioning takes no time in the twin
  (twin assumption: the CSI CreateVolume call of a PD is seconds, of a Filestore or Parallelstore instance minutes; not
  modelled). Without a class: Normal FailedBinding "no persistent volumes available for this claim and no storage class
  is set".
- A deleted claim's volume is Released (reclaim policy Retain: it keeps its claimRef and binds no other claim), or
  deleted when it was provisioned with reclaim policy Delete (twin: at once).
- Each reason is recorded once per claim while it stays (the real controller repeats it every 15 s resync and the
  event correlator counts them: `(x12 over 3m)`).

The GKE Volume Populator: a claim whose `dataSourceRef` is a GKE Volume Populator `GCPDataSource` (apiGroup
`datalayer.gke.io`; spec `cloudStorage.uri` / `cloudStorage.serviceAccountName`,
https://cloud.google.com/kubernetes-engine/docs/reference/crds/gcpdatasource) stays Pending while the data is
copied, then is provisioned and Bound ("It copies data from the specified Cloud Storage bucket URI into the
underlying persistent storage volume before making the volume available to your Pods",
https://cloud.google.com/kubernetes-engine/docs/concepts/about-volume-populator). The populator supports
Cloud Storage -> Parallelstore and Cloud Storage -> Hyperdisk ML only (same page).
- Transfer time = data size / transfer rate. The twin cannot list the bucket, so the size comes from the
  annotation `kubetwin.io/data-size` on the GCPDataSource (a quantity, e.g. `2Ti`; none = 0 bytes). The rate:
  Parallelstore imports from Cloud Storage at up to 20 GiB/s for large files (5,000 files/s for small ones;
  https://cloud.google.com/parallelstore/docs/overview "Performance", ../shared/catalog/catalog_draft.yaml
  storage.parallelstore.gcs_transfer); Hyperdisk ML has no published populate rate, so the twin assumes the
  transfer Job writes at the volume's provisioned throughput (StorageClass `provisioned-throughput-on-create`,
  400 MiB/s minimum; the same assumption as workloads/storage.py for writes).
- Events on the claim use the populator's reasons and messages as GKE's guide shows them in `kubectl describe pvc`
  ("Automate data transfer from Cloud Storage to a Hyperdisk ML volume using GKE Volume Populator", source
  gkevolumepopulator-populator): PopulateOperationStartSuccess, PopulateOperationFinished "Populate operation
  finished", PopulatorFinished "Populator finished" (the last two are kubernetes-csi/lib-volume-populator
  populator-machinery/controller.go's own). The start message is shortened to "populateFn: Populate operation
  started" (GKE's adds "for zone Z"; the twin has no zone for the volume). The per-minute TransferInProgress events,
  the transfer Job's own pod and node, and the minutes before a transfer starts are not modelled.
- The populator starts at once whatever the class's binding mode (twin: it does not wait for the selected node of
  a WaitForFirstConsumer claim; the pod waits for the claim in VolumeBinding's PreBind, scheduler/volumebinding.py).
"""

from __future__ import annotations

from functools import partial

from kubetwin.catalog import GIB, MIB
from kubetwin.catalog.storage import (
    DEFAULT_CLASS_ANNOTATION,
    GKE_DEFAULT_CLASS,
    MIGRATED_PROVISIONERS,
    binding_mode,
    hdml_mibps,
    provisioning_error,
    storage_class,
)
from kubetwin.k8s import nodeaffinity
from kubetwin.k8s.labels import matches
from kubetwin.k8s.units import parse_quantity
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

POPULATOR_GROUP, POPULATOR_KIND = "datalayer.gke.io", "GCPDataSource"
DATA_SIZE = "kubetwin.io/data-size"
SOURCE = "gkevolumepopulator-populator"  # the event source in GKE's describe output
PARALLELSTORE_GCS_GIBPS = 20.0  # Parallelstore <-> Cloud Storage, large files (parallelstore/docs/overview)
STARTED, FINISHED_OP, FINISHED = "PopulateOperationStartSuccess", "PopulateOperationFinished", "PopulatorFinished"
PV_CONTROLLER = "persistentvolume-controller"
# Annotations of the PV controller and the scheduler's volume binder (component-helpers storage/volume helpers.go).
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_MESSAGE = "waiting for first consumer to be created before binding"  # pv_controller.go syncUnboundClaim
NO_CLASS_MESSAGE = "no persistent volumes available for this claim and no storage class is set"
ACCESS_MODE_SHORT = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                     "ReadWriteOncePod": "RWOP"}  # kubectl's printers (GetAccessModesAsString)


def _ns(obj: Obj) -> str:
    return obj["metadata"].get("namespace") or "default"


def claim_class(pvc: Obj) -> str:
    """The claim's class (GetPersistentVolumeClaimClass: the beta annotation, then spec.storageClassName; "": none)."""
    ann = (pvc["metadata"].get("annotations") or {}).get(BETA_STORAGE_CLASS)
    return str(ann if ann is not None else (pvc.get("spec") or {}).get("storageClassName") or "")


def class_of(store: Store, name: str) -> Obj | None:
    """The StorageClass `name` as the cluster has it: the scenario's, or GKE's built-in (None: not found)."""
    return storage_class(name, store.get("StorageClass", "", name)) if name else None


def delay_binding(store: Store, pvc: Obj) -> bool:
    """IsDelayBindingMode: the claim's class exists and binds WaitForFirstConsumer (a missing class: Immediate)."""
    cls = class_of(store, claim_class(pvc))
    return cls is not None and binding_mode(cls) == "WaitForFirstConsumer"


def is_bound(pvc: Obj | None) -> bool:
    return pvc is not None and (pvc.get("status") or {}).get("phase") == "Bound"


def _requested(pvc: Obj) -> float:
    raw = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    return float(parse_quantity(str(raw))) if raw is not None else 0.0


def _capacity(pv: Obj) -> float:
    raw = ((pv.get("spec") or {}).get("capacity") or {}).get("storage")
    return float(parse_quantity(str(raw))) if raw is not None else 0.0


def _bound_to(pv: Obj, pvc: Obj) -> bool:
    """IsVolumeBoundToClaim: the volume's claimRef names this claim (and its uid, when the ref has one)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref or ref.get("name") != pvc["metadata"]["name"] or (ref.get("namespace") or "default") != _ns(pvc):
        return False
    return not ref.get("uid") or ref.get("uid") == pvc["metadata"].get("uid")


def mismatch(pv: Obj, pvc: Obj) -> str | None:
    """checkVolumeSatisfyClaim: why the volume cannot serve the claim, or None."""
    spec, want = pv.get("spec") or {}, pvc.get("spec") or {}
    if _requested(pvc) > _capacity(pv):
        return "requested PV is too small"
    if str(spec.get("storageClassName") or "") != claim_class(pvc):
        return "storageClassName does not match"
    if (spec.get("volumeMode") or "Filesystem") != (want.get("volumeMode") or "Filesystem"):
        return "incompatible volumeMode"
    if not set(want.get("accessModes") or ()) <= set(spec.get("accessModes") or ()):
        return "incompatible accessMode"
    return None


def node_affinity_ok(pv: Obj, node_labels: dict | None) -> bool:
    """CheckNodeAffinity: the volume's required node affinity admits a node with these labels (no affinity: any)."""
    terms = ((((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {})
             .get("nodeSelectorTerms")) or None
    if terms is None:
        return True
    labels = node_labels or {}
    return nodeaffinity.terms_match(terms, labels)


def find_match(pvs: list[Obj], pvc: Obj, delay: bool, node_labels: dict | None = None,
               excluded: frozenset[str] = frozenset()) -> Obj | None:
    """The volume a claim binds. With a node (the scheduler's path, binder.go findMatchingVolumes) FindMatchingVolume
    over every volume, the volume's node affinity admitting the node. Without (the PV controller's path, index.go
    findByClaim) the volumes are searched one access-mode set at a time, the sets that hold every mode the claim
    asks for, fewest modes first (allPossibleMatchingAccessModes): the first set with a match gives it, so a
    ReadWriteOnce claim takes a larger ReadWriteOnce disk before a smaller ReadWriteOnce+ReadOnlyMany+ReadWriteMany
    share (index_test.go TestFindingVolumeWithDifferentAccessModes)."""
    if node_labels is not None:
        return _find_matching_volume(pvs, pvc, delay, node_labels, excluded)
    want = set((pvc.get("spec") or {}).get("accessModes") or ())
    sets: dict[frozenset[str], list[Obj]] = {}
    for pv in pvs:
        sets.setdefault(frozenset((pv.get("spec") or {}).get("accessModes") or ()), []).append(pv)
    for modes in sorted((m for m in sets if want <= m), key=lambda m: (len(m), sorted(m))):
        found = _find_matching_volume(sets[modes], pvc, delay, None, excluded)
        if found is not None:
            return found
    return None


def _find_matching_volume(pvs: list[Obj], pvc: Obj, delay: bool, node_labels: dict | None,
                          excluded: frozenset[str]) -> Obj | None:
    """FindMatchingVolume: a volume pre-bound to the claim, else the smallest Available one that matches. With
    `delay` and no node (the PV controller's path for WaitForFirstConsumer) only a pre-bound one; with a node (the
    scheduler's path) the volume's node affinity must admit it."""
    want, best = pvc.get("spec") or {}, None
    selector = want.get("selector")
    for pv in sorted(pvs, key=lambda v: v["metadata"]["name"]):
        spec = pv.get("spec") or {}
        if pv["metadata"]["name"] in excluded or pv["metadata"].get("deletionTimestamp"):
            continue
        why = mismatch(pv, pvc)
        if why in ("storageClassName does not match", "incompatible volumeMode"):
            continue
        if _bound_to(pv, pvc):
            if why is None and (node_labels is None or node_affinity_ok(pv, node_labels)):
                return pv
            continue
        if node_labels is None and delay:
            continue  # the scheduler binds unbound volumes of a WaitForFirstConsumer claim
        if node_labels is not None and not node_affinity_ok(pv, node_labels):
            continue
        if spec.get("claimRef") or (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not matches(selector, pv["metadata"].get("labels")):
            continue
        if why is None and (best is None or _capacity(pv) < _capacity(best)):
            best = pv
    return best


def default_class(store: Store) -> str:
    """The class DefaultStorageClass admission gives a claim with none: the scenario's class annotated default
    (the newest, then by name, as GetDefaultClass picks among several), else GKE's standard-rwo unless the
    scenario's own standard-rwo replaces it without the annotation (GKE's "change the default StorageClass"); ""
    when there is no default (the claim keeps no class)."""
    marked = [c for c in store.list("StorageClass")
              if (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
    if not marked:
        return "" if store.get("StorageClass", "", GKE_DEFAULT_CLASS) is not None else GKE_DEFAULT_CLASS
    newest = max(marked, key=lambda c: (c["metadata"].get("creationTimestamp") or "", c["metadata"]["name"]))
    return str(newest["metadata"]["name"])


def data_size(source: Obj) -> float:
    """Bytes the populator copies: the twin's `kubetwin.io/data-size` annotation (it cannot list the bucket)."""
    raw = ((source.get("metadata") or {}).get("annotations") or {}).get(DATA_SIZE)
    return float(parse_quantity(str(raw))) if raw else 0.0


def transfer_rate(store: Store, pvc: Obj) -> tuple[float, str] | None:
    """Bytes/s the populator fills this claim's volume at, with a description; None for a destination the GKE
    Volume Populator does not support (only Parallelstore and Hyperdisk ML)."""
    sc = class_of(store, claim_class(pvc)) or {}
    params = sc.get("parameters") or {}
    if "parallelstore" in str(sc.get("provisioner", "")):
        return PARALLELSTORE_GCS_GIBPS * GIB, f"Parallelstore import ({PARALLELSTORE_GCS_GIBPS:g} GiB/s)"
    if params.get("type") == "hyperdisk-ml":
        mibps = hdml_mibps(params)
        return mibps * MIB, f"Hyperdisk ML at its provisioned {mibps:.0f} MiB/s (twin assumption)"
    return None


def _populated(pvc: Obj) -> dict | None:
    ref = (pvc.get("spec") or {}).get("dataSourceRef") or {}
    return ref if ref.get("apiGroup") == POPULATOR_GROUP and ref.get("kind") == POPULATOR_KIND else None


class PersistentVolumeController:
    """The PV controller's claim and volume syncs, the external provisioners, and the GKE Volume Populator."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self.waiting: dict[tuple[str, str], list[str]] = {}  # (ns, source name) -> claims waiting for it
        self.transfers: dict[str, tuple[float, float]] = {}  # claim uid -> (start, seconds): for reports and tests
        self._reported: dict[str, str] = {}  # claim uid -> the last reason recorded for it while unbound
        self._queued: set[tuple[str, str]] = set()
        store.admit(self._admit_claim, ("PersistentVolumeClaim",))
        store.admit(_admit_volume, ("PersistentVolume",))
        store.watch("PersistentVolumeClaim", self._on_claim)
        store.watch("PersistentVolume", self._on_volume)
        store.watch("StorageClass", self._on_class)
        store.watch(POPULATOR_KIND, self._on_source)

    def _admit_claim(self, pvc: Obj) -> Obj:
        """The DefaultStorageClass admission plugin: a claim with no storageClassName gets the default class (the
        API server's defaults, phase Pending and volumeMode Filesystem, come first: api.defaults)."""
        spec = pvc.get("spec") or {}
        if "storageClassName" not in spec and BETA_STORAGE_CLASS not in (pvc["metadata"].get("annotations") or {}):
            default = default_class(self.store)
            if default:
                return {**pvc, "metadata": _protected(pvc["metadata"], PVC_PROTECTION),
                        "spec": {**spec, "storageClassName": default}}
        return {**pvc, "metadata": _protected(pvc["metadata"], PVC_PROTECTION)}

    # -- watches: enqueue only ------------------------------------------------------------------
    def _on_claim(self, etype: str, pvc: Obj, old: Obj | None) -> None:
        if etype == "DELETED":
            uid = pvc["metadata"]["uid"]
            self._reported.pop(uid, None)
            self.env.after(0, lambda: self._reclaim(uid))
            return
        if not is_bound(pvc):
            self._enqueue(_ns(pvc), pvc["metadata"]["name"])

    def _on_volume(self, etype: str, pv: Obj, old: Obj | None) -> None:
        """A new or changed volume: sync it (Pending -> Available), and retry the claims still unbound."""
        if etype == "DELETED":
            return
        name = pv["metadata"]["name"]
        if etype == "ADDED":
            self.env.after(0, lambda: self._sync_volume(name))
        self._resync_unbound()

    def _on_class(self, etype: str, cls: Obj, old: Obj | None) -> None:
        if etype == "ADDED":
            self._resync_unbound()  # the controller's periodic resync (15 s) finds it; the twin at once

    def _resync_unbound(self) -> None:
        for pvc in self.store.list("PersistentVolumeClaim"):
            if not is_bound(pvc):
                self._enqueue(_ns(pvc), pvc["metadata"]["name"])

    def _enqueue(self, ns: str, name: str) -> None:
        if (ns, name) not in self._queued:
            self._queued.add((ns, name))
            self.env.after(0, lambda: self._sync_claim(ns, name))

    # -- syncs ----------------------------------------------------------------------------------
    def _reclaim(self, uid: str) -> None:
        """syncVolume for a volume whose claim is gone: Released; a dynamically provisioned one with reclaim
        policy Delete is deleted (the provisioner deletes the disk; twin: at once)."""
        for pv in self.store.list("PersistentVolume"):
            if ((pv.get("spec") or {}).get("claimRef") or {}).get("uid") != uid:
                continue
            if (pv.get("status") or {}).get("phase") != "Released":  # syncVolume: its claim is gone
                pv = self.store.update({**pv, "status": {**(pv.get("status") or {}), "phase": "Released"}})
            if (pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete"
                    and PROVISIONED_BY in (pv["metadata"].get("annotations") or {})):
                self.store.delete("PersistentVolume", "", pv["metadata"]["name"])  # reclaimVolume: deleteVolume

    def _sync_volume(self, name: str) -> None:
        """syncVolume for a new volume: unclaimed or pre-bound (claimRef without uid) is Available."""
        pv = self.store.get("PersistentVolume", "", name)
        if pv is None or (pv.get("status") or {}).get("phase") != "Pending":
            return
        ref = (pv.get("spec") or {}).get("claimRef")
        if not ref or not ref.get("uid"):
            self.store.update({**pv, "status": {**(pv.get("status") or {}), "phase": "Available"}})

    def _sync_claim(self, ns: str, name: str) -> None:
        self._queued.discard((ns, name))
        pvc = self.store.get("PersistentVolumeClaim", ns, name)
        if pvc is None or is_bound(pvc):
            return
        uid = pvc["metadata"]["uid"]
        if uid in self.transfers or any(name in w for (wns, _), w in self.waiting.items() if wns == ns):
            return  # the populator has it
        ref = _populated(pvc)
        if ref is not None:
            self._start(pvc, ref)
            return
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if volume_name:
            self._sync_prebound_claim(pvc, volume_name)
            return
        delay = delay_binding(self.store, pvc)
        pv = find_match(self.store.list("PersistentVolume"), pvc, delay)
        if pv is not None:
            self.bind(pv, pvc)
            return
        annotations = pvc["metadata"].get("annotations") or {}
        cls_name = claim_class(pvc)
        if delay and SELECTED_NODE not in annotations:
            self._report(pvc, "Normal", "WaitForFirstConsumer", WAIT_MESSAGE)
        elif cls_name:
            self._provision(pvc, cls_name)
        else:
            self._report(pvc, "Normal", "FailedBinding", NO_CLASS_MESSAGE)

    def _sync_prebound_claim(self, pvc: Obj, volume_name: str) -> None:
        """A claim that names its volume (syncUnboundClaim, spec.volumeName set)."""
        pv = self.store.get("PersistentVolume", "", volume_name)
        if pv is None:
            return  # "requested and not found, will try again next time": Pending
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref and not _bound_to(pv, pvc):  # claimed by another claim: Pending, retried
            if BOUND_BY_CONTROLLER not in (pvc["metadata"].get("annotations") or {}):
                self._report(pvc, "Warning", "FailedBinding", f'volume "{volume_name}" already bound to a different '
                             "claim.")
            return
        why = mismatch(pv, pvc) if not ref else None
        if why is not None:
            self._report(pvc, "Warning", "VolumeMismatch", f'Cannot bind to requested volume "{volume_name}": {why}')
            return
        self.bind(pv, pvc)

    def _report(self, pvc: Obj, etype: str, reason: str, message: str, source: str = PV_CONTROLLER) -> None:
        """An event on the claim, once while it stays the claim's state (see the module docstring)."""
        uid = pvc["metadata"]["uid"]
        if self._reported.get(uid) != f"{reason}\0{message}":
            self._reported[uid] = f"{reason}\0{message}"
            self.events.event(pvc, etype, reason, message, source)

    def _provision(self, pvc: Obj, cls_name: str) -> None:
        """provisionClaim: the class's provisioner creates a volume for the claim, which is then bound."""
        cls = class_of(self.store, cls_name)
        if cls is None:
            self._report(pvc, "Warning", "ProvisioningFailed", f'storageclass.storage.k8s.io "{cls_name}" not found')
            return
        provisioner = str(cls.get("provisioner") or "")
        if provisioner == NO_PROVISIONER:  # local volumes: nothing provisions them; the claim waits for a volume
            # provisionClaimOperation: findProvisionablePlugin finds no in-tree plugin for a kubernetes.io/ name
            # (VolumePluginMgr.FindPluginByName's error), every resync; the twin records it once
            self._report(pvc, "Warning", "ProvisioningFailed", f"no volume plugin matched name: {provisioner}")
            return
        external = MIGRATED_PROVISIONERS.get(provisioner, provisioner)
        meta, spec = pvc["metadata"], pvc.get("spec") or {}
        refused = provisioning_error(external, list(spec.get("accessModes") or []),
                                     str(spec.get("volumeMode") or "Filesystem"), spec.get("selector") is not None)
        failed = f'failed to provision volume with StorageClass "{cls_name}": {refused}'
        if refused is not None and self._reported.get(meta["uid"]) == f"ProvisioningFailed\0{failed}":
            return  # already reported: csi-provisioner retries with backoff, the claim stays Pending
        annotations = {**(meta.get("annotations") or {}), STORAGE_PROVISIONER: external,
                       BETA_STORAGE_PROVISIONER: external}
        if annotations != meta.get("annotations"):  # written once: a claim update requeues the claim
            pvc = self.store.update({**pvc, "metadata": {**meta, "annotations": annotations}})
            meta = pvc["metadata"]
        self._report(pvc, "Normal", "ExternalProvisioning", "Waiting for a volume to be created either by the "
                     f"external provisioner '{external}' or manually by the system administrator. If volume "
                     "creation is delayed, please verify that the provisioner is running and correctly registered.")
        key = f"{_ns(pvc)}/{meta['name']}"
        self.events.event(pvc, "Normal", "Provisioning",
                          f'External provisioner is provisioning volume for claim "{key}"', external)
        if refused is not None:
            self._report(pvc, "Warning", "ProvisioningFailed", failed, external)
            return
        pv = self.provision(pvc, cls, external)
        self.events.event(pvc, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume "
                          f"{pv['metadata']['name']}", external)
        self.bind(pv, pvc)

    def provision(self, pvc: Obj, cls: Obj, provisioner: str) -> Obj:
        """The external provisioner's volume (csi-provisioner): pvc-<claim uid>, the claim's access modes, mode and
        requested size, the class's reclaim policy, pre-bound to the claim."""
        spec, meta = pvc.get("spec") or {}, pvc["metadata"]
        requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
        pv_spec: dict = {
            "accessModes": list(spec.get("accessModes") or []), "capacity": {"storage": requested},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": meta["name"],
                         "namespace": _ns(pvc), "uid": meta["uid"]},
            "persistentVolumeReclaimPolicy": cls.get("reclaimPolicy") or "Delete",
            "storageClassName": claim_class(pvc), "volumeMode": spec.get("volumeMode") or "Filesystem",
            "csi": {"driver": provisioner, "volumeHandle": f"pvc-{meta['uid']}"}}
        return self.store.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {
            "name": f"pvc-{meta['uid']}", "annotations": {PROVISIONED_BY: provisioner}},
            "spec": pv_spec, "status": {"phase": "Pending"}})

    def bind(self, pv: Obj, pvc: Obj) -> Obj:
        """ctrl.bind: the volume's claimRef and phase Bound, then the claim's volumeName, phase Bound, and the
        volume's capacity and access modes in its status."""
        meta, spec = pvc["metadata"], pvc.get("spec") or {}
        ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": meta["name"], "namespace": _ns(pvc),
               "uid": meta["uid"]}
        pv_meta = pv["metadata"]
        if not _bound_to(pv, pvc) or not ((pv.get("spec") or {}).get("claimRef") or {}).get("uid"):
            if not (pv.get("spec") or {}).get("claimRef"):
                pv_meta = {**pv_meta, "annotations": {**(pv_meta.get("annotations") or {}), BOUND_BY_CONTROLLER: "yes"}}
            pv = {**pv, "metadata": pv_meta, "spec": {**(pv.get("spec") or {}), "claimRef": ref}}
        pv = self.store.update({**pv, "status": {**(pv.get("status") or {}), "phase": "Bound"}})
        pv_spec = pv.get("spec") or {}
        annotations = {**(meta.get("annotations") or {}), BIND_COMPLETED: "yes"}
        if not spec.get("volumeName"):
            annotations[BOUND_BY_CONTROLLER] = "yes"
        status = {**(pvc.get("status") or {}), "phase": "Bound", "accessModes": list(pv_spec.get("accessModes") or []),
                  "capacity": dict(pv_spec.get("capacity") or {})}
        self._reported.pop(meta["uid"], None)
        return self.store.update({**pvc, "metadata": {**meta, "annotations": annotations},
                                  "spec": {**spec, "volumeName": pv["metadata"]["name"]}, "status": status})

    # -- the GKE Volume Populator ---------------------------------------------------------------
    def _on_source(self, etype: str, source: Obj, old: Obj | None) -> None:
        """A GCPDataSource created after its claim: queue the start of the claims that wait for it."""
        if etype == "ADDED":
            ns, name = _ns(source), source["metadata"]["name"]
            self.env.after(0, lambda: self._source_added(ns, name))

    def _source_added(self, ns: str, name: str) -> None:
        for claim in self.waiting.pop((ns, name), []):
            pvc = self.store.get("PersistentVolumeClaim", ns, claim)
            if pvc is not None and not is_bound(pvc):
                self._start(pvc, _populated(pvc) or {})

    def _start(self, pvc: Obj, ref: dict) -> None:
        ns = _ns(pvc)
        source = self.store.get(POPULATOR_KIND, ns, ref.get("name", ""))
        if source is None:  # lib-volume-populator waits for the data source; the message is the twin's
            self.waiting.setdefault((ns, ref.get("name", "")), []).append(pvc["metadata"]["name"])
            self.events.event(pvc, "Warning", "PopulatorDataSourceNotFound",
                              f'GCPDataSource "{ref.get("name", "")}" not found in namespace {ns}', SOURCE)
            return
        rate = transfer_rate(self.store, pvc)
        if rate is None:
            self._report(pvc, "Warning", "PopulateOperationStartError", "GKE Volume Populator copies from Cloud "
                         "Storage to Parallelstore or Hyperdisk ML only; the claim stays Pending")
            return
        seconds = data_size(source) / rate[0]
        self.transfers[pvc["metadata"]["uid"]] = (self.env.now, seconds)
        self.events.event(pvc, "Normal", STARTED, "populateFn: Populate operation started", SOURCE)
        uid = pvc["metadata"]["uid"]
        self.env.after(seconds, lambda: self._finish(ns, pvc["metadata"]["name"], uid))

    def _finish(self, ns: str, name: str, uid: str) -> None:
        pvc = self.store.get("PersistentVolumeClaim", ns, name)
        if pvc is None or pvc["metadata"].get("uid") != uid:  # deleted (or re-created) during the transfer
            return
        self.events.event(pvc, "Normal", FINISHED_OP, "Populate operation finished", SOURCE)
        cls = class_of(self.store, claim_class(pvc)) or {}
        provisioner = str(cls.get("provisioner") or "")
        pvc = self.bind(self.provision(pvc, cls, MIGRATED_PROVISIONERS.get(provisioner, provisioner)), pvc)
        self.events.event(pvc, "Normal", FINISHED, "Populator finished", SOURCE)


def _admit_volume(pv: Obj) -> Obj:
    """StorageObjectInUseProtection's finalizer (SetDefaults_PersistentVolume's fields come first: api.defaults)."""
    return {**pv, "metadata": _protected(pv["metadata"], PV_PROTECTION)}


# StorageObjectInUseProtection (plugin/pkg/admission/storage/storageobjectinuseprotection, on by default) gives every
# new claim and volume a finalizer; the pvc-protection and pv-protection controllers (pkg/controller/volume/
# pvcprotection, pvprotection) remove it once nothing uses the object, and only then does a delete remove it.
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"


def _protected(meta: dict, finalizer: str) -> dict:
    finalizers = list(meta.get("finalizers") or [])
    return meta if finalizer in finalizers else {**meta, "finalizers": [*finalizers, finalizer]}


def _without(obj: Obj, finalizer: str) -> Obj:
    meta = obj["metadata"]
    return {**obj, "metadata": {**meta, "finalizers": [f for f in meta.get("finalizers") or [] if f != finalizer]}}


def claim_volumes(pod: Obj) -> list[tuple[str, str]]:
    """(pod volume name, claim name) of the pod's persistentVolumeClaim volumes (generic ephemeral volumes are not
    modelled): the one reading of a pod's claims the PV, attach/detach and protection controllers, the kubelet and
    the scheduler's VolumeBinding share."""
    return [(v.get("name", ""), v["persistentVolumeClaim"].get("claimName", ""))
            for v in pod["spec"].get("volumes") or () if "persistentVolumeClaim" in v]


def pod_claims(pod: Obj) -> list[str]:
    """The PersistentVolumeClaims the pod's volumes name (volumebinding podHasPVCs)."""
    return [claim for _, claim in claim_volumes(pod)]


def pod_uses_claim(pod: Obj, claim: str) -> bool:
    """pvcprotection podUsesPVC: a scheduled pod (any phase: a Succeeded pod still holds it) naming the claim."""
    return bool(pod["spec"].get("nodeName")) and claim in pod_claims(pod)


class StorageProtectionController:
    """The pvc-protection and pv-protection controllers: a deleted claim goes once no scheduled pod of its
    namespace names it; a deleted volume once it is not Bound. The store honours these kinds' finalizers
    (store.honor_finalizers), so a delete only marks them (kubectl: Terminating) until then."""

    def __init__(self, store: Store, env: Environment) -> None:
        self.store, self.env = store, env
        store.honor_finalizers("PersistentVolumeClaim", "PersistentVolume")
        store.watch("PersistentVolumeClaim", self._on_claim)
        store.watch("PersistentVolume", self._on_volume)
        store.watch("Pod", self._on_pod)

    def _on_claim(self, etype: str, pvc: Obj, old: Obj | None) -> None:
        if etype == "MODIFIED" and pvc["metadata"].get("deletionTimestamp"):
            ns, name = _ns(pvc), pvc["metadata"]["name"]
            self.env.after(0, lambda: self._sync_claim(ns, name))

    def _on_volume(self, etype: str, pv: Obj, old: Obj | None) -> None:
        if etype == "MODIFIED" and pv["metadata"].get("deletionTimestamp"):
            name = pv["metadata"]["name"]
            self.env.after(0, lambda: self._sync_volume(name))

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        """A pod that goes may free the terminating claims it named."""
        if etype == "DELETED" and pod["spec"].get("nodeName"):
            ns = _ns(pod)
            for claim in pod_claims(pod):
                if claim:
                    self.env.after(0, partial(self._sync_claim, ns, claim))

    def _sync_claim(self, ns: str, name: str) -> None:
        pvc = self.store.get("PersistentVolumeClaim", ns, name)
        if (pvc is None or not pvc["metadata"].get("deletionTimestamp")
                or PVC_PROTECTION not in (pvc["metadata"].get("finalizers") or ())):
            return
        if not any(pod_uses_claim(p, name) for p in self.store.list("Pod", ns)):
            self.store.update(_without(pvc, PVC_PROTECTION))

    def _sync_volume(self, name: str) -> None:
        pv = self.store.get("PersistentVolume", "", name)
        if (pv is None or not pv["metadata"].get("deletionTimestamp")
                or PV_PROTECTION not in (pv["metadata"].get("finalizers") or ())):
            return
        if (pv.get("status") or {}).get("phase") != "Bound":  # pvprotection isBeingUsed: Bound volumes are in use
            self.store.update(_without(pv, PV_PROTECTION))

"""PersistentVolumeClaim binding, and the GKE Volume Populator filling a claim from Cloud Storage.

Why this exists: a training pod whose dataset is pre-loaded by the GKE Volume Populator cannot start until the
copy from Cloud Storage is done, and that wait is part of the job's start-up time.

- A claim without `spec.dataSourceRef` (or with one the twin does not model) is Bound as soon as it is created:
  the twin does not model provisioning delays (the CSI provisioner creating the disk or instance), so its time
  goes to zero.
- A claim whose `dataSourceRef` is a GKE Volume Populator `GCPDataSource` (apiGroup `datalayer.gke.io`; spec
  `cloudStorage.uri` / `cloudStorage.serviceAccountName`,
  https://cloud.google.com/kubernetes-engine/docs/reference/crds/gcpdatasource) stays Pending while the data is
  copied, then becomes Bound ("It copies data from the specified Cloud Storage bucket URI into the underlying
  persistent storage volume before making the volume available to your Pods",
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
- Not modelled: WaitForFirstConsumer (the twin treats every claim as Immediate, so a populated claim blocks
  scheduling instead of holding the scheduled pod's containers), capacity checks, PersistentVolume objects.
"""

from __future__ import annotations

from kubetwin.api.units import parse_quantity
from kubetwin.catalog import GIB, MIB
from kubetwin.catalog.storage import hdml_mibps
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

POPULATOR_GROUP, POPULATOR_KIND = "datalayer.gke.io", "GCPDataSource"
DATA_SIZE = "kubetwin.io/data-size"
SOURCE = "gkevolumepopulator-populator"  # the event source in GKE's describe output
PARALLELSTORE_GCS_GIBPS = 20.0  # Parallelstore <-> Cloud Storage, large files (parallelstore/docs/overview)
STARTED, FINISHED_OP, FINISHED = "PopulateOperationStartSuccess", "PopulateOperationFinished", "PopulatorFinished"


def _ns(obj: Obj) -> str:
    return obj["metadata"].get("namespace") or "default"


def data_size(source: Obj) -> float:
    """Bytes the populator copies: the twin's `kubetwin.io/data-size` annotation (it cannot list the bucket)."""
    raw = ((source.get("metadata") or {}).get("annotations") or {}).get(DATA_SIZE)
    return float(parse_quantity(str(raw))) if raw else 0.0


def transfer_rate(store: Store, pvc: Obj) -> tuple[float, str] | None:
    """Bytes/s the populator fills this claim's volume at, with a description; None for a destination the GKE
    Volume Populator does not support (only Parallelstore and Hyperdisk ML)."""
    cls = (pvc.get("spec") or {}).get("storageClassName") or ""
    sc = store.get("StorageClass", "", cls) or {}
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


def _pending(pvc: Obj) -> Obj:
    """The API server's default (core/v1 defaults.go SetDefaults_PersistentVolumeClaim): status.phase Pending."""
    status = pvc.get("status") or {}
    return pvc if status.get("phase") else {**pvc, "status": {**status, "phase": "Pending"}}


class PersistentVolumeClaimController:
    """Binds claims (the PV controller's end result) and runs the GKE Volume Populator's transfers."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self.waiting: dict[tuple[str, str], list[str]] = {}  # (ns, source name) -> claims waiting for it
        self.transfers: dict[str, tuple[float, float]] = {}  # claim uid -> (start, seconds): for reports and tests
        store.admit(_pending, ("PersistentVolumeClaim",))
        store.watch("PersistentVolumeClaim", self._on_claim)
        store.watch(POPULATOR_KIND, self._on_source)

    def _on_claim(self, etype: str, pvc: Obj, old: Obj | None) -> None:
        """A new claim is queued: binding and populating are the controllers' work, not the handler's."""
        if etype != "ADDED" or (pvc.get("status") or {}).get("phase") == "Bound":
            return
        ns, name, uid = _ns(pvc), pvc["metadata"]["name"], pvc["metadata"]["uid"]
        self.env.after(0, lambda: self._sync_claim(ns, name, uid))

    def _sync_claim(self, ns: str, name: str, uid: str) -> None:
        pvc = self.store.get("PersistentVolumeClaim", ns, name)
        if pvc is None or pvc["metadata"].get("uid") != uid or (pvc.get("status") or {}).get("phase") == "Bound":
            return
        ref = _populated(pvc)
        if ref is None:
            self._bind(pvc)
        else:
            self._start(pvc, ref)

    def _on_source(self, etype: str, source: Obj, old: Obj | None) -> None:
        """A GCPDataSource created after its claim: queue the start of the claims that wait for it."""
        if etype == "ADDED":
            ns, name = _ns(source), source["metadata"]["name"]
            self.env.after(0, lambda: self._source_added(ns, name))

    def _source_added(self, ns: str, name: str) -> None:
        for claim in self.waiting.pop((ns, name), []):
            pvc = self.store.get("PersistentVolumeClaim", ns, claim)
            if pvc is not None and (pvc.get("status") or {}).get("phase") != "Bound":
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
            self.events.event(pvc, "Warning", "PopulateOperationStartError", "GKE Volume Populator copies from Cloud "
                              "Storage to Parallelstore or Hyperdisk ML only; the claim stays Pending", SOURCE)
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
        pvc = self._bind(pvc)
        self.events.event(pvc, "Normal", FINISHED, "Populator finished", SOURCE)

    def _bind(self, pvc: Obj) -> Obj:
        """status.phase Bound with the volume the provisioner would have created (pvc-<uid>, as the external
        provisioner names it) and the requested capacity."""
        spec = pvc.get("spec") or {}
        requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        status = {**(pvc.get("status") or {}), "phase": "Bound", "accessModes": spec.get("accessModes") or []}
        if requested is not None:
            status["capacity"] = {"storage": requested}
        volume = spec.get("volumeName") or f"pvc-{pvc['metadata']['uid']}"
        return self.store.update({**pvc, "spec": {**spec, "volumeName": volume}, "status": status})

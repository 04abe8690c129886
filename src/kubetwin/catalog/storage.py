"""Storage facts controllers below the runtime models need: Hyperdisk ML's provisioned throughput (the GKE Volume
Populator fills a Hyperdisk ML volume at that rate; workloads.storage reads through it)."""

from __future__ import annotations

from kubetwin.catalog import MIB
from kubetwin.k8s.units import parse_quantity

# Hyperdisk ML: throughput is provisioned per volume, 400 MiB/s minimum, shared by every reader attached read-only
# (https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-ml via catalog_draft.yaml storage.hyperdisk_ml).
HDML_MIN_MIBPS = 400


def hdml_mibps(params: dict) -> float:
    """A Hyperdisk ML StorageClass's provisioned throughput (MiB/s), at least HDML_MIN_MIBPS."""
    tput = params.get("provisioned-throughput-on-create")
    return max(float(parse_quantity(str(tput))) / MIB if tput else HDML_MIN_MIBPS, HDML_MIN_MIBPS)


# GKE's built-in StorageClasses. Every GKE cluster has them without a manifest
# (https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/gce-pd-csi-driver: standard-rwo is the
# default class, pd-balanced through the Compute Engine PD CSI driver; premium-rwo is pd-ssd; the legacy `standard`
# is pd-standard through the in-tree kubernetes.io/gce-pd provisioner, migrated to the CSI driver). The *-rwo classes
# bind WaitForFirstConsumer and `standard` Immediate, as GKE installs them (their regional-* variants carry the same
# modes: gist.github.com/damlys/a54c72c819681823e906b699cfb852f4). The twin keeps them implicit, as a cluster has
# them, so a scenario's run folder holds only its own objects: a class the scenario defines with the same name
# replaces the built-in, and a class that is neither is not found.
PD_CSI = "pd.csi.storage.gke.io"
GCE_PD_IN_TREE = "kubernetes.io/gce-pd"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
GKE_DEFAULT_CLASS = "standard-rwo"


def _gke_class(name: str, provisioner: str, disk: str, mode: str, default: bool = False) -> dict:
    meta: dict = {"name": name, "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"}}
    if default:
        meta["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta, "provisioner": provisioner,
            "parameters": {"type": disk}, "reclaimPolicy": "Delete", "volumeBindingMode": mode,
            "allowVolumeExpansion": True}


GKE_STORAGE_CLASSES: dict[str, dict] = {
    "standard-rwo": _gke_class("standard-rwo", PD_CSI, "pd-balanced", "WaitForFirstConsumer", default=True),
    "premium-rwo": _gke_class("premium-rwo", PD_CSI, "pd-ssd", "WaitForFirstConsumer"),
    "standard": _gke_class("standard", GCE_PD_IN_TREE, "pd-standard", "Immediate"),
}
# GKE's Filestore CSI driver add-on (gcloud --addons=GcpFilestoreCsiDriver; addonsConfig.gcpFilestoreCsiDriverConfig)
# installs these classes, and only where it is enabled: Autopilot clusters enable it by default, Standard clusters
# do not (https://cloud.google.com/filestore/docs/csi-driver "Use a StorageClass": standard-rwx Basic HDD,
# premium-rwx Basic SSD, zonal-rwx Zonal, enterprise-rwx Enterprise with one instance per volume,
# enterprise-multishare-rwx Enterprise with one share per volume). Their parameters (tier, network default),
# WaitForFirstConsumer binding and volume expansion are as the guide's custom-class example writes them (twin
# reconstruction of the installed objects). A scenario enables the add-on with Scenario spec.gkeAddons:
# [GcpFilestoreCsiDriver]; the run then creates these classes at its start, as GKE's addon manager does (a class the
# scenario defines with the same name wins), so `kubetwin get sc` lists them as `kubectl get sc` would.
FILESTORE_CSI = "filestore.csi.storage.gke.io"
FILESTORE_ADDON = "GcpFilestoreCsiDriver"


def _filestore_class(name: str, tier: str, **extra: str) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {
        "name": name, "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"}},
        "provisioner": FILESTORE_CSI, "parameters": {"tier": tier, "network": "default", **extra},
        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True}


ADDON_STORAGE_CLASSES: dict[str, dict[str, dict]] = {FILESTORE_ADDON: {
    "standard-rwx": _filestore_class("standard-rwx", "standard"),
    "premium-rwx": _filestore_class("premium-rwx", "premium"),
    "zonal-rwx": _filestore_class("zonal-rwx", "zonal"),
    "enterprise-rwx": _filestore_class("enterprise-rwx", "enterprise"),
    "enterprise-multishare-rwx": _filestore_class("enterprise-multishare-rwx", "enterprise", multishare="true"),
}}


def addon_of_class(name: str) -> str | None:
    """The GKE add-on that installs a StorageClass of this name, None when no add-on does."""
    return next((addon for addon, classes in ADDON_STORAGE_CLASSES.items() if name in classes), None)


# CSI migration (GKE migrates in-tree gce-pd to the PD CSI driver): the external provisioner that serves the class.
MIGRATED_PROVISIONERS = {GCE_PD_IN_TREE: PD_CSI}
# Volumes the attach/detach controller attaches to a node (CSIDriver attachRequired: true): Compute Engine disks
# (PD, Hyperdisk) through the PD CSI driver or the in-tree gcePersistentDisk it migrates. Filestore (NFS),
# Parallelstore, Managed Lustre and Cloud Storage FUSE mount over the network and are never attached
# (their CSIDrivers set attachRequired: false), so the attach/detach controller's Multi-Attach rule does not apply.
ATTACHABLE_DRIVERS = frozenset({PD_CSI, GCE_PD_IN_TREE})


def storage_class(name: str, stored: dict | None) -> dict | None:
    """The StorageClass named `name`: the scenario's own object (`stored`, as the store holds it) or GKE's built-in
    of that name; None when neither exists (the PV controller's `storageclass.storage.k8s.io "x" not found`)."""
    return stored if stored is not None else GKE_STORAGE_CLASSES.get(name)


def binding_mode(cls: dict) -> str:
    """volumeBindingMode, as the API server defaults it (SetDefaults_StorageClass: Immediate)."""
    return str(cls.get("volumeBindingMode") or "Immediate")


def provisioning_error(provisioner: str, access_modes: list[str], volume_mode: str,
                       selector: bool = False) -> str | None:
    """csi-provisioner's refusal to provision a claim, as it reports it, or None. A claim with a label selector is
    never provisioned (kubernetes-csi/external-provisioner pkg/controller/controller.go Provision: "claim Selector
    is not supported"; it binds only a matching volume). The PD CSI driver's CreateVolume refuses ReadWriteMany on
    a filesystem volume (kubernetes-sigs/gcp-compute-persistent-disk-csi-driver pkg/gce-pd-csi-driver utils.go
    validateVolumeCapability: "specified multi writer with mount access type"; multi-writer needs volumeMode
    Block); a shared filesystem needs Filestore, Parallelstore or Lustre."""
    if selector:
        return "claim Selector is not supported"
    if (MIGRATED_PROVISIONERS.get(provisioner, provisioner) == PD_CSI and "ReadWriteMany" in access_modes
            and volume_mode != "Block"):
        return ("rpc error: code = InvalidArgument desc = VolumeCapabilities is invalid: specified multi writer with "
                "mount access type")
    return None

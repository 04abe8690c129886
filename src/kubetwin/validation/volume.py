"""Volume checks: GKE Volume Populator's GCPDataSource (datalayer.gke.io/v1), which has no CRD file here, and
notices for the storage behaviour the twin does not model."""

from __future__ import annotations

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.k8s.units import UnitError, parse_quantity


def gcp_data_source(m: Manifest) -> list[Diagnostic]:
    """GCPDataSource has no CRD file here: check the fields GKE's CRD reference lists (spec.cloudStorage.uri, a gs://
    URI, and serviceAccountName; https://cloud.google.com/kubernetes-engine/docs/reference/crds/gcpdatasource) and
    the twin's `kubetwin.io/data-size` annotation, the data the populator copies (the twin cannot list the bucket)."""
    out: list[Diagnostic] = []
    spec = m.obj.get("spec") or {}
    extra = sorted(set(spec) - {"cloudStorage"}) + [f"cloudStorage.{k}" for k in sorted(set(
        spec.get("cloudStorage") or {}) - {"uri", "serviceAccountName"})]
    for f in extra:
        out.append(Diagnostic(m.file, m.line_of(f"spec.{f}"), m.ref, f"spec.{f}",
                              f'strict decoding error: unknown field "spec.{f}"', "fields: cloudStorage.uri, "
                              "cloudStorage.serviceAccountName"))
    uri = str((spec.get("cloudStorage") or {}).get("uri") or "")
    if not uri.startswith("gs://"):
        out.append(Diagnostic(m.file, m.line_of("spec.cloudStorage.uri"), m.ref, "spec.cloudStorage.uri",
                              f"Invalid value: {uri!r}: must be a gs:// URI", "e.g. gs://my-bucket/my-data/"))
    size = ((m.obj.get("metadata") or {}).get("annotations") or {}).get("kubetwin.io/data-size")
    if size is None:
        out.append(Diagnostic(m.file, m.line, m.ref, "metadata.annotations[kubetwin.io/data-size]",
                              "the twin cannot list the bucket: without kubetwin.io/data-size the transfer copies 0 "
                              "bytes and the claim binds at once", "add kubetwin.io/data-size: 2Ti", "notice"))
    else:
        try:
            parse_quantity(str(size))
        except UnitError as exc:
            out.append(Diagnostic(m.file, m.line, m.ref, "metadata.annotations[kubetwin.io/data-size]",
                                  f"Invalid value: {size!r}: {exc}", "a quantity, e.g. 2Ti or 500Gi"))
    return out


# CSI drivers GKE runs (catalog.storage's classes and the add-ons: Filestore, Parallelstore, Managed Lustre, Cloud
# Storage FUSE), in-tree gce-pd (migrated to the PD CSI driver), and local volumes' no-provisioner.
GKE_PROVISIONERS = frozenset({"pd.csi.storage.gke.io", "kubernetes.io/gce-pd", "filestore.csi.storage.gke.io",
                              "parallelstore.csi.storage.gke.io", "lustre.csi.storage.gke.io",
                              "gcsfuse.csi.storage.gke.io", "kubernetes.io/no-provisioner"})


def storage(m: Manifest) -> list[Diagnostic]:
    """Notices for what the twin's PV controller, volume binder and attach/detach controller do not model, each
    naming what the run does instead (controllers/volumes.py, scheduler/volumebinding.py)."""
    out: list[Diagnostic] = []
    spec = m.obj.get("spec") or {}

    def notice(path: str, message: str) -> None:
        out.append(Diagnostic(m.file, m.line_of(path) if path else m.line, m.ref, path, message, "", "notice"))

    if m.kind == "StorageClass":
        if m.obj.get("allowedTopologies"):
            notice("allowedTopologies", "the twin does not check allowedTopologies: it provisions for whichever "
                   "node the pod is scheduled to")
        provisioner = str(m.obj.get("provisioner") or "")
        if provisioner and provisioner not in GKE_PROVISIONERS:
            notice("provisioner", f"provisioner {provisioner!r} is not a CSI driver GKE runs: the twin assumes it "
                   "is installed and provisions claims of this class at once")
    if m.kind == "PersistentVolumeClaim":
        ref = spec.get("dataSourceRef") or spec.get("dataSource") or {}
        if ref and not (ref.get("apiGroup") == "datalayer.gke.io" and ref.get("kind") == "GCPDataSource"):
            field = "spec.dataSourceRef" if spec.get("dataSourceRef") else "spec.dataSource"
            notice(field, f"the twin does not copy from a {ref.get('kind', 'data source')}: the claim is "
                   "provisioned empty, at once")
    for ref in kinds.pod_templates(m.obj):
        for i, vol in enumerate(ref.spec.get("volumes") or ()):
            if isinstance(vol, dict) and "ephemeral" in vol:
                notice(ref.at(f"spec.volumes[{i}].ephemeral"), "generic ephemeral volumes are not modelled: the "
                       "pod runs without waiting for its claim, and no PersistentVolumeClaim is created")
    return out


def addon_classes(manifests: list[Manifest]) -> list[Diagnostic]:
    """A claim naming a class that only a GKE add-on installs (Filestore's standard-rwx, ...) in a scenario that
    neither enables that add-on (Scenario spec.gkeAddons) nor defines the class: on such a cluster the class does
    not exist, so the claim stays Pending with ProvisioningFailed `storageclass.storage.k8s.io "x" not found`, and
    so do its pods. A warning with both fixes."""
    from kubetwin.catalog.storage import addon_of_class

    scenario = next((m.obj for m in manifests if m.kind == "Scenario"), None) or {}
    enabled = set((scenario.get("spec") or {}).get("gkeAddons") or ())
    defined = {str((m.obj.get("metadata") or {}).get("name")) for m in manifests if m.kind == "StorageClass"}
    out = []
    for m in manifests:
        if m.kind != "PersistentVolumeClaim":
            continue
        name = str((m.obj.get("spec") or {}).get("storageClassName") or "")
        addon = addon_of_class(name)
        if addon is None or addon in enabled or name in defined:
            continue
        out.append(Diagnostic(m.file, m.line_of("spec.storageClassName"), m.ref, "spec.storageClassName",
                              f"StorageClass {name} exists only where GKE's {addon} add-on is enabled (Autopilot "
                              "enables it by default, Standard clusters do not), and this scenario does not enable "
                              f'it: the claim stays Pending (ProvisioningFailed: storageclass.storage.k8s.io "{name}" '
                              "not found) and so do its pods",
                              f"set Scenario spec.gkeAddons: [{addon}] (gcloud container clusters update CLUSTER "
                              f"--update-addons={addon}=ENABLED), or add the StorageClass {name} to the scenario",
                              "warning"))
    return out

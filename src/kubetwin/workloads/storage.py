"""How fast a pod reads a large file (model weights, checkpoints) from the storage its volumes give it.

A volume is resolved the way the kubelet mounts it: a persistentVolumeClaim through its StorageClass (GKE's
built-in classes when the scenario has none), an inline CSI volume (Cloud Storage FUSE), or nothing (the server
downloads from the Hugging Face Hub into the container). Figures come from ../shared/catalog/catalog_draft.yaml
`storage:` with its sources; where Google publishes no number the figure is a twin assumption and says so."""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.api.units import parse_quantity
from kubetwin.store.store import Obj, Store

MIB = 1024 * 1024
GIB = 1024 * MIB

# Persistent Disk: MiB/s per GiB provisioned, and the per-VM read cap
# (https://cloud.google.com/compute/docs/disks/performance via catalog_draft.yaml storage.persistent_disk).
PD_MIBPS_PER_GIB = {"pd-standard": 0.12, "pd-balanced": 0.28, "pd-ssd": 0.48}
PD_READ_MIBPS_PER_VM = {"pd-standard": 1200, "pd-balanced": 1200, "pd-ssd": 1200, "pd-extreme": 4000}
# Per-disk baseline throughput added to the per-GiB figure for pd-balanced (140 MiB/s) and pd-ssd (240 MiB/s)
# (https://cloud.google.com/compute/docs/disks/performance#baseline_performance; not in catalog_draft.yaml).
PD_BASELINE_MIBPS = {"pd-balanced": 140, "pd-ssd": 240}
# Hyperdisk ML: throughput is provisioned per volume, 400 MiB/s minimum, shared by every reader attached read-only
# (https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-ml via catalog_draft.yaml storage.hyperdisk_ml).
HDML_MIN_MIBPS = 400
# Parallelstore: 1.15 GiB/s read per TiB of capacity, 12 TiB minimum
# (https://cloud.google.com/parallelstore/docs/overview via catalog_draft.yaml storage.parallelstore).
PARALLELSTORE_READ_GIBPS_PER_TIB, PARALLELSTORE_MIN_TIB = 1.15, 12
# Filestore read MiB/s per instance by tier (https://cloud.google.com/filestore/docs/performance; the 1-10 TiB
# rows of catalog_draft.yaml storage.filestore, the smallest size of each tier).
FILESTORE_READ_MIBPS = {"standard": 100, "premium": 1200, "zonal": 260, "regional": 120, "enterprise": 120,
                        "basic-hdd": 100, "basic-ssd": 1200}
# Cloud Storage FUSE. Google's benchmark reads 1 GiB files at ~14 GB/s with many parallel readers on a 200 Gbps
# VM (GoogleCloudPlatform/gcsfuse:docs/benchmarks.md@009e2e3); one server process reading its safetensors
# sequentially gets far less. Twin assumption: 800 MB/s without the file cache; the file cache with parallel
# downloads is "up to nine times faster" for model loading
# (https://cloud.google.com/storage/docs/cloud-storage-fuse/file-caching), capped at 14.2 GB/s (the benchmark's).
GCSFUSE_MBPS, GCSFUSE_CACHE_SPEEDUP, GCSFUSE_MAX_MBPS = 800.0, 9.0, 14198.0
# Downloading from the Hugging Face Hub into the container: twin assumption (no published figure), 500 MB/s.
HF_HUB_MBPS = 500.0
# Write rates (checkpoints), ../shared/catalog/catalog_draft.yaml storage: Parallelstore 0.5 GiB/s per TiB
# (https://cloud.google.com/parallelstore/docs/overview); Filestore write MiB/s of the same rows as the read figures
# (https://cloud.google.com/filestore/docs/performance; BASIC_SSD 350, ZONAL_1TiB 88, REGIONAL/ENTERPRISE_1TiB 100,
# BASIC_HDD 100); PD per-VM write caps (https://cloud.google.com/compute/docs/disks/performance; the per-GiB rate
# applies to writes as to reads there); Cloud Storage FUSE sequential write of 1 GiB files, 4624.59 MB/s
# (GoogleCloudPlatform/gcsfuse:docs/benchmarks.md@009e2e3, a c4-standard-192 on a 200 Gbps NIC; a checkpoint shard
# is large and sequential, so the twin uses it per VM). Hyperdisk ML is read-only-many for serving; written once
# while attached read-write at its provisioned throughput (twin assumption). Local SSD writes as it reads (2000 MiB/s,
# twin assumption).
PARALLELSTORE_WRITE_GIBPS_PER_TIB = 0.5
FILESTORE_WRITE_MIBPS = {"standard": 100, "premium": 350, "zonal": 88, "regional": 100, "enterprise": 100,
                         "basic-hdd": 100, "basic-ssd": 350}
PD_WRITE_MIBPS_PER_VM = {"pd-standard": 400, "pd-balanced": 1200, "pd-ssd": 1200, "pd-extreme": 3000}
GCSFUSE_WRITE_MBPS = 4624.59
LOCAL_SSD_MIBPS = 2000
# GKE's built-in StorageClasses (https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/
# gce-pd-csi-driver): standard-rwo = pd-balanced, premium-rwo = pd-ssd, standard = pd-standard.
BUILTIN_CLASSES = {"standard-rwo": "pd-balanced", "premium-rwo": "pd-ssd", "standard": "pd-standard"}


@dataclass(frozen=True)
class ReadPath:
    """Where a file is read from and at what rate (bytes/s); `detail` explains the figure in a describe."""

    kind: str
    bytes_per_second: float
    detail: str

    def seconds(self, nbytes: float) -> float:
        return nbytes / self.bytes_per_second if self.bytes_per_second > 0 else 0.0


HF_HUB = ReadPath("huggingface-hub", HF_HUB_MBPS * 1e6,
                  "download from the Hugging Face Hub (500 MB/s, twin assumption)")


def _mount_volume(spec: dict, container: dict, path: str) -> dict | None:
    """The pod volume mounted at the longest mountPath that contains `path`."""
    best: tuple[int, str] | None = None
    for m in container.get("volumeMounts") or []:
        mp = str(m.get("mountPath", "")).rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) > best[0]:
                best = (len(mp), m.get("name", ""))
    if best is None:
        return None
    return next((v for v in spec.get("volumes") or [] if v.get("name") == best[1]), None)


def _gcsfuse(attrs: dict, write: bool = False) -> ReadPath:
    if write:  # the file cache is a read cache
        return ReadPath("gcsfuse", GCSFUSE_WRITE_MBPS * 1e6, f"Cloud Storage FUSE write ({GCSFUSE_WRITE_MBPS} MB/s)")
    cached = bool(attrs.get("fileCacheCapacity")) and str(attrs.get("fileCacheCapacity")) not in ("0", "0Gi")
    if cached:
        rate = min(GCSFUSE_MBPS * GCSFUSE_CACHE_SPEEDUP, GCSFUSE_MAX_MBPS)
        return ReadPath("gcsfuse-file-cache", rate * 1e6, f"Cloud Storage FUSE with file cache ({rate:.0f} MB/s)")
    return ReadPath("gcsfuse", GCSFUSE_MBPS * 1e6, f"Cloud Storage FUSE without file cache ({GCSFUSE_MBPS:.0f} MB/s)")


def _claim_path(store: Store, ns: str, claim: str, write: bool = False) -> ReadPath:
    pvc = store.get("PersistentVolumeClaim", ns, claim)
    if pvc is None:
        return ReadPath("pd-balanced", 1200 * MIB, f"PersistentVolumeClaim {ns}/{claim} not found; assumed pd-balanced")
    spec = pvc.get("spec") or {}
    size = float(parse_quantity(str(((spec.get("resources") or {}).get("requests") or {}).get("storage", "100Gi"))))
    cls_name = spec.get("storageClassName") or "standard-rwo"
    sc = store.get("StorageClass", "", cls_name)
    provisioner = (sc or {}).get("provisioner", "pd.csi.storage.gke.io")
    params = (sc or {}).get("parameters") or {}
    if "parallelstore" in provisioner:
        tib = max(size / (1024 * GIB), PARALLELSTORE_MIN_TIB)
        if write:
            return ReadPath("parallelstore", PARALLELSTORE_WRITE_GIBPS_PER_TIB * tib * GIB, f"Parallelstore {tib:.0f} "
                            f"TiB write ({PARALLELSTORE_WRITE_GIBPS_PER_TIB} GiB/s per TiB)")
        return ReadPath("parallelstore", PARALLELSTORE_READ_GIBPS_PER_TIB * tib * GIB,
                        f"Parallelstore {tib:.0f} TiB ({PARALLELSTORE_READ_GIBPS_PER_TIB} GiB/s per TiB)")
    if "filestore" in provisioner:
        tier = str(params.get("tier", "standard")).lower()
        mibps = (FILESTORE_WRITE_MIBPS if write else FILESTORE_READ_MIBPS).get(tier, 100)
        return ReadPath("filestore", mibps * MIB, f"Filestore {tier} ({mibps} MiB/s)")
    if "gcsfuse" in provisioner:
        return _gcsfuse(params, write)
    disk = params.get("type") or BUILTIN_CLASSES.get(cls_name, "pd-balanced")
    if disk == "hyperdisk-ml":
        tput = params.get("provisioned-throughput-on-create")
        mibps = max(float(parse_quantity(str(tput))) / MIB if tput else HDML_MIN_MIBPS, HDML_MIN_MIBPS)
        return ReadPath("hyperdisk-ml", mibps * MIB, f"Hyperdisk ML {mibps:.0f} MiB/s provisioned")
    per_gib = PD_MIBPS_PER_GIB.get(disk)
    if per_gib is None:
        return ReadPath(disk, 1200 * MIB, f"{disk}: no figure in the catalog; assumed 1200 MiB/s")
    cap = (PD_WRITE_MIBPS_PER_VM if write else PD_READ_MIBPS_PER_VM).get(disk, 1200)
    mibps = min(PD_BASELINE_MIBPS.get(disk, 0) + per_gib * size / GIB, cap)
    return ReadPath(disk, mibps * MIB, f"{disk} {size / GIB:.0f} GiB ({mibps:.0f} MiB/s)")


def read_path(store: Store, pod: Obj, container: dict, path: str | None) -> ReadPath:
    """How the container reads the file at `path` (None or not under any mount: downloaded from the Hub)."""
    return resolve(store, pod, container, path, False) or HF_HUB


def write_path(store: Store, pod: Obj, container: dict, path: str | None) -> ReadPath | None:
    """How fast the container writes files under `path` (a checkpoint); None when `path` is on no volume we know
    (the caller picks its own default)."""
    return resolve(store, pod, container, path, True)


def resolve(store: Store, pod: Obj, container: dict, path: str | None, write: bool) -> ReadPath | None:
    if not path or not path.startswith("/"):
        return None
    spec = pod.get("spec") or {}
    vol = _mount_volume(spec, container, path)
    if vol is None or "emptyDir" in vol:
        return None
    ns = pod["metadata"].get("namespace") or "default"
    if "persistentVolumeClaim" in vol:
        return _claim_path(store, ns, vol["persistentVolumeClaim"].get("claimName", ""), write)
    csi = vol.get("csi") or {}
    if "gcsfuse" in str(csi.get("driver", "")):
        return _gcsfuse(csi.get("volumeAttributes") or {}, write)
    if "hostPath" in vol:
        return ReadPath("local-ssd", LOCAL_SSD_MIBPS * MIB, "hostPath (local SSD assumed, 2000 MiB/s, twin assumption)")
    return None

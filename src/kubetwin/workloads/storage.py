"""How fast a pod reads a large file (model weights, checkpoints) from the storage its volumes give it.

A volume is resolved the way the kubelet mounts it: a persistentVolumeClaim through its StorageClass (GKE's
built-in classes when the scenario has none), an inline CSI volume (Cloud Storage FUSE), or nothing (the server
downloads from the Hugging Face Hub into the container). Figures come from ../shared/catalog/catalog_draft.yaml
`storage:` with its sources; where Google publishes no number the figure is a twin assumption and says so."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from kubetwin.catalog import GIB, MIB
from kubetwin.catalog.storage import GKE_DEFAULT_CLASS, PD_CSI, hdml_mibps, storage_class
from kubetwin.k8s.units import parse_quantity
from kubetwin.store.store import Obj, Store

# Persistent Disk: MiB/s per GiB provisioned, and the per-VM read cap
# (https://cloud.google.com/compute/docs/disks/performance via catalog_draft.yaml storage.persistent_disk).
PD_MIBPS_PER_GIB = {"pd-standard": 0.12, "pd-balanced": 0.28, "pd-ssd": 0.48}
PD_READ_MIBPS_PER_VM = {"pd-standard": 1200, "pd-balanced": 1200, "pd-ssd": 1200, "pd-extreme": 4000}
# Per-disk baseline throughput added to the per-GiB figure for pd-balanced (140 MiB/s) and pd-ssd (240 MiB/s)
# (https://cloud.google.com/compute/docs/disks/performance#baseline_performance; not in catalog_draft.yaml).
PD_BASELINE_MIBPS = {"pd-balanced": 140, "pd-ssd": 240}
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
# Per-file cost of small files (training.kubetwin.io/dataset-files-per-step). One read operation per file is a twin
# assumption and a lower bound (an NFS/DFS open also costs LOOKUP/GETATTR round trips).
# Parallelstore: 30,000 read IOPS per TiB, for the whole instance (https://cloud.google.com/parallelstore/docs/overview
# via catalog_draft.yaml storage.parallelstore read_iops_per_tib).
PARALLELSTORE_READ_IOPS_PER_TIB = 30000
# Filestore read IOPS per instance, the same rows as FILESTORE_READ_MIBPS (https://cloud.google.com/filestore/docs/
# performance via catalog_draft.yaml storage.filestore: BASIC_HDD 600, BASIC_SSD 60,000, ZONAL_1TiB 9,200,
# REGIONAL_1TiB and ENTERPRISE_1TiB 12,000).
FILESTORE_READ_IOPS = {"standard": 600, "premium": 60000, "zonal": 9200, "regional": 12000, "enterprise": 12000,
                       "basic-hdd": 600, "basic-ssd": 60000}
# Cloud Storage FUSE files per second per VM: Google's benchmark reads 128 KiB files sequentially at 1,303.87 MB/s
# with parallel readers (GoogleCloudPlatform/gcsfuse:docs/benchmarks.md@009e2e3 via catalog_draft.yaml
# storage.gcs_fuse seq_read_mbps) = 1,303.87e6 / 131,072 = 9,948 files/s, bound by per-file open and first-byte
# latency, not bandwidth (its 1 GiB files reach 14,198 MB/s). The file cache does not help the first read.
GCSFUSE_FILES_PER_S = 1303.87e6 / (128 * 1024)
# Per-VM caps on reads. A network file system or bucket cannot be read faster than the VM's general-purpose NIC:
# 200 Gbps primary gVNIC on A3 8g/A3 Mega/A3 Ultra/A4/A4X, 100 Gbps on A2/G2/N1 and smaller A3 (catalog
# data/network.yaml tiers tcp_fallback and gvnic, node_line_gbs, with their sources); other machines 100 Gbps (twin
# assumption). GPUDirect NICs carry GPU-to-GPU traffic only and are not counted.
NETWORK_STORES = ("gcsfuse", "gcsfuse-file-cache", "parallelstore", "filestore")
DEFAULT_NIC_GBPS = 100.0
# Hyperdisk ML read throughput one VM can reach ("Hyperdisk volumes can't reach the provisioned performance unless
# the compute instance supports that level", https://cloud.google.com/compute/docs/disks/hyperdisk-perf-limits).
# The per-machine-type figures were not in the sources this session could read (catalog_draft.yaml:
# "per_vm_cap ... not captured"), so these are TWIN ASSUMPTIONS per family: 4,000 MiB/s for A3/A4/A4X (8-GPU VMs),
# 2,400 MiB/s for A2, G2 and everything else. Replace with the perf-limits table when it is read.
HDML_PER_VM_MIBPS = {"a3": 4000, "a4": 4000, "a4x": 4000, "a2": 2400, "g2": 2400}
HDML_PER_VM_DEFAULT_MIBPS = 2400


@dataclass(frozen=True)
class ReadPath:
    """Where a file is read from and at what rate (bytes/s); `detail` explains the figure in a describe."""

    kind: str
    bytes_per_second: float
    detail: str
    files_per_second: float = 0.0  # small-file operations/s (same scope as bytes_per_second); 0: no per-file cost

    def seconds(self, nbytes: float) -> float:
        return nbytes / self.bytes_per_second if self.bytes_per_second > 0 else 0.0


def nic_bytes_per_second(machine_type: str) -> float:
    """The VM's general-purpose NIC in bytes/s: the most it reads from network storage (see NETWORK_STORES)."""
    from kubetwin.workloads import network  # lazy: network.py loads the catalog

    tiers = network.data()["tiers"]
    for name in ("tcp_fallback", "gvnic"):  # the primary NIC's line rate of GPUDirect-capable and other GPU VMs
        if any(fnmatch.fnmatch(machine_type, pat) for pat in tiers[name]["machines"]):
            return float(tiers[name]["node_line_gbs"]) * 1e9
    return DEFAULT_NIC_GBPS / 8 * 1e9


def per_vm_read_cap(path: ReadPath, machine_type: str) -> float | None:
    """Bytes/s one VM of `machine_type` can read from `path` at most, whatever the store offers; None: no cap here
    (PD's per-VM caps and local SSD are already in the path's own rate)."""
    if path.kind in NETWORK_STORES:
        return nic_bytes_per_second(machine_type)
    if path.kind == "hyperdisk-ml":
        family = machine_type.split("-")[0]
        return HDML_PER_VM_MIBPS.get(family, HDML_PER_VM_DEFAULT_MIBPS) * MIB
    return None


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
        return ReadPath("gcsfuse-file-cache", rate * 1e6, f"Cloud Storage FUSE with file cache ({rate:.0f} MB/s)",
                        GCSFUSE_FILES_PER_S)
    return ReadPath("gcsfuse", GCSFUSE_MBPS * 1e6, f"Cloud Storage FUSE without file cache ({GCSFUSE_MBPS:.0f} MB/s)",
                    GCSFUSE_FILES_PER_S)


def _claim_path(store: Store, ns: str, claim: str, write: bool = False) -> ReadPath:
    pvc = store.get("PersistentVolumeClaim", ns, claim)
    if pvc is None:
        return ReadPath("pd-balanced", 1200 * MIB, f"PersistentVolumeClaim {ns}/{claim} not found; assumed pd-balanced")
    spec = pvc.get("spec") or {}
    size = float(parse_quantity(str(((spec.get("resources") or {}).get("requests") or {}).get("storage", "100Gi"))))
    cls_name = spec.get("storageClassName") or GKE_DEFAULT_CLASS  # GKE's built-in classes: catalog.storage
    sc = storage_class(cls_name, store.get("StorageClass", "", cls_name))
    provisioner = (sc or {}).get("provisioner", PD_CSI)
    params = (sc or {}).get("parameters") or {}
    if "parallelstore" in provisioner:
        tib = max(size / (1024 * GIB), PARALLELSTORE_MIN_TIB)
        if write:
            return ReadPath("parallelstore", PARALLELSTORE_WRITE_GIBPS_PER_TIB * tib * GIB, f"Parallelstore {tib:.0f} "
                            f"TiB write ({PARALLELSTORE_WRITE_GIBPS_PER_TIB} GiB/s per TiB)")
        return ReadPath("parallelstore", PARALLELSTORE_READ_GIBPS_PER_TIB * tib * GIB,
                        f"Parallelstore {tib:.0f} TiB ({PARALLELSTORE_READ_GIBPS_PER_TIB} GiB/s, "
                        f"{PARALLELSTORE_READ_IOPS_PER_TIB} read IOPS per TiB)", PARALLELSTORE_READ_IOPS_PER_TIB * tib)
    if "filestore" in provisioner:
        tier = str(params.get("tier", "standard")).lower()
        mibps = (FILESTORE_WRITE_MIBPS if write else FILESTORE_READ_MIBPS).get(tier, 100)
        iops = 0.0 if write else FILESTORE_READ_IOPS.get(tier, 600)
        return ReadPath("filestore", mibps * MIB, f"Filestore {tier} ({mibps} MiB/s)", iops)
    if "gcsfuse" in provisioner:
        return _gcsfuse(params, write)
    disk = params.get("type") or "pd-balanced"
    if disk == "hyperdisk-ml":
        mibps = hdml_mibps(params)
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

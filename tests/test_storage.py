"""Each storage option a pod can read its weights or dataset from, and write its checkpoints to, resolved the way the
kubelet mounts it; rates hand-computed from the figures in workloads/storage.py (each with its source there)."""

from __future__ import annotations

import pytest

from kubetwin.sim.env import Environment
from kubetwin.store.store import Store
from kubetwin.workloads.storage import GIB, MIB, ReadPath, nic_bytes_per_second, per_vm_read_cap, read_path, write_path

CONTAINER = {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/data"}]}


def _pod(volume: dict) -> dict:
    return {"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [CONTAINER], "volumes": [{"name": "v", **volume}]}}


def _claim(store: Store, cls: dict | None, size: str, class_name: str = "c") -> dict:
    if cls is not None:
        store.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": class_name},
                      **cls})
    store.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc",
                  "namespace": "default"}, "spec": {"storageClassName": class_name,
                                                    "resources": {"requests": {"storage": size}}}})
    return _pod({"persistentVolumeClaim": {"claimName": "pvc"}})


PD = "pd.csi.storage.gke.io"
CASES = [
    # (id, StorageClass body or None for a GKE built-in class, class name, size, read kind, read bytes/s, write B/s)
    ("pd-balanced 1 TiB: 140 + 0.28 x 1024 MiB/s", {"provisioner": PD, "parameters": {"type": "pd-balanced"}}, "c",
     "1Ti", "pd-balanced", (140 + 0.28 * 1024) * MIB, (140 + 0.28 * 1024) * MIB),
    ("premium-rwo (pd-ssd) 4 TiB capped per VM", None, "premium-rwo", "4Ti", "pd-ssd", 1200 * MIB, 1200 * MIB),
    ("pd-standard 1 TiB: 0.12 MiB/s per GiB, writes capped at 400", {"provisioner": PD,
     "parameters": {"type": "pd-standard"}}, "c", "4Ti", "pd-standard", 0.12 * 4096 * MIB, 400 * MIB),
    ("Hyperdisk ML 2400 MiB/s provisioned", {"provisioner": PD, "parameters": {
        "type": "hyperdisk-ml", "provisioned-throughput-on-create": "2400Mi"}}, "c", "1Ti", "hyperdisk-ml",
     2400 * MIB, 2400 * MIB),
    ("Hyperdisk ML without a figure: the 400 MiB/s minimum", {"provisioner": PD, "parameters": {
        "type": "hyperdisk-ml"}}, "c", "1Ti", "hyperdisk-ml", 400 * MIB, 400 * MIB),
    ("Parallelstore 12 TiB minimum: 1.15 / 0.5 GiB/s per TiB", {"provisioner": "parallelstore.csi.storage.gke.io"},
     "c", "1Ti", "parallelstore", 1.15 * 12 * GIB, 0.5 * 12 * GIB),
    ("Filestore zonal", {"provisioner": "filestore.csi.storage.gke.io", "parameters": {"tier": "zonal"}}, "c", "1Ti",
     "filestore", 260 * MIB, 88 * MIB),
    ("Filestore premium", {"provisioner": "filestore.csi.storage.gke.io", "parameters": {"tier": "premium"}}, "c",
     "2560Gi", "filestore", 1200 * MIB, 350 * MIB),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_claims_resolve_to_their_storage_rates(case: tuple) -> None:
    _, cls, class_name, size, kind, read, write = case
    store = Store(Environment(), 0, "2026-01-01T00:00:00Z")
    pod = _claim(store, cls, size, class_name)
    r = read_path(store, pod, CONTAINER, "/data/shard-0")
    w = write_path(store, pod, CONTAINER, "/data/ckpt")
    assert r.kind == kind and r.bytes_per_second == pytest.approx(read)
    assert w is not None and w.bytes_per_second == pytest.approx(write)


@pytest.mark.parametrize(("attrs", "kind", "read"), [
    ({}, "gcsfuse", 800e6),  # single process, no file cache (twin assumption)
    ({"fileCacheCapacity": "100Gi"}, "gcsfuse-file-cache", 7200e6),  # 9x with the file cache's parallel downloads
    ({"fileCacheCapacity": "0"}, "gcsfuse", 800e6),
])
def test_gcs_fuse_with_and_without_its_file_cache(attrs: dict, kind: str, read: float) -> None:
    store = Store(Environment(), 0, "2026-01-01T00:00:00Z")
    pod = _pod({"csi": {"driver": "gcsfuse.csi.storage.gke.io", "volumeAttributes": attrs}})
    r = read_path(store, pod, CONTAINER, "/data/x")
    assert (r.kind, r.bytes_per_second) == (kind, read)
    assert write_path(store, pod, CONTAINER, "/data/x").bytes_per_second == pytest.approx(4624.59e6)  # no write cache


def test_no_volume_means_the_hub_for_reads_and_no_known_writer() -> None:
    store = Store(Environment(), 0, "2026-01-01T00:00:00Z")
    pod = _pod({"emptyDir": {}})
    assert read_path(store, pod, CONTAINER, "/data/x").kind == "huggingface-hub"
    assert read_path(store, pod, CONTAINER, "meta-llama/Llama-3.1-8B").kind == "huggingface-hub"
    assert write_path(store, pod, CONTAINER, "/data/x") is None
    local = _pod({"hostPath": {"path": "/mnt/disks/ssd0"}})
    assert read_path(store, local, CONTAINER, "/data/x").kind == "local-ssd"


def test_longest_mount_wins() -> None:
    store = Store(Environment(), 0, "2026-01-01T00:00:00Z")
    container = {"name": "c", "volumeMounts": [{"name": "root", "mountPath": "/"}, {"name": "v", "mountPath": "/data"}]}
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [container], "volumes": [
        {"name": "root", "emptyDir": {}}, {"name": "v", "csi": {"driver": "gcsfuse.csi.storage.gke.io"}}]}}
    assert read_path(store, pod, container, "/data/a").kind == "gcsfuse"
    assert read_path(store, pod, container, "/tmp/a").kind == "huggingface-hub"


def test_small_file_rates_per_store() -> None:
    """Parallelstore: 30,000 read IOPS per TiB of the 12 TiB minimum; Filestore zonal 9,200 read IOPS per instance;
    Cloud Storage FUSE 1,303.87 MB/s of 128 KiB files per VM = 9,948 files/s."""
    store = Store(Environment(), 0, "2026-01-01T00:00:00Z")
    ps = read_path(store, _claim(store, {"provisioner": "parallelstore.csi.storage.gke.io"}, "1Ti"), CONTAINER, "/data")
    assert ps.files_per_second == pytest.approx(30000 * 12)
    store = Store(Environment(), 0, "2026-01-01T00:00:00Z")
    fs = read_path(store, _claim(store, {"provisioner": "filestore.csi.storage.gke.io", "parameters": {
        "tier": "zonal"}}, "1Ti"), CONTAINER, "/data")
    assert fs.files_per_second == 9200
    gcs = read_path(store, _pod({"csi": {"driver": "gcsfuse.csi.storage.gke.io"}}), CONTAINER, "/data/x")
    assert gcs.files_per_second == pytest.approx(9947.7, rel=1e-4)


def test_per_vm_read_caps() -> None:
    """The general-purpose NIC caps network stores (A3 Mega 200 Gbps, A2 100 Gbps); Hyperdisk ML is held to the
    machine's Hyperdisk limit (twin assumption per family); PD's per-VM cap is already in its own rate."""
    assert nic_bytes_per_second("a3-megagpu-8g") == 25e9 and nic_bytes_per_second("a2-highgpu-8g") == 12.5e9
    assert nic_bytes_per_second("e2-standard-4") == 12.5e9  # unknown: 100 Gbps twin assumption
    assert per_vm_read_cap(ReadPath("parallelstore", 1.0, ""), "a3-megagpu-8g") == 25e9
    assert per_vm_read_cap(ReadPath("hyperdisk-ml", 1.0, ""), "a3-highgpu-8g") == 4000 * MIB
    assert per_vm_read_cap(ReadPath("hyperdisk-ml", 1.0, ""), "a2-ultragpu-8g") == 2400 * MIB
    assert per_vm_read_cap(ReadPath("pd-balanced", 1.0, ""), "a3-megagpu-8g") is None

"""What one container of a pod gets on its node: the accelerator devices it sees, each one's memory and share of
the chip's compute, the interconnect between them, and where it sits in a multi-host TPU slice.

The one answer serving (serving/modelserver/sizing.py), training (workloads/training_hook.py, memory.py), the DCGM and
TPU metrics (workloads/dcgm.py), `kubetwin explain job` and `kubetwin validate` read; none keeps its own reckoning.

Facts, by device kind (the node's labels say which one the device plugin hands out):
- a whole GPU (`nvidia.com/gpu` on a node without sharing): the GPU's memory (catalog `memory_gib`), all its compute;
  GPUs of one VM talk over NVLink where the machine has it (catalog `nvlink_gbps`), else PCIe.
- a MIG instance (GKE `gpuPartitionSize`, label cloud.google.com/gke-gpu-partition-size): the profile's memory and
  compute slices / 7 of the SMs, memory slices / 8 of the memory bandwidth (devices/mig.py, catalog/data/mig.yaml).
  A CUDA process enumerates ONE MIG instance however many the container was given: NVIDIA MIG user guide, "CUDA
  Device Enumeration" / CUDA_VISIBLE_DEVICES ("regardless of how many MIG devices are created (or made available to
  a container), a single CUDA process can only enumerate a single MIG device", quoted in pytorch/pytorch#130181).
  So `visible` is 1, and MIG instances have no peer-to-peer path between them (interconnect "none").
- a time-slicing / MPS share (GKE gpuSharingConfig): the whole GPU's memory under time-slicing (no isolation), the
  GPU's memory / clients under MPS (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, GKE "About GPU sharing strategies"); compute
  is shared in time (devices/gpuruntime.SharedGpu.slowdown), so its nominal fraction is 1. At most one per container.
- TPU chips (`google.com/tpu`): each chip's HBM (catalog `hbm_gib`), its whole compute, ICI between the chips of a
  slice; on a multi-host slice the container is one worker of `hosts` (its Job completion index, what GKE's TPU
  webhook passes as TPU_WORKER_ID).
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin import catalog
from kubetwin.api.podresources import pod_requests
from kubetwin.devices import mig, sharing, tpu
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.k8s.labels import set_matches
from kubetwin.k8s.names import GKE_ACCELERATOR, GPU
from kubetwin.k8s.units import to_int
from kubetwin.store.store import Store

GPU_RESOURCE, TPU_RESOURCE = GPU, tpu.RESOURCE
GPU_LABEL = GKE_ACCELERATOR
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# The TPU runtime keeps part of each chip's HBM: XLA's out-of-memory error on a 32 GiB v4 chip reads "Used 63.80G
# of 30.75G hbm" with "reserved 1.25G" (erfanzar/EasyDeL#166); the same share on every generation is a twin
# assumption (on a 16 GiB chip: 15.38G).
TPU_RESERVED = 1.25 / 32


@dataclass(frozen=True)
class DeviceView:
    """One device as the container's process sees it. `mode`: "" (a whole GPU), "mig", "time-sharing" /
    "time-slicing", "mps", or "tpu"; `gpu_mib`: the device's memory (a MIG instance's; the whole GPU's for a shared
    one, see `memory_mib`; a TPU chip's HBM); `compute` / `bandwidth`: the fraction of the physical chip's SMs and
    memory system it owns (MIG: compute slices / 7, memory slices / 8); `partition`: the MIG profile; `clients`:
    the GPU's shared clients; `accelerator`: the GKE accelerator label value."""

    mode: str
    gpu_mib: int
    compute: float = 1.0
    bandwidth: float = 1.0
    partition: str = ""
    clients: int = 1
    accelerator: str = ""

    @property
    def shared(self) -> bool:
        """A time-slicing or MPS share: the GPU's time is shared with the other tenants."""
        return self.mode not in ("", "mig", "tpu")

    @property
    def memory_mib(self) -> int:
        """Memory the process may use: GKE sets CUDA_MPS_PINNED_DEVICE_MEM_LIMIT to the GPU's memory / clients."""
        return self.gpu_mib // max(self.clients, 1) if self.mode == "mps" else self.gpu_mib

    @property
    def reported_mib(self) -> float:
        """The device's total as the framework on it reports it: NVML's total for a whole or time-sliced GPU (what
        torch.cuda.mem_get_info says; the NVIDIA DRA driver twin's catalog), the MIG instance's (`nvidia-smi mig
        -lgip`), MPS's pinned per-client limit, a TPU chip's HBM less the TPU runtime's reservation (XLA's "of N
        hbm": TPU_RESERVED)."""
        if self.mode == "tpu":
            return self.gpu_mib * (1 - TPU_RESERVED)
        if self.mode in ("mig", "mps"):
            return float(self.memory_mib)
        return float((nvidia_dra.catalog()["gpus"].get(self.accelerator) or {}).get("memory_mib") or self.gpu_mib)

    @property
    def kind(self) -> str:
        """The column of docs/devices.md: whole GPU, MIG, time-slicing, MPS or TPU."""
        return {"": "gpu", "mig": "mig", "mps": "mps", "tpu": "tpu"}.get(self.mode, "time-slicing")

    @property
    def peak_tflops(self) -> float:
        """The dense bf16 peak this device gives one process: the chip's peak x its compute fraction."""
        try:
            chip = (catalog.tpu_type(self.accelerator).bf16_tflops if self.mode == "tpu"
                    else catalog.gpu_type(self.accelerator).bf16_tflops)
        except catalog.CatalogError:
            return 0.0
        return float(chip or 0.0) * self.compute


@dataclass(frozen=True)
class SliceMembership:
    """A container's place in a multi-host TPU slice: the slice (its node pool), topology, chips, hosts, and this
    container's worker index (None when its pod has no completion index)."""

    slice: str
    topology: str
    chips: int
    hosts: int
    worker: int | None


@dataclass(frozen=True)
class ContainerDevices:
    """What a container was given (`devices`, one per allocated device), how many of them one process
    enumerates (`visible`), the link between them, and its TPU slice membership."""

    devices: tuple[DeviceView, ...]
    visible: int
    interconnect: str  # "nvlink", "pcie", "ici", "none" (MIG instances, a single device)
    slice: SliceMembership | None = None

    @property
    def device(self) -> DeviceView | None:
        """The device one process (one rank) computes on; None for a container without accelerators."""
        return self.devices[0] if self.devices else None

    @property
    def allocated(self) -> int:
        return len(self.devices)

    @property
    def kind(self) -> str:
        return self.devices[0].kind if self.devices else ""

    def invisible_error(self, wanted: int) -> str | None:
        """Why a process asking for `wanted` devices of this container cannot have them (a MIG container given
        several instances still enumerates one), or None."""
        if wanted <= self.visible or self.kind != "mig":
            return None
        return (f"the container was given {self.allocated} MIG instances but a CUDA process enumerates only one "
                f"(NVIDIA MIG user guide, CUDA device enumeration); {wanted} devices were asked for")


def gpu_device(labels: dict[str, str]) -> DeviceView | None:
    """The GPU device a container asking for nvidia.com/gpu gets on a node with these labels; None without a
    GPU the catalog knows."""
    accel = labels.get(GPU_LABEL, "")
    if not accel:
        return None
    try:
        hbm = int(catalog.gpu_type(accel).memory_gib * 1024)
    except catalog.CatalogError:
        return None
    mode, partition = labels.get(sharing.STRATEGY_LABEL, ""), labels.get(mig.PARTITION_LABEL, "")
    clients = int(labels.get(sharing.CLIENTS_LABEL, "1") or 1)
    compute = bandwidth = 1.0
    if partition:
        profile = mig.profiles(mig.model_of(accel) or "")[partition]
        hbm, compute = profile.memory_mib, profile.compute_slices / mig.COMPUTE_SLICES
        bandwidth = profile.size / mig.MEMORY_SLICES
    return DeviceView(mode or ("mig" if partition else ""), hbm, compute, bandwidth, partition, clients, accel)


def tpu_device(labels: dict[str, str]) -> DeviceView | None:
    """One TPU chip of a node with these labels (its HBM as catalog hbm_gib); None for a TPU the catalog lacks."""
    accel = labels.get(tpu.ACCELERATOR_LABEL, "")
    if not accel:
        return None
    try:
        hbm = catalog.tpu_type(accel).hbm_gib
    except catalog.CatalogError:
        return None
    return DeviceView("tpu", int((hbm or 0) * 1024), accelerator=accel)


def _labels(node: dict | None) -> dict[str, str]:
    return ((node or {}).get("metadata") or {}).get("labels") or {}


def _count(container: dict, resource: str) -> int:
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        v = (res.get(part) or {}).get(resource)
        if v is not None:
            try:
                return to_int(v)
            except ValueError:
                return 0
    return 0


def _interconnect(device: DeviceView, count: int) -> str:
    if device.mode == "tpu":
        return "ici"
    if count <= 1 or device.mode == "mig":
        return "none"  # MIG instances: no CUDA peer-to-peer between GPU instances (MIG user guide)
    try:
        return "nvlink" if catalog.gpu_type(device.accelerator).nvlink_gbps else "pcie"
    except catalog.CatalogError:
        return "pcie"


def _slice(pod: dict, node: dict | None) -> SliceMembership | None:
    name = tpu.node_slice(node) if node else None
    if name is None:
        return None
    topology = _labels(node)[tpu.TOPOLOGY_LABEL]
    per_vm = to_int(((node or {}).get("status") or {}).get("capacity", {}).get(TPU_RESOURCE, "1"))
    chips = tpu.chips(topology)
    meta = pod.get("metadata") or {}
    idx = str((meta.get("labels") or {}).get(COMPLETION_INDEX)
              or (meta.get("annotations") or {}).get(COMPLETION_INDEX) or "")
    return SliceMembership(name, topology, chips, max(1, chips // max(1, per_vm)),
                           int(idx) if idx.isdigit() else None)


def for_counts(labels: dict[str, str], gpus: int, tpus: int) -> ContainerDevices:
    """What a container asking for `gpus` nvidia.com/gpu and `tpus` google.com/tpu gets on a node with these
    labels (no slice membership: see `for_container`)."""
    device = gpu_device(labels) if gpus else tpu_device(labels) if tpus else None
    count = gpus or tpus
    if device is None or count <= 0:
        return ContainerDevices((), 0, "none")
    visible = 1 if device.mode == "mig" else count
    return ContainerDevices((device,) * count, visible, _interconnect(device, count))


def dra_device(device: dict, labels: dict[str, str]) -> DeviceView | None:
    """One device the NVIDIA DRA driver published (a ResourceSlice entry) as the container's process sees it: a
    whole GPU, or a MIG device of its `profile` (the same memory and compute slices / 7 as a GKE MIG partition;
    devices/dra/nvidia.py publishes the mig-parted layout); the GPU model from the node's accelerator label, else
    the driver's productName."""
    attrs = device.get("attributes") or {}
    kind = (attrs.get("type") or {}).get("string")
    accel = labels.get(GPU_LABEL, "")
    if not accel:
        product = (attrs.get("productName") or {}).get("string")
        accel = next((k for k, v in nvidia_dra.catalog()["gpus"].items() if v.get("productName") == product), "")
    if kind == "gpu":
        return gpu_device({GPU_LABEL: accel})
    if kind == "mig":
        profile = str((attrs.get("profile") or {}).get("string") or "")
        try:
            return gpu_device({GPU_LABEL: accel, mig.PARTITION_LABEL: profile})
        except (mig.MigError, KeyError):
            return None
    return None


def _claims_used(pod: dict, container: dict) -> bool:
    return bool((container.get("resources") or {}).get("claims")) and bool(
        (pod.get("spec") or {}).get("resourceClaims"))


def for_container(pod: dict, node: dict | None, container: dict | None = None,
                  store: Store | None = None) -> ContainerDevices:
    """THE answer for one container of `pod` on `node` (the pod's accelerator container when `container` is
    None: the first that asks for one, else the pod's effective requests). With the `store`, a container given
    GPUs or MIG devices through DRA ResourceClaims (resources.claims) sees what the claims' allocation names on
    the NVIDIA DRA driver's ResourceSlices, as one given them by the device plugin would."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if container is None:
        container = next((c for c in containers if _count(c, GPU_RESOURCE) or _count(c, TPU_RESOURCE)), None)
        if container is None and store is not None:
            container = next((c for c in containers if _claims_used(pod, c)), None)
    if container is not None:
        gpus, tpus = _count(container, GPU_RESOURCE), _count(container, TPU_RESOURCE)
    else:
        req = pod_requests(pod)
        gpus, tpus = int(req.get(GPU_RESOURCE) or 0), int(req.get(TPU_RESOURCE) or 0)
    if not (gpus or tpus) and store is not None and container is not None and _claims_used(pod, container):
        views = [v for v in (dra_device(d, _labels(node)) for d in nvidia_dra.claimed_devices(store, pod, container))
                 if v is not None]
        if views:
            visible = 1 if any(v.mode == "mig" for v in views) else len(views)
            return ContainerDevices(tuple(views), visible, _interconnect(views[0], len(views)))
    out = for_counts(_labels(node), gpus, tpus)
    if out.kind == "tpu":
        return ContainerDevices(out.devices, out.visible, out.interconnect, _slice(pod, node))
    return out


def on_pools(pools: list[dict[str, str]], node_selector: dict, gpus: int, tpus: int) -> list[ContainerDevices]:
    """What a pod template's container would get on each node pool its nodeSelector can land on (`pools`: each
    pool's node labels, as GKE labels the pool's nodes), before any node exists: validate's view of serving and
    training alike. Without a matching pool, what the selector alone says (`selected`)."""
    sel = {str(k): str(v) for k, v in (node_selector or {}).items()} if isinstance(node_selector, dict) else {}
    out = []
    for labels in pools:
        if set_matches(sel, labels):
            got = for_counts(labels, gpus, tpus)
            if got.devices and got not in out:
                out.append(got)
    if out:
        return out
    alone = selected(sel, gpus, tpus)
    return [alone] if alone is not None else []


def selected(node_selector: dict[str, str], gpus: int, tpus: int) -> ContainerDevices | None:
    """What a pod template's container would get on the nodes its nodeSelector picks, when the selector alone
    says (validate's view before any node exists): an accelerator and, for MIG, the partition size."""
    labels = {k: str(v) for k, v in (node_selector or {}).items()}
    if not (labels.get(GPU_LABEL) or labels.get(tpu.ACCELERATOR_LABEL)):
        return None
    if labels.get(mig.PARTITION_LABEL):
        try:
            mig.profiles(mig.model_of(labels.get(GPU_LABEL, "")) or "")[labels[mig.PARTITION_LABEL]]
        except (mig.MigError, KeyError):
            return None
    out = for_counts(labels, gpus, tpus)
    return out if out.devices else None

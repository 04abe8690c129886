"""Accelerator memory of one training rank, and the out-of-memory a spec that does not fit dies of.

Why: a 70B model trained with plain data parallelism on 80 GB GPUs does not "run slowly at a capped memory": it
dies at start with PyTorch's out-of-memory error. The same accounting feeds DCGM_FI_DEV_FB_USED (workloads/dcgm.py),
the failure at start (workloads/training_hook.py) and `kubetwin validate`'s warning (diagnostics, below).

Per rank (mixed-precision Adam; ZeRO, Rajbhandari et al. 2020 §3.1: 2 + 2 + 12 = 16 bytes per parameter):
- bf16 weights 2, bf16 gradients 2, fp32 master weights + Adam momentum + variance 12 bytes per parameter the rank
  holds: params / (tp x pp), divided by dp as well when FSDP (ZeRO-3) shards them over the data-parallel group;
- activations 34 x s x b x h bytes per layer / tp (selective recomputation, Korthikanti et al. 2022 "Reducing
  Activation Recomputation in Large Transformer Models" §4-5), times `layers` (the first pipeline stage holds pp
  micro-batches of layers / pp layers);
- CONTEXT_MIB for the CUDA context, cuBLAS workspaces and NCCL buffers (twin assumption).
The device is what the rank's container really gets (devices/container.py): a whole GPU, a MIG instance, an MPS
client's share, a TPU chip; a GPU rank dies of PyTorch's CUDA out-of-memory error, a TPU rank (JAX) of XLA's
RESOURCE_EXHAUSTED when the step program is compiled ("Ran out of memory in memory space hbm. Used U of C hbm.
Exceeded hbm capacity by E.", as public JAX logs print it: LargeWorldModel/LWM#60, erfanzar/EasyDeL#166); on a
TPU the CUDA context is not counted (the runtime's reservation is taken off the capacity instead).
Allocation order (twin assumption): context, weights, gradients, optimizer states, activations, each in per-layer
tensors (size / layers); the first tensor that does not fit is the "Tried to allocate" of PyTorch's message.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.podresources import pod_requests
from kubetwin.devices import container
from kubetwin.devices.container import DeviceView
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.devices.gpuruntime import torch_oom_message
from kubetwin.k8s.names import GKE_ACCELERATOR, GPU, TPU
from kubetwin.workloads.training_spec import TrainingSpec, object_pods

STATE_BYTES = (("weights", 2), ("gradients", 2), ("optimizer states", 12))  # ZeRO §3.1 mixed-precision Adam
STATES_BYTES_PER_PARAM = sum(b for _, b in STATE_BYTES)  # 16
ACT_BYTES_PER_SBH = 34  # Korthikanti et al. 2022: 34 sbh per layer with selective recomputation (tensor parallel /t)
CONTEXT_MIB = 2048  # CUDA context, cuBLAS workspaces, NCCL buffers, allocator slack: twin assumption
MIB = 2**20
ACCEL = GKE_ACCELERATOR
FALLBACK_MIB = 81559  # an H100 80GB's NVML total when the GPU is unknown


def gpu_memory_mib(gpu: str) -> float:
    """A whole GPU's memory as NVML and PyTorch report it (the NVIDIA DRA driver twin's catalog)."""
    return float((nvidia_dra.catalog()["gpus"].get(gpu) or {}).get("memory_mib") or FALLBACK_MIB)


def allocations(spec: TrainingSpec, dp: int, tpu: bool = False) -> list[tuple[str, float]]:
    """(what, bytes) one rank allocates, in order, CUDA context first (none on a TPU)."""
    held = spec.params / (spec.tp * spec.pp) / (dp if spec.fsdp else 1)
    act = ACT_BYTES_PER_SBH * spec.seq_len * spec.micro_batch * spec.hidden_size * spec.layers / spec.tp
    context = [] if tpu else [("context", CONTEXT_MIB * MIB)]
    return [*context, *((name, b * held) for name, b in STATE_BYTES), ("activations", act)]


def used_mib(spec: TrainingSpec, dp: int, tpu: bool = False) -> float:
    """MiB one rank needs (uncapped)."""
    return sum(b for _, b in allocations(spec, dp, tpu)) / MIB


def capacity_mib(device: DeviceView | None, gpu: str = "") -> float:
    """The memory a rank's device has as its framework reports it (a whole `gpu`'s when the device is unknown)."""
    return device.reported_mib if device is not None else gpu_memory_mib(gpu)


@dataclass(frozen=True)
class Oom:
    """Where a rank runs out: the tensor it tried to allocate, the device's total, what was free and in use."""

    what: str
    tried: float
    total: float
    in_use: float  # by the process, context included
    tpu: bool = False
    needed: float = 0.0  # bytes the whole step program needs (XLA's "Used")

    def message(self) -> str:
        if self.tpu:
            g = 2**30
            return ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran "
                    f"out of memory in memory space hbm. Used {self.needed / g:.2f}G of {self.total / g:.2f}G hbm. "
                    f"Exceeded hbm capacity by {(self.needed - self.total) / g:.2f}G.")
        return torch_oom_message(self.tried, self.total, self.total - self.in_use, self.in_use,
                                 self.in_use - CONTEXT_MIB * MIB)


def oom(spec: TrainingSpec, dp: int, total_mib: float, tpu: bool = False) -> Oom | None:
    """The out-of-memory a rank of this spec hits on a device of `total_mib` (capacity_mib), or None when it fits."""
    total = total_mib * MIB
    used = 0.0
    allocs = allocations(spec, dp, tpu)
    for what, size in allocs:
        if used + size <= total:
            used += size
            continue
        chunk = size if what == "context" else size / max(1, spec.layers)
        while used + chunk <= total:
            used += chunk
        return Oom(what, chunk, total, used, tpu, sum(b for _, b in allocs))
    return None


def device_oom(spec: TrainingSpec, dp: int, device: DeviceView | None, gpu: str = "") -> Oom | None:
    """THE check the run, `explain job` (through the DCGM/TPU record) and validate share: a rank on `device`."""
    return oom(spec, dp, capacity_mib(device, gpu), tpu=device is not None and device.mode == "tpu")


def _world(obj: dict) -> tuple[int, dict, int, int]:
    """(accelerators of the job, the nodeSelector its pods use, GPUs and TPU chips of one pod) from a Job's or
    JobSet's spec, a Pod's own."""
    world, selector, gpus, tpus = 0, {}, 0, 0
    for pod_spec, n in object_pods(str(obj.get("kind")), obj.get("spec") or {}):
        req = pod_requests({"spec": pod_spec})
        g, t = int(req.get(GPU, 0) or 0), int(req.get(TPU, 0) or 0)
        world += n * (g + t)
        if (g or t) and not (gpus or tpus):
            selector, gpus, tpus = dict(pod_spec.get("nodeSelector") or {}), g, t
    return world, selector, gpus, tpus


def diagnostics(m: Manifest, spec: TrainingSpec, field: str, line: int,
                pools: list[dict[str, str]] | tuple = ()) -> list[Diagnostic]:
    """A warning when a rank of the spec cannot fit the device its pods get on the node pools their nodeSelector
    can land on (`pools`: each NodePool's node labels; devices/container.on_pools: a GPU, a MIG instance, an MPS
    share, a TPU chip), or any GPU the twin knows when they select none."""
    world, selector, gpus, tpus = _world(m.obj)
    if world <= 0:
        return []
    dp = spec.dp or max(1, world // (spec.tp * spec.pp))
    found = container.on_pools(list(pools), selector, gpus, tpus)
    # the first device the rank does not fit (or the first device): a pod that may land there fails at start
    got = next((g for g in found if g.invisible_error(g.allocated) or device_oom(spec, dp, g.device) is not None),
               found[0] if found else None)
    device = got.device if got is not None else None
    # other pools the pods may land on instead, where the rank fits: the failure is only where it does not
    elsewhere = any(not (g.invisible_error(g.allocated) or device_oom(spec, dp, g.device) is not None)
                    for g in found if g is not got)
    pods_fail = "pods that land there fail" if elsewhere else "the pods will fail"
    unseen = got.invisible_error(got.allocated) if got is not None else None
    if unseen:
        return [Diagnostic(m.file, line, m.ref, field, f"each pod runs {got.allocated} ranks, one per GPU, on "
                           f"{device.partition if device else ''} MIG instances, but {unseen}: the second local "
                           "rank's torch.cuda.set_device(1) fails with RuntimeError: CUDA error: invalid device "
                           f"ordinal; {pods_fail} at start",
                           "ask for one MIG instance per pod (nvidia.com/gpu: 1) and more pods, or whole GPUs",
                           "warning")]
    if device is None and tpus:
        return []  # a TPU generation the selector does not name: its HBM is unknown here
    gpu = str(selector.get(ACCEL, "")) or (device.accelerator if device is not None else "")
    known = device is not None or gpu in nvidia_dra.catalog()["gpus"]
    target = gpu if known else max(nvidia_dra.catalog()["gpus"], key=gpu_memory_mib)
    tpu = device is not None and device.mode == "tpu"
    need = used_mib(spec, dp, tpu)
    if device_oom(spec, dp, device, target) is None:
        return []
    if device is not None and device.mode == "mig":
        where = f"a {device.partition} MIG instance of {device.accelerator}"
    elif tpu and device is not None:
        where = f"a {device.accelerator} chip"
    else:
        where = target if known else f"any GPU (the largest, {target})"
    fails = "XLA's RESOURCE_EXHAUSTED (out of HBM)" if tpu else "CUDA out of memory"
    return [Diagnostic(m.file, line, m.ref, field, f"each rank needs {need / 1024:,.1f} GiB "
                       f"({STATES_BYTES_PER_PARAM} bytes/param of "
                       f"mixed-precision Adam states over tp x pp = {spec.tp * spec.pp}"
                       + (f", FSDP over dp = {dp}" if spec.fsdp else ", replicated by data parallelism")
                       + f", plus activations): it will not fit {where} with "
                       f"{capacity_mib(device, target) / 1024:.2f} GiB; {pods_fail} at start with {fails}",
                       'shard the model states: training.kubetwin.io/fsdp: "true", tensor-parallel / '
                       "pipeline-parallel, or more GPUs", "warning")]

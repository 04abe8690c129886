"""GPU memory of one training rank, and the CUDA out-of-memory a spec that does not fit dies of.

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
Allocation order (twin assumption): context, weights, gradients, optimizer states, activations, each in per-layer
tensors (size / layers); the first tensor that does not fit is the "Tried to allocate" of PyTorch's message.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.podresources import pod_requests
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.devices.gpuruntime import torch_oom_message
from kubetwin.workloads.training_spec import TrainingSpec, object_pods

STATE_BYTES = (("weights", 2), ("gradients", 2), ("optimizer states", 12))  # ZeRO §3.1 mixed-precision Adam
STATES_BYTES_PER_PARAM = sum(b for _, b in STATE_BYTES)  # 16
ACT_BYTES_PER_SBH = 34  # Korthikanti et al. 2022: 34 sbh per layer with selective recomputation (tensor parallel /t)
CONTEXT_MIB = 2048  # CUDA context, cuBLAS workspaces, NCCL buffers, allocator slack: twin assumption
MIB = 2**20
ACCEL = "cloud.google.com/gke-accelerator"
FALLBACK_MIB = 81559  # an H100 80GB's NVML total when the GPU is unknown


def gpu_memory_mib(gpu: str) -> float:
    """The GPU's memory as NVML and PyTorch report it (the NVIDIA DRA driver twin's catalog)."""
    return float((nvidia_dra.catalog()["gpus"].get(gpu) or {}).get("memory_mib") or FALLBACK_MIB)


def allocations(spec: TrainingSpec, dp: int) -> list[tuple[str, float]]:
    """(what, bytes) one rank allocates, in order, CUDA context first."""
    held = spec.params / (spec.tp * spec.pp) / (dp if spec.fsdp else 1)
    act = ACT_BYTES_PER_SBH * spec.seq_len * spec.micro_batch * spec.hidden_size * spec.layers / spec.tp
    return [("context", CONTEXT_MIB * MIB), *((name, b * held) for name, b in STATE_BYTES), ("activations", act)]


def used_mib(spec: TrainingSpec, dp: int) -> float:
    """MiB one rank needs (uncapped)."""
    return sum(b for _, b in allocations(spec, dp)) / MIB


@dataclass(frozen=True)
class Oom:
    """Where a rank runs out: the tensor it tried to allocate, the GPU's total, what was free and in use."""

    what: str
    tried: float
    total: float
    in_use: float  # by the process, context included

    def message(self) -> str:
        return torch_oom_message(self.tried, self.total, self.total - self.in_use, self.in_use,
                                 self.in_use - CONTEXT_MIB * MIB)


def oom(spec: TrainingSpec, dp: int, gpu: str) -> Oom | None:
    """The out-of-memory a rank of this spec hits on `gpu`, or None when it fits."""
    total = gpu_memory_mib(gpu) * MIB
    used = 0.0
    for what, size in allocations(spec, dp):
        if used + size <= total:
            used += size
            continue
        chunk = size if what == "context" else size / max(1, spec.layers)
        while used + chunk <= total:
            used += chunk
        return Oom(what, chunk, total, used)
    return None


def _world(obj: dict) -> tuple[int, str]:
    """(GPUs of the job, the accelerator its pods select or "") from a Job's or JobSet's spec, a Pod's own."""
    world, gpu = 0, ""
    for pod_spec, n in object_pods(str(obj.get("kind")), obj.get("spec") or {}):
        world += n * pod_requests({"spec": pod_spec}).get("nvidia.com/gpu", 0)
        gpu = gpu or str((pod_spec.get("nodeSelector") or {}).get(ACCEL, ""))
    return world, gpu


def diagnostics(m: Manifest, spec: TrainingSpec, field: str, line: int) -> list[Diagnostic]:
    """A warning when a rank of the spec cannot fit the GPU its pods select (nodeSelector
    cloud.google.com/gke-accelerator), or any GPU the twin knows when they select none."""
    world, gpu = _world(m.obj)
    if world <= 0:
        return []
    dp = spec.dp or max(1, world // (spec.tp * spec.pp))
    known = gpu in nvidia_dra.catalog()["gpus"]
    target = gpu if known else max(nvidia_dra.catalog()["gpus"], key=gpu_memory_mib)
    need = used_mib(spec, dp)
    if oom(spec, dp, target) is None:
        return []
    where = target if known else f"any GPU (the largest, {target})"
    return [Diagnostic(m.file, line, m.ref, field, f"each rank needs {need / 1024:,.1f} GiB "
                       f"({STATES_BYTES_PER_PARAM} bytes/param of "
                       f"mixed-precision Adam states over tp x pp = {spec.tp * spec.pp}"
                       + (f", FSDP over dp = {dp}" if spec.fsdp else ", replicated by data parallelism")
                       + f", plus activations): it will not fit {where} with {gpu_memory_mib(target) / 1024:.2f} "
                       "GiB; the pods will fail at start with CUDA out of memory",
                       'shard the model states: training.kubetwin.io/fsdp: "true", tensor-parallel / '
                       "pipeline-parallel, or more GPUs", "warning")]

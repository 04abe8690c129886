"""How fast a pod runs on a shared or partitioned GPU, and when it runs out of GPU memory.

A pod declares what it would use of a whole GPU alone: `kubetwin.io/gpu-util` (busy fraction, e.g. "0.3" or
"30%") and `kubetwin.io/gpu-memory` (a quantity, e.g. "12Gi"); its `kubetwin.io/duration` is its run time on a
whole GPU. Then (the trade-off of NVIDIA's GPU sharing docs and GKE's "About GPU sharing strategies"):
- time-slicing: tenants take turns on the whole GPU; when together they want more than the GPU
  (sum of utils > 1) each runs slower by that sum, plus a context-switch cost while more than one is busy;
  there is no memory isolation, so the tenant whose arrival takes the GPU's memory past its HBM fails.
- MPS: tenants run side by side, slowed only by the sum of utils; each client's memory is capped at the
  GPU's memory divided by the clients (GKE sets CUDA_MPS_PINNED_DEVICE_MEM_LIMIT that way), so a pod asking
  for more fails and the others are safe.
- MIG: the pod owns a slice of compute_slices/7 of the GPU and its memory: it runs slower only if it needs
  more than its slice (util / fraction), and fails if it needs more memory than the instance has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from kubetwin.api.podresources import pod_requests
from kubetwin.devices import container, mig, sharing
from kubetwin.devices.container import DeviceView
from kubetwin.k8s.names import GPU
from kubetwin.k8s.units import UnitError, to_int
from kubetwin.sim.env import Environment

GPU_UTIL, GPU_MEMORY = "kubetwin.io/gpu-util", "kubetwin.io/gpu-memory"
# Modelling assumption, not a measured fact: NVIDIA documents a context-switch cost for time-slicing without
# giving a number; 5 % of GPU time while two or more tenants are busy.
TIME_SLICE_OVERHEAD = 0.05


@dataclass(frozen=True)
class Demand:
    util: float = 1.0  # fraction of a whole GPU's time the pod keeps busy alone
    memory_mib: int = 0


def demand_of(annotations: dict[str, str]) -> Demand:
    """The pod's declared GPU demand; without annotations a pod keeps a GPU busy and uses no memory we know of."""
    raw = (annotations.get(GPU_UTIL) or "1").strip()
    try:
        util = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UnitError(f"{GPU_UTIL}: {raw!r} is not a fraction; write e.g. 0.3 or 30%") from None
    if not 0 < util <= 1:
        raise UnitError(f"{GPU_UTIL}: {raw!r} must be above 0 and at most 1 (100%)")
    mem = annotations.get(GPU_MEMORY)
    return Demand(util, to_int(mem) // (1024 * 1024) if mem else 0)


@dataclass
class Tenant:
    uid: str
    demand: Demand
    work_left: float  # seconds of work at full speed


@dataclass
class SharedGpu:
    """One physical GPU shared by time-slicing or MPS."""

    mode: str  # "time-sharing" / "time-slicing" or "mps"
    hbm_mib: int
    clients: int
    fraction: float = 1.0  # of a whole GPU's compute: below 1 for a shared MIG instance
    tenants: dict[str, Tenant] = field(default_factory=dict)
    since: float = 0.0  # when the tenants' work was last brought up to date

    def slowdown(self) -> float:
        busy = sum(t.demand.util for t in self.tenants.values()) / self.fraction
        factor = max(1.0, busy)
        if self.mode != "mps" and len(self.tenants) > 1:
            factor *= 1 + TIME_SLICE_OVERHEAD
        return factor

    def refuses(self, demand: Demand) -> str | None:
        """Why a new tenant runs out of GPU memory here, or None."""
        if self.mode == "mps":
            cap = self.hbm_mib // max(self.clients, 1)
            if demand.memory_mib > cap:
                return (f"CUDA error: out of memory: the pod needs {demand.memory_mib} MiB and MPS limits each of "
                        f"{self.clients} clients to {cap} MiB")
            return None
        used = sum(t.demand.memory_mib for t in self.tenants.values())
        if used + demand.memory_mib > self.hbm_mib:
            return (f"CUDA error: out of memory: {len(self.tenants) + 1} time-sliced pods need "
                    f"{used + demand.memory_mib} MiB of the GPU's {self.hbm_mib} MiB (no memory isolation)")
        return None


def _format_size(n: float) -> str:
    """c10/cuda/CUDACachingAllocator.cpp format_size: bytes, KiB, MiB, GiB with two decimals."""
    if n < 1024:
        return f"{int(n)} bytes"
    for unit, scale in (("KiB", 2**10), ("MiB", 2**20)):
        if n < scale * 1024:
            return f"{n / scale:.2f} {unit}"
    return f"{n / 2**30:.2f} GiB"


def torch_oom_message(tried: float, total: float, free: float, process: float, allocated: float,
                      reserved_unallocated: float = 0.0) -> str:
    """PyTorch's CUDA out-of-memory error as its caching allocator raises it (torch.OutOfMemoryError, PyTorch 2.5+;
    the text of c10/cuda/CUDACachingAllocator.cpp's malloc failure path), for GPU 0 of the process."""
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {_format_size(tried)}. GPU 0 has a total "
            f"capacity of {_format_size(total)} of which {_format_size(max(0.0, free))} is free. Including "
            f"non-PyTorch memory, this process has {_format_size(process)} memory in use. Of the allocated memory "
            f"{_format_size(allocated)} is allocated by PyTorch, and {_format_size(reserved_unallocated)} is "
            "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


Finish = Callable[[dict, str, int, str, str], None]  # (pod, phase, exit code, reason, message)


class GpuRuntime:
    """Runs GPU pods at the speed their node's sharing gives them; finishes or fails them through `finish`."""

    def __init__(self, env: Environment, finish: Finish) -> None:
        self.env, self.finish = env, finish
        self._gpus: dict[tuple[str, int], SharedGpu] = {}
        self._where: dict[str, tuple[str, int]] = {}
        self._pods: dict[str, dict] = {}
        self._token: dict[str, int] = {}

    def start(self, pod: dict, node: dict | None, duration: float, on_device: bool = False) -> None:
        """Run the pod for `duration` at the speed its GPU gives it (`on_device`: the duration already counts its
        MIG instance's compute share)."""
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        mode, partition = labels.get(sharing.STRATEGY_LABEL), labels.get(mig.PARTITION_LABEL)
        if not (mode or partition) or not pod_requests(pod).get(GPU):
            self.env.after(duration, lambda: self.finish(pod, "Succeeded", 0, "Completed", ""))
            return
        demand = demand_of(pod["metadata"].get("annotations") or {})
        uid = pod["metadata"]["uid"]
        attached = self._where.get(uid)
        if attached is not None:  # a server that attached at start-up: it holds at least what it reserved, there
            held = self._gpus[attached].tenants[uid].demand.memory_mib
            self.release(uid)
            demand = Demand(demand.util, max(demand.memory_mib, held))
        view = container.gpu_device(labels)
        assert view is not None  # a shared or partitioned node always has a known accelerator
        hbm, fraction = view.gpu_mib, view.compute
        if not mode:  # a MIG instance of its own: isolated
            if demand.memory_mib > hbm:
                self.fail(pod, f"CUDA error: out of memory: the pod needs {demand.memory_mib} MiB and its MIG "
                           f"instance {partition} has {hbm} MiB")
                return
            slow = 1.0 if on_device else max(1.0, demand.util / fraction)
            self.env.after(duration * slow, lambda: self.finish(pod, "Succeeded", 0, "Completed", ""))
            return
        if attached is not None:
            (name, idx), gpu = attached, self._gpus[attached]
        else:
            gpu, idx, name = self._place(node, mode, hbm, fraction)
        refused = gpu.refuses(demand)
        if refused:
            self.fail(pod, f"{refused} (GPU {idx} of node {name})")
            return
        self._join(pod, gpu, (name, idx), demand, duration)

    def _place(self, node: dict | None, mode: str, hbm: int, fraction: float) -> tuple[SharedGpu, int, str]:
        """The physical GPU of a shared node a new tenant gets: the device plugin spreads shared replicas over
        the GPUs, fewest tenants first."""
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        clients = int(labels.get(sharing.CLIENTS_LABEL, "1"))
        devices = max(1, to_int(((node or {}).get("status") or {}).get("allocatable", {}).get(GPU, "0"))
                      // clients)
        name = node["metadata"]["name"] if node else ""
        gpus = [self._gpu(name, i, mode, hbm, clients, fraction) for i in range(devices)]
        idx = min(range(devices), key=lambda i: (len(gpus[i].tenants), i))
        return gpus[idx], idx, name

    def _join(self, pod: dict, gpu: SharedGpu, where: tuple[str, int], demand: Demand, work: float) -> None:
        uid = pod["metadata"]["uid"]
        self._advance(gpu)
        gpu.tenants[uid] = Tenant(uid, demand, work)
        self._where[uid], self._pods[uid] = where, pod
        self._reschedule(gpu)

    # ---- long-running servers (a model server has no duration: it shares the GPU until it stops) -------------
    def shared_gpu_for(self, node: dict, view: DeviceView) -> tuple[SharedGpu, int]:
        """(the shared GPU a new tenant on `node` would get, its index): what a server finds there at start-up."""
        gpu, idx, _ = self._place(node, view.mode, view.gpu_mib, view.compute)
        return gpu, idx

    def attach(self, pod: dict, node: dict, view: DeviceView, memory_mib: int) -> None:
        """A server that started on a shared GPU holds `memory_mib` of it and keeps it busy (its
        kubetwin.io/gpu-util, default 1) until `release`: the GPU's other tenants see both."""
        demand = demand_of(pod["metadata"].get("annotations") or {})
        gpu, idx, name = self._place(node, view.mode, view.gpu_mib, view.compute)
        self._join(pod, gpu, (name, idx), Demand(demand.util, memory_mib), math.inf)

    def slowdown_of(self, uid: str) -> float:
        """How much slower than alone the pod's shared GPU runs now (1 when it is not on one)."""
        where = self._where.get(uid)
        return self._gpus[where].slowdown() if where is not None else 1.0

    def release(self, uid: str) -> None:
        """The pod stopped (finished, failed or deleted): the GPU's other tenants speed up."""
        where = self._where.pop(uid, None)
        if where is None:
            return
        gpu = self._gpus[where]
        self._advance(gpu)
        gpu.tenants.pop(uid, None)
        self._pods.pop(uid, None)
        self._token.pop(uid, None)
        self._reschedule(gpu)

    def _gpu(self, node: str, idx: int, mode: str, hbm: int, clients: int, fraction: float) -> SharedGpu:
        key = (node, idx)
        if key not in self._gpus:
            self._gpus[key] = SharedGpu(mode, hbm, clients, fraction, since=self.env.now)
        return self._gpus[key]

    def _advance(self, gpu: SharedGpu) -> None:
        rate = 1.0 / gpu.slowdown() if gpu.tenants else 1.0
        elapsed = self.env.now - gpu.since
        for t in gpu.tenants.values():
            if not math.isinf(t.work_left):
                t.work_left = max(0.0, t.work_left - elapsed * rate)
        gpu.since = self.env.now

    def _reschedule(self, gpu: SharedGpu) -> None:
        slow = gpu.slowdown()
        for uid, t in gpu.tenants.items():
            if math.isinf(t.work_left):
                continue  # a server: it runs until it is stopped
            token = self._token.get(uid, 0) + 1
            self._token[uid] = token
            self.env.after(t.work_left * slow, partial(self._done, uid, token))

    def _done(self, uid: str, token: int) -> None:
        if self._token.get(uid) != token:
            return  # rescheduled since: the GPU's tenants changed
        pod = self._pods[uid]
        self.release(uid)
        self.finish(pod, "Succeeded", 0, "Completed", "")

    def fail(self, pod: dict, message: str, after: float = 0.0) -> None:
        """The pod's process dies of a GPU error `after` seconds from now: exit code 1, reason Error, the error
        as the container's termination message (what a training script's CUDA out-of-memory leaves)."""
        self.env.after(after, lambda: self.finish(pod, "Failed", 1, "Error", message))


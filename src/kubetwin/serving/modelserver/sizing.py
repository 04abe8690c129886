"""How big a model server's engine is on the device its pod actually got, and why it refuses to start.

One place for the three checks vLLM makes while it starts, in its order and words:
1. worker init (vllm/v1/worker/utils.py request_memory, vLLM >= 0.11; earlier in gpu_worker.py init_device): the
   device's free memory must cover `--gpu-memory-utilization` x its total, else "ValueError: Free memory on device
   cuda:0 (F/T GiB) on startup is less than desired GPU memory utilization (U, R GiB). Decrease GPU memory
   utilization or reduce GPU memory used by other processes." (the message as public vLLM logs print it). Only a
   time-sliced GPU has other processes' memory on it: time-slicing isolates no memory, so every replica on a GPU
   claims U x the whole GPU;
2. model loading: weights that do not fit in the device's memory fail in PyTorch's caching allocator with its
   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ..." (c10/cuda/CUDACachingAllocator.cpp);
3. memory profiling and KV-cache sizing (`PerfModel.num_gpu_blocks`, `engine.block_pool.max_model_len_error`).

The device is what the node's GPU sharing gives one container (`devices.container`): a MIG instance's
memory and compute slices / 7 of the SMs and memory slices / 8 of the memory bandwidth; an MPS client's pinned
memory limit; the whole GPU under time-slicing. Time-slicing and MPS tenants share the GPU's time: the engine runs
at 1 / the GPU's slowdown when it turns Ready (`SharedGpu.slowdown`, the batch model's rule) -- a twin
simplification: the engine's speed is not re-read when tenants come and go later.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from kubetwin.devices import container
from kubetwin.devices.container import DeviceView
from kubetwin.devices.gpuruntime import GpuRuntime, torch_oom_message
from kubetwin.k8s.names import GKE_ACCELERATOR
from kubetwin.serving.engine.block_pool import max_model_len_error
from kubetwin.serving.engine.core import Engine
from kubetwin.serving.modelserver import recognize as modelserver
from kubetwin.serving.modelserver.modelspec import ModelSpec
from kubetwin.serving.modelserver.perf import CUDA_VISIBLE_FRACTION, NON_TORCH_BYTES, GpuSpec, PerfModel, heads_error
from kubetwin.serving.modelserver.triton_args import pod_configmaps
from kubetwin.serving.types import EngineArgs, Request
from kubetwin.store.store import Store
from kubetwin.workloads import collectives

GIB, MIB = 1024**3, 1024**2


class StartupFailure(ValueError):
    """The server exits while starting; `stage` says when: "init" (before the weights load), "load" (while
    they load) or "profile" (after they loaded, sizing the KV cache)."""

    def __init__(self, message: str, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


@dataclass
class Sized:
    args: EngineArgs  # with the server's defaults for the device resolved
    perf: PerfModel
    blocks: int


def device_of(node: dict | None, pod: dict | None = None, store: Store | None = None) -> DeviceView | None:
    """The GPU device one container of a pod gets on `node` (devices/container.py): with the pod and the store,
    the device its DRA ResourceClaims' allocation gives its model-server container, when it has one."""
    if pod is not None and store is not None:
        found = modelserver.find_model_server(pod["spec"], configmaps=pod_configmaps(store, pod))
        ctr = pod["spec"]["containers"][found[0]] if found else None
        got = container.for_container(pod, node, ctr, store) if ctr is not None else None
        if got is not None and got.device is not None:
            return got.device
    return container.gpu_device(((node or {}).get("metadata") or {}).get("labels") or {})


def effective_gpu(accelerator: str, view: DeviceView | None, slowdown: float = 1.0) -> GpuSpec:
    """The GPU as one server rank sees it: its memory, its share of the SMs and memory bandwidth."""
    gpu = GpuSpec.from_catalog(accelerator)
    if view is None or (view.mode == "" and slowdown == 1.0):
        return gpu
    return replace(gpu, hbm_bytes=float(view.memory_mib * MIB), peak_flops=gpu.peak_flops * view.compute / slowdown,
                   hbm_bw=gpu.hbm_bw * view.bandwidth / slowdown)


def claimed_mib(args: EngineArgs, view: DeviceView) -> int:
    """What the server reserves of its device: vLLM's --gpu-memory-utilization (TGI's --cuda-memory-fraction) of
    the device's total as CUDA reports it."""
    return int(args.gpu_memory_utilization * view.memory_mib * CUDA_VISIBLE_FRACTION)


def check_free_memory(args: EngineArgs, view: DeviceView, used_by_others_mib: int) -> None:
    """vLLM's start-up check against the memory other processes hold on a time-sliced GPU."""
    total = view.memory_mib * MIB * CUDA_VISIBLE_FRACTION
    free = max(0.0, total - used_by_others_mib * MIB)
    want = args.gpu_memory_utilization * total
    if free >= want:
        return
    if args.engine == "vllm":
        raise StartupFailure(
            f"ValueError: Free memory on device cuda:0 ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup is less "
            f"than desired GPU memory utilization ({args.gpu_memory_utilization}, {want / GIB:.2f} GiB). Decrease "
            "GPU memory utilization or reduce GPU memory used by other processes.", "init")
    # TGI's process holds only its CUDA context when it asks for its fraction
    raise StartupFailure(torch_oom_message(want - free, total, free, NON_TORCH_BYTES, 0.0), "init")


ALLOW_LONG_MAX_MODEL_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def allows_long_max_model_len(env: dict[str, str]) -> bool:
    """vLLM's envs.py reads VLLM_ALLOW_LONG_MAX_MODEL_LEN as on when it is "1" or "true" (any case)."""
    return env.get(ALLOW_LONG_MAX_MODEL_LEN, "0").strip().lower() in ("1", "true")


def context_length_error(args: EngineArgs, spec: ModelSpec, allow_long: bool = False) -> str | None:
    """vLLM's refusal of a --max-model-len above the model's context (vllm/config/model.py _get_and_verify_max_len,
    vllm-project/vllm@0052a5b8, raised from ModelConfig's validator, so `vllm serve` exits before loading
    anything), in its words; None when it starts (or VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, where vLLM only warns).
    The derived length prints as a float for the RoPE models of the twin's table (vLLM multiplies it by the rope
    scaling factor, 1.0 by default), an int for Gemma 3 (its 128K is already scaled)."""
    user = args.max_model_len if args.engine == "vllm" else None
    if user is None or user <= spec.max_position_embeddings or allow_long:
        return None
    mpe = spec.max_position_embeddings
    derived = mpe if "gemma-3" in spec.name else float(mpe)
    return (f"User-specified max_model_len ({user}) is greater than the derived max_model_len "
            f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow "
            f"overriding this maximum, set the env var {ALLOW_LONG_MAX_MODEL_LEN}=1. {ALLOW_LONG_MAX_MODEL_LEN} must "
            "be used with extreme caution. If the model uses relative position encoding (RoPE), positions exceeding "
            "derived_max_model_len lead to nan. If the model uses absolute position encoding, positions exceeding "
            "derived_max_model_len will cause a CUDA array out-of-bounds error.")


def parallel_problems(args: EngineArgs, spec: ModelSpec, visible: int,
                      allocated: int | None = None) -> list[tuple[str, str, str]]:
    """(flag dest, message, severity) for a parallel layout the server refuses or that leaves GPUs idle: attention
    heads not divisible by the tensor-parallel size (perf.heads_error), more ranks than the devices one process of
    the container enumerates (`visible`: devices/container.py; a MIG container sees one instance however many it
    was given) -- vLLM: vllm/v1/worker/gpu_worker.py init_device's assertion; TGI: each shard asserts
    `world_size <= torch.cuda.device_count()`, "Each process is one gpu" (server/text_generation_server/utils/
    dist.py initialize_torch_distributed) --, fewer ranks than the `allocated` devices (the rest idle)."""
    allocated = visible if allocated is None else allocated
    tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
    if args.engine != "vllm":
        if tp > visible:
            return [("tensor_parallel_size", "AssertionError: Each process is one gpu", "error")]
        return []
    out = []
    refused = heads_error(spec, tp)
    if refused:
        out.append(("tensor_parallel_size", refused, "error"))
    world = tp * pp
    dest = "pipeline_parallel_size" if "pipeline_parallel_size" in args.flag_fields else "tensor_parallel_size"
    if world > visible:
        out.append((dest, f"AssertionError: local_world_size ({world}) must be less than or equal to the number of "
                    f"visible devices ({visible}).", "error"))
    elif world * max(1, args.data_parallel_size) < allocated:
        out.append((dest, f"vLLM runs on tensor x pipeline parallel = {world} of the container's {allocated} GPUs; "
                    f"the other {allocated - world} sit idle and are billed", "notice"))
    return out


@functools.lru_cache(maxsize=64)
def _perf_model(spec: ModelSpec, gpu: GpuSpec, tp: int, pp: int, links: HostLinks | None = None) -> PerfModel:
    """One step model per model, device and layout (read-only after it is built; ~26 ms to build): the kubelet's
    cold start and the data plane size the same server, and replicas share their shape."""
    if links is None:
        return PerfModel(spec, gpu, tp, pp=pp)
    return PerfModel(spec, gpu, tp, pp=pp, tp_link=links.interconnect("tp"), pp_link=links.interconnect("pp"))


# A LeaderWorkerSet group's leader pod (kubernetes-sigs/lws api/leaderworkerset/v1: worker-index "0" and the size
# annotation): vLLM's multi-node recipe on LWS (lws docs/examples/vllm/GPU/lws.yaml) starts a Ray cluster over the
# group's pods and serves from the leader with --tensor-parallel-size x --pipeline-parallel-size = every GPU of the
# group, so the leader's server sees size x its own GPUs.
LWS_SIZE, LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/size", "leaderworkerset.sigs.k8s.io/worker-index"


def group_hosts(pod: dict | None) -> int:
    """How many hosts (pods of one GPU count each) a pod's model server spans: its LWS group's size for a group's
    leader, else 1."""
    meta = (pod or {}).get("metadata") or {}
    if (meta.get("labels") or {}).get(LWS_WORKER_INDEX) != "0":
        return 1
    size = str((meta.get("annotations") or {}).get(LWS_SIZE, "1"))
    return max(1, int(size)) if size.isdigit() else 1


@dataclass(frozen=True)
class HostLinks:
    """The tiers a server over `hosts` hosts of `per_host` GPUs talks over between hosts: the pool's network tier
    (workloads.network: GPUDirect-TCPXO on A3 Mega, ...) as a point-to-point path for the pipeline stages' sends,
    and, when the tensor-parallel group itself spans hosts, as the all-reduce's bus bandwidth (hierarchical:
    2(N-1)/N of the buffer over each node's NICs, network.py's rule, written as a ring over all tp ranks)."""

    tier: str
    hosts: int
    per_host: int
    tp: int
    node_gbs: float
    gpu_gbs: float
    latency_us: float

    def interconnect(self, which: str) -> collectives.Interconnect | None:
        src = f"workloads.network tier {self.tier} between {self.hosts} hosts"
        if which == "pp":
            return collectives.Interconnect(f"{self.tier}-p2p", self.gpu_gbs, self.latency_us, self.gpu_gbs,
                                            self.latency_us, src)
        if self.tp <= self.per_host:
            return None  # the tensor-parallel group stays on one host's NVLink
        n, hosts = self.tp, min(self.hosts, -(-self.tp // self.per_host))
        busbw = self.node_gbs * ((n - 1) / n) / ((hosts - 1) / hosts)
        return collectives.Interconnect(f"{self.tier}-ring", busbw, self.latency_us, self.gpu_gbs, self.latency_us,
                                        src)


def host_links(args: EngineArgs, node: dict | None, hosts: int, per_host: int) -> HostLinks | None:
    """The links between the hosts of a multi-host server on this node's pool; None for one host."""
    if hosts <= 1 or node is None or per_host < 1:
        return None
    from kubetwin.workloads import network

    topo = network.topology([node, node], [per_host, per_host])  # the group's hosts: the leader's pool (exclusive)
    return HostLinks(topo.tier, hosts, per_host, args.tensor_parallel_size, topo.node_gbs, topo.gpu_gbs,
                     topo.base_latency_us + topo.hop_latency_us)


def reset_step_models() -> None:
    """Forget the step models built so far (a calibration tool that changes perf.CALIBRATIONS calls this)."""
    _perf_model.cache_clear()


def size(args: EngineArgs, spec: ModelSpec, accelerator: str, view: DeviceView | None,
         slowdown: float = 1.0, links: HostLinks | None = None) -> Sized:
    """The engine's args, step model and KV blocks on this device; StartupFailure when vLLM (or TGI) would exit."""
    gpu = effective_gpu(accelerator, view, slowdown)
    args = modelserver.resolve_defaults(args, gpu.hbm_bytes / GIB, spec.max_position_embeddings, accelerator)
    try:
        perf = _perf_model(spec, gpu, args.tensor_parallel_size, args.pipeline_parallel_size, links)
    except ValueError as err:
        raise StartupFailure(str(err), "init") from None
    total = gpu.hbm_bytes * CUDA_VISIBLE_FRACTION
    room = total - NON_TORCH_BYTES
    if perf.weight_bytes_per_gpu > room:
        # the weights load tensor by tensor: the first one past the device's memory fails (one MLP up/gate
        # projection, the largest per-layer tensor)
        tensor = spec.hidden_size * spec.intermediate_size * (2 if spec.gated_mlp else 1) * spec.dtype_bytes
        tensor /= args.tensor_parallel_size
        loaded = math.floor(room / tensor) * tensor if tensor < room else 0.0
        raise StartupFailure(torch_oom_message(tensor, total, room - loaded, NON_TORCH_BYTES + loaded, loaded), "load")
    util = args.gpu_memory_utilization
    if args.engine == "trtllm" and args.triton is not None:
        # TensorRT-LLM sizes its KV cache as kv_cache_free_gpu_mem_fraction of the memory free once the engine
        # (weights, activations, runtime) is loaded (tensorrtllm_backend docs/model_config.md), not as a fraction
        # of the whole device: the same blocks as vLLM's rule at this utilization
        used = (perf.weight_bytes_per_gpu + NON_TORCH_BYTES
                + perf.activation_peak_bytes(args.max_num_batched_tokens or 8192, args.max_num_seqs or 256))
        frac = args.triton.kv_free_fraction if args.triton.kv_free_fraction is not None else 0.9
        util = min(1.0, (used + frac * max(0.0, total - used)) / total)
    try:
        blocks = perf.num_gpu_blocks(util, args.block_size, args.max_num_batched_tokens, args.max_num_seqs)
    except ValueError as err:
        raise StartupFailure(str(err), "profile") from None
    if args.triton is not None and args.triton.max_kv_tokens:
        blocks = max(1, min(blocks, -(-args.triton.max_kv_tokens // args.block_size)))  # max_tokens_in_paged_kv_cache
    if args.engine == "trtllm" and args.max_model_len is not None:
        # TensorRT-LLM does not refuse a sequence length its KV cache cannot hold: it caps the attention window at
        # the cache's tokens (a warning) and serves shorter requests
        args.max_model_len = min(args.max_model_len, max(1, blocks - 1) * args.block_size)  # vLLM's null block
    if args.max_model_len is not None:
        why = max_model_len_error(blocks, args.block_size, args.max_model_len, perf.kv_bytes_per_token_per_gpu)
        if why:
            raise StartupFailure(why, "profile")
    return Sized(args, perf, blocks)


def build_engine(args: EngineArgs, spec: ModelSpec, accelerator: str, view: DeviceView | None,
                 slowdown: float = 1.0, *, name: str = "",
                 on_finish: Callable[[Request], None] | None = None,
                 links: HostLinks | None = None) -> tuple[EngineArgs, Engine]:
    """(the resolved args, the engine) of a vLLM/TGI server on this device: the one way the data plane builds a
    pod's engine and the live emulator builds its own, so both time requests identically. ValueError
    (StartupFailure) when the server would exit. `links`: a server spread over hosts (host_links)."""
    sized = size(args, spec, accelerator, view, slowdown, links)
    args = sized.args
    engine = Engine(args, sized.perf, sized.blocks, name=name, max_model_len=args.max_model_len,  # type: ignore[arg-type]
                    on_finish=on_finish)
    return args, engine


def start(args: EngineArgs, spec: ModelSpec, pod: dict, node: dict | None, gpus: GpuRuntime | None,
          store: Store | None = None) -> Sized:
    """The server starting on its node: on a shared GPU it first checks the memory the GPU's other tenants hold,
    then, once sized, holds its own reservation there (released when the pod stops). With the `store`, devices
    given through DRA ResourceClaims count as the device plugin's (devices/container.for_container)."""
    found = modelserver.find_model_server(pod["spec"], configmaps=pod_configmaps(store, pod))
    ctr = pod["spec"]["containers"][found[0]] if found else None
    got = container.for_container(pod, node, ctr, store) if ctr is not None else None
    allocated = (got.allocated if got is not None and got.devices else
                 modelserver.gpu_count(ctr) if ctr is not None else 1)
    visible = got.visible if got is not None and got.devices else allocated
    hosts = group_hosts(pod)  # an LWS leader's server sees its group's GPUs (the Ray cluster over the group)
    links = host_links(args, node, hosts, visible)
    allocated, visible = allocated * hosts, visible * hosts
    env = {str(e.get("name")): str(e.get("value", "")) for e in (ctr or {}).get("env") or [] if isinstance(e, dict)}
    refused = context_length_error(args, spec, allows_long_max_model_len(env)) or next(
        (msg for _, msg, sev in parallel_problems(args, spec, visible, allocated) if sev == "error"), None)
    if refused:
        raise StartupFailure(refused, "init")
    view = (got.device if got is not None and got.device is not None  # device_of's answer, already resolved
            else container.gpu_device(((node or {}).get("metadata") or {}).get("labels") or {}))
    accel = (((node or {}).get("metadata") or {}).get("labels") or {}).get(GKE_ACCELERATOR, "")
    if view is not None and view.shared and gpus is not None and node is not None and view.mode != "mps":
        gpu, _ = gpus.shared_gpu_for(node, view)
        check_free_memory(args, view, sum(t.demand.memory_mib for t in gpu.tenants.values()))
    sized = size(args, spec, accel, view, links=links)
    if view is not None and view.shared and gpus is not None and node is not None:
        gpus.attach(pod, node, view, claimed_mib(sized.args, view))
    return sized

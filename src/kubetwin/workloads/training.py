"""Step time of a training job: compute + exposed communication + data stall + amortized checkpoint writes.

The spec comes from `training.kubetwin.io/*` annotations (workloads/training_spec.py); the kubelet asks
workloads/training_hook.py, which calls `step_breakdown` with the job's placement, how long a pod runs.

compute = flops_per_token x tokens_per_step / (GPUs x peak bf16 x MFU); pipeline bubble = compute x (pp-1)/m for m
micro-batches (1F1B schedule, Narayanan et al. 2021 "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM" §2.2). Backward is 2/3 of compute (4N of the 6N FLOPs per token, Kaplan et al. 2020).

Communication (ranks laid out TP fastest, then DP, then PP: Megatron-LM's default order "tp-cp-ep-dp-pp",
megatron/core/parallel_state.py; rank r runs on the GPU slots of the job's pods in completion-index order):
- DP gradient all-reduce of 2 x params / (tp x pp) bytes (bf16 gradients). It overlaps the backward pass of the
  last micro-batch (gradient accumulation syncs once, DDP no_sync) except the last bucket: 25 MiB
  (torch.nn.parallel.DistributedDataParallel bucket_cap_mb default 25, https://pytorch.org/docs/stable/generated/
  torch.nn.parallel.DistributedDataParallel.html). exposed = t(last bucket) + max(0, t(all) - t(last) - backward/m).
- FSDP (ZeRO-3): per micro-batch an all-gather of the shard for forward, another for backward and a
  reduce-scatter of gradients; prefetch overlaps them with the micro-batch's compute except the first layer's
  all-gather (PyTorch FSDP forward/backward prefetch). exposed = m x (first + max(0, t - first - compute/m)).
- TP: 4 all-reduces of the activations (micro-batch x seq x hidden x 2 bytes) per layer per micro-batch, 2 forward
  and 2 backward (Shoeybi et al. 2019 "Megatron-LM" §3); on the critical path, never overlapped.
- PP: activations sent forward and gradients back per micro-batch between neighbouring stages, 2 x m transfers;
  counted as exposed (twin assumption: no p2p overlap).
Collective times come from workloads/network.py (`topology`, `collective_time`) through `collective()`, the one
adapter.

Data: a step reads global-batch x bytes-per-sample from the data path's storage (storage.py). A shared file system
(Parallelstore, Filestore, Hyperdisk ML) gives its instance rate to the whole job; per-VM stores (PD, Cloud Storage
FUSE, local SSD) give their rate per node (twin assumption). Each VM reads at most its per-VM cap
(storage.per_vm_read_cap: the general-purpose NIC for Cloud Storage FUSE, Parallelstore and Filestore; the machine's
Hyperdisk limit for Hyperdisk ML), so a shared store gives min(instance rate, sum of the nodes' caps) and a per-VM
store sum(min(rate, cap)). A step that opens dataset-files-per-step files also pays files / the store's file rate
(Parallelstore and Filestore read IOPS for the instance, Cloud Storage FUSE files/s per VM): read = max(bytes / rate,
files / file rate). streaming: stall = read time; pipelined: stall =
max(0, read - the step's compute and exposed comm) (prefetch overlaps the whole step); prestaged: 0, and the copy of
the dataset is paid once when the pod starts.
Checkpoints are written synchronously (training pauses) every checkpoint-every steps: size / write rate; sharded
(every node writes its part) when FSDP, TP or PP shard the state, else written by rank 0's node alone (torch.save
on rank 0, the DDP recipe). A resumed pod first reads the checkpoint back at the read rate (restart time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kubetwin import catalog
from kubetwin.devices.container import DeviceView
from kubetwin.k8s.names import GCE_TOPOLOGY_BLOCK, GKE_PLACEMENT_GROUP, INSTANCE_TYPE
from kubetwin.workloads.storage import MIB, ReadPath, per_vm_read_cap
from kubetwin.workloads.training_spec import TrainingSpec

DDP_BUCKET_BYTES = 25 * MIB  # torch DDP bucket_cap_mb=25 default
BF16 = 2
SHARED_STORES = ("parallelstore", "filestore", "hyperdisk-ml")
# Default write rate when checkpoint-path is on no known volume: a pd-balanced disk's per-VM write cap, 1200 MiB/s
# (https://cloud.google.com/compute/docs/disks/performance via catalog_draft.yaml storage.persistent_disk).
DEFAULT_WRITE = ReadPath("pd-balanced", 1200 * MIB, "no checkpoint volume: pd-balanced per-VM write cap (1200 MiB/s)")
PLACEMENT_GROUP = GKE_PLACEMENT_GROUP  # the label nodepool.py gives a compact pool's nodes
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"  # the advice's words (kueue.tas.request.REQUIRED)
# Default MFU per accelerator: end-to-end published figures (they already include some exposed communication),
# used here as the math efficiency, so the twin is on the slow side (twin assumption). Per GPU: the catalog's
# `training_mfu` (machines.yaml, with sources); TPU 0.46: PaLM (Chowdhery et al. 2022, 46.2% MFU on 6144 TPU v4
# chips); a GPU without a figure: 0.40, the H100's.
DEFAULT_TPU_MFU, FALLBACK_MFU = 0.46, 0.40


def gpu_default_mfu(gpu: str) -> float:
    """The default training MFU on this GPU (catalog `training_mfu`, FALLBACK_MFU when it has none)."""
    try:
        return catalog.gpu_type(gpu).training_mfu or FALLBACK_MFU
    except catalog.CatalogError:
        return FALLBACK_MFU


class Network(Protocol):
    """What workloads/network.py provides (and a test's fake)."""

    def topology(self, nodes: list[dict], gpus_per_node: list[int]) -> Any: ...

    def collective_time(self, op: str, nbytes: float, topo: Any, group: str = "all") -> float: ...


def default_network() -> Network:
    """The twin's network model (workloads/network.py); tests pass a fake with the same two functions."""
    from kubetwin.workloads import network

    return network  # type: ignore[return-value]


def collective(net: Network, op: str, nbytes: float, nodes: list[dict], gpus_per_node: list[int],
               group: str = "all") -> float:
    """THE adapter to the network model: seconds for `op` over the ranks `gpus_per_node` of `nodes` (group "all"),
    or over one rank per node while every rank of those nodes runs the same collective at once (group
    "cross_node": data parallel across tensor-parallel nodes)."""
    if nbytes <= 0 or (sum(gpus_per_node) <= 1 if group == "all" else len(nodes) <= 1):
        return 0.0
    return float(net.collective_time(op, nbytes, net.topology(nodes, gpus_per_node), group=group))


class _Scaled:
    """A network `factor` times as fast: the "faster network tier" what-if."""

    def __init__(self, net: Network, factor: float) -> None:
        self.net, self.factor = net, factor

    def topology(self, nodes: list[dict], gpus_per_node: list[int]) -> Any:
        return self.net.topology(nodes, gpus_per_node)

    def collective_time(self, op: str, nbytes: float, topo: Any, group: str = "all") -> float:
        return self.net.collective_time(op, nbytes, topo, group=group) / self.factor


@dataclass(frozen=True)
class Placement:
    """Where the job runs: each pod's node and accelerator count in rank order, the dense bf16 peak of one
    rank's device (TFLOPS: a MIG instance's share of its GPU's), its default MFU, and the storage
    paths the data and checkpoints live on (None: none / local)."""

    pods: tuple[tuple[dict, int], ...]
    peak_tflops: float
    default_mfu: float = FALLBACK_MFU
    read: ReadPath | None = None
    checkpoint_write: ReadPath | None = None
    checkpoint_read: ReadPath | None = None
    # Why the job's NCCL runs without the GPUDirect its nodes are built for (workloads/gpudirect.py): one line per
    # distinct set-up its pods lack; empty when they have it, or when the job has one node (NVLink only)
    gpudirect: tuple[str, ...] = ()
    # the pods on their nodes as they would be with that set-up (the what-if "complete the GPUDirect set-up")
    gpudirect_pods: tuple[tuple[dict, int], ...] = ()
    device: DeviceView | None = None  # what one rank's process computes on (devices/container.py)

    @property
    def world(self) -> int:
        return sum(n for _, n in self.pods)

    def nodes(self) -> list[dict]:
        """Distinct nodes in rank order."""
        seen: dict[str, dict] = {}
        for node, _ in self.pods:
            seen.setdefault(_node_name(node), node)
        return list(seen.values())

    def ranks_on(self, nodes: list[dict]) -> list[int]:
        """How many of the job's ranks each of `nodes` holds."""
        count: dict[str, int] = {}
        for node, n in self.pods:
            count[_node_name(node)] = count.get(_node_name(node), 0) + n
        return [max(1, count.get(_node_name(n), 1)) for n in nodes]

    def group(self, ranks: list[int]) -> tuple[list[dict], list[int]]:
        """The nodes holding `ranks` and how many of them each holds (network.topology's arguments)."""
        slots = [node for node, n in self.pods for _ in range(n)]
        count: dict[str, list] = {}
        for r in ranks:
            node = slots[r % len(slots)] if slots else {}
            count.setdefault(_node_name(node), [node, 0])[1] += 1
        return [v[0] for v in count.values()], [v[1] for v in count.values()]


def _node_name(node: dict) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


@dataclass(frozen=True)
class Advice:
    """One what-if: the change, the job's time with it (s), and the fraction of the job's time it saves."""

    change: str
    job_seconds: float
    saving: float


@dataclass
class StepTime:
    """Where one optimizer step's time goes (seconds), and what the job costs around it."""

    compute: float
    bubble: float
    comm: dict[str, float]  # exposed, by kind: dp, fsdp, tp, pp
    comm_raw: dict[str, float]  # before overlap
    data_stall: float
    read: float  # seconds a step's data takes to read
    checkpoint_write: float  # one checkpoint
    checkpoint_every: int | None
    prestage: float  # paid at every start with data-loading: prestaged
    restart: float  # reading the checkpoint back on resume
    steps: int
    dp: int
    microbatches: int
    advice: list[Advice] = field(default_factory=list)

    @property
    def exposed_comm(self) -> float:
        return sum(self.comm.values())

    @property
    def busy(self) -> float:
        """Compute, bubble and exposed communication: the step without data stall or checkpoints."""
        return self.compute + self.bubble + self.exposed_comm

    @property
    def step(self) -> float:
        """One step without checkpoints (what the checkpoint interval counts in)."""
        return self.busy + self.data_stall

    @property
    def checkpoint(self) -> float:
        """Checkpoint write time amortized per step."""
        return self.checkpoint_write / self.checkpoint_every if self.checkpoint_every else 0.0

    @property
    def total(self) -> float:
        return self.step + self.checkpoint

    @property
    def checkpoints(self) -> int:
        return self.steps // self.checkpoint_every if self.checkpoint_every else 0

    @property
    def work(self) -> float:
        """Seconds of training work: every step plus every checkpoint write (prestage not included)."""
        return self.steps * self.step + self.checkpoints * self.checkpoint_write

    @property
    def checkpoint_interval(self) -> float | None:
        """Seconds of work between checkpoints (the kubelet's checkpoint interval)."""
        return self.checkpoint_every * self.step + self.checkpoint_write if self.checkpoint_every else None

    def explain(self) -> dict[str, Any]:
        """Per-step shares and the what-ifs, ready for `kubetwin explain`."""
        parts = {"compute": self.compute + self.bubble, "comm": self.exposed_comm, "data": self.data_stall,
                 "checkpoint": self.checkpoint}
        return {"step_seconds": self.total, "parts": parts,
                "fractions": {k: v / self.total if self.total else 0.0 for k, v in parts.items()},
                "comm_by_kind": dict(self.comm), "bubble": self.bubble, "prestage": self.prestage,
                "restart": self.restart, "advice": [(a.change, a.saving) for a in self.advice]}


def step_breakdown(spec: TrainingSpec, placement: Placement, net: Network | None = None, *,
                   advise: bool = True) -> StepTime:
    """The step-time model (see the module docstring); `advise` re-evaluates it with one thing changed."""
    net = net if net is not None else default_network()
    world = max(1, placement.world)
    tp, pp = spec.tp, spec.pp
    dp = spec.dp or max(1, world // (tp * pp))
    gpus = dp * tp * pp
    mfu = spec.mfu or placement.default_mfu
    compute = spec.flops_per_token * spec.global_batch * spec.seq_len / (gpus * placement.peak_tflops * 1e12 * mfu)
    m = max(1, spec.global_batch // (dp * spec.micro_batch))
    bubble = compute * (pp - 1) / m
    backward = compute * 2 / 3
    shard = BF16 * spec.params / (tp * pp)
    raw: dict[str, float] = {}
    comm: dict[str, float] = {}
    if dp > 1:
        g_nodes, g_counts = placement.group([i * tp for i in range(dp)])
        group = "all"
        if tp > 1 and len(g_nodes) > 1 and max(g_counts) == 1:  # tp groups per node run their DP collectives at once
            group, g_counts = "cross_node", placement.ranks_on(g_nodes)
        if spec.fsdp:
            first = collective(net, "all_gather", shard / spec.layers, g_nodes, g_counts, group)
            per_mb = 2 * collective(net, "all_gather", shard, g_nodes, g_counts, group) + collective(
                net, "reduce_scatter", shard, g_nodes, g_counts, group)
            raw["fsdp"] = m * per_mb
            comm["fsdp"] = m * (first + max(0.0, per_mb - first - compute / m))
        else:
            t_all = collective(net, "all_reduce", shard, g_nodes, g_counts, group)
            t_last = collective(net, "all_reduce", min(DDP_BUCKET_BYTES, shard), g_nodes, g_counts, group)
            raw["dp"] = t_all
            comm["dp"] = t_last + max(0.0, t_all - t_last - backward / m)
    act = spec.micro_batch * spec.seq_len * spec.hidden_size * BF16
    if tp > 1:
        raw["tp"] = comm["tp"] = 4 * math.ceil(spec.layers / pp) * m * collective(
            net, "all_reduce", act, *placement.group(list(range(tp))))
    if pp > 1:
        raw["pp"] = comm["pp"] = 2 * m * collective(net, "send_recv", act, *placement.group([0, tp * dp]))
    busy = compute + bubble + sum(comm.values())
    node_list = placement.nodes()
    nodes = len(node_list)
    read_rate = _aggregate(placement.read, nodes, node_list)
    file_rate = _file_rate(placement.read, nodes)
    step_bytes = spec.global_batch * spec.sample_bytes
    read = max(step_bytes / read_rate if read_rate else 0.0,
               spec.files_per_step / file_rate if file_rate else 0.0)
    stall = {"streaming": read, "pipelined": max(0.0, read - busy), "prestaged": 0.0}[spec.loading]
    dataset = spec.dataset_bytes or spec.steps * step_bytes
    # the dataset holds dataset / step_bytes steps' worth of files
    prestage = max(dataset / read_rate, spec.files_per_step * dataset / step_bytes / file_rate if file_rate and
                   step_bytes else 0.0) if read_rate and spec.loading == "prestaged" else 0.0
    writers = nodes if (spec.fsdp or tp * pp > 1) else 1
    write = spec.checkpoint_size / _aggregate(placement.checkpoint_write or DEFAULT_WRITE, writers)
    ck_read = _aggregate(placement.checkpoint_read or DEFAULT_WRITE, writers, node_list[:writers])
    every = spec.checkpoint_every
    if every is None and spec.checkpoint_interval_s:
        every = max(1, round(spec.checkpoint_interval_s / (busy + stall)))
    out = StepTime(compute, bubble, comm, raw, stall, read, write if every else 0.0, every, prestage,
                   spec.checkpoint_size / ck_read if every else 0.0, spec.steps, dp, m)
    if advise:
        out.advice = _advice(spec, placement, net, out)
    return out


def _aggregate(path: ReadPath | None, nodes: int, readers: list[dict] | None = None) -> float:
    """Bytes/s the whole job gets: a shared file system's instance rate, or a per-VM rate times the nodes. With
    `readers` (the reading nodes; reads only) each VM is held to its per-VM cap (NIC, Hyperdisk ML machine limit):
    a shared store gives min(instance rate, sum of caps), a per-VM store sum(min(rate, cap))."""
    if path is None:
        return 0.0
    shared = path.kind in SHARED_STORES
    if not readers:
        return path.bytes_per_second * (1 if shared else max(1, nodes))
    caps = [per_vm_read_cap(path, _machine_type(n)) for n in readers]
    if shared:
        return path.bytes_per_second if None in caps else min(path.bytes_per_second, sum(c or 0.0 for c in caps))
    return sum(path.bytes_per_second if c is None else min(path.bytes_per_second, c) for c in caps)


def _file_rate(path: ReadPath | None, nodes: int) -> float:
    """Small-file operations/s the whole job gets (0: the store has no per-file cost in the twin)."""
    if path is None or path.files_per_second <= 0:
        return 0.0
    return path.files_per_second * (1 if path.kind in SHARED_STORES else max(1, nodes))


def _machine_type(node: dict) -> str:
    return str(((node.get("metadata") or {}).get("labels") or {}).get(INSTANCE_TYPE, ""))


def job_seconds(st: StepTime) -> float:
    """Wall time of an uninterrupted run: prestage, then every step and checkpoint."""
    return st.prestage + st.work


def _advice(spec: TrainingSpec, placement: Placement, net: Network, base: StepTime) -> list[Advice]:
    """Re-evaluate the model with one change at a time; the changes that shorten the job, best first."""
    tries: list[tuple[str, TrainingSpec, Placement, Network]] = []
    nodes = placement.nodes()
    if base.exposed_comm > 0 and len(nodes) > 1:  # one node's collectives ride NVLink, not the pool's tier
        tries.append(("faster network tier (2x bandwidth)", spec, placement, _Scaled(net, 2.0)))
    if placement.gpudirect and placement.gpudirect_pods and base.exposed_comm > 0:
        tries.append(("complete the GPUDirect set-up (GKE's guide)", spec,
                      replace(placement, pods=placement.gpudirect_pods, gpudirect=(), gpudirect_pods=()), net))
    groups = {((n.get("metadata") or {}).get("labels") or {}).get(PLACEMENT_GROUP) for n in nodes}
    if len(nodes) > 1 and base.exposed_comm > 0 and (None in groups or len(groups) > 1):
        compact = {_node_name(n): {**n, "metadata": {**(n.get("metadata") or {}), "labels": {
            **((n.get("metadata") or {}).get("labels") or {}), PLACEMENT_GROUP: "kubetwin-compact"}}} for n in nodes}
        pods = tuple((compact[_node_name(n)], c) for n, c in placement.pods)
        tries.append(("compact placement", spec, replace(placement, pods=pods), net))
    blocks = {((n.get("metadata") or {}).get("labels") or {}).get(GCE_TOPOLOGY_BLOCK) for n in nodes}
    if len(nodes) > 1 and base.exposed_comm > 0 and None not in blocks and len(blocks) > 1:
        one = sorted(blocks)[0]
        same = {_node_name(n): {**n, "metadata": {**(n.get("metadata") or {}), "labels": {
            **((n.get("metadata") or {}).get("labels") or {}), GCE_TOPOLOGY_BLOCK: one}}} for n in nodes}
        pods = tuple((same[_node_name(n)], c) for n, c in placement.pods)
        tries.append((f"one block (Kueue {REQUIRED_TOPOLOGY}: {GCE_TOPOLOGY_BLOCK})", spec,
                      replace(placement, pods=pods), net))
    if spec.loading == "streaming" and base.read > 0:
        tries.append(("pipelined loading", replace(spec, loading="pipelined"), placement, net))
    if spec.loading != "prestaged" and base.data_stall > 0:
        tries.append(("prestaged data", replace(spec, loading="prestaged"), placement, net))
    if base.exposed_comm + base.bubble > 0:
        tries.append(("bigger global batch (2x, same tokens)", replace(
            spec, global_batch=spec.global_batch * 2, steps=math.ceil(spec.steps / 2)), placement, net))
    if base.checkpoint_every and base.checkpoint_write > 0:
        tries.append(("checkpoint half as often", replace(spec, checkpoint_every=base.checkpoint_every * 2),
                      placement, net))
    now = job_seconds(base)
    out = []
    for change, s, p, n in tries:
        t = job_seconds(step_breakdown(s, p, n, advise=False))
        if t < now - 1e-9:
            out.append(Advice(change, t, (now - t) / now))
    return sorted(out, key=lambda a: (-a.saving, a.change))

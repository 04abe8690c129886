"""How long an NCCL collective takes on the nodes a job landed on: NVLink inside a node, the node pool's GKE
network tier between nodes, and where the nodes sit (compact placement group, zone, across zones).

Why this shape: a training step's exposed communication is the part the GKE choices change (A3 High vs Mega,
Fast Socket, compact placement), so the model is hierarchical and every inter-node number comes from
`catalog/data/network.yaml`, where each carries its source or says it is a twin assumption.

- Intra-node: `collectives.py`'s Interconnect (Vidur-fitted NVLink4 for H100/H200, 0.8 x NVLink elsewhere, PCIe
  for L4), plus NVLS for all_reduce on 8-GPU Hopper/Blackwell nodes (NCCL takes the faster path).
- Inter-node, per node: GPUDirect tiers move g x per-GPU-NIC x efficiency; socket tiers (gVNIC, plain-TCP
  fallback) a fixed per-node rate derived from the measured TCP fallback; Fast Socket multiplies it (assumption).
- all_reduce across nodes is hierarchical (NCCL tree / NVLS-tree): 2(N-1)/N x S over the node's NICs; all_gather
  and reduce_scatter are a flat ring over all n ranks, (n-1)/n x S over the slowest link (this is what the measured
  2-node rows show: all_reduce busbw 339 vs all_gather 189 on the same A3 Mega NICs). Intra- and inter-node phases
  pipeline, so the bandwidth term is their max, not their sum.
- Latency: tier base + steps x (tier hop + placement hop); steps are ring steps (tree steps for all_reduce at scale).
  Placement: GKE's gce-topology-block / -subblock labels where every node has them (one sub-block, one block,
  across blocks: non-blocking fabric, so latency only), else a compact placement group, one zone, several zones.
- TPU: ICI inside a slice at the documented per-chip all-reduce bandwidth, DCN across slices per host.

Not modelled: NCCL protocol switching (LL/LL128/Simple) and channel ramp-up at mid sizes (1-128 MiB error in
benchmarks/bench_collectives.py), congestion from other jobs, the A4X NVL72 domain across trays, ICI torus shape.
"""

from __future__ import annotations

import fnmatch
import functools
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import yaml

from kubetwin import catalog
from kubetwin.k8s.names import (
    GCE_TOPOLOGY_BLOCK,
    GCE_TOPOLOGY_SUBBLOCK,
    GKE_ACCELERATOR,
    GKE_NODEPOOL,
    GKE_PLACEMENT_GROUP,
    INSTANCE_TYPE,
    ZONE,
)
from kubetwin.workloads import collectives
from kubetwin.workloads.collectives import Interconnect

__all__ = ["FASTSOCKET_LABEL", "GPUDIRECT_LABEL", "GVNIC_LABEL", "NodeNet", "Op", "Tier", "Topology", "capability",
           "collective_time", "cpu_tier", "effective_tier", "explain", "node_net", "pool_problems", "tier", "topology"]

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all"]
PlacementKind = Literal["single_node", "same_subblock", "same_block", "cross_block", "compact", "same_zone",
                        "cross_zone"]
Group = Literal["all", "node", "cross_node"]
GB = 1e9
US = 1e-6
# GKE's own label (GoogleCloudPlatform/container-engine-accelerators@b310111:fast-socket-installer/README.md: the
# installer DaemonSet runs on nodes labelled cloud.google.com/gke-nccl-fastsocket: "true").
FASTSOCKET_LABEL = "cloud.google.com/gke-nccl-fastsocket"
# No GKE node label for these was found in GKE's docs: twin labels.
GVNIC_LABEL = "kubetwin.io/gvnic"
GPUDIRECT_LABEL = "kubetwin.io/gpudirect"
_PLUGIN = {"tcpx": "tcpx", "tcpxo": "tcpxo", "rdma": "rdma", "rdma_a4x": "rdma"}  # capability -> gpuDirect value


@functools.cache
def data() -> dict[str, Any]:
    """network.yaml, parsed once."""
    text = resources.files("kubetwin.catalog").joinpath("data/network.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


@dataclass(frozen=True)
class Tier:
    """One inter-node path as the twin uses it. `node_gbs(g)` is what a node with g ranks moves off-node."""

    name: str
    kind: str  # socket | gpudirect | tpu | cpu_rdma (H4D Cloud RDMA, MPI)
    per_gpu_gbs: float | None  # GPUDirect: the NIC share of one GPU (line rate)
    achieved_node_gbs: float | None  # socket: per-node rate NCCL reaches
    efficiency: float
    base_latency_us: float
    hop_latency_us: float
    source: str

    def node_gbs(self, g: int, n_nodes: int) -> float:
        """Achieved off-node bandwidth of one node with g ranks in a job of n_nodes (GB/s)."""
        if self.kind == "cpu_rdma":  # the node's RDMA NIC, whatever its rank count
            return float(data()["tiers"]["cloud_rdma"]["node_line_gbs"]) * self.efficiency
        if self.kind == "gpudirect":
            mn = data()["multi_node_factor"]
            factor = mn["factor"] if n_nodes >= mn["from_nodes"] else 1.0
            return g * (self.per_gpu_gbs or 0.0) * self.efficiency * factor
        return self.achieved_node_gbs or 0.0

    def gpu_gbs(self, g: int, n_nodes: int) -> float:
        """What one rank's point-to-point transfer gets: its own NIC share (GPUDirect) or the whole socket rate."""
        return self.node_gbs(1, n_nodes) if self.kind == "gpudirect" else self.node_gbs(g, n_nodes)


def tier(name: str) -> Tier:
    """The Tier for a name from `effective_tier` ("gvnic", "tcp_fallback+fastsocket", "tcpxo", ...)."""
    base, _, fs = name.partition("+")
    raw = data()["tiers"]
    if base not in raw:
        raise KeyError(f"unknown network tier {name!r}; known: {', '.join(raw)}")
    r = raw[base]
    src = r.get("achieved_source") or r.get("efficiency_source", "")
    achieved = r.get("achieved_node_gbs")
    if fs:
        f = raw["gvnic_fastsocket"]
        achieved = min(achieved * f["fast_socket_factor"], r["node_line_gbs"] * f["max_line_fraction"])
        src = f"{src} ; Fast Socket: {f['achieved_source']}"
    return Tier(name, r["kind"], r.get("per_gpu_gbs"), achieved, float(r.get("efficiency", 1.0)),
                float(r["base_latency_us"]), float(r["hop_latency_us"]), src)


def capability(machine_type: str) -> str:
    """The network tier a machine type is built for: tcpx/tcpxo/rdma/rdma_a4x, gvnic (other GPU VMs), tpu, none."""
    try:
        mt = catalog.machine_type(machine_type)
        if mt.tpu:
            return "tpu"
        if not mt.gpu:
            return "none"
    except catalog.CatalogError:
        pass  # a4x-highgpu-4g and n1 GPU VMs are not in machines.yaml; the tier table still knows them
    for name in ("tcpx", "tcpxo", "rdma", "rdma_a4x", "gvnic"):
        if any(fnmatch.fnmatch(machine_type, p) for p in data()["tiers"][name]["machines"]):
            return name
    return "none"


def cpu_tier(machine_type: str) -> Tier | None:
    """The RDMA tier a CPU machine is built for (H4D: Cloud RDMA), for HPC jobs that use MPI over RDMA; None for
    every other machine. The GPU collective model keeps `capability` ("none" for CPU machines)."""
    raw = data()["tiers"]
    for name, r in raw.items():
        if r.get("kind") == "cpu_rdma" and any(fnmatch.fnmatch(machine_type, p) for p in r["machines"]):
            return tier(name)
    return None


def effective_tier(machine_type: str, gpu_direct: str | None = None, fast_socket: bool = False,
                   gvnic: bool = True) -> str:
    """The tier NCCL actually uses on a pool: the machine's capability unless gpuDirect says otherwise ("none" on a
    GPUDirect machine = plain-TCP fallback); Fast Socket only on socket tiers with gVNIC (it does not stack with
    GPUDirect: ignored there, see `pool_problems`). A gpuDirect value the machine lacks falls back to capability."""
    cap = capability(machine_type)
    if cap in ("tpu", "none"):
        return cap
    base = cap
    if gpu_direct == "none":
        base = "tcp_fallback" if cap in _PLUGIN else "gvnic"
    if base in ("gvnic", "tcp_fallback") and fast_socket and gvnic:
        return f"{base}+fastsocket"
    return base


def pool_problems(machine_type: str, gpu_direct: str | None, fast_socket: bool,
                  gvnic: bool) -> list[tuple[str, str, str, str]]:
    """(field, message, hint, severity) for a NodePool's networking fields: the rules GKE enforces or documents."""
    out: list[tuple[str, str, str, str]] = []
    cap = capability(machine_type)
    if gpu_direct not in (None, "none") and _PLUGIN.get(cap) != gpu_direct:
        have = f"supports {_PLUGIN[cap]!r}" if cap in _PLUGIN else "has no GPUDirect NICs"
        out.append(("spec.gpuDirect", f"Invalid value: {gpu_direct!r}: machine type {machine_type} {have}",
                    "TCPX needs a3-highgpu-8g/a3-edgegpu-8g, TCPXO a3-megagpu-8g, RDMA a3-ultragpu-8g/a4-highgpu-8g/"
                    "a4x-highgpu-4g (https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth)", "error"))
    if not fast_socket:
        return out
    if cap in ("none", "tpu"):
        out.append(("spec.fastSocket", "NCCL Fast Socket is only supported on node pools with GPUs",
                    "https://cloud.google.com/kubernetes-engine/docs/how-to/nccl-fast-socket (limitations)", "error"))
    elif not gvnic:
        out.append(("spec.fastSocket", "NCCL Fast Socket requires gVNIC: set gvnic: true",
                    "gcloud container node-pools create ... --enable-fast-socket --enable-gvnic "
                    "(https://cloud.google.com/kubernetes-engine/docs/how-to/nccl-fast-socket)", "error"))
    elif cap in _PLUGIN and gpu_direct != "none":
        out.append(("spec.fastSocket", f"NCCL Fast Socket does not stack with GPUDirect-{_PLUGIN[cap].upper()} on "
                    f"{machine_type}: pods with the GPUDirect set-up ignore it; only pods without it (NCCL on "
                    "sockets, workloads/gpudirect.py) use Fast Socket", "remove fastSocket (the GPUDirect plugin "
                    "already carries NCCL traffic), or set gpuDirect: none to run sockets", "notice"))
    return out


@dataclass(frozen=True)
class NodeNet:
    """What the network model needs to know about one Node, read from its GKE labels."""

    name: str
    machine_type: str
    tier: str  # effective tier (see effective_tier)
    zone: str
    placement_group: str | None
    fast_socket: bool  # the pool asked for Fast Socket (applied only when `tier` ends in +fastsocket)
    gvnic: bool
    gpu: str | None = None
    tpu: str | None = None  # TPU generation (v5e, ...)
    slice: str | None = None  # TPU slice key: the pool for a multi-host slice, else the node itself
    pool: str = ""
    block: str | None = None  # cloud.google.com/gce-topology-block
    subblock: str | None = None  # cloud.google.com/gce-topology-subblock


def node_net(node: dict) -> NodeNet:
    """NodeNet from a Node object (labels set by autoscaler/nodepool.py, as GKE sets them)."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    name = meta.get("name", "")
    mt = labels.get(INSTANCE_TYPE, "")
    fs = labels.get(FASTSOCKET_LABEL) == "true"
    gvnic = labels.get(GVNIC_LABEL, "true") == "true"
    pool = labels.get(GKE_NODEPOOL, "")
    tpu_gen = sl = None
    if capability(mt) == "tpu":
        from kubetwin.devices import tpu as tpu_dev

        tpu_gen = catalog.machine_type(mt).tpu
        topo = labels.get(tpu_dev.TOPOLOGY_LABEL)
        sl = pool if topo and tpu_dev.is_multi_host(mt, topo) else name
    return NodeNet(name=name, machine_type=mt, tier=effective_tier(mt, labels.get(GPUDIRECT_LABEL), fs, gvnic),
                   zone=labels.get(ZONE, ""),
                   placement_group=labels.get(GKE_PLACEMENT_GROUP), fast_socket=fs, gvnic=gvnic,
                   gpu=labels.get(GKE_ACCELERATOR), tpu=tpu_gen, slice=sl, pool=pool,
                   block=labels.get(GCE_TOPOLOGY_BLOCK), subblock=labels.get(GCE_TOPOLOGY_SUBBLOCK))


@dataclass(frozen=True)
class Topology:
    """Where a job's ranks are: numbers precomputed so `collective_time` is arithmetic."""

    nodes: tuple[NodeNet, ...]
    gpus_per_node: tuple[int, ...]
    n_nodes: int
    n_ranks: int
    tier: str  # the slowest inter-node tier ("" for one node)
    placement: PlacementKind
    same_placement_group: bool
    same_zone: bool
    intra: Interconnect  # the slowest node's intra-node link
    intra_gpu: str | None  # its GPU (NVLS eligibility)
    node_gbs: float  # slowest node's achieved off-node GB/s at its rank count
    gpu_gbs: float  # slowest single-rank off-node GB/s (send_recv)
    base_latency_us: float
    hop_latency_us: float  # tier hop + placement hop
    tpu: str | None = None
    n_slices: int = 1


def _intra_link(nn: NodeNet) -> tuple[Interconnect, float]:
    """(Interconnect, ring busbw GB/s) of a node's GPUs; TPU hosts get an ICI Interconnect."""
    if nn.tpu:
        t = data()["tpu"]
        bw = t["generations"][nn.tpu]["allreduce_gbs_per_chip"] * t["ici_efficiency"]
        return Interconnect(f"ici-{nn.tpu}", bw, t["ici_latency_us"], bw, t["ici_latency_us"],
                            t["generations"][nn.tpu]["source"]), bw
    gt = catalog.gpu_type(nn.gpu) if nn.gpu else None
    link = collectives.for_gpu(nn.gpu or "", gt.nvlink_gbps if gt else None)
    return link, link.alpha_beta(8)[1] / GB


def topology(nodes: list[dict], gpus_per_node: list[int]) -> Topology:
    """The Topology of a job whose ranks sit on `nodes` (Node objects), gpus_per_node[i] ranks on nodes[i]
    (TPU: chips). Raises ValueError on mismatched lengths or an empty job."""
    if not nodes or len(nodes) != len(gpus_per_node) or min(gpus_per_node) < 1:
        raise ValueError("topology needs one positive rank count per node")
    nets = tuple(node_net(n) for n in nodes)
    gpn = tuple(int(g) for g in gpus_per_node)
    n_nodes = len(nets)
    intra, intra_bw = min((_intra_link(nn) for nn in nets), key=lambda x: x[1])
    intra_gpu = min(nets, key=lambda nn: _intra_link(nn)[1]).gpu
    groups = {nn.placement_group for nn in nets}
    same_pg = len(groups) == 1 and None not in groups
    same_zone = len({nn.zone for nn in nets}) == 1
    placement = _placement(nets, same_pg, same_zone)
    p_hop = 0.0 if n_nodes == 1 else float(data()["placement"][placement]["hop_us"])
    tpu_gen = nets[0].tpu if all(nn.tpu for nn in nets) else None
    if tpu_gen:
        t = data()["tpu"]
        slices = len({nn.slice for nn in nets})
        dcn = t["generations"][tpu_gen].get("dcn_gbs_per_host") or t["dcn_default_gbs_per_host"]
        node_bw = dcn * t["dcn_efficiency"]
        return Topology(nets, gpn, n_nodes, sum(gpn), "tpu_dcn" if slices > 1 else "tpu_ici", placement, same_pg,
                        same_zone, intra, None, node_bw, node_bw, t["dcn_base_latency_us"],
                        t["dcn_hop_latency_us"] + p_hop, tpu_gen, slices)
    tiers = [tier(nn.tier) if nn.tier not in ("none", "tpu") else tier("gvnic") for nn in nets]
    node_bw = [t.node_gbs(g, n_nodes) for t, g in zip(tiers, gpn, strict=True)]
    slow = min(range(n_nodes), key=lambda i: node_bw[i])
    gpu_bw = min(t.gpu_gbs(g, n_nodes) for t, g in zip(tiers, gpn, strict=True))
    name = "" if n_nodes == 1 else tiers[slow].name
    return Topology(nets, gpn, n_nodes, sum(gpn), name, placement, same_pg, same_zone, intra, intra_gpu,
                    node_bw[slow], gpu_bw, max(t.base_latency_us for t in tiers),
                    max(t.hop_latency_us for t in tiers) + p_hop)


def _placement(nets: tuple[NodeNet, ...], same_pg: bool, same_zone: bool) -> PlacementKind:
    """Where the job's nodes sit. GKE's gce-topology labels, where every node has them, say it exactly (one
    sub-block, one block, or several blocks of the zone's cluster); else a shared compact placement group, one zone,
    or several zones."""
    if len(nets) == 1:
        return "single_node"
    if not same_zone:
        return "cross_zone"
    blocks = {nn.block for nn in nets}
    if None not in blocks:
        if len(blocks) > 1:
            return "cross_block"
        subblocks = {nn.subblock for nn in nets}
        return "same_subblock" if len(subblocks) == 1 and None not in subblocks else "same_block"
    return "compact" if same_pg else "same_zone"


def _nvls(gpu: str | None, g: int) -> tuple[float, float] | None:
    """(latency s, busbw bytes/s) of NVLS all_reduce on this GPU with g ranks, or None where NCCL would not use it."""
    r = data()["nvls"].get(gpu or "")
    if not isinstance(r, dict) or g < r["min_gpus"]:
        return None
    return r["latency_us"] * US, r["busbw_gbs"] * GB


def _intra(op: str, s: float, g: int, topo: Topology) -> tuple[float, float]:
    """(latency s, bandwidth s) of `op` among g ranks inside one node."""
    if g <= 1:
        return 0.0, 0.0
    link = topo.intra
    alpha, bw = link.alpha_beta(g)
    if op == "all_reduce":
        ring = (alpha, 2 * (g - 1) / g * s / bw)
        nv = _nvls(topo.intra_gpu, g)
        alt = (nv[0], 2 * (g - 1) / g * s / nv[1]) if nv else ring
        return min(ring, alt, key=sum)
    if op == "send_recv":
        return link.p2p_latency_us * US, s / (link.p2p_gbps * GB)
    return alpha, (g - 1) / g * s / bw  # all_gather, reduce_scatter, all_to_all


def _tpu(op: str, s: float, topo: Topology, group: str) -> tuple[int, float, float, float, float]:
    """(ranks, intra latency, intra bw, inter latency, inter bw) for a TPU job: ICI inside each slice, DCN
    between slices (hierarchical, like NCCL's across nodes). "cross_node" = the DCN phase alone (or ICI across
    the hosts of a single slice)."""
    m = topo.n_slices
    chips = topo.n_ranks // m
    hosts = topo.n_nodes // m
    intra_lat, intra_bw = (0.0, 0.0) if group == "cross_node" and m > 1 else _intra(op, s, chips, topo)
    if m == 1:
        return chips, intra_lat, intra_bw, 0.0, 0.0
    b = hosts * topo.node_gbs * GB  # one slice's DCN
    lat = topo.base_latency_us * US
    if op == "send_recv":
        return 2, intra_lat, intra_bw, lat + topo.hop_latency_us * US, s / (topo.gpu_gbs * GB)
    factor = {"all_reduce": 2 * (m - 1) / m, "all_to_all": chips * (m - 1) / m}.get(op, (m - 1) / m)
    steps = 2 * min(m - 1, math.ceil(math.log2(m))) if op == "all_reduce" else m - 1
    return m if group == "cross_node" else topo.n_ranks, intra_lat, intra_bw, lat + steps * topo.hop_latency_us * US, \
        factor * s / b


def explain(op: Op, nbytes: float, topo: Topology, group: Group = "all") -> dict[str, Any]:
    """Where a collective's time goes: {"intra_s", "inter_s", "latency_s", "total_s", "bottleneck", ...}.
    total = latency + max(intra, inter): NCCL pipelines the intra- and inter-node phases chunk by chunk.

    nbytes follows nccl-tests: all_reduce/reduce_scatter the input buffer, all_gather the gathered output,
    all_to_all one rank's send buffer, send_recv the message. group: "all" ranks, "node" (one node's ranks, e.g.
    tensor parallel), "cross_node" (one rank per node, all g such groups at once, e.g. data parallel over TP)."""
    if op not in ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all"):
        raise ValueError(f"unknown collective {op!r}")
    s, n_nodes, g_max, g_min = float(nbytes), topo.n_nodes, max(topo.gpus_per_node), min(topo.gpus_per_node)
    intra_lat = intra_bw = inter_bw = inter_lat = 0.0
    if topo.tpu and group != "node":
        ranks, intra_lat, intra_bw, inter_lat, inter_bw = _tpu(op, s, topo, group)
    elif group == "node" or n_nodes == 1:
        intra_lat, intra_bw = _intra(op, s, g_max, topo)
        ranks = g_max
    else:
        hop, base = topo.hop_latency_us * US, topo.base_latency_us * US
        node_b = topo.node_gbs * GB
        if group == "cross_node":
            ranks, b, m = n_nodes, node_b / g_min, n_nodes
        else:
            ranks, b, m = topo.n_ranks, node_b, n_nodes
        ar_steps = 2 * min(m - 1, math.ceil(math.log2(m)))  # NCCL's tree caps all_reduce steps at scale
        if op == "all_reduce":
            inter_bw = 2 * (m - 1) / m * s / b
            if group == "all" and g_max > 1:  # NVLS-tree / tree: the intra phase at the faster NVLink path
                intra_lat, ring_bw = topo.intra.alpha_beta(g_max)
                nv = _nvls(topo.intra_gpu, g_max)
                intra_bw = 2 * (g_max - 1) / g_max * s / max(ring_bw, nv[1] if nv else 0.0)
            inter_lat = base + ar_steps * hop
        elif op in ("all_gather", "reduce_scatter"):
            inter_bw = (ranks - 1) / ranks * s / b
            if group == "all":
                intra_bw = (ranks - 1) / ranks * s / (topo.intra.alpha_beta(g_max)[1])
            inter_lat = base + (ranks - 1) * hop
        elif op == "send_recv":
            ranks, inter_bw, inter_lat = 2, s / (topo.gpu_gbs * GB), base + hop
        else:  # all_to_all: each node sends g x S x (N-1)/N off-node
            g = 1 if group == "cross_node" else g_max
            inter_bw = g * s * (m - 1) / m / (b if group == "cross_node" else node_b)
            if group == "all":
                intra_bw = s * (g_max - 1) / ranks / topo.intra.alpha_beta(g_max)[1]
            inter_lat = base + hop
    latency = intra_lat + inter_lat
    total = latency + max(intra_bw, inter_bw)
    parts = {"latency": latency, "intra": intra_bw, "inter": inter_bw}
    factor = {"all_reduce": 2 * (ranks - 1) / ranks, "send_recv": 1.0}.get(op, (ranks - 1) / ranks if ranks else 0)
    return {"op": op, "nbytes": s, "group": group, "ranks": ranks, "n_nodes": n_nodes, "gpus_per_node": g_max,
            "tier": topo.tier or topo.intra.name, "intra_link": topo.intra.name, "placement": topo.placement,
            "intra_s": intra_bw, "inter_s": inter_bw, "latency_s": latency, "total_s": total,
            "bottleneck": max(parts, key=lambda k: parts[k]),
            "busbw_gbps": factor * s / total / GB if total > 0 else 0.0}


def collective_time(op: Op, nbytes: float, topo: Topology, group: Group = "all") -> float:
    """Seconds for one NCCL collective on `topo` (see `explain` for the conventions and the breakdown)."""
    return float(explain(op, nbytes, topo, group)["total_s"])

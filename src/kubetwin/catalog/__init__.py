"""GKE hardware and price catalog (us-central1, USD/hour).

Data lives in ``data/machines.yaml``; every number there carries a ``source``.
Node allocatable follows GKE's documented reservations:
https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations

TPU VM machine types (ct4p, ct5lp, ct5p, ct6e, tpu7x) sit beside the GPU/CPU ones: `machine_type()` finds both,
`machine_types()` lists the GPU/CPU ones as before and `tpu_machine_types()` the TPU hosts. A TPU host's
vCPU, memory or price may be None where no source gave it (never guessed); `capacity`/`allocatable` then leave
that resource out and `hourly_price` returns None.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

__all__ = [
    "CatalogError",
    "registered",
    "GPUType",
    "MachineType",
    "TPUType",
    "TopologyRule",
    "allocatable",
    "capacity",
    "gpu_type",
    "hourly_price",
    "unsourced",
    "machine_type",
    "machine_types",
    "tpu_machine_types",
    "tpu_type",
    "tpu_types",
    "zone_exists",
    "zones",
    "zones_offering",
]

MIB = 1024**2
GIB = 1024**3


class CatalogError(ValueError):
    """An unknown machine or GPU type was requested."""


@dataclass(frozen=True)
class GPUType:
    """One GPU model, keyed by its GKE accelerator label (cloud.google.com/gke-accelerator)."""

    name: str
    memory_gib: float
    bf16_tflops: float | None
    source: str
    hbm_gbps: float | None = None  # memory bandwidth, GB/s (decimal): what decode and other memory-bound kernels see
    nvlink_gbps: float | None = None  # per-GPU NVLink bandwidth, one direction, GB/s; None = no NVLink (PCIe only)
    bw_source: str = ""
    sms: int | None = None  # streaming multiprocessors (DCGM's SM activity); sources in machines.yaml
    training_mfu: float | None = None  # default training MFU (twin assumption with its sources in machines.yaml)
    quota_metric: str | None = None  # Compute Engine GPU quota metric, e.g. NVIDIA_H100_GPUS


@dataclass(frozen=True)
class TopologyRule:
    """The slice shapes a TPU machine type accepts: an explicit list, or xpk's 3D building rule.

    Rule (AI-Hypercomputer/xpk:src/xpk/core/system_characteristics.py@367c838 generate_tpu_topologies):
    2x2x1, 2x2x2, 2x2x4, 2x4x4, plus every AxBxC with A, B, C multiples of 4 up to 256 and
    (A/4)(B/4)(C/4) <= max_cubes, with A <= B <= C when nondecreasing."""

    listed: tuple[str, ...] = ()
    max_cubes: int | None = None
    nondecreasing: bool = True


@dataclass(frozen=True)
class TPUType:
    """One TPU generation, keyed by its name (v4, v5e, v5p, v6e, tpu7x) or its GKE accelerator label."""

    name: str
    gke_accelerator: str  # cloud.google.com/gke-tpu-accelerator
    topology_dims: int  # 2 (AxB) or 3 (AxBxC)
    tensorcores_per_chip: int
    hbm_gib: float | None
    bf16_tflops: float | None
    chip_on_demand_usd_hour: float | None
    chip_spot_usd_hour: float | None
    price_region: str | None
    price_source: str
    source: str


@dataclass(frozen=True)
class MachineType:
    """One Compute Engine machine type with us-central1 prices (TPU hosts: see TPUType.price_region); a price of
    None means no source gave one (tpu7x): validate then asks the NodePool for it."""

    name: str
    family: str
    vcpus: int | None
    memory_gib: float | None
    gpu: str | None
    gpu_count: int
    on_demand_usd_hour: float | None
    spot_usd_hour: float | None
    source: str
    tpu: str | None = None  # TPUType.name for TPU VM machine types
    tpu_chips: int = 0  # chips per VM: the node's google.com/tpu
    single_host_topology: str | None = None  # the slice one VM holds (gke-tpu-topology of a single-host pool)
    topologies: TopologyRule | None = None
    note: str = ""


@functools.cache
def _raw() -> dict[str, Any]:
    """Parse machines.yaml once."""
    text = resources.files("kubetwin.catalog").joinpath("data/machines.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 20x ruamel's pure parser


@functools.cache
def _machines() -> dict[str, MachineType]:
    out: dict[str, MachineType] = {}
    for r in _raw()["machine_types"]:
        out[r["name"]] = MachineType(
            name=r["name"],
            family=r["family"],
            vcpus=int(r["vcpus"]),
            memory_gib=float(r["memory_gib"]),
            gpu=r.get("gpu"),
            gpu_count=int(r.get("gpu_count") or 0),
            on_demand_usd_hour=_float(r.get("on_demand_usd_hour")),  # None: no price read (tpu7x)
            spot_usd_hour=_float(r.get("spot_usd_hour")),
            source=r["source"],
            note=r.get("note", ""),
        )
    return out


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


@functools.cache
def _tpus() -> dict[str, TPUType]:
    out: dict[str, TPUType] = {}
    for r in _raw().get("tpus") or []:
        out[r["name"]] = TPUType(
            name=r["name"], gke_accelerator=r["gke_accelerator"], topology_dims=int(r["topology_dims"]),
            tensorcores_per_chip=int(r["tensorcores_per_chip"]), hbm_gib=_float(r.get("hbm_gib")),
            bf16_tflops=_float(r.get("bf16_tflops")), chip_on_demand_usd_hour=_float(r.get("chip_on_demand_usd_hour")),
            chip_spot_usd_hour=_float(r.get("chip_spot_usd_hour")), price_region=r.get("price_region"),
            price_source=r["price_source"], source=r["source"])
    return out


@functools.cache
def _tpu_machines() -> dict[str, MachineType]:
    """TPU VM machine types; prices are chips x the generation's chip-hour price (None when unknown)."""
    out: dict[str, MachineType] = {}
    for r in _raw().get("tpu_machine_types") or []:
        tpu = _tpus()[r["tpu"]]
        chips = int(r["chips"])
        topo = r["topologies"]
        rule = topo.get("rule") or {}
        out[r["name"]] = MachineType(
            name=r["name"], family=r["name"].split("-")[0],
            vcpus=None if r.get("vcpus") is None else int(r["vcpus"]), memory_gib=_float(r.get("memory_gib")),
            gpu=None, gpu_count=0,
            on_demand_usd_hour=None if tpu.chip_on_demand_usd_hour is None else chips * tpu.chip_on_demand_usd_hour,
            spot_usd_hour=None if tpu.chip_spot_usd_hour is None else chips * tpu.chip_spot_usd_hour,
            source=f"{r['source']} ; price: {tpu.price_source}", tpu=tpu.name, tpu_chips=chips,
            single_host_topology=r["single_host_topology"],
            topologies=TopologyRule(tuple(topo.get("list") or ()), rule.get("max_cubes"),
                                    bool(rule.get("nondecreasing", True))),
            note=r.get("note", ""))
    return out


@functools.cache
def _gpus() -> dict[str, GPUType]:
    out: dict[str, GPUType] = {}
    for r in _raw()["gpus"]:
        tf = r.get("bf16_tflops")
        out[r["name"]] = GPUType(
            name=r["name"],
            memory_gib=float(r["memory_gib"]),
            bf16_tflops=None if tf is None else float(tf),
            source=r["source"],
            hbm_gbps=_float(r.get("hbm_gbps")),
            nvlink_gbps=_float(r.get("nvlink_gbps")),
            bw_source=r.get("bw_source", ""),
            sms=None if r.get("sms") is None else int(r["sms"]),
            training_mfu=_float(r.get("training_mfu")),
            quota_metric=r.get("quota_metric"),
        )
    return out


def _unknown(kind: str, name: str, known: list[str]) -> CatalogError:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = f"; close matches: {', '.join(close)}" if close else f"; known: {', '.join(sorted(known))}"
    return CatalogError(f"unknown {kind} {name!r}{hint}")


def machine_type(name: str) -> MachineType:
    """Look up a machine type by name, e.g. ``"a3-highgpu-8g"`` or the TPU host ``"ct5lp-hightpu-4t"``."""
    mt = _machines().get(name) or _tpu_machines().get(name)
    if mt is None:
        raise _unknown("machine type", name, [*_machines(), *_tpu_machines()])
    return mt


def tpu_type(name: str) -> TPUType:
    """Look up a TPU generation by name (``"v5e"``) or GKE accelerator label (``"tpu-v5-lite-podslice"``)."""
    for t in _tpus().values():
        if name in (t.name, t.gke_accelerator):
            return t
    raise _unknown("TPU type", name, [t.gke_accelerator for t in _tpus().values()])


def tpu_types() -> list[TPUType]:
    """All TPU generations in catalog order."""
    return list(_tpus().values())


def tpu_machine_types() -> list[MachineType]:
    """All TPU VM machine types in catalog order."""
    return list(_tpu_machines().values())


def gpu_type(name: str) -> GPUType:
    """Look up a GPU by GKE accelerator label, e.g. ``"nvidia-h100-80gb"``."""
    try:
        return _gpus()[name]
    except KeyError:
        raise _unknown("GPU type", name, list(_gpus())) from None


def machine_types() -> list[MachineType]:
    """All GPU and CPU machine types in catalog order (TPU hosts: tpu_machine_types())."""
    return list(_machines().values())


def _tiered(amount: float, tiers: list[list[Any]]) -> float:
    """Apply ``[[width, fraction], ...]`` tiers (width ``None`` = unbounded) to ``amount``."""
    reserved, left = 0.0, amount
    for width, frac in tiers:
        take = left if width is None else min(left, float(width))
        reserved += take * float(frac)
        left -= take
        if left <= 0:
            break
    return reserved


def _reserved_memory_bytes(memory_gib: float) -> int:
    """GKE kube-reserved memory plus the 100 MiB hard-eviction threshold, in bytes."""
    g = _raw()["gke"]
    if memory_gib < 1:
        reserved = g["memory_reservation_small_mib"] * MIB
    else:
        reserved = _tiered(memory_gib, g["memory_tiers_gib"]) * GIB
    return round(reserved + g["eviction_threshold_mib"] * MIB)


def _reserved_cpu_millicores(vcpus: int) -> int:
    """GKE kube-reserved CPU in millicores."""
    return round(_tiered(vcpus, _raw()["gke"]["cpu_tiers_cores"]) * 1000)


def capacity(mt: MachineType, max_pods: int = 110) -> dict[str, int]:
    """Node capacity before reservations: cpu (millicores), memory (bytes), pods; a resource whose size no
    source gave (some TPU hosts) is left out rather than guessed."""
    out: dict[str, int] = {}
    if mt.vcpus is not None:
        out["cpu"] = mt.vcpus * 1000
    if mt.memory_gib is not None:
        out["memory"] = round(mt.memory_gib * GIB)
    out["pods"] = max_pods
    return out


def allocatable(mt: MachineType, max_pods: int = 110) -> dict[str, int]:
    """Node allocatable: capacity minus GKE CPU/memory reservations and eviction threshold (the same rule for
    GPU, CPU and TPU hosts)."""
    cap = capacity(mt, max_pods)
    out: dict[str, int] = {}
    if mt.vcpus is not None:
        out["cpu"] = cap["cpu"] - _reserved_cpu_millicores(mt.vcpus)
    if mt.memory_gib is not None:
        out["memory"] = cap["memory"] - _reserved_memory_bytes(mt.memory_gib)
    out["pods"] = max_pods
    return out


def unsourced(mt: MachineType) -> list[str]:
    """The numbers a machine type lacks a source for ("vCPUs", "memory", "price"): validate refuses such a type
    (a price may come from the NodePool instead) rather than running nodes without cpu or memory, or billing $0."""
    return [what for what, v in (("vCPUs", mt.vcpus), ("memory", mt.memory_gib), ("price", mt.on_demand_usd_hour))
            if v is None]


def hourly_price(mt: MachineType, spot: bool) -> float | None:
    """USD per node-hour (Spot or on-demand): us-central1, or the TPU generation's price_region; None where no
    source gave a price (tpu7x)."""
    return mt.spot_usd_hour if spot else mt.on_demand_usd_hour


@functools.cache
def _zones_raw() -> dict[str, Any]:
    """Parse zones.yaml once: regions and their zones, and the zones each accelerator family is offered in."""
    text = resources.files("kubetwin.catalog").joinpath("data/zones.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def _zone_list() -> tuple[str, ...]:
    return tuple(sorted(f"{region}-{z}" for region, letters in _zones_raw()["regions"].items() for z in letters))


def zones() -> list[str]:
    """Every Compute Engine zone, sorted (data/zones.yaml: regions)."""
    return list(_zone_list())


def zone_exists(zone: str) -> bool:
    """Whether the zone is one of Google Cloud's zones."""
    return zone in _zone_list()


def zones_offering(machine: str) -> tuple[list[str], str] | None:
    """The zones that offer a machine type and where that list comes from, or None when the catalog has no list
    for its family (general-purpose CPU series: any existing zone is accepted). A machine type's own entry wins
    over its family's (the name without its size suffix, e.g. a3-highgpu for a3-highgpu-4g)."""
    families = _zones_raw()["families"]
    row = families.get(machine) or families.get(machine.rsplit("-", 1)[0])
    return (sorted(row["zones"]), row["source"]) if row else None


@contextlib.contextmanager
def registered(gpu: GPUType, machine_types: tuple[MachineType, ...] = (),
               zones: tuple[str, ...] = ()) -> Iterator[GPUType]:
    """A GPU type (and the machine types that carry it, offered in `zones`) added for the duration of a with-block,
    as a row in data/machines.yaml and data/zones.yaml would add it for good: NodePools, prices, quotas, DCGM, the
    training and serving models then read it like any other (tests, a GPU tried out before it is catalogued)."""
    gpus, machines, families = _gpus(), _machines(), _zones_raw()["families"]
    taken = [n for n in (gpu.name, *(m.name for m in machine_types)) if n in gpus or n in machines]
    if taken:
        raise ValueError(f"already in the catalog: {', '.join(taken)}")
    added_families = [m.family for m in machine_types if zones and m.family not in families]
    gpus[gpu.name] = gpu
    for m in machine_types:
        machines[m.name] = m
    for fam in added_families:
        families[fam] = {"zones": list(zones), "source": "registered at run time"}
    try:
        yield gpu
    finally:
        gpus.pop(gpu.name, None)
        for m in machine_types:
            machines.pop(m.name, None)
        for fam in added_families:
            families.pop(fam, None)

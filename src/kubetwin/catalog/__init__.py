"""GKE hardware and price catalog (us-central1, USD/hour).

Data lives in ``data/machines.yaml``; every number there carries a ``source``.
Node allocatable follows GKE's documented reservations:
https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

__all__ = [
    "CatalogError",
    "GPUType",
    "MachineType",
    "allocatable",
    "capacity",
    "gpu_type",
    "hourly_price",
    "machine_type",
    "machine_types",
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


@dataclass(frozen=True)
class MachineType:
    """One Compute Engine machine type with us-central1 prices."""

    name: str
    family: str
    vcpus: int
    memory_gib: float
    gpu: str | None
    gpu_count: int
    on_demand_usd_hour: float
    spot_usd_hour: float
    source: str


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
            on_demand_usd_hour=float(r["on_demand_usd_hour"]),
            spot_usd_hour=float(r["spot_usd_hour"]),
            source=r["source"],
        )
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
        )
    return out


def _unknown(kind: str, name: str, known: list[str]) -> CatalogError:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = f"; close matches: {', '.join(close)}" if close else f"; known: {', '.join(sorted(known))}"
    return CatalogError(f"unknown {kind} {name!r}{hint}")


def machine_type(name: str) -> MachineType:
    """Look up a machine type by name, e.g. ``"a3-highgpu-8g"``."""
    try:
        return _machines()[name]
    except KeyError:
        raise _unknown("machine type", name, list(_machines())) from None


def gpu_type(name: str) -> GPUType:
    """Look up a GPU by GKE accelerator label, e.g. ``"nvidia-h100-80gb"``."""
    try:
        return _gpus()[name]
    except KeyError:
        raise _unknown("GPU type", name, list(_gpus())) from None


def machine_types() -> list[MachineType]:
    """All machine types in catalog order."""
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
    """Node capacity before reservations: cpu (millicores), memory (bytes), pods."""
    return {"cpu": mt.vcpus * 1000, "memory": round(mt.memory_gib * GIB), "pods": max_pods}


def allocatable(mt: MachineType, max_pods: int = 110) -> dict[str, int]:
    """Node allocatable: capacity minus GKE CPU/memory reservations and eviction threshold."""
    cap = capacity(mt, max_pods)
    return {
        "cpu": cap["cpu"] - _reserved_cpu_millicores(mt.vcpus),
        "memory": cap["memory"] - _reserved_memory_bytes(mt.memory_gib),
        "pods": max_pods,
    }


def hourly_price(mt: MachineType, spot: bool) -> float:
    """USD per node-hour in us-central1 (Spot or on-demand)."""
    return mt.spot_usd_hour if spot else mt.on_demand_usd_hour

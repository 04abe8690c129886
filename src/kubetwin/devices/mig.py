"""MIG: which GPU instance profiles each GPU model has and which layouts of them are physically possible.

A GPU has 8 memory slices and 7 compute slices; a GPU instance of a profile occupies `size` consecutive memory
slices starting at one of the profile's allowed starts, and two instances may not overlap (facts and sources in
catalog/data/mig.yaml). `layout()` says whether a set of profiles fits on one GPU and where (searching every
order, where `nvidia-smi mig -cgi` places instances one by one in the order given), and why not when it cannot.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import yaml

from kubetwin.k8s.names import GKE_GPU_PARTITION_SIZE, GPU

PARTITION_LABEL = GKE_GPU_PARTITION_SIZE  # GKE's label on nodes with gpuPartitionSize
MEMORY_SLICES = 8
COMPUTE_SLICES = 7


class MigError(ValueError):
    """An impossible MIG request; the message says why and what would work."""


@dataclass(frozen=True)
class Profile:
    name: str  # e.g. "3g.40gb"
    kind: str  # the placement class: 1g, 1g+me, 1g.2x, 2g, 3g, 4g, 7g
    size: int  # memory slices
    starts: tuple[int, ...]
    max_count: int
    gi_profile_id: int
    compute_slices: int
    memory_mib: int
    sms: int | None

    @property
    def resource_name(self) -> str:
        """The device plugin's resource under the mixed strategy."""
        return f"nvidia.com/mig-{self.name}"


@dataclass(frozen=True)
class Placement:
    profile: Profile
    start: int

    @property
    def slices(self) -> range:
        return range(self.start, self.start + self.profile.size)


@functools.cache
def _data() -> dict:
    return yaml.load(resources.files("kubetwin.catalog").joinpath("data", "mig.yaml").read_text(),
                     Loader=yaml.CSafeLoader)


def gpu_models() -> list[str]:
    return list(_data()["gpus"])


def model_of(accelerator: str) -> str | None:
    """The MIG-capable GPU model behind a GKE accelerator type, or None if it has no MIG."""
    for model, gpu in _data()["gpus"].items():
        if accelerator in gpu.get("accelerators", ()):
            return model
    return None


def accelerators_of(model: str) -> list[str]:
    return list(_data()["gpus"][model].get("accelerators", ()))


def profiles(model: str) -> dict[str, Profile]:
    gpus = _data()["gpus"]
    if model not in gpus:
        raise MigError(f"{model} does not support MIG; MIG GPUs are {', '.join(gpus)}")
    kinds = _data()["kinds"]
    out = {}
    for name, p in gpus[model]["profiles"].items():
        k = kinds[p["kind"]]
        out[name] = Profile(name, p["kind"], k["size"], tuple(k["starts"]), k["max"], k["gi_profile_id"],
                            int(p["kind"][0]), p["memory_mib"], p.get("sms"))
    return out


def layout(model: str, names: Sequence[str]) -> list[Placement]:
    """A placement of the requested GPU instances on one GPU, largest first, lowest start first.

    Raises MigError naming the first rule broken: unknown profile, too many of one profile, more than one
    media-extension instance, more compute or memory slices than the GPU has, or no non-overlapping placement."""
    table = profiles(model)
    wanted = []
    for n in names:
        if n not in table:
            raise MigError(f"{model} has no MIG profile {n!r}; its profiles are {', '.join(table)}")
        wanted.append(table[n])
    for name, count in Counter(p.name for p in wanted).items():
        if count > table[name].max_count:
            raise MigError(f"{model} fits at most {table[name].max_count} x {name}, {count} requested")
    if sum(p.kind == "1g+me" for p in wanted) > 1:
        raise MigError("at most one media-extension (+me) GPU instance per GPU")
    compute = sum(p.compute_slices for p in wanted)
    memory = sum(p.size for p in wanted)
    if compute > COMPUTE_SLICES or memory > MEMORY_SLICES:
        raise MigError(f"{' + '.join(names)} needs {compute} compute and {memory} memory slices; "
                       f"a GPU has {COMPUTE_SLICES} and {MEMORY_SLICES}")
    order = sorted(wanted, key=lambda p: (-p.size, p.name))
    placed = _place(order, [False] * MEMORY_SLICES, [])
    if placed is None:
        raise MigError(f"no placement of {' + '.join(names)} on {model}: the instances' allowed memory-slice "
                       "ranges overlap (" + "; ".join(f"{p.name} starts at {list(p.starts)} and takes {p.size}"
                                                       for p in dict.fromkeys(order)) + ")")
    return sorted(placed, key=lambda pl: pl.start)


def _place(todo: list[Profile], used: list[bool], done: list[Placement]) -> list[Placement] | None:
    """Backtracking over the allowed starts (at most 7 instances, so this is tiny)."""
    if not todo:
        return list(done)
    p, rest = todo[0], todo[1:]
    for s in p.starts:
        span = range(s, s + p.size)
        if any(used[i] for i in span):
            continue
        for i in span:
            used[i] = True
        done.append(Placement(p, s))
        found = _place(rest, used, done)
        if found is not None:
            return found
        done.pop()
        for i in span:
            used[i] = False
    return None


def partition_count(model: str, size: str) -> int:
    """GKE gpuPartitionSize: every GPU is split into as many instances of that profile as fit."""
    table = profiles(model)
    if size not in table or table[size].kind == "1g+me":
        valid = [n for n, p in table.items() if p.kind != "1g+me"]
        raise MigError(f"gpuPartitionSize {size!r} is not a partition of {model}; use one of {', '.join(valid)}")
    return len(layout(model, [size] * table[size].max_count))


def advertised(strategy: str, model: str, gpus: int, per_gpu: Sequence[Sequence[str]]) -> dict[str, int]:
    """What the NVIDIA device plugin advertises for a node's GPUs, each with the MIG instances in per_gpu
    (an empty list = MIG disabled on that GPU), under migStrategy none / single / mixed
    (k8s-device-plugin internal/rm/device_map.go)."""
    if strategy not in ("none", "single", "mixed"):
        raise MigError(f"migStrategy {strategy!r}; use none, single or mixed")
    layouts = [list(p) for p in per_gpu] + [[] for _ in range(gpus - len(per_gpu))]
    for names in layouts:
        if names:
            layout(model, names)
    if strategy == "none":
        return {GPU: gpus}
    enabled = [names for names in layouts if names]
    if strategy == "single":
        kinds = {n for names in enabled for n in names}
        if len(kinds) > 1:
            raise MigError("more than one MIG device type present on node (migStrategy single needs one profile)")
        if enabled and len(enabled) != gpus:
            raise MigError("all GPUs on a node must have the same MIG enabled value under migStrategy single")
        return {GPU: sum(len(n) for n in enabled) if enabled else gpus}
    out: dict[str, int] = {}
    if gpus - len(enabled):
        out[GPU] = gpus - len(enabled)  # MIG-enabled GPUs leave nvidia.com/gpu
    for names in enabled:
        for n in names:
            key = f"nvidia.com/mig-{n}"
            out[key] = out.get(key, 0) + 1
    return out

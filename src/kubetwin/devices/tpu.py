"""TPU slices on GKE: which topologies a TPU machine type accepts, and how many chips and VMs a slice is.

GKE writes a TPU node pool as a machine type plus `placementPolicy.tpuTopology`; the machine type's `-Nt` suffix
is the chips per VM (one GKE node), so a slice of topology AxB(xC) is chips = A*B(*C) on chips / chips-per-VM
nodes. One node = a single-host slice; more = a multi-host slice, which GKE creates, repairs and deletes whole
(shared/reference/controllers-kueue-dra-deviceplugin-tpu-jobset.md §4). The topology data (lists for v5e/v6e,
xpk's 3D building rule for v4/v5p/tpu7x) lives in the catalog with its sources; this module only reads it.
"""

from __future__ import annotations

import functools
import math
import re

from kubetwin import catalog
from kubetwin.k8s.names import GKE_NODEPOOL, GKE_TPU_ACCELERATOR, GKE_TPU_TOPOLOGY, TPU
from kubetwin.store.store import Obj

# GKE's node labels, resource and taint for TPU nodes (§4; xpk system_characteristics.py create_*_label).
ACCELERATOR_LABEL = GKE_TPU_ACCELERATOR
TOPOLOGY_LABEL = GKE_TPU_TOPOLOGY
NODEPOOL_LABEL = GKE_NODEPOOL
RESOURCE = TPU
TAINT = {"key": TPU, "value": "present", "effect": "NoSchedule"}

_SMALL_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")  # xpk generate_tpu_topologies' fixed shapes
_MAX_DIM = 256  # xpk: A, B, C in range 4..256
_TOPOLOGY = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*){1,2}$")


class TopologyError(ValueError):
    """A topology that is malformed, or not one the TPU machine type accepts; the message lists the valid ones."""


def parse_topology(topology: str) -> tuple[int, ...]:
    """"4x4" -> (4, 4); "2x2x4" -> (2, 2, 4)."""
    if not isinstance(topology, str) or not _TOPOLOGY.match(topology):
        raise TopologyError(f"{topology!r} is not a TPU topology; write AxB (v5e, v6e) or AxBxC (v4, v5p, tpu7x), "
                            "e.g. 4x4 or 2x2x4")
    return tuple(int(d) for d in topology.split("x"))


def chips(topology: str) -> int:
    """Chips in a slice of this topology: the product of its dimensions."""
    return math.prod(parse_topology(topology))


def _machine(machine_type: str) -> catalog.MachineType:
    mt = catalog.machine_type(machine_type)
    if mt.tpu is None:
        raise TopologyError(f"{machine_type} is not a TPU machine type; TPU machine types are "
                            f"{', '.join(m.name for m in catalog.tpu_machine_types())}")
    return mt


@functools.cache
def _rule_shapes(max_cubes: int, nondecreasing: bool) -> tuple[str, ...]:
    """xpk generate_tpu_topologies(max_cubes, enforce_nondecreasing), in its order."""
    out = list(_SMALL_3D)
    for x in range(4, _MAX_DIM + 1, 4):
        for y in range(x if nondecreasing else 4, _MAX_DIM + 1, 4):
            for z in range(y if nondecreasing else 4, _MAX_DIM + 1, 4):
                if (x // 4) * (y // 4) * (z // 4) <= max_cubes:
                    out.append(f"{x}x{y}x{z}")
    return tuple(out)


def _machine_shapes(mt: catalog.MachineType) -> tuple[str, ...]:
    rule = mt.topologies or catalog.TopologyRule()
    shapes = list(rule.listed)
    if rule.max_cubes is not None:
        shapes += [s for s in _rule_shapes(rule.max_cubes, rule.nondecreasing) if s not in shapes]
    return tuple(shapes)


def valid_topologies(accelerator: str, machine_type: str | None = None) -> list[str]:
    """Every valid topology of a TPU generation (GKE accelerator label, e.g. "tpu-v5-lite-podslice", or name,
    e.g. "v5e"), or only those one of its machine types accepts. 3D generations list xpk's full set."""
    tpu = catalog.tpu_type(accelerator)
    machines = [m for m in catalog.tpu_machine_types() if m.tpu == tpu.name]
    if machine_type is not None:
        machines = [m for m in machines if m.name == machine_type]
        if not machines:
            raise TopologyError(f"{machine_type} is not a {tpu.name} ({tpu.gke_accelerator}) machine type; those are "
                                f"{', '.join(m.name for m in catalog.tpu_machine_types() if m.tpu == tpu.name)}")
    out: list[str] = []
    for m in machines:
        out += [s for s in _machine_shapes(m) if s not in out]
    return out


def describe_topologies(machine_type: str) -> str:
    """The valid topologies of a machine type as a message can list them: all of a 2D list, or the 3D rule
    with its small shapes and the first few cube multiples."""
    mt = _machine(machine_type)
    rule = mt.topologies or catalog.TopologyRule()
    if rule.max_cubes is None:
        return ", ".join(rule.listed)
    order = "A <= B <= C" if rule.nondecreasing else "in any order"
    examples = [s for s in _rule_shapes(rule.max_cubes, rule.nondecreasing) if s not in _SMALL_3D][:4]
    listed = ", ".join([*rule.listed, *(s for s in _SMALL_3D if s not in rule.listed)])
    return (f"{listed}, and AxBxC with A, B, C multiples of 4 (up to {_MAX_DIM}), {order}, "
            f"(A/4)(B/4)(C/4) <= {rule.max_cubes} cubes, e.g. {', '.join(examples)}")


def check_topology(machine_type: str, topology: str) -> str:
    """Return the topology if the machine type accepts it; else raise TopologyError naming the valid ones and,
    where it helps, the machine type or dimension order that would take it."""
    mt = _machine(machine_type)
    tpu = catalog.tpu_type(mt.tpu or "")
    dims = parse_topology(topology)
    if len(dims) != tpu.topology_dims:
        want = "AxB" if tpu.topology_dims == 2 else "AxBxC"
        raise TopologyError(f"{topology!r}: {tpu.name} ({tpu.gke_accelerator}) topologies are {want}; valid for "
                            f"{mt.name}: {describe_topologies(mt.name)}")
    if topology in _machine_shapes(mt):
        return topology
    hint = ""
    others = [m.name for m in catalog.tpu_machine_types() if m.tpu == mt.tpu and m.name != mt.name
              and topology in _machine_shapes(m)]
    ordered = "x".join(str(d) for d in sorted(dims))
    if others:
        hint = f"; {topology} is a {tpu.name} slice on {' or '.join(others)}"
    elif ordered != topology and ordered in _machine_shapes(mt):
        hint = f"; did you mean {ordered} (dimensions in non-decreasing order)?"
    raise TopologyError(f"{topology!r} is not a valid topology for {mt.name} ({tpu.gke_accelerator}); valid: "
                        f"{describe_topologies(mt.name)}{hint}")


def slice_shape(machine_type: str, topology: str | None = None) -> tuple[int, int]:
    """(chips, hosts) of one slice: hosts = chips / chips per VM, each host one GKE node. Without a topology,
    the machine type's single-host slice. Raises TopologyError for a topology the machine type does not take."""
    mt = _machine(machine_type)
    topology = topology or mt.single_host_topology or ""
    n = chips(check_topology(mt.name, topology))
    return n, max(1, n // mt.tpu_chips)


def is_multi_host(machine_type: str, topology: str | None) -> bool:
    """True when the slice spans more than one VM (GKE: a multi-host TPU slice node pool)."""
    return slice_shape(machine_type, topology)[1] > 1


def pool_topology(spec: dict) -> str | None:
    """A NodePool spec's TPU topology: placementPolicy.tpuTopology, else the machine type's single-host shape;
    None for a non-TPU pool."""
    mt = catalog.machine_type(spec["machineType"])
    if mt.tpu is None:
        return None
    return ((spec.get("placementPolicy") or {}).get("tpuTopology")) or mt.single_host_topology


def node_slice(node: Obj) -> str | None:
    """The slice a node belongs to when it is one host of a multi-host TPU slice: its node pool's name (a GKE
    multi-host slice node pool holds exactly one slice); None for any other node."""
    labels = node["metadata"].get("labels") or {}
    topology = labels.get(TOPOLOGY_LABEL)
    per_vm = ((node.get("status") or {}).get("capacity") or {}).get(RESOURCE)
    if not topology or not per_vm or NODEPOOL_LABEL not in labels:
        return None
    try:
        multi = chips(topology) > int(per_vm)
    except (TopologyError, ValueError):
        return None
    return labels[NODEPOOL_LABEL] if multi else None

"""Zone capacity and project quotas: whether Compute Engine gives the cluster autoscaler the VMs it asks for.

Two limits stand between a node pool resize and its VMs (https://cloud.google.com/compute/resource-usage,
https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability):
- **Quota**, per project and region, per metric: GPUs by model (`NVIDIA_H100_GPUS`, with Spot VMs counted under
  `PREEMPTIBLE_NVIDIA_H100_GPUS` instead), `CPUS` / `PREEMPTIBLE_CPUS`, and the global `GPUS_ALL_REGIONS`. A VM over
  quota fails with `QUOTA_EXCEEDED: Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 16.0 in region us-central1.`
  (Compute Engine's wording, two spaces and all; global metrics end "globally.").
- **Obtainability**: the zone may have no such VM to give (a stockout): `ZONE_RESOURCE_POOL_EXHAUSTED`. GKE's
  cluster autoscaler reports the two on the pod as "GCE quota exceeded" / "GCE out of resources"
  (gke-autoscaling cluster-autoscaler, FailedScaleUp events).

The twin's capacity model is an assumption (Google publishes no capacity numbers): `Scenario.spec.capacity[]`
says how many VMs of a machine type a zone can give this project at once (`available`, changing over time with
`schedule`), and `obtainability` the chance each VM request succeeds (a seeded RNG). No entry: unlimited. Usage
counts every live node of a NodePool plus the VMs requested and still booting.

Flex-start VMs (a NodePool with `flexStart: true`) come from Dynamic Workload Scheduler's capacity: an entry with
`flexStart: true` is that capacity (one without `flexStart` covers both), and they count against the preemptible
quotas as Spot VMs do (https://cloud.google.com/compute/docs/instances/flex-start-vms, "Quota").

Reservations (autoscaler/reservations.py) come first: a VM that fits a matching reservation's free room is
granted from it, whatever the zone's capacity (that is what a reservation is for); the rest fall to the zone's
on-demand capacity for an ANY_RESERVATION pool, and fail with RESERVATION_CAPACITY_EXCEEDED for SPECIFIC_RESERVATION
and ANY_RESERVATION_THEN_FAIL pools. VMs consuming a reservation do not count against the zone's capacity.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from kubetwin import catalog
from kubetwin.api.twin import ZoneCapacity
from kubetwin.autoscaler import reservations as rsv
from kubetwin.k8s.names import GKE_NODEPOOL, ZONE
from kubetwin.k8s.units import parse_duration
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

QUOTA_EXCEEDED, STOCKOUT = "QUOTA_EXCEEDED", "ZONE_RESOURCE_POOL_EXHAUSTED"
PROJECT = rsv.PROJECT  # the providerID's project (autoscaler/nodepool.py)
GLOBAL = "global"


@dataclass(frozen=True)
class VmShape:
    machine_type: str
    spot: bool
    gpu: str | None
    gpus: int
    vcpus: int
    flex: bool = False  # a flex-start VM

    @property
    def preemptible_quota(self) -> bool:
        """Spot and flex-start VMs count under the PREEMPTIBLE_ metrics."""
        return self.spot or self.flex


def shape_of(pool: Obj) -> VmShape:
    spec = pool["spec"]
    mt = catalog.machine_type(spec["machineType"])
    accels = [] if mt.tpu else spec.get("accelerators") or []
    gpu = accels[0]["type"] if accels else mt.gpu
    gpus = (accels[0]["count"] if accels else mt.gpu_count) if gpu else 0
    return VmShape(mt.name, bool(spec.get("spot")), gpu, int(gpus or 0), int(mt.vcpus or 0),
                   bool(spec.get("flexStart")))


def gpu_metric(gpu: str, spot: bool) -> str:
    """The GPU's Compute Engine quota metric (the catalog's `quota_metric`; for a GPU it does not list, the metric's
    naming pattern: nvidia-tesla-t4 -> NVIDIA_T4_GPUS), PREEMPTIBLE_ for Spot."""
    try:
        known = catalog.gpu_type(gpu).quota_metric
    except catalog.CatalogError:
        known = None
    base = known or gpu.upper().replace("NVIDIA-TESLA-", "NVIDIA_").replace("-", "_") + "_GPUS"
    return f"PREEMPTIBLE_{base}" if spot else base


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


@dataclass
class Refusal:
    """Why Compute Engine gave fewer VMs than asked: `kind` is quota or stockout."""

    kind: str
    code: str
    message: str

    @property
    def gce(self) -> str:
        return f"{self.code}: {self.message}"

    @property
    def gke(self) -> str:  # what GKE's cluster autoscaler writes on the pod
        if self.kind == "reservation":  # visibility/events failed_scale_up_event_logger.go
            return "Reservation capacity exceeded"
        return "GCE quota exceeded" if self.kind == "quota" else "GCE out of resources"

    @property
    def explanation(self) -> str:
        if self.kind == "reservation":
            return "reservation capacity"
        return ("project quota" if self.kind == "quota" else "hardware availability in the zone (stockout)")


class CapacityModel:
    def __init__(self, store: Store, env: Environment, capacity: list[ZoneCapacity] | None = None,
                 quotas: dict[str, dict[str, float]] | None = None, seed: int = 0,
                 reservations: rsv.Reservations | None = None) -> None:
        self.store, self.env = store, env
        self.reservations = reservations
        self.capacity = list(capacity or [])
        self.quotas = {r: dict(m) for r, m in (quotas or {}).items()}
        self.rng = random.Random(f"capacity/{seed}")
        self._reserved: dict[tuple[str, str], int] = {}  # (pool, zone) -> VMs requested, not registered yet
        self._nodes: dict[str, tuple[str, str]] = {}  # live pool node -> (pool, zone)
        self.refusals: list[dict] = []  # for the run's summary
        if self.limited:  # usage matters only under some limit: an unlimited run adds no per-node work
            store.watch("Node", self._on_node)

    @property
    def limited(self) -> bool:
        return bool(self.capacity or self.quotas)

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self._nodes.pop(name, None)
            return
        if etype != "ADDED":
            return
        labels = node["metadata"].get("labels") or {}
        pool, zone = labels.get(GKE_NODEPOOL), labels.get(ZONE)
        if pool is None or zone is None or self.store.get("NodePool", "", pool) is None:
            return
        book = self.reservations
        if book is not None and book.is_reserved(name):  # a reserved VM: not the zone's capacity
            if name in book.from_promise:
                return
        else:
            self._nodes[name] = (pool, zone)
        key = (pool, zone)
        if self._reserved.get(key, 0) > 0:  # a requested VM registered
            self._reserved[key] -= 1

    # -- usage ------------------------------------------------------------------------------------------
    def _usage(self) -> list[tuple[VmShape, str, int]]:
        counts: dict[tuple[str, str], int] = dict(self._reserved)
        for key in self._nodes.values():
            counts[key] = counts.get(key, 0) + 1
        out = []
        for (pool, zone), n in sorted(counts.items()):
            obj = self.store.get("NodePool", "", pool)
            if obj is not None and n:
                out.append((shape_of(obj), zone, n))
        return out

    def available(self, zone: str, machine_type: str, spot: bool, flex: bool = False) -> int | None:
        """VMs the zone can give the project at once now (None: no limit)."""
        entry = self._entry(zone, machine_type, spot, flex)
        return None if entry is None else self._available(entry)

    def _available(self, entry: ZoneCapacity) -> int | None:
        """An entry's VMs now: its schedule's last step that has begun, else its starting figure (None: no limit,
        an entry that only sets obtainability)."""
        avail = entry.available
        for step in sorted(entry.schedule, key=lambda s: parse_duration(s.at)):
            if parse_duration(step.at) <= self.env.now:
                avail = step.available
        return avail

    def changes_after(self, t: float) -> list[float]:
        """When the zones' capacity changes next (for the autoscaler to look again)."""
        return [parse_duration(step.at) for c in self.capacity for step in c.schedule if parse_duration(step.at) > t]

    def _entry(self, zone: str, machine_type: str, spot: bool, flex: bool = False) -> ZoneCapacity | None:
        return next((c for c in self.capacity if c.zone == zone and c.machineType == machine_type
                     and _covers(c, spot, flex)), None)

    def pool_headroom(self, pool: Obj, zone: str) -> tuple[int, Refusal | None]:
        """`headroom` for a pool's VMs, its reservations' free room first (module doc)."""
        book = self.reservations
        if book is None or not book:
            return self.headroom(shape_of(pool), zone)
        reserved = book.room(pool, zone)
        if book.must_reserve(pool):
            return reserved, None if reserved else _reservation_refusal(book.target_name(pool))
        room, refusal = self.headroom(shape_of(pool), zone)
        return reserved + room, refusal

    def headroom(self, shape: VmShape, zone: str) -> tuple[int, Refusal | None]:
        """How many more VMs of `shape` the quotas and the zone allow now, and what stops the next one."""
        usage = self._usage()
        region = region_of(zone)
        best: tuple[int, Refusal | None] = (math.inf, None)  # type: ignore[assignment]
        checks: list[tuple[str, str, int]] = []  # (quota region, metric, per-VM amount)
        if shape.gpu and shape.gpus:
            checks += [(region, gpu_metric(shape.gpu, shape.preemptible_quota), shape.gpus),
                       (GLOBAL, "GPUS_ALL_REGIONS", shape.gpus)]
        checks.append((region, "PREEMPTIBLE_CPUS" if shape.preemptible_quota else "CPUS", shape.vcpus))
        for qregion, metric, per_vm in checks:
            limit = self.quotas.get(qregion, {}).get(metric)
            if limit is None or per_vm <= 0:
                continue
            used = 0
            for s, z, n in usage:
                if qregion != GLOBAL and region_of(z) != qregion:
                    continue
                if metric == "GPUS_ALL_REGIONS":
                    used += s.gpus * n
                elif metric.endswith("CPUS") and not metric.endswith("GPUS"):
                    used += s.vcpus * n if s.preemptible_quota == (metric == "PREEMPTIBLE_CPUS") else 0
                elif s.gpu and gpu_metric(s.gpu, s.preemptible_quota) == metric:
                    used += s.gpus * n
            room = max(0, int((limit - used) // per_vm))
            if room < best[0]:
                where = "globally" if qregion == GLOBAL else f"in region {qregion}"
                best = (room, Refusal("quota", QUOTA_EXCEEDED,
                                      f"Quota '{metric}' exceeded.  Limit: {float(limit)} {where}."))
        entry = self._entry(zone, shape.machine_type, shape.spot, shape.flex)
        avail = None if entry is None else self._available(entry)
        if entry is not None and avail is not None:
            # every VM the entry covers draws on it: with `spot` (or `flexStart`) unset, Spot and on-demand (flex and
            # not) VMs share the zone's stock
            used = sum(n for s, z, n in usage if z == zone and s.machine_type == shape.machine_type
                       and _covers(entry, s.spot, s.flex))
            room = max(0, avail - used)
            if room < best[0]:
                best = (room, Refusal("stockout", STOCKOUT,
                                      f"The zone 'projects/{PROJECT}/zones/{zone}' does not have enough resources "
                                      "available to fulfill the request.  Try a different zone, or try again later."))
        return best

    def request(self, pool: Obj, zone: str, n: int, atomic: bool = False) -> tuple[int, Refusal | None]:
        """Ask Compute Engine for `n` VMs of the pool in `zone`: returns how many it gives (reserved until they
        register) and, when fewer, why. `atomic`: all or none (a DWS / atomic resize). A matching reservation's
        free room is used first (module doc)."""
        book = self.reservations
        if book is None or not book:
            return self._request(pool, zone, n, atomic)
        from_res = min(n, book.room(pool, zone))
        rest = n - from_res
        granted, refusal = from_res, None
        if rest and book.must_reserve(pool):
            refusal = _reservation_refusal(book.target_name(pool))
            if atomic:
                granted = 0
            self.refusals.append({"t": self.env.now, "pool": pool["metadata"]["name"], "zone": zone, "asked": n,
                                  "granted": granted, "error": refusal.gce})
        elif rest:
            more, refusal = self._request(pool, zone, rest, atomic)
            granted += more
            if atomic and granted < n:  # all or none: give back the on-demand part too
                if more:
                    self._reserved[(pool["metadata"]["name"], zone)] -= more
                granted = 0
        if granted:
            book.promise(pool["metadata"]["name"], zone, min(from_res, granted))
        return granted, refusal

    def _request(self, pool: Obj, zone: str, n: int, atomic: bool = False) -> tuple[int, Refusal | None]:
        shape = shape_of(pool)
        room, refusal = self.headroom(shape, zone)
        granted = min(n, room)
        entry = self._entry(zone, shape.machine_type, shape.spot, shape.flex)
        if entry is not None and entry.obtainability < 1.0 and granted:
            ok = sum(1 for _ in range(granted) if self.rng.random() < entry.obtainability)
            if ok < granted:
                granted, refusal = ok, Refusal("stockout", STOCKOUT,
                                               f"The zone 'projects/{PROJECT}/zones/{zone}' does not have enough "
                                               "resources available to fulfill the request.  Try a different zone, "
                                               "or try again later.")
        if atomic and granted < n:
            granted = 0
        if granted < n:
            self.refusals.append({"t": self.env.now, "pool": pool["metadata"]["name"], "zone": zone,
                                  "asked": n, "granted": granted, "error": refusal.gce if refusal else ""})
        if granted:
            key = (pool["metadata"]["name"], zone)
            self._reserved[key] = self._reserved.get(key, 0) + granted
        return granted, (refusal if granted < n else None)


def _reservation_refusal(target: str) -> Refusal:
    """Compute Engine's error for a VM its targeted reservation cannot hold (reservations.py module doc)."""
    return Refusal("reservation", rsv.CAPACITY_EXCEEDED,
                   f"Specified reservation {target} does not have available resources for the request.")


def _covers(entry: ZoneCapacity, spot: bool, flex: bool) -> bool:
    """Whether a capacity entry is the capacity for VMs of this provisioning model (None: any)."""
    return (entry.spot is None or entry.spot == spot) and (entry.flexStart is None or entry.flexStart == flex)

"""Compute Engine reservations (the twin's `kubetwin.io/v1alpha1` `Reservation`) consumed by node pools.

What it follows (Compute Engine's reservation resource, https://cloud.google.com/compute/docs/instances/reservations-
overview; GKE's *Consuming reserved zonal resources*, https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-
reservations; GoogleCloudPlatform/cluster-autoscaler @7d250507, Apache-2.0, facts only):
- A reservation holds `specificReservation.count` VMs of one shape (`instanceProperties`: machine type, GPUs) in one
  zone; a VM consumes it when it is created with a matching shape in that zone and an affinity that allows it
  (reservations/matcher.go MatchSpecificReservationShapeWithReasons: zone, machine type, accelerator type and count
  both ways). `inUseCount` is the VMs consuming it; the rest is idle and billed all the same.
- Affinity (gke_cloud_provider_impl.go IsReservationCompatible): ANY_RESERVATION (a pool without
  reservationAffinity too: Compute Engine's default) consumes any matching reservation not created with
  `specificReservationRequired`; SPECIFIC_RESERVATION consumes only the reservation named by
  `compute.googleapis.com/reservation-name` (`name`, `projects/P/reservations/name` for a shared one, optionally
  `/reservationBlocks/B[/reservationSubBlocks/S]`) and that reservation must require specific targeting (Compute
  Engine refuses to target one that does not: "can not be targeted as specificReservationRequired is not set");
  NO_RESERVATION never consumes. Spot and flex-start VMs never consume reservations (GKE sets NO_RESERVATION for
  flex-start, autoprovisioning/injection.go; Spot VMs cannot consume reservations).
- Where the reservation has no room: ANY falls back to on-demand capacity (the zone's, capacity.py); SPECIFIC and
  ANY_RESERVATION_THEN_FAIL fail with Compute Engine's RESERVATION_CAPACITY_EXCEEDED "Specified reservation NAME
  does not have available resources for the request." (provisioningrequests reconciler reasons_test.go); GKE's
  autoscaler reports "Reservation capacity exceeded" (visibility/events/failed_scale_up_event_logger.go).
- Sharing: a reservation of another project (`spec.project`) is consumable only when its `shareSettings` is
  SPECIFIC_PROJECTS with the cluster's project listed; its idle VMs are billed to its owner.
- Node labels: a pool consuming a specific reservation carries cloud.google.com/reservation-name and
  -reservation-project, and -reservation-blocks / -reservation-subblocks when it targets one (labels/
  system_labels.go, autoprovisioning/injection.go UpdateNodePoolSpec). VMs of a DENSE reservation of the machine
  types GKE labels with their physical place (A4X, A4, A3 Ultra, A3 Mega:
  https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas) carry
  cloud.google.com/gce-topology-block, -subblock and -host from the reservation's block layout.

Twin assumptions: the block layout is the Reservation's `blocks` (Compute Engine creates it; the API reports it as
reservationBlocks with their counts); without it a DENSE reservation is one block whose sub-blocks hold 18 VMs (one
A4X sub-block is one NVL72 domain of 18 VMs, https://cloud.google.com/ai-hypercomputer/docs/terminology; no size is
published for the others: the twin uses 18 for them too). A new VM takes the first free slot in block, sub-block,
host order (compact). Each VM is its own host. Label values are the block and sub-block names (GKE's are opaque
ids). A reservation exists for the whole run; its quota is not counted against `Scenario.spec.quotas`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetwin import catalog
from kubetwin.k8s.names import GCE_TOPOLOGY_BLOCK, GCE_TOPOLOGY_HOST, GCE_TOPOLOGY_SUBBLOCK
from kubetwin.store.store import Obj, Store

KIND = "Reservation"
PROJECT = "kubetwin"  # the cluster's project (capacity.PROJECT)
NAME_KEY = "compute.googleapis.com/reservation-name"
# GKE's reservation node labels (cluster-autoscaler pkg/cloudprovider/gke/labels/system_labels.go)
NAME_LABEL = "cloud.google.com/reservation-name"
PROJECT_LABEL = "cloud.google.com/reservation-project"
BLOCKS_LABEL = "cloud.google.com/reservation-blocks"
SUBBLOCKS_LABEL = "cloud.google.com/reservation-subblocks"
# twin label: the reservation a node's VM consumes (GKE has no node label for an ANY consumer)
CONSUMED_LABEL = "kubetwin.io/reservation"
DENSE_FAMILIES = ("a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g")
SUBBLOCK_VMS = 18  # module doc
CAPACITY_EXCEEDED = "RESERVATION_CAPACITY_EXCEEDED"
SPECIFIC, ANY, NONE, ANY_THEN_FAIL = ("SPECIFIC_RESERVATION", "ANY_RESERVATION", "NO_RESERVATION",
                                      "ANY_RESERVATION_THEN_FAIL")


@dataclass(frozen=True)
class Slot:
    """One VM's place in a reservation: its block, sub-block and host (None where the reservation is not dense)."""

    reservation: str
    index: int
    block: str | None = None
    subblock: str | None = None
    host: str | None = None


@dataclass
class Target:
    """What a pool's reservationAffinity asks for: the type, and for SPECIFIC the reservation (project, name) and
    optionally a block and sub-block."""

    type: str
    project: str = PROJECT
    name: str = ""
    block: str = ""
    subblock: str = ""


def affinity(pool_spec: dict) -> Target:
    """The pool's affinity (ANY when it sets none, Compute Engine's default; NONE for Spot and flex-start VMs)."""
    if pool_spec.get("spot") or pool_spec.get("flexStart"):
        return Target(NONE)
    aff = pool_spec.get("reservationAffinity") or {}
    kind = aff.get("consumeReservationType") or "UNSPECIFIED"
    if kind == "UNSPECIFIED":
        kind = ANY
    if kind != SPECIFIC:
        return Target(kind)
    values = list(aff.get("values") or [])
    return parse_path(values[0] if values else "")


def parse_path(path: str) -> Target:
    """A reservation path (gceclient ReservationRef.RelativePath) as a SPECIFIC target."""
    t = Target(SPECIFIC)
    parts = path.split("/")
    if len(parts) >= 4 and parts[0] == "projects" and parts[2] == "reservations":
        t.project, parts = parts[1], parts[3:]
    t.name = parts[0] if parts else ""
    rest = parts[1:]
    if len(rest) >= 2 and rest[0] == "reservationBlocks":
        t.block = rest[1]
        if len(rest) >= 4 and rest[2] == "reservationSubBlocks":
            t.subblock = rest[3]
    return t


def owner(res: Obj) -> str:
    return str((res.get("spec") or {}).get("project") or PROJECT)


def shared_with_cluster(res: Obj) -> bool:
    """A reservation of the cluster's project, or shared with it (shareSettings SPECIFIC_PROJECTS)."""
    if owner(res) == PROJECT:
        return True
    share = (res.get("spec") or {}).get("shareSettings") or {}
    return share.get("shareType") == "SPECIFIC_PROJECTS" and PROJECT in (share.get("projects") or [])


def gpus_of(machine_type: str, accelerators: list[dict], type_key: str, count_key: str) -> dict[str, int]:
    """{GPU type: count} of a VM shape: the listed accelerators, else the machine type's own (an A3's H100s)."""
    if accelerators:
        return {str(a[type_key]): int(a[count_key]) for a in accelerators}
    try:
        mt = catalog.machine_type(machine_type)
    except catalog.CatalogError:
        return {}
    return {mt.gpu: int(mt.gpu_count or 0)} if mt.gpu and not mt.tpu else {}


def shape_mismatches(res: Obj, pool_spec: dict, zone: str) -> list[str]:
    """Why the pool's VM in `zone` does not fit the reservation's shape, in the words of GKE's matcher
    (reservations/matcher.go MatchSpecificReservationShapeWithReasons, strict accelerator matching)."""
    spec = res.get("spec") or {}
    props = (spec.get("specificReservation") or {}).get("instanceProperties") or {}
    out = []
    if zone != spec.get("zone"):
        out.append(f"zones mismatch, requested {zone}, reservation at {spec.get('zone')}")
    if pool_spec.get("machineType") != props.get("machineType"):
        out.append(f"machine type mismatch, requested {pool_spec.get('machineType')}, reservation has "
                   f"{props.get('machineType')}")
    want = gpus_of(str(pool_spec.get("machineType")), list(pool_spec.get("accelerators") or []), "type", "count")
    have = gpus_of(str(props.get("machineType")), list(props.get("guestAccelerators") or []), "acceleratorType",
                   "acceleratorCount")
    for gpu, n in sorted(want.items()):
        if gpu not in have:
            out.append(f"accelerator mismatch, requested {n} chips of {gpu}, but it's missing from reservation")
        elif have[gpu] != n:
            out.append(f"accelerator mismatch, requested {n} chips of {gpu}, reservation has {have[gpu]} chips of "
                       f"{gpu}")
    for gpu, n in sorted(have.items()):
        if gpu not in want:
            out.append(f"accelerator mismatch, reservation has {n} chips of {gpu}, but it's not requested")
    return out


def compatible(res: Obj, target: Target) -> bool:
    """IsReservationCompatible (module doc), with Compute Engine's sharing rule."""
    if not shared_with_cluster(res):
        return False
    required = bool((res.get("spec") or {}).get("specificReservationRequired"))
    if target.type in (ANY, ANY_THEN_FAIL):
        return not required
    if target.type == SPECIFIC:
        return required and res["metadata"]["name"] == target.name and owner(res) == target.project
    return False


def count_of(res: Obj) -> int:
    return int(((res.get("spec") or {}).get("specificReservation") or {}).get("count") or 0)


def layout(res: Obj) -> list[Slot]:
    """The reservation's slots in fill order (module doc: blocks as declared, else one block of 18-VM sub-blocks
    for a DENSE reservation of a machine type GKE labels with its topology; no place otherwise)."""
    name = res["metadata"]["name"]
    spec = res.get("spec") or {}
    count = count_of(res)
    machine = ((spec.get("specificReservation") or {}).get("instanceProperties") or {}).get("machineType")
    dense = spec.get("deploymentType") == "DENSE" and machine in DENSE_FAMILIES
    if not dense:
        return [Slot(name, i) for i in range(count)]
    blocks = spec.get("blocks") or [{"name": f"{name}-block-1", "count": count}]
    out: list[Slot] = []
    for b in blocks:
        subs = b.get("subBlocks") or [{"name": f"{b['name']}-sub-{k + 1}", "count": min(SUBBLOCK_VMS, int(
            b["count"]) - k * SUBBLOCK_VMS)} for k in range((int(b["count"]) + SUBBLOCK_VMS - 1) // SUBBLOCK_VMS)]
        for s in subs:
            for h in range(int(s["count"])):
                out.append(Slot(name, len(out), b["name"], s["name"], f"{s['name']}-host-{h + 1}"))
    return out


def first_slot_labels(pool: Obj, reservations: list[Obj], zone: str) -> dict[str, str]:
    """The reservation labels a pool's first VM in `zone` would carry (for validate's checks, which have no store):
    those of the first slot of the first reservation it would consume, {} when none."""
    target = affinity(pool.get("spec") or {})
    if target.type == NONE:
        return {}
    for res in sorted(reservations, key=lambda r: r["metadata"]["name"]):
        if compatible(res, target) and not shape_mismatches(res, pool.get("spec") or {}, zone):
            slots = [s for s in layout(res) if (not target.block or s.block == target.block)
                     and (not target.subblock or s.subblock == target.subblock)]
            if slots:
                return Reservations.labels_for(target, slots[0])
    return {}


@dataclass
class _Book:
    res: Obj
    slots: list[Slot]
    used: dict[int, str] = field(default_factory=dict)  # slot index -> node
    since: dict[str, float] = field(default_factory=dict)  # node -> consuming since
    vm_seconds: float = 0.0
    peak: int = 0


class Reservations:
    """The cluster project's view of the reservations: which a pool's VM consumes, its slot, and the bill."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._books: dict[str, _Book] = {}
        self._slot_of: dict[str, tuple[str, int]] = {}  # node -> (reservation, slot index)
        self._promised: dict[tuple[str, str], int] = {}  # (pool, zone) -> reserved VMs granted, not registered yet
        self.from_promise: set[str] = set()  # nodes whose slot the autoscaler's grant promised

    def __bool__(self) -> bool:
        return self.store.count(KIND) > 0

    def _book(self, res: Obj) -> _Book:
        name = res["metadata"]["name"]
        book = self._books.get(name)
        if book is None:
            book = self._books[name] = _Book(res, layout(res))
        return book

    def candidates(self, pool: Obj, zone: str) -> list[_Book]:
        """The reservations a pool's VM in `zone` may consume, in name order."""
        target = affinity(pool.get("spec") or {})
        if target.type == NONE:
            return []
        out = []
        for res in sorted(self.store.list(KIND), key=lambda r: r["metadata"]["name"]):
            if compatible(res, target) and not shape_mismatches(res, pool.get("spec") or {}, zone):
                out.append(self._book(res))
        return out

    def _free(self, book: _Book, target: Target) -> list[Slot]:
        return [s for s in book.slots if s.index not in book.used
                and (not target.block or s.block == target.block)
                and (not target.subblock or s.subblock == target.subblock)]

    def room(self, pool: Obj, zone: str) -> int:
        """Free reserved VMs for the pool in `zone`, less those already granted and still booting."""
        target = affinity(pool.get("spec") or {})
        free = sum(len(self._free(b, target)) for b in self.candidates(pool, zone))
        return max(0, free - self._promised.get((pool["metadata"]["name"], zone), 0))

    def must_reserve(self, pool: Obj) -> bool:
        """SPECIFIC and ANY_RESERVATION_THEN_FAIL pools get no VM outside a reservation."""
        return affinity(pool.get("spec") or {}).type in (SPECIFIC, ANY_THEN_FAIL)

    def promise(self, pool: str, zone: str, n: int) -> None:
        if n:
            self._promised[(pool, zone)] = self._promised.get((pool, zone), 0) + n

    def target_name(self, pool: Obj) -> str:
        """How Compute Engine names the pool's reservation in its error (the affinity's value, or "any")."""
        return self.target_name_of(pool.get("spec") or {})

    @staticmethod
    def target_name_of(pool_spec: dict) -> str:
        values = (pool_spec.get("reservationAffinity") or {}).get("values") or []
        return str(values[0]) if values else "any"

    def peek(self, pool: Obj, zone: str) -> Slot | None:
        """The slot the pool's next VM in `zone` would take (for the autoscaler's template node), None: none."""
        target = affinity(pool.get("spec") or {})
        return next((free[0] for b in self.candidates(pool, zone) if (free := self._free(b, target))), None)

    def claim(self, pool: Obj, zone: str, node: str, now: float) -> Slot | None:
        """The VM `node` is created: it consumes the first free slot of a matching reservation (None: none)."""
        key = (pool["metadata"]["name"], zone)
        target = affinity(pool.get("spec") or {})
        for book in self.candidates(pool, zone):
            free = self._free(book, target)
            if free:
                slot = free[0]
                book.used[slot.index] = node
                book.since[node] = now
                book.peak = max(book.peak, len(book.used))
                self._slot_of[node] = (slot.reservation, slot.index)
                if self._promised.get(key, 0) > 0:
                    self._promised[key] -= 1
                    self.from_promise.add(node)
                return slot
        return None

    def release(self, node: str, now: float) -> None:
        """The VM is gone: its slot is free again."""
        where = self._slot_of.pop(node, None)
        if where is None:
            return
        book = self._books[where[0]]
        book.used.pop(where[1], None)
        book.vm_seconds += now - book.since.pop(node, now)

    def is_reserved(self, node: str) -> bool:
        return node in self._slot_of

    def node_labels(self, pool: Obj, slot: Slot) -> dict[str, str]:
        """GKE's labels for a VM in this slot (module doc) and the twin's consumed-reservation label."""
        return self.labels_for(affinity(pool.get("spec") or {}), slot)

    @staticmethod
    def labels_for(target: Target, slot: Slot) -> dict[str, str]:
        labels = {CONSUMED_LABEL: slot.reservation}
        if target.type == SPECIFIC:
            labels[NAME_LABEL] = target.name
            labels[PROJECT_LABEL] = target.project
            if target.block:
                labels[BLOCKS_LABEL] = target.block
            if target.subblock:
                labels[SUBBLOCKS_LABEL] = target.subblock
        if slot.block is not None:
            labels[GCE_TOPOLOGY_BLOCK] = slot.block
            labels[GCE_TOPOLOGY_SUBBLOCK] = str(slot.subblock)
            labels[GCE_TOPOLOGY_HOST] = str(slot.host)
        return labels

    def price(self, res_name: str) -> float:
        """A reserved VM's hourly price: the reservation's own (a committed use discount), else on-demand."""
        res = self.store.get(KIND, "", res_name) or self._books[res_name].res
        spec = res.get("spec") or {}
        if spec.get("hourlyPriceUsd") is not None:
            return float(spec["hourlyPriceUsd"])
        mt = catalog.machine_type(((spec.get("specificReservation") or {}).get("instanceProperties") or {})
                                  ["machineType"])
        return float(catalog.hourly_price(mt, False) or 0.0)

    def report(self, until: float) -> dict:
        """summary.json's cost.reservations: per reservation its VMs, the VM-hours used and idle, their cost; the
        idle cost the cluster's project pays (reservations it owns)."""
        for res in self.store.list(KIND):
            self._book(res)
        out = {}
        for name, book in sorted(self._books.items()):
            for node, since in list(book.since.items()):
                book.vm_seconds += until - since
                book.since[node] = until
            spec = book.res.get("spec") or {}
            count = count_of(book.res)
            price = self.price(name)
            used_h = book.vm_seconds / 3600
            idle_h = max(0.0, count * until / 3600 - used_h)
            out[name] = {"zone": spec.get("zone"), "project": owner(book.res),
                         "machine_type": ((spec.get("specificReservation") or {}).get("instanceProperties") or {})
                         .get("machineType"), "count": count, "in_use_at_end": len(book.used),
                         "in_use_peak": book.peak, "hourly_price_usd": round(price, 6),
                         "vm_hours_used": round(used_h, 3), "vm_hours_idle": round(idle_h, 3),
                         "used_usd": round(used_h * price, 2), "idle_usd": round(idle_h * price, 2),
                         "billed_to": owner(book.res)}
        return out

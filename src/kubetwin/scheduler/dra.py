"""The DynamicResources scheduler plugin (pkg/scheduler/framework/plugins/dynamicresources), in miniature.

PreFilter resolves the pod's ResourceClaims; Filter asks the structured allocator whether a node can satisfy
the claims that are not allocated yet (an allocated claim restricts the pod to its allocation's node
selector); Reserve/PreBind write the allocation and the pod into the claim's status.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable
from decimal import Decimal

import numpy as np

from kubetwin.devices.dra.allocator import AllocationError, Allocator, DeviceID, Features, slices_by_node
from kubetwin.devices.dra.claims import FINALIZER, claim_name
from kubetwin.k8s.units import parse_quantity
from kubetwin.scheduler.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    Plugin,
    Rejected,
)
from kubetwin.scheduler.plugins import node_selector_term_matches
from kubetwin.store.store import Obj, Store

NAME = "DynamicResources"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"


class PreFilterError(Exception):
    """The pod cannot be scheduled anywhere yet (UnschedulableAndUnresolvable), or, with `error`, PreFilter
    failed (a scheduling error)."""

    def __init__(self, message: str, error: bool = False):
        self.message, self.error = message, error
        super().__init__(message)


class DynamicResources(Plugin):
    """The plugin with its informer caches: slices, classes and allocated devices are kept up to date from
    watch events rather than listed per pod (the real plugin reads the same from its informers and assume
    cache)."""

    name = NAME

    def __init__(self, store: Store, features: Features = Features()) -> None:
        self.store, self.features = store, features
        self._device_cache: dict = {}  # (slice, resourceVersion, device) -> Device with its CEL verdicts
        self._pools: dict[str, list] = {}  # node -> gathered pools, while the slices stay the same
        self._slices: list[Obj] | None = None
        self._by_node: dict[str, list[Obj]] = {}
        self._classes: dict[str, Obj] | None = None
        self._allocated: dict[str, list[dict]] = {}  # claim uid -> its allocation results
        self._verdicts: dict = {}  # (node, request shape) -> (pool versions, picked devices), see Allocator
        self._pool_versions: dict[tuple[str, str], int] = {}  # bumped when an allocation in the pool changes
        self._in_use_count: dict[DeviceID, int] = {}  # allocated devices (admin access aside)
        store.watch("ResourceSlice", self._on_slice)
        store.watch("DeviceClass", self._on_class)
        store.watch("ResourceClaim", self._on_claim)

    def _on_slice(self, etype: str, obj: Obj, old: Obj | None) -> None:
        self._slices = None
        self._pools.clear()
        self._verdicts.clear()
        if old is not None or etype == "DELETED":
            name = obj["metadata"]["name"]
            self._device_cache = {k: v for k, v in self._device_cache.items() if k[0] != name}

    def _on_class(self, etype: str, obj: Obj, old: Obj | None) -> None:
        self._classes = None
        self._verdicts.clear()

    def _on_claim(self, etype: str, obj: Obj, old: Obj | None) -> None:
        uid = obj["metadata"]["uid"]
        results = (((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
        before = self._allocated.get(uid) or []
        if etype == "DELETED":
            results = None
        if (results or []) != before:
            for sign, rs in ((-1, before), (1, results or [])):
                for r in rs:
                    pool = (r["driver"], r["pool"])
                    self._pool_versions[pool] = self._pool_versions.get(pool, 0) + 1
                    if not r.get("adminAccess"):
                        dev = (r["driver"], r["pool"], r["device"])
                        left = self._in_use_count.get(dev, 0) + sign
                        if left > 0:
                            self._in_use_count[dev] = left
                        else:
                            self._in_use_count.pop(dev, None)
        if not results:
            self._allocated.pop(uid, None)
        else:
            self._allocated[uid] = results

    @staticmethod
    def wants(pod: Obj) -> bool:
        return bool(pod["spec"].get("resourceClaims"))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """dynamicresources.go EventsToRegister: ResourceClaims, DeviceClasses and ResourceSlices (upstream Add |
        Update; the twin also requeues on their deletes, and without isSchedulableAfterClaimChange's narrowing to
        the pod's own claims), a node added or changed. The pod update that names a generated claim is PreEnqueue's
        (below), not a queue move."""
        return [*(ClusterEventWithHint(ClusterEvent(kind, ActionType.All))
                  for kind in ("ResourceSlice", "ResourceClaim", "DeviceClass")),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.Update))]

    # -- PreEnqueue -----------------------------------------------------------------------------
    def pre_enqueue(self, pod: Obj) -> str | None:
        """PreEnqueue (dynamicresources.go): a pod whose generated claim is not named yet waits outside activeQ."""
        if pod["spec"].get("resourceClaims") and self.awaiting_generated_claim(pod):
            return f'pod "{pod["metadata"]["namespace"]}/{pod["metadata"]["name"]}": ResourceClaim not created yet'
        return None

    def awaiting_generated_claim(self, pod: Obj) -> bool:
        """PreEnqueue: a pod whose claim from a template is not created yet waits outside the queue, and the
        pod update that records the claim's name (UpdatePodGeneratedResourceClaim) enqueues it
        (dynamicresources.go PreEnqueue, foreachPodResourceClaim). Twin: only while the template exists, so the
        claim is on its way; a missing template or named claim still goes through PreFilter, whose
        FailedScheduling says what is missing (the real controller only logs the template error)."""
        ns = pod["metadata"]["namespace"]
        return any(pc.get("resourceClaimTemplateName") and not pc.get("resourceClaimName")
                   and claim_name(pod, pc) is None
                   and self.store.get("ResourceClaimTemplate", ns, pc["resourceClaimTemplateName"]) is not None
                   for pc in pod["spec"].get("resourceClaims") or [])

    # -- PreFilter ------------------------------------------------------------------------------
    def claims(self, pod: Obj) -> list[Obj]:
        """The pod's claims, in the plugin's words when one is missing (foreachPodResourceClaim)."""
        ns, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        out = []
        for pc in pod["spec"]["resourceClaims"]:
            if not pc.get("resourceClaimName") and not pc.get("resourceClaimTemplateName"):
                raise PreFilterError(f'pod "{ns}/{pod_name}", spec.resourceClaim "{pc["name"]}": none of the '
                                     "supported fields are set")
            name = claim_name(pod, pc)
            if name is None:
                raise PreFilterError(f'pod "{ns}/{pod_name}": ResourceClaim not created yet')
            claim = self.store.get("ResourceClaim", ns, name)
            if claim is None:
                raise PreFilterError(f'could not find ResourceClaim "{ns}/{name}"')
            if claim["metadata"].get("deletionTimestamp"):
                raise PreFilterError(f'resourceclaim "{name}" is being deleted')
            if not (claim.get("status") or {}).get("allocation"):
                self._check_requests(claim)
            out.append(claim)
        return out

    def pre_filter(self, state: CycleState) -> None:
        """The pod's claims into the cycle state; the Filter then runs per node after the scan, so it sees all."""
        if not self.wants(state.pod):
            return
        try:
            claims = self.claims(state.pod)
        except PreFilterError as exc:
            if exc.error:
                raise Rejected(NAME, f'running PreFilter plugin "{NAME}": {exc.message}', error=True) from None
            raise Rejected(NAME, exc.message) from None
        state.data[NAME] = (claims, None)
        state.want = state.n  # scan all, keep the first numFeasibleNodesToFind that the claims fit

    def filter_rows(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        """The Filter over the rows that passed the other filters, in scan order."""
        entry = state.data.get(NAME)
        if entry is None:
            return rows
        claims = entry[0]
        infos = [state.table.infos[int(r)] for r in rows]
        try:
            ok, rejected = self.filter(claims, (ni.node for ni in infos if ni is not None), state.to_find)
        except AllocationError as exc:
            raise Rejected(NAME, str(exc), error=True) from None
        state.data[NAME] = (claims, ok)
        for why in rejected.values():
            state.reject(NAME, why)
        if state.traced is not None:
            state.traced[NAME] = {**dict.fromkeys(ok, "passed"), **rejected}
        keep = [int(r) for r, ni in zip(rows, infos, strict=True) if ni is not None and ni.name in ok]
        return np.array(keep, dtype=rows.dtype)

    def reserve(self, state: CycleState, row: int, node: str) -> dict[str, str] | None:
        """Reserve + PreBind: the allocation and the pod into the claims' status, ahead of Bind."""
        entry = state.data.get(NAME)
        if entry is not None and entry[1] is not None:
            self.bind(state.pod, entry[0], entry[1][node]())
        return None

    def _check_requests(self, claim: Obj) -> None:
        who = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            if req.get("firstAvailable"):
                if not self.features.prioritized_list:
                    raise PreFilterError(f"resource claim {who}, request {req['name']}: has subrequests, but the "
                                         "DRAPrioritizedList feature is disabled")
                subs = [(f"{req['name']}/{s['name']}", s) for s in req["firstAvailable"]]
            elif req.get("exactly") is not None:
                subs = [(req["name"], req["exactly"])]
            else:
                raise PreFilterError(f"resource claim {who}, request {req['name']}: unknown request type")
            for rname, spec in subs:
                cls = spec.get("deviceClassName")
                if not cls:
                    raise PreFilterError(f"request {rname}: unsupported request type", error=True)
                if self.store.get("DeviceClass", "", cls) is None:
                    raise PreFilterError(f"request {rname}: device class {cls} does not exist")

    # -- Filter ---------------------------------------------------------------------------------
    def filter(self, claims: list[Obj], nodes: Iterable[Obj], limit: int | None = None
               ) -> tuple[dict[str, Callable[[], list[dict]]], dict[str, str]]:
        """Allocations per feasible node name (stopping at `limit` of them, as the scheduler stops at
        numFeasibleNodesToFind), and the rejection reason per rejected node name."""
        pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
        allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
        ok: dict[str, Callable[[], list[dict]]] = {}
        rejected: dict[str, str] = {}
        allocator = None
        if pending:
            if self._slices is None:
                self._slices = self.store.list("ResourceSlice")
                self._by_node = slices_by_node(self._slices)
            if self._classes is None:
                self._classes = {c["metadata"]["name"]: c for c in self.store.list("DeviceClass")}
            used, consumed = self._in_use()
            allocator = Allocator(self._classes, self._slices, used, self.features, consumed,
                                  cache=self._device_cache, pools=self._pools, verdicts=self._verdicts,
                                  pool_versions=self._pool_versions, by_node=self._by_node)
        for node in nodes:
            if limit is not None and len(ok) >= limit:
                break
            name = node["metadata"]["name"]
            if any(not allocation_on_node(c, node) for c in allocated):
                rejected[name] = NOT_ON_NODE
                continue
            if allocator is None:
                ok[name] = list
                continue
            try:
                chosen = allocator.search(node, pending)
            except AllocationError as exc:
                raise AllocationError(f'running "{NAME}" filter plugin: {exc}') from None
            if chosen is None:
                rejected[name] = CANNOT_ALLOCATE
            else:
                ok[name] = functools.partial(allocator.results, chosen)
        return ok, rejected

    def _in_use(self) -> tuple[Collection[DeviceID], dict]:
        """Devices allocated to claims (admin access does not count), and counters they consume."""
        used = self._in_use_count.keys()
        consumed: dict[tuple[str, str, str], dict[str, Decimal]] = {}
        if not self.features.partitionable_devices:
            return used, consumed
        counters = self._counters_by_device()
        for dev in used:
            for cc in counters.get(dev, []):
                key = (dev[0], dev[1], cc["counterSet"])
                for n, v in (cc.get("counters") or {}).items():
                    consumed.setdefault(key, {})[n] = consumed.get(key, {}).get(n, Decimal(0)) + \
                        parse_quantity(v["value"])
        return used, consumed

    def _counters_by_device(self) -> dict[DeviceID, list[dict]]:
        out = {}
        for s in self._slices or self.store.list("ResourceSlice"):
            spec = s["spec"]
            for d in spec.get("devices") or []:
                if d.get("consumesCounters"):
                    out[(spec["driver"], spec["pool"]["name"], d["name"])] = d["consumesCounters"]
        return out

    # -- Reserve / PreBind ----------------------------------------------------------------------
    def bind(self, pod: Obj, claims: list[Obj], allocation: list[dict]) -> None:
        """Write each new allocation and add the pod to every claim's reservedFor."""
        pending = iter(allocation)
        consumer = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        for claim in claims:
            status = dict(claim.get("status") or {})
            if not status.get("allocation"):
                # allocationTimestamp is only written with DRADeviceBindingConditions (alpha, off in 1.34)
                status["allocation"] = next(pending)
                fins = list(claim["metadata"].get("finalizers") or [])
                if FINALIZER not in fins:
                    claim = {**claim, "metadata": {**claim["metadata"], "finalizers": fins + [FINALIZER]}}
            reserved = list(status.get("reservedFor") or [])
            if consumer not in reserved:
                reserved.append(consumer)
            status["reservedFor"] = reserved
            self.store.update({**claim, "status": status})


def allocation_on_node(claim: Obj, node: Obj) -> bool:
    """Whether an allocated claim's devices are reachable from the node (its allocation's node selector)."""
    sel = claim["status"]["allocation"].get("nodeSelector")
    if not sel:
        return True
    return any(node_selector_term_matches(t, node) for t in sel.get("nodeSelectorTerms") or [])


def allocated_devices(claims: Iterable[Obj]) -> int:
    """How many devices the claims hold (for GPU accounting)."""
    n = 0
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        n += sum(1 for r in (alloc.get("devices") or {}).get("results") or [] if not r.get("adminAccess"))
    return n

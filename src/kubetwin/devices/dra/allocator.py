"""The DRA structured allocator (k8s.io/dynamic-resource-allocation/structured, Kubernetes 1.34).

Given the claims a pod needs, one node and the cluster's ResourceSlices, find devices for every request of
every claim: a depth-first search with backtracking across devices, requests and claims, where the first
complete solution wins (there is no scoring). Devices must match the DeviceClass's and the request's CEL
selectors, be free (unless adminAccess), fit their counter sets (partitionable devices) and keep every
matchAttribute/distinctAttribute constraint satisfiable. `None` means "no solution on this node" (the
scheduler reports `cannot allocate all claims`); AllocationError aborts scheduling of the pod.

Ordering: the 1.34 stable allocator walks pools in Go map order (not deterministic); later releases sort pools
by driver and name and slices by name. The twin always sorts, so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubetwin.cel import CelError, DeviceView, compile_selector
from kubetwin.k8s import nodeaffinity
from kubetwin.k8s.taints import tolerates
from kubetwin.k8s.units import parse_quantity

# resourceapi.AllocationResultsMaxSize (k8s.io/api resource/v1 types.go)
ALLOCATION_RESULTS_MAX_SIZE = 32

DeviceID = tuple[str, str, str]  # (driver, pool, device)


class AllocationError(Exception):
    """An allocator error: scheduling of the pod fails with this message (not merely "unschedulable")."""


@dataclass(frozen=True)
class Features:
    """DRA feature gates at Kubernetes 1.34 defaults (kube_features.go)."""

    admin_access: bool = True  # DRAAdminAccess beta, on
    prioritized_list: bool = True  # DRAPrioritizedList beta, on
    partitionable_devices: bool = False  # DRAPartitionableDevices alpha, off
    device_taints: bool = False  # DRADeviceTaints alpha, off

    @classmethod
    def from_gates(cls, gates: dict[str, bool]) -> Features:
        d = cls()
        return cls(gates.get("DRAAdminAccess", d.admin_access), gates.get("DRAPrioritizedList", d.prioritized_list),
                   gates.get("DRAPartitionableDevices", d.partitionable_devices),
                   gates.get("DRADeviceTaints", d.device_taints))


@dataclass
class Device:
    """One device of one slice, with what the search needs precomputed."""

    id: DeviceID
    spec: dict
    slice: dict
    view: DeviceView | None = None
    matches: dict[tuple, bool] = field(default_factory=dict)

    def cel(self) -> DeviceView:
        if self.view is None:
            self.view = DeviceView.of(self.id[0], self.spec)
        return self.view

    def attribute(self, name: str) -> Any:
        attrs = self.spec.get("attributes") or {}
        if name in attrs:
            return _attr(attrs[name])
        domain, _, ident = name.partition("/")
        if domain == self.id[0] and ident in attrs:  # unqualified names are in the driver's domain
            return _attr(attrs[ident])
        return None


def _attr(a: dict) -> Any:
    for k in ("int", "bool", "string", "version"):
        if k in a:
            return (k, a[k])
    return None


@dataclass
class Pool:
    driver: str
    name: str
    slices: list[dict]
    incomplete: bool
    invalid: str
    devices: list[Device]


def slices_by_node(slices: Iterable[dict]) -> dict[str, list[dict]]:
    """nodeName -> its slices; "" -> the slices that may reach several nodes."""
    out: dict[str, list[dict]] = {}
    for sl in slices:
        out.setdefault((sl.get("spec") or {}).get("nodeName") or "", []).append(sl)
    return out


def slice_matches_node(spec: dict, node: dict | None) -> bool:
    if node is None:
        return bool(spec.get("allNodes"))
    if spec.get("nodeName"):
        return spec["nodeName"] == node["metadata"]["name"]
    if spec.get("allNodes"):
        return True
    sel = spec.get("nodeSelector")
    if sel:
        return nodeaffinity.terms_match(sel.get("nodeSelectorTerms") or [], node["metadata"].get("labels") or {},
                                        node["metadata"]["name"])
    return False


def gather_pools(slices: Iterable[dict], node: dict | None, cache: dict | None = None,
                 by_node: dict[str, list[dict]] | None = None) -> list[Pool]:
    """GatherPools: the newest generation of each pool that reaches the node, sorted by driver and name.

    `cache` keeps each device's CEL view and selector verdicts across attempts, keyed by the slice's
    name and resourceVersion, so a changed slice is seen afresh."""
    by_pool: dict[tuple[str, str], list[dict]] = {}
    if by_node is not None and node is not None:  # node-local slices indexed by node, the rest checked
        slices = [*by_node.get(node["metadata"]["name"], ()), *by_node.get("", ())]
    for s in slices:
        spec = s.get("spec") or {}
        if slice_matches_node(spec, node):
            by_pool.setdefault((spec["driver"], spec["pool"]["name"]), []).append(s)
    pools = []
    for (driver, name), group in sorted(by_pool.items()):
        gen = max(int(s["spec"]["pool"].get("generation", 0)) for s in group)
        keep = sorted((s for s in group if int(s["spec"]["pool"].get("generation", 0)) == gen),
                      key=lambda s: s["metadata"]["name"])
        count = int(keep[0]["spec"]["pool"].get("resourceSliceCount", 1))
        devices, seen, invalid = [], set(), ""
        for s in keep:
            for d in s["spec"].get("devices") or []:
                if d["name"] in seen and not invalid:
                    invalid = f"duplicate device name {d['name']}"
                seen.add(d["name"])
                if cache is None:
                    devices.append(Device((driver, name, d["name"]), d, s))
                    continue
                key = (s["metadata"]["name"], s["metadata"].get("resourceVersion"), d["name"])
                dev = cache.get(key)
                if dev is None:
                    dev = cache[key] = Device((driver, name, d["name"]), d, s)
                devices.append(dev)
        pools.append(Pool(driver, name, keep, len(keep) != count, invalid, devices))
    return pools


@dataclass
class _Request:
    """One request (or one subrequest of a firstAvailable list) as the search sees it."""

    claim_index: int
    name: str  # "req" or "req/sub"
    parent: str
    class_name: str
    selectors: list[Any]
    class_selectors: list[Any]
    all_mode: bool
    count: int
    admin: bool
    tolerations: list[dict]

    @property
    def match_key(self) -> tuple:
        """What decides whether a device matches: the selector texts, not the request's name."""
        return tuple(s.expression for _, s in self.class_selectors + self.selectors)


class Allocator:
    """One allocation attempt for a set of claims on one node (Allocator.Allocate)."""

    def __init__(self, classes: dict[str, dict], slices: list[dict], allocated: Collection[DeviceID],
                 features: Features = Features(), consumed: dict[tuple[str, str, str], dict[str, Decimal]] | None
                 = None, cache: dict | None = None, pools: dict[str, list[Pool]] | None = None,
                 verdicts: dict | None = None, pool_versions: dict[tuple[str, str], int] | None = None,
                 by_node: dict[str, list[dict]] | None = None) -> None:
        """`cache` keeps devices' CEL views and verdicts across attempts; `pools` the gathered pools per node
        while the slices do not change (both are owned by the caller, who drops them when slices change).
        `verdicts` remembers each node's search outcome per request shape while `pool_versions` (bumped by the
        caller whenever an allocation in a pool changes) say its devices are still as they were: the search
        is a pure function of those, so the remembered outcome is the one it would find again."""
        self.classes, self.slices, self.allocated, self.features = classes, slices, allocated, features
        self.consumed = consumed or {}  # (driver, pool, counterSet) -> counter -> already consumed
        self.cache = cache
        self.pool_cache = pools
        self.verdicts = verdicts
        self.pool_versions = pool_versions if pool_versions is not None else {}
        self._prepared: list[dict] | None = None
        self.by_node = by_node if by_node is not None else slices_by_node(slices)

    # -- set-up ---------------------------------------------------------------------------------
    def _class(self, claim_name: str, req_name: str, class_name: str) -> tuple[dict, list[Any]]:
        if not class_name:
            raise AllocationError(f"claim {claim_name}, request {req_name}: missing device class name "
                                  "(unsupported request type?)")
        cls = self.classes.get(class_name)
        if cls is None:
            raise AllocationError(f"claim {claim_name}, request {req_name}: could not retrieve device class "
                                  f'{class_name}: deviceclass.resource.k8s.io "{class_name}" not found')
        return cls, _compiled(f"class {class_name}", (cls.get("spec") or {}).get("selectors"))

    def _requests(self, index: int, claim: dict) -> list[list[_Request]]:
        """Each request as its list of alternatives (one for `exactly`, several for `firstAvailable`)."""
        cname = kobj(claim)
        out = []
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            rname = req["name"]
            if req.get("firstAvailable"):
                if not self.features.prioritized_list:
                    raise AllocationError(f"claim {cname}, request {rname}: has subrequests, but the "
                                          "DRAPrioritizedList feature is disabled")
                alts = [self._one(index, cname, f"{rname}/{sub['name']}", rname, sub, False)
                        for sub in req["firstAvailable"]]
                out.append([a for a in alts if a.all_mode or a.count <= ALLOCATION_RESULTS_MAX_SIZE])
            else:
                exact = req.get("exactly") or {}
                if exact.get("adminAccess") and not self.features.admin_access:
                    raise AllocationError(f"claim {cname}, request {rname}: admin access is requested, but the "
                                          "feature is disabled")
                out.append([self._one(index, cname, rname, rname, exact, bool(exact.get("adminAccess")))])
        least = sum(min((a.count for a in alts), default=0) for alts in out)
        if least > ALLOCATION_RESULTS_MAX_SIZE:
            raise AllocationError(f"claim {cname}: number of requested devices {least} exceeds the claim limit "
                                  f"of {ALLOCATION_RESULTS_MAX_SIZE}")
        return out

    def _one(self, index: int, cname: str, name: str, parent: str, spec: dict, admin: bool) -> _Request:
        _, class_sel = self._class(cname, name, spec.get("deviceClassName", ""))
        sel = _compiled(f"claim {cname}", spec.get("selectors"))
        mode = spec.get("allocationMode") or "ExactCount"
        return _Request(index, name, parent, spec["deviceClassName"], sel, class_sel, mode == "All",
                        int(spec.get("count", 1)) if mode != "All" else 0, admin, spec.get("tolerations") or [])

    # -- the search -----------------------------------------------------------------------------
    def allocate(self, node: dict | None, claims: list[dict]) -> list[dict] | None:
        """AllocationResult per claim (in order), or None when this node cannot satisfy them all."""
        chosen = self.search(node, claims)
        return None if chosen is None else self.results(chosen)

    def search(self, node: dict | None, claims: list[dict]) -> list[tuple[_Request, Device]] | None:
        """The devices picked on this node, or None; results() turns them into AllocationResults (the
        scheduler only needs them for the node it picks)."""
        if self._prepared is not claims:  # the claims' requests are compiled once for all nodes
            self.claims = claims
            self.reqs = [self._requests(i, c) for i, c in enumerate(claims)]
            self.constraints = [((c.get("spec") or {}).get("devices") or {}).get("constraints") or []
                                for c in claims]
            self.flat = [(ci, ri) for ci, rs in enumerate(self.reqs) for ri in range(len(rs))]
            self.shape = repr([[[(a.match_key, a.all_mode, a.count, a.admin, repr(a.tolerations),
                                  a.name[len(a.parent):]) for a in alts] for alts in rs] for rs in self.reqs]) \
                + repr(self.constraints)
            self._prepared = claims
        self.node = node
        key = node["metadata"]["name"] if node is not None else ""
        pools = self.pool_cache.get(key) if self.pool_cache is not None else None
        if pools is None:
            pools = gather_pools(self.slices, node, self.cache, self.by_node)
            if self.pool_cache is not None:
                self.pool_cache[key] = pools
        self.pools = pools
        vkey = state = None
        if self.verdicts is not None:
            vkey = (key, self.shape)
            state = tuple(self.pool_versions.get((p.driver, p.name), 0) for p in pools)
            hit = self.verdicts.get(vkey)
            if hit is not None and hit[0] == state:
                return None if hit[1] is None else [(self.reqs[ci][ri][ai], dev) for ci, ri, ai, dev in hit[1]]
        self.counters = self._counter_sets()
        self.chosen: list[tuple[_Request, Device]] = []
        self.in_use: set[DeviceID] = set()
        found = self._claim_request(self.flat, 0)
        chosen = list(self.chosen) if found else None
        if vkey is not None:
            self.verdicts[vkey] = (state, None if chosen is None else [
                (r.claim_index, self._position(r)[0], self._position(r)[1], d) for r, d in chosen])
        return chosen

    def _position(self, req: _Request) -> tuple[int, int]:
        for ri, alts in enumerate(self.reqs[req.claim_index]):
            for ai, alt in enumerate(alts):
                if alt is req:
                    return ri, ai
        raise AssertionError("request not found")

    def results(self, chosen: list[tuple[_Request, Device]]) -> list[dict]:
        self.chosen = chosen
        return [self._result(ci) for ci in range(len(self.claims))]

    def _claim_request(self, flat: list[tuple[int, int]], k: int) -> bool:
        if k == len(flat):
            return True
        ci, ri = flat[k]
        for alt in self.reqs[ci][ri]:
            mark = len(self.chosen)
            if self._devices_for(alt, flat, k, alt.count if not alt.all_mode else -1, 0):
                return True
            self._rollback(mark)
        return False

    def _devices_for(self, req: _Request, flat: list, k: int, need: int, start: int) -> bool:
        """Pick the remaining `need` devices of req (need -1: every matching device), then the next request."""
        if need == 0:
            return self._claim_request(flat, k + 1)
        if need < 0:
            return self._all_devices(req, flat, k)
        for i, dev in enumerate(self._candidates(), start=0):
            if i < start or not self._usable(req, dev):
                continue
            mark = len(self.chosen)
            self._take(req, dev)
            if self._constraints_ok(req.claim_index) and self._devices_for(req, flat, k, need - 1, i + 1):
                return True
            self._rollback(mark)
        return False

    def _all_devices(self, req: _Request, flat: list, k: int) -> bool:
        matching = []
        for pool in self.pools:
            for dev in pool.devices:
                if self._selected(req, dev):
                    if pool.incomplete or pool.invalid:
                        raise AllocationError(
                            f"claim {kobj(self.claims[req.claim_index])}, request {req.name}: asks for all "
                            f"devices, but resource pool {pool.driver}/{pool.name} is currently "
                            + ("being updated" if pool.incomplete else "invalid"))
                    matching.append(dev)
        if not matching or len(matching) > ALLOCATION_RESULTS_MAX_SIZE:
            return False
        mark = len(self.chosen)
        for dev in matching:
            if not self._usable(req, dev):
                self._rollback(mark)
                return False
            self._take(req, dev)
            if not self._constraints_ok(req.claim_index):
                raise AllocationError(f"claim {kobj(self.claims[req.claim_index])}, request {req.name}: cannot "
                                      f"add device {'/'.join(dev.id)} because a claim constraint would not be "
                                      "satisfied")
        if self._claim_request(flat, k + 1):
            return True
        self._rollback(mark)
        return False

    def _candidates(self) -> Iterable[Device]:
        for pool in self.pools:
            if pool.invalid and pool.devices:
                raise AllocationError(f"pool {pool.name} is invalid: {pool.invalid}")
            yield from pool.devices

    def _selected(self, req: _Request, dev: Device) -> bool:
        """The device matches the class and the request selectors (results cached per device and request)."""
        key = req.match_key
        hit = dev.matches.get(key)
        if hit is None:
            hit = True
            for what, sel in req.class_selectors + req.selectors:
                try:
                    if not sel.matches(dev.cel()):
                        hit = False
                        break
                except CelError as exc:
                    raise AllocationError(f"{what}: CEL runtime error: {exc.message}") from None
            dev.matches[key] = hit
        return hit

    def _usable(self, req: _Request, dev: Device) -> bool:
        if not req.admin and (dev.id in self.allocated or dev.id in self.in_use):
            return False
        if dev.spec.get("consumesCounters") and not self.features.partitionable_devices:
            return False
        if self.features.device_taints:
            for taint in dev.spec.get("taints") or []:
                if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(req.tolerations, taint):
                    return False
        if not self._selected(req, dev):
            return False
        return self._counters_fit(dev)

    def _counter_sets(self) -> dict[tuple[str, str, str], dict[str, Decimal]]:
        free: dict[tuple[str, str, str], dict[str, Decimal]] = {}
        if not self.features.partitionable_devices:
            return free
        for pool in self.pools:
            for s in pool.slices:
                for cs in s["spec"].get("sharedCounters") or []:
                    key = (pool.driver, pool.name, cs["name"])
                    used = self.consumed.get(key, {})
                    free[key] = {n: parse_quantity(c["value"]) - used.get(n, Decimal(0))
                                 for n, c in (cs.get("counters") or {}).items()}
        return free

    def _counters_fit(self, dev: Device) -> bool:
        for cc in dev.spec.get("consumesCounters") or []:
            have = self.counters.get((dev.id[0], dev.id[1], cc["counterSet"]))
            if have is None:
                return False
            for n, c in (cc.get("counters") or {}).items():
                if have.get(n, Decimal(0)) < parse_quantity(c["value"]):
                    return False
        return True

    def _take(self, req: _Request, dev: Device) -> None:
        self.chosen.append((req, dev))
        if not req.admin:
            self.in_use.add(dev.id)
        self._charge(dev, -1)

    def _rollback(self, mark: int) -> None:
        while len(self.chosen) > mark:
            req, dev = self.chosen.pop()
            self.in_use.discard(dev.id)
            self._charge(dev, 1)

    def _charge(self, dev: Device, sign: int) -> None:
        for cc in dev.spec.get("consumesCounters") or []:
            have = self.counters.get((dev.id[0], dev.id[1], cc["counterSet"]))
            if have is not None:
                for n, c in (cc.get("counters") or {}).items():
                    have[n] = have.get(n, Decimal(0)) + sign * parse_quantity(c["value"])

    def _constraints_ok(self, ci: int) -> bool:
        """matchAttribute: every chosen device of the named requests has the attribute, all equal;
        distinctAttribute: all different."""
        for con in self.constraints[ci]:
            names = set(con.get("requests") or [])
            devs = [d for r, d in self.chosen if r.claim_index == ci and
                    (not names or r.name in names or r.parent in names)]
            attr = con.get("matchAttribute") or con.get("distinctAttribute")
            if not attr or not devs:
                continue
            values = [d.attribute(attr) for d in devs]
            if any(v is None for v in values):
                return False
            if con.get("matchAttribute") and len(set(values)) > 1:
                return False
            if con.get("distinctAttribute") and len(set(values)) < len(values):
                return False
        return True

    # -- the result -----------------------------------------------------------------------------
    def _result(self, ci: int) -> dict:
        picked = [(r, d) for r, d in self.chosen if r.claim_index == ci]
        results = []
        for r, d in picked:
            res = {"request": r.name, "driver": d.id[0], "pool": d.id[1], "device": d.id[2]}
            if r.admin:
                res["adminAccess"] = True
            results.append(res)
        config = []
        for r, _ in picked:
            for cfg in (self.classes[r.class_name].get("spec") or {}).get("config") or []:
                entry = {"source": "FromClass", "requests": [r.name], **cfg}
                if entry not in config:
                    config.append(entry)
        for cfg in ((self.claims[ci].get("spec") or {}).get("devices") or {}).get("config") or []:
            config.append({"source": "FromClaim", **cfg})
        out: dict[str, Any] = {"devices": {"results": results}}
        if config:
            out["devices"]["config"] = config
        selector = node_selector_of([d for _, d in picked])
        if selector is not None:
            out["nodeSelector"] = selector
        return out


def node_selector_of(devices: list[Device]) -> dict | None:
    """createNodeSelector: a node-local device pins the node; else the AND of the slices' selectors."""
    term: dict[str, list] = {"matchFields": [], "matchExpressions": []}
    for d in devices:
        spec = d.slice["spec"]
        if spec.get("nodeName"):
            return {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [spec["nodeName"]]}]}]}
        terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
        if len(terms) > 1:
            raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        for t in terms:
            for kind in ("matchFields", "matchExpressions"):
                for req in t.get(kind) or []:
                    if req not in term[kind]:
                        term[kind].append(req)
    term = {k: v for k, v in term.items() if v}
    return {"nodeSelectorTerms": [term]} if term else None


def kobj(obj: dict) -> str:
    """klog.KObj: namespace/name, or name for cluster-scoped objects."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _compiled(what: str, selectors: list[dict] | None) -> list[tuple[str, Any]]:
    out = []
    for i, sel in enumerate(selectors or []):
        expr = (sel.get("cel") or {}).get("expression", "")
        if not expr:
            raise AllocationError(f"{what}, selector #{i}: CEL expression empty (unsupported selector type?)")
        try:
            out.append((f"{what}: selector #{i}", compile_selector(expr)))
        except CelError as exc:
            raise AllocationError(f"{what}: selector #{i}: CEL compile error: {exc.message}") from None
    return out

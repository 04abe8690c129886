"""Routing presets: the EPP configurations people deploy and the routers they compare it with, each a `Router`.

Every router: `pick(req, snap, now) -> Decision`; `routed(req, index_or_name)` once the request is sent (PreRequest:
index updates, in-flight counts); `finished(req, name)` when its response completes; `remove(name)` when an endpoint
leaves. Routers keep their own in-flight counts only where the real ones do (SGLang, production-stack's QPS monitor,
Dynamo); the EPP presets use the scraped snapshot alone.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import deque
from typing import Any, Protocol

import numpy as np

from kubetwin.serving.router.epp import (
    NO_ENDPOINT_REASON,
    PrefixOracle,
    build_router,
)
from kubetwin.serving.router.prefix_index import (
    AVERAGE_CHARS_PER_TOKEN,
    DEFAULT_BLOCK_TOKENS,
    ApproxPrefixIndex,
    model_salt,
    request_blocks,
)
from kubetwin.serving.types import Decision, EndpointSnapshot, Request


class Router(Protocol):
    """What the data plane (and the live gateway) calls."""

    name: str

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision: ...

    def routed(self, req: Request, index_or_name: int | str) -> None: ...

    def finished(self, req: Request, name: str) -> None: ...

    def remove(self, name: str) -> None: ...


_NO_ENDPOINT = Decision(None, 503, NO_ENDPOINT_REASON)

# ----------------------------------------------------------------------------------------------------------------
# EndpointPickerConfig presets
# ----------------------------------------------------------------------------------------------------------------
# GIE@1748e829 pkg/epp/config/loader/defaults.go `loadDefaultConfig` (same in llm-d-router pkg/epp/config/loader)
EPP_DEFAULT_CONFIG: dict[str, Any] = {
    "plugins": [
        {"type": "queue-scorer"},
        {"type": "kv-cache-utilization-scorer"},
        {"type": "prefix-cache-scorer"},
    ],
    "schedulingProfiles": [
        {
            "name": "default",
            "plugins": [
                {"pluginRef": "queue-scorer", "weight": 2},
                {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                {"pluginRef": "prefix-cache-scorer", "weight": 3},
            ],
        }
    ],
}
# GIE@v1.0.0 config/charts/inferencepool/templates/epp-config.yaml: the same scorers, no weights (= 1 each)
EPP_V1_0_CONFIG: dict[str, Any] = {
    "plugins": EPP_DEFAULT_CONFIG["plugins"] + [{"type": "max-score-picker"}],
    "schedulingProfiles": [
        {
            "name": "default",
            "plugins": [
                {"pluginRef": "queue-scorer"},
                {"pluginRef": "kv-cache-utilization-scorer"},
                {"pluginRef": "prefix-cache-scorer"},
                {"pluginRef": "max-score-picker"},
            ],
        }
    ],
}
# llm-d "load" baseline: queue 1 + kv 1 (llm-d/llm-d-kv-cache benchmarking/73-capacity/README.md, 2025-09 @d070ea6)
LOAD_CONFIG: dict[str, Any] = {
    "plugins": [{"type": "queue-scorer"}, {"type": "kv-cache-utilization-scorer"}],
    "schedulingProfiles": [
        {"name": "default", "plugins": [{"pluginRef": "queue-scorer"}, {"pluginRef": "kv-cache-utilization-scorer"}]}
    ],
}
# llm-d "precise": precise-prefix 3, kv 2, queue 2 (the 73-capacity benchmark's config, same README). The repo's
# sample deploy/config/epp-precise-prefix-cache-config.yaml uses 2/1/1 instead: pass weights= to get it.
PRECISE_CONFIG: dict[str, Any] = {
    "plugins": [
        {"type": "precise-prefix-cache-scorer"},
        {"type": "kv-cache-utilization-scorer"},
        {"type": "queue-scorer"},
        {"type": "max-score-picker"},
    ],
    "schedulingProfiles": [
        {
            "name": "default",
            "plugins": [
                {"pluginRef": "precise-prefix-cache-scorer", "weight": 3},
                {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                {"pluginRef": "queue-scorer", "weight": 2},
                {"pluginRef": "max-score-picker"},
            ],
        }
    ],
}


# ----------------------------------------------------------------------------------------------------------------
# plain Kubernetes Service
# ----------------------------------------------------------------------------------------------------------------
class RoundRobinRouter:
    """Round-robin over the endpoints sorted by name (production-stack's `roundrobin`; kube-proxy's IPVS mode with
    its default `rr` scheduler). A Service in kube-proxy's default iptables mode does NOT do this: see
    ServiceRandomRouter."""

    def __init__(self, name: str = "round-robin", **_: Any) -> None:
        self.name = name
        self._names: list[str] = []
        self._order: list[int] = []
        self._next: dict[tuple[str, ...], int] = {}
        self._key: tuple[str, ...] = ()

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if not len(snap):
            return _NO_ENDPOINT
        if snap.names != self._names:
            self._names = list(snap.names)
            self._order = sorted(range(len(snap)), key=snap.names.__getitem__)
            self._key = tuple(snap.names[i] for i in self._order)
        i = self._next.get(self._key, 0)
        self._next[self._key] = i + 1  # a counter per endpoint set, as production-stack keeps
        return Decision(self._order[i % len(self._order)])

    def routed(self, req: Request, index_or_name: int | str) -> None:
        pass

    def finished(self, req: Request, name: str) -> None:
        pass

    def remove(self, name: str) -> None:
        pass


class RandomRouter(RoundRobinRouter):
    """Uniform random per request."""

    def __init__(self, name: str = "random", seed: int = 0, **_: Any) -> None:
        super().__init__(name)
        self.rng = np.random.default_rng(seed)

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if not len(snap):
            return _NO_ENDPOINT
        return Decision(int(self.rng.integers(len(snap))))


class ServiceRandomRouter(RandomRouter):
    """What a ClusterIP Service gives by default: kube-proxy's iptables mode (and nftables) sends each new
    *connection* to a uniformly random endpoint (`-m statistic --mode random --probability 1/(n-i)` chain); with
    HTTP keep-alive every request on a connection goes to the same pod. Modelled per request, i.e. one request per
    connection (clients that open a connection per request, or a gateway without pooling)."""

    def __init__(self, name: str = "service-random", seed: int = 0, **_: Any) -> None:
        super().__init__(name, seed)


# ----------------------------------------------------------------------------------------------------------------
# GIE v0.3 decision tree
# ----------------------------------------------------------------------------------------------------------------
class LegacyV03Router(RoundRobinRouter):
    """The pre-GA decision tree (GIE@v0.3.0 pkg/epp/scheduling/{scheduler.go,filter.go}): Critical requests ->
    [waiting < 128 ? loRASoftAffinity -> leastQueue -> leastKV : leastQueue -> loRASoftAffinity -> leastKV]; any other
    request (v0.3's IsCritical is true only for criticality Critical, so Standard too) -> keep waiting <= 5 and kv <=
    0.8, none left -> 429, else leastQueue -> loRASoftAffinity -> leastKV; then a uniform random pick. A filter
    that leaves nothing passes its input on. Critical = priority > 0 in the twin."""

    # GIE@v0.3.0 scheduler.go env defaults
    KV_CACHE_THRESHOLD = 0.8
    QUEUE_THRESHOLD_CRITICAL = 5
    QUEUEING_THRESHOLD_LORA = 128
    LORA_AFFINITY_THRESHOLD = 0.999

    def __init__(self, name: str = "legacy-v0.3", seed: int = 0, **_: Any) -> None:
        super().__init__(name)
        self.rng = np.random.default_rng(seed)

    def _least_queue(self, snap: EndpointSnapshot, c: list[int]) -> list[int]:
        q = [int(snap.waiting[i]) for i in c]
        lo, hi = min(q), max(q)
        return [i for i, v in zip(c, q, strict=True) if lo <= v <= lo + (hi - lo) // len(c)]

    def _least_kv(self, snap: EndpointSnapshot, c: list[int]) -> list[int]:
        kv = [float(snap.kv_usage[i]) for i in c]
        lo, hi = min(kv), max(kv)
        return [i for i, v in zip(c, kv, strict=True) if lo <= v <= lo + (hi - lo) / len(c)]

    def _lora(self, req: Request, snap: EndpointSnapshot, c: list[int]) -> list[int]:
        target = req.lora or req.model
        aff, avail = [], []
        for i in c:
            active = snap.active_loras[i] if snap.active_loras else frozenset()
            if target in active:
                aff.append(i)
            elif snap.max_loras is not None and len(active) < int(snap.max_loras[i]):
                avail.append(i)
        if aff and avail:
            out = aff if self.rng.random() < self.LORA_AFFINITY_THRESHOLD else avail
        else:
            out = aff or avail
        return out or c  # failure -> the input goes on

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if not len(snap):
            return _NO_ENDPOINT
        c = list(range(len(snap)))
        if req.priority > 0:
            low = [i for i in c if snap.waiting[i] < self.QUEUEING_THRESHOLD_LORA]
            if low:
                c = self._least_kv(snap, self._least_queue(snap, self._lora(req, snap, low)))
            else:
                c = self._least_kv(snap, self._lora(req, snap, self._least_queue(snap, c)))
        else:
            cap = [
                i
                for i in c
                if snap.waiting[i] <= self.QUEUE_THRESHOLD_CRITICAL and snap.kv_usage[i] <= self.KV_CACHE_THRESHOLD
            ]
            if not cap:
                return Decision(None, 429, "dropping request due to limited backend resources")
            c = self._least_kv(snap, self._lora(req, snap, self._least_queue(snap, cap)))
        return Decision(c[int(self.rng.integers(len(c)))])


# ----------------------------------------------------------------------------------------------------------------
# vLLM production-stack
# ----------------------------------------------------------------------------------------------------------------
# production-stack src/vllm_router/parsers/parser.py `--request-stats-window` default 60 s
REQUEST_STATS_WINDOW = 60.0


class _QPSMonitor:
    """production-stack RequestStatsMonitor's per-engine QPS: arrivals in a sliding window / window, pruned only
    when that engine gets a new request (so an engine that stops getting traffic keeps its old QPS — issue #1073)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.times: dict[str, deque[float]] = {}

    def on_new_request(self, name: str, now: float) -> None:
        d = self.times.setdefault(name, deque())
        d.append(now)
        while d and d[0] < now - self.window:
            d.popleft()

    def lowest(self, names: list[str]) -> int:
        """_qps_routing: the first endpoint with no stats, else the first with the lowest QPS."""
        best, best_qps = 0, float("inf")
        for i, nm in enumerate(names):
            d = self.times.get(nm)
            if d is None:
                return i
            qps = len(d) / self.window
            if qps < best_qps:
                best, best_qps = i, qps
        return best

    def remove(self, name: str) -> None:
        self.times.pop(name, None)


class ProductionStackPrefixRouter:
    """production-stack `prefixaware` (src/vllm_router/routers/routing_logic.py PrefixAwareRouter, prefix/hashtrie.py):
    a HashTrie of 128-char chunks, no eviction, no load term. Walk the prompt, narrowing the endpoint set to those
    holding every chunk so far; stop when none of the available endpoints holds the next chunk. match < prefix_min_
    match_length (chars, default 0) -> lowest-QPS endpoint; else a random one of the narrowed set (with no match and
    the default 0, a random available endpoint). The prompt is inserted for the chosen endpoint either way. In the
    twin a chunk is a whole segment (chars = tokens x 4), so matches are segment-granular."""

    def __init__(
        self,
        name: str = "production-stack-prefixaware",
        seed: int = 0,
        prefix_min_match_length: int = 0,
        request_stats_window: float = REQUEST_STATS_WINDOW,
        **_: Any,
    ) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.min_match = prefix_min_match_length
        self.trie: dict[int, set[str]] = {}
        self.qps = _QPSMonitor(request_stats_window)
        self._names: list[str] = []
        self._now = 0.0

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if not len(snap):
            return _NO_ENDPOINT
        self._names, self._now = snap.names, now
        salt = model_salt(req.lora or req.model)
        selected = set(snap.names)
        match = 0
        for h, n in zip(req.hashes, req.seg_tokens, strict=True):
            eps = self.trie.get(h ^ salt)
            if eps is None:
                break
            inter = eps & selected
            if not inter:
                break
            match += n * AVERAGE_CHARS_PER_TOKEN
            selected = inter
        if match < self.min_match:
            return Decision(self.qps.lowest(snap.names))
        choice = sorted(selected)[int(self.rng.integers(len(selected)))]  # sorted: deterministic set order
        return Decision(snap.names.index(choice))

    def routed(self, req: Request, index_or_name: int | str) -> None:
        name = index_or_name if isinstance(index_or_name, str) else self._names[index_or_name]
        salt = model_salt(req.lora or req.model)
        for h in req.hashes:
            self.trie.setdefault(h ^ salt, set()).add(name)
        self.qps.on_new_request(name, self._now)

    def finished(self, req: Request, name: str) -> None:
        pass

    def remove(self, name: str) -> None:
        self.qps.remove(name)  # the trie keeps the name (as the real one), intersections drop it


class ProductionStackSessionRouter:
    """production-stack `session`: a consistent hash ring over the endpoints keyed by the session id (uhashring's
    ketama ring: 40 md5 vnodes x 4 points per node); no session -> lowest-QPS endpoint."""

    VNODES = 40

    def __init__(
        self, name: str = "production-stack-session", request_stats_window: float = REQUEST_STATS_WINDOW, **_: Any
    ) -> None:
        self.name = name
        self.qps = _QPSMonitor(request_stats_window)
        self._ring_names: list[str] = []
        self._points: list[int] = []
        self._owners: list[str] = []
        self._names: list[str] = []
        self._now = 0.0

    @staticmethod
    def _h(key: str) -> int:
        d = hashlib.md5(key.encode()).digest()
        return d[3] << 24 | d[2] << 16 | d[1] << 8 | d[0]

    def _rebuild(self, names: list[str]) -> None:
        pts: list[tuple[int, str]] = []
        for nm in names:
            for v in range(self.VNODES):
                d = hashlib.md5(f"{nm}-{v}".encode()).digest()
                for k in range(4):
                    pts.append((d[3 + 4 * k] << 24 | d[2 + 4 * k] << 16 | d[1 + 4 * k] << 8 | d[4 * k], nm))
        pts.sort()
        self._points = [p for p, _ in pts]
        self._owners = [o for _, o in pts]
        self._ring_names = list(names)

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if not len(snap):
            return _NO_ENDPOINT
        self._names, self._now = snap.names, now
        if req.session is None:
            return Decision(self.qps.lowest(snap.names))
        if sorted(snap.names) != sorted(self._ring_names):
            self._rebuild(sorted(snap.names))
        j = bisect.bisect(self._points, self._h(req.session)) % len(self._points)
        return Decision(snap.names.index(self._owners[j]))

    def routed(self, req: Request, index_or_name: int | str) -> None:
        name = index_or_name if isinstance(index_or_name, str) else self._names[index_or_name]
        self.qps.on_new_request(name, self._now)

    def finished(self, req: Request, name: str) -> None:
        pass

    def remove(self, name: str) -> None:
        self.qps.remove(name)


# ----------------------------------------------------------------------------------------------------------------
# SGLang router cache_aware
# ----------------------------------------------------------------------------------------------------------------
# sgl-project/sglang sgl-router python router_args.py dataclass defaults (the Rust CacheAwareConfig::default was
# 0.5/32/1.1/30/10000 in older trees)
SGLANG_CACHE_THRESHOLD = 0.3
SGLANG_BALANCE_ABS = 64
SGLANG_BALANCE_REL = 1.5
SGLANG_EVICTION_INTERVAL = 120.0
SGLANG_MAX_TREE_SIZE = 2**26  # characters per tenant


class SGLangCacheAwareRouter:
    """SGLang router `cache_aware` (sgl-router src/policies/cache_aware.rs, src/tree.rs): a radix tree of prompt text
    per model with tenants = workers. Imbalanced (max-min load > 64 and max > 1.5 x min, load = the router's own
    pending count) -> least-loaded worker; else the prefix match: match rate (matched/total chars) > 0.3 -> the
    matched worker (the most recently used tenant of the deepest matched node), else the worker with the smallest
    tree (most free cache). The prompt is inserted for the chosen worker. Every 120 s each tenant's tree is trimmed
    to 2^26 chars, least recently used leaves first. Segments stand for text at 4 chars/token."""

    def __init__(
        self,
        name: str = "sglang-cache-aware",
        cache_threshold: float = SGLANG_CACHE_THRESHOLD,
        balance_abs_threshold: int = SGLANG_BALANCE_ABS,
        balance_rel_threshold: float = SGLANG_BALANCE_REL,
        eviction_interval_secs: float = SGLANG_EVICTION_INTERVAL,
        max_tree_size: int = SGLANG_MAX_TREE_SIZE,
        **_: Any,
    ) -> None:
        self.name = name
        self.cache_threshold = cache_threshold
        self.abs = balance_abs_threshold
        self.rel = balance_rel_threshold
        self.interval = eviction_interval_secs
        self.max_size = max_tree_size
        # node key -> {tenant: last access}; node key -> (chars, depth)
        self.nodes: dict[int, dict[str, float]] = {}
        self.node_info: dict[int, tuple[int, int]] = {}
        self.size: dict[str, int] = {}
        self.load: dict[str, int] = {}
        self._names: list[str] = []
        self._now = 0.0
        self._last_evict = 0.0

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if not len(snap):
            return _NO_ENDPOINT
        self._names, self._now = snap.names, now
        if now - self._last_evict >= self.interval:
            self._last_evict = now
            self.evict()
        names = snap.names
        loads = [self.load.get(nm, 0) for nm in names]
        mx, mn = max(loads), min(loads)
        if mx - mn > self.abs and mx > mn * self.rel:
            return Decision(loads.index(mn))
        salt = model_salt(req.lora or req.model)
        avail = set(names)
        matched, tenant = 0, None
        for h, n in zip(req.hashes, req.seg_tokens, strict=True):
            ten = self.nodes.get(h ^ salt)
            if not ten:
                break
            live = [(t, nm) for nm, t in ten.items() if nm in avail]
            if not live:
                break
            matched += n
            tenant = max(live)[1]
        total = max(req.prompt_tokens, sum(req.seg_tokens))
        if tenant is not None and total and matched / total > self.cache_threshold:
            return Decision(names.index(tenant))
        sizes = [self.size.get(nm, 0) for nm in names]
        return Decision(sizes.index(min(sizes)))

    def routed(self, req: Request, index_or_name: int | str) -> None:
        name = index_or_name if isinstance(index_or_name, str) else self._names[index_or_name]
        self.load[name] = self.load.get(name, 0) + 1
        salt = model_salt(req.lora or req.model)
        now = self._now
        for depth, (h, n) in enumerate(zip(req.hashes, req.seg_tokens, strict=True)):
            k = h ^ salt
            ten = self.nodes.get(k)
            if ten is None:
                ten = self.nodes[k] = {}
                self.node_info[k] = (n * AVERAGE_CHARS_PER_TOKEN, depth)
            if name not in ten:
                self.size[name] = self.size.get(name, 0) + self.node_info[k][0]
            ten[name] = now

    def finished(self, req: Request, name: str) -> None:
        if self.load.get(name, 0) > 0:
            self.load[name] -= 1

    def evict(self) -> None:
        """Trim every tenant over max_tree_size: oldest access first, deeper nodes first on equal time (a path is
        touched at once, so this removes leaves before their parents)."""
        for tenant, size in list(self.size.items()):
            if size <= self.max_size:
                continue
            mine = sorted((ten[tenant], -self.node_info[k][1], k) for k, ten in self.nodes.items() if tenant in ten)
            for _, _, k in mine:
                if size <= self.max_size:
                    break
                ten = self.nodes[k]
                del ten[tenant]
                size -= self.node_info[k][0]
                if not ten:
                    del self.nodes[k]
                    del self.node_info[k]
            self.size[tenant] = size

    def remove(self, name: str) -> None:
        for k in [k for k, ten in self.nodes.items() if name in ten]:
            ten = self.nodes[k]
            del ten[name]
            if not ten:
                del self.nodes[k]
                del self.node_info[k]
        self.size.pop(name, None)
        self.load.pop(name, None)


# ----------------------------------------------------------------------------------------------------------------
# NVIDIA Dynamo KV router
# ----------------------------------------------------------------------------------------------------------------
# docs.nvidia.com/dynamo components/router: --kv-overlap-score-weight default 1.0, --router-temperature default 0
DYNAMO_OVERLAP_WEIGHT = 1.0
DYNAMO_TEMPERATURE = 0.0


class DynamoKVRouter:
    """Dynamo KV router: cost(w) = overlap_weight x prefill_blocks(w) + decode_blocks(w), where prefill_blocks = the
    request's uncached prompt blocks on w and decode_blocks = the blocks of the requests the router has in flight on
    w; lowest cost wins (ties random), or softmax sampling over normalised costs at temperature > 0. The overlap
    comes from the oracle (KV-events mode) or, without one, from the router's own approximate index (approximation
    mode, no TTL here)."""

    def __init__(
        self,
        name: str = "dynamo-kv",
        seed: int = 0,
        oracle: PrefixOracle | None = None,
        overlap_score_weight: float = DYNAMO_OVERLAP_WEIGHT,
        temperature: float = DYNAMO_TEMPERATURE,
        block_size: int = 0,
        **_: Any,
    ) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.oracle = oracle
        self.w = overlap_score_weight
        self.temperature = temperature
        self.block = block_size
        self.index = None if oracle is not None else ApproxPrefixIndex()
        self.active: dict[str, int] = {}
        self.req_blocks: dict[int, tuple[str, int]] = {}
        self._names: list[str] = []
        self._bs = DEFAULT_BLOCK_TOKENS

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        n = len(snap)
        if not n:
            return _NO_ENDPOINT
        self._names = snap.names
        bs = self.block or (int(snap.block_size[0]) if snap.block_size is not None and snap.block_size[0] > 0 else 16)
        self._bs = bs
        prompt_blocks = -(-req.prompt_tokens // bs)
        if self.oracle is not None:
            overlap = np.fromiter((self.oracle.match_tokens(req, nm) // bs for nm in snap.names), float, count=n)
        else:
            keys, ws, _ = request_blocks(req, bs, 1 << 30)
            acc = self.index.match(keys, ws)
            c = self.index.counts(acc, self.index.slots_for(snap.names))
            overlap = np.zeros(n) if c is None else c
        decode = np.fromiter((self.active.get(nm, 0) for nm in snap.names), float, count=n)
        cost = self.w * np.maximum(prompt_blocks - overlap, 0.0) + decode
        if self.temperature > 0:
            top = cost.max()
            z = -(cost / top if top > 0 else cost) / self.temperature
            p = np.exp(z - z.max())
            return Decision(int(self.rng.choice(n, p=p / p.sum())))
        ties = np.flatnonzero(cost == cost.min())
        return Decision(int(ties[self.rng.integers(len(ties))]) if len(ties) > 1 else int(ties[0]))

    def routed(self, req: Request, index_or_name: int | str) -> None:
        name = index_or_name if isinstance(index_or_name, str) else self._names[index_or_name]
        b = -(-req.prompt_tokens // self._bs)
        self.active[name] = self.active.get(name, 0) + b
        self.req_blocks[req.id] = (name, b)
        if self.index is not None:
            keys, ws, _ = request_blocks(req, self._bs, 1 << 30)
            self.index.add(name, keys, ws)

    def finished(self, req: Request, name: str) -> None:
        nb = self.req_blocks.pop(req.id, None)
        if nb is not None:
            self.active[nb[0]] = self.active.get(nb[0], 0) - nb[1]

    def remove(self, name: str) -> None:
        self.active.pop(name, None)
        if self.index is not None:
            self.index.remove_pod(name)


# ----------------------------------------------------------------------------------------------------------------
PRESETS: dict[str, str] = {
    "round-robin": "round-robin over endpoints sorted by name (production-stack roundrobin; kube-proxy IPVS rr)",
    "service-random": "a ClusterIP Service in kube-proxy's default iptables mode: uniform random per connection",
    "random": "uniform random per request",
    "load": "EPP queue 1 + kv-cache 1, max-score (llm-d 73-capacity 'load' baseline)",
    "epp": "EPP default: queue 2, kv-cache 2, prefix 3, max-score (GIE@1748e829 defaults.go)",
    "epp-v1.0": "EPP GA Helm chart: queue 1, kv-cache 1, prefix 1 (GIE@v1.0.0 epp-config.yaml)",
    "precise": "llm-d precise-prefix 3, kv-cache 2, queue 2 with an oracle (73-capacity benchmark)",
    "legacy-v0.3": "GIE v0.3 decision tree (GIE@v0.3.0 scheduler.go)",
    "production-stack-prefixaware": "vLLM production-stack prefixaware HashTrie, QPS fallback",
    "production-stack-session": "vLLM production-stack session consistent hashing, QPS fallback",
    "sglang-cache-aware": "SGLang router cache_aware radix tree (python defaults 0.3/64/1.5)",
    "dynamo-kv": "NVIDIA Dynamo KV router cost, temperature 0",
}

_CONFIGS = {"epp": EPP_DEFAULT_CONFIG, "epp-v1.0": EPP_V1_0_CONFIG, "load": LOAD_CONFIG, "precise": PRECISE_CONFIG}
_EPP_ROUTER_KEYS = {"auto_tune", "block_tokens", "max_prefix_blocks", "lru_capacity"}


def make_router(
    preset: str | dict[str, Any],
    *,
    seed: int = 0,
    weights: dict[str, float] | None = None,
    oracle: PrefixOracle | None = None,
    **params: Any,
) -> Router:
    """A router by preset name, or from an EndpointPickerConfig-shaped dict. `weights` overrides EPP scorer weights
    by plugin name/type; `params` go to the router (EPP: auto_tune, block_tokens, max_prefix_blocks, lru_capacity,
    tie_break, queue_depth_threshold, kv_cache_util_threshold; others: their constructor's keywords)."""
    if isinstance(preset, dict) or preset in _CONFIGS:
        cfg = preset if isinstance(preset, dict) else _CONFIGS[preset]
        name = "epp-config" if isinstance(preset, dict) else preset
        unknown = params.keys() - _EPP_ROUTER_KEYS - {"tie_break", "queue_depth_threshold", "kv_cache_util_threshold"}
        if unknown:
            raise ValueError(f"unknown parameters for EPP preset {name!r}: {sorted(unknown)}")
        if name == "precise" and oracle is None:
            raise ValueError("preset 'precise' needs oracle= (a PrefixOracle)")
        r = build_router(cfg, seed=seed, oracle=oracle, weights=weights, name=name, tie_break=params.get("tie_break"))
        for k in _EPP_ROUTER_KEYS & params.keys():
            setattr(r, {"max_prefix_blocks": "max_blocks"}.get(k, k), params[k])
        if "lru_capacity" in params and r.index is not None:
            r.index.default_capacity = params["lru_capacity"]
        if "queue_depth_threshold" in params:
            r.detector.q = float(params["queue_depth_threshold"])
        if "kv_cache_util_threshold" in params:
            r.detector.kv = float(params["kv_cache_util_threshold"])
        return r
    if weights:
        raise ValueError(f"weights= applies to EPP presets only, not {preset!r}")
    if preset == "round-robin":
        return RoundRobinRouter(**params)
    if preset == "service-random":
        return ServiceRandomRouter(seed=seed, **params)
    if preset == "random":
        return RandomRouter(seed=seed, **params)
    if preset == "legacy-v0.3":
        return LegacyV03Router(seed=seed, **params)
    if preset == "production-stack-prefixaware":
        return ProductionStackPrefixRouter(seed=seed, **params)
    if preset == "production-stack-session":
        return ProductionStackSessionRouter(**params)
    if preset == "sglang-cache-aware":
        return SGLangCacheAwareRouter(**params)
    if preset == "dynamo-kv":
        return DynamoKVRouter(seed=seed, oracle=oracle, **params)
    raise ValueError(f"unknown router preset {preset!r}; known: {', '.join(PRESETS)}")

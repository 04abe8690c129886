"""Routing presets: the EPP configurations people deploy and the routers they compare it with, each a `Router`.

Every router: `pick(req, snap, now) -> Decision`; `routed(req, index_or_name)` once the request is sent (PreRequest:
index updates, in-flight counts); `finished(req, name)` when its response completes; `remove(name)` when an endpoint
leaves. Routers keep their own in-flight counts only where the real ones do (SGLang, production-stack's QPS monitor,
Dynamo); the EPP presets use the scraped snapshot alone. This module holds the registry (`PRESETS`, `make_router`), the
EPP configurations and the simple routers (round-robin, random, Service, the v0.3 tree); production-stack, SGLang and
Dynamo have their own modules (`prodstack`, `sglang`, `dynamo`) and the `Router` protocol is in `base`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubetwin.serving.router.base import NO_ENDPOINT_DECISION, Router
from kubetwin.serving.router.dynamo import DynamoKVRouter
from kubetwin.serving.router.epp import PrefixOracle, build_router
from kubetwin.serving.router.prodstack import ProductionStackPrefixRouter, ProductionStackSessionRouter
from kubetwin.serving.router.sglang import SGLangCacheAwareRouter
from kubetwin.serving.types import Decision, EndpointSnapshot, Request

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
        # a counter per endpoint set, as production-stack keeps; _count is the current set's (hashing the set's
        # names once per change, not per request)
        self._next: dict[tuple[str, ...], list[int]] = {}
        self._count = [0]
        self._src: list[str] | None = None  # the names list _names was copied from: the same object, the same names

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if not len(snap):
            return NO_ENDPOINT_DECISION
        if snap.names is not self._src and snap.names != self._names:  # the pool's snapshots share one names list
            self._names = list(snap.names)
            self._order = sorted(range(len(snap)), key=snap.names.__getitem__)
            self._count = self._next.setdefault(tuple(snap.names[i] for i in self._order), [0])
        self._src = snap.names
        count = self._count
        i = count[0]
        count[0] = i + 1
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
            return NO_ENDPOINT_DECISION
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
            return NO_ENDPOINT_DECISION
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
@dataclass(frozen=True)
class Preset:
    """A named router: what it is (with its source) and how to build one (seed=, oracle= and the preset's own
    keyword parameters)."""

    description: str
    build: Callable[..., Router]


def _plain(cls: Callable[..., Router], seeded: bool = True, oracle: bool = False) -> Callable[..., Router]:
    def build(*, seed: int = 0, oracle_: PrefixOracle | None = None, **params: Any) -> Router:
        extra: dict[str, Any] = {"seed": seed} if seeded else {}
        if oracle:
            extra["oracle"] = oracle_
        return cls(**extra, **params)

    return build


_CONFIGS = {"epp": EPP_DEFAULT_CONFIG, "epp-v1.0": EPP_V1_0_CONFIG, "load": LOAD_CONFIG, "precise": PRECISE_CONFIG}
_EPP_ROUTER_KEYS = {"auto_tune", "block_tokens", "max_prefix_blocks", "lru_capacity"}


def _epp(cfg: dict[str, Any] | str) -> Callable[..., Router]:
    def build(*, seed: int = 0, oracle_: PrefixOracle | None = None, weights: dict[str, float] | None = None,
              **params: Any) -> Router:
        config = cfg if isinstance(cfg, dict) else _CONFIGS[cfg]
        name = "epp-config" if isinstance(cfg, dict) else cfg
        unknown = params.keys() - _EPP_ROUTER_KEYS - {"tie_break", "queue_depth_threshold", "kv_cache_util_threshold"}
        if unknown:
            raise ValueError(f"unknown parameters for EPP preset {name!r}: {sorted(unknown)}")
        if name == "precise" and oracle_ is None:
            raise ValueError("preset 'precise' needs oracle= (a PrefixOracle)")
        r = build_router(config, seed=seed, oracle=oracle_, weights=weights, name=name,
                         tie_break=params.get("tie_break"))
        for k in _EPP_ROUTER_KEYS & params.keys():
            setattr(r, {"max_prefix_blocks": "max_blocks"}.get(k, k), params[k])
        if "lru_capacity" in params and r.index is not None:
            r.index.default_capacity = params["lru_capacity"]
        if "queue_depth_threshold" in params:
            r.detector.q = float(params["queue_depth_threshold"])
        if "kv_cache_util_threshold" in params:
            r.detector.kv = float(params["kv_cache_util_threshold"])
        return r

    return build


# The registry: a new routing policy is one entry here (or `registered(...)` for a with-block).
PRESETS: dict[str, Preset] = {
    "round-robin": Preset("round-robin over endpoints sorted by name (production-stack roundrobin; kube-proxy IPVS rr)",
                          _plain(RoundRobinRouter, seeded=False)),
    "service-random": Preset("a ClusterIP Service in kube-proxy's default iptables mode: uniform random per connection",
                             _plain(ServiceRandomRouter)),
    "random": Preset("uniform random per request", _plain(RandomRouter)),
    "load": Preset("EPP queue 1 + kv-cache 1, max-score (llm-d 73-capacity 'load' baseline)", _epp("load")),
    "epp": Preset("EPP default: queue 2, kv-cache 2, prefix 3, max-score (GIE@1748e829 defaults.go)", _epp("epp")),
    "epp-v1.0": Preset("EPP GA Helm chart: queue 1, kv-cache 1, prefix 1 (GIE@v1.0.0 epp-config.yaml)",
                       _epp("epp-v1.0")),
    "precise": Preset("llm-d precise-prefix 3, kv-cache 2, queue 2 with an oracle (73-capacity benchmark)",
                      _epp("precise")),
    "legacy-v0.3": Preset("GIE v0.3 decision tree (GIE@v0.3.0 scheduler.go)", _plain(LegacyV03Router)),
    "production-stack-prefixaware": Preset("vLLM production-stack prefixaware HashTrie, QPS fallback",
                                           _plain(ProductionStackPrefixRouter)),
    "production-stack-session": Preset("vLLM production-stack session consistent hashing, QPS fallback",
                                       _plain(ProductionStackSessionRouter, seeded=False)),
    "sglang-cache-aware": Preset("SGLang router cache_aware radix tree (python defaults 0.3/64/1.5)",
                                 _plain(SGLangCacheAwareRouter, seeded=False)),
    "dynamo-kv": Preset("NVIDIA Dynamo KV router cost, temperature 0", _plain(DynamoKVRouter, oracle=True)),
}


@contextmanager
def registered(name: str, preset: Preset) -> Iterator[Preset]:
    """Register a router preset for the duration of a with-block (tests, policies tried out)."""
    if name in PRESETS:
        raise ValueError(f"router preset {name!r} is already registered")
    PRESETS[name] = preset
    try:
        yield preset
    finally:
        del PRESETS[name]


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
    if isinstance(preset, dict):
        return _epp(preset)(seed=seed, oracle_=oracle, weights=weights, **params)
    if preset not in PRESETS:
        raise ValueError(unknown_router(preset))
    if weights:
        if preset not in _CONFIGS:
            raise ValueError(f"weights= applies to EPP presets only, not {preset!r}")
        params["weights"] = weights
    return PRESETS[preset].build(seed=seed, oracle_=oracle, **params)


def unknown_router(preset: str) -> str | None:
    """The error for a `kubetwin.io/router` name no preset has (None when it is one): `kubetwin validate` reports
    it before `make_router` would raise it."""
    if preset in PRESETS:
        return None
    from kubetwin.api.crd_schema import closest_field  # validate's did-you-mean (difflib, same-name-other-case)

    close = closest_field(preset, list(PRESETS))
    return f"unknown router preset {preset!r}; known: {', '.join(PRESETS)}" + (
        f"; did you mean {close!r}?" if close else "")

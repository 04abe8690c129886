"""The SGLang router's `cache_aware` policy (sgl-project/sglang sgl-router src/policies/cache_aware.rs, src/tree.rs):
a per-model radix tree of prompt text with the workers as tenants, a load-imbalance override and periodic LRU
eviction. One module per router family, as the presets registry in `router/presets.py` names them."""

from __future__ import annotations

from typing import Any

from kubetwin.serving.router.base import NO_ENDPOINT_DECISION
from kubetwin.serving.router.prefix_index import AVERAGE_CHARS_PER_TOKEN, model_salt
from kubetwin.serving.types import Decision, EndpointSnapshot, Request

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
            return NO_ENDPOINT_DECISION
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

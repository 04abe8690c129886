"""vLLM production-stack's routers (vllm-project/production-stack src/vllm_router/routers/routing_logic.py):
`prefixaware` (a HashTrie of prompt chunks) and `session` (a consistent hash ring on the session id), both falling
back to the lowest-QPS endpoint of the router's own RequestStatsMonitor, which `_QPSMonitor` models. One module per
router family, as the presets registry in `router/presets.py` names them."""

from __future__ import annotations

import bisect
import hashlib
from collections import deque
from typing import Any

import numpy as np

from kubetwin.serving.router.base import NO_ENDPOINT_DECISION
from kubetwin.serving.router.prefix_index import AVERAGE_CHARS_PER_TOKEN, model_salt
from kubetwin.serving.types import Decision, EndpointSnapshot, Request

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
            return NO_ENDPOINT_DECISION
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
            return NO_ENDPOINT_DECISION
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

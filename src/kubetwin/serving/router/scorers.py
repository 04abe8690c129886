"""The EPP's scorer plugins: score(req, snap, idx, state) -> one score in [0, 1] per candidate, plus the PreRequest /
response-complete / endpoint-removed hooks the stateful ones use, and `SCORERS`, the plugin-type registry.

Sources: GIE pkg/epp/framework/plugins/scheduling/scorer/{queuedepth,kvcacheutilization,prefix,loraaffinity,
runningrequests}; LLMD@683100dc scorer/loadaware; LLMD@0b59e4ed scorer/{nohitlru,sessionaffinity}; LLMD
scorer/preciseprefixcache (score = min(1, matched/total blocks)). One module per plugin family, as the real trees
keep them; the profile that weighs them is `router/epp.py`."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

import numpy as np

from kubetwin.serving.router.cycle import CycleState, take_rows
from kubetwin.serving.router.prefix_index import DEFAULT_BLOCK_TOKENS
from kubetwin.serving.types import EndpointSnapshot, Request

# LLMD@683100dc scorer/loadaware/load_aware.go `QueueThresholdDefault`
LOAD_AWARE_QUEUE_THRESHOLD = 128
# LLMD@0b59e4ed scorer/nohitlru/no_hit_lru.go `defaultLRUSize`
NO_HIT_LRU_SIZE = 1024


class PrefixOracle(Protocol):
    """Ground truth of what an engine's prefix cache holds (llm-d's KV-events index; in the twin the engines
    themselves). Optionally also `match_tokens_all(req, names) -> np.ndarray` to answer for all endpoints at once."""

    def match_tokens(self, req: Request, endpoint: str) -> int: ...


class Scorer:
    """Base: hooks default to no-ops so the router can call them on every scorer."""

    type = ""
    needs_prefix = False
    bounded = True  # scores are in [0, 1] by construction; otherwise the profile clamps them
    # the score reads only the snapshot (and the candidates): every request scored against one snapshot gets the same
    # scores, so the profile computes them once per snapshot (EppRouter.scores)
    snapshot_only = False

    def __init__(self, name: str | None = None, **_: Any) -> None:
        self.name = name or self.type

    def score(self, req: Request, snap: EndpointSnapshot, idx: np.ndarray | None, state: CycleState) -> np.ndarray:
        """A new array (the profile scales it in place), one score per candidate (`idx` None = all endpoints)."""
        raise NotImplementedError

    def pre_request(self, req: Request, name: str, state: CycleState) -> None:
        """PreRequest hook, after the pick."""

    def finished(self, req: Request, name: str) -> None:
        """Response-complete hook."""

    def remove(self, name: str) -> None:
        """The endpoint left the pool."""


def _minmax_low_is_good(v: np.ndarray) -> np.ndarray:
    lo = v[v.argmin()]  # argmin/argmax: a third of ndarray.min()'s call overhead on small arrays
    hi = v[v.argmax()]
    if hi == lo:
        return np.ones(len(v))  # all equal -> neutral 1.0
    return (hi - v) * (1.0 / float(hi - lo))


class QueueScorer(Scorer):
    """queue-scorer: (maxQ - q)/(maxQ - minQ) over candidates on vllm:num_requests_waiting, 1.0 when all equal."""

    type = "queue-scorer"
    snapshot_only = True

    def score(self, req, snap, idx, state):
        return _minmax_low_is_good(take_rows(snap.waiting, idx))


class RunningRequestsScorer(Scorer):
    """running-requests-size-scorer: the same min-max on vllm:num_requests_running."""

    type = "running-requests-size-scorer"
    snapshot_only = True

    def score(self, req, snap, idx, state):
        return _minmax_low_is_good(take_rows(snap.running, idx))


class KVCacheUtilizationScorer(Scorer):
    """kv-cache-utilization-scorer: 1 - vllm:kv_cache_usage_perc."""

    type = "kv-cache-utilization-scorer"
    snapshot_only = True
    bounded = False

    def score(self, req, snap, idx, state):
        return 1.0 - take_rows(snap.kv_usage, idx)


class PrefixCacheScorer(Scorer):
    """prefix-cache-scorer: matched blocks / total blocks from the approximate index (0 when the prompt has none)."""

    type = "prefix-cache-scorer"
    needs_prefix = True

    def score(self, req, snap, idx, state):
        n = len(snap) if idx is None else len(idx)
        if state.counts is None or state.total == 0:
            return np.zeros(n)
        return take_rows(state.counts, idx) / state.total


class LoraAffinityScorer(Scorer):
    """lora-affinity-scorer: 1.0 adapter running; 0.8 a free adapter slot; 0.6 adapter waiting to load; else 0."""

    type = "lora-affinity-scorer"

    def score(self, req, snap, idx, state):
        target = req.lora or req.model
        ids = range(len(snap)) if idx is None else idx.tolist()
        out = []
        for i in ids:
            active = snap.active_loras[i] if snap.active_loras else frozenset()
            waiting = snap.waiting_loras[i] if snap.waiting_loras else frozenset()
            cap = int(snap.max_loras[i]) if snap.max_loras is not None else 0
            if target in active:
                out.append(1.0)
            elif len(active) + len(waiting) < cap:
                out.append(0.8)
            elif target in waiting:
                out.append(0.6)
            else:
                out.append(0.0)
        return np.asarray(out)


class LoadAwareScorer(Scorer):
    """llm-d load-aware-scorer: 0.5 with an empty queue, else 0.5 * (1 - min(waiting, 128)/128)."""

    type = "load-aware-scorer"
    snapshot_only = True

    def __init__(self, name: str | None = None, threshold: int = LOAD_AWARE_QUEUE_THRESHOLD, **_: Any) -> None:
        super().__init__(name)
        self.threshold = float(threshold if threshold > 0 else LOAD_AWARE_QUEUE_THRESHOLD)

    def score(self, req, snap, idx, state):
        w = np.minimum(take_rows(snap.waiting, idx), self.threshold)
        return np.where(w == 0, 0.5, 0.5 * (1.0 - w / self.threshold))


class PrecisePrefixCacheScorer(Scorer):
    """llm-d precise-prefix-cache-scorer: the engines' own KV-event index (here an oracle); score = min(1, matched
    full blocks / the prompt's full blocks)."""

    type = "precise-prefix-cache-scorer"
    bounded = False

    def __init__(self, name: str | None = None, oracle: PrefixOracle | None = None, blockSize: int = 0, **_: Any):
        super().__init__(name)
        if oracle is None:
            raise ValueError("precise-prefix-cache-scorer needs an oracle (PrefixOracle.match_tokens)")
        self.oracle = oracle
        self.block = int(blockSize)
        self._all = getattr(oracle, "match_tokens_all", None)

    def score(self, req, snap, idx, state):
        bs = self.block or (int(snap.block_size[0]) if snap.block_size is not None and len(snap) else BLOCK_FALLBACK)
        total = req.prompt_tokens // bs
        names = snap.names if idx is None else [snap.names[i] for i in idx.tolist()]
        if total == 0:
            return np.zeros(len(names))
        if self._all is not None:
            m = np.asarray(self._all(req, names), dtype=np.int64)
        else:
            m = np.fromiter((self.oracle.match_tokens(req, nm) for nm in names), dtype=np.int64, count=len(names))
        return np.minimum(1.0, (m // bs) / total)


BLOCK_FALLBACK = DEFAULT_BLOCK_TOKENS


class SessionAffinityScorer(Scorer):
    """llm-d session-affinity-scorer: 1.0 for the endpoint that served the session's previous response (the
    x-session-token header the client echoes), 0 for the rest. Set when a response completes."""

    type = "session-affinity-scorer"

    def __init__(self, name: str | None = None, **_: Any) -> None:
        super().__init__(name)
        self.last: dict[str, str] = {}

    def score(self, req, snap, idx, state):
        n = len(snap) if idx is None else len(idx)
        out = np.zeros(n)
        pod = self.last.get(req.session) if req.session is not None else None
        if pod is not None:
            names = snap.names if idx is None else [snap.names[i] for i in idx.tolist()]
            for j, nm in enumerate(names):
                if nm == pod:
                    out[j] = 1.0
        return out

    def finished(self, req, name):
        if req.session is not None:
            self.last[req.session] = name


class NoHitLRUScorer(Scorer):
    """llm-d no-hit-lru-scorer: a cold request (no candidate has a prefix hit) prefers endpoints that got a cold
    request least recently (never-used first, 1 - rank/(N-1)); a warm request scores 0.5 everywhere. PreRequest moves
    the chosen endpoint to most-recent for cold requests."""

    type = "no-hit-lru-scorer"
    needs_prefix = True

    def __init__(self, name: str | None = None, lruSize: int = NO_HIT_LRU_SIZE, **_: Any) -> None:
        super().__init__(name)
        self.size = lruSize if lruSize > 0 else NO_HIT_LRU_SIZE
        self.lru: OrderedDict[str, None] = OrderedDict()  # oldest first

    def score(self, req, snap, idx, state):
        names = snap.names if idx is None else [snap.names[i] for i in idx.tolist()]
        n = len(names)
        if not state.cold:
            return np.full(n, 0.5)
        if n == 1:
            return np.ones(1)
        pos = {k: i for i, k in enumerate(self.lru)}
        never = [j for j, nm in enumerate(names) if nm not in pos]
        out = np.zeros(n)
        for r, j in enumerate(never):
            out[j] = 1.0 - r / (n - 1)
        for j, nm in enumerate(names):
            if nm in pos:
                out[j] = max(0.0, 1.0 - (len(never) + pos[nm]) / (n - 1))
        return out

    def pre_request(self, req, name, state):
        if state.cold:
            self.lru[name] = None
            self.lru.move_to_end(name)
            while len(self.lru) > self.size:
                self.lru.popitem(last=False)

    def remove(self, name):
        self.lru.pop(name, None)


SCORERS: dict[str, type[Scorer]] = {
    c.type: c
    for c in (
        QueueScorer,
        KVCacheUtilizationScorer,
        PrefixCacheScorer,
        LoraAffinityScorer,
        RunningRequestsScorer,
        LoadAwareScorer,
        PrecisePrefixCacheScorer,
        SessionAffinityScorer,
        NoHitLRUScorer,
    )
}

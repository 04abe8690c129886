"""The Gateway API Inference Extension's endpoint picker (EPP), as the real one schedules: admission against the
saturation detector, then one scheduling profile = filters -> weighted scorers -> picker, then PreRequest updates.

Sources (`GIE` = kubernetes-sigs/gateway-api-inference-extension@1748e829, the last tree with the EPP; `LLMD` =
llm-d/llm-d-router, where the EPP lives now):
  admission        GIE pkg/epp/requestcontrol/admission.go (LegacyAdmissionController), director.go
  detector         GIE pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/{config.go,detector.go}
  profile          GIE pkg/epp/scheduling/scheduler_profile.go (sum of clamp(score) * weight, weights not normalised)
  scorers          GIE pkg/epp/framework/plugins/scheduling/scorer/{queuedepth,kvcacheutilization,prefix,loraaffinity,
                   runningrequests}; LLMD@683100dc scorer/loadaware; LLMD@0b59e4ed scorer/{nohitlru,sessionaffinity};
                   LLMD scorer/preciseprefixcache (score = min(1, matched/total blocks))
  pickers          GIE picker/{max_score,random,weighted_random}; LLMD@5155e4cb picker/common.go (rotate tie-break)
  legacy filters   GIE@v0.5.1 pkg/epp/scheduling/framework/plugins/filter (types least-queue, least-kv-cache,
                   low-queue, lora-affinity), thresholds from GIE@v0.3.0 pkg/epp/scheduling/scheduler.go
The EPP sees only the scraped snapshot (no in-flight accounting): that is the real behaviour and why it herds
between scrapes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kubetwin.serving.router.prefix_index import (
    DEFAULT_BLOCK_TOKENS,
    DEFAULT_LRU_CAPACITY_PER_SERVER,
    DEFAULT_MAX_PREFIX_BLOCKS,
    ApproxPrefixIndex,
    request_blocks,
)
from kubetwin.serving.types import Decision, EndpointSnapshot, Request

# GIE utilization/config.go defaults
QUEUE_DEPTH_THRESHOLD = 5
KV_CACHE_UTIL_THRESHOLD = 0.8
# GIE@v0.3.0 scheduler.go: QUEUING_THRESHOLD_LORA / LORA_AFFINITY_THRESHOLD defaults
QUEUEING_THRESHOLD_LORA = 128
LORA_AFFINITY_THRESHOLD = 0.999
# LLMD@683100dc scorer/loadaware/load_aware.go `QueueThresholdDefault`
LOAD_AWARE_QUEUE_THRESHOLD = 128
# LLMD@0b59e4ed scorer/nohitlru/no_hit_lru.go `defaultLRUSize`
NO_HIT_LRU_SIZE = 1024

SHED_REASON = "system saturated, sheddable request dropped"  # GIE admission.go
NO_ENDPOINT_REASON = "failed to find candidate endpoints for serving the request"  # GIE director.go -> 503
NO_TARGET_REASON = "failed to find target endpoint: no endpoints available"  # scheduler error -> 429


class PrefixOracle(Protocol):
    """Ground truth of what an engine's prefix cache holds (llm-d's KV-events index; in the twin the engines
    themselves). Optionally also `match_tokens_all(req, names) -> np.ndarray` to answer for all endpoints at once."""

    def match_tokens(self, req: Request, endpoint: str) -> int: ...


@dataclass(slots=True)
class CycleState:
    """What one scheduling cycle computes and PreRequest reads back (GIE's CycleState / PluginState)."""

    keys: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    total: int = 0
    counts: np.ndarray | None = None  # matched blocks per candidate (snapshot order), None if no match
    cold: bool = True


def _take(a: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    return a if idx is None else a[idx]


# ----------------------------------------------------------------------------------------------------------------
# saturation detector (also usable as a filter)
# ----------------------------------------------------------------------------------------------------------------
class UtilizationDetector:
    """`utilization-detector`: saturation = mean over candidates of max(waiting/5, kv/0.8), a stale endpoint counts
    1.0, no candidates 1.0. As a filter it keeps fresh endpoints under both thresholds, failing open."""

    type = "utilization-detector"

    def __init__(
        self,
        queue_depth_threshold: float = QUEUE_DEPTH_THRESHOLD,
        kv_cache_util_threshold: float = KV_CACHE_UTIL_THRESHOLD,
        headroom: float = 0.0,
        name: str | None = None,
    ) -> None:
        self.q = float(queue_depth_threshold)
        self.kv = float(kv_cache_util_threshold)
        self.headroom = float(headroom)
        self.name = name or self.type

    def saturation(self, snap: EndpointSnapshot, idx: np.ndarray | None = None) -> float:
        n = len(snap) if idx is None else len(idx)
        if n == 0:
            return 1.0
        s = np.maximum(_take(snap.waiting, idx) / self.q, _take(snap.kv_usage, idx) / self.kv)
        s = np.where(_take(snap.fresh, idx), s, 1.0)
        return float(s.mean())

    def filter(self, req: Request, snap: EndpointSnapshot, idx: np.ndarray, state: CycleState, rng) -> np.ndarray:
        f = 1.0 + self.headroom
        ok = snap.fresh[idx] & (snap.waiting[idx] < self.q * f) & (snap.kv_usage[idx] < self.kv * f)
        kept = idx[ok]
        return kept if len(kept) else idx  # fail open


# ----------------------------------------------------------------------------------------------------------------
# legacy (v0.3 / v0.5) filters
# ----------------------------------------------------------------------------------------------------------------
class LeastQueueFilter:
    """Keep endpoints with waiting in [min, min + (max-min)//N] (Go integer division)."""

    type = "least-queue"

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        q = snap.waiting[idx].astype(np.int64)
        lo, hi = int(q.min()), int(q.max())
        return idx[(q >= lo) & (q <= lo + (hi - lo) // len(idx))]


class LeastKVCacheFilter:
    """Keep endpoints with kv in [min, min + (max-min)/N]."""

    type = "least-kv-cache"

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        kv = snap.kv_usage[idx]
        lo, hi = float(kv.min()), float(kv.max())
        return idx[(kv >= lo) & (kv <= lo + (hi - lo) / len(idx))]


class LowQueueFilter:
    """Keep endpoints with waiting < 128 (QUEUING_THRESHOLD_LORA); an empty result is a failure."""

    type = "low-queue"

    def __init__(self, threshold: int = QUEUEING_THRESHOLD_LORA, name: str | None = None) -> None:
        self.threshold = threshold
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        return idx[snap.waiting[idx] < self.threshold]


def _lora_sets(req: Request, snap: EndpointSnapshot, idx: np.ndarray) -> tuple[list[int], list[int]]:
    """(affinity, available): endpoints running the adapter; endpoints with a free adapter slot."""
    target = req.lora or req.model
    affinity: list[int] = []
    available: list[int] = []
    for i in idx.tolist():
        active = snap.active_loras[i] if snap.active_loras else frozenset()
        if target in active:
            affinity.append(i)
        elif snap.max_loras is not None and len(active) < int(snap.max_loras[i]):
            available.append(i)
    return affinity, available


class LoraAffinityFilter:
    """loRASoftAffinity: with probability 0.999 the endpoints running the adapter, else those with a free slot;
    whichever group is non-empty otherwise (empty = failure)."""

    type = "lora-affinity"

    def __init__(self, threshold: float = LORA_AFFINITY_THRESHOLD, name: str | None = None) -> None:
        self.threshold = threshold
        self.name = name or self.type

    def filter(self, req, snap, idx, state, rng):
        affinity, available = _lora_sets(req, snap, idx)
        if affinity and available:
            return np.asarray(affinity if rng.random() < self.threshold else available, dtype=np.intp)
        return np.asarray(affinity or available, dtype=np.intp)


# ----------------------------------------------------------------------------------------------------------------
# scorers: score(req, snap, idx, state) -> float array over the candidates, in [0, 1]
# ----------------------------------------------------------------------------------------------------------------
class Scorer:
    """Base: hooks default to no-ops so the router can call them on every scorer."""

    type = ""
    needs_prefix = False
    bounded = True  # scores are in [0, 1] by construction; otherwise the profile clamps them

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

    def score(self, req, snap, idx, state):
        return _minmax_low_is_good(_take(snap.waiting, idx))


class RunningRequestsScorer(Scorer):
    """running-requests-size-scorer: the same min-max on vllm:num_requests_running."""

    type = "running-requests-size-scorer"

    def score(self, req, snap, idx, state):
        return _minmax_low_is_good(_take(snap.running, idx))


class KVCacheUtilizationScorer(Scorer):
    """kv-cache-utilization-scorer: 1 - vllm:kv_cache_usage_perc."""

    type = "kv-cache-utilization-scorer"
    bounded = False

    def score(self, req, snap, idx, state):
        return 1.0 - _take(snap.kv_usage, idx)


def _clamp01(s: np.ndarray) -> np.ndarray:
    """The framework's clamp to [0, 1], skipped (cheaply) when already in range."""
    if s[s.argmax()] > 1.0 or s[s.argmin()] < 0.0:
        return np.clip(s, 0.0, 1.0)
    return s


class PrefixCacheScorer(Scorer):
    """prefix-cache-scorer: matched blocks / total blocks from the approximate index (0 when the prompt has none)."""

    type = "prefix-cache-scorer"
    needs_prefix = True

    def score(self, req, snap, idx, state):
        n = len(snap) if idx is None else len(idx)
        if state.counts is None or state.total == 0:
            return np.zeros(n)
        return _take(state.counts, idx) / state.total


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

    def __init__(self, name: str | None = None, threshold: int = LOAD_AWARE_QUEUE_THRESHOLD, **_: Any) -> None:
        super().__init__(name)
        self.threshold = float(threshold if threshold > 0 else LOAD_AWARE_QUEUE_THRESHOLD)

    def score(self, req, snap, idx, state):
        w = np.minimum(_take(snap.waiting, idx), self.threshold)
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
FILTERS: dict[str, type] = {
    c.type: c for c in (UtilizationDetector, LeastQueueFilter, LeastKVCacheFilter, LowQueueFilter, LoraAffinityFilter)
}


# ----------------------------------------------------------------------------------------------------------------
# pickers: pick(scores, rng) -> position among the candidates
# ----------------------------------------------------------------------------------------------------------------
class MaxScorePicker:
    """max-score-picker: GIE shuffles then stable-sorts by score and takes the first, i.e. a uniformly random one of
    the top-scored (tie_break "random"); newer llm-d-router rotates through the tied tier instead ("rotate")."""

    type = "max-score-picker"

    def __init__(self, name: str | None = None, tie_break: str = "random", **_: Any) -> None:
        if tie_break not in ("random", "rotate"):
            raise ValueError(f"max-score-picker tie_break must be 'random' or 'rotate', not {tie_break!r}")
        self.name = name or self.type
        self.rotate = tie_break == "rotate"
        self.counter = 0

    def pick(self, scores: np.ndarray, rng: np.random.Generator) -> int:
        best = scores.argmax()
        ties = (scores == scores[best]).nonzero()[0]
        n = len(ties)
        if n == 1:
            return int(best)
        if self.rotate:  # LLMD picker/common.go RotateScoredEndpoints
            r = self.counter % n
            self.counter += 1
            if self.counter >= n:
                self.counter = 0
            return int(ties[r])
        return int(ties[rng.integers(n)])


class RandomPicker:
    """random-picker: uniform over the candidates."""

    type = "random-picker"

    def __init__(self, name: str | None = None, **_: Any) -> None:
        self.name = name or self.type

    def pick(self, scores, rng):
        return int(rng.integers(len(scores)))


class WeightedRandomPicker:
    """weighted-random-picker (A-Res): key = U^(1/score), score <= 0 gets key 0, top key wins; all-zero scores fall
    back to uniform."""

    type = "weighted-random-picker"

    def __init__(self, name: str | None = None, **_: Any) -> None:
        self.name = name or self.type

    def pick(self, scores, rng):
        pos = scores > 0
        if not pos.any():
            return int(rng.integers(len(scores)))
        u = rng.random(len(scores))
        u[u == 0] = 1e-10
        keys = np.zeros(len(scores))
        keys[pos] = u[pos] ** (1.0 / scores[pos])
        return int(np.argmax(keys))


PICKERS: dict[str, type] = {c.type: c for c in (MaxScorePicker, RandomPicker, WeightedRandomPicker)}

# types that configure the data layer / handler and need no scheduling object here
PASSIVE_TYPES = {
    "single-profile-handler",
    "approx-prefix-cache-producer",
    "metrics-data-source",
    "core-metrics-extractor",
    "openai-parser",
    "token-producer",
}


# ----------------------------------------------------------------------------------------------------------------
# the router
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Profile:
    """One scheduling profile: filters in order, (scorer, weight) pairs, a picker."""

    name: str = "default"
    filters: list[Any] = field(default_factory=list)
    scorers: list[tuple[Scorer, float]] = field(default_factory=list)
    picker: Any = field(default_factory=MaxScorePicker)


class EppRouter:
    """Admission -> PrepareData (approximate prefix match) -> profile -> Decision; `routed` is PreRequest."""

    def __init__(
        self,
        profile: Profile,
        *,
        detector: UtilizationDetector | None = None,
        seed: int = 0,
        name: str = "epp",
        auto_tune: bool = True,
        block_tokens: int = 0,
        max_prefix_blocks: int = DEFAULT_MAX_PREFIX_BLOCKS,
        lru_capacity: int = DEFAULT_LRU_CAPACITY_PER_SERVER,
    ) -> None:
        self.name = name
        self.profile = profile
        self.detector = detector or UtilizationDetector()
        self.rng = np.random.default_rng(seed)
        self.auto_tune = auto_tune
        self.block_tokens = block_tokens
        self.max_blocks = max_prefix_blocks
        self.needs_prefix = any(s.needs_prefix for s, _ in profile.scorers)
        self.index = ApproxPrefixIndex(lru_capacity) if self.needs_prefix else None
        self._clamp = [not s.bounded for s, _ in profile.scorers]
        self._names: list[str] = []
        self._gpu_blocks: np.ndarray | None = None
        self._last: tuple[int, CycleState] | None = None

    def _block_size(self, snap: EndpointSnapshot) -> int:
        """GetBlockSize: the first endpoint's vllm:cache_config_info block_size under autoTune, else configured."""
        if self.auto_tune and snap.block_size is not None and len(snap) and snap.block_size[0] > 0:
            return int(snap.block_size[0])
        return self.block_tokens or DEFAULT_BLOCK_TOKENS

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        if req.priority < 0 and self.detector.saturation(snap) >= 1.0:
            return Decision(None, 429, SHED_REASON)
        if len(snap) == 0:
            return Decision(None, 503, NO_ENDPOINT_REASON)
        idx, total, state = self.scores(req, snap)
        if total is None:
            return Decision(None, 429, NO_TARGET_REASON)
        pos = self.profile.picker.pick(total, self.rng)
        self._names = snap.names
        self._gpu_blocks = snap.num_gpu_blocks
        self._last = (req.id, state)
        return Decision(pos if idx is None else int(idx[pos]))

    def scores(self, req: Request, snap: EndpointSnapshot) -> tuple[np.ndarray | None, np.ndarray | None, CycleState]:
        """PrepareData, filters and weighted scoring without picking: (candidate indices or None for all, total
        score per candidate or None if the filters left nothing, cycle state)."""
        n = len(snap)
        state = CycleState()
        if self.index is not None:
            keys, weights, total = request_blocks(req, self._block_size(snap), self.max_blocks)
            state.keys, state.weights, state.total = keys, weights, total
            acc = self.index.match(keys, weights)
            if acc:
                state.counts = self.index.counts(acc, self.index.slots_for(snap.names))
                state.cold = state.counts is None or not state.counts.any()
        idx: np.ndarray | None = None
        if self.profile.filters:
            idx = np.arange(n)
            for f in self.profile.filters:
                idx = f.filter(req, snap, idx, state, self.rng)
                if len(idx) == 0:
                    return idx, None, state
            if state.counts is not None:
                state.cold = not state.counts[idx].any()
        total_score: np.ndarray | None = None
        for (scorer, w), clamp in zip(self.profile.scorers, self._clamp, strict=True):
            s = scorer.score(req, snap, idx, state)
            if clamp:
                s = _clamp01(s)
            if total_score is None:
                total_score = s * w
            else:
                s *= w  # scorers return fresh arrays
                total_score += s
        if total_score is None:
            total_score = np.zeros(n if idx is None else len(idx))
        return idx, total_score, state

    def routed(self, req: Request, index_or_name: int | str) -> None:
        """PreRequest: add the request's blocks to the chosen pod's LRU; no-hit-lru bookkeeping."""
        if isinstance(index_or_name, str):
            name = index_or_name
            i = self._names.index(name) if name in self._names else -1
        else:
            i = int(index_or_name)
            name = self._names[i]
        if self._last is not None and self._last[0] == req.id:
            state = self._last[1]
            self._last = None
        else:
            state = CycleState()
            if self.index is not None:
                state.keys, state.weights, state.total = request_blocks(req, self.block_tokens or 16, self.max_blocks)
        if self.index is not None and state.keys:
            cap = None
            if self.auto_tune and self._gpu_blocks is not None and i >= 0 and self._gpu_blocks[i] > 0:
                cap = int(self._gpu_blocks[i])
            self.index.add(name, state.keys, state.weights, cap)
        for s, _ in self.profile.scorers:
            s.pre_request(req, name, state)

    def finished(self, req: Request, name: str) -> None:
        for s, _ in self.profile.scorers:
            s.finished(req, name)

    def remove(self, name: str) -> None:
        if self.index is not None:
            self.index.remove_pod(name)
        for s, _ in self.profile.scorers:
            s.remove(name)


# ----------------------------------------------------------------------------------------------------------------
# EndpointPickerConfig
# ----------------------------------------------------------------------------------------------------------------
_PREFIX_PARAM_KEYS = {
    "autoTune": "auto_tune",
    "blockSizeTokens": "block_tokens",
    "maxPrefixBlocksToMatch": "max_prefix_blocks",
    "lruCapacityPerServer": "lru_capacity",
}


def build_router(
    config: dict[str, Any],
    *,
    seed: int = 0,
    oracle: PrefixOracle | None = None,
    weights: dict[str, float] | None = None,
    name: str = "epp",
    tie_break: str | None = None,
) -> EppRouter:
    """An EppRouter from an EndpointPickerConfig-shaped dict: `plugins: [{type, name?, parameters?}]`,
    `schedulingProfiles: [{name, plugins: [{pluginRef, weight?}]}]`. Scorers referenced without a weight get 1;
    a profile without a picker gets max-score-picker (both as GIE's loader does). `weights` overrides a scorer's
    weight by plugin name or type."""
    plugins: dict[str, dict[str, Any]] = {}
    for p in config.get("plugins", []):
        if "type" not in p:
            raise ValueError(f"plugin without a type: {p!r}")
        t = p["type"]
        if t not in SCORERS and t not in FILTERS and t not in PICKERS and t not in PASSIVE_TYPES:
            raise ValueError(f"unknown plugin type {t!r} (plugin {p.get('name', t)!r})")
        plugins[p.get("name", t)] = p
    profiles = config.get("schedulingProfiles", [])
    if len(profiles) != 1:
        raise ValueError(f"single-profile-handler needs exactly one scheduling profile, got {len(profiles)}")
    router_kw: dict[str, Any] = {}
    detector = UtilizationDetector()
    for p in plugins.values():
        params = p.get("parameters") or {}
        if p["type"] in ("prefix-cache-scorer", "approx-prefix-cache-producer"):
            for k, v in params.items():
                if k in _PREFIX_PARAM_KEYS:
                    router_kw[_PREFIX_PARAM_KEYS[k]] = v
        if p["type"] == UtilizationDetector.type:
            detector = _make_detector(p)
    prof = Profile(name=profiles[0].get("name", "default"))
    picker = None
    for ref in profiles[0].get("plugins", []):
        key = ref["pluginRef"]
        if key not in plugins:
            raise ValueError(f"schedulingProfile {prof.name!r} references undefined plugin {key!r}")
        p = plugins[key]
        t, params = p["type"], dict(p.get("parameters") or {})
        if t in SCORERS:
            if t == PrecisePrefixCacheScorer.type:
                params["oracle"] = oracle
            w = float(ref.get("weight", 1))
            if weights:
                w = float(weights.get(key, weights.get(t, w)))
            prof.scorers.append((SCORERS[t](name=key, **params), w))
        elif t == UtilizationDetector.type:
            prof.filters.append(_make_detector(p))
        elif t in FILTERS:
            prof.filters.append(FILTERS[t](name=key, **params))
        elif t in PICKERS:
            if tie_break and t == MaxScorePicker.type:
                params.setdefault("tie_break", tie_break)
            picker = PICKERS[t](name=key, **params)
    if picker is None:
        picker = MaxScorePicker(tie_break=tie_break or "random")
    prof.picker = picker
    return EppRouter(prof, detector=detector, seed=seed, name=name, **router_kw)


def _make_detector(p: dict[str, Any]) -> UtilizationDetector:
    params = p.get("parameters") or {}
    return UtilizationDetector(
        queue_depth_threshold=params.get("queueDepthThreshold", QUEUE_DEPTH_THRESHOLD),
        kv_cache_util_threshold=params.get("kvCacheUtilThreshold", KV_CACHE_UTIL_THRESHOLD),
        headroom=params.get("headroom", 0.0),
        name=p.get("name"),
    )

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
between scrapes. The plugins live in `saturation` (detector), `filters`, `scorers` and `pickers`, the cycle state in
`cycle`; this module holds the profile, the router and EndpointPickerConfig loading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubetwin.serving.router.cycle import CycleState
from kubetwin.serving.router.filters import FILTERS
from kubetwin.serving.router.pickers import PICKERS, MaxScorePicker
from kubetwin.serving.router.prefix_index import (
    DEFAULT_BLOCK_TOKENS,
    DEFAULT_LRU_CAPACITY_PER_SERVER,
    DEFAULT_MAX_PREFIX_BLOCKS,
    ApproxPrefixIndex,
    request_blocks,
)
from kubetwin.serving.router.saturation import KV_CACHE_UTIL_THRESHOLD, QUEUE_DEPTH_THRESHOLD, UtilizationDetector
from kubetwin.serving.router.scorers import SCORERS, PrecisePrefixCacheScorer, PrefixOracle, Scorer
from kubetwin.serving.types import Decision, EndpointSnapshot, Request

SHED_REASON = "system saturated, sheddable request dropped"  # GIE admission.go
NO_ENDPOINT_REASON = "failed to find candidate endpoints for serving the request"  # GIE director.go -> 503
NO_TARGET_REASON = "failed to find target endpoint: no endpoints available"  # scheduler error -> 429


# types that configure the data layer / handler and need no scheduling object here
PASSIVE_TYPES = {
    "single-profile-handler",
    "approx-prefix-cache-producer",
    "metrics-data-source",
    "core-metrics-extractor",
    "openai-parser",
    "token-producer",
}


def _clamp01(s: np.ndarray) -> np.ndarray:
    """The framework's clamp to [0, 1], skipped (cheaply) when already in range."""
    if s[s.argmax()] > 1.0 or s[s.argmin()] < 0.0:
        return np.clip(s, 0.0, 1.0)
    return s


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
        # the leading scorers that read only the snapshot: their weighted sum is the same for every request scored
        # against one snapshot without filters, kept as (snapshot, sum) -- the later terms are added to a copy in
        # the same order, so the floating-point sums are the ones computed per request
        self._static = next((i for i, (s, _) in enumerate(profile.scorers) if not s.snapshot_only),
                            len(profile.scorers))
        self._static_sum: tuple[EndpointSnapshot, np.ndarray] | None = None
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
        first = 0
        if idx is None and self._static:
            cached = self._static_sum
            if cached is None or cached[0] is not snap:
                static = self._weighted(req, snap, None, state, 0, self._static, None)
                assert static is not None  # _static >= 1 scorers
                cached = self._static_sum = (snap, static)
            total_score = cached[1].copy()
            first = self._static
        total_score = self._weighted(req, snap, idx, state, first, len(self._clamp), total_score)
        if total_score is None:
            total_score = np.zeros(n if idx is None else len(idx))
        return idx, total_score, state

    def _weighted(self, req: Request, snap: EndpointSnapshot, idx: np.ndarray | None, state: CycleState, lo: int,
                  hi: int, total_score: np.ndarray | None) -> np.ndarray | None:
        """total_score plus scorers lo..hi-1's clamped, weighted scores, added in the profile's order."""
        scorers, clamps = self.profile.scorers, self._clamp
        for j in range(lo, hi):
            scorer, w = scorers[j]
            s = scorer.score(req, snap, idx, state)
            if clamps[j]:
                s = _clamp01(s)
            if total_score is None:
                total_score = s * w
            else:
                s *= w  # scorers return fresh arrays
                total_score += s
        return total_score

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

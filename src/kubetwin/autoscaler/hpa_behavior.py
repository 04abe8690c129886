"""How the HPA controller normalizes a proposal into the replica count it writes (kubernetes/kubernetes
pkg/controller/podautoscaler/horizontal.go normalizeDesiredReplicas[WithBehaviors], pkg/apis/autoscaling/v2/
defaults.go): stabilization windows over the remembered recommendations, min/max bounds, the scale-up limit without
`behavior`, and the Pods/Percent policies over the recorded scale events with it; each sets the AbleToScale /
ScalingLimited conditions as the real one does. A mixin of `HorizontalPodAutoscalerController` (hpa.py), kept apart
because it is the rate-limiting half of the controller, independent of how metrics are read."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from kubetwin.api import defaults
from kubetwin.sim.env import Environment

SCALE_UP_LIMIT_FACTOR, SCALE_UP_LIMIT_MINIMUM = 2.0, 4.0  # horizontal.go scaleUpLimitFactor/Minimum (no behavior)
# defaults.go GenerateHPAScaleUpRules / GenerateHPAScaleDownRules: the API server stores them (api.defaults)
DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN = defaults.HPA_SCALE_UP, defaults.HPA_SCALE_DOWN


@dataclass
class HpaState:
    """The controller's in-memory memory of one HPA (recommendations, scaleUpEvents, scaleDownEvents maps)."""

    recommendations: list[tuple[int, float]] = field(default_factory=list)
    up_events: list[tuple[int, float]] = field(default_factory=list)
    down_events: list[tuple[int, float]] = field(default_factory=list)


def _rules(given: dict | None, default: dict, window: float | None) -> dict:
    """GenerateHPAScale{Up,Down}Rules: fill unset fields with the defaults (scale-down window from the flag)."""
    given = given or {}
    out = {"selectPolicy": given.get("selectPolicy") or default["selectPolicy"],
           "policies": given.get("policies") or default["policies"],
           "stabilizationWindowSeconds": given.get("stabilizationWindowSeconds",
                                                   default.get("stabilizationWindowSeconds", window))}
    if out["stabilizationWindowSeconds"] is None:
        out["stabilizationWindowSeconds"] = window
    out["tolerance"] = given.get("tolerance")
    return out


ConditionSetter = Callable[[list[dict], str, str, str, str], None]  # (conditions, type, status, reason, message)


class ScaleNormalizer:
    """The normalization of a desired replica count (horizontal.go normalizeDesiredReplicas[WithBehaviors]), held by
    the HPA controller: the clock, the downscale stabilization flag and how the controller sets a condition."""

    def __init__(self, env: Environment, downscale_window: float, set_condition: ConditionSetter) -> None:
        self.env, self.downscale_window, self._set = env, downscale_window, set_condition

    def normalize(self, state: HpaState, conds: list[dict], current: int, desired: int, lo: int, hi: int) -> int:
        """normalizeDesiredReplicas (no behavior): the downscale stabilization window (max over it; a sample
        exactly at the cutoff still counts), then min/max and the scale-up limit max(2×current, 4)."""
        cutoff = self.env.now - self.downscale_window
        best, old = desired, None
        for i, (rec, ts) in enumerate(state.recommendations):
            if ts < cutoff:
                old = i
            elif rec > best:
                best = rec
        self._record(state, conds, old, desired, best, "ScaleDownStabilized",
                     "recent recommendations were higher than current one, applying the highest recent "
                     "recommendation")
        up_limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
        if hi > up_limit:
            top, why, msg = up_limit, "ScaleUpLimit", "the desired replica count is increasing faster than the " \
                "maximum scale rate"
        else:
            top, why, msg = hi, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
        if best < lo:
            out, why, msg = lo, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
        elif best > top:
            out = top
        else:
            out, why, msg = best, "DesiredWithinRange", "the desired count is within the acceptable range"
        self._set(conds, "ScalingLimited", "False" if out == best else "True", why, msg)
        return out

    def normalize_with_behaviors(self, state: HpaState, conds: list[dict], behavior: dict, current: int,
                                  desired: int, lo: int, hi: int) -> int:
        """normalizeDesiredReplicasWithBehaviors: stabilization per direction (a sample must be newer than the
        cutoff), then the scale-up/scale-down rate limits from the policies and the scale events."""
        up = _rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP, None)
        down = _rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN, self.downscale_window)
        now = self.env.now
        if desired >= current:
            window, better = up["stabilizationWindowSeconds"], min
            reason, message = "ScaleUpStabilized", ("recent recommendations were lower than current one, applying "
                                                    "the lowest recent recommendation")
        else:
            window, better = down["stabilizationWindowSeconds"], max
            reason, message = "ScaleDownStabilized", ("recent recommendations were higher than current one, "
                                                      "applying the highest recent recommendation")
        obsolete = now - max(up["stabilizationWindowSeconds"], down["stabilizationWindowSeconds"])
        cutoff, rec, old = now - window, desired, None
        for i, (r, ts) in enumerate(state.recommendations):
            if ts > cutoff:
                rec = better(r, rec)
            if ts < obsolete:
                old = i
        self._record(state, conds, old, desired, rec, reason, message)
        out, why, msg = rec, "DesiredWithinRange", "the desired count is within the acceptable range"
        if rec > current:
            limit = max(self._up_limit(state, current, up), current)
            if hi > limit:
                top, w, mm = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the " \
                    "maximum scale rate"
            else:
                top, w, mm = hi, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
            if rec > top:
                out, why, msg = top, w, mm
        elif rec < current:
            limit = min(self._down_limit(state, current, down), current)
            if lo < limit:
                bottom, w, mm = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the " \
                    "maximum scale rate"
            else:
                bottom, w, mm = lo, "TooFewReplicas", "the desired replica count is less than the minimum replica " \
                    "count"
            if rec < bottom:
                out, why, msg = bottom, w, mm
        self._set(conds, "ScalingLimited", "False" if out == rec else "True", why, msg)
        return out

    def _record(self, state: HpaState, conds: list[dict], old: int | None, desired: int, rec: int, reason: str,
                message: str) -> None:
        """Remember `desired` now (in the obsolete slot `old` if there is one) and set AbleToScale: `reason` when
        stabilization changed the recommendation to `rec`, else ReadyForNewScale."""
        now = self.env.now
        if old is not None:
            state.recommendations[old] = (desired, now)
        else:
            state.recommendations.append((desired, now))
        if rec != desired:
            self._set(conds, "AbleToScale", "True", reason, message)
        else:
            self._set(conds, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")

    def _changed(self, events: list[tuple[int, float]], period: float) -> int:
        """getReplicasChangePerPeriod: changes strictly newer than now - period."""
        cutoff = self.env.now - period
        return sum(n for n, ts in events if ts > cutoff)

    def _up_limit(self, state: HpaState, current: int, rules: dict) -> int:
        """calculateScaleUpLimitWithScalingRules."""
        select = rules["selectPolicy"]
        if select == "Disabled":
            return current
        result = math.inf if select == "Min" else -math.inf
        pick = min if select == "Min" else max
        for p in rules["policies"]:
            start = current - self._changed(state.up_events, p["periodSeconds"]) + self._changed(
                state.down_events, p["periodSeconds"])
            proposed = start + p["value"] if p["type"] == "Pods" else math.ceil(start * (1 + p["value"] / 100))
            result = pick(result, proposed)
        return int(result)

    def _down_limit(self, state: HpaState, current: int, rules: dict) -> int:
        """calculateScaleDownLimitWithBehaviors."""
        select = rules["selectPolicy"]
        if select == "Disabled":
            return current
        result = -math.inf if select == "Min" else math.inf
        pick = max if select == "Min" else min
        for p in rules["policies"]:
            start = current - self._changed(state.up_events, p["periodSeconds"]) + self._changed(
                state.down_events, p["periodSeconds"])
            proposed = start - p["value"] if p["type"] == "Pods" else int(start * (1 - p["value"] / 100))
            result = pick(result, proposed)
        return int(result)

    def store_scale_event(self, state: HpaState, behavior: dict, current: int, desired: int) -> None:
        """storeScaleEvent: remember a rescale for the behaviors' policies, then drop the outdated events."""
        (state.up_events if desired > current else state.down_events).append((abs(desired - current), self.env.now))
        self._prune_events(state, behavior)

    def _prune_events(self, state: HpaState, behavior: dict) -> None:
        """markScaleEventsOutdated: events older than the longest policy period are dropped."""
        for events, rules in ((state.up_events, _rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP, None)),
                              (state.down_events, _rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN, 0))):
            longest = max((p["periodSeconds"] for p in rules["policies"]), default=0)
            events[:] = [(n, ts) for n, ts in events if ts >= self.env.now - longest]

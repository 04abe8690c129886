"""PromQL's numeric functions, as prometheus/prometheus computes them (promql/functions.go, promql/quantile.go):
division with Go's float semantics, extrapolatedRate behind rate/increase/delta, the *over_time reducers and the
classic-histogram bucketQuantile. Pure functions over samples; prometheus/promql.py evaluates queries with them."""

from __future__ import annotations

import math
from collections.abc import Callable


def div(a: float, b: float) -> float:
    """IEEE division as Go's float64 does it (x/0 = ±Inf, 0/0 = NaN)."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


def extrapolated_rate(samples: list[tuple[float, float]], start: float, end: float, rng: float, is_counter: bool,
                       is_rate: bool) -> float | None:
    """promql/functions.go extrapolatedRate: the increase between the first and last sample (counter resets
    added back), extrapolated towards the window's edges by at most half a sample interval (or to where the counter
    would have been zero)."""
    if len(samples) < 2:
        return None
    first_t, first_v = samples[0]
    last_t, last_v = samples[-1]
    result = last_v - first_v
    if is_counter:
        prev = first_v
        for _, v in samples[1:]:
            if v < prev:
                result += prev
            prev = v
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    avg = sampled / (len(samples) - 1)
    threshold = avg * 1.1
    to_start, to_end = first_t - start, end - last_t
    if to_start >= threshold:
        to_start = avg / 2
    if is_counter and result > 0 and first_v >= 0:
        to_zero = sampled * (first_v / result)
        to_start = min(to_start, to_zero)
    if to_end >= threshold:
        to_end = avg / 2
    factor = (sampled + to_start + to_end) / sampled
    if is_rate:
        factor /= rng
    return result * factor


def over_time(fn: str) -> Callable[[list[tuple[float, float]]], float]:
    vals: dict[str, Callable[[list[float]], float]] = {
        "avg_over_time": lambda v: sum(v) / len(v), "max_over_time": max, "min_over_time": min,
        "sum_over_time": sum, "count_over_time": lambda v: float(len(v)), "last_over_time": lambda v: v[-1]}
    f = vals[fn]
    return lambda samples: f([v for _, v in samples])


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return math.nan
    counts = [c for _, c in buckets]
    for i in range(1, len(counts)):  # ensureMonotonic: a bucket never holds fewer than the one below it
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if total == 0:
        return math.nan
    rank = q * total
    b = next(i for i, c in enumerate(counts) if c >= rank)
    if b == len(buckets) - 1:
        return buckets[-2][0]
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    start, count = (0.0, counts[0]) if b == 0 else (buckets[b - 1][0], counts[b] - counts[b - 1])
    rank -= 0.0 if b == 0 else counts[b - 1]
    end = buckets[b][0]
    return start + (end - start) * div(rank, count)

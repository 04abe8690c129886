"""Synthetic request traces (RequestTrace `format: generator`), built as arrays with numpy so a day of traffic
(millions of requests) takes about a second.

Arrivals: a unit-rate renewal process (exponential gaps for Poisson, gamma gaps with shape 1/cv^2 for `gamma`)
in "operational time", mapped through the inverse of the cumulative rate Lambda(t) = integral of rate(t) dt.
That is exact for a Poisson process (time-rescaling theorem) and keeps the gap shape for a gamma process while
following the schedule. On-off bursts modulate the rate with exponential ON/OFF periods (a two-state MMPP).

Shared prefixes follow inference-perf's `shared_prefix` data generator (kubernetes-sigs/inference-perf,
used by the llm-d benchmarks, shared/reference/serving-router-keda-latency.md 2.2): num_groups system prompts
of system_prompt_len tokens, num_prompts_per_group questions of question_len tokens each; every request picks
a group and a question uniformly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kubetwin.api.twin import ArrivalProcess, RateSchedule, TokenDistribution, TraceGenerator
from kubetwin.k8s.units import parse_duration
from kubetwin.serving.traces.arrays import TraceArrays, TraceError, load_trace, mix, unique_segments

_U64 = np.uint64
_DIURNAL_GRID_S = 60.0  # the diurnal rate is integrated on a 1-minute grid (piecewise linear Lambda)


def size_estimate(gen: TraceGenerator, duration: float) -> tuple[float, float, float]:
    """(expected requests at the peak rate, rate knots, the peak rate) of a generator over `duration` s: what its
    columnar arrays and rate grid will hold (the 1-minute diurnal grid of rate_grid, one knot per on-off period)."""
    sched, process = gen.rateSchedule, gen.process
    factor = max([1.0] + ([sched.diurnal.peak] if sched and sched.diurnal else [])
                 + ([process.offRateFactor] if process.type == "on-off" else []))
    peak = max([gen.rate * factor] + [s.rate for s in (sched.steps if sched else [])])
    knots = duration / _DIURNAL_GRID_S if sched and sched.diurnal else 0.0
    if process.type == "on-off":
        knots = max(knots, duration / max(parse_duration(process.onDuration) + parse_duration(process.offDuration),
                                          1e-9))
    return peak * duration, knots, peak


def rate_grid(rate: float, schedule: RateSchedule | None, process: ArrivalProcess, duration: float,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(t, Lambda(t)) knots of the cumulative rate, piecewise linear between knots."""
    if schedule is not None and schedule.diurnal is not None:
        d = schedule.diurnal
        period, peak_at = parse_duration(d.period), parse_duration(d.peakAt)
        t = np.append(np.arange(0.0, duration, _DIURNAL_GRID_S), duration)
        mid = (t[:-1] + t[1:]) / 2
        shape = d.trough + (d.peak - d.trough) * 0.5 * (1 + np.cos(2 * np.pi * (mid - peak_at) / period))
        rates = rate * shape
    else:
        t = np.array([0.0])
        rates = np.array([rate])
        for step in sorted(schedule.steps if schedule else [], key=lambda s: parse_duration(s.at)):
            at = parse_duration(step.at)
            if at <= 0:
                rates[-1] = step.rate
            elif at < duration:
                t, rates = np.append(t, at), np.append(rates, step.rate)
        t = np.append(t, duration)
    if process.type == "on-off":
        t, rates = _modulate(t, rates, process, duration, rng)
    lam = np.concatenate(([0.0], np.cumsum(rates * np.diff(t))))
    return t, lam


def _modulate(t: np.ndarray, rates: np.ndarray, process: ArrivalProcess, duration: float,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Multiply the rate by 1 in ON periods and offRateFactor in OFF periods (exponential lengths, ON first)."""
    on, off = parse_duration(process.onDuration), parse_duration(process.offDuration)
    mean_cycle = max(on + off, 1e-9)
    k = int(duration / mean_cycle * 2) + 16
    lengths = np.empty(2 * k)
    lengths[0::2] = rng.exponential(on, k)
    lengths[1::2] = rng.exponential(off, k)
    switches = np.cumsum(lengths)
    while switches[-1] < duration:  # rare: keep drawing cycles
        more = np.empty(2 * k)
        more[0::2], more[1::2] = rng.exponential(on, k), rng.exponential(off, k)
        switches = np.concatenate((switches, switches[-1] + np.cumsum(more)))
    switches = switches[switches < duration]
    knots = np.union1d(t, switches)
    base = rates[np.clip(np.searchsorted(t, knots[:-1], side="right") - 1, 0, rates.shape[0] - 1)]
    in_off = (np.searchsorted(switches, knots[:-1], side="right") % 2) == 1
    return knots, base * np.where(in_off, process.offRateFactor, 1.0)


def arrivals(gen: TraceGenerator, duration: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival times in [0, duration)."""
    t, lam = rate_grid(gen.rate, gen.rateSchedule, gen.process, duration, rng)
    total = float(lam[-1])
    if total <= 0:
        return np.zeros(0)
    proc = gen.process
    shape = 1.0 / (proc.cv ** 2) if proc.type == "gamma" else 1.0
    chunks, end = [], 0.0
    while end < total:
        n = int(total - end + 6 * np.sqrt(total - end) * max(proc.cv, 1.0)) + 64
        gaps = rng.gamma(shape, 1.0 / shape, n) if proc.type == "gamma" else rng.exponential(1.0, n)
        ops = end + np.cumsum(gaps)
        chunks.append(ops)
        end = float(ops[-1])
    ops = np.concatenate(chunks)
    ops = ops[ops < total]
    return np.interp(ops, lam, t)


def missing_fields(gen: TraceGenerator) -> list[TraceError]:
    """What a generator block lacks to draw its requests: token counts, unless sharedPrefix gives them, and a
    uniform range the right way round. `kubetwin validate` reports these; `generate` raises the first."""
    out = []
    for name in ("promptTokens", "outputTokens"):
        dist, field = getattr(gen, name), f"spec.generator.{name}"
        if dist is None and gen.sharedPrefix is None:
            out.append(TraceError(f"{field} is required unless sharedPrefix is set", "set a number of tokens, or "
                                  "{lognormal: {mean, sigma}}", field))
        elif dist is not None and dist.uniform is not None and dist.uniform.max < dist.uniform.min:
            out.append(TraceError(f"uniform max {dist.uniform.max} < min {dist.uniform.min}", "swap them",
                                  f"{field}.uniform"))
    return out


def draw_tokens(dist: TokenDistribution | None, n: int, rng: np.random.Generator, base: Path,
                field: str, cache: dict) -> np.ndarray:
    """n token counts from a fixed value or a distribution; `fromTrace` samples rows of a real trace (the row
    indices are cached per trace so prompt and output lengths drawn from the same trace stay paired)."""
    assert dist is not None  # missing_fields, checked by generate
    if dist.value is not None:
        out = np.full(n, dist.value, dtype=np.int64)
    elif dist.lognormal is not None:
        s = dist.lognormal.sigma
        mu = np.log(dist.lognormal.mean) - s * s / 2  # so the arithmetic mean is `mean`
        out = np.rint(rng.lognormal(mu, s, n)).astype(np.int64)
    elif dist.uniform is not None:
        out = rng.integers(dist.uniform.min, dist.uniform.max + 1, n)
    else:
        src = dist.fromTrace
        assert src is not None
        path = (base / src.path).resolve()
        key = (src.format, str(path))
        if key not in cache:
            try:
                trace = load_trace(src.format, path)
            except TraceError as exc:
                raise TraceError(exc.message, exc.hint, f"{field}.fromTrace.path") from None
            if not len(trace):
                raise TraceError(f"{path}: the trace has no requests", "use a trace with rows",
                                 f"{field}.fromTrace.path")
            cache[key] = (trace, rng.integers(0, len(trace), n))
        trace, rows = cache[key]
        out = (trace.output if field.endswith("outputTokens") else trace.prompt)[rows].astype(np.int64)
    return np.clip(out, dist.min, dist.max if dist.max is not None else None)


def generate(gen: TraceGenerator, duration: float, seed: int, salt: int, base: Path = Path(".")) -> TraceArrays:
    """A synthetic trace of `duration` seconds, deterministic in (seed, salt)."""
    for problem in missing_fields(gen):
        raise problem
    rng = np.random.default_rng([seed, salt & 0xFFFFFFFF, salt >> 32])
    arr = arrivals(gen, duration, rng)
    n = arr.shape[0]
    cache: dict = {}
    sp = gen.sharedPrefix
    lora = None
    if gen.loras:
        w = np.array([x.weight for x in gen.loras], dtype=np.float64)
        lora = rng.choice(len(gen.loras), size=n, p=w / w.sum()).astype(np.int32)
    if sp is not None:
        group = rng.integers(0, sp.numGroups, n)
        question = group * sp.promptsPerGroup + rng.integers(0, sp.promptsPerGroup, n)
        sys_h = mix(_U64(salt), group.astype(_U64))
        q_h = mix(sys_h, question.astype(_U64))
        output = (np.full(n, sp.outputLen, dtype=np.int64) if gen.outputTokens is None
                  else draw_tokens(gen.outputTokens, n, rng, base, "spec.generator.outputTokens", cache))
        if sp.systemPromptLen > 0:
            offsets = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
            hashes = np.empty(2 * n, dtype=_U64)
            hashes[0::2], hashes[1::2] = sys_h, q_h
            tokens = np.empty(2 * n, dtype=np.int32)
            tokens[0::2], tokens[1::2] = sp.systemPromptLen, sp.questionLen
        else:
            offsets, hashes = np.arange(n + 1, dtype=np.int64), q_h
            tokens = np.full(n, sp.questionLen, dtype=np.int32)
        prompt = np.full(n, sp.systemPromptLen + sp.questionLen, dtype=np.int64)
        return TraceArrays(arr, prompt.astype(np.int32), output.astype(np.int32), offsets, hashes, tokens, lora,
                           [x.name for x in gen.loras])
    prompt = draw_tokens(gen.promptTokens, n, rng, base, "spec.generator.promptTokens", cache)
    output = draw_tokens(gen.outputTokens, n, rng, base, "spec.generator.outputTokens", cache)
    names = [x.name for x in gen.loras]
    if gen.sessions is not None:
        return _sessions(arr, prompt, output, gen, rng, salt, lora, names)
    offsets, hashes, tokens = unique_segments(prompt, salt)
    return TraceArrays(arr, prompt.astype(np.int32), output.astype(np.int32), offsets, hashes, tokens, lora, names)


def _sessions(arr: np.ndarray, message: np.ndarray, output: np.ndarray, gen: TraceGenerator,
              rng: np.random.Generator, salt: int, lora: np.ndarray | None, names: list[str]) -> TraceArrays:
    """Multi-turn sessions: each arrival continues one of `concurrent` open sessions (uniformly); its prompt is
    the session's history (earlier messages and answers, each a segment) plus the new message. After a turn the
    session ends with probability 1/meanTurns and its slot starts a new one. A session keeps one LoRA."""
    assert gen.sessions is not None
    n = arr.shape[0]
    slots = rng.integers(0, gen.sessions.concurrent, n).tolist()
    ends = (rng.random(n) < 1.0 / gen.sessions.meanTurns).tolist()
    msg, out = message.tolist(), output.tolist()
    slot_session = list(range(gen.sessions.concurrent))
    history: list[list[tuple[int, int]]] = [[] for _ in range(gen.sessions.concurrent)]
    next_session = gen.sessions.concurrent
    session = np.empty(n, dtype=np.int64)
    seg_h: list[int] = []
    seg_t: list[int] = []
    counts = np.empty(n, dtype=np.int64)
    prompt = np.empty(n, dtype=np.int64)
    # Request i's message and answer are segments 2i and 2i+1; each follows exactly one history, so a hash of
    # the segment id alone already identifies the whole prefix (no chaining needed, and it vectorizes).
    seg_ids = mix(_U64(salt), np.arange(2 * n, dtype=_U64)).tolist()
    for i in range(n):
        s = slots[i]
        hist = history[s]
        h_msg, h_out = seg_ids[2 * i], seg_ids[2 * i + 1]
        for h, t in hist:
            seg_h.append(h)
            seg_t.append(t)
        seg_h.append(h_msg)
        seg_t.append(msg[i])
        counts[i] = len(hist) + 1
        prompt[i] = sum(t for _, t in hist) + msg[i]
        session[i] = slot_session[s]
        if ends[i]:
            history[s] = []
            slot_session[s] = next_session
            next_session += 1
        else:
            hist.append((h_msg, msg[i]))
            hist.append((h_out, out[i]))
    if lora is not None:
        lora = lora[session % lora.shape[0]] if n else lora
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return TraceArrays(arr, prompt.astype(np.int32), output.astype(np.int32), offsets,
                       np.array(seg_h, dtype=_U64), np.array(seg_t, dtype=np.int32), lora, names, session)


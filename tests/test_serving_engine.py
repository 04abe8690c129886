"""The per-pod engine model against hand-computed vLLM V1 scheduler behaviour, and macro-step equivalence."""

from __future__ import annotations

import math
import random

import pytest

from kubetwin.serving.engine.core import Engine
from kubetwin.serving.types import EngineArgs, Request


class Lin:
    """Linear StepModel: c0 + tok*tokens + kv*kv_read + seq*seqs + pair*prefill_pairs; records every call."""

    def __init__(self, c0: float = 1.0, tok: float = 0.0, kv: float = 0.0, seq: float = 0.0, pair: float = 0.0):
        self.c0, self.tok, self.kv, self.seq, self.pair = c0, tok, kv, seq, pair
        self.calls: list[tuple[int, float, int, int]] = []

    def iteration_time(self, num_tokens: int, prefill_pairs: float, kv_read_tokens: int, num_seqs: int) -> float:
        self.calls.append((num_tokens, prefill_pairs, kv_read_tokens, num_seqs))
        return (self.c0 + self.tok * num_tokens + self.kv * kv_read_tokens + self.seq * num_seqs
                + self.pair * prefill_pairs)

    def decode_line(self, num_seqs: int) -> tuple[float, float]:
        return self.c0 + (self.tok + self.seq) * num_seqs, self.kv


def mk(i: int, prompt: int, out: int, *, t: float = 0.0, segs: tuple[int, ...] | None = None,
       hashes: tuple[int, ...] | None = None, lora: str | None = None, prio: int = 0) -> Request:
    segs = segs or (prompt,)
    hashes = hashes or tuple(10_000 * (i + 1) + j for j in range(len(segs)))
    assert sum(segs) == prompt
    return Request(id=i, arrival=t, prompt_tokens=prompt, output_tokens=out, hashes=hashes, seg_tokens=segs,
                   lora=lora, priority=prio)


def engine(step=None, *, blocks: int = 10_000, seqs: int = 256, budget: int = 2048, mml: int = 8192,
           macro: bool = True, **kw) -> tuple[Engine, Lin, list[Request]]:
    done: list[Request] = []
    step = step or Lin()
    lora_time = kw.pop("lora_load_time", 0.0)
    args = EngineArgs(model="m", max_num_seqs=seqs, max_num_batched_tokens=budget, **kw)
    e = Engine(args, step, blocks, name="pod-0", max_model_len=mml, lora_load_time=lora_time,
               on_finish=done.append, macro_steps=macro)
    return e, step, done


def drive(e: Engine, reqs: list[Request], until: float = math.inf) -> None:
    for r in sorted(reqs, key=lambda r: (r.arrival, r.id)):
        e.advance(r.arrival)
        e.add(r, r.arrival)
    e.advance(until)


def test_chunked_prefill_splits_long_prompt_over_budget():
    e, step, done = engine(budget=2048, macro=False)  # single steps: one StepModel call per iteration
    r = mk(0, 5000, 3)
    drive(e, [r])
    assert [c[0] for c in step.calls] == [2048, 2048, 904, 1, 1]
    # prefill pairs of chunk c after p tokens: c * (p + c/2); decodes add none
    assert step.calls[1][1] == pytest.approx(2048 * (2048 + 1024))
    assert step.calls[3][1] == 0.0
    assert (r.scheduled, r.first_token, r.finish, r.status) == (0.0, 3.0, 5.0, 200)
    assert e.prompt_tokens_total == 5000 and e.generation_tokens_total == 3
    assert e.tokens_computed == 5002 and e.iterations == 5 and e.busy_time == 5.0
    assert done == [r]


def test_fcfs_admission_fills_budget_in_arrival_order():
    e, step, _ = engine(budget=100, macro=False)
    rs = [mk(i, 80, 2) for i in range(3)]
    drive(e, rs)
    # it0: r0 80 + r1 20 (chunk); it1: r0 decode 1, r1 60, r2 39; it2: r1 decode, r2 41 ...
    assert [c[0] for c in step.calls[:3]] == [100, 100, 42]
    assert [r.scheduled for r in rs] == [0.0, 0.0, 1.0]
    assert [r.first_token for r in rs] == [1.0, 2.0, 3.0]
    assert [r.finish for r in rs] == [2.0, 3.0, 4.0]


def test_max_num_seqs_caps_the_running_batch():
    e, _, _ = engine(seqs=2)
    rs = [mk(i, 10, 5) for i in range(3)]
    for r in rs:
        e.add(r, 0.0)
    e.advance(0.5)
    assert (e.num_running, e.num_waiting) == (2, 1)
    e.advance(math.inf)
    assert [r.finish for r in rs] == [5.0, 5.0, 10.0]
    assert rs[2].scheduled == 5.0 and rs[2].first_token == 6.0


def test_ttft_and_tpot_follow_the_step_model():
    step = Lin(c0=0.01, kv=1e-5)
    e, _, _ = engine(step, macro=False)
    r = mk(0, 100, 4)
    drive(e, [r])
    # prefill reads 100 tokens; decodes read 101, 102, 103 (context incl. the new token)
    assert r.first_token == pytest.approx(0.01 + 100e-5)
    tpot = (r.finish - r.first_token) / 3
    assert tpot == pytest.approx(0.01 + 102e-5)
    assert [c[2] for c in step.calls] == [100, 101, 102, 103]


def test_prefix_hit_then_miss_after_lru_eviction():
    # 20 usable blocks of 16 tokens
    e, step, _ = engine(blocks=21, mml=320, macro=False)
    a = mk(0, 100, 1, segs=(64, 36), hashes=(1, 2))
    drive(e, [a])
    b = mk(1, 114, 1, t=10.0, segs=(64, 50), hashes=(1, 3))
    assert e.match_tokens(b) == 64
    drive(e, [b])
    assert b.cached_tokens == 64 and step.calls[-1][0] == 50
    assert (e.prefix_cache_queries, e.prefix_cache_hits) == (214, 64)
    # free queue (least recently freed first): unit 2 (3 blocks), then b's units tail first: unit 3 (4), unit 1 (4);
    # plain free 9
    big = mk(2, 224, 1, t=20.0)  # 14 blocks: evicts unit 2 and unit 3, the shared unit 1 survives
    drive(e, [big])
    assert e.kv.units.keys() == {1, big.hashes[0]}
    assert e.match_tokens(a) == 64 and e.match_tokens(mk(3, 114, 1, segs=(64, 50), hashes=(1, 3))) == 64
    small = mk(4, 64, 1, t=30.0)  # 4 blocks, 2 plain free: evicts unit 1 (freed before big's unit)
    drive(e, [small])
    assert e.match_tokens(a) == 0
    assert e.kv.units.keys() == {big.hashes[0], small.hashes[0]}


def test_pinned_units_are_not_evicted():
    e, _, _ = engine(blocks=21, mml=320)
    hold = mk(0, 64, 40, segs=(64,), hashes=(1,))  # 4 blocks pinned while it decodes
    big = mk(1, 256, 1, t=0.5)  # 16 blocks: does not fit next to hold's 4 + tail
    drive(e, [hold, big], until=2.0)
    assert e.num_waiting == 1 and big.scheduled < 0
    assert e.match_tokens(mk(2, 64, 1, segs=(64,), hashes=(1,))) == 64
    e.advance(math.inf)
    assert big.status == 200 and big.scheduled >= hold.finish


@pytest.mark.parametrize(("caching", "usage"), [(True, [0.3, 0.4, 0.0]), (False, [0.3, 0.3, 0.0])])
def test_kv_usage_hand_computed(caching, usage):
    # 11 GPU blocks = 10 usable + vLLM's null block; prompt 40 -> 3 blocks; first decode writes position 40: a new
    # block in the segment-aligned layout (cached prompt unit), the same block when uncached (40 % 16 = 8)
    e, _, _ = engine(blocks=11, mml=160, enable_prefix_caching=caching)
    r = mk(0, 40, 3)
    e.add(r, 0.0)
    got = []
    for t in (0.5, 1.5):
        e.advance(t)
        got.append(round(e.kv_usage, 9))
    e.advance(math.inf)
    got.append(round(e.kv_usage, 9))
    assert got == usage
    assert e.match_tokens(r) == (40 if caching else 0)


@pytest.mark.parametrize(("policy", "victim"), [("fcfs", 1), ("priority", 0)])
def test_kv_full_preempts_newest_or_lowest_priority_and_recomputes(policy, victim):
    e, step, done = engine(blocks=11, mml=160, scheduling_policy=policy)
    low = mk(0, 32, 60, prio=-1)
    high = mk(1, 32, 60, t=0.5, prio=1)
    drive(e, [low, high])
    rs = [low, high]
    assert rs[victim].preemptions >= 1 and rs[1 - victim].preemptions == 0
    assert e.num_preemptions == rs[victim].preemptions
    assert all(r.status == 200 for r in rs) and len(done) == 2
    # the victim kept its first token time and recomputed prompt + generated tokens on resume, hitting its own
    # cached prompt unit
    assert rs[victim].first_token < rs[1 - victim].finish
    assert rs[victim].cached_tokens == 32
    fresh = sum(r.prompt_tokens + r.output_tokens - 1 for r in rs)
    assert e.tokens_computed > fresh - 32


def test_preempted_request_waits_at_the_head_and_counts_as_waiting():
    e, _, _ = engine(blocks=11, mml=160)
    a, b = mk(0, 32, 60), mk(1, 32, 60, t=0.5)
    drive(e, [a, b], until=1.0)
    seen = []
    t = 1.0
    while b.preemptions == 0:
        t += 1.0
        e.advance(t)
    seen.append((e.num_running, e.num_waiting))
    assert seen == [(1, 1)]


def test_lora_skip_when_max_loras_busy_and_load_time():
    e, step, _ = engine(enable_lora=True, max_loras=1, lora_load_time=0.5)
    r1, r2, r3 = mk(0, 10, 5, lora="a"), mk(1, 10, 3, lora="b"), mk(2, 10, 2, lora="a")
    for r in (r1, r2, r3):
        e.add(r, 0.0)
    e.advance(0.1)
    assert e.active_loras() == frozenset({"a"}) and e.waiting_loras() == frozenset({"b"})
    e.advance(math.inf)
    assert r3.scheduled == 0.0 and r1.first_token == 1.5  # adapter "a" loaded once for both
    assert r2.scheduled == max(r1.finish, r3.finish)
    assert r2.first_token == r2.scheduled + 1.5  # "b" loaded
    assert e.active_loras() == frozenset() and e.waiting_loras() == frozenset()


def test_max_model_len_rejection():
    e, _, done = engine(mml=400)
    bad, ok = mk(0, 350, 51), mk(1, 350, 50)
    e.add(bad, 0.0)
    assert bad.status == 400 and done == [bad] and e.num_waiting == 0 and e.rejected == 1
    msg = Engine.reject_message(bad, 400)
    assert "maximum context length is 400 tokens" in msg and "you requested 401 tokens" in msg
    e.add(ok, 0.0)
    e.advance(math.inf)
    assert ok.status == 200


def test_engine_refuses_a_cache_that_cannot_hold_max_model_len():
    with pytest.raises(ValueError):
        engine(blocks=10, mml=160)  # 9 usable blocks * 16 < 160


def test_idle_engine_starts_at_arrival_and_iterations_are_atomic():
    e, _, _ = engine()
    a = mk(0, 10, 3, t=5.0)
    drive(e, [a], until=5.0)
    assert a.scheduled == -1.0  # advance(t) runs iterations that start *before* t
    e.advance(5.01)
    assert a.scheduled == 5.0
    b = mk(1, 10, 1, t=5.5)  # arrives mid-iteration [5, 6): joins the iteration starting at 6
    drive(e, [b])
    assert b.scheduled == 6.0 and b.first_token == 7.0


def _workload(seed: int, n: int, *, lora: bool = False) -> list[Request]:
    rng = random.Random(seed)
    t = 0.0
    reqs = []
    for i in range(n):
        t += rng.expovariate(4.0)
        sys_id = rng.randrange(4)
        sys_len = 32 * (sys_id + 1)
        q = rng.randint(1, 150)
        out = rng.randint(1, 120)
        hashes = (sys_id + 1, 1_000_000 + i)
        reqs.append(mk(i, sys_len + q, out, t=t, segs=(sys_len, q), hashes=hashes,
                       lora=(f"l{rng.randrange(3)}" if lora and rng.random() < 0.5 else None),
                       prio=rng.choice((-1, 0, 1))))
    return reqs


def _run(seed: int, macro: bool, **kw) -> tuple[list[tuple], Engine, Lin]:
    step = Lin(c0=0.01, tok=2e-4, kv=1e-6, seq=1e-4, pair=1e-8)
    e, _, done = engine(step, blocks=kw.pop("blocks", 60), mml=600, budget=256, seqs=16, macro=macro, **kw)
    reqs = _workload(seed, 300, lora=kw.get("enable_lora", False))
    drive(e, reqs)
    assert len(done) == len(reqs) and all(r.status == 200 for r in reqs)
    return [(r.scheduled, r.first_token, r.finish, r.preemptions, r.cached_tokens) for r in reqs], e, step


@pytest.mark.parametrize("kw", [{}, {"scheduling_policy": "priority"},
                                {"enable_lora": True, "max_loras": 2, "lora_load_time": 0.05},
                                {"blocks": 400}])
def test_macro_steps_equal_single_steps(kw):
    fast, ef, sf = _run(7, True, **dict(kw))
    slow, es, ss = _run(7, False, **dict(kw))
    assert len(sf.calls) < ef.iterations  # macro steps did jump
    assert len(ss.calls) == es.iterations
    if kw.get("blocks") is None:
        assert es.num_preemptions > 0
    assert es.prefix_cache_hits > 0
    for a, b in zip(fast, slow, strict=True):
        assert a[3:] == b[3:]
        for x, y in zip(a[:3], b[:3], strict=True):
            assert x == pytest.approx(y, rel=1e-9)
    for f in ("iterations", "num_preemptions", "prefix_cache_queries", "prefix_cache_hits", "prompt_tokens_total",
              "generation_tokens_total", "tokens_computed"):
        assert getattr(ef, f) == getattr(es, f), f
    assert ef.busy_time == pytest.approx(es.busy_time, rel=1e-9)


def test_no_preemption_livelock_or_throughput_blowup_under_a_small_cache():
    """BLIS #297/#529/#963 (livelock) and #1121 (prefix cache + preemption inflating throughput): under a cache
    that holds only a few sequences every request still finishes, recomputation is charged, and throughput is no
    better than with ample KV."""
    _, small, _ = _run(3, True, blocks=40)
    _, large, _ = _run(3, True, blocks=4000)
    assert small.num_preemptions > 10 and large.num_preemptions == 0
    assert small.tokens_computed > large.tokens_computed
    tput = [e.generation_tokens_total / e.busy_time for e in (small, large)]
    assert tput[0] <= tput[1]


def test_abort_all_returns_unfinished_and_empties():
    e, _, _ = engine(seqs=1)
    rs = [mk(i, 10, 50) for i in range(3)]
    for r in rs:
        e.add(r, 0.0)
    e.advance(3.0)
    out = e.abort_all(3.0)
    assert [r.id for r in out] == [0, 1, 2]
    assert e.idle and e.num_running == 0 and e.num_waiting == 0 and e.kv_usage == 0.0
    assert e.match_tokens(rs[0]) == 0


@pytest.mark.parametrize(("cap", "late_lora", "gap"), [
    (2, "a", 1.0),  # "a" runs throughout: vLLM touches it every step, so loading "c" evicts the idle "b", not "a"
    (2, "b", 1.5),  # ... and "b" must be loaded again
    (3, "b", 1.0),  # room for all three: nothing is evicted
])
def test_lora_lru_never_evicts_a_running_adapter(cap, late_lora, gap):
    """vLLM's LRUCacheWorkerLoRAManager touches every adapter of the batch each step (add_adapter: "We always touch
    to update the LRU cache order"), so an adapter in use is never the least recently used one. Timeline (1 s steps,
    0.5 s per load): a, b admitted at 0 (2 loads, ends 2.0); b finishes 3.0; c admitted at 4.0 (ends 5.5), finishes
    6.5; the late request arrives at 7.0 and is scheduled at 7.5 while a still decodes."""
    e, _, _ = engine(enable_lora=True, max_loras=2, max_cpu_loras=cap, lora_load_time=0.5, macro=False)
    a, b = mk(0, 10, 20, lora="a"), mk(1, 10, 2, lora="b")
    c, late = mk(2, 10, 2, t=3.5, lora="c"), mk(3, 10, 1, t=7.0, lora=late_lora)
    drive(e, [a, b, c, late])
    assert (b.finish, c.scheduled, c.finish, late.scheduled) == (3.0, 4.0, 6.5, 7.5)
    assert late.first_token - late.scheduled == gap


@pytest.mark.parametrize(("caching", "queries", "hits"), [(True, 2 * 40, 32), (False, 0, 0)])
def test_prefix_cache_counters_only_with_caching(caching, queries, hits):
    """vLLM's get_computed_blocks returns before recording PrefixCacheStats when caching is off, so
    vllm:prefix_cache_queries stays 0; with caching on, the second request hits the first's 32-token segment."""
    e, _, _ = engine(enable_prefix_caching=caching)
    first = mk(0, 40, 1, segs=(32, 8), hashes=(1, 2))
    second = mk(1, 40, 1, t=5.0, segs=(32, 8), hashes=(1, 3))
    drive(e, [first, second])
    assert (e.prefix_cache_queries, e.prefix_cache_hits) == (queries, hits)

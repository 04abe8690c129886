"""One request's engine-side state and the decode aggregate of `serving.engine.Engine` (a mixin of it).

Kept apart from the scheduling loop because it is the engine's bookkeeping, not vLLM's policy: how a request's
tokens map onto KV blocks (segment-aligned layout, see `serving.kvcache`), and how requests in steady decode are held
in aggregate — a shared decode tick, per-phase counts of who needs a new block at which tick, a heap of finish ticks —
so an iteration costs O(prefilling requests), not O(batch). A request in the aggregate (st == _DEC) has c and e as of
decode tick t0; `_leave` makes it explicit again (st == _PRE) at the current tick.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from kubetwin.serving.kvcache import KVCache, Unit

if TYPE_CHECKING:
    from collections import OrderedDict, deque
    from collections.abc import Callable

    from kubetwin.serving.types import Request, StepModel

_WAIT, _PRE, _DEC, _DONE = 0, 1, 2, 3  # _Seq.st: waiting / running explicitly / running in the decode aggregate / gone


class _Seq:
    """Engine-side state of one request. In the decode aggregate (st == _DEC) c and e are as of decode tick t0."""

    __slots__ = ("req", "uid", "P", "out", "hashes", "segs", "nseg", "units", "k", "base", "dup", "tb", "c", "e",
                 "t0", "st", "gen", "lora", "key", "ph", "rpos")

    def __init__(self, req: Request, uid: int, nseg: int) -> None:
        self.req = req
        self.uid = uid
        self.P = req.prompt_tokens
        self.out = req.output_tokens
        self.hashes = req.hashes
        self.segs = req.seg_tokens
        self.nseg = nseg  # cacheable leading segments (0: no caching)
        self.units: list[Unit] = []  # cached units held, segment order
        self.k = 0  # segments laid out as units or duplicates
        self.base = 0  # tokens in those segments; the private tail starts here
        self.dup = 0  # private blocks of segments that were cached by someone else meanwhile
        self.tb = 0  # private tail blocks
        self.c = 0  # computed tokens
        self.e = 0  # emitted output tokens
        self.t0 = 0
        self.st = _WAIT
        self.gen = 0  # bumps when leaving the decode aggregate (invalidates finish-heap entries)
        self.lora = req.lora
        self.key = (-req.priority, req.arrival, uid)  # vLLM (priority, arrival_time) order
        self.ph = 0  # in the aggregate: it needs a new block at ticks == ph (mod block size)
        self.rpos = 0  # position in the running list: admissions append, so running order is rpos order


class EngineState:
    """The attributes `serving.engine.Engine` sets in __init__ and the methods its mixins call across modules,
    declared once so each mixin (DecodeAggregate here, engine_sched.Scheduler, engine_jump.MacroSteps) type-checks
    on its own; Engine's __slots__ holds the values."""

    __slots__ = ()
    bs: int
    kv: KVCache
    tick: int
    nD: int
    dsum: int
    phase: list[int]
    fheap: list[tuple[int, int, int, _Seq]]
    dlora: dict[str, int]
    run: dict[_Seq, None]
    pre: list[_Seq]
    order_ok: bool
    step: StepModel
    api_s: float
    lag: bool
    first_due: list[Request]
    budget: int
    max_seqs: int
    threshold: int
    prio: bool
    lora_on: bool
    max_loras: int
    now: float
    waiting: deque[_Seq] | list[tuple[tuple[int, float, int], _Seq]]
    run_lora: dict[str, int]
    busy_time: float
    iterations: int
    tokens_computed: int
    generation_tokens_total: int
    lora_cap: int
    lora_load_time: float
    on_finish: Callable[[Request], None] | None
    stuck: bool
    wait_lora: dict[str, int]
    loaded: OrderedDict[str, None]
    prefix_cache_queries: int
    prefix_cache_hits: int
    prompt_tokens_total: int
    num_preemptions: int
    finished: int
    rseq: int
    _finish: Callable[[_Seq, float], None]
    _waiting_order: Callable[[], list[_Seq]]
    _hit: Callable[[_Seq], tuple[list[Unit], int, int, int]]
    _need: Callable[[_Seq, int], tuple[int, int, int, int]]
    _pop_finished: Callable[[float], None]
    _apply: Callable[[_Seq, int, int, int, int], None]
    _release: Callable[[_Seq], None]
    _join: Callable[[_Seq], None]
    _leave: Callable[[_Seq], None]
    _rebuild: Callable[[], None]
    _due: Callable[[], list[_Seq]]
    _first_seen: Callable[[float], None]


class DecodeAggregate(EngineState):
    """KV layout of one request and the decode aggregate, over the attributes EngineState declares."""

    __slots__ = ()


    # ---------------------------------------------------------------- KV layout of one request
    def _need(self, s: _Seq, end: int) -> tuple[int, int, int, int]:
        """New blocks for s to hold tokens [0, end), and the layout after: (blocks, k, base, tail blocks)."""
        k, base, bs, segs = s.k, s.base, self.bs, s.segs
        blocks = 0
        while k < s.nseg and base + segs[k] <= end:
            blocks += -(-segs[k] // bs)
            base += segs[k]
            k += 1
        tail = end - base
        tb = -(-tail // bs) if tail > 0 else 0
        return blocks + tb - s.tb, k, base, tb

    def _apply(self, s: _Seq, n: int, k: int, base: int, tb: int) -> None:
        """Take n blocks for s and cache the segments it completes."""
        kv = self.kv
        kv.take(n)
        bs = self.bs
        for i in range(s.k, k):
            nb = -(-s.segs[i] // bs)
            u = kv.insert(s.hashes[i], nb)
            if u is None:
                s.dup += nb
            else:
                s.units.append(u)
        s.k, s.base, s.tb = k, base, tb

    def _release(self, s: _Seq) -> None:
        self.kv.release(s.units, s.dup + s.tb)
        s.units = []
        s.k = s.base = s.dup = s.tb = 0

    # ---------------------------------------------------------------- decode aggregate
    def _join(self, s: _Seq) -> None:
        """s (explicit, at an iteration boundary, in steady decode) joins the aggregate at the current tick."""
        T = self.tick
        s.st = _DEC
        s.t0 = T
        self.nD += 1
        self.dsum += s.c - T
        ph = s.ph = (T - s.c + s.base) % self.bs
        self.phase[ph] += 1
        heapq.heappush(self.fheap, (T + s.out - s.e, s.uid, s.gen, s))
        if s.lora is not None:
            self.dlora[s.lora] = self.dlora.get(s.lora, 0) + 1

    def _leave(self, s: _Seq) -> None:
        """s leaves the aggregate at an iteration boundary; its state becomes explicit."""
        T = self.tick
        self.nD -= 1
        self.dsum -= s.c - s.t0
        self.phase[s.ph] -= 1
        d = T - s.t0
        s.c += d
        s.e += d
        s.t0 = T
        tail = s.c - s.base
        s.tb = -(-tail // self.bs) if tail > 0 else 0
        s.gen += 1
        s.st = _PRE
        if s.lora is not None:
            n = self.dlora[s.lora] - 1
            if n:
                self.dlora[s.lora] = n
            else:
                del self.dlora[s.lora]

    def _rebuild(self) -> None:
        """After an exact step: every explicit running request in steady decode joins the aggregate; `pre` and
        `order_ok` are recomputed over the running order (aggregate members the exact step kept stay as they are)."""
        pre = []
        ok = True
        for s in self.run:
            if s.st == _DEC:
                if pre:
                    ok = False
            elif s.e >= 1 and s.c == s.P + s.e - 1:
                self._join(s)
                if pre:
                    ok = False
            else:
                pre.append(s)
        self.pre = pre
        self.order_ok = ok

    def _pop_finished(self, t: float) -> None:
        fh = self.fheap
        T = self.tick
        while fh and fh[0][0] <= T:
            _, _, gen, s = heapq.heappop(fh)
            if s.st == _DEC and s.gen == gen:
                self._finish(s, t)

    def _due(self) -> list[_Seq]:
        """Aggregate members whose last token came with the tick just taken (the exact path finishes them together
        with its explicit requests, in running order)."""
        fh = self.fheap
        T = self.tick
        out = []
        while fh and fh[0][0] <= T:
            _, _, gen, s = heapq.heappop(fh)
            if s.st == _DEC and s.gen == gen:
                out.append(s)
        return out

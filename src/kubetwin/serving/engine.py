"""One model-server pod's engine: a discrete-event model of vLLM V1's EngineCore + Scheduler, iteration by iteration.

Each iteration is one `Scheduler.schedule()` (vllm-project/vllm@00024d314514900f361ad072af6931e403b7f589:
vllm/v1/core/sched/scheduler.py) followed by one forward pass timed by a `StepModel`:
- token budget `max_num_batched_tokens`; running requests first, in order, each gets min(remaining, threshold, budget)
  tokens (decode = 1, chunked prefill otherwise); the loop stops when the budget is spent;
- a failed KV allocation preempts (recompute; V1 has no swap) the last running request, or under "priority" the one
  with the worst (priority, arrival) (`max(self.running, key=(priority, arrival_time))`), and retries; a preempted
  request goes to the front of the waiting queue with its computed tokens reset, and no waiting request is admitted
  in a step that preempted;
- then waiting requests in queue order while budget remains and len(running) < max_num_seqs: prefix-cache hit capped
  at num_tokens - 1 (kv_cache_manager.get_computed_blocks), allocation for the first chunk; admission stops at the first
  request that does not fit. V1 keeps no free-block watermark (KVCacheManager `watermark: float = 0.0`,
  vllm@003df2961dd8830c317a61f9745ccd557da9fa06:vllm/v1/core/kv_cache_manager.py; the scheduler passes none);
- a request whose LoRA is not among the step's scheduled adapters when max_loras are in use is skipped and keeps its
  place (skipped requests are put back at the head in order; request_queue.py FCFSRequestQueue.prepend_requests).

Priority sign: our Request.priority follows InferenceObjective (higher = more important); vLLM's lower value is served
first, so vLLM priority = -Request.priority.

KV cache and prefix cache: see `serving.kvcache` (segment-granular caching approximation of vLLM's 16-token blocks).

Speed: requests in steady decode are kept in aggregate (a shared decode tick, per-phase counts of who needs a new
block at which tick, a heap of finish ticks), so an iteration costs O(prefilling requests), not O(batch). When the batch
is decode-only and nothing waiting can be admitted, `advance` jumps k iterations in closed form (iteration times form
an arithmetic series via StepModel.decode_line). `macro_steps=False` single-steps and gives the same results.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict, deque
from collections.abc import Callable

from kubetwin.serving.kvcache import KVCache, Unit
from kubetwin.serving.types import EngineArgs, Request, StepModel

# vllm@7ded96b3c73f63400cdb048a73c34292ba862d99:vllm/entrypoints/openai/serving_engine.py `_validate_input` (HTTP 400)
MAX_CONTEXT_ERROR = (
    "This model's maximum context length is {max_model_len} tokens. However, you requested {total} tokens "
    "({prompt} in the messages, {output} in the completion). Please reduce the length of the messages or completion."
)

# Twin assumption: loading one LoRA adapter (rank <= 64, 7-8B base) from local disk into the CPU/GPU adapter cache.
# vLLM loads an adapter on first use (LRUCacheWorkerLoRAManager); no published latency to cite.
DEFAULT_LORA_LOAD_TIME = 0.05

_WAIT, _PRE, _DEC, _DONE = 0, 1, 2, 3  # _Seq.st: waiting / running explicitly / running in the decode aggregate / gone
_ADMIT, _FREE, _KV = 0, 1, 2  # what the waiting queue would do next step


class _Seq:
    """Engine-side state of one request. In the decode aggregate (st == _DEC) c and e are as of decode tick t0."""

    __slots__ = ("req", "uid", "P", "out", "hashes", "segs", "nseg", "units", "k", "base", "dup", "tb", "c", "e",
                 "t0", "st", "gen", "lora", "key")

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


class Engine:
    """One vLLM-like engine. The caller drives time: `advance(t)` then `add(req, t)`; metrics read as vLLM's scheduler
    stats after the last iteration."""

    __slots__ = (
        "name", "step", "max_model_len", "lora_load_time", "on_finish", "macro", "bs", "budget", "max_seqs",
        "threshold", "prio", "lora_on", "max_loras", "lora_cap", "kv", "now", "waiting", "run", "pre", "order_ok",
        "tick", "nD", "dsum", "phase", "fheap", "dlora", "run_lora", "wait_lora", "loaded", "uid", "stuck",
        "prefix_cache_queries", "prefix_cache_hits", "prompt_tokens_total", "generation_tokens_total",
        "num_preemptions", "busy_time", "iterations", "tokens_computed", "finished", "rejected",
    )

    def __init__(self, args: EngineArgs, step: StepModel, num_gpu_blocks: int, *, name: str = "",
                 max_model_len: int, lora_load_time: float = DEFAULT_LORA_LOAD_TIME,
                 on_finish: Callable[[Request], None] | None = None, macro_steps: bool = True) -> None:
        if not isinstance(args.max_num_seqs, int) or not isinstance(args.max_num_batched_tokens, int):
            raise ValueError("max_num_seqs / max_num_batched_tokens must be resolved to ints by the caller")
        self.name = name
        self.step = step
        self.max_model_len = max_model_len
        self.lora_load_time = lora_load_time
        self.on_finish = on_finish
        self.macro = macro_steps
        self.bs = args.block_size
        self.budget = args.max_num_batched_tokens
        self.max_seqs = args.max_num_seqs
        self.threshold = args.long_prefill_token_threshold
        self.prio = args.scheduling_policy == "priority"
        self.lora_on = args.enable_lora
        self.max_loras = args.max_loras
        # vLLM LoRAConfig: max_cpu_loras defaults to max_loras (vllm/config/lora.py). Adapters in this LRU are
        # loaded; others cost lora_load_time when first scheduled.
        self.lora_cap = args.max_cpu_loras or args.max_loras
        self.kv = KVCache(num_gpu_blocks, self.bs, args.enable_prefix_caching)
        if self.kv.usable * self.bs < max_model_len:
            # vLLM refuses to start when one max_model_len sequence cannot fit (kv_cache_utils check_enough_kv_cache
            # _memory); without it a lone request could be preempted forever.
            per_token = getattr(step, "kv_bytes_per_token_per_gpu", 0) or 0
            have = self.kv.usable * self.bs
            raise ValueError(  # vLLM's words (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory)
                f"To serve at least one request with the models's max seq len ({max_model_len}), "
                f"({max_model_len * per_token / 2**30:.2f} GiB KV cache is needed, which is larger than the available "
                f"KV cache memory ({have * per_token / 2**30:.2f} GiB). Based on the available memory, the estimated "
                f"maximum model length is {have}. Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine.")
        self.now = 0.0
        self.waiting: deque[_Seq] | list[tuple[tuple[int, float, int], _Seq]] = [] if self.prio else deque()
        self.run: dict[_Seq, None] = {}  # running, in vLLM's running-list order
        self.pre: list[_Seq] = []  # running requests handled explicitly, in running order
        self.order_ok = True  # every decode-aggregate request precedes every explicit one in running order
        self.tick = 0
        self.nD = 0
        self.dsum = 0  # sum of (c - t0) over the decode aggregate
        self.phase = [0] * self.bs  # phase[p]: aggregate members that need a new block at ticks == p (mod bs)
        self.fheap: list[tuple[int, int, int, _Seq]] = []  # (finish tick, uid, gen, seq)
        self.dlora: dict[str, int] = {}
        self.run_lora: dict[str, int] = {}
        self.wait_lora: dict[str, int] = {}
        self.loaded: OrderedDict[str, None] = OrderedDict()
        self.uid = 0
        self.stuck = False
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.num_preemptions = 0
        self.busy_time = 0.0
        self.iterations = 0
        self.tokens_computed = 0
        self.finished = 0
        self.rejected = 0

    # ---------------------------------------------------------------- metrics
    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.run)

    @property
    def kv_usage(self) -> float:
        return self.kv.usage()

    @property
    def num_gpu_blocks(self) -> int:
        return self.kv.num_gpu_blocks

    @property
    def block_size(self) -> int:
        return self.bs

    @property
    def idle(self) -> bool:
        return not self.run and not self.waiting

    @property
    def next_event_time(self) -> float:
        """Start of the next iteration, or inf when there is nothing to run."""
        return math.inf if (self.idle or self.stuck) else self.now

    def active_loras(self) -> frozenset[str]:
        return frozenset(self.run_lora)

    def waiting_loras(self) -> frozenset[str]:
        return frozenset(self.wait_lora)

    def match_tokens(self, req: Request) -> int:
        return self.kv.match_tokens(req.hashes, req.seg_tokens)

    @staticmethod
    def reject_message(req: Request, max_model_len: int) -> str:
        p, o = req.prompt_tokens, req.output_tokens
        return MAX_CONTEXT_ERROR.format(max_model_len=max_model_len, total=p + o, prompt=p, output=o)

    # ---------------------------------------------------------------- requests in and out
    def add(self, req: Request, t: float) -> None:
        """Request arrives at t (after advance(t)). Over-long requests are rejected at once (400, on_finish called)."""
        req.pod = self.name
        if req.prompt_tokens + req.output_tokens > self.max_model_len:
            req.status = 400
            req.reason = self.reject_message(req, self.max_model_len)
            req.finish = t
            self.rejected += 1
            if self.on_finish is not None:
                self.on_finish(req)
            return
        if req.output_tokens < 1 or req.prompt_tokens < 1:
            raise ValueError("prompt_tokens and output_tokens must be >= 1")
        if self.idle or self.stuck:
            self.now = max(self.now, t)
        self.stuck = False
        nseg = len(req.seg_tokens) if self.kv.caching else 0
        if nseg:
            bs = self.bs
            worst = sum(-(-s // bs) for s in req.seg_tokens) + -(-(req.output_tokens - 1) // bs)
            if worst > self.kv.usable:
                nseg = 0  # the block-aligned segment layout would not fit: serve it uncached rather than livelock
        s = _Seq(req, self.uid, nseg)
        self.uid += 1
        self._enqueue(s)
        if s.lora is not None:
            self.wait_lora[s.lora] = self.wait_lora.get(s.lora, 0) + 1

    def abort_all(self, t: float) -> list[Request]:
        """The pod is going away: return every unfinished request (running, then waiting) and empty the engine."""
        out = [s.req for s in self.run]
        out += [s.req for s in self._waiting_order()]
        for s in self.run:
            s.st = _DONE
        self.run.clear()
        self.pre.clear()
        self.waiting = [] if self.prio else deque()
        self.nD = self.dsum = 0
        self.phase = [0] * self.bs
        self.fheap.clear()
        self.dlora.clear()
        self.run_lora.clear()
        self.wait_lora.clear()
        self.order_ok = True
        self.kv.clear()
        self.now = max(self.now, t)
        self.stuck = False
        return out

    # ---------------------------------------------------------------- time
    def advance(self, t: float) -> None:
        """Run every iteration that starts before t (iterations are atomic)."""
        while self.now < t and (self.run or self.waiting) and not self.stuck:
            if self.macro and not self.pre and 0 < self.nD <= self.budget:
                k = self._jump_len(t)
                if k > 0:
                    self._jump(k)
                    continue
            self._iterate()

    # ---------------------------------------------------------------- waiting queue
    def _enqueue(self, s: _Seq) -> None:
        s.st = _WAIT
        if self.prio:
            heapq.heappush(self.waiting, (s.key, s))  # type: ignore[arg-type]
        else:
            self.waiting.append(s)  # type: ignore[union-attr]

    def _prepend(self, s: _Seq) -> None:
        s.st = _WAIT
        if self.prio:
            heapq.heappush(self.waiting, (s.key, s))  # type: ignore[arg-type]
        else:
            self.waiting.appendleft(s)  # type: ignore[union-attr]

    def _waiting_order(self) -> list[_Seq]:
        if self.prio:
            return [s for _, s in sorted(self.waiting, key=lambda x: x[0])]  # type: ignore[index]
        return list(self.waiting)  # type: ignore[arg-type]

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
        self.phase[(T - s.c + s.base) % self.bs] += 1
        heapq.heappush(self.fheap, (T + s.out - s.e, s.uid, s.gen, s))
        if s.lora is not None:
            self.dlora[s.lora] = self.dlora.get(s.lora, 0) + 1

    def _leave(self, s: _Seq) -> None:
        """s leaves the aggregate at an iteration boundary; its state becomes explicit."""
        T = self.tick
        self.nD -= 1
        self.dsum -= s.c - s.t0
        self.phase[(s.t0 - s.c + s.base) % self.bs] -= 1
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

    def _flatten(self) -> None:
        """Make every running request explicit (for the exact, order-sensitive scheduling path)."""
        if self.nD:
            for s in self.run:
                if s.st == _DEC:
                    self._leave(s)
        self.fheap.clear()
        self.pre = list(self.run)

    def _rebuild(self) -> None:
        """After an exact step: every running request in steady decode rejoins the aggregate."""
        pre = []
        ok = True
        for s in self.run:
            if s.st == _PRE and s.e >= 1 and s.c == s.P + s.e - 1:
                self._join(s)
                if pre:
                    ok = False
            elif s.st == _PRE:
                pre.append(s)
        self.pre = pre
        self.order_ok = ok

    # ---------------------------------------------------------------- one iteration
    def _iterate(self) -> None:
        start = self.now
        budget = self.budget
        kv = self.kv
        nD = self.nD
        fast = self.order_ok and nD <= budget
        sched: list[tuple[_Seq, int]] = []
        preempted = False
        if fast:
            nb = self.phase[self.tick % self.bs] if nD else 0
            b = budget - nD
            plan = []
            total = nb
            for s in self.pre:
                if b <= 0:
                    break
                x = s.P + s.e - s.c
                if 0 < self.threshold < x:
                    x = self.threshold
                if x > b:
                    x = b
                n, k, base, tb = self._need(s, s.c + x)
                plan.append((s, x, n, k, base, tb))
                total += n
                b -= x
            if total <= kv.available():
                if nb:
                    kv.take(nb)
                for s, x, n, k, base, tb in plan:
                    self._apply(s, n, k, base, tb)
                    sched.append((s, x))
                budget = b
            else:
                fast = False
        if not fast:
            self._flatten()
            nD = 0
            budget, preempted = self._exact_running(sched)
        loads = 0
        if not preempted:
            budget, loads = self._admit(budget, sched, fast and len(sched) == len(self.pre))
        # ---- the forward pass
        ntok = nD
        pairs = 0.0
        kvr = self.dsum + nD * self.tick + nD if nD else 0
        for s, x in sched:
            ntok += x
            if s.e == 0 or s.c != s.P + s.e - 1:  # a prefill chunk (an explicit decode adds no query-key pairs)
                pairs += x * (s.c + x * 0.5)
            kvr += s.c + x
        if ntok == 0:
            if not preempted:
                self.stuck = True  # nothing fits even in an empty batch: wait for the next arrival
            if not fast:
                self._rebuild()
            return
        dur = self.step.iteration_time(ntok, pairs, kvr, nD + len(sched)) + loads * self.lora_load_time
        end = start + dur
        self.now = end
        self.busy_time += dur
        self.iterations += 1
        self.tokens_computed += ntok
        if nD:
            self.tick += 1
            self.generation_tokens_total += nD
            self._pop_finished(end)
        for s, x in sched:
            if s.st != _PRE:
                continue
            s.c += x
            if s.c == s.P + s.e:
                s.e += 1
                self.generation_tokens_total += 1
                if s.req.first_token < 0:
                    s.req.first_token = end
                    self.prompt_tokens_total += s.P
                if s.e == s.out:
                    self._finish(s, end)
        if fast:
            pre = []
            seen = False
            for s in self.pre:
                if s.st == _PRE:
                    if s.e >= 1 and s.c == s.P + s.e - 1:
                        self._join(s)
                        if seen:
                            self.order_ok = False
                    else:
                        pre.append(s)
                        seen = True
            self.pre = pre
            if not pre:
                self.order_ok = True
        else:
            self._rebuild()

    def _exact_running(self, sched: list[tuple[_Seq, int]]) -> tuple[int, bool]:
        """vLLM's running loop with preemption, over explicit requests in running order."""
        budget = self.budget
        kv = self.kv
        run = self.run
        preempted = False
        xs: dict[_Seq, int] = {}
        for s in list(run):
            if budget <= 0:
                break
            if s not in run:
                continue  # preempted earlier in this loop
            x = s.P + s.e - s.c
            if 0 < self.threshold < x:
                x = self.threshold
            if x > budget:
                x = budget
            ok = False
            while True:
                n, k, base, tb = self._need(s, s.c + x)
                if n <= kv.available():
                    self._apply(s, n, k, base, tb)
                    ok = True
                    break
                if self.prio:
                    victim = max(run, key=lambda r: r.key)
                else:
                    victim = next(reversed(run))
                if victim in xs:
                    budget += xs.pop(victim)
                self._preempt(victim)
                preempted = True
                if victim is s:
                    break
            if not ok:
                break
            xs[s] = x
            budget -= x
        sched.extend(xs.items())
        return budget, preempted

    def _preempt(self, s: _Seq) -> None:
        del self.run[s]
        self._release(s)
        s.c = 0
        s.req.preemptions += 1
        self.num_preemptions += 1
        if s.lora is not None:
            self._lora_dec(self.run_lora, s.lora)
            self.wait_lora[s.lora] = self.wait_lora.get(s.lora, 0) + 1
        self._prepend(s)

    def _hit(self, s: _Seq) -> tuple[list[Unit], int, int, int]:
        """Prefix-cache hit for s: (units, computed tokens, k, base); at least one token is left to compute (capped
        hits are block-aligned, as vLLM's num_tokens - 1 cap on whole blocks)."""
        if not s.nseg:
            return [], 0, 0, 0
        hit = self.kv.lookup(s.hashes, s.nseg)
        base = sum(s.segs[: len(hit)])
        cap = s.P + s.e - 1
        c = base
        if c > cap:
            last = base - s.segs[len(hit) - 1]
            c = last + (cap - last) // self.bs * self.bs
        return hit, c, len(hit), base

    def _admit(self, budget: int, sched: list[tuple[_Seq, int]], all_sched: bool) -> tuple[int, int]:
        """vLLM's waiting loop. Returns (budget left, adapters loaded)."""
        waiting = self.waiting
        if not waiting or budget <= 0:
            return budget, 0
        kv = self.kv
        run = self.run
        loads = 0
        lset: set[str] | None = None
        if self.lora_on:
            if all_sched:
                lset = set(self.run_lora)
            else:
                lset = set(self.dlora)
                lset.update(s.lora for s, _ in sched if s.lora is not None)
        skipped: list = []
        start = self.now
        while waiting and budget > 0:
            if len(run) >= self.max_seqs:
                break
            item = waiting[0]
            s = item[1] if self.prio else item
            if lset is not None and s.lora is not None and len(lset) >= self.max_loras and s.lora not in lset:
                skipped.append(heapq.heappop(waiting) if self.prio else waiting.popleft())
                continue
            hit, c, k, base = self._hit(s)
            x = s.P + s.e - c
            if 0 < self.threshold < x:
                x = self.threshold
            if x > budget:
                x = budget
            s.k, s.base, s.c = k, base, c
            n, k2, base2, tb = self._need(s, c + x)
            ev = 0
            for u in hit:
                if u.ref == 0:
                    ev += u.blocks
            if n + ev > kv.available():
                s.k = s.base = s.c = 0
                break
            if self.prio:
                heapq.heappop(waiting)
            else:
                waiting.popleft()
            kv.touch(hit)
            s.units = hit
            self._apply(s, n, k2, base2, tb)
            req = s.req
            if req.preemptions == 0:
                self.prefix_cache_queries += s.P + s.e
                self.prefix_cache_hits += c
            req.cached_tokens = c
            if req.scheduled < 0:
                req.scheduled = start
            s.st = _PRE
            run[s] = None
            self.pre.append(s)
            if s.lora is not None:
                self._lora_dec(self.wait_lora, s.lora)
                self.run_lora[s.lora] = self.run_lora.get(s.lora, 0) + 1
                if lset is not None:
                    lset.add(s.lora)
                if s.lora in self.loaded:
                    self.loaded.move_to_end(s.lora)
                else:
                    loads += 1
                    self.loaded[s.lora] = None
                    if len(self.loaded) > self.lora_cap:
                        self.loaded.popitem(last=False)
            sched.append((s, x))
            budget -= x
        if skipped:
            if self.prio:
                for item in skipped:
                    heapq.heappush(waiting, item)
            else:
                waiting.extendleft(reversed(skipped))
        return budget, loads

    @staticmethod
    def _lora_dec(d: dict[str, int], lora: str) -> None:
        n = d[lora] - 1
        if n:
            d[lora] = n
        else:
            del d[lora]

    def _finish(self, s: _Seq, t: float) -> None:
        if s.st == _DEC:
            self._leave(s)
        del self.run[s]
        s.st = _DONE
        self._release(s)
        if s.lora is not None:
            self._lora_dec(self.run_lora, s.lora)
        req = s.req
        req.finish = t
        req.status = 200
        self.finished += 1
        if self.on_finish is not None:
            self.on_finish(req)

    def _pop_finished(self, t: float) -> None:
        fh = self.fheap
        T = self.tick
        while fh and fh[0][0] <= T:
            _, _, gen, s = heapq.heappop(fh)
            if s.st == _DEC and s.gen == gen:
                self._finish(s, t)

    # ---------------------------------------------------------------- macro steps
    def _would_admit(self) -> int:
        """What the waiting loop would do in the next decode-only step: _ADMIT, _FREE (nothing waiting can run, and
        evictions cannot change that) or _KV (the first candidate lacks KV blocks; holds while nothing is evicted)."""
        if not self.waiting or len(self.run) >= self.max_seqs or self.budget - self.nD <= 0:
            return _FREE
        lset = set(self.run_lora) if self.lora_on else None
        for s in (self._waiting_order() if (self.prio and lset is not None) else
                  ([self.waiting[0][1]] if self.prio else self.waiting)):  # type: ignore[index]
            if lset is not None and s.lora is not None and len(lset) >= self.max_loras and s.lora not in lset:
                continue
            hit, c, k, base = self._hit(s)
            x = s.P + s.e - c
            if 0 < self.threshold < x:
                x = self.threshold
            x = min(x, self.budget - self.nD)
            s.k, s.base = k, base
            n = self._need(s, c + x)[0]
            s.k = s.base = 0
            ev = sum(u.blocks for u in hit if u.ref == 0)
            return _ADMIT if n + ev <= self.kv.available() else _KV
        return _FREE

    def _jump_len(self, t: float) -> int:
        """How many decode-only iterations can be taken in closed form from now (0: single-step instead)."""
        state = self._would_admit()
        if state == _ADMIT:
            return 0
        fh = self.fheap
        while fh and not (fh[0][3].st == _DEC and fh[0][3].gen == fh[0][2]):
            heapq.heappop(fh)
        T = self.tick
        k = fh[0][0] - T
        nD = self.nD
        bs = self.bs
        phase = self.phase
        limit = self.kv.free if state == _KV else self.kv.available()
        # block limit: every bs ticks the aggregate needs nD blocks
        cycles = limit // nD
        if cycles * bs < k:
            rem = limit - cycles * nD
            j = 0
            while j < bs and phase[(T + j) % bs] <= rem:
                rem -= phase[(T + j) % bs]
                j += 1
            k = min(k, cycles * bs + j)
        if k <= 0 or t == math.inf:
            return k
        a, b = self.step.decode_line(nD)
        A = a + b * (self.dsum + nD * T + nD)
        D = b * nD
        H = t - self.now
        # largest m with S(m) = m*A + D*m*(m-1)/2 < H; iterations 0..m start before t
        if D > 0:
            q = A - D * 0.5
            m = int((-q + math.sqrt(q * q + 2.0 * D * H)) / D)
        else:
            m = int(H / A)
        while m > 0 and m * A + D * m * (m - 1) * 0.5 >= H:
            m -= 1
        while (m + 1) * A + D * (m + 1) * m * 0.5 < H:
            m += 1
        return min(k, m + 1)

    def _jump(self, k: int) -> None:
        nD = self.nD
        T = self.tick
        bs = self.bs
        need = (k // bs) * nD
        for j in range(k % bs):
            need += self.phase[(T + j) % bs]
        self.kv.take(need)
        a, b = self.step.decode_line(nD)
        A = a + b * (self.dsum + nD * T + nD)
        dur = k * A + b * nD * k * (k - 1) * 0.5
        self.now += dur
        self.busy_time += dur
        self.iterations += k
        self.tokens_computed += nD * k
        self.generation_tokens_total += nD * k
        self.tick = T + k
        self._pop_finished(self.now)

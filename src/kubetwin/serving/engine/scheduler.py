"""vLLM V1's Scheduler (vllm/v1/core/sched/scheduler.py) for one engine: `schedule()` — the running loop with
preemption, the waiting loop with prefix-cache hits and LoRA slots — and `update_from_output()` after the forward pass.

This is the part that mirrors vLLM's policy line by line; see core.py's docstring for the rules it follows. Two
paths: the fast one, when every decode-aggregate request precedes every explicit one in running order and the whole
running set fits the token budget and the free blocks (nobody is preempted, so order cannot matter); the exact one
otherwise, which walks the running list in order and preempts as vLLM does.

Collaborators: `waiting` (request_queue), `decode` (decode.DecodeAggregate, the running requests in steady
decode), `kv_manager` (kv_cache_manager.KVCacheManager). The engine core (core.Engine) calls add_request, schedule
(an output.SchedulerOutput), update_from_output and abort_all; the macro steps (macro_steps) read the queue, the
aggregate and the LoRA sets and call first_seen and finish_due.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from kubetwin.serving.engine.block_pool import KVCache
from kubetwin.serving.engine.decode import DecodeAggregate
from kubetwin.serving.engine.kv_cache_manager import KVCacheManager
from kubetwin.serving.engine.output import SchedulerOutput
from kubetwin.serving.engine.request import DECODING, FINISHED, RUNNING, WAITING, EngineRequest
from kubetwin.serving.engine.request_queue import create_request_queue
from kubetwin.serving.types import EngineArgs, Request


def _key(s: EngineRequest) -> tuple[int, float, int]:
    return s.key


def _rpos(s: EngineRequest) -> int:
    return s.rpos


class Scheduler:
    """Waiting and running requests, preemption, admission, LoRA slots, and the engine's request counters."""

    __slots__ = (
        "budget", "max_seqs", "threshold", "prio", "lora_on", "max_loras", "lora_cap", "block_size", "kv",
        "kv_manager", "waiting", "running", "explicit", "order_ok", "decode", "run_lora", "wait_lora", "loaded",
        "rseq", "api_s", "lag", "first_due", "on_finish", "prefix_cache_queries", "prefix_cache_hits",
        "prompt_tokens_total", "generation_tokens_total", "num_preemptions", "finished", "inflight", "aggregate",
    )

    def __init__(self, args: EngineArgs, kv: KVCache, *, api_s: float, lag: bool,
                 on_finish: Callable[[Request], None] | None, pipelined: bool = False) -> None:
        assert isinstance(args.max_num_seqs, int) and isinstance(args.max_num_batched_tokens, int)
        self.budget = args.max_num_batched_tokens
        self.max_seqs = args.max_num_seqs
        self.threshold = args.long_prefill_token_threshold
        self.prio = args.scheduling_policy == "priority"
        self.lora_on = args.enable_lora
        self.max_loras = args.max_loras
        # vLLM LoRAConfig: max_cpu_loras defaults to max_loras (vllm/config/lora.py). Adapters in this LRU are
        # loaded; others cost the engine's lora_load_time when first scheduled.
        self.lora_cap = args.max_cpu_loras or args.max_loras
        self.block_size = args.block_size
        self.kv = kv
        self.kv_manager = KVCacheManager(kv)
        self.waiting = create_request_queue(self.prio)
        self.running: dict[EngineRequest, None] = {}  # vLLM's running list, in order
        self.explicit: list[EngineRequest] = []  # running requests not in the decode aggregate, in running order
        self.order_ok = True  # every decode-aggregate request precedes every explicit one in running order
        self.decode = DecodeAggregate(args.block_size)
        self.run_lora: dict[str, int] = {}
        self.wait_lora: dict[str, int] = {}
        self.loaded: OrderedDict[str, None] = OrderedDict()
        self.rseq = 0  # next running-list position (EngineRequest.rpos)
        # the API server's share of every streamed token's latency (serving.perf Calibration.request_overhead_s):
        # the client sees the first and the last token this long after the engine step that produced them
        self.api_s = api_s
        # StepModel.first_token_lag: the client sees a request's first token one iteration after the engine made it
        # (first_seen); first_due holds the requests whose first token came with the last iteration
        self.lag = lag
        self.first_due: list[Request] = []
        self.on_finish = on_finish
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.num_preemptions = 0
        self.finished = 0
        # Pipeline parallelism (engine.Engine with pp > 1): the requests of the batches in flight. vLLM skips them in
        # schedule() ("num_new_tokens == 0 ... PP>1 and we have already scheduled all prompt tokens but they are not
        # finished yet", vllm@00024d31:vllm/v1/core/sched/scheduler.py); a pipelined scheduler keeps every running
        # request explicit (no decode aggregate), since requests in different batches advance at different times.
        self.inflight: dict[EngineRequest, int] = {}  # -> the batch it is in flight with
        self.aggregate = not pipelined

    # ---------------------------------------------------------------- requests in and out
    def add_request(self, s: EngineRequest) -> None:
        s.status = WAITING
        self.waiting.add_request(s)
        if s.lora is not None:
            self.wait_lora[s.lora] = self.wait_lora.get(s.lora, 0) + 1

    def abort_all(self) -> list[Request]:
        """vLLM's finish_requests(every id, FINISHED_ABORTED): every unfinished request (running, then waiting),
        and the scheduler empty."""
        out = [s.req for s in self.running]
        out += [s.req for s in self.waiting]
        for s in self.running:
            s.status = FINISHED
        self.running.clear()
        self.explicit.clear()
        self.waiting.clear()
        self.decode.clear()
        self.run_lora.clear()
        self.wait_lora.clear()
        self.order_ok = True
        self.kv.clear()
        return out

    # ---------------------------------------------------------------- schedule()
    def schedule(self, now: float) -> SchedulerOutput:
        """The next iteration's batch; `now` is its start (a request's first scheduling time)."""
        budget = self.budget
        kv = self.kv
        decode = self.decode
        nD = decode.num
        fast = self.order_ok and nD <= budget
        sched: list[tuple[EngineRequest, int]] = []
        preempted = False
        if fast:
            nb = decode.phase[decode.tick % self.block_size] if nD else 0
            b = budget - nD
            plan = []
            total = nb
            kvm = self.kv_manager
            infl = self.inflight
            for s in self.explicit:
                if b <= 0:
                    break
                if infl and s in infl:
                    continue
                x = s.P + s.e - s.c
                if 0 < self.threshold < x:
                    x = self.threshold
                if x > b:
                    x = b
                n, k, base, tb = kvm.blocks_needed(s, s.c + x)
                plan.append((s, x, n, k, base, tb))
                total += n
                b -= x
            if total <= kv.free + kv.evictable:  # kv.available(), inlined: once per iteration
                if nb:
                    kv.take(nb)
                for s, x, n, k, base, tb in plan:
                    kvm.allocate(s, n, k, base, tb)
                    sched.append((s, x))
                budget = b
            else:
                fast = False
        if not fast:
            budget, preempted = self._schedule_running(sched)
            nD = decode.num  # the aggregate members left are exactly those scheduled
        loads = 0
        if not preempted:
            budget, loads = self._schedule_waiting(budget, sched, now, fast and len(sched) == len(self.explicit))
        ntok = nD
        pairs = 0.0
        kvr = decode.dsum + nD * decode.tick + nD if nD else 0
        for s, x in sched:
            ntok += x
            if s.e == 0 or s.c != s.P + s.e - 1:  # a prefill chunk (an explicit decode adds no query-key pairs)
                pairs += x * (s.c + x * 0.5)
            kvr += s.c + x
        return SchedulerOutput(sched, nD, fast, preempted, loads, ntok, pairs, kvr)

    def _schedule_running(self, sched: list[tuple[EngineRequest, int]]) -> tuple[int, bool]:
        """vLLM's running loop with preemption, in running order. Decode-aggregate members stay in the aggregate: each
        takes 1 token and a block when its phase is due (what `blocks_needed` gives an explicit decode), so the loop
        costs a few operations per member instead of a leave and a rejoin; a preempted member leaves first (its blocks
        taken this step are added back to its tail), and members the loop did not reach leave at the end, so that
        every member left is scheduled this step. Explicit requests go to `sched`."""
        budget = self.budget
        kv = self.kv
        need = self.kv_manager.blocks_needed
        allocate = self.kv_manager.allocate
        decode = self.decode
        run = self.running
        due = decode.tick % self.block_size
        preempted = False
        xs: dict[EngineRequest, int] = {}
        took: dict[EngineRequest, int] = {}  # aggregate members scheduled: blocks taken
        order = list(run)
        infl = self.inflight
        i = 0
        for i, s in enumerate(order):  # noqa: B007 (i is read after the loop)
            if budget <= 0:
                break
            if s not in run:
                continue  # preempted earlier in this loop
            if infl and s in infl:
                continue  # in a batch in flight (pipeline parallelism): vLLM's num_new_tokens == 0
            dec = s.status == DECODING
            if dec:
                x = 1
            else:
                x = s.P + s.e - s.c
                if 0 < self.threshold < x:
                    x = self.threshold
                if x > budget:
                    x = budget
            ok = False
            while True:
                if dec:
                    n = 1 if s.ph == due else 0
                    if n <= kv.free + kv.evictable:
                        if n:
                            kv.take(n)
                        ok = True
                        break
                else:
                    n, k, base, tb = need(s, s.c + x)
                    if n <= kv.free + kv.evictable:
                        allocate(s, n, k, base, tb)
                        ok = True
                        break
                if self.prio:
                    victim = max(run, key=_key)
                else:
                    victim = next(reversed(run))
                if victim in xs:
                    budget += xs.pop(victim)
                if victim.status == DECODING:
                    decode.leave(victim)
                    if victim in took:
                        budget += 1
                        victim.tb += took.pop(victim)
                self._preempt(victim)
                preempted = True
                if victim is s:
                    break
            if not ok:
                break
            if dec:
                took[s] = n
            else:
                xs[s] = x
            budget -= x
        else:
            i = len(order)
        for s in order[i:]:
            if s.status == DECODING:
                decode.leave(s)  # not scheduled this step: the aggregate's tick would advance it
        sched.extend(xs.items())
        return budget, preempted

    def _preempt(self, s: EngineRequest) -> None:
        del self.running[s]
        if not self.aggregate and s in self.explicit:
            # pipelined: other batches' outputs come back (and may re-admit it) before this exact step's _rebuild
            self.explicit.remove(s)
        self.kv_manager.free(s)
        s.c = 0
        s.req.preemptions += 1
        self.num_preemptions += 1
        if s.lora is not None:
            self._run_lora_dec(s.lora)
            self.wait_lora[s.lora] = self.wait_lora.get(s.lora, 0) + 1
        s.status = WAITING
        self.waiting.prepend_request(s)

    def _schedule_waiting(self, budget: int, sched: list[tuple[EngineRequest, int]], now: float,
                          all_sched: bool) -> tuple[int, int]:
        """vLLM's waiting loop. Returns (budget left, adapters loaded)."""
        waiting = self.waiting
        if not waiting or budget <= 0:
            return budget, 0
        kv = self.kv
        kvm = self.kv_manager
        run = self.running
        loads = 0
        lset: set[str] | None = None
        if self.lora_on:
            if all_sched:
                lset = set(self.run_lora)
            else:
                lset = set(self.decode.loras)
                lset.update(s.lora for s, _ in sched if s.lora is not None)
        skipped: list[EngineRequest] = []
        while waiting and budget > 0:
            if len(run) >= self.max_seqs:
                break
            s = waiting.peek_request()
            if lset is not None and s.lora is not None and len(lset) >= self.max_loras and s.lora not in lset:
                skipped.append(waiting.pop_request())
                continue
            hit, c, k, base = kvm.get_computed_blocks(s)
            x = s.P + s.e - c
            if 0 < self.threshold < x:
                x = self.threshold
            if x > budget:
                x = budget
            s.k, s.base, s.c = k, base, c
            n, k2, base2, tb = kvm.blocks_needed(s, c + x)
            ev = 0
            for u in hit:
                if u.ref == 0:
                    ev += u.blocks
            if n + ev > kv.free + kv.evictable:  # kv.available()
                s.k = s.base = s.c = 0
                break
            waiting.pop_request()
            kv.touch(hit)
            s.units = hit
            kvm.allocate(s, n, k2, base2, tb)
            req = s.req
            if req.preemptions == 0 and kv.caching:  # get_computed_blocks records no stats when caching is off
                self.prefix_cache_queries += s.P + s.e
                self.prefix_cache_hits += c
            req.cached_tokens = c
            if req.scheduled < 0:
                req.scheduled = now
            s.status = RUNNING
            s.rpos = self.rseq
            self.rseq += 1
            run[s] = None
            self.explicit.append(s)
            if s.lora is not None:
                self._lora_dec(self.wait_lora, s.lora)
                self.run_lora[s.lora] = self.run_lora.get(s.lora, 0) + 1
                if lset is not None:
                    lset.add(s.lora)
                if s.lora in self.loaded:
                    self.loaded.move_to_end(s.lora)
                else:
                    loads += 1
                    self._load(s.lora)
            sched.append((s, x))
            budget -= x
        if skipped:
            waiting.prepend_requests(skipped)
        return budget, loads

    # ---------------------------------------------------------------- update_from_output()
    def update_from_output(self, scheduled: list[tuple[EngineRequest, int]], nD: int, fast: bool,
                           end: float | None) -> None:
        """After the forward pass of schedule()'s batch (its SchedulerOutput's first three fields) that ended at
        `end` (None: the batch was empty and nothing ran): tokens computed and emitted, first tokens, finished
        requests, and the decode aggregate rebuilt for the next step."""
        if end is None:
            if not fast:
                self._rebuild()
            return
        if self.first_due:
            self.first_seen(end)
        decode = self.decode
        done: list[EngineRequest] = []  # exact path: finish in running order, as vLLM's update_from_output walks
        if nD:
            decode.tick += 1
            self.generation_tokens_total += nD
            if fast:
                fh = decode.fheap
                if fh and fh[0][0] <= decode.tick:  # most ticks finish nobody
                    self.finish_due(end)
            else:
                done = decode.due()
        for s, x in scheduled:
            if s.status != RUNNING:
                continue
            s.c += x
            if s.c == s.P + s.e:
                s.e += 1
                self.generation_tokens_total += 1
                if s.req.first_token < 0:
                    if self.lag:  # the engine's time for now; the client's is set one iteration later
                        s.req.first_token = end
                        self.first_due.append(s.req)
                    else:
                        s.req.first_token = end + self.api_s
                    self.prompt_tokens_total += s.P
                if s.e == s.out:
                    if fast:
                        self._finish(s, end)
                    else:
                        done.append(s)
        if done:
            done.sort(key=_rpos)
            for s in done:
                self._finish(s, end)
        if fast:
            explicit: list[EngineRequest] = []
            seen = False
            agg = self.aggregate
            for s in self.explicit:
                if s.status == RUNNING:
                    if agg and s.e >= 1 and s.c == s.P + s.e - 1:
                        decode.join(s)
                        if seen:
                            self.order_ok = False
                    else:
                        explicit.append(s)
                        seen = True
            self.explicit = explicit
            if not explicit:
                self.order_ok = True
        else:
            self._rebuild()

    def _rebuild(self) -> None:
        """After an exact step: every explicit running request in steady decode joins the aggregate; `explicit` and
        `order_ok` are recomputed over the running order (aggregate members the exact step kept stay as they are)."""
        explicit: list[EngineRequest] = []
        ok = True
        decode = self.decode
        agg = self.aggregate
        for s in self.running:
            if s.status == DECODING:
                if explicit:
                    ok = False
            elif agg and s.e >= 1 and s.c == s.P + s.e - 1:
                decode.join(s)
                if explicit:
                    ok = False
            else:
                explicit.append(s)
        self.explicit = explicit
        self.order_ok = ok

    def finish_due(self, t: float) -> None:
        """Finish the aggregate members whose last token came with the tick just taken, at t."""
        decode = self.decode
        fh = decode.fheap
        if fh and fh[0][0] <= decode.tick:  # most ticks finish nobody
            for s in decode.due():
                self._finish(s, t)

    def first_seen(self, end: float) -> None:
        """The client's first token, for the requests whose prefill finished in the previous iteration: one
        iteration after the engine produced it, plus the API server's path (Calibration.request_overhead_s).
        Twin assumption, fitted on the measured runs (benchmarks/e2e): at low load every measured TTFT exceeds
        the engine's prefill completion by about one iteration plus ~10 ms, for all four models and TP degrees;
        vLLM's streamed completions hold back text the incremental detokenizer cannot yet emit, and the output
        of an iteration is processed while the next one runs."""
        for req in self.first_due:
            if req.status != 200:  # finished requests already carry their client-side times
                req.first_token = end + self.api_s
        self.first_due = []

    def _finish(self, s: EngineRequest, t: float) -> None:
        if s.status == DECODING:
            self.decode.leave(s)
        del self.running[s]
        s.status = FINISHED
        self.kv_manager.free(s)
        if s.lora is not None:
            self._run_lora_dec(s.lora)
        req = s.req
        req.finish = t + self.api_s
        if req.first_token == t:  # a one-token answer: its only token is also its last
            req.first_token = req.finish
        req.status = 200
        self.finished += 1
        if self.on_finish is not None:
            self.on_finish(req)

    # ---------------------------------------------------------------- LoRA slots
    def _load(self, lora: str) -> None:
        """Load an adapter into the LRU, evicting the least recently used one that no running request holds: vLLM
        touches every adapter of the batch each step (LRUCacheWorkerLoRAManager add_adapter), so one in use is never
        the oldest. Only when all are in use (more adapters running than max_cpu_loras) does the oldest go."""
        loaded = self.loaded
        loaded[lora] = None
        if len(loaded) > self.lora_cap:
            victim = next((x for x in loaded if x not in self.run_lora), None)
            if victim is None:
                loaded.popitem(last=False)
            else:
                del loaded[victim]

    def _run_lora_dec(self, lora: str) -> None:
        """A running request of `lora` leaves the batch; when it was the last, the adapter's last use is now."""
        self._lora_dec(self.run_lora, lora)
        if lora not in self.run_lora and lora in self.loaded:
            self.loaded.move_to_end(lora)

    @staticmethod
    def _lora_dec(d: dict[str, int], lora: str) -> None:
        n = d[lora] - 1
        if n:
            d[lora] = n
        else:
            del d[lora]

"""One engine iteration of `serving.engine.Engine` (a mixin of it): vLLM V1's `Scheduler.schedule()` — the running
loop with preemption, the waiting loop with prefix-cache hits and LoRA slots — and the forward pass that follows.

Kept apart from `engine.py` (the public Engine and its time loop) because this is the part that mirrors vLLM's
policy line by line (vllm/v1/core/sched/scheduler.py); see engine.py's docstring for the rules it follows.

Two paths: the fast one, when every decode-aggregate request precedes every explicit one in running order and the
whole running set fits the token budget and the free blocks (nobody is preempted, so order cannot matter); the exact
one otherwise, which walks the running list in order and preempts as vLLM does.
"""

from __future__ import annotations

import heapq

from kubetwin.serving.engine_seq import _DEC, _DONE, _PRE, _WAIT, EngineState, _Seq
from kubetwin.serving.kvcache import Unit


def _key(s: _Seq) -> tuple[int, float, int]:
    return s.key


def _rpos(s: _Seq) -> int:
    return s.rpos


class Scheduler(EngineState):
    """Scheduling, preemption, admission and the forward pass, over the attributes EngineState declares."""

    __slots__ = ()

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
            budget, preempted = self._exact_running(sched)
            nD = self.nD  # the aggregate members left are exactly those scheduled
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
        if self.first_due:
            self._first_seen(end)
        self.busy_time += dur
        self.iterations += 1
        self.tokens_computed += ntok
        done: list[_Seq] = []  # exact path: finish in running order, as vLLM's update_from_output walks the batch
        if nD:
            self.tick += 1
            self.generation_tokens_total += nD
            if fast:
                self._pop_finished(end)
            else:
                done = self._due()
        for s, x in sched:
            if s.st != _PRE:
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
        """vLLM's running loop with preemption, in running order. Decode-aggregate members stay in the aggregate: each
        takes 1 token and a block when its phase is due (what `_need` gives an explicit decode), so the loop costs a
        few operations per member instead of a leave and a rejoin; a preempted member leaves first (its blocks taken
        this step are added back to its tail), and members the loop did not reach leave at the end, so that every
        member left is scheduled this step. Explicit requests go to `sched`."""
        budget = self.budget
        kv = self.kv
        run = self.run
        due = self.tick % self.bs
        preempted = False
        xs: dict[_Seq, int] = {}
        took: dict[_Seq, int] = {}  # aggregate members scheduled: blocks taken
        order = list(run)
        i = 0
        for i, s in enumerate(order):  # noqa: B007 (i is read after the loop)
            if budget <= 0:
                break
            if s not in run:
                continue  # preempted earlier in this loop
            dec = s.st == _DEC
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
                    n, k, base, tb = self._need(s, s.c + x)
                    if n <= kv.free + kv.evictable:
                        self._apply(s, n, k, base, tb)
                        ok = True
                        break
                if self.prio:
                    victim = max(run, key=_key)
                else:
                    victim = next(reversed(run))
                if victim in xs:
                    budget += xs.pop(victim)
                if victim.st == _DEC:
                    self._leave(victim)
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
            if s.st == _DEC:
                self._leave(s)  # not scheduled this step: the aggregate's tick would advance it
        sched.extend(xs.items())
        return budget, preempted

    def _preempt(self, s: _Seq) -> None:
        del self.run[s]
        self._release(s)
        s.c = 0
        s.req.preemptions += 1
        self.num_preemptions += 1
        if s.lora is not None:
            self._run_lora_dec(s.lora)
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
            if req.preemptions == 0 and self.kv.caching:  # get_computed_blocks records no stats when caching is off
                self.prefix_cache_queries += s.P + s.e
                self.prefix_cache_hits += c
            req.cached_tokens = c
            if req.scheduled < 0:
                req.scheduled = start
            s.st = _PRE
            s.rpos = self.rseq
            self.rseq += 1
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
                    self._load(s.lora)
            sched.append((s, x))
            budget -= x
        if skipped:
            if self.prio:
                for item in skipped:
                    heapq.heappush(waiting, item)
            else:
                waiting.extendleft(reversed(skipped))
        return budget, loads

    # ---------------------------------------------------------------- LoRA slots and finishing
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

    def _first_seen(self, end: float) -> None:
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

    def _finish(self, s: _Seq, t: float) -> None:
        if s.st == _DEC:
            self._leave(s)
        del self.run[s]
        s.st = _DONE
        self._release(s)
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

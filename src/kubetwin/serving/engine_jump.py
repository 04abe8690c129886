"""Closed-form macro steps of `serving.engine.Engine` (a mixin of it): when the batch is decode-only and nothing
waiting can be admitted, `advance` jumps k iterations at once.

Why it is exact: with no prefill in the batch, iteration i of a decode-only run reads C0 + i*nD context tokens, so its
time is a + b*(C0 + i*nD) (StepModel.decode_line) and the k iterations form an arithmetic series; the aggregate's
block needs repeat every block_size ticks (its per-phase counts). k stops at the first finish (which frees blocks and
may let a waiting request in), before the blocks run out (where single steps would preempt), and after the last
iteration that starts before the caller's horizon t. `macro_steps=False` single-steps and gives the same results up to
float rounding of the summed durations.
"""

from __future__ import annotations

import heapq
import math

from kubetwin.serving.engine_seq import _DEC, EngineState

_ADMIT, _FREE, _KV = 0, 1, 2  # what the waiting queue would do next step


class MacroSteps(EngineState):
    """Decode-only jumps, over the attributes EngineState declares."""

    __slots__ = ()

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
        if self.first_due:
            self._first_seen(self.now + A)  # the first of the k iterations
        dur = k * A + b * nD * k * (k - 1) * 0.5
        self.now += dur
        self.busy_time += dur
        self.iterations += k
        self.tokens_computed += nD * k
        self.generation_tokens_total += nD * k
        self.tick = T + k
        self._pop_finished(self.now)

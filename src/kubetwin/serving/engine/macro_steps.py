"""Closed-form macro steps: when the batch is decode-only and nothing waiting can be admitted, the engine jumps k
iterations at once.

Why it is exact: with no prefill in the batch, iteration i of a decode-only run reads C0 + i*nD context tokens, so its
time is a + b*(C0 + i*nD) (StepModel.decode_line) and the k iterations form an arithmetic series; the aggregate's
block needs repeat every block_size ticks (its per-phase counts). k stops at the first finish (which frees blocks and
may let a waiting request in), before the blocks run out (where single steps would preempt), and after the last
iteration that starts before the caller's horizon t. `macro_steps=False` single-steps and gives the same results up to
float rounding of the summed durations.
"""

from __future__ import annotations

import math

from kubetwin.serving.engine.scheduler import Scheduler
from kubetwin.serving.types import StepModel

_ADMIT, _FREE, _KV = 0, 1, 2  # what the waiting queue would do next step


class MacroSteps:
    """Reads the scheduler's waiting queue, running LoRA set and decode aggregate and the KV cache; `jump` changes
    the KV cache, the aggregate's tick, the scheduler's token counter and finishes the members that are done."""

    __slots__ = ("sched", "step", "waiting", "decode", "kv", "kv_manager")

    def __init__(self, sched: Scheduler, step: StepModel) -> None:
        self.sched = sched
        self.step = step
        # the scheduler's collaborators, which live as long as it does (read here without the extra hop)
        self.waiting = sched.waiting
        self.decode = sched.decode
        self.kv = sched.kv
        self.kv_manager = sched.kv_manager

    def _would_admit(self) -> int:
        """What the waiting loop would do in the next decode-only step: _ADMIT, _FREE (nothing waiting can run, and
        evictions cannot change that) or _KV (the first candidate lacks KV blocks; holds while nothing is evicted)."""
        sc = self.sched
        waiting = self.waiting
        free_budget = sc.budget - self.decode.num
        if not waiting or len(sc.running) >= sc.max_seqs or free_budget <= 0:
            return _FREE
        lset = set(sc.run_lora) if sc.lora_on else None
        kvm = self.kv_manager
        # without LoRA limits nothing is skipped: the head decides (a FCFS queue's iteration starts with it)
        for s in (waiting if (lset is not None or not sc.prio) else (waiting.peek_request(),)):
            if lset is not None and s.lora is not None and len(lset) >= sc.max_loras and s.lora not in lset:
                continue
            hit, c, k, base = kvm.get_computed_blocks(s)
            x = s.P + s.e - c
            if 0 < sc.threshold < x:
                x = sc.threshold
            x = min(x, free_budget)
            s.k, s.base = k, base
            n = kvm.blocks_needed(s, c + x)[0]
            s.k = s.base = 0
            ev = sum(u.blocks for u in hit if u.ref == 0)
            kv = self.kv
            return _ADMIT if n + ev <= kv.free + kv.evictable else _KV  # kv.available()
        return _FREE

    def jump_len(self, now: float, t: float) -> int:
        """How many decode-only iterations can be taken in closed form from `now` (0: single-step instead)."""
        state = self._would_admit()
        if state == _ADMIT:
            return 0
        decode = self.decode
        kv = self.kv
        T = decode.tick
        k = decode.next_finish() - T
        nD = decode.num
        bs = decode.block_size
        phase = decode.phase
        limit = kv.free if state == _KV else kv.free + kv.evictable  # kv.available()
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
        A = a + b * (decode.dsum + nD * T + nD)
        D = b * nD
        H = t - now
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

    def jump(self, k: int, now: float) -> float:
        """Take k decode-only iterations from `now`; returns their summed duration. The caller's clock moves after
        (the members that finish are finished at now + duration through `finish_due`)."""
        sc = self.sched
        decode = self.decode
        nD = decode.num
        T = decode.tick
        bs = decode.block_size
        need = (k // bs) * nD
        for j in range(k % bs):
            need += decode.phase[(T + j) % bs]
        self.kv.take(need)
        a, b = self.step.decode_line(nD)
        A = a + b * (decode.dsum + nD * T + nD)
        if sc.first_due:
            sc.first_seen(now + A)  # the first of the k iterations
        sc.generation_tokens_total += nD * k
        decode.tick = T + k
        return k * A + b * nD * k * (k - 1) * 0.5

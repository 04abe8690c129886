"""The decode aggregate: requests in steady decode held together, so that an engine iteration costs O(prefilling
requests), not O(batch).

It is the engine's bookkeeping, not vLLM's policy: a shared decode tick, per-phase counts of who needs a new KV block
at which tick, a heap of finish ticks, and the LoRA adapters its members use. A member (status DECODING) has c and e as
of decode tick t0; `leave` makes it explicit again (RUNNING) at the current tick. Every change happens at an
iteration boundary, called by the scheduler (join, leave, due) or by the macro steps (tick, next_finish).
"""

from __future__ import annotations

import heapq

from kubetwin.serving.engine.request import DECODING, RUNNING, EngineRequest


class DecodeAggregate:
    """Reads and changes its own fields and, of the requests that join or leave, c, e, t0, tb, ph, gen and status."""

    __slots__ = ("block_size", "tick", "num", "dsum", "phase", "fheap", "loras")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.tick = 0  # decode iterations taken
        self.num = 0  # members
        self.dsum = 0  # sum of (c - t0) over the members
        self.phase = [0] * block_size  # phase[p]: members that need a new block at ticks == p (mod block_size)
        self.fheap: list[tuple[int, int, int, EngineRequest]] = []  # (finish tick, uid, gen, request)
        self.loras: dict[str, int] = {}  # members per adapter

    def join(self, s: EngineRequest) -> None:
        """s (explicit, at an iteration boundary, in steady decode) joins the aggregate at the current tick."""
        T = self.tick
        s.status = DECODING
        s.t0 = T
        self.num += 1
        self.dsum += s.c - T
        ph = s.ph = (T - s.c + s.base) % self.block_size
        self.phase[ph] += 1
        heapq.heappush(self.fheap, (T + s.out - s.e, s.uid, s.gen, s))
        if s.lora is not None:
            self.loras[s.lora] = self.loras.get(s.lora, 0) + 1

    def leave(self, s: EngineRequest) -> None:
        """s leaves the aggregate at an iteration boundary; its state becomes explicit."""
        T = self.tick
        self.num -= 1
        self.dsum -= s.c - s.t0
        self.phase[s.ph] -= 1
        d = T - s.t0
        s.c += d
        s.e += d
        s.t0 = T
        tail = s.c - s.base
        s.tb = -(-tail // self.block_size) if tail > 0 else 0
        s.gen += 1
        s.status = RUNNING
        if s.lora is not None:
            n = self.loras[s.lora] - 1
            if n:
                self.loras[s.lora] = n
            else:
                del self.loras[s.lora]

    def due(self) -> list[EngineRequest]:
        """Members whose last token came with the tick just taken, in finish-tick order (they are still members:
        the scheduler finishes them)."""
        fh = self.fheap
        T = self.tick
        out = []
        while fh and fh[0][0] <= T:
            _, _, gen, s = heapq.heappop(fh)
            if s.status == DECODING and s.gen == gen:
                out.append(s)
        return out

    def next_finish(self) -> int:
        """The first member's finish tick (stale heap entries of requests that left are dropped). Needs num > 0."""
        fh = self.fheap
        while not (fh[0][3].status == DECODING and fh[0][3].gen == fh[0][2]):
            heapq.heappop(fh)
        return fh[0][0]

    def clear(self) -> None:
        """Every member is gone (the engine aborted them); the tick goes on."""
        self.num = self.dsum = 0
        self.phase = [0] * self.block_size
        self.fheap.clear()
        self.loras.clear()

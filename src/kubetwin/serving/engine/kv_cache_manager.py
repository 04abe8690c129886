"""How one request's tokens map onto KV blocks, the role of vLLM's KVCacheManager (vllm/v1/core/kv_cache_manager.py:
get_computed_blocks, allocate_slots, free) over this twin's segment-granular cache (`block_pool`).

A request's cacheable leading segments are laid out block-aligned, one cached unit each (or private duplicate blocks
when someone else cached the same segment meanwhile); the rest is a private tail. Checking a need (`blocks_needed`) is
apart from taking it (`allocate`) because the scheduler preempts or stops between the two.
"""

from __future__ import annotations

from kubetwin.serving.engine.block_pool import KVCache, Unit
from kubetwin.serving.engine.request import EngineRequest


class KVCacheManager:
    """Reads and changes `kv` and the layout fields of the requests it is given (units, k, base, dup, tb)."""

    __slots__ = ("kv", "block_size")

    def __init__(self, kv: KVCache) -> None:
        self.kv = kv
        self.block_size = kv.block_size

    def get_computed_blocks(self, s: EngineRequest) -> tuple[list[Unit], int, int, int]:
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
            c = last + (cap - last) // self.block_size * self.block_size
        return hit, c, len(hit), base

    def blocks_needed(self, s: EngineRequest, end: int) -> tuple[int, int, int, int]:
        """New blocks for s to hold tokens [0, end), and the layout after: (blocks, k, base, tail blocks)."""
        k, base, bs, segs = s.k, s.base, self.block_size, s.segs
        blocks = 0
        while k < s.nseg and base + segs[k] <= end:
            blocks += -(-segs[k] // bs)
            base += segs[k]
            k += 1
        tail = end - base
        tb = -(-tail // bs) if tail > 0 else 0
        return blocks + tb - s.tb, k, base, tb

    def allocate(self, s: EngineRequest, n: int, k: int, base: int, tb: int) -> None:
        """Take n blocks for s (what blocks_needed said) and cache the segments it completes."""
        kv = self.kv
        kv.take(n)
        bs = self.block_size
        for i in range(s.k, k):
            nb = -(-s.segs[i] // bs)
            u = kv.insert(s.hashes[i], nb)
            if u is None:
                s.dup += nb
            else:
                s.units.append(u)
        s.k, s.base, s.tb = k, base, tb

    def free(self, s: EngineRequest) -> None:
        self.kv.release(s.units, s.dup + s.tb)
        s.units = []
        s.k = s.base = s.dup = s.tb = 0

"""A model server's paged KV-cache block pool with segment-granular prefix caching.

Modelled on vLLM V1's BlockPool (vllm-project/vllm@c59cb7941357443da7c5eef75cfa8697d683d228:vllm/v1/core/block_pool.py):
- block 0 is the reserved null block, so `num_gpu_blocks - 1` blocks are usable and
  `get_usage() = 1 - free / (num_gpu_blocks - 1)`, where "free" counts cached blocks nobody references (they sit in the
  free block queue as eviction candidates);
- a freed request's uncached blocks go to the front of the free queue (reused first) and its cached blocks to the
  back, tail first (`free_blocks`; kv_cache_manager.free frees in reverse order), so cached prefixes are evicted least
  recently freed first and a chain's tail before its head;
- a cache hit on an unreferenced block takes it out of the free queue (`touch`); identical blocks computed twice are not
  de-duplicated (BlockHashToBlockMap NOTE #1): the second copy stays the request's own.

Approximation (documented for the engine too): vLLM hashes and caches every full 16-token block. We cache a prompt
*segment* (Request.hashes[i], seg_tokens[i]) as one unit of ceil(tokens / block_size) blocks keyed by its chain hash,
inserted once the whole segment is computed and evicted whole. So a hit is segment-granular (never a partial
segment), each segment is laid out block-aligned (up to one extra block per segment), and generated tokens are never
cached. Traces give prefix information per segment anyway (Mooncake: 512-token blocks), so finer caching has no input.
"""

from __future__ import annotations

from collections import OrderedDict


def max_model_len_error(num_gpu_blocks: int, block_size: int, max_model_len: int, per_token: int) -> str | None:
    """vLLM refuses to start when one max_model_len sequence cannot fit in the usable blocks (all but the null
    block); its words (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory). None when it fits."""
    have = (num_gpu_blocks - 1) * block_size
    if have >= max_model_len:
        return None
    return (f"To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({max_model_len * per_token / 2**30:.2f} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({have * per_token / 2**30:.2f} GiB). Based on the available memory, the estimated "
            f"maximum model length is {have}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine.")


class Unit:
    """One cached prompt segment: `blocks` KV blocks keyed by the segment's chain hash; `ref` running requests use it
    (ref 0 = evictable, counted as free)."""

    __slots__ = ("key", "blocks", "ref")

    def __init__(self, key: int, blocks: int) -> None:
        self.key = key
        self.blocks = blocks
        self.ref = 1


class KVCache:
    """Block accounting: `free` plain free blocks, plus evictable cached units in LRU order (least recently freed
    first). Blocks are counted, never individually named: only counts drive scheduling and the metrics."""

    __slots__ = ("num_gpu_blocks", "usable", "block_size", "caching", "free", "evictable", "units", "lru")

    def __init__(self, num_gpu_blocks: int, block_size: int, caching: bool) -> None:
        if num_gpu_blocks < 2:
            raise ValueError("num_gpu_blocks must be >= 2 (one is vLLM's reserved null block)")
        self.num_gpu_blocks = num_gpu_blocks
        self.usable = num_gpu_blocks - 1  # null block
        self.block_size = block_size
        self.caching = caching
        self.free = self.usable
        self.evictable = 0  # blocks held by unreferenced cached units
        self.units: dict[int, Unit] = {}
        self.lru: OrderedDict[int, Unit] = OrderedDict()

    def available(self) -> int:
        """Blocks an allocation may take: plain free plus evictable (vLLM's get_num_free_blocks)."""
        return self.free + self.evictable

    def usage(self) -> float:
        """vLLM BlockPool.get_usage: 1 - free/(num_gpu_blocks - 1)."""
        return 1.0 - (self.free + self.evictable) / self.usable

    def take(self, n: int) -> None:
        """Allocate n blocks (caller checked n <= available()), evicting LRU units when plain free runs out."""
        if n <= self.free:
            self.free -= n
            return
        need = n - self.free
        self.free = 0
        lru = self.lru
        units = self.units
        while need > 0:
            key, u = lru.popitem(last=False)
            del units[key]
            self.evictable -= u.blocks
            if u.blocks >= need:
                self.free = u.blocks - need
                need = 0
            else:
                need -= u.blocks

    def lookup(self, hashes: tuple[int, ...], nseg: int) -> list[Unit]:
        """The cached units of the longest run of leading segments (stops at the first miss)."""
        units = self.units
        hit: list[Unit] = []
        for i in range(nseg):
            u = units.get(hashes[i])
            if u is None:
                break
            hit.append(u)
        return hit

    def match_tokens(self, hashes: tuple[int, ...], seg_tokens: tuple[int, ...]) -> int:
        """Prompt tokens of the longest cached leading run of segments."""
        if not self.caching:
            return 0
        units = self.units
        n = 0
        for h, s in zip(hashes, seg_tokens, strict=True):
            if h not in units:
                break
            n += s
        return n

    def touch(self, hit: list[Unit]) -> None:
        """Reference hit units; unreferenced ones leave the free queue."""
        lru = self.lru
        for u in hit:
            if u.ref == 0:
                del lru[u.key]
                self.evictable -= u.blocks
            u.ref += 1

    def insert(self, key: int, blocks: int) -> Unit | None:
        """Cache a just-computed segment (its blocks were taken already); None if the key is cached already (vLLM keeps
        the duplicate as the request's own blocks)."""
        if key in self.units:
            return None
        u = Unit(key, blocks)
        self.units[key] = u
        return u

    def release(self, held: list[Unit], private: int) -> None:
        """A request frees its blocks: private ones become plain free, cached units drop a reference and, once
        unreferenced, join the LRU tail in reverse order (a chain's tail is evicted before its head)."""
        self.free += private
        lru = self.lru
        for u in reversed(held):
            u.ref -= 1
            if u.ref == 0:
                lru[u.key] = u
                self.evictable += u.blocks

    def clear(self) -> None:
        """Drop everything (the pod is gone)."""
        self.free = self.usable
        self.evictable = 0
        self.units.clear()
        self.lru.clear()

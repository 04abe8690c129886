"""The EPP's approximate prefix-cache index: what the gateway believes each pod holds, learned only from its own
routing decisions (no feedback from the engines), so it can be wrong exactly where the real one is wrong.

Source: kubernetes-sigs/gateway-api-inference-extension (GIE)@1748e829
pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/{plugin.go,indexer.go,types.go}.
The twin's prompts are chained segments, not text: a segment of n tokens stands for ceil(n/16) blocks keyed by its
chain hash. That equals hashing every 16-token block when equal segment hashes mean equal tokens, because the match
walk and the LRU only ever see a segment's blocks together.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from kubetwin.serving.types import Request

# GIE@1748e829 approximateprefix/types.go: vLLM's default block size, 4 chars/token => 64-char blocks
DEFAULT_BLOCK_TOKENS = 16
AVERAGE_CHARS_PER_TOKEN = 4
# GIE@1748e829 approximateprefix/types.go `defaultMaxPrefixBlocks` (16,384 chars ~ 4,096 tokens)
DEFAULT_MAX_PREFIX_BLOCKS = 256
# GIE@1748e829 approximateprefix/types.go `defaultLRUCapacityPerServer` (Llama3-8B on H100-80GB: 500K tokens / 16)
DEFAULT_LRU_CAPACITY_PER_SERVER = 31250

_salts: dict[str, int] = {}


def model_salt(target_model: str) -> int:
    """64-bit salt per target model: GIE seeds its hash chain with the model name so two models (or two LoRA
    adapters) never share index entries. Stable across processes (unlike `hash(str)`)."""
    s = _salts.get(target_model)
    if s is None:
        s = 0 if not target_model else int.from_bytes(hashlib.blake2b(target_model.encode(), digest_size=8).digest())
        _salts[target_model] = s
    return s


def request_blocks(
    req: Request, block_tokens: int = DEFAULT_BLOCK_TOKENS, max_blocks: int = DEFAULT_MAX_PREFIX_BLOCKS
) -> tuple[list[int], list[int], int]:
    """(keys, block weights, total blocks) of a request's prompt as the index sees it: one key per segment weighing
    ceil(tokens/block) blocks, the walk capped at `max_blocks` blocks (GIE truncates the prompt the same way)."""
    salt = model_salt(req.lora or req.model)
    keys: list[int] = []
    weights: list[int] = []
    total = 0
    for h, n in zip(req.hashes, req.seg_tokens, strict=True):
        b = -(-n // block_tokens)
        if b <= 0:
            continue
        if total + b >= max_blocks:
            b = max_blocks - total
            keys.append(h ^ salt)
            weights.append(b)
            total += b
            break
        keys.append(h ^ salt)
        weights.append(b)
        total += b
    return keys, weights, total


class ApproxPrefixIndex:
    """hashToPods (a bitmask over pod slots per key) plus one LRU per pod whose capacity is counted in blocks; an LRU
    eviction clears the pod's bit, as the real evict callback deletes the pod from the hash's set."""

    def __init__(self, lru_capacity: int = DEFAULT_LRU_CAPACITY_PER_SERVER) -> None:
        self.default_capacity = lru_capacity
        self._slot: dict[str, int] = {}
        self._names: list[str | None] = []
        self._free: list[int] = []
        self._hash_pods: dict[int, int] = {}
        self._lru: list[OrderedDict[int, int] | None] = []
        self._used: list[int] = []
        self._cap: list[int] = []
        self._snap_names: list[str] = []
        self._snap_src: list[str] | None = None  # the list _snap_names was copied from
        self._snap_slots = np.zeros(0, dtype=np.intp)
        self._bits: dict[int, np.ndarray] = {}  # pod bitmask -> 0/1 per snapshot endpoint, for _snap_slots
        self._bits_for: np.ndarray | None = None

    # --- pods -------------------------------------------------------------------------------------------------
    def slot(self, name: str) -> int:
        """The pod's bit position, allocated on first sight and reused after the pod is removed."""
        s = self._slot.get(name)
        if s is None:
            if self._free:
                s = self._free.pop()
                self._names[s] = name
            else:
                s = len(self._names)
                self._names.append(name)
                self._lru.append(None)
                self._used.append(0)
                self._cap.append(0)
            self._slot[name] = s
        return s

    def slots_for(self, names: list[str]) -> np.ndarray:
        """Slot of each snapshot endpoint, cached while the snapshot's names stay the same (the common case)."""
        if names is not self._snap_src and names != self._snap_names:
            self._snap_names = list(names)
            self._snap_slots = np.fromiter((self.slot(n) for n in names), dtype=np.intp, count=len(names))
        self._snap_src = names  # the pool's snapshots share one names list while its endpoints stay
        return self._snap_slots

    def pods(self) -> list[str]:
        """Pods that have an LRU (were routed to at least once)."""
        return [n for n, s in self._slot.items() if self._lru[s] is not None]

    def remove_pod(self, name: str) -> None:
        """RemovePod: drop every entry of the pod (GIE sweeps pods gone from the pool every 2 min)."""
        s = self._slot.pop(name, None)
        if s is None:
            return
        lru = self._lru[s]
        if lru is not None:
            keep = ~(1 << s)
            hp = self._hash_pods
            for k in lru:
                _unset(hp, k, keep)
        self._lru[s] = None
        self._used[s] = 0
        self._names[s] = None
        self._free.append(s)
        self._snap_names = []

    def size(self, name: str) -> int:
        """Blocks the index attributes to the pod."""
        s = self._slot.get(name)
        return 0 if s is None else self._used[s]

    # --- match / update ---------------------------------------------------------------------------------------
    def match(self, keys: list[int], weights: list[int]) -> dict[int, int]:
        """matchLongestPrefix: walk the blocks in order, stop at the first block no pod holds; every pod holding a
        walked block gets its blocks counted (greedy, as the real loop: a pod need not hold the earlier blocks).
        Returns {pod-slot bitmask: blocks} for the walked prefix."""
        hp = self._hash_pods
        acc: dict[int, int] = {}
        for k, w in zip(keys, weights, strict=True):
            m = hp.get(k)
            if not m:
                break
            acc[m] = acc.get(m, 0) + w
        return acc

    def counts(self, acc: dict[int, int], slots: np.ndarray) -> np.ndarray | None:
        """Per-endpoint matched blocks (float) for the snapshot's `slots`, from `match`'s bitmask totals; None when
        nothing matched."""
        if not acc:
            return None
        if slots is not self._bits_for or len(self._bits) > 4096:
            self._bits = {}
            self._bits_for = slots
        out = None
        for m, w in acc.items():
            b = self._bits.get(m)
            if b is None:
                nbytes = (len(self._names) + 7) // 8
                bits = np.unpackbits(np.frombuffer(m.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little")
                b = self._bits[m] = bits[slots].astype(np.float64)
            out = b * w if out is None else out + b * w
        return out

    def add(self, name: str, keys: list[int], weights: list[int], capacity: int | None = None) -> None:
        """Indexer.Add (PreRequest): every block of the request goes into the pod's LRU (most recent last); the LRU
        is created with `capacity` blocks (num_gpu_blocks under autoTune) or the default, as golang-lru is sized
        once at creation."""
        s = self.slot(name)
        lru = self._lru[s]
        if lru is None:
            lru = OrderedDict()
            self._lru[s] = lru
            self._cap[s] = capacity if capacity and capacity > 0 else self.default_capacity
        bit = 1 << s
        keep = ~bit
        hp = self._hash_pods
        cap = self._cap[s]
        used = self._used[s]
        for k, w in zip(keys, weights, strict=True):
            if k in lru:
                lru.move_to_end(k)
                continue
            lru[k] = w
            used += w
            hp[k] = hp.get(k, 0) | bit
            while used > cap and len(lru) > 1:
                k2, w2 = lru.popitem(last=False)
                used -= w2
                _unset(hp, k2, keep)
        self._used[s] = used


def prompt_segments(
    model: str, text: str, block_chars: int = 64, max_blocks: int = DEFAULT_MAX_PREFIX_BLOCKS, cache_salt: str = ""
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A live request's prompt as index segments, hashed as GIE v1.0 does (GIE@v1.0.0 pkg/epp/scheduling/framework/
    plugins/multi/prefix/plugin.go `hashPrompt`): the UTF-8 bytes truncated to max_blocks*block_chars; seed
    h = xxh64(model [+ cache_salt]); for each full chunk i, h_i = xxh64(chunk_i || LE64(h_{i-1})); a trailing partial
    chunk is ignored and input shorter than one chunk gives no hashes. One segment per block, of block_chars/4 tokens.
    `text` is what GIE hashes: the raw prompt (completions) or the JSON of the chat messages."""
    import xxhash  # the live gateway's dependency only; the twin never calls this

    data = text.encode()
    if len(data) < block_chars:
        return (), ()
    data = data[: block_chars * max_blocks]
    prev = xxhash.xxh64_intdigest((model + cache_salt).encode())
    out: list[int] = []
    for i in range(0, len(data) - block_chars + 1, block_chars):
        prev = xxhash.xxh64_intdigest(data[i : i + block_chars] + prev.to_bytes(8, "little"))
        out.append(prev)
    tokens = block_chars // AVERAGE_CHARS_PER_TOKEN
    return tuple(out), (tokens,) * len(out)


def _unset(hash_pods: dict[int, int], key: int, keep: int) -> None:
    """Clear a pod's bit from a block's pod set (`keep` is the mask without it); drop the block when none is left."""
    m = hash_pods.get(key, 0) & keep
    if m:
        hash_pods[key] = m
    else:
        hash_pods.pop(key, None)

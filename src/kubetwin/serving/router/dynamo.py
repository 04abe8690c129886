"""NVIDIA Dynamo's KV router (docs.nvidia.com/dynamo components/router): a cost of uncached prefill blocks plus
in-flight decode blocks per worker, its overlap from KV events (an oracle here) or its own approximate index. One
module per router family, as the presets registry in `router/presets.py` names them."""

from __future__ import annotations

from typing import Any

import numpy as np

from kubetwin.serving.router.base import NO_ENDPOINT_DECISION
from kubetwin.serving.router.epp import PrefixOracle
from kubetwin.serving.router.prefix_index import DEFAULT_BLOCK_TOKENS, ApproxPrefixIndex, request_blocks
from kubetwin.serving.types import Decision, EndpointSnapshot, Request

# docs.nvidia.com/dynamo components/router: --kv-overlap-score-weight default 1.0, --router-temperature default 0
DYNAMO_OVERLAP_WEIGHT = 1.0
DYNAMO_TEMPERATURE = 0.0


class DynamoKVRouter:
    """Dynamo KV router: cost(w) = overlap_weight x prefill_blocks(w) + decode_blocks(w), where prefill_blocks = the
    request's uncached prompt blocks on w and decode_blocks = the blocks of the requests the router has in flight on
    w; lowest cost wins (ties random), or softmax sampling over normalised costs at temperature > 0. The overlap
    comes from the oracle (KV-events mode) or, without one, from the router's own approximate index (approximation
    mode, no TTL here)."""

    def __init__(
        self,
        name: str = "dynamo-kv",
        seed: int = 0,
        oracle: PrefixOracle | None = None,
        overlap_score_weight: float = DYNAMO_OVERLAP_WEIGHT,
        temperature: float = DYNAMO_TEMPERATURE,
        block_size: int = 0,
        **_: Any,
    ) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.oracle = oracle
        self.w = overlap_score_weight
        self.temperature = temperature
        self.block = block_size
        self.index = None if oracle is not None else ApproxPrefixIndex()
        self.active: dict[str, int] = {}
        self.req_blocks: dict[int, tuple[str, int]] = {}
        self._names: list[str] = []
        self._bs = DEFAULT_BLOCK_TOKENS

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision:
        n = len(snap)
        if not n:
            return NO_ENDPOINT_DECISION
        self._names = snap.names
        bs = self.block or (int(snap.block_size[0]) if snap.block_size is not None and snap.block_size[0] > 0 else 16)
        self._bs = bs
        prompt_blocks = -(-req.prompt_tokens // bs)
        if self.oracle is not None:
            overlap = np.fromiter((self.oracle.match_tokens(req, nm) // bs for nm in snap.names), float, count=n)
        else:
            assert self.index is not None  # built in __init__ whenever there is no oracle
            keys, ws, _ = request_blocks(req, bs, 1 << 30)
            acc = self.index.match(keys, ws)
            c = self.index.counts(acc, self.index.slots_for(snap.names))
            overlap = np.zeros(n) if c is None else c
        decode = np.fromiter((self.active.get(nm, 0) for nm in snap.names), float, count=n)
        cost = self.w * np.maximum(prompt_blocks - overlap, 0.0) + decode
        if self.temperature > 0:
            top = cost.max()
            z = -(cost / top if top > 0 else cost) / self.temperature
            p = np.exp(z - z.max())
            return Decision(int(self.rng.choice(n, p=p / p.sum())))
        ties = np.flatnonzero(cost == cost.min())
        return Decision(int(ties[self.rng.integers(len(ties))]) if len(ties) > 1 else int(ties[0]))

    def routed(self, req: Request, index_or_name: int | str) -> None:
        name = index_or_name if isinstance(index_or_name, str) else self._names[index_or_name]
        b = -(-req.prompt_tokens // self._bs)
        self.active[name] = self.active.get(name, 0) + b
        self.req_blocks[req.id] = (name, b)
        if self.index is not None:
            keys, ws, _ = request_blocks(req, self._bs, 1 << 30)
            self.index.add(name, keys, ws)

    def finished(self, req: Request, name: str) -> None:
        nb = self.req_blocks.pop(req.id, None)
        if nb is not None:
            self.active[nb[0]] = self.active.get(nb[0], 0) - nb[1]

    def remove(self, name: str) -> None:
        self.active.pop(name, None)
        if self.index is not None:
            self.index.remove_pod(name)

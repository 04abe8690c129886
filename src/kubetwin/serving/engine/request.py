"""One request as the engine holds it (vLLM's `Request`, vllm/v1/request.py): its status, tokens computed and
emitted, and its KV layout (segment-aligned, see `block_pool` and `kv_cache_manager.KVCacheManager`).

Field names are short because the scheduling loops read them per request per iteration; each one's vLLM counterpart
is given beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubetwin.serving.engine.block_pool import Unit
    from kubetwin.serving.types import Request

# EngineRequest.status, vLLM's RequestStatus as far as this engine tells states apart (plain ints: the hot loops
# compare them). RUNNING and DECODING are both vLLM's RUNNING: a DECODING request is running in steady decode and
# held in the decode aggregate (decode.DecodeAggregate); a RUNNING one is scheduled one by one.
WAITING, RUNNING, DECODING, FINISHED = 0, 1, 2, 3


class EngineRequest:
    """Engine-side state of one request. While DECODING, c and e are as of the aggregate's decode tick t0."""

    __slots__ = ("req", "uid", "P", "out", "hashes", "segs", "nseg", "units", "k", "base", "dup", "tb", "c", "e",
                 "t0", "status", "gen", "lora", "key", "ph", "rpos")

    def __init__(self, req: Request, uid: int, nseg: int) -> None:
        self.req = req
        self.uid = uid
        self.P = req.prompt_tokens  # num_prompt_tokens
        self.out = req.output_tokens  # max_tokens (the trace's output length: no early stop)
        self.hashes = req.hashes
        self.segs = req.seg_tokens
        self.nseg = nseg  # cacheable leading segments (0: no caching)
        self.units: list[Unit] = []  # cached units held, segment order
        self.k = 0  # segments laid out as units or duplicates
        self.base = 0  # tokens in those segments; the private tail starts here
        self.dup = 0  # private blocks of segments that were cached by someone else meanwhile
        self.tb = 0  # private tail blocks
        self.c = 0  # num_computed_tokens
        self.e = 0  # num_output_tokens emitted
        self.t0 = 0
        self.status = WAITING
        self.gen = 0  # bumps when leaving the decode aggregate (invalidates its finish-heap entries)
        self.lora = req.lora  # lora_request's name
        self.key = (-req.priority, req.arrival, uid)  # vLLM's (priority, arrival_time) order
        self.ph = 0  # in the aggregate: it needs a new block at ticks == ph (mod block size)
        self.rpos = 0  # position in the running list: admissions append, so running order is rpos order

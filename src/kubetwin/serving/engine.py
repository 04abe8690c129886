"""One model-server pod's engine: a discrete-event model of vLLM V1's EngineCore + Scheduler, iteration by iteration.

Each iteration is one `Scheduler.schedule()` (vllm-project/vllm@00024d314514900f361ad072af6931e403b7f589:
vllm/v1/core/sched/scheduler.py) followed by one forward pass timed by a `StepModel`:
- token budget `max_num_batched_tokens`; running requests first, in order, each gets min(remaining, threshold, budget)
  tokens (decode = 1, chunked prefill otherwise); the loop stops when the budget is spent;
- a failed KV allocation preempts (recompute; V1 has no swap) the last running request, or under "priority" the one
  with the worst (priority, arrival) (`max(self.running, key=(priority, arrival_time))`), and retries; a preempted
  request goes to the front of the waiting queue with its computed tokens reset, and no waiting request is admitted
  in a step that preempted;
- then waiting requests in queue order while budget remains and len(running) < max_num_seqs: prefix-cache hit capped
  at num_tokens - 1 (kv_cache_manager.get_computed_blocks), allocation for the first chunk; admission stops at the first
  request that does not fit. V1 keeps no free-block watermark (KVCacheManager `watermark: float = 0.0`,
  vllm@003df2961dd8830c317a61f9745ccd557da9fa06:vllm/v1/core/kv_cache_manager.py; the scheduler passes none);
- a request whose LoRA is not among the step's scheduled adapters when max_loras are in use is skipped and keeps its
  place (skipped requests are put back at the head in order; request_queue.py FCFSRequestQueue.prepend_requests).

Priority sign: our Request.priority follows InferenceObjective (higher = more important); vLLM's lower value is served
first, so vLLM priority = -Request.priority.

KV cache and prefix cache: see `serving.kvcache` (segment-granular caching approximation of vLLM's 16-token blocks).

Speed: requests in steady decode are kept in aggregate (a shared decode tick, per-phase counts of who needs a new
block at which tick, a heap of finish ticks), so an iteration costs O(prefilling requests), not O(batch); an
iteration that may preempt walks the running list in order but leaves the aggregate members in place. When the batch
is decode-only and nothing waiting can be admitted, `advance` jumps k iterations in closed form (iteration times form
an arithmetic series via StepModel.decode_line). `macro_steps=False` single-steps and gives the same results.

Layout: this module holds the public Engine (configuration, metrics, requests in and out, the time loop); the mixins
hold the rest, one concept each: `engine_sched` one iteration (vLLM's schedule() and the forward pass),
`engine_seq` a request's KV layout and the decode aggregate, `engine_jump` the closed-form macro steps.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable

from kubetwin.serving.engine_jump import MacroSteps
from kubetwin.serving.engine_sched import Scheduler
from kubetwin.serving.engine_seq import _DONE, DecodeAggregate, _Seq
from kubetwin.serving.kvcache import KVCache, max_model_len_error
from kubetwin.serving.types import EngineArgs, Request, StepModel

# vllm@7ded96b3c73f63400cdb048a73c34292ba862d99:vllm/entrypoints/openai/serving_engine.py `_validate_input` (HTTP 400)
MAX_CONTEXT_ERROR = (
    "This model's maximum context length is {max_model_len} tokens. However, you requested {total} tokens "
    "({prompt} in the messages, {output} in the completion). Please reduce the length of the messages or completion."
)

# Twin assumption: loading one LoRA adapter (rank <= 64, 7-8B base) from local disk into the CPU/GPU adapter cache.
# vLLM loads an adapter on first use (LRUCacheWorkerLoRAManager); no published latency to cite.
DEFAULT_LORA_LOAD_TIME = 0.05


class Engine(Scheduler, MacroSteps, DecodeAggregate):
    """One vLLM-like engine. The caller drives time: `advance(t)` then `add(req, t)`; metrics read as vLLM's scheduler
    stats after the last iteration."""

    __slots__ = (
        "name", "step", "max_model_len", "lora_load_time", "on_finish", "macro", "bs", "budget", "max_seqs",
        "threshold", "prio", "lora_on", "max_loras", "lora_cap", "kv", "now", "waiting", "run", "pre", "order_ok",
        "tick", "nD", "dsum", "phase", "fheap", "dlora", "run_lora", "wait_lora", "loaded", "uid", "rseq", "stuck",
        "prefix_cache_queries", "prefix_cache_hits", "prompt_tokens_total", "generation_tokens_total",
        "num_preemptions", "busy_time", "iterations", "tokens_computed", "finished", "rejected", "api_s",
        "lag", "first_due",
    )

    def __init__(self, args: EngineArgs, step: StepModel, num_gpu_blocks: int, *, name: str = "",
                 max_model_len: int, lora_load_time: float = DEFAULT_LORA_LOAD_TIME,
                 on_finish: Callable[[Request], None] | None = None, macro_steps: bool = True) -> None:
        if not isinstance(args.max_num_seqs, int) or not isinstance(args.max_num_batched_tokens, int):
            raise ValueError("max_num_seqs / max_num_batched_tokens must be resolved to ints by the caller")
        self.name = name
        self.step = step
        # the API server's share of every streamed token's latency (serving.perf Calibration.request_overhead_s):
        # the client sees the first and the last token this long after the engine step that produced them
        self.api_s = float(getattr(step, "request_overhead_s", 0.0))
        # StepModel.first_token_lag: the client sees a request's first token one iteration after the engine made it
        # (engine_sched._first_seen); first_due holds the requests whose first token came with the last iteration
        self.lag = bool(getattr(step, "first_token_lag", False))
        self.first_due: list[Request] = []
        self.max_model_len = max_model_len
        self.lora_load_time = lora_load_time
        self.on_finish = on_finish
        self.macro = macro_steps
        self.bs = args.block_size
        self.budget = args.max_num_batched_tokens
        self.max_seqs = args.max_num_seqs
        self.threshold = args.long_prefill_token_threshold
        self.prio = args.scheduling_policy == "priority"
        self.lora_on = args.enable_lora
        self.max_loras = args.max_loras
        # vLLM LoRAConfig: max_cpu_loras defaults to max_loras (vllm/config/lora.py). Adapters in this LRU are
        # loaded; others cost lora_load_time when first scheduled.
        self.lora_cap = args.max_cpu_loras or args.max_loras
        self.kv = KVCache(num_gpu_blocks, self.bs, args.enable_prefix_caching)
        # without this check a lone request could be preempted forever
        why = max_model_len_error(num_gpu_blocks, self.bs, max_model_len,
                                  getattr(step, "kv_bytes_per_token_per_gpu", 0) or 0)
        if why:
            raise ValueError(why)
        self.now = 0.0
        self.waiting: deque[_Seq] | list[tuple[tuple[int, float, int], _Seq]] = [] if self.prio else deque()
        self.run: dict[_Seq, None] = {}  # running, in vLLM's running-list order
        self.pre: list[_Seq] = []  # running requests handled explicitly, in running order
        self.order_ok = True  # every decode-aggregate request precedes every explicit one in running order
        self.tick = 0
        self.nD = 0
        self.dsum = 0  # sum of (c - t0) over the decode aggregate
        self.phase = [0] * self.bs  # phase[p]: aggregate members that need a new block at ticks == p (mod bs)
        self.fheap: list[tuple[int, int, int, _Seq]] = []  # (finish tick, uid, gen, seq)
        self.dlora: dict[str, int] = {}
        self.run_lora: dict[str, int] = {}
        self.wait_lora: dict[str, int] = {}
        self.loaded: OrderedDict[str, None] = OrderedDict()
        self.uid = 0
        self.rseq = 0  # next running-list position (_Seq.rpos)
        self.stuck = False
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.num_preemptions = 0
        self.busy_time = 0.0
        self.iterations = 0
        self.tokens_computed = 0
        self.finished = 0
        self.rejected = 0

    # ---------------------------------------------------------------- metrics
    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.run)

    @property
    def kv_usage(self) -> float:
        return self.kv.usage()

    @property
    def num_gpu_blocks(self) -> int:
        return self.kv.num_gpu_blocks

    @property
    def block_size(self) -> int:
        return self.bs

    @property
    def idle(self) -> bool:
        return not self.run and not self.waiting

    @property
    def next_event_time(self) -> float:
        """Start of the next iteration, or inf when there is nothing to run."""
        return math.inf if (self.idle or self.stuck) else self.now

    def active_loras(self) -> frozenset[str]:
        return frozenset(self.run_lora)

    def waiting_loras(self) -> frozenset[str]:
        return frozenset(self.wait_lora)

    def match_tokens(self, req: Request) -> int:
        return self.kv.match_tokens(req.hashes, req.seg_tokens)

    @staticmethod
    def reject_message(req: Request, max_model_len: int) -> str:
        p, o = req.prompt_tokens, req.output_tokens
        return MAX_CONTEXT_ERROR.format(max_model_len=max_model_len, total=p + o, prompt=p, output=o)

    # ---------------------------------------------------------------- requests in and out
    def add(self, req: Request, t: float) -> None:
        """Request arrives at t (after advance(t)). Over-long requests are rejected at once (400, on_finish called)."""
        req.pod = self.name
        if req.prompt_tokens + req.output_tokens > self.max_model_len:
            req.status = 400
            req.reason = self.reject_message(req, self.max_model_len)
            req.finish = t
            self.rejected += 1
            if self.on_finish is not None:
                self.on_finish(req)
            return
        if req.output_tokens < 1 or req.prompt_tokens < 1:
            raise ValueError("prompt_tokens and output_tokens must be >= 1")
        if self.idle or self.stuck:
            self.now = max(self.now, t)
        self.stuck = False
        nseg = len(req.seg_tokens) if self.kv.caching else 0
        if nseg:
            bs = self.bs
            worst = sum(-(-s // bs) for s in req.seg_tokens) + -(-(req.output_tokens - 1) // bs)
            if worst > self.kv.usable:
                nseg = 0  # the block-aligned segment layout would not fit: serve it uncached rather than livelock
        s = _Seq(req, self.uid, nseg)
        self.uid += 1
        self._enqueue(s)
        if s.lora is not None:
            self.wait_lora[s.lora] = self.wait_lora.get(s.lora, 0) + 1

    def abort_all(self, t: float) -> list[Request]:
        """The pod is going away: return every unfinished request (running, then waiting) and empty the engine."""
        out = [s.req for s in self.run]
        out += [s.req for s in self._waiting_order()]
        for s in self.run:
            s.st = _DONE
        self.run.clear()
        self.pre.clear()
        self.waiting = [] if self.prio else deque()
        self.nD = self.dsum = 0
        self.phase = [0] * self.bs
        self.fheap.clear()
        self.dlora.clear()
        self.run_lora.clear()
        self.wait_lora.clear()
        self.order_ok = True
        self.kv.clear()
        self.now = max(self.now, t)
        self.stuck = False
        return out

    # ---------------------------------------------------------------- time
    def advance(self, t: float) -> None:
        """Run every iteration that starts before t (iterations are atomic)."""
        while self.now < t and (self.run or self.waiting) and not self.stuck:
            if self.macro and not self.pre and 0 < self.nD <= self.budget:
                k = self._jump_len(t)
                if k > 0:
                    self._jump(k)
                    continue
            self._iterate()

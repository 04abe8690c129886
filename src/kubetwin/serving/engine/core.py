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

KV cache and prefix cache: see `block_pool` (segment-granular caching approximation of vLLM's 16-token blocks).

Speed: requests in steady decode are kept in aggregate (a shared decode tick, per-phase counts of who needs a new
block at which tick, a heap of finish ticks), so an iteration costs O(prefilling requests), not O(batch); an
iteration that may preempt walks the running list in order but leaves the aggregate members in place. When the batch
is decode-only and nothing waiting can be admitted, `advance` jumps k iterations in closed form (iteration times form
an arithmetic series via StepModel.decode_line). `macro_steps=False` single-steps and gives the same results.

Layout, as vLLM V1 splits its engine core (vllm/v1/engine/core.py, v1/core/sched/): this module's Engine is the engine
core (configuration, requests in and out, the time loop, the forward pass timed by the StepModel); it drives
collaborators with explicit interfaces: `scheduler.Scheduler` (schedule(), which returns an `output.SchedulerOutput`,
and update_from_output()), which holds the waiting queue (`request_queue`), the decode aggregate (`decode`) and the KV
layout of each request (`kv_cache_manager` over `block_pool`); `macro_steps.MacroSteps` takes the closed-form
decode-only jumps. `request` is the engine's view of one request and its RequestStatus.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from kubetwin.serving.engine.block_pool import KVCache, max_model_len_error
from kubetwin.serving.engine.macro_steps import MacroSteps
from kubetwin.serving.engine.request import DECODING, EngineRequest
from kubetwin.serving.engine.scheduler import Scheduler
from kubetwin.serving.types import EngineArgs, Request, StepModel

# vllm@7ded96b3c73f63400cdb048a73c34292ba862d99:vllm/entrypoints/openai/serving_engine.py `_validate_input` (HTTP 400)
MAX_CONTEXT_ERROR = (
    "This model's maximum context length is {max_model_len} tokens. However, you requested {total} tokens "
    "({prompt} in the messages, {output} in the completion). Please reduce the length of the messages or completion."
)

# Twin assumption: loading one LoRA adapter (rank <= 64, 7-8B base) from local disk into the CPU/GPU adapter cache.
# vLLM loads an adapter on first use (LRUCacheWorkerLoRAManager); no published latency to cite.
DEFAULT_LORA_LOAD_TIME = 0.05
_NO_LORAS: frozenset[str] = frozenset()  # what an engine without adapters reports, shared (every refresh reads it)


class Engine:
    """One vLLM-like engine. The caller drives time: `advance(t)` then `add(req, t)`; metrics read as vLLM's scheduler
    stats after the last iteration."""

    __slots__ = ("name", "step", "max_model_len", "lora_load_time", "on_finish", "kv", "scheduler", "macro", "now",
                 "uid", "stuck", "busy_time", "iterations", "tokens_computed", "rejected", "pp", "batches",
                 "stage_free", "nbatch", "last_done")

    def __init__(self, args: EngineArgs, step: StepModel, num_gpu_blocks: int, *, name: str = "",
                 max_model_len: int, lora_load_time: float = DEFAULT_LORA_LOAD_TIME,
                 on_finish: Callable[[Request], None] | None = None, macro_steps: bool = True) -> None:
        if not isinstance(args.max_num_seqs, int) or not isinstance(args.max_num_batched_tokens, int):
            raise ValueError("max_num_seqs / max_num_batched_tokens must be resolved to ints by the caller")
        self.name = name
        self.step = step
        self.max_model_len = max_model_len
        self.lora_load_time = lora_load_time
        self.on_finish = on_finish
        self.kv = KVCache(num_gpu_blocks, args.block_size, args.enable_prefix_caching)
        # without this check a lone request could be preempted forever
        why = max_model_len_error(num_gpu_blocks, args.block_size, max_model_len,
                                  getattr(step, "kv_bytes_per_token_per_gpu", 0) or 0)
        if why:
            raise ValueError(why)
        # pipeline stages (StepModel.pp, vLLM's --pipeline-parallel-size): more than one runs vLLM's batch queue
        self.pp = max(1, int(getattr(step, "pp", 1) or 1))
        # Triton's dynamic batcher holds a request up to max_queue_delay before its backend sees it: a twin
        # simplification adds the full wait to the client's TTFT and end (the engine takes the request at arrival)
        self.scheduler = Scheduler(args, self.kv, api_s=float(getattr(step, "request_overhead_s", 0.0)) + (
            args.triton.queue_delay_s if args.triton is not None else 0.0),
                                   lag=bool(getattr(step, "first_token_lag", False)), on_finish=on_finish,
                                   pipelined=self.pp > 1)
        # the macro steps jump over decode-aggregate ticks; a pipelined engine has no aggregate (the slow path)
        self.macro = MacroSteps(self.scheduler, step) if macro_steps and self.pp == 1 else None
        # the batch queue (pp > 1): (done, batch id, scheduled with preemption stamps, batch?) oldest first; the time
        # each stage is next free; batches submitted; when the last submitted batch leaves the last stage
        self.batches: deque[tuple[float, int, list[tuple[EngineRequest, int, int]], bool]] = deque()
        self.stage_free = [0.0] * self.pp
        self.nbatch = 0
        self.last_done = 0.0
        self.now = 0.0
        self.uid = 0
        self.stuck = False  # nothing fits even in an empty batch: wait for the next arrival
        self.busy_time = 0.0
        self.iterations = 0
        self.tokens_computed = 0
        self.rejected = 0

    # ---------------------------------------------------------------- metrics
    @property
    def num_waiting(self) -> int:
        return len(self.scheduler.waiting)

    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

    @property
    def kv_usage(self) -> float:
        return self.kv.usage()

    @property
    def num_gpu_blocks(self) -> int:
        return self.kv.num_gpu_blocks

    @property
    def block_size(self) -> int:
        return self.kv.block_size

    @property
    def max_loras(self) -> int:
        return self.scheduler.max_loras

    @property
    def idle(self) -> bool:
        return not self.scheduler.running and not self.scheduler.waiting

    @property
    def next_event_time(self) -> float:
        """Start of the next iteration (with pipeline parallelism: when the engine core next schedules or takes a
        batch's output), or inf when there is nothing to run."""
        if self.batches and len(self.batches) >= self.pp:
            return max(self.now, self.batches[0][0])
        return math.inf if (self.idle or self.stuck) else self.now

    # vLLM's counters (vllm/v1/metrics/loggers.py PrometheusStatLogger), kept by the scheduler
    @property
    def finished(self) -> int:
        return self.scheduler.finished

    @property
    def num_preemptions(self) -> int:
        return self.scheduler.num_preemptions

    @property
    def prompt_tokens_total(self) -> int:
        return self.scheduler.prompt_tokens_total

    @property
    def generation_tokens_total(self) -> int:
        return self.scheduler.generation_tokens_total

    @property
    def prefix_cache_queries(self) -> int:
        return self.scheduler.prefix_cache_queries

    @property
    def prefix_cache_hits(self) -> int:
        return self.scheduler.prefix_cache_hits

    def active_loras(self) -> frozenset[str]:
        run = self.scheduler.run_lora
        return frozenset(run) if run else _NO_LORAS

    def waiting_loras(self) -> frozenset[str]:
        wait = self.scheduler.wait_lora
        return frozenset(wait) if wait else _NO_LORAS

    def match_tokens(self, req: Request) -> int:
        return self.kv.match_tokens(req.hashes, req.seg_tokens)

    @staticmethod
    def reject_message(req: Request, max_model_len: int) -> str:
        p, o = req.prompt_tokens, req.output_tokens
        return MAX_CONTEXT_ERROR.format(max_model_len=max_model_len, total=p + o, prompt=p, output=o)

    # ---------------------------------------------------------------- requests in and out
    def add(self, req: Request, t: float) -> EngineRequest | None:
        """Request arrives at t (after advance(t)). Over-long requests are rejected at once (400, on_finish called)
        and give None; otherwise the engine's handle on it (for `progress`)."""
        req.pod = self.name
        if req.prompt_tokens + req.output_tokens > self.max_model_len:
            req.status = 400
            req.reason = self.reject_message(req, self.max_model_len)
            req.finish = t
            self.rejected += 1
            if self.on_finish is not None:
                self.on_finish(req)
            return None
        if req.output_tokens < 1 or req.prompt_tokens < 1:
            raise ValueError("prompt_tokens and output_tokens must be >= 1")
        if self.idle or self.stuck:
            self.now = max(self.now, t)
        self.stuck = False
        nseg = len(req.seg_tokens) if self.kv.caching else 0
        if nseg:
            bs = self.kv.block_size
            worst = sum(-(-s // bs) for s in req.seg_tokens) + -(-(req.output_tokens - 1) // bs)
            if worst > self.kv.usable:
                nseg = 0  # the block-aligned segment layout would not fit: serve it uncached rather than livelock
        s = EngineRequest(req, self.uid, nseg)
        self.uid += 1
        self.scheduler.add_request(s)
        return s

    def progress(self, s: EngineRequest) -> tuple[int, float]:
        """Read-only, for the live emulator (kubetwin.live.emulator) that streams tokens on the wall clock: (output
        tokens the engine has produced as of `now`, the client's first-token time or -1 while it is not yet fixed --
        with StepModel.first_token_lag it is known only one iteration after the prefill ends)."""
        sched = self.scheduler
        e = s.e + (sched.decode.tick - s.t0) if s.status == DECODING else s.e
        req = s.req
        first = req.first_token
        if first >= 0 and req.status != 200 and any(r is req for r in sched.first_due):
            first = -1.0
        return e, first

    def abort_all(self, t: float) -> list[Request]:
        """The pod is going away: return every unfinished request (running, then waiting) and empty the engine."""
        out = self.scheduler.abort_all()
        self.scheduler.inflight.clear()
        self.batches.clear()
        self.now = max(self.now, t)
        self.stuck = False
        return out

    # ---------------------------------------------------------------- time
    def advance(self, t: float) -> None:
        """Run every iteration that starts before t (iterations are atomic)."""
        if self.pp > 1:
            self._advance_pipelined(t)
            return
        sched = self.scheduler
        decode = sched.decode
        macro = self.macro
        while self.now < t and (sched.running or sched.waiting) and not self.stuck:
            if macro is not None and not sched.explicit and 0 < decode.num <= sched.budget:
                k = macro.jump_len(self.now, t)
                if k > 0:
                    dur = macro.jump(k, self.now)
                    nD = decode.num
                    self.now += dur
                    self.busy_time += dur
                    self.iterations += k
                    self.tokens_computed += nD * k
                    sched.finish_due(self.now)
                    continue
            # vLLM's EngineCore.step: schedule, the forward pass (timed by the StepModel), update_from_output; written
            # out here rather than as a method, one call less per iteration (it showed on benchmarks/bench_engine.py)
            out = sched.schedule(self.now)
            scheduled, nD, fast, ntok = (out.num_scheduled_tokens, out.num_decode_aggregate, out.fast_path,
                                         out.total_num_scheduled_tokens)
            if ntok == 0:
                if not out.preempted:
                    self.stuck = True  # nothing fits even in an empty batch: wait for the next arrival
                sched.update_from_output(scheduled, nD, fast, None)
                continue
            dur = (self.step.iteration_time(ntok, out.num_prefill_pairs, out.num_kv_tokens_read, nD + len(scheduled))
                   + out.num_lora_loads * self.lora_load_time)
            end = self.now + dur
            self.now = end
            self.busy_time += dur
            self.iterations += 1
            self.tokens_computed += ntok
            sched.update_from_output(scheduled, nD, fast, end)


    def _advance_pipelined(self, t: float) -> None:
        """vLLM's EngineCore.step_with_batch_queue (vllm@00080ee1:vllm/v1/engine/core.py) with up to pp batches in
        flight (the executor's max_concurrent_batches = pipeline_parallel_size, async scheduling off): while the queue
        has room the core schedules another batch from the requests not in flight and submits it; a schedule that
        finds nothing still takes a slot (vLLM queues the empty batch: its future resolves once the stages have run
        everything submitted before it); with the queue full it blocks on the oldest batch and processes its output.
        A batch's forward pass goes through the stages in turn, each taking 1/pp of the iteration time the StepModel
        gives for the whole pipeline (its layers / pp plus the activation sends), and a stage runs one batch at a
        time: a lone batch takes the whole iteration time, pp batches in flight finish one every 1/pp of it.
        Twin simplifications: a request in flight is not scheduled again until its batch returns (vLLM also
        pipelines the next prefill chunk of a prompt longer than the token budget), and the CPU overlap of vLLM's
        scheduling with the stages is folded into the per-stage time."""
        sched = self.scheduler
        q = self.batches
        pp = self.pp
        infl = sched.inflight
        stage_free = self.stage_free
        while True:
            if len(q) < pp and (sched.running or sched.waiting) and not self.stuck:
                if self.now >= t:
                    return
                out = sched.schedule(self.now)
                scheduled, nD, fast, ntok = (out.num_scheduled_tokens, out.num_decode_aggregate, out.fast_path,
                                             out.total_num_scheduled_tokens)
                if ntok == 0:
                    sched.update_from_output(scheduled, nD, fast, None)
                    if not infl:  # no batch in flight: nothing fits even in an empty batch
                        q.clear()
                        if not out.preempted:
                            self.stuck = True  # wait for the next arrival
                        continue
                    while len(q) < pp:  # empty batches, done when the batches before them are
                        q.append((self.last_done, -1, [], fast))
                    continue
                dur = (self.step.iteration_time(ntok, out.num_prefill_pairs, out.num_kv_tokens_read,
                                                nD + len(scheduled)) + out.num_lora_loads * self.lora_load_time)
                d = dur / pp
                c = self.now
                for k in range(pp):
                    c = max(c, stage_free[k]) + d
                    stage_free[k] = c
                self.last_done = c
                bid = self.nbatch
                self.nbatch += 1
                for s, _ in scheduled:
                    infl[s] = bid
                q.append((c, bid, [(s, x, s.req.preemptions) for s, x in scheduled], fast))
                self.busy_time += dur
                self.iterations += 1
                self.tokens_computed += ntok
                continue
            if not q:
                return
            done, bid, stamped, fast = q[0]
            if done >= t:
                return
            q.popleft()
            self.now = max(self.now, done)
            if bid < 0:
                continue
            live = []
            for s, x, n in stamped:
                if infl.get(s) == bid:
                    del infl[s]
                if s.req.preemptions == n:  # a request preempted while in flight: its output is dropped
                    live.append((s, x))
            sched.update_from_output(live, 0, fast, done)

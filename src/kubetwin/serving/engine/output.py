"""What one `Scheduler.schedule()` hands the forward pass: vLLM V1's SchedulerOutput
(vllm-project/vllm@00e8f1fd0936d138370d01dbe1b4f8e12baf63b1:vllm/v1/core/sched/output.py), with vLLM's field names
where the twin has the field and the twin's own for what its step model reads of the batch."""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.serving.engine.request import EngineRequest


@dataclass(slots=True)
class SchedulerOutput:
    """One iteration's batch. One is made per iteration, so positional construction and slots.

    Of vLLM's fields: `num_scheduled_tokens` (vLLM: req_id -> tokens) holds the explicit requests with their tokens in
    schedule order; the decode-aggregate members, one token each, are only counted (`num_decode_aggregate`), which
    is what keeps an iteration O(prefilling requests). `total_num_scheduled_tokens` is vLLM's sum over both.
    `preempted` is whether vLLM's `preempted_req_ids` would be non-empty. Not kept: the scheduled_new_reqs /
    scheduled_cached_reqs split (no worker caches request state here), finished_req_ids (update_from_output frees a
    finished request at once), spec-decode, encoder, cascade-attention and connector fields (not modelled)."""

    num_scheduled_tokens: list[tuple[EngineRequest, int]]  # explicit requests scheduled, with their tokens
    num_decode_aggregate: int  # decode-aggregate members scheduled, 1 token each
    fast_path: bool  # schedule() took the fast path (update_from_output rebuilds the aggregate only otherwise)
    preempted: bool  # the running loop preempted (no waiting request was admitted)
    num_lora_loads: int  # adapters loaded for this step (each costs the engine's lora_load_time)
    total_num_scheduled_tokens: int
    num_prefill_pairs: float  # prefill query-key pairs: the step model's attention work
    num_kv_tokens_read: int  # KV tokens the step's attention reads

"""One model server's engine: vLLM V1's engine core and what it composes, under the names of vLLM's
modules (vllm-project/vllm, vllm/v1/): `core` (vllm/v1/engine/core.py's EngineCore step, the
batch queue under pipeline parallelism), `scheduler` (vllm/v1/core/sched/scheduler.py: schedule() and
update_from_output()), `output` (vllm/v1/core/sched/output.py's SchedulerOutput), `request_queue`
(vllm/v1/core/sched/request_queue.py), `request` (vllm/v1/request.py: a request and its status),
`kv_cache_manager` (vllm/v1/core/kv_cache_manager.py: a request's KV layout) over `block_pool`
(vllm/v1/core/block_pool.py: paged blocks with the segment-granular prefix cache); and the twin's own speed-ups,
`decode` (the decode aggregate) and `macro_steps` (closed-form runs of decode iterations). Imports nothing of serving
but `serving.types`."""

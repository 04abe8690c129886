"""The data every serving module shares: a request as the data plane carries it, and what a router sees of an
endpoint. Kept dependency-free so the live gateway can use the same policy library."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

BLOCK_TOKENS = 16  # vLLM's default KV block size (vllm/config/cache.py `block_size` default 16)


@dataclass(slots=True)
class Request:
    """One inference request. The prompt is a chain of segments: `hashes[i]` identifies the whole prefix up to and
    including segment i (so equal hashes mean an equal prefix, as vLLM's chained block hashes do) and
    `seg_tokens[i]` is that segment's length in tokens; sum(seg_tokens) == prompt_tokens. A trace with 512-token
    prefix blocks (Mooncake) gives one segment per block; a shared-prefix generator gives [system prompt, question];
    a trace without prefix information gives one unique segment."""

    id: int
    arrival: float
    prompt_tokens: int
    output_tokens: int
    hashes: tuple[int, ...]
    seg_tokens: tuple[int, ...]
    model: str = ""
    lora: str | None = None
    target: str | None = None  # the InferenceModel target the endpoint picker rewrote `model` to (kept when the
    # target is the base model itself and `lora` is cleared), for requests.csv's `model` column
    priority: int = 0  # InferenceObjective priority; < 0 is sheddable
    session: str | None = None
    # filled in by the engine
    pod: str = ""
    scheduled: float = -1.0  # first iteration that ran any of its tokens
    first_token: float = -1.0
    finish: float = -1.0
    cached_tokens: int = 0  # prompt tokens served from the prefix cache (at the last (re)schedule)
    preemptions: int = 0
    status: int = 0  # HTTP status: 200 done, 400 too long, 404 no such model, 429 shed, 503 no endpoint / aborted
    reason: str = ""  # the error body's message when status is not 200, in the answering component's words


@dataclass(slots=True)
class EndpointSnapshot:
    """What a router knows of the pool's endpoints, as struct-of-arrays so scorers are vectorized. Refreshed at the
    scrape interval (the EPP's --refresh-metrics-interval), so it lags the engines as the real one does."""

    names: list[str]
    waiting: np.ndarray  # int: vllm:num_requests_waiting
    running: np.ndarray  # int: vllm:num_requests_running
    kv_usage: np.ndarray  # float in [0, 1]: vllm:kv_cache_usage_perc
    fresh: np.ndarray  # bool: scraped within the staleness threshold
    active_loras: list[frozenset[str]] = field(default_factory=list)  # vllm:lora_requests_info running_lora_adapters
    waiting_loras: list[frozenset[str]] = field(default_factory=list)
    max_loras: np.ndarray | None = None  # int
    num_gpu_blocks: np.ndarray | None = None  # int, vllm:cache_config_info
    block_size: np.ndarray | None = None  # int

    def __len__(self) -> int:
        return len(self.names)


@dataclass(slots=True)
class Decision:
    """A router's answer: the endpoint's index in the snapshot, or an HTTP status and the reason in the real
    router's words (429 shed, 503 no endpoint)."""

    index: int | None
    status: int = 200
    reason: str = ""


class StepModel(Protocol):
    """Time of one engine iteration (one forward pass of the batch), given what the batch holds.

    num_tokens: tokens computed this iteration (prefill chunk tokens + one per decoding sequence);
    prefill_pairs: sum over prefill chunks of c * (p + c / 2) for a chunk of c tokens after p context tokens (the
    causal attention's query-key pairs); kv_read_tokens: context tokens whose K/V attention reads (sum of each
    scheduled sequence's context length including this iteration's tokens); num_seqs: sequences in the batch."""

    def iteration_time(self, num_tokens: int, prefill_pairs: float, kv_read_tokens: int, num_seqs: int) -> float: ...

    def decode_line(self, num_seqs: int) -> tuple[float, float]:
        """(a, b) with iteration_time(n, 0, C, n) == a + b * C for a decode-only batch of n sequences reading C
        context tokens; lets the engine jump over many decode iterations in closed form."""
        ...


@dataclass(frozen=True)
class TritonModel:
    """What Triton Inference Server adds around the engine of the one LLM model it serves (its config.pbtxt and the
    command line): the names its metrics carry, its ports, its dynamic batcher's wait. Read by
    `serving.modelserver.triton_args`."""

    name: str  # the model's name in the repository: metrics' `model` label, /v2/models/<name>/generate
    backend: str  # "vllm" | "tensorrtllm"
    version: str = "1"
    max_batch_size: int = 0
    instance_count: int = 1
    queue_delay_s: float = 0.0  # dynamic_batching.max_queue_delay_microseconds
    report_vllm_metrics: bool = False  # the vLLM backend's REPORT_CUSTOM_METRICS parameter
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    kv_free_fraction: float | None = None  # TensorRT-LLM: kv_cache_free_gpu_mem_fraction (of free memory)
    max_kv_tokens: int | None = None  # TensorRT-LLM: max_tokens_in_paged_kv_cache


@dataclass(slots=True)
class EngineArgs:
    """A model server's configuration as its command line gives it (vLLM's engine arguments; TGI's flags mapped
    onto them). None means "the server's default", resolved by `serving.modelserver.recognize` for the GPU it runs
    on."""

    model: str
    engine: str = "vllm"  # "vllm" | "tgi" | "trtllm" (Triton's TensorRT-LLM backend)
    served_model_name: list[str] = field(default_factory=list)
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    block_size: int = BLOCK_TOKENS
    enable_prefix_caching: bool = True  # on by default in vLLM V1
    enable_chunked_prefill: bool = True  # always on in vLLM V1
    long_prefill_token_threshold: int = 0
    scheduling_policy: str = "fcfs"  # "fcfs" | "priority"
    enable_lora: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    max_cpu_loras: int | None = None
    lora_modules: list[str] = field(default_factory=list)
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    port: int = 8000
    triton: TritonModel | None = None  # served by Triton Inference Server (its vLLM or TensorRT-LLM backend)
    # dest -> the manifest field its flag came from (e.g. spec.containers[0].args[3]), for validate's diagnostics
    flag_fields: dict[str, str] = field(default_factory=dict)

"""How long one vLLM engine iteration takes on a GPU: a per-operator roofline calibrated on Vidur's profiles.

Each operator of a decoder layer, as vLLM runs it (the same list Vidur profiles, microsoft/vidur@7d475133
vidur/profiling/mlp/mlp_impl.py: emb, input_layernorm, attn_pre_proj (QKV GEMM), attn_rope, attn_post_proj,
post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj, add), costs

    t = (compute^p + memory^p)^(1/p) + t0,   compute = flops / (eta_c * peak),  memory = bytes / (eta_m * HBM bw)

a roofline whose corner is softened by p (p -> inf is the plain max; GEMMs sit near the corner for 64-512 tokens
where neither bound alone fits the measurements) plus a kernel floor t0. flops and bytes are the operator's real
ones (GEMM: 2nKN flops, weights + activations bytes; elementwise ops: bytes read + written). eta_c, eta_m, p and t0
are fitted per operator and GPU on Vidur's measured kernel times (H100: Llama-2-7B, A100: Llama-3-8B, TP 1-8, even
rows; benchmarks/bench_calibration.py refits them with --fit and reports the error on all rows). GPUs without a
profile (L4, H200, B200) take the mean of the H100 and A100 efficiencies against their own peak and bandwidth.

Attention has no profile in the snapshot (Vidur's attention.csv is absent), so it is modelled analytically:
  * prefill (FlashAttention-2/3 style, compute-bound): 4 * pairs * heads * head_dim / tp FLOPs per layer, where
    pairs are the causal query-key pairs the StepModel reports, at Calibration.attn_eta_c of peak;
  * decode and the context part of chunked prefill (memory-bound): every context token's K and V are read once per
    layer, kv_read_tokens * kv_bytes_per_token_per_gpu at Calibration.attn_eta_m of HBM bandwidth;
  * the two add (a prefill chunk's compute and the batch's KV reads are different kernels' bottlenecks), plus a
    per-layer kernel floor. This keeps a decode-only iteration exactly linear in the context it reads.
Tensor parallelism adds two all_reduces of num_tokens * hidden * 2 bytes per layer (workloads.collectives: vLLM's
custom all-reduce up to 8 MiB where measured, NCCL's ring otherwise), the LM
head runs on num_seqs rows (logits only for the sampled positions) and its logits are gathered to rank 0.
Pipeline parallelism (`pp` stages, vLLM's --pipeline-parallel-size) gives each stage ceil(layers / pp) layers: a GPU
holds 1/(tp x pp) of the weights and its stage's share of every token's KV; a batch's iteration passes the stages in
turn, so it costs every layer (as on one stage) plus pp - 1 point-to-point sends of the hidden states. vLLM V1 keeps
up to pp batches in flight (its batch queue); `engine.Engine` runs that queue with each stage taking 1/pp of this
time, so a lone batch takes all of it and pp batches in flight finish one every 1/pp of it.
An iteration also pays Calibration.step_overhead_s of CPU work (scheduling, input preparation, sampling, output
processing) and per_seq_overhead_s per sequence.

The token-dependent part is tabulated once per (model, gpu, tp) so `iteration_time` is a few float operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kubetwin.catalog import gpu_type
from kubetwin.serving.modelserver.modelspec import ModelSpec
from kubetwin.workloads import collectives

__all__ = ["CALIBRATIONS", "OPS", "Calibration", "GpuSpec", "OpEff", "PerfModel", "op_cost"]

GIB = 1024**3
OPS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
       "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")

# What torch.cuda.mem_get_info() reports as total on an "80 GB" card: 79.11-79.25 GiB in vLLM's memory-profiling
# log on H100-80GB ("the current vLLM instance can use total_gpu_memory (79.15GiB)", several public logs of
# vllm/worker/worker.py and v1 gpu_worker.py); applied to every GPU's catalog memory as a twin assumption.
CUDA_VISIBLE_FRACTION = 79.15 / 80
# vLLM's "non_torch_memory takes 0.12-0.35GiB" (CUDA context growth, cuBLAS workspace) in the same logs (TP=1);
# NCCL buffers for TP>1 are a twin assumption.
NON_TORCH_BYTES = 0.3 * GIB
NCCL_BYTES = 0.25 * GIB
# vLLM V1 captures CUDA graphs for batches of up to 512 tokens (vllm/config/compilation.py, the default
# max_capture_size); larger batches run eagerly and pay every kernel's launch floor.
CUDA_GRAPH_MAX_TOKENS = 512


@dataclass(frozen=True)
class GpuSpec:
    """The numbers a roofline needs, read from the catalog (kubetwin/catalog/data/machines.yaml `gpus:`)."""

    name: str
    peak_flops: float  # dense bf16 tensor-core FLOP/s
    hbm_bytes: float
    hbm_bw: float  # bytes/s
    nvlink_bw: float | None  # bytes/s per direction; None = PCIe only

    @classmethod
    def from_catalog(cls, accelerator: str) -> GpuSpec:
        """By GKE accelerator label, e.g. 'nvidia-h100-80gb' (raises catalog.CatalogError when unknown)."""
        g = gpu_type(accelerator)
        if g.bf16_tflops is None or g.hbm_gbps is None:
            raise ValueError(f"GPU {accelerator!r} has no bf16 peak or HBM bandwidth in the catalog")
        nv = None if g.nvlink_gbps is None else g.nvlink_gbps * 1e9
        return cls(g.name, g.bf16_tflops * 1e12, g.memory_gib * GIB, g.hbm_gbps * 1e9, nv)


@dataclass(frozen=True)
class OpEff:
    """Fitted efficiency of one operator on one GPU (see the module docstring for the formula)."""

    eta_c: float
    eta_m: float
    p: float
    t0_us: float


@dataclass(frozen=True)
class Calibration:
    """Per-GPU constants: operator efficiencies plus attention and CPU-overhead assumptions."""

    ops: dict[str, OpEff]
    source: str
    attn_eta_c: float = 0.5
    attn_eta_m: float = 0.6
    attn_t0_us: float = 6.0
    step_overhead_s: float = 2.0e-3
    per_seq_overhead_s: float = 4.0e-6
    request_overhead_s: float = 0.0
    moe_eta_c: float | None = None  # expert GEMMs' share of peak (None: the dense GEMMs' fit)
    graph_t0_scale: float = 1.0  # per-kernel floor inside a CUDA graph, as a share of Vidur's eager-mode floor
    first_token_lag: bool = False  # the client sees the first token one iteration late (engine.scheduler: first_seen)
    extra: dict[str, float] = field(default_factory=dict)


# --- fitted constants (benchmarks/bench_calibration.py --fit, on the even rows of each profile) -----------------
_H100_OPS = {  # Vidur h100 Llama-2-7B, 522 even rows
    "emb": OpEff(eta_c=1.0, eta_m=0.185, p=1.0, t0_us=2.0),
    "input_layernorm": OpEff(eta_c=1.0, eta_m=0.464, p=1.0, t0_us=3.0),
    "attn_pre_proj": OpEff(eta_c=0.75, eta_m=1.0, p=1.5, t0_us=8.0),
    "attn_rope": OpEff(eta_c=1.0, eta_m=0.541, p=1.0, t0_us=2.0),
    "attn_post_proj": OpEff(eta_c=0.75, eta_m=1.0, p=1.5, t0_us=6.0),
    "post_attention_layernorm": OpEff(eta_c=1.0, eta_m=0.398, p=1.0, t0_us=2.0),
    "mlp_up_proj": OpEff(eta_c=0.75, eta_m=1.0, p=1.5, t0_us=8.0),
    "mlp_act": OpEff(eta_c=1.0, eta_m=0.584, p=1.0, t0_us=2.0),
    "mlp_down_proj": OpEff(eta_c=0.95, eta_m=1.0, p=1.0, t0_us=5.0),
    "add": OpEff(eta_c=1.0, eta_m=1.0, p=1.0, t0_us=1.0),
}
_A100_OPS = {  # Vidur a100 Llama-3-8B, 912 even rows
    "emb": OpEff(eta_c=1.0, eta_m=0.147, p=1.0, t0_us=2.0),
    "input_layernorm": OpEff(eta_c=1.0, eta_m=0.341, p=1.0, t0_us=2.0),
    "attn_pre_proj": OpEff(eta_c=0.7, eta_m=1.0, p=2.0, t0_us=10.0),
    "attn_rope": OpEff(eta_c=1.0, eta_m=0.43, p=1.0, t0_us=2.0),
    "attn_post_proj": OpEff(eta_c=0.7, eta_m=0.794, p=1.5, t0_us=4.0),
    "post_attention_layernorm": OpEff(eta_c=1.0, eta_m=0.341, p=1.0, t0_us=2.0),
    "mlp_up_proj": OpEff(eta_c=0.75, eta_m=0.794, p=1.5, t0_us=8.0),
    "mlp_act": OpEff(eta_c=1.0, eta_m=0.501, p=1.0, t0_us=2.0),
    "mlp_down_proj": OpEff(eta_c=0.75, eta_m=0.735, p=1.5, t0_us=3.0),
    "add": OpEff(eta_c=1.0, eta_m=0.858, p=1.0, t0_us=1.0),
}


def _mean_ops(a: dict[str, OpEff], b: dict[str, OpEff]) -> dict[str, OpEff]:
    return {k: OpEff((a[k].eta_c + b[k].eta_c) / 2, (a[k].eta_m + b[k].eta_m) / 2, (a[k].p + b[k].p) / 2,
                     (a[k].t0_us + b[k].t0_us) / 2) for k in a}


# Attention efficiencies (twin assumptions, not fitted): FlashAttention-2 reaches 50-73% of peak forward on A100
# (arXiv 2307.08691), FlashAttention-3 up to 75% on H100 (arXiv 2407.08608); causal varlen chunks of a few thousand
# tokens run below those peaks, hence 0.5. Decode attention over paged KV: 0.6 of HBM bandwidth (A100 and GPUs
# without a profile), below the 0.7-0.85 LLM-Viewer's roofline uses for dense streams
# (../shared/reference/serving-router-keda-latency.md §4.3). 4 us per sequence from BLIS's fitted beta6 (§4.4).
#
# Whole-iteration terms FITTED end to end (benchmarks/e2e/fit_e2e.py --grid refit on the `fit` split of
# benchmarks/e2e/measured: vLLM V1 on H100, Llama-2-7B TP1, Llama-2-70B TP4, Mixtral-8x7B TP2, CodeLlama-34B TP2,
# inference-sim/training@ed5c1d2; the held-out runs are reported by benchmarks/bench_e2e.py), with the custom
# all-reduce sourced (workloads.collectives) and decode attention bounded at 90 % of HBM bandwidth:
#   attn_eta_m 0.9      decode attention reads the paged KV cache at 90 % of HBM bandwidth (H100; the bound);
#   step_overhead_s 0.5 ms  the CPU work per iteration the GPU waits for (was 2 ms, the low end of §4.3's 2-5 ms,
#                       before CUDA graphs and V1's overlapped scheduling were accounted for);
#   graph_t0_scale 1    the fit keeps Vidur's per-kernel floors inside CUDA graphs (0.75 and 0.5 fit worse);
#   moe_eta_c 0.3       the fused-MoE expert GEMMs reach 30 % of peak (Mixtral's prefill; H100);
#   request_overhead_s 11 ms and first_token_lag: the API server's path (HTTP, tokenization, detokenization,
#                       streaming), and the client's first token arriving one iteration after the engine made it.
# The CPU/API-side terms (step_overhead_s, request_overhead_s, first_token_lag) are vLLM's, not the GPU's, and apply
# on every GPU; the kernel-side ones are H100's only.
_CPU_PATH = {"step_overhead_s": 0.5e-3, "request_overhead_s": 11e-3, "first_token_lag": True}
CALIBRATIONS: dict[str, Calibration] = {
    "h100": Calibration(_H100_OPS, "fitted to Vidur h100 Llama-2-7B mlp.csv (even rows, TP 1-8), MIT; whole-iteration "
                        "terms fitted end to end (benchmarks/e2e)", attn_eta_m=0.9, moe_eta_c=0.3, **_CPU_PATH),
    "a100": Calibration(_A100_OPS, "fitted to Vidur a100 Llama-3-8B mlp.csv (even rows, TP 1-8), MIT", **_CPU_PATH),
    "default": Calibration(_mean_ops(_H100_OPS, _A100_OPS), "mean of the H100 and A100 fits (no profile)",
                           **_CPU_PATH),
}


def calibration_for(accelerator: str) -> Calibration:
    """H100-class (h100, h100-mega) use the H100 fit, A100 40/80 the A100 fit; others the mean of both."""
    a = accelerator.lower()
    if "h100" in a:
        return CALIBRATIONS["h100"]
    if "a100" in a:
        return CALIBRATIONS["a100"]
    return CALIBRATIONS["default"]


def op_cost(model: ModelSpec, op: str, n: np.ndarray | float, tp: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(flops, bytes) of one operator over n tokens on one of tp GPUs; vectorised over n."""
    n = np.asarray(n, dtype=float)
    b = model.dtype_bytes
    h, d = model.hidden_size, model.head_dim
    q = model.num_attention_heads * d / tp
    kv = max(1, model.num_kv_heads // tp) * d
    inter = model.intermediate_size / tp
    zero = np.zeros_like(n)
    if op == "emb":
        return zero, n * h * b * 2  # gather one row per token, write it
    if op in ("input_layernorm", "post_attention_layernorm"):
        return zero, n * h * b * 2 + h * b
    if op == "attn_rope":
        return zero, n * (q + kv) * b * 2
    if op == "mlp_act":
        return zero, n * inter * b * (3 if model.gated_mlp else 2)
    if op == "add":
        return zero, n * h * b * 3
    if op == "lm_head":
        k, m = h, model.vocab_size / tp
    elif op == "attn_pre_proj":
        k, m = h, q + 2 * kv
    elif op == "attn_post_proj":
        k, m = q, h
    elif op == "mlp_up_proj":
        k, m = h, inter * (2 if model.gated_mlp else 1)
    elif op == "mlp_down_proj":
        k, m = inter, h
    else:
        raise ValueError(f"unknown operator {op!r}; known: {', '.join(OPS)}, lm_head")
    flops = 2.0 * n * k * m
    weights = np.full_like(n, k * m * b)
    if model.is_moe and op in ("mlp_up_proj", "mlp_down_proj"):
        e, topk = model.num_experts, model.experts_per_token
        flops = flops * topk
        weights = weights * e * (1.0 - (1.0 - topk / e) ** n)  # expected experts any of n tokens routes to
    return flops, weights + n * (k + m) * b


def soft_roofline(flops: np.ndarray, nbytes: np.ndarray, gpu: GpuSpec, eff: OpEff) -> np.ndarray:
    """An operator's time in seconds: the larger of its compute and memory times, softened by a p-norm with the
    smaller, plus a fixed launch cost (the calibrated OpEff). Public: benchmarks/bench_calibration.py scores it."""
    c = flops / (eff.eta_c * gpu.peak_flops)
    m = nbytes / (eff.eta_m * gpu.hbm_bw)
    p = eff.p
    hi = np.maximum(c, m)
    lo = np.minimum(c, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(hi > 0, lo / np.where(hi > 0, hi, 1.0), 0.0)
    return hi * (1.0 + r**p) ** (1.0 / p) + eff.t0_us * 1e-6


def heads_error(model: ModelSpec, tp: int) -> str | None:
    """vLLM's refusal of a tensor-parallel size that does not divide the attention heads (vllm/config/model.py
    ModelConfig.verify_with_parallel_config), in its words; None when it divides them."""
    if tp >= 1 and model.num_attention_heads % tp == 0:
        return None
    return (f"Total number of attention heads ({model.num_attention_heads}) must be divisible by tensor parallel "
            f"size ({tp}).")


class PerfModel:
    """StepModel for one model on `tp` GPUs of one kind. Tables cover 1..max_tokens tokens (and sequences); beyond
    that time grows linearly with the last 1024-token slope."""

    def __init__(self, model: ModelSpec, gpu: GpuSpec, tp: int = 1, calibration: Calibration | None = None,
                 max_tokens: int = 16384, pp: int = 1, tp_link: collectives.Interconnect | None = None,
                 pp_link: collectives.Interconnect | None = None) -> None:
        """`tp_link` / `pp_link`: the tier the tensor-parallel all-reduces / the stage-to-stage sends run over
        when it is not the GPU's own NVLink (a server spread over hosts: sizing.inter_host_links)."""
        refused = heads_error(model, tp)
        if refused:
            raise ValueError(refused)
        self.model, self.gpu, self.tp, self.pp = model, gpu, tp, max(1, pp)
        self.cal = calibration or calibration_for(gpu.name)
        self.link = tp_link or collectives.for_gpu(gpu.name, None if gpu.nvlink_bw is None else gpu.nvlink_bw / 1e9)
        self.pp_link = pp_link or self.link
        cal, L = self.cal, model.num_layers
        self._max = max(2048, int(max_tokens))
        n = np.arange(self._max + 1, dtype=float)
        per_layer = sum(self._op_array(op, n) for op in OPS if op != "emb")
        ar = np.array([0.0] + [2 * collectives.vllm_all_reduce_time(x * model.hidden_size * model.dtype_bytes, tp,
                                                                     self.link) for x in n[1:]])
        tok = L * (per_layer + ar) + self._op_array("emb", n) + self._op_array("input_layernorm", n)  # + final norm
        if cal.graph_t0_scale != 1.0:  # batches vLLM replays as CUDA graphs pay a smaller per-kernel floor
            ops = self.cal.ops
            floors = (L * sum(ops[op].t0_us for op in OPS if op != "emb") + ops["emb"].t0_us
                      + ops["input_layernorm"].t0_us) * 1e-6
            tok[1:CUDA_GRAPH_MAX_TOKENS + 1] -= (1.0 - cal.graph_t0_scale) * floors
        if self.pp > 1:  # the hidden states handed from stage to stage
            tok = tok + (self.pp - 1) * np.array([0.0] + [collectives.send_recv_time(
                x * model.hidden_size * model.dtype_bytes, self.pp_link) for x in n[1:]])
        head = self._op_array("lm_head", n)
        if tp > 1:
            head = head + np.array([0.0] + [collectives.all_gather_time(x * model.vocab_size * model.dtype_bytes,
                                                                         tp, self.link) for x in n[1:]])
        tok[0] = head[0] = 0.0
        self._tok = tok.tolist()
        self._head = head.tolist()
        span = 1024
        self._tok_slope = (tok[-1] - tok[-1 - span]) / span
        self._head_slope = (head[-1] - head[-1 - span]) / span
        q_per_gpu = model.num_attention_heads * model.head_dim / tp
        self._c_pf = L * 4.0 * q_per_gpu / (cal.attn_eta_c * gpu.peak_flops)
        # all layers' K and V: each stage reads its share, in turn
        self._c_kv = self.kv_bytes_per_token_per_gpu * self.pp / (cal.attn_eta_m * gpu.hbm_bw)
        self._c0 = cal.step_overhead_s + L * cal.attn_t0_us * 1e-6
        self._c_seq = cal.per_seq_overhead_s
        self.request_overhead_s = cal.request_overhead_s
        self.first_token_lag = cal.first_token_lag

    def _op_array(self, op: str, n: np.ndarray) -> np.ndarray:
        flops, nbytes = op_cost(self.model, op, n, self.tp)
        eff = self.cal.ops["mlp_up_proj" if op == "lm_head" else op]
        if self.model.is_moe and op in ("mlp_up_proj", "mlp_down_proj") and self.cal.moe_eta_c is not None:
            eff = OpEff(self.cal.moe_eta_c, eff.eta_m, eff.p, eff.t0_us)
        return soft_roofline(flops, nbytes, self.gpu, eff)

    # --- StepModel --------------------------------------------------------------------------------------------
    def iteration_time(self, num_tokens: int, prefill_pairs: float, kv_read_tokens: int, num_seqs: int) -> float:
        """Seconds for one forward pass of the batch (see serving.types.StepModel for the arguments)."""
        mx = self._max
        tok = self._tok[num_tokens] if num_tokens <= mx else self._tok[mx] + (num_tokens - mx) * self._tok_slope
        head = self._head[num_seqs] if num_seqs <= mx else self._head[mx] + (num_seqs - mx) * self._head_slope
        return (tok + head + self._c0 + num_seqs * self._c_seq + prefill_pairs * self._c_pf
                + kv_read_tokens * self._c_kv)

    def decode_line(self, num_seqs: int) -> tuple[float, float]:
        """(a, b) with iteration_time(n, 0, C, n) == a + b * C."""
        return self.iteration_time(num_seqs, 0.0, 0, num_seqs), self._c_kv

    # --- per-operator view (calibration) ----------------------------------------------------------------------
    def op_time(self, op: str, num_tokens: int) -> float:
        """Seconds one GPU spends in operator `op` (a Vidur operator name, or 'lm_head') for num_tokens tokens."""
        return float(self._op_array(op, np.array([float(num_tokens)]))[0])

    # --- memory -----------------------------------------------------------------------------------------------
    @property
    def weight_bytes_per_gpu(self) -> float:
        """Weights one rank holds: every matrix, embedding and LM head is split tp ways and the layers pp ways
        (norms are negligible; the embedding and LM head sit on the first and last stage, counted evenly here)."""
        return self.model.weight_bytes / (self.tp * self.pp)

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        """K/V bytes one rank stores per token; KV heads are replicated when there are fewer than tp of them."""
        m = self.model
        layers = -(-m.num_layers // self.pp)  # the largest stage's layers
        return 2 * layers * max(1, m.num_kv_heads // self.tp) * m.head_dim * m.dtype_bytes

    def activation_peak_bytes(self, max_num_batched_tokens: int = 8192, max_num_seqs: int = 256) -> float:
        """Torch peak of vLLM's profiling run: one layer's live tensors for max_num_batched_tokens tokens (hidden,
        residual, qkv, gate_up and act outputs) plus fp32 logits and probabilities for max_num_seqs rows in the
        dummy sampler run. Llama-3-8B at 8192 tokens: ~1.1 GiB vs 'PyTorch activation peak memory takes
        1.19-1.24GiB' in vLLM's logs on H100."""
        m, t = self.model, self.tp
        qkv = (m.num_attention_heads + 2 * max(1, m.num_kv_heads // t) * t) * m.head_dim / t
        per_tok = (2 * m.hidden_size + qkv + 3 * m.intermediate_size / t) * m.dtype_bytes
        return max_num_batched_tokens * per_tok + 2 * max_num_seqs * m.vocab_size * 4

    def num_gpu_blocks(self, gpu_memory_utilization: float = 0.9, block_size: int = 16,
                       max_num_batched_tokens: int = 8192, max_num_seqs: int = 256) -> int:
        """KV blocks vLLM allocates per rank: total * utilization - weights - activation peak - non-torch memory,
        divided by a block's bytes (vllm/v1/worker/gpu_worker.py determine_available_memory). Raises vLLM's error
        when nothing is left."""
        total = self.gpu.hbm_bytes * CUDA_VISIBLE_FRACTION
        non_torch = NON_TORCH_BYTES + (NCCL_BYTES if self.tp > 1 else 0.0)
        avail = (total * gpu_memory_utilization - self.weight_bytes_per_gpu
                 - self.activation_peak_bytes(max_num_batched_tokens, max_num_seqs) - non_torch)
        blocks = math.floor(avail / (block_size * self.kv_bytes_per_token_per_gpu)) if avail > 0 else 0
        if blocks <= 0:
            # vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory (V0: worker.py raise_if_cache_size_invalid)
            raise ValueError("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                             "when initializing the engine.")
        return blocks

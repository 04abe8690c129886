"""Architectures of common open LLMs, as their Hugging Face config.json gives them.

The serving twin needs a model's shapes, not its weights: GEMM sizes and weight bytes set iteration time, and
`kv_bytes_per_token` sets how many KV blocks fit. Every row cites the HF config it was read from. Instruct/chat
variants share their base model's architecture, so `lookup_model` strips those suffixes before matching.
Parameter counts are derived from the shapes (see `ModelSpec.params`); tests check them against the published
totals so a typo in a shape fails loudly.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

__all__ = ["ModelSpec", "closest_models", "known_models", "lookup_model"]


@dataclass(frozen=True)
class ModelSpec:
    """One decoder-only transformer. MoE models give num_experts/experts_per_token; intermediate_size is then the
    per-expert FFN width. params=0 means "derive from the shapes" (done in __post_init__)."""

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    source: str
    hf_ids: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    params: int = 0
    num_experts: int = 0  # 0 = dense
    experts_per_token: int = 0
    dtype_bytes: int = 2
    gated_mlp: bool = True
    tie_embeddings: bool = False
    qkv_bias: bool = False  # Qwen2/2.5 carry biases on q/k/v
    qk_norm: bool = False  # Qwen3 normalises q and k per head
    norms_per_layer: int = 2  # Gemma-2 has 4 (pre/post attention and pre/post feed-forward)
    sliding_window: int | None = None  # Gemma-2: every other layer; the twin sizes KV as if all layers were full
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.params == 0:
            object.__setattr__(self, "params", self._derived_params())

    def _ffn_params(self) -> int:
        mats = 3 if self.gated_mlp else 2
        return mats * self.hidden_size * self.intermediate_size

    def _derived_params(self) -> int:
        """Exact count for the Llama/Mistral/Qwen/Gemma family: attention, FFN (or experts + router), norms,
        embeddings and an untied LM head."""
        h, d = self.hidden_size, self.head_dim
        q, kv = self.num_attention_heads * d, self.num_kv_heads * d
        attn = h * (q + 2 * kv) + q * h
        if self.qkv_bias:
            attn += q + 2 * kv
        if self.qk_norm:
            attn += 2 * d
        ffn = self._ffn_params() * self.num_experts + h * self.num_experts if self.num_experts else self._ffn_params()
        per_layer = attn + ffn + self.norms_per_layer * h
        emb = self.vocab_size * h
        return self.num_layers * per_layer + emb * (1 if self.tie_embeddings else 2) + h

    @property
    def active_params(self) -> int:
        """Parameters one token touches: for MoE only experts_per_token of the num_experts FFNs."""
        if not self.num_experts:
            return self.params
        idle = (self.num_experts - self.experts_per_token) * self._ffn_params() * self.num_layers
        return self.params - idle

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def kv_bytes_per_token(self, dtype_bytes: int | None = None) -> int:
        """K and V for every layer: 2 * layers * kv_heads * head_dim * bytes (Llama-3-8B bf16: 131072, the 128 KiB
        the GIE EPP's LRU sizing assumes, ../shared/reference/serving-router-keda-latency.md §1.7)."""
        b = self.dtype_bytes if dtype_bytes is None else dtype_bytes
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * b

    @property
    def weight_bytes(self) -> int:
        return self.params * self.dtype_bytes


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


_LLAMA2 = "Llama-2 configs: 4096 positions, vocab 32000, untied"
_LLAMA3 = "Llama-3/3.1 configs: vocab 128256, untied"

_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, 4096, _hf("meta-llama/Llama-2-7b-hf"),
              ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf"), notes=_LLAMA2),
    ModelSpec("llama-2-13b", 40, 5120, 40, 40, 128, 13824, 32000, 4096, _hf("meta-llama/Llama-2-13b-hf"),
              ("meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-13b-chat-hf"), notes=_LLAMA2),
    ModelSpec("llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, 4096, _hf("meta-llama/Llama-2-70b-hf"),
              ("meta-llama/Llama-2-70b-hf", "meta-llama/Llama-2-70b-chat-hf"), notes=_LLAMA2),
    ModelSpec("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256, 8192, _hf("meta-llama/Meta-Llama-3-8B"),
              ("meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-8B-Instruct"), notes=_LLAMA3),
    ModelSpec("llama-3-70b", 80, 8192, 64, 8, 128, 28672, 128256, 8192, _hf("meta-llama/Meta-Llama-3-70B"),
              ("meta-llama/Meta-Llama-3-70B", "meta-llama/Meta-Llama-3-70B-Instruct"), notes=_LLAMA3),
    ModelSpec("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, 131072, _hf("meta-llama/Llama-3.1-8B"),
              ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct"),
              notes=_LLAMA3),
    ModelSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, 131072, _hf("meta-llama/Llama-3.1-70B"),
              ("meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct"),
              aliases=("llama-3.3-70b",), notes=_LLAMA3 + "; Llama-3.3-70B-Instruct has the same config"),
    ModelSpec("llama-3.1-405b", 126, 16384, 128, 8, 128, 53248, 128256, 131072, _hf("meta-llama/Llama-3.1-405B"),
              ("meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.1-405B-Instruct"), notes=_LLAMA3),
    ModelSpec("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, 131072, _hf("meta-llama/Llama-3.2-1B"),
              ("meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-1B-Instruct"), tie_embeddings=True),
    ModelSpec("llama-3.2-3b", 28, 3072, 24, 8, 128, 8192, 128256, 131072, _hf("meta-llama/Llama-3.2-3B"),
              ("meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.2-3B-Instruct"), tie_embeddings=True),
    ModelSpec("mistral-7b-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, 32768, _hf("mistralai/Mistral-7B-v0.1"),
              ("mistralai/Mistral-7B-v0.1", "mistralai/Mistral-7B-Instruct-v0.1", "mistralai/Mistral-7B-Instruct-v0.2"),
              aliases=("mistral-7b-v0.2",), sliding_window=4096,
              notes="v0.1 config has sliding_window 4096; v0.2 drops it (same shapes)"),
    ModelSpec("codellama-34b", 48, 8192, 64, 8, 128, 22016, 32000, 16384, _hf("codellama/CodeLlama-34b-Instruct-hf"),
              ("codellama/CodeLlama-34b-hf", "codellama/CodeLlama-34b-Instruct-hf"),
              notes="Llama-2 architecture with GQA (8 KV heads), rope_theta 1e6, 16384 positions"),
    ModelSpec("mistral-7b-v0.3", 32, 4096, 32, 8, 128, 14336, 32768, 32768, _hf("mistralai/Mistral-7B-v0.3"),
              ("mistralai/Mistral-7B-v0.3", "mistralai/Mistral-7B-Instruct-v0.3"), aliases=("mistral-7b",)),
    ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, 32768, _hf("mistralai/Mixtral-8x7B-v0.1"),
              ("mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1"), aliases=("mixtral-8x7b-v0.1",),
              num_experts=8, experts_per_token=2),
    # Qwen2.5: base configs list 131072 positions, the Instruct configs 32768 (YaRN extends it); the twin keeps the
    # Instruct value since that is what vLLM's default max_model_len becomes for the models people serve.
    ModelSpec("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, 32768, _hf("Qwen/Qwen2.5-7B-Instruct"),
              ("Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct"), qkv_bias=True),
    ModelSpec("qwen2.5-14b", 48, 5120, 40, 8, 128, 13824, 152064, 32768, _hf("Qwen/Qwen2.5-14B-Instruct"),
              ("Qwen/Qwen2.5-14B", "Qwen/Qwen2.5-14B-Instruct"), qkv_bias=True),
    ModelSpec("qwen2.5-32b", 64, 5120, 40, 8, 128, 27648, 152064, 32768, _hf("Qwen/Qwen2.5-32B-Instruct"),
              ("Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-32B-Instruct"), qkv_bias=True),
    ModelSpec("qwen2.5-72b", 80, 8192, 64, 8, 128, 29568, 152064, 32768, _hf("Qwen/Qwen2.5-72B-Instruct"),
              ("Qwen/Qwen2.5-72B", "Qwen/Qwen2.5-72B-Instruct"), qkv_bias=True),
    ModelSpec("qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 151936, 40960, _hf("Qwen/Qwen3-0.6B"),
              ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B-Base"), qk_norm=True, tie_embeddings=True,
              notes="vLLM's default model (ModelConfig.model) when none is given"),
    ModelSpec("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, 40960, _hf("Qwen/Qwen3-8B"),
              ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-Base"), qk_norm=True),
    ModelSpec("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, 40960, _hf("Qwen/Qwen3-32B"),
              ("Qwen/Qwen3-32B",), qk_norm=True),
    ModelSpec("gemma-2-9b", 42, 3584, 16, 8, 256, 14336, 256000, 8192, _hf("google/gemma-2-9b"),
              ("google/gemma-2-9b", "google/gemma-2-9b-it"), tie_embeddings=True, norms_per_layer=4,
              sliding_window=4096),
    ModelSpec("gemma-2-27b", 46, 4608, 32, 16, 128, 36864, 256000, 8192, _hf("google/gemma-2-27b"),
              ("google/gemma-2-27b", "google/gemma-2-27b-it"), tie_embeddings=True, norms_per_layer=4,
              sliding_window=4096),
)

# Suffixes that name a fine-tune or a packaging of the same architecture (stripped repeatedly from the end).
_SUFFIXES = ("-instruct", "-chat", "-hf", "-it", "-base")


def _norm(name: str) -> str:
    """Canonical key: lower case, org dropped, 'Meta-' dropped, 'llama3' -> 'llama-3', fine-tune suffixes dropped
    (a Mistral/Mixtral '-instruct-v0.3' keeps its version)."""
    s = name.strip().lower().rsplit("/", 1)[-1].replace("_", "-")
    s = re.sub(r"^meta-", "", s)
    s = re.sub(r"^llama-?(\d)", r"llama-\1", s)
    s = re.sub(r"-instruct(-v\d)", r"\1", s)
    changed = True
    while changed:
        changed = False
        for suf in _SUFFIXES:
            if s.endswith(suf):
                s, changed = s[: -len(suf)], True
    return s


def _index() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for m in _MODELS:
        for key in (m.name, *m.aliases, *m.hf_ids):
            out.setdefault(_norm(key), m)
    return out


_INDEX = _index()


def lookup_model(name: str) -> ModelSpec | None:
    """The architecture behind a model name or HF id (case-insensitive; Instruct/chat variants map to their base),
    e.g. 'meta-llama/Meta-Llama-3-8B-Instruct' -> llama-3-8b. None when unknown."""
    return _INDEX.get(_norm(name))


def known_models() -> list[str]:
    """Canonical names of the built-in table, in table order."""
    return [m.name for m in _MODELS]


def closest_models(name: str, n: int = 3) -> list[str]:
    """Canonical names nearest to `name`, for "did you mean" errors."""
    hits = difflib.get_close_matches(_norm(name), list(_INDEX), n=n * 3, cutoff=0.4)
    out: list[str] = []
    for h in hits:
        if _INDEX[h].name not in out:
            out.append(_INDEX[h].name)
    return out[:n]


def lookup_server_model(model: str, served_names: list[str] | tuple[str, ...] = ()) -> ModelSpec | None:
    """The architecture a server loads: `--model` as a name; for a local path (weights on a volume) the folder's
    name, then `--served-model-name`, since the twin cannot read the folder's config.json."""
    found = lookup_model(model)
    if found is None and model.startswith("/"):
        found = lookup_model(model.rstrip("/").rsplit("/", 1)[-1])
    for name in served_names:
        if found is not None:
            break
        found = lookup_model(name)
    return found

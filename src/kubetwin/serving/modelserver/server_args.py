"""What the model servers' command-line parsers share with the code that finds them: `ArgToken` (one command-line word
with the field path it came from), `ArgProblem` (one finding, for validate.py's Diagnostic), `ModelServerError` (the
problems that would make the real server exit) and the notice for real flags the twin does not model. Its own module
so `modelserver`, `vllm_args` and `tgi_args` can all use them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

from kubetwin.serving.types import EngineArgs


@dataclass(frozen=True)
class ArgProblem:
    """One finding about a model server's command line, for validate.py's Diagnostic."""

    field: str  # e.g. spec.template.spec.containers[0].args[3]
    message: str
    hint: str = ""
    severity: str = "error"  # "error" | "notice"


class ModelServerError(ValueError):
    def __init__(self, problems: list[ArgProblem]):
        self.problems = problems
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))


@dataclass
class ArgToken:
    """One command-line word and the manifest field it came from (for file:line in diagnostics)."""

    text: str
    field: str


def ignored_flag(tok: ArgToken, key: str) -> ArgProblem:
    """The notice for a real server flag the twin does not model."""
    return ArgProblem(tok.field, f"{key} is a real server flag the twin does not model; ignored", "",
                      severity="notice")


# Flags the parsers read whose values would change the answer but that the twin does not model: (dest, default,
# what the run does instead). Every other flag in vllm_args._VLLM and tgi_args._TGI is modelled (the engine, its
# sizing or the data plane) except --port, which only names where the server listens.
_UNMODELLED = (
    ("data_parallel_size", 1, "the pod serves as one engine on tensor x pipeline parallel GPUs"),
    ("quantization", None, "weights and step times are the model's bf16 ones"),
    ("kv_cache_dtype", "auto", "the KV cache is sized and read in the model's dtype (bf16)"),
    ("dtype", "auto", "weights, KV and step times use the model's own dtype"),
    ("enable_chunked_prefill", True, "the engine chunks prefills as vLLM V1 does by default"),
    ("max_lora_rank", 16, "LoRA adapters' GPU memory is not taken from the KV cache; only their slots and load "
                          "time are modelled"),
)


def unmodelled(args: EngineArgs, flags: dict[str, str] | None = None) -> list[ArgProblem]:
    """A notice for each flag given a value the twin does not model, naming what the run does instead; `flags`
    names the server's own flag per dest where it is not vLLM's (TGI's --quantize)."""
    out = []
    for dest, default, instead in _UNMODELLED:
        value = getattr(args, dest)
        if dest in args.flag_fields and value != default and not (dest == "dtype" and value in ("bfloat16",
                                                                                                  "half", "float16")):
            flag = (flags or {}).get(dest, "--" + dest.replace("_", "-"))
            shown = f"--no-{flag[2:]}" if value is False else f"{flag} {value}"
            out.append(ArgProblem(args.flag_fields[dest], f"{shown} is not modelled: {instead}", "", "notice"))
    return out

"""vLLM's command line as its argparse reads it: the option table (name -> EngineArgs field and type), aliases,
choices and the real flags the twin accepts without modelling, then the parser.

Source: argparse via FlexibleArgumentParser (vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py add_cli_args,
vllm/entrypoints/openai/cli_args.py, vllm/entrypoints/cli/serve.py, vllm/utils/argparse_utils.py): `--flag v`,
`--flag=v`, unique-prefix abbreviations (argparse's allow_abbrev), `_` in long names read as `-`, boolean flags with
`--no-` forms (BooleanOptionalAction), `vllm serve MODEL` positional, `--model` moved to the front. Errors print as
`vllm serve: error: ...` (the serve subparser's prog) or `api_server.py: error: ...` for `python -m
vllm.entrypoints.openai.api_server` (argparse's prog is the script's basename). Apart from `modelserver` because the
flag table alone is most of it and changes with every vLLM release."""

from __future__ import annotations

import re

from kubetwin.serving.modelserver.server_args import ArgProblem, ArgToken, ignored_flag, unmodelled
from kubetwin.serving.types import EngineArgs

DEFAULT_VLLM_MODEL = "Qwen/Qwen3-0.6B"


# ---- vLLM's options: name -> (dest, type); aliases map to the canonical long name ----
# types: int, hrint (human_readable_int), float, str, bool (BooleanOptionalAction: --x / --no-x), true
# (store_true), list (nargs '+'), opt (takes one value, ignored by the twin), flag (no value, ignored).

_VLLM: dict[str, tuple[str, str]] = {
    "--model": ("model", "str"),
    "--served-model-name": ("served_model_name", "list"),
    "--tensor-parallel-size": ("tensor_parallel_size", "int"),
    "--pipeline-parallel-size": ("pipeline_parallel_size", "int"),
    "--data-parallel-size": ("data_parallel_size", "int"),
    "--max-num-seqs": ("max_num_seqs", "int"),  # SchedulerConfig.max_num_seqs: SkipValidation[int] -> type=int
    "--max-num-batched-tokens": ("max_num_batched_tokens", "hrint"),  # human_readable_ints in _compute_kwargs
    "--max-model-len": ("max_model_len", "hrint"),
    "--gpu-memory-utilization": ("gpu_memory_utilization", "float"),
    "--block-size": ("block_size", "int"),
    "--enable-prefix-caching": ("enable_prefix_caching", "bool"),
    "--enable-chunked-prefill": ("enable_chunked_prefill", "bool"),
    "--long-prefill-token-threshold": ("long_prefill_token_threshold", "int"),
    "--scheduling-policy": ("scheduling_policy", "str"),
    "--enable-lora": ("enable_lora", "bool"),
    "--max-loras": ("max_loras", "int"),
    "--max-lora-rank": ("max_lora_rank", "int"),
    "--max-cpu-loras": ("max_cpu_loras", "int"),
    "--lora-modules": ("lora_modules", "list"),
    "--dtype": ("dtype", "str"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--quantization": ("quantization", "str"),
    "--port": ("port", "int"),
}
_VLLM_ALIASES = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
                 "-q": "--quantization", "-O": "--compilation-config", "-dcp": "--decode-context-parallel-size",
                 "-dpn": "--data-parallel-rank", "-dpr": "--data-parallel-start-rank",
                 "-dpl": "--data-parallel-size-local", "-dpa": "--data-parallel-address",
                 "-dpp": "--data-parallel-rpc-port", "-dpb": "--data-parallel-backend"}
_VLLM_CHOICES = {
    "scheduling_policy": ("fcfs", "priority"),  # vllm/config/scheduler.py SchedulerPolicy
    "block_size": ("1", "8", "16", "32", "64", "128"),  # vllm/config/cache.py BlockSize (CUDA)
}
# Real vLLM flags the twin accepts without modelling (value-taking / boolean), with a notice.
_VLLM_IGNORED_VALUE = (
    "--host --download-dir --swap-space --kv-events-config --tokenizer --tokenizer-mode --revision --code-revision "
    "--tokenizer-revision --seed --hf-config-path --runner --convert --task --allowed-local-media-path "
    "--allowed-media-domains --rope-scaling --rope-theta --max-logprobs --logprobs-mode --config-format --hf-token "
    "--hf-overrides --pooler-config --override-pooler-config --logits-processor-pattern --generation-config "
    "--override-generation-config --model-impl --override-attention-dtype --logits-processors "
    "--io-processor-plugin --load-format --safetensors-load-strategy --model-loader-extra-config "
    "--ignore-patterns --pt-load-map-location --reasoning-parser --guided-decoding-backend "
    "--distributed-executor-backend --decode-context-parallel-size --data-parallel-rank --data-parallel-start-rank "
    "--data-parallel-size-local --data-parallel-address --data-parallel-rpc-port --data-parallel-backend "
    "--all2all-backend --dbo-decode-token-threshold --dbo-prefill-token-threshold --eplb-config "
    "--expert-placement-strategy --num-redundant-experts --eplb-window-size --eplb-step-interval "
    "--max-parallel-loading-workers --worker-cls --worker-extension-cls --kv-cache-memory-bytes "
    "--num-gpu-blocks-override --prefix-caching-hash-algo --cpu-offload-gb --mamba-cache-dtype "
    "--mamba-ssm-cache-dtype --mamba-block-size --limit-mm-per-prompt --media-io-kwargs --mm-processor-kwargs "
    "--mm-processor-cache-gb --mm-processor-cache-type --mm-shm-cache-max-object-size-mb --mm-encoder-tp-mode "
    "--mm-encoder-attn-backend --video-pruning-rate --lora-extra-vocab-size --lora-dtype --default-mm-loras "
    "--show-hidden-metrics-for-version --otlp-traces-endpoint --collect-detailed-traces "
    "--max-num-partial-prefills --max-long-partial-prefills --num-lookahead-slots --scheduler-cls "
    "--cudagraph-capture-sizes --cuda-graph-sizes --max-cudagraph-capture-size --speculative-config "
    "--kv-transfer-config --compilation-config --additional-config --structured-outputs-config "
    "--chat-template --chat-template-content-format --response-role --tool-call-parser --tool-parser-plugin "
    "--tool-server --log-config-file --max-log-len --uds --uvicorn-log-level --disable-access-log-for-endpoints "
    "--allowed-origins --allowed-methods --allowed-headers --api-key --ssl-keyfile --ssl-certfile --ssl-ca-certs "
    "--ssl-cert-reqs --root-path --middleware --h11-max-incomplete-event-size --h11-max-header-count "
    "--default-chat-template-kwargs --api-server-count --config --optimization-level").split()
_VLLM_IGNORED_BOOL = (
    "--trust-remote-code --enforce-eager --disable-log-requests --enable-log-requests --skip-tokenizer-init "
    "--enable-prompt-embeds --disable-sliding-window --disable-cascade-attn --enable-sleep-mode --use-tqdm-on-load "
    "--data-parallel-hybrid-lb --enable-expert-parallel --enable-dbo --disable-nccl-for-dp-synchronization "
    "--enable-eplb --eplb-log-balancedness --ray-workers-use-nsight --disable-custom-all-reduce "
    "--calculate-kv-scales --kv-sharing-fast-prefill --enable-mm-embeds --interleave-mm-strings "
    "--skip-mm-profiling --fully-sharded-loras --disable-chunked-mm-input --disable-hybrid-kv-cache-manager "
    "--async-scheduling --trust-request-chat-template --return-tokens-as-token-ids --enable-auto-tool-choice "
    "--exclude-tools-when-tool-choice-none --enable-prompt-tokens-details --enable-server-load-tracking "
    "--enable-force-include-usage --enable-tokenizer-info-endpoint --enable-log-outputs "
    "--disable-uvicorn-access-log --allow-credentials --enable-ssl-refresh --enable-request-id-headers "
    "--disable-fastapi-docs --enable-offline-docs --disable-frontend-multiprocessing").split()
_VLLM_IGNORED_TRUE = ("--disable-log-stats --aggregate-engine-logging --headless "
                      "--enable-multimodal-encoder-data-parallel --disable-mm-preprocessor-cache").split()
_LIST_IGNORED = {"--allowed-origins", "--allowed-methods", "--allowed-headers", "--api-key", "--middleware",
                 "--cudagraph-capture-sizes", "--cuda-graph-sizes", "--ignore-patterns", "--logits-processors",
                 "--allowed-media-domains", "--collect-detailed-traces"}


def _hrint(v: str) -> int:
    """vLLM's human_readable_int (vllm/utils/argparse_utils.py): 1k=1000, 1K=1024, 25.6k=25600; decimals are
    not allowed with binary suffixes."""
    v = v.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", v)
    if m:
        number, suffix = m.groups()
        dec = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        if suffix in dec:
            return int(float(number) * dec[suffix])
        if "." in number:
            raise _ArgTypeError(f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use "
                                f"{number}{suffix.lower()} instead?")
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(v)


class _ArgTypeError(ValueError):
    pass


def _convert(kind: str, value: str, shown: str, prog: str) -> object:
    """A value as argparse's type= would convert it, raising the message argparse prints."""
    try:
        if kind == "int":
            return int(value)
        if kind == "hrint":
            return _hrint(value)
        if kind == "float":
            return float(value)
    except _ArgTypeError as exc:
        raise _ArgTypeError(f"{prog}: error: argument {shown}: {exc}") from None
    except ValueError:
        tname = {"int": "int", "hrint": "human_readable_int", "float": "float"}[kind]
        raise _ArgTypeError(f"{prog}: error: argument {shown}: invalid {tname} value: '{value}'") from None
    return value


def _vllm_lookup(name: str) -> tuple[str | None, list[str]]:
    """Canonical long option for a (possibly abbreviated) name, or (None, candidates)."""
    known = list(_VLLM) + _VLLM_IGNORED_VALUE + _VLLM_IGNORED_BOOL + _VLLM_IGNORED_TRUE
    bools = [f"--no-{n[2:]}" for n in (*[k for k, (_, t) in _VLLM.items() if t == "bool"], *_VLLM_IGNORED_BOOL)]
    if name in _VLLM_ALIASES:
        return _VLLM_ALIASES[name], []
    if name in known or name in bools:
        return name, []
    if name.startswith("--"):
        cands = sorted({k for k in known + bools if k.startswith(name)})
        if len(cands) == 1:
            return cands[0], []
        return None, cands
    return None, []


def parse_vllm(argv: list[ArgToken], prog: str, base: str) -> tuple[EngineArgs | None, list[ArgProblem]]:
    problems: list[ArgProblem] = []
    values: dict[str, object] = {}
    fields: dict[str, str] = {}  # dest -> the flag's field
    unrecognized: list[ArgToken] = []
    positional: list[ArgToken] = []
    shown_names = {k: k for k in _VLLM} | {v: f"{v}/{k}" for k, v in _VLLM_ALIASES.items()}
    i = 0
    while i < len(argv):
        tok = argv[i]
        text = tok.text
        if text == "--":
            positional += argv[i + 1:]
            break
        if not text.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", text):
            positional.append(tok)
            i += 1
            continue
        name, explicit = (text.split("=", 1) + [None])[:2] if "=" in text else (text, None)
        if name.startswith("--"):  # FlexibleArgumentParser: underscores in long names read as dashes
            name = "--" + name[2:].replace("_", "-")
        canon, cands = _vllm_lookup(name)
        if canon is None:
            if cands:
                problems.append(ArgProblem(tok.field, f"{prog}: error: ambiguous option: {name} could match "
                                           f"{', '.join(cands)}", "spell the option out"))
                return None, problems
            unrecognized.append(tok)
            i += 1
            while i < len(argv) and not argv[i].text.startswith("-"):  # argparse leaves its values as extras
                unrecognized.append(argv[i])
                i += 1
            continue
        negated = canon.startswith("--no-")
        key = "--" + canon[5:] if negated else canon
        dest, kind = _VLLM.get(key, (None, "bool" if key in _VLLM_IGNORED_BOOL else
                                     "true" if key in _VLLM_IGNORED_TRUE else
                                     "list" if key in _LIST_IGNORED else "opt"))
        shown = shown_names.get(key, key) if not negated else canon
        i += 1
        if kind in ("bool", "true"):
            if explicit is not None:
                problems.append(ArgProblem(tok.field, f"{prog}: error: argument {shown}: ignored explicit "
                                           f"argument '{explicit}'", f"write {name} alone (or --no-{key[2:]})"))
                return None, problems
            if dest is not None:
                values[dest] = not negated
                fields[dest] = tok.field
            else:
                problems.append(ignored_flag(tok, key))
            continue
        value_field = tok.field
        if explicit is not None:
            raw = [explicit]
        elif kind == "list":
            raw = []
            while i < len(argv) and not argv[i].text.startswith("-"):
                raw.append(argv[i].text)
                i += 1
        elif i < len(argv) and not (argv[i].text.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?",
                                                                                      argv[i].text)):
            raw = [argv[i].text]
            value_field = argv[i].field
            i += 1
        else:
            raw = []
        if not raw:
            many = "expected at least one argument" if kind == "list" else "expected one argument"
            problems.append(ArgProblem(tok.field, f"{prog}: error: argument {shown}: {many}",
                                       f"give {key} a value, e.g. {key}=VALUE"))
            return None, problems
        if dest is None:
            problems.append(ignored_flag(tok, key))
            continue
        fields[dest] = value_field
        if kind == "list":
            values[dest] = raw
            continue
        try:
            value = _convert(kind, raw[0], shown, prog)
        except _ArgTypeError as exc:
            problems.append(ArgProblem(value_field, str(exc), f"set {key} to a valid value"))
            return None, problems
        choices = _VLLM_CHOICES.get(dest)
        if choices and str(value) not in choices:
            problems.append(ArgProblem(value_field, f"{prog}: error: argument {shown}: invalid choice: '{value}' "
                                       f"(choose from {', '.join(repr(c) for c in choices)})",
                                       f"use one of {', '.join(choices)}"))
            return None, problems
        values[dest] = value
    model_tag = None
    if prog == "vllm serve" and positional:
        model_tag, positional = positional[0], positional[1:]  # serve's `model_tag` (nargs='?')
    unrecognized += positional
    if unrecognized:
        hint = "remove them, or check their spelling against `vllm serve --help=all`"
        if any(t.text == "serve" for t in unrecognized):
            hint = ("the vllm/vllm-openai image's ENTRYPOINT is already `vllm serve`: drop `vllm serve` from "
                    "args, or set command: [vllm, serve]")
        problems.append(ArgProblem(unrecognized[0].field, f"{prog}: error: unrecognized arguments: "
                                   f"{' '.join(t.text for t in unrecognized)}", hint))
        return None, problems
    model = str(values.pop("model", "") or "") or (model_tag.text if model_tag else "")
    if not model:
        # no model on the command line: vLLM serves EngineArgs.model's default, ModelConfig.model =
        # "Qwen/Qwen3-0.6B" in recent vLLM (vllm/config/model.py) -- it starts, so this is a notice, not an error
        field = argv[0].field if argv else base
        model = DEFAULT_VLLM_MODEL
        problems.append(ArgProblem(field, f"{prog}: no model given, so vLLM serves its default model {model}",
                                   "pass the model: `vllm serve MODEL` or --model MODEL", "notice"))
    args = EngineArgs(model=model, engine="vllm")
    for k, v in values.items():
        setattr(args, k, v)
    if not args.served_model_name:
        args.served_model_name = [model]
    args.flag_fields = fields
    return args, problems + unmodelled(args)


"""Recognize model servers (vLLM, TGI) in the pod specs users write and read their command lines into EngineArgs.

The parser follows the servers' own parsers so a flag the real server rejects is rejected here, in its words:
- vLLM: argparse via FlexibleArgumentParser (vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py add_cli_args,
  vllm/entrypoints/openai/cli_args.py, vllm/entrypoints/cli/serve.py, vllm/utils/argparse_utils.py): `--flag v`,
  `--flag=v`, unique-prefix abbreviations (argparse's allow_abbrev), `_` in long names read as `-`, boolean flags
  with `--no-` forms (BooleanOptionalAction), `vllm serve MODEL` positional, `--model` moved to the front.
  Errors print as `vllm serve: error: ...` (the serve subparser's prog) or `api_server.py: error: ...` for
  `python -m vllm.entrypoints.openai.api_server` (argparse's prog is the script's basename).
- TGI: clap (huggingface/text-generation-inference@009c4e0b:launcher/src/main.rs `struct Args`): every flag
  also reads its upper-case env var (`#[clap(long, env)]`), e.g. MODEL_ID, NUM_SHARD.

Entry points for the rest of the twin: `inspect_model_server` (problems as (field, message, hint, severity) for
validate.py), `find_model_server` (raises on errors) and `resolve_defaults`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from kubetwin.serving.types import EngineArgs

# Container image sizes (GB, compressed, linux/amd64) for the image-pull part of a cold start.
IMAGE_SIZES_GB: dict[str, float] = {
    # "docker pull vllm/vllm-openai:latest — the image is around 12 GB" (vllm-project/vllm#27154, 2025-10;
    # discuss.vllm.ai "current vllm docker image size is 12.64GB"); 28.6 GB unpacked (vllm-project/vllm#22377).
    "vllm/vllm-openai": 12.0,
    "vllm/vllm-tpu": 8.0,  # twin assumption (no published size found)
    "ghcr.io/huggingface/text-generation-inference": 6.0,  # twin assumption (no published size found)
}


DEFAULT_VLLM_MODEL = "Qwen/Qwen3-0.6B"


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

# ---- TGI's flags (launcher/src/main.rs Args); value-taking unless listed as switches ----
_TGI: dict[str, tuple[str, str]] = {
    "--model-id": ("model", "str"),
    "--num-shard": ("tensor_parallel_size", "int"),
    "--max-concurrent-requests": ("max_num_seqs", "int"),  # an admission limit in TGI (429 beyond it)
    "--max-batch-prefill-tokens": ("max_num_batched_tokens", "int"),
    "--max-total-tokens": ("max_model_len", "int"),
    "--max-input-tokens": ("_max_input_tokens", "int"),
    "--max-input-length": ("_max_input_tokens", "int"),  # "Legacy version of max_input_tokens"
    "--cuda-memory-fraction": ("gpu_memory_utilization", "float"),
    "--port": ("port", "int"),
    "--quantize": ("quantization", "str"),
    "--dtype": ("dtype", "str"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--lora-adapters": ("_lora_adapters", "str"),
}
_TGI_SHORT = {"-p": "--port", "-e": "--env"}
_TGI_IGNORED_VALUE = (
    "--revision --validation-workers --sharded --speculate --max-best-of --max-stop-sequences --max-top-n-tokens "
    "--waiting-served-ratio --max-batch-total-tokens --max-waiting-tokens --max-batch-size --cuda-graphs "
    "--hostname --shard-uds-path --master-addr --master-port --huggingface-hub-cache --weights-cache-override "
    "--rope-scaling --rope-factor --otlp-endpoint --otlp-service-name --cors-allow-origin --api-key "
    "--watermark-gamma --watermark-delta --ngrok-authtoken --ngrok-edge --tokenizer-config-path "
    "--max-client-batch-size --usage-stats --payload-limit --prefill-chunking --max-batch-total-tokens").split()
_TGI_SWITCHES = ("--trust-remote-code --disable-custom-kernels --json-output --ngrok --disable-grammar-support "
                 "--env").split()

_VLLM_IMAGE = re.compile(r"(^|/)vllm-openai(:|@|$)|(^|/)vllm/vllm-tpu(:|@|$)|^vllm/vllm-openai")
_TGI_IMAGE = re.compile(r"(^|/)huggingface/text-generation-inference(:|@|$)")
_SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env"}


@dataclass
class _Tok:
    text: str
    field: str


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of command/args: defined variables are replaced, $$ escapes, undefined
    references stay as written (k8s.io/kubernetes third_party/forked/golang/expansion/expand.go)."""
    out, i = [], 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("$(", i) and (j := value.find(")", i + 2)) != -1:
            name = value[i + 2:j]
            out.append(env[name] if name in env else value[i:j + 1])
            i = j + 1
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _shell_expand(word: str, env: dict[str, str]) -> str:
    """$VAR / ${VAR} in a `sh -c` script (only the container's own env values are known)."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), word)


def _tokens(container: dict, base: str, env: dict[str, str]) -> tuple[list[_Tok], bool]:
    """command + args after env expansion, each with its field path; a `sh -c "..."` script is split into
    words (all pointing at the script's field). Returns (tokens, command_given)."""
    toks = [_Tok(_expand(str(v), env), f"{base}.command[{i}]") for i, v in enumerate(container.get("command") or [])]
    toks += [_Tok(_expand(str(v), env), f"{base}.args[{i}]") for i, v in enumerate(container.get("args") or [])]
    if toks and toks[0].text.rsplit("/", 1)[-1] in {"sh", "bash"} and len(toks) >= 3 and toks[1].text == "-c":
        script = toks[2]
        try:
            words = shlex.split(script.text)
        except ValueError:
            return toks, bool(container.get("command"))
        cut = next((k for k, w in enumerate(words) if w in {"&&", "||", ";", "|", "&"}), len(words))
        # take the last command of a "setup && server" chain when the server comes after the operator
        chain, start = [], 0
        for k, w in enumerate(words + ["&&"]):
            if w in {"&&", "||", ";", "|", "&"}:
                chain.append(words[start:k])
                start = k + 1
        words = next((c for c in chain if _kind_of([_Tok(w, "") for w in c if w != "exec"]) is not None),
                     words[:cut])
        words = [w for w in words if w != "exec"]
        return [_Tok(_shell_expand(w, env), script.field) for w in words] + toks[3:], True
    return toks, bool(container.get("command"))


def _kind_of(toks: list[_Tok]) -> tuple[str, str, int] | None:
    """(engine, prog, index of the first argument) when the command runs a known server."""
    words = [t.text for t in toks]
    for k, w in enumerate(words):
        name = w.rsplit("/", 1)[-1]
        if name == "vllm" and k + 1 < len(words) and words[k + 1] == "serve":
            return "vllm", "vllm serve", k + 2
        if name.startswith("python") and words[k + 1:k + 3] == ["-m", "vllm.entrypoints.openai.api_server"]:
            return "vllm", "api_server.py", k + 3
        if name == "text-generation-launcher":
            return "tgi", "text-generation-launcher", k + 1
    return None


def inspect_model_server(pod_spec: dict, path: str = "spec") -> tuple[int, EngineArgs | None, list[ArgProblem]] | None:
    """(container index, EngineArgs or None when the command line has errors, problems) for the first
    container running vLLM or TGI; None when no container does. `path` is the pod spec's field path
    (spec.template.spec for a Deployment)."""
    for ci, c in enumerate(pod_spec.get("containers") or []):
        if not isinstance(c, dict):
            continue
        base = f"{path}.containers[{ci}]"
        env = {str(e["name"]): str(e.get("value", "")) for e in c.get("env") or []
               if isinstance(e, dict) and "name" in e and "valueFrom" not in e}
        toks, command_given = _tokens(c, base, env)
        image = str(c.get("image", ""))
        kind = None
        if not command_given:
            # args are appended to the image's entrypoint: vllm/vllm-openai has ENTRYPOINT ["vllm", "serve"]
            # (docker/Dockerfile); TGI's is ["text-generation-launcher"] with CMD ["--json-output"] (its Dockerfile)
            image_name = image.split("@")[0]
            if _VLLM_IMAGE.search(image_name):
                kind = ("vllm", "vllm serve", 0)
            elif _TGI_IMAGE.search(image_name):
                kind = ("tgi", "text-generation-launcher", 0)
        if kind is None:
            kind = _kind_of(toks)
        if kind is None:
            continue
        engine, prog, start = kind
        argv = toks[start:]
        if engine == "vllm":
            args, problems = _parse_vllm(argv, prog, base)
        else:
            gpus = _gpu_count(c)
            args, problems = _parse_tgi(argv, env, base, gpus, bool(_TGI_IMAGE.search(image)))
        if args is None and not problems:
            continue
        return ci, (None if any(p.severity == "error" for p in problems) else args), problems
    return None


def find_model_server(pod_spec: dict, path: str = "spec") -> tuple[int, EngineArgs] | None:
    """(container index, EngineArgs) of the pod's model server, None if it runs none; ModelServerError (with
    the problems) when its command line would make the real server exit."""
    found = inspect_model_server(pod_spec, path)
    if found is None:
        return None
    ci, args, problems = found
    if args is None:
        raise ModelServerError([p for p in problems if p.severity == "error"])
    return ci, args


def _gpu_count(container: dict) -> int:
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        v = (res.get(part) or {}).get("nvidia.com/gpu")
        if v is not None:
            try:
                return max(1, int(str(v)))
            except ValueError:
                return 1
    return 1


# ---- vLLM ----


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


def _parse_vllm(argv: list[_Tok], prog: str, base: str) -> tuple[EngineArgs | None, list[ArgProblem]]:
    problems: list[ArgProblem] = []
    values: dict[str, object] = {}
    unrecognized: list[_Tok] = []
    positional: list[_Tok] = []
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
            else:
                problems.append(_ignored(tok, key))
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
            problems.append(_ignored(tok, key))
            continue
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
    return args, problems


def _ignored(tok: _Tok, key: str) -> ArgProblem:
    return ArgProblem(tok.field, f"{key} is a real server flag the twin does not model; ignored", "",
                      severity="notice")


# ---- TGI ----


def _parse_tgi(argv: list[_Tok], env: dict[str, str], base: str, gpus: int,
               tgi_image: bool = False) -> tuple[EngineArgs | None, list[ArgProblem]]:
    """clap semantics: `--flag v` / `--flag=v`; `_` is not accepted; env vars fill flags not on the line."""
    prog = "text-generation-launcher"
    problems: list[ArgProblem] = []
    values: dict[str, tuple[str, str]] = {}  # dest -> (raw, shown)
    fields: dict[str, str] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        name, explicit = (tok.text.split("=", 1) + [None])[:2] if "=" in tok.text else (tok.text, None)
        name = _TGI_SHORT.get(name, name)
        i += 1
        if name in _TGI_SWITCHES:
            continue
        if name not in _TGI and name not in _TGI_IGNORED_VALUE:
            problems.append(ArgProblem(tok.field, f"{prog}: error: unexpected argument '{tok.text}' found",
                                       "check the flag against "
                                       "`text-generation-launcher --help`"))
            return None, problems
        if explicit is None:
            if i >= len(argv) or argv[i].text.startswith("--"):
                problems.append(ArgProblem(tok.field, f"{prog}: error: a value is required for '{name} <"
                                           f"{name[2:].upper().replace('-', '_')}>' but none was supplied",
                                           f"give {name} a value"))
                return None, problems
            explicit = argv[i].text
            i += 1
        if name in _TGI:
            dest = _TGI[name][0]
            values[dest] = (explicit, name)
            fields[dest] = tok.field
        else:
            problems.append(_ignored(tok, name))
    for flag, (dest, _) in _TGI.items():  # `#[clap(long, env)]`: the upper-case env var when the flag is absent
        var = flag[2:].upper().replace("-", "_")
        if dest not in values and var in env:
            values[dest] = (env[var], f"{flag} (env {var})")
            fields[dest] = f"{base}.env[{var}]"
    parsed: dict[str, object] = {}
    for dest, (raw, shown) in values.items():
        kind = next(k for d, k in _TGI.values() if d == dest)
        try:
            parsed[dest] = int(raw) if kind == "int" else float(raw) if kind == "float" else raw
        except ValueError:
            what = "invalid digit found in string" if kind == "int" else "invalid float literal"
            problems.append(ArgProblem(fields[dest], f"{prog}: error: invalid value '{raw}' for '{shown}': {what}",
                                       f"set {shown.split()[0]} to a number"))
            return None, problems
    model = str(parsed.pop("model", "bigscience/bloom-560m"))  # Args.model_id default_value
    # cuda_memory_fraction defaults to 1.0 (Args: default_value = "1.0"), not vLLM's 0.9
    args = EngineArgs(model=model, engine="tgi", served_model_name=[model], gpu_memory_utilization=1.0)
    # num_shard: "By default text-generation-inference will use all available GPUs" (Args.sharded doc)
    args.tensor_parallel_size = int(parsed.pop("tensor_parallel_size", gpus))  # type: ignore[call-overload]
    # --port default 3000; the TGI image sets ENV PORT=80 (its Dockerfile; the launcher logs "port: 80" when run
    # from the image, e.g. h2oai/h2ogpt#295)
    args.port = int(parsed.pop("port", env.get("PORT", 80 if tgi_image else 3000)))  # type: ignore[call-overload]
    # TGI's launcher: prefix caching on unless PREFIX_CACHING says otherwise or LoRA adapters are loaded
    # (resolve_attention: "Disabling prefix caching because of lora adapters")
    lora = parsed.pop("_lora_adapters", None)
    pc = env.get("PREFIX_CACHING")
    args.enable_prefix_caching = (pc.lower() not in ("0", "false")) if pc is not None else lora is None
    if lora:
        args.enable_lora = True
        args.lora_modules = [a for a in str(lora).split(",") if a]
        args.max_loras = len(args.lora_modules)
    max_input = parsed.pop("_max_input_tokens", None)
    if max_input is not None and "max_num_batched_tokens" not in parsed:
        parsed["max_num_batched_tokens"] = int(max_input) + 50  # type: ignore[call-overload]
    for k, v in parsed.items():
        setattr(args, k, v)
    if not 0 < args.gpu_memory_utilization <= 1:
        problems.append(ArgProblem(fields.get("gpu_memory_utilization", base), f"--cuda-memory-fraction "
                                   f"{args.gpu_memory_utilization} is outside (0, 1]", "use a fraction like 0.9"))
        return None, problems
    return args, problems


# ---- defaults ----


def resolve_defaults(args: EngineArgs, gpu_memory_gib: float, max_position_embeddings: int | None,
                     gpu_name: str = "", tpu_chip: str | None = None) -> EngineArgs:
    """A copy of `args` with the server's defaults filled in for the accelerator it runs on.

    vLLM V1, OpenAI API server usage context (vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py
    EngineArgs._set_default_args): device memory >= 70 GiB and not an A100 ("Setting large
    max_num_batched_tokens for A100 reduces throughput, see PR #17885") -> max_num_batched_tokens 8192,
    max_num_seqs 1024; otherwise 2048 / 256; TPU chips V6E/V5E/V5P -> 1024/512/256 batched tokens;
    max_num_seqs = min(default, max_num_batched_tokens). Chunked prefill is forced on for generative models and
    prefix caching defaults on. max_model_len defaults to the model's max_position_embeddings
    (ModelConfig derives it from the HF config).

    TGI (huggingface/text-generation-inference@009c4e0b:launcher/src/main.rs Args docs): max_total_tokens
    default min(max_position_embeddings, 4096); max_input_tokens min(max_position_embeddings - 1, 4095);
    max_batch_prefill_tokens max_input_tokens + 50; max_concurrent_requests 128; cuda_memory_fraction 1.0."""
    out = replace(args, served_model_name=list(args.served_model_name), lora_modules=list(args.lora_modules))
    if args.engine == "tgi":
        mpe = max_position_embeddings or 4096
        if out.max_model_len is None:
            out.max_model_len = min(mpe, 4096)
        if out.max_num_batched_tokens is None:
            out.max_num_batched_tokens = min(mpe - 1, 4095, out.max_model_len - 1) + 50
        if out.max_num_seqs is None:
            out.max_num_seqs = 128
        return out
    out.enable_chunked_prefill = True
    big = gpu_memory_gib >= 70 and "a100" not in gpu_name.lower()
    batched, seqs = (8192, 1024) if big else (2048, 256)
    if tpu_chip:
        batched = {"V6E": 1024, "V5E": 512, "V5P": 256}.get(tpu_chip.upper(), batched)
    if out.max_model_len is None and max_position_embeddings is not None:
        out.max_model_len = max_position_embeddings
    if out.max_num_batched_tokens is None:
        out.max_num_batched_tokens = batched
    if out.max_num_seqs is None:
        out.max_num_seqs = min(seqs, out.max_num_batched_tokens)
    return out


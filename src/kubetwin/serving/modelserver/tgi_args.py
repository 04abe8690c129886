"""TGI's command line as its launcher's clap parser reads it (huggingface/text-generation-inference@009c4e0b:
launcher/src/main.rs `struct Args`): the flag table, the switches and ignored flags, and the parser, where every flag
also reads its upper-case env var (`#[clap(long, env)]`, e.g. MODEL_ID, NUM_SHARD) and the launcher's own defaults
(cuda_memory_fraction 1.0, num_shard = all GPUs, prefix caching off with LoRA adapters) are applied. Apart from
`modelserver` and `vllm_args` because clap's rules and TGI's flags are their own."""

from __future__ import annotations

from kubetwin.serving.modelserver.server_args import ArgProblem, ArgToken, ignored_flag, unmodelled
from kubetwin.serving.types import EngineArgs

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


def parse_tgi(argv: list[ArgToken], env: dict[str, str], base: str, gpus: int,
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
            problems.append(ignored_flag(tok, name))
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
    args.flag_fields = {d: f for d, f in fields.items() if not d.startswith("_")}
    if not 0 < args.gpu_memory_utilization <= 1:
        problems.append(ArgProblem(fields.get("gpu_memory_utilization", base), f"--cuda-memory-fraction "
                                   f"{args.gpu_memory_utilization} is outside (0, 1]", "use a fraction like 0.9"))
        return None, problems
    return args, problems + unmodelled(args, {"quantization": "--quantize"})

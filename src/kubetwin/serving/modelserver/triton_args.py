"""Triton Inference Server serving an LLM: its command line (`tritonserver --model-repository=...`, getopt_long as
triton-inference-server/server src/command_line_parser.cc reads it) and its model repository, which a Kubernetes
deployment mounts from a volume; the twin reads it when ConfigMaps mounted at (or under) the repository path hold the
model's `config.pbtxt` (and, for the vLLM backend, its `<version>/model.json`).

Two LLM backends are served by the twin's engine model:
- `backend: "vllm"` (triton-inference-server/vllm_backend@8de0c148: src/model.py): model.json is the keyword
  arguments of vLLM's AsyncEngineArgs, read here with vLLM's own option table (`vllm_args.parse_vllm`), so the engine
  is vLLM's. The backend forces `max_batch_size: 0` and a decoupled transaction policy (auto_complete_config) and
  asserts it ("vLLM Triton backend must be configured to use decoupled model transaction policy"); a multi-GPU
  engine under KIND_GPU is its ValueError. vLLM batches on its own, so Triton's max_batch_size and dynamic batcher
  do not change the answer (a notice says so).
- `backend: "tensorrtllm"` (TensorRT-LLM's Triton backend, all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt,
  parameters documented in tensorrtllm_backend docs/model_config.md): in-flight batching with a paged KV cache of
  `kv_cache_free_gpu_mem_fraction` (default 0.9) of the memory left after the engine loads, capped at
  `max_tokens_in_paged_kv_cache`; KV reuse (`enable_kv_cache_reuse`, default false) is prefix caching; Triton's
  `max_batch_size` bounds the batch; the dynamic batcher's `max_queue_delay_microseconds` is a wait before the
  request reaches the backend. Its step times are vLLM's: no public like-for-like figure (same GPU, model,
  precision, load) of TensorRT-LLM against vLLM was found (published comparisons range from 13 % to 2.3x on
  different GPUs, precisions and loads), so the run and validate say the run assumes vLLM's speed.

The model the engine loads: model.json's `model` (vLLM), else for TensorRT-LLM the preprocessing model's
`tokenizer_dir` or the engine's `gpt_model_path` (a path's last folder names the model, as for vLLM's local paths).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from kubetwin.api.podresources import container_requests
from kubetwin.k8s.names import GPU
from kubetwin.serving.modelserver import pbtxt
from kubetwin.serving.modelserver.server_args import ArgProblem, ArgToken, ignored_flag
from kubetwin.serving.modelserver.vllm_args import parse_vllm
from kubetwin.serving.types import EngineArgs, TritonModel

ConfigMaps = Callable[[str], "dict[str, str] | None"]  # a ConfigMap's name in the pod's namespace -> its data

PROG = "tritonserver"
TRITON_IMAGE = re.compile(r"(^|/)nvidia/tritonserver(:|@|$)")

# ---- the command line (src/command_line_parser.cc: every option but --help takes a value) ----
_MODELLED = {"--model-repository": "repository", "--model-store": "repository", "--http-port": "http_port",
             "--grpc-port": "grpc_port", "--metrics-port": "metrics_port", "--allow-http": "allow_http",
             "--allow-grpc": "allow_grpc", "--allow-metrics": "allow_metrics", "--model-control-mode": "control",
             "--load-model": "load_model", "--exit-on-error": "exit_on_error", "--strict-readiness": "strict"}
_INT = {"http_port", "grpc_port", "metrics_port"}
_BOOL = {"allow_http", "allow_grpc", "allow_metrics", "exit_on_error", "strict"}
# real options that do not change what the twin computes: accepted quietly
_QUIET = ("--id --exit-timeout-secs --log-verbose --log-info --log-warning --log-error --log-format --log-file "
          "--http-address --grpc-address --metrics-address --reuse-http-port --reuse-grpc-port "
          "--http-thread-count --grpc-infer-thread-count --metrics-interval-ms --backend-directory "
          "--repoagent-directory --allow-cpu-metrics --allow-gpu-metrics").split()
# real options accepted with a notice that the twin does not model them
_OTHER = ("--disable-auto-complete-config --repository-poll-secs --model-config-name --model-load-thread-count "
          "--model-load-retry-count --model-namespacing --enable-peer-access --http-header-forward-pattern "
          "--http-max-input-size --http-restricted-api --grpc-header-forward-pattern --grpc-infer-allocation-pool-size "
          "--grpc-max-response-pool-size --grpc-use-ssl --grpc-use-ssl-mutual --grpc-server-cert --grpc-server-key "
          "--grpc-root-cert --grpc-infer-response-compression-level --grpc-keepalive-time --grpc-keepalive-timeout "
          "--grpc-keepalive-permit-without-calls --grpc-max-connection-age --grpc-max-connection-age-grace "
          "--grpc-restricted-protocol --allow-sagemaker --sagemaker-port --sagemaker-safe-port-range "
          "--sagemaker-thread-count --allow-vertex-ai --vertex-ai-port --vertex-ai-thread-count "
          "--vertex-ai-default-model --metrics-config --trace-config --cache-config --cache-directory --rate-limit "
          "--rate-limit-resource --pinned-memory-pool-byte-size --cuda-memory-pool-byte-size "
          "--cuda-virtual-address-size --min-supported-compute-capability --buffer-manager-thread-count "
          "--host-policy --model-load-gpu-limit --allow-client-shm --backend-config --strict-model-config "
          "--response-cache-byte-size --trace-file --trace-level --trace-rate --trace-count "
          "--trace-log-frequency").split()


@dataclass
class CommandLine:
    repositories: list[ArgToken]
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    allow_http: bool = True
    allow_metrics: bool = True
    control: str = "none"
    load_model: tuple[ArgToken, ...] = ()
    exit_on_error: bool = True


def _bool(value: str) -> bool | None:
    low = value.lower()  # ParseOption<bool>: true/on/1, false/off/0, any case
    return True if low in ("true", "on", "1") else False if low in ("false", "off", "0") else None


def parse_command_line(argv: list[ArgToken], base: str) -> tuple[CommandLine | None, list[ArgProblem]]:
    """getopt_long's reading: `--opt=value` or `--opt value`; an unknown option is getopt's "unrecognized option"
    and tritonserver prints its usage and exits; a bad value is `Bad option: "--opt".` with ParseOption's words."""
    problems: list[ArgProblem] = []
    got: dict[str, object] = {}
    repos: list[ArgToken] = []
    loads: list[ArgToken] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.text.startswith("--"):
            problems.append(ArgProblem(tok.field, f"Unexpected argument: {tok.text}",
                                       "tritonserver takes only --options; drop the word or give it to an option"))
            return None, problems
        name, value = (tok.text.split("=", 1) + [None])[:2] if "=" in tok.text else (tok.text, None)
        known = [*_MODELLED, *_QUIET, *_OTHER, "--help"]
        if name not in known:
            # getopt_long takes an unambiguous prefix of a long option (`--model-repo=/models`)
            cands = sorted({k for k in known if k.startswith(name)}) if len(name) > 2 else []
            if len(cands) > 1:
                problems.append(ArgProblem(tok.field, f"{PROG}: option '{name}' is ambiguous; possibilities: "
                                           + " ".join(f"'{c}'" for c in cands), "spell the option out"))
                return None, problems
            if not cands:
                problems.append(ArgProblem(tok.field, f"{PROG}: unrecognized option '{name}' (Usage: tritonserver "
                                           "[options])", "check the option against `tritonserver --help`"))
                return None, problems
            name = cands[0]
        if name == "--help":
            problems.append(ArgProblem(tok.field, "Usage: tritonserver [options] (--help prints the usage and "
                                       "exits)", "remove --help"))
            return None, problems
        if value is None:
            if i >= len(argv):
                problems.append(ArgProblem(tok.field, f"{PROG}: option '{name}' requires an argument",
                                           f"give {name} a value, e.g. {name}=VALUE"))
                return None, problems
            value = argv[i].text
            i += 1
        if name in _QUIET:
            continue
        if name in _OTHER:
            problems.append(ignored_flag(tok, name))
            continue
        dest = _MODELLED[name]
        if dest == "repository":
            repos.append(ArgToken(value, tok.field))
            continue
        if dest == "load_model":
            loads.append(ArgToken(value, tok.field))
            continue
        if dest in _INT:
            if not re.fullmatch(r"[-+]?\d+", value):
                problems.append(ArgProblem(tok.field, f'Bad option: "{name}". Invalid option value. Got {value}',
                                           f"set {name} to a port number"))
                return None, problems
            got[dest] = int(value)
        elif dest in _BOOL:
            b = _bool(value)
            if b is None:
                problems.append(ArgProblem(tok.field, f'Bad option: "{name}". invalid value for bool option: '
                                           f"{value}", f"set {name} to true or false"))
                return None, problems
            got[dest] = b
        elif dest == "control":
            mode = value.lower()
            if mode not in ("none", "poll", "explicit"):
                problems.append(ArgProblem(tok.field, f'Bad option: "{name}". invalid argument for '
                                           f"--model-control-mode: {value}", "use none, poll or explicit"))
                return None, problems
            got[dest] = mode
    if loads and got.get("control") != "explicit":
        problems.append(ArgProblem(loads[0].field, "Error: Use of '--load-model' requires setting "
                                   "'--model-control-mode=explicit' as well.", "add --model-control-mode=explicit"))
        return None, problems
    if not repos:
        problems.append(ArgProblem(argv[0].field if argv else base, "error: creating server: Invalid argument - "
                                   "--model-repository must be specified", "add --model-repository=/models"))
        return None, problems
    line = CommandLine(repos, load_model=tuple(loads))
    for k, v in got.items():
        setattr(line, k, v)
    return line, problems


# ---- files mounted from ConfigMaps ----

@dataclass(frozen=True)
class MountedFile:
    text: str
    configmap: str
    key: str


def file_field(f: MountedFile, line: int = 0) -> str:
    """The field a finding in a mounted file points at: the ConfigMap's data key and the line inside it."""
    return f"ConfigMap/{f.configmap}:data.{f.key}:{line}"


def parse_file_field(field: str) -> tuple[str, str, int] | None:
    """(ConfigMap name, data key, line within the value) of a `file_field`, None for a manifest field."""
    m = re.fullmatch(r"ConfigMap/([^:]+):data\.(.+):(\d+)", field)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def mounted_files(pod_spec: dict, container: dict, configmaps: ConfigMaps) -> dict[str, MountedFile]:
    """path -> file for every ConfigMap key the container sees: a configMap volume mounted at mountPath holds
    each key (or each `items[].path`) under it; with subPath, the one file at mountPath (Kubernetes' volume and
    projection rules). ConfigMaps the namespace lacks mount nothing."""
    volumes = {str(v.get("name")): v for v in pod_spec.get("volumes") or [] if isinstance(v, dict)}
    out: dict[str, MountedFile] = {}
    for mount in container.get("volumeMounts") or []:
        if not isinstance(mount, dict):
            continue
        vol = volumes.get(str(mount.get("name")))
        sources = []
        if vol is not None and isinstance(vol.get("configMap"), dict):
            sources.append(vol["configMap"])
        elif vol is not None and isinstance(vol.get("projected"), dict):
            sources += [s["configMap"] for s in vol["projected"].get("sources") or []
                        if isinstance(s, dict) and isinstance(s.get("configMap"), dict)]
        files: dict[str, MountedFile] = {}
        for src in sources:
            name = str(src.get("name", ""))
            data = configmaps(name)
            if data is None:
                continue
            items = src.get("items")
            pairs = ([(str(it.get("key")), str(it.get("path"))) for it in items if isinstance(it, dict)]
                     if isinstance(items, list) and items else [(k, k) for k in data])
            for key, rel in pairs:
                if key in data:
                    files[rel] = MountedFile(str(data[key]), name, key)
        root = posixpath.normpath(str(mount.get("mountPath", "/")))
        sub = mount.get("subPath")
        if sub:
            if str(sub) in files:
                out[root] = files[str(sub)]
            continue
        for rel, f in files.items():
            out[posixpath.normpath(posixpath.join(root, rel))] = f
    return out


# ---- the model repository ----

_MODEL_CONFIG = {"name", "platform", "backend", "runtime", "version_policy", "max_batch_size", "input", "output",
                 "batch_input", "batch_output", "optimization", "dynamic_batching", "sequence_batching",
                 "ensemble_scheduling", "instance_group", "default_model_filename", "cc_model_filenames",
                 "metric_tags", "parameters", "model_warmup", "model_operations", "model_transaction_policy",
                 "model_repository_agents", "response_cache"}  # inference.ModelConfig (common: model_config.proto)
_INSTANCE_GROUP = {"name", "kind", "count", "rate_limiter", "gpus", "secondary_devices", "profile", "passive",
                   "host_policy"}
_DYNAMIC_BATCHING = {"preferred_batch_size", "max_queue_delay_microseconds", "preserve_ordering", "priority_levels",
                     "default_priority_level", "default_queue_policy", "priority_queue_policy"}
_KINDS = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"}
_LLM_BACKENDS = ("vllm", "tensorrtllm")


@dataclass
class RepoModel:
    name: str
    path: str  # the model's folder
    config: pbtxt.Message
    file: MountedFile
    backend: str
    parameters: dict[str, tuple[str, int]]  # key -> (string_value, line)


class ConfigError(ValueError):
    def __init__(self, problem: ArgProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _parameters(cfg: pbtxt.Message) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for p in cfg.all("parameters"):
        if not isinstance(p, pbtxt.Message):
            raise pbtxt.TextFormatError(p.line, p.column, 'Expected "{", got: ' + p.text)
        pbtxt.check_fields(p, {"key", "value"}, "inference.ModelConfig.ParametersEntry")
        key = pbtxt.string(p.first("key"), "")
        value = p.first("value")
        text = ""
        if isinstance(value, pbtxt.Message):
            pbtxt.check_fields(value, {"string_value"}, "inference.ModelParameter")
            text = pbtxt.string(value.first("string_value"), "")
        elif value is not None:
            raise pbtxt.TextFormatError(value.line, value.column, 'Expected "{", got: ' + value.text)
        out[key] = (text, p.line)
    return out


def read_model(name: str, folder: str, f: MountedFile, image_backends: set[str] | None) -> RepoModel:
    """One model's config.pbtxt as Triton loads it; ConfigError with the file's line in Triton's / protobuf's
    words when it would fail to load."""
    path = posixpath.join(folder, "config.pbtxt")
    try:
        cfg = pbtxt.parse(f.text)
        pbtxt.check_fields(cfg, _MODEL_CONFIG, "inference.ModelConfig")
        for g in cfg.all("instance_group"):
            if isinstance(g, pbtxt.Message):
                pbtxt.check_fields(g, _INSTANCE_GROUP, "inference.ModelInstanceGroup")
                pbtxt.integer(g.first("count"), 1)
                kind = g.first("kind")
                if pbtxt.ident(kind, "KIND_AUTO") not in _KINDS and kind is not None:
                    raise pbtxt.TextFormatError(kind.line, kind.column, f'Unknown enumeration value of '
                                                f'"{pbtxt.ident(kind, "")}" for field "kind".')
        for d in cfg.all("dynamic_batching"):
            if isinstance(d, pbtxt.Message):
                pbtxt.check_fields(d, _DYNAMIC_BATCHING, "inference.ModelDynamicBatching")
                pbtxt.integer(d.first("max_queue_delay_microseconds"), 0)
        for t in cfg.all("model_transaction_policy"):
            if isinstance(t, pbtxt.Message):
                pbtxt.check_fields(t, {"decoupled"}, "inference.ModelTransactionPolicy")
                pbtxt.ident(t.first("decoupled"), "false")
        params = _parameters(cfg)
        cfg_name = pbtxt.string(cfg.first("name"), name)
        backend = pbtxt.string(cfg.first("backend"), "")
        pbtxt.integer(cfg.first("max_batch_size"), 0)
    except pbtxt.TextFormatError as err:
        raise ConfigError(ArgProblem(file_field(f, err.line), f"failed to load '{name}': Internal: failed to read "
                                     f"text proto from {path} (Error parsing text-format inference.ModelConfig: "
                                     f"{err})", "fix config.pbtxt; Triton parses it with protobuf's text format")
                          ) from None
    if cfg_name != name:
        # "If name is specified it must match the name of the model repository directory containing the model"
        # (docs/user_guide/model_configuration.md)
        v = cfg.first("name")
        raise ConfigError(ArgProblem(file_field(f, v.line if v is not None else 0),
                                     f"failed to load '{name}': Invalid argument: unexpected directory name '{name}' "
                                     f"for model '{cfg_name}', directory name must equal model name",
                                     f"set name: \"{name}\" or rename the folder"))
    if backend and image_backends is not None and backend not in image_backends:
        v = cfg.first("backend")
        variant = "trtllm" if backend == "tensorrtllm" else backend
        raise ConfigError(ArgProblem(file_field(f, v.line if v is not None else 0),
                                     f"failed to load '{name}' version 1: Invalid argument: unable to find backend "
                                     f"library for backend '{backend}', try specifying runtime on the model "
                                     "configuration.", "use the tritonserver image built with it: "
                                     f"nvcr.io/nvidia/tritonserver:<yy.mm>-{variant}-python-py3"))
    return RepoModel(name, folder, cfg, f, backend, params)


def image_backends(image: str) -> set[str] | None:
    """The backends an NGC tritonserver image ships, from its tag: `-vllm-python-py3` has the vLLM backend (its
    README: "Triton's vLLM container has been introduced starting from 23.10"), `-trtllm-python-py3` TensorRT-LLM's,
    plain `-py3` neither; None for another image (a custom build: any backend)."""
    if not TRITON_IMAGE.search(image.split("@")[0]):
        return None
    tag = image.split("@")[0].rsplit(":", 1)[-1] if ":" in image.split("@")[0].rsplit("/", 1)[-1] else ""
    base = {"python", "ensemble", "onnxruntime", "pytorch", "tensorrt", "openvino", "identity", "fil"}
    if tag.endswith("-vllm-python-py3"):
        return base | {"vllm"}
    if tag.endswith("-trtllm-python-py3"):
        return base | {"tensorrtllm"}
    if tag.endswith("-py3"):
        return base
    return None


def repository_models(line: CommandLine, files: dict[str, MountedFile], image: str
                      ) -> tuple[list[RepoModel], list[ArgProblem], bool]:
    """(models of the repositories the twin can read, problems, any repository readable). A model folder is one
    with a config.pbtxt directly under a repository path (docs/user_guide/model_repository.md's layout)."""
    problems: list[ArgProblem] = []
    models: list[RepoModel] = []
    readable = False
    backends = image_backends(image)
    for repo in line.repositories:
        if re.match(r"^(gs|s3|as)://", repo.text):
            problems.append(ArgProblem(repo.field, f"model repository {repo.text} is in cloud storage, which the twin "
                                       "does not read: its pods run but serve no requests (requests are answered "
                                       "503)", "mount the model's config.pbtxt (and model.json) from a ConfigMap at "
                                       "the repository path to simulate it", "notice"))
            continue
        root = posixpath.normpath(repo.text)
        found = sorted(p for p in files if posixpath.dirname(posixpath.dirname(p)) == root
                       and posixpath.basename(p) == "config.pbtxt")
        if found:
            readable = True
        for p in found:
            folder = posixpath.dirname(p)
            name = posixpath.basename(folder)
            if line.control == "explicit" and name not in {t.text for t in line.load_model}:
                continue  # explicit mode loads only the --load-model models
            models.append(read_model(name, folder, files[p], backends))
    if not readable and not problems:
        where = ", ".join(t.text for t in line.repositories)
        problems.append(ArgProblem(line.repositories[0].field, f"the twin cannot read the model repository {where}: "
                                   "no ConfigMap mounted there holds a <model>/config.pbtxt, so its pods run but serve "
                                   "no requests (requests are answered 503)", "mount a ConfigMap with the model's "
                                   "config.pbtxt (items: path: <model>/config.pbtxt) and, for the vLLM backend, "
                                   "<model>/1/model.json at the repository path", "notice"))
    return models, problems, readable


# ---- EngineArgs from the LLM model ----

def _json_line(text: str, key: str) -> int:
    m = re.search(r'"' + re.escape(key) + r'"\s*:', text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def _vllm_engine(model: RepoModel, files: dict[str, MountedFile], base: str
                 ) -> tuple[EngineArgs | None, list[ArgProblem]]:
    """model.json (in the model's newest version folder, pb_utils.get_model_dir()) read as vLLM's engine
    arguments, through vLLM's own option table."""
    versions = sorted((p for p in files if posixpath.basename(p) == "model.json"
                       and posixpath.dirname(posixpath.dirname(p)) == model.path
                       and posixpath.basename(posixpath.dirname(p)).isdigit()),
                      key=lambda p: int(posixpath.basename(posixpath.dirname(p))))
    if not versions:
        return None, [ArgProblem(file_field(model.file), f"failed to load '{model.name}' version 1: "
                                 f"AssertionError: 'model.json' containing vllm engine args must be provided in "
                                 f"'{model.path}/1'", "mount model.json at <model>/1/model.json (items: path: "
                                 f"{model.name}/1/model.json)")]
    f = files[versions[-1]]
    try:
        cfg = json.loads(f.text)
    except json.JSONDecodeError as err:
        return None, [ArgProblem(file_field(f, err.lineno), f"failed to load '{model.name}' version 1: "
                                 f"JSONDecodeError: {err.msg}: line {err.lineno} column {err.colno}",
                                 "fix model.json")]
    if not isinstance(cfg, dict):
        return None, [ArgProblem(file_field(f, 1), f"failed to load '{model.name}' version 1: TypeError: "
                                 "AsyncEngineArgs() argument after ** must be a mapping", "model.json is one object")]
    problems: list[ArgProblem] = []
    keys = dict(cfg)
    for _ in range(len(cfg) + 1):
        argv: list[ArgToken] = []
        for k, v in keys.items():
            fld = file_field(f, _json_line(f.text, k))
            flag = "--" + k.replace("_", "-")
            if isinstance(v, bool):
                if v or k in ("enable_prefix_caching", "enable_chunked_prefill", "enable_lora"):
                    argv.append(ArgToken(flag if v else "--no-" + flag[2:], fld))
            elif isinstance(v, list):
                argv += [ArgToken(flag, fld)] + [ArgToken(str(x), fld) for x in v]
            elif v is not None:
                argv += [ArgToken(flag, fld), ArgToken(json.dumps(v) if isinstance(v, dict) else str(v), fld)]
        args, found = parse_vllm(argv, "model.json", base)
        bad = next((p for p in found if p.severity == "error" and "unrecognized arguments" in p.message), None)
        if bad is None:
            problems += found  # in argparse's words, prog "model.json": the key shows as its --flag
            break
        flag = bad.message.split("unrecognized arguments: ", 1)[-1].split()[0]  # argparse names the first one
        key = next((k for k in keys if flag in ("--" + k.replace("_", "-"), "--no-" + k.replace("_", "-"))),
                   next(iter(keys)))
        problems.append(ArgProblem(bad.field, f"model.json key {key!r} is not a vLLM engine argument the twin knows; "
                                   "ignored (vLLM's AsyncEngineArgs refuses a key it lacks with a TypeError)", "",
                                   "notice"))
        keys.pop(key, None)
    else:  # pragma: no cover - every pass drops one key
        return None, problems
    if args is None:
        return None, problems
    if "model" not in keys:
        problems.append(ArgProblem(file_field(f, 1), "model.json names no model: vLLM loads its default "
                                   f"{args.model}", "set \"model\" to the Hugging Face id or path", "notice"))
    return args, problems


def _instances(model: RepoModel) -> tuple[int, str]:
    """(model instances, the last group's kind); read_model checked the fields' types."""
    count, kind = 0, "KIND_AUTO"
    for g in model.config.all("instance_group"):
        if isinstance(g, pbtxt.Message):
            count += pbtxt.integer(g.first("count"), 1)
            kind = pbtxt.ident(g.first("kind"), "KIND_AUTO")
    return (count or 1), kind


def _tp_of(args: EngineArgs) -> int:
    return args.tensor_parallel_size * args.pipeline_parallel_size


def _trtllm_engine(model: RepoModel, others: list[RepoModel]
                   ) -> tuple[EngineArgs | None, list[ArgProblem], tuple[float | None, int | None]]:
    """The tensorrtllm backend's parameters as EngineArgs, with (kv_cache_free_gpu_mem_fraction,
    max_tokens_in_paged_kv_cache). A `${...}` value left by fill_template.py counts as unset (the backend's rule)."""
    problems: list[ArgProblem] = []
    params = {k: v for k, v in model.parameters.items() if not re.fullmatch(r"\$\{.*\}", v[0])}

    def at(key: str) -> str:
        return file_field(model.file, model.parameters[key][1]) if key in model.parameters else \
            file_field(model.file)

    def num(key: str, kind: type, default: float | None) -> float | None:
        if key not in params:
            return default
        raw = params[key][0]
        try:
            return kind(raw)
        except ValueError:
            raise ConfigError(ArgProblem(at(key), f"failed to load '{model.name}' version 1: the tensorrtllm "
                                         f"backend cannot read parameter {key} = {raw!r} as a number",
                                         f"set {key} to a number")) from None

    source = ""
    for other in others:  # the ensemble's preprocessing model names the tokenizer: the Hugging Face model
        tok = other.parameters.get("tokenizer_dir", ("", 0))[0]
        if tok and not tok.startswith("${"):
            source = tok
            break
    path = params.get("gpt_model_path", ("", 0))[0]
    if not source and not path:
        return None, [ArgProblem(at("gpt_model_path"), f"failed to load '{model.name}' version 1: the tensorrtllm "
                                 "backend needs parameter gpt_model_path (the engine folder; fill_template.py's "
                                 "engine_dir)", "set gpt_model_path to the TensorRT-LLM engine's folder")], (None, None)
    args = EngineArgs(model=source or path, engine="trtllm", served_model_name=[model.name],
                      gpu_memory_utilization=1.0)
    served = [path.rstrip("/").rsplit("/", 1)[-1]] if path else []
    args.served_model_name = [model.name] + served
    strategy = params.get("gpt_model_type", ("inflight_fused_batching", 0))[0]
    if strategy.lower() not in ("inflight_fused_batching", "inflight_batching"):
        problems.append(ArgProblem(at("gpt_model_type"), f"batching_strategy {strategy}: the twin does not model "
                                   "static (V1) batching; the engine batches in flight", "", "notice"))
    beams = num("max_beam_width", int, 1)
    if beams and beams > 1:
        problems.append(ArgProblem(at("max_beam_width"), f"max_beam_width {int(beams)}: beam search is not modelled; "
                                   "each request decodes one sequence", "", "notice"))
    if str(params.get("enable_chunked_context", ("false", 0))[0]).lower() != "true":
        problems.append(ArgProblem(at("enable_chunked_context"), "enable_chunked_context is off (the backend's "
                                   "default): TensorRT-LLM prefills each prompt in one piece, the twin's engine "
                                   "chunks long prompts as vLLM does", "", "notice"))
    if params.get("batch_scheduler_policy", ("guaranteed_no_evict", 0))[0] == "guaranteed_no_evict":
        problems.append(ArgProblem(at("batch_scheduler_policy"), "batch_scheduler_policy guaranteed_no_evict (the "
                                   "default) is not modelled: the twin's engine admits while KV blocks are free and "
                                   "preempts when the cache fills, as max_utilization does", "", "notice"))
    args.enable_prefix_caching = str(params.get("enable_kv_cache_reuse", ("false", 0))[0]).lower() == "true"
    frac = num("kv_cache_free_gpu_mem_fraction", float, 0.9)
    if frac is not None and not 0 < frac <= 1:
        raise ConfigError(ArgProblem(at("kv_cache_free_gpu_mem_fraction"), f"kv_cache_free_gpu_mem_fraction {frac} "
                                     "is outside (0, 1]", "use a fraction like 0.9"))
    max_tokens = num("max_tokens_in_paged_kv_cache", int, None)
    args.block_size = 64  # TensorRT-LLM's tokens_per_block (the backend's README metrics: tokens_per 64)
    args.flag_fields = {}
    problems.append(ArgProblem(file_field(model.file), "TensorRT-LLM's speed is not modelled on its own: the run "
                               "times this engine with the twin's vLLM step model (no public like-for-like figure of "
                               "TensorRT-LLM against vLLM for this GPU and model)", "compare with the same model on "
                               "vLLM's backend; the difference is not in the twin", "notice"))
    return args, problems, (frac, int(max_tokens) if max_tokens else None)


def triton_engine(argv: list[ArgToken], base: str, pod_spec: dict, container: dict, image: str,
                  configmaps: ConfigMaps | None) -> tuple[EngineArgs | None, list[ArgProblem]]:
    """EngineArgs (with `triton`) for the LLM model of a tritonserver container, or None with the reason: a
    command-line or config error (severity error: the server exits), or a repository the twin cannot read
    (notices; `configmaps` None: only the command line is read)."""
    line, problems = parse_command_line(argv, base)
    if line is None or configmaps is None:
        return None, problems
    files = mounted_files(pod_spec, container, configmaps)
    try:
        models, found, readable = repository_models(line, files, image)
        problems += found
        if not readable:
            return None, problems
        llm = [m for m in models if m.backend in _LLM_BACKENDS]
        if not llm:
            names = ", ".join(m.name for m in models) or "none"
            problems.append(ArgProblem(line.repositories[0].field, f"no model of the repository is served by the "
                                       f"vLLM or TensorRT-LLM backend (models: {names}); the twin simulates those "
                                       "only, so its pods serve no requests (503)", "use backend: \"vllm\" or "
                                       "\"tensorrtllm\"", "notice"))
            return None, problems
        model = llm[0]
        for extra in llm[1:]:
            problems.append(ArgProblem(file_field(extra.file), f"model '{extra.name}': the twin serves one LLM per "
                                       f"pod ('{model.name}'); requests for '{extra.name}' are routed to it",
                                       "", "notice"))
        others = [m for m in models if m is not model]
        kv: tuple[float | None, int | None] = (None, None)
        if model.backend == "vllm":
            args, more = _vllm_engine(model, files, base)
        else:
            args, more, kv = _trtllm_engine(model, others)
        problems += more
        if args is None:
            return None, problems
        cfg = model.config
        count, kind = _instances(model)
        batch = pbtxt.integer(cfg.first("max_batch_size"), 0)
        delay = 0.0
        dyn = cfg.first("dynamic_batching")
        if isinstance(dyn, pbtxt.Message):
            delay = pbtxt.integer(dyn.first("max_queue_delay_microseconds"), 0) / 1e6
        policy = cfg.first("model_transaction_policy")
        decoupled = isinstance(policy, pbtxt.Message) and pbtxt.ident(policy.first("decoupled"), "false") == "true"
        if model.backend == "vllm":
            if isinstance(policy, pbtxt.Message) and policy.first("decoupled") is not None and not decoupled:
                problems.append(ArgProblem(file_field(model.file, policy.line), f"failed to load '{model.name}' "
                                           "version 1: AssertionError: vLLM Triton backend must be configured to use "
                                           "decoupled model transaction policy", "set model_transaction_policy { "
                                           "decoupled: true } or leave it out (the backend sets it)"))
                return None, problems
            if kind == "KIND_GPU" and _tp_of(args) > 1:
                problems.append(ArgProblem(file_field(model.file, cfg.first("instance_group").line  # type: ignore[union-attr]
                                                      ), f"failed to load '{model.name}' version 1: ValueError: "
                                           "KIND_GPU is currently for single-GPU models, please specify KIND_MODEL "
                                           "in the model's config.pbtxt for multi-GPU models", "use kind: KIND_MODEL"))
                return None, problems
            if batch or dyn is not None:
                v = cfg.first("max_batch_size") or dyn
                problems.append(ArgProblem(file_field(model.file, v.line if v is not None else 0),
                                           "max_batch_size / dynamic_batching do not change the vLLM backend's "
                                           "batching: it hands every request to vLLM at once (decoupled) and vLLM "
                                           "batches them (max_num_seqs in model.json)", "", "notice"))
                delay = 0.0  # the backend auto-completes max_batch_size 0: no dynamic batcher in front of it
            args.enable_chunked_prefill = True
        else:
            if batch > 0:
                args.max_num_seqs = batch
            try:
                gpus = int(container_requests(container).get(GPU, 1))
            except ValueError:
                gpus = 1
            if gpus > 1:
                problems.append(ArgProblem(base, f"the container has {gpus} GPUs but a plain tritonserver runs a "
                                           "TensorRT-LLM engine of one rank (a multi-GPU engine is started under "
                                           "mpirun by launch_triton_server.py, which the twin does not recognize): "
                                           f"the twin serves on one GPU and the other {gpus - 1} sit idle and are "
                                           "billed", "", "notice"))
            args.max_num_batched_tokens = 8192  # trtllm-build's default max_num_tokens (twin assumption)
        if count > 1:
            problems.append(ArgProblem(file_field(model.file, cfg.first("instance_group").line  # type: ignore[union-attr]
                                                  ), f"instance_group count {count}: the twin runs one engine per "
                                       "pod (one model instance); more instances of an LLM on the same GPUs are not "
                                       "modelled", "scale with replicas instead", "notice"))
        # Triton serves the newest version folder (version_policy latest: 1, model_configuration.md); the vLLM
        # backend's is where model.json was read; a TensorRT-LLM engine's folder is not in the ConfigMaps: "1"
        version = next((posixpath.basename(posixpath.dirname(p)) for p in sorted(
            (p for p in files if posixpath.basename(p) == "model.json" and posixpath.dirname(posixpath.dirname(p))
             == model.path and posixpath.basename(posixpath.dirname(p)).isdigit()),
            key=lambda p: -int(posixpath.basename(posixpath.dirname(p))))), "1")
        args.triton = TritonModel(model.name, model.backend, version=version, max_batch_size=batch,
                                  instance_count=count,
                                  queue_delay_s=delay,
                                  report_vllm_metrics=model.parameters.get("REPORT_CUSTOM_METRICS", ("", 0))[0]
                                  .lower() in ("true", "yes", "1", "on"),
                                  http_port=line.http_port, grpc_port=line.grpc_port, metrics_port=line.metrics_port,
                                  kv_free_fraction=kv[0], max_kv_tokens=kv[1])
        if model.name not in args.served_model_name:
            args.served_model_name = [model.name, *args.served_model_name]
        else:
            args.served_model_name = [model.name] + [n for n in args.served_model_name if n != model.name]
        for other in others:
            if other.config.first("ensemble_scheduling") is not None or other.backend == "python":
                args.served_model_name.append(other.name)  # the ensemble / BLS model clients call
        args.port = line.http_port
        return args, problems
    except ConfigError as err:
        return None, problems + [err.problem]
    except pbtxt.TextFormatError as err:
        return None, problems + [ArgProblem(base, str(err), "fix config.pbtxt")]


def pod_configmaps(store: object | None, pod: dict) -> ConfigMaps | None:
    """The ConfigMaps of a pod's namespace as the kubelet mounts them (the store's current objects); None without
    a store."""
    if store is None:
        return None
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"

    def get(name: str) -> dict[str, str] | None:
        obj = store.get("ConfigMap", namespace, name)  # type: ignore[attr-defined]
        return {str(k): str(v) for k, v in (obj.get("data") or {}).items()} if obj else None

    return get


# the paths Triton's HTTP endpoint answers GET with 200 once it is ready (server docs/protocol/README.md: the KServe
# v2 health and metadata endpoints, /v2/models/<m>[/ready] per model)
READY_PATHS = ("/v2/health/ready", "/v2/health/live", "/v2")


def probe_refused(container: dict) -> str | None:
    """The path of an httpGet readinessProbe Triton answers 404, else None: the kubelet's probe then fails for
    good and the pod stays Running, not Ready."""
    probe = container.get("readinessProbe")
    get = probe.get("httpGet") if isinstance(probe, dict) else None
    if not isinstance(get, dict):
        return None
    path = str(get.get("path", "/")).split("?")[0]
    return None if path in READY_PATHS or path.startswith("/v2/models/") else path


# The endpoint picker's metrics extractor picks each pod's metric names by this label, vLLM's when it is absent
# (gateway-api-inference-extension's model-server protocol, docs/proposals/003-model-server-protocol; its built-in
# "triton-tensorrt-llm" mapping reads nv_trt_llm_request_metrics{request_type=waiting|scheduled} and
# nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}).
ENGINE_TYPE_LABEL = "inference.networking.k8s.io/engine-type"
TRITON_TRTLLM_ENGINE_TYPE = "triton-tensorrt-llm"


def epp_reads_metrics(args: EngineArgs, labels: dict) -> bool:
    """Whether the EPP finds the queue / KV gauges it asks this pod for: always for vLLM and TGI as the twin has
    them, for Triton only with the TensorRT-LLM backend and the triton-tensorrt-llm engine-type label (the vLLM
    backend exports no gauges: vllm_backend src/utils/metrics.py)."""
    if args.triton is None:
        return True
    return args.triton.backend == "tensorrtllm" and labels.get(ENGINE_TYPE_LABEL) == TRITON_TRTLLM_ENGINE_TYPE

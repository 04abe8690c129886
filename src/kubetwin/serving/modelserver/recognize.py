"""Recognize model servers (vLLM, TGI, Triton Inference Server) in the pod specs users write and read their command
lines into EngineArgs.

The parsers follow the servers' own parsers so a flag the real server rejects is rejected here, in its words: vLLM's
argparse in `vllm_args`, TGI's clap in `tgi_args`, tritonserver's getopt and its model repository in `triton_args`
(what they share in `server_args`). This module finds the server's container (image entrypoints, `sh -c` scripts,
Kubernetes' $(VAR) expansion) and fills in the defaults per GPU. Triton's model configuration lives in files the pod
mounts: callers that can read the scenario's ConfigMaps pass `configmaps` (a ConfigMap's data by name, in the pod's
namespace); without it a Triton container is recognized but not sized (its EngineArgs are None).

Entry points for the rest of the twin: `inspect_model_server` (problems as (field, message, hint, severity) for
validate.py), `find_model_server` (raises on errors) and `resolve_defaults`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

from kubetwin.api.podresources import container_requests
from kubetwin.k8s.names import GPU
from kubetwin.serving.modelserver.server_args import ArgProblem, ArgToken, ModelServerError
from kubetwin.serving.modelserver.tgi_args import parse_tgi
from kubetwin.serving.modelserver.triton_args import ConfigMaps, triton_engine
from kubetwin.serving.modelserver.vllm_args import parse_vllm
from kubetwin.serving.types import EngineArgs

# Container image sizes (GB, compressed, linux/amd64) for the image-pull part of a cold start.
IMAGE_SIZES_GB: dict[str, float] = {
    # "docker pull vllm/vllm-openai:latest — the image is around 12 GB" (vllm-project/vllm#27154, 2025-10;
    # discuss.vllm.ai "current vllm docker image size is 12.64GB"); 28.6 GB unpacked (vllm-project/vllm#22377).
    "vllm/vllm-openai": 12.0,
    "vllm/vllm-tpu": 8.0,  # twin assumption (no published size found)
    "ghcr.io/huggingface/text-generation-inference": 6.0,  # twin assumption (no published size found)
    # twin assumption (no published size found in the sources read): the -trtllm- / -vllm-python-py3 images carry CUDA,
    # the backends and, for -vllm-, vLLM itself, so at least vllm/vllm-openai's 12 GB
    "nvcr.io/nvidia/tritonserver": 14.0,
}


_VLLM_IMAGE = re.compile(r"(^|/)vllm-openai(:|@|$)|(^|/)vllm/vllm-tpu(:|@|$)|^vllm/vllm-openai")
_TGI_IMAGE = re.compile(r"(^|/)huggingface/text-generation-inference(:|@|$)")


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


def _tokens(container: dict, base: str, env: dict[str, str]) -> tuple[list[ArgToken], bool]:
    """command + args after env expansion, each with its field path; a `sh -c "..."` script is split into
    words (all pointing at the script's field). Returns (tokens, command_given)."""
    toks = [ArgToken(_expand(str(v), env), f"{base}.command[{i}]")
            for i, v in enumerate(container.get("command") or [])]
    toks += [ArgToken(_expand(str(v), env), f"{base}.args[{i}]") for i, v in enumerate(container.get("args") or [])]
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
        words = next((c for c in chain if _kind_of([ArgToken(w, "") for w in c if w != "exec"]) is not None),
                     words[:cut])
        words = [w for w in words if w != "exec"]
        return [ArgToken(_shell_expand(w, env), script.field) for w in words] + toks[3:], True
    return toks, bool(container.get("command"))


def _kind_of(toks: list[ArgToken]) -> tuple[str, str, int] | None:
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
        if name == "tritonserver":
            return "triton", "tritonserver", k + 1
    return None


def server_kind(pod_spec: dict) -> str | None:
    """"vllm" | "tgi" | "triton" for the first container running a model server (by its command line or image
    entrypoint alone), None when none does."""
    for c in pod_spec.get("containers") or []:
        if not isinstance(c, dict):
            continue
        toks, command_given = _tokens(c, "", {})
        image = str(c.get("image", "")).split("@")[0]
        if not command_given and _VLLM_IMAGE.search(image):
            return "vllm"
        if not command_given and _TGI_IMAGE.search(image):
            return "tgi"
        kind = _kind_of(toks)
        if kind is not None:
            return kind[0]
    return None


def inspect_model_server(pod_spec: dict, path: str = "spec", configmaps: ConfigMaps | None = None
                         ) -> tuple[int, EngineArgs | None, list[ArgProblem]] | None:
    """(container index, EngineArgs or None when the command line has errors, problems) for the first
    container running vLLM, TGI or Triton; None when no container does. `path` is the pod spec's field path
    (spec.template.spec for a Deployment). A Triton container's EngineArgs are None without `configmaps` or when
    its model repository cannot be read (notices say why)."""
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
            args, problems = parse_vllm(argv, prog, base)
        elif engine == "triton":
            args, problems = triton_engine(argv, base, pod_spec, c, image, configmaps)
            if args is None:
                return ci, None, problems
        else:
            gpus = gpu_count(c)
            args, problems = parse_tgi(argv, env, base, gpus, bool(_TGI_IMAGE.search(image)))
        if args is None and not problems:
            continue
        return ci, (None if any(p.severity == "error" for p in problems) else args), problems
    return None


def find_model_server(pod_spec: dict, path: str = "spec", configmaps: ConfigMaps | None = None
                      ) -> tuple[int, EngineArgs] | None:
    """(container index, EngineArgs) of the pod's model server, None if it runs none the twin can size (a Triton
    whose model repository it cannot read); ModelServerError (with the problems) when its command line or model
    configuration would make the real server exit."""
    found = inspect_model_server(pod_spec, path, configmaps)
    if found is None:
        return None
    ci, args, problems = found
    if args is None:
        errors = [p for p in problems if p.severity == "error"]
        if not errors:
            return None
        raise ModelServerError(errors)
    return ci, args


def gpu_count(container: dict) -> int:
    """The container's nvidia.com/gpu (api.podresources' rule: requests, defaulted from limits; at least 1): the
    devices the server sees. A quantity validate refuses counts 1 here (validate says why)."""
    try:
        return max(1, container_requests(container).get(GPU, 1))
    except ValueError:
        return 1


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
    max_batch_prefill_tokens max_input_tokens + 50; max_concurrent_requests 128; cuda_memory_fraction 1.0.

    Triton's TensorRT-LLM backend: the engine's build limits (trtllm-build's max_batch_size 2048, max_num_tokens
    8192, max_seq_len the model's context; twin assumptions: the engine folder is not read), Triton's
    max_batch_size already applied as max_num_seqs when given."""
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
    if args.engine == "trtllm":
        if out.max_model_len is None and max_position_embeddings is not None:
            out.max_model_len = max_position_embeddings
        if out.max_num_batched_tokens is None:
            out.max_num_batched_tokens = 8192
        if out.max_num_seqs is None:
            out.max_num_seqs = 2048
        out.enable_chunked_prefill = True
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

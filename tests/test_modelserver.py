"""Model servers in the Deployments users write: recognition, vLLM/TGI command lines, defaults per GPU."""

from __future__ import annotations

import pytest

from kubetwin.serving.modelserver.recognize import (
    IMAGE_SIZES_GB,
    ModelServerError,
    find_model_server,
    inspect_model_server,
    resolve_defaults,
)
from kubetwin.serving.types import EngineArgs

P = "spec.template.spec"


def pod(image: str = "vllm/vllm-openai:v0.11.0", command: list | None = None, args: list | None = None,
        env: dict | None = None, gpus: int | None = None) -> dict:
    c: dict = {"name": "server", "image": image}
    if command is not None:
        c["command"] = command
    if args is not None:
        c["args"] = args
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"containers": [{"name": "sidecar", "image": "busybox"}, c]}


def problems(spec: dict) -> list:
    found = inspect_model_server(spec, P)
    assert found is not None
    return found[2]


def test_vllm_image_entrypoint_with_args_as_users_write_them():
    spec = pod(args=["meta-llama/Llama-3.1-8B-Instruct", "-tp", "2", "--max-model-len=32k",
                     "--gpu-memory-utilization", "0.95", "--enable_prefix_caching", "--no-enable-chunked-prefill",
                     "--served-model-name", "llama", "llama-8b", "--max-num-seqs", "$(SEQS)", "--enable-lora",
                     "--max-loras", "4", "--lora-modules", "sql=/a", "chat=/b", "--scheduling-policy", "priority",
                     "--kv-cache-dtype", "fp8", "-q", "fp8", "--port", "8080"], env={"SEQS": "64"})
    ci, a = find_model_server(spec, P)
    assert ci == 1
    assert (a.engine, a.model, a.tensor_parallel_size, a.max_model_len) == ("vllm", "meta-llama/Llama-3.1-8B-Instruct",
                                                                           2, 32000)
    assert a.gpu_memory_utilization == 0.95 and a.enable_prefix_caching and not a.enable_chunked_prefill
    assert a.served_model_name == ["llama", "llama-8b"] and a.max_num_seqs == 64
    assert a.enable_lora and a.max_loras == 4 and a.lora_modules == ["sql=/a", "chat=/b"]
    assert (a.scheduling_policy, a.kv_cache_dtype, a.quantization, a.port) == ("priority", "fp8", "fp8", 8080)


@pytest.mark.parametrize("command,args", [
    (["vllm", "serve", "org/m"], ["--max-num-batched-tokens", "1K"]),
    (["python3", "-m", "vllm.entrypoints.openai.api_server"], ["--model", "org/m", "--max-num-batched-tokens=1024"]),
    (["/bin/sh", "-c", "pip install foo && exec vllm serve $MODEL --max-num-batched-tokens 1024"], None),
])
def test_command_forms(command, args):
    _, a = find_model_server(pod(image="my.registry/custom:1", command=command, args=args, env={"MODEL": "org/m"}))
    assert a.model == "org/m" and a.max_num_batched_tokens == 1024 and a.served_model_name == ["org/m"]


def test_other_images_are_not_model_servers():
    assert find_model_server(pod(image="nginx:1.27")) is None
    assert find_model_server(pod(image="vllm/vllm-openai:latest", command=["python3", "my_app.py"])) is None


def test_unknown_flag_in_argparse_words_with_field_path():
    [p] = problems(pod(args=["org/m", "--foo", "1", "--max-num-seqs", "8"]))
    assert p.message == "vllm serve: error: unrecognized arguments: --foo 1"
    assert p.field == f"{P}.containers[1].args[1]" and p.severity == "error" and p.hint
    with pytest.raises(ModelServerError):
        find_model_server(pod(args=["org/m", "--foo"]))


def test_api_server_prog_name_and_bad_values():
    [p] = problems(pod(command=["python3", "-m", "vllm.entrypoints.openai.api_server"],
                       args=["--model", "m", "--max-num-seqs", "abc"]))
    assert p.message == "api_server.py: error: argument --max-num-seqs: invalid int value: 'abc'"
    assert p.field == f"{P}.containers[1].args[3]"
    [p] = problems(pod(args=["m", "-tp", "two"]))
    assert p.message == "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'"
    [p] = problems(pod(args=["m", "--max-model-len", "1.5K"]))
    assert "Decimals are not allowed with binary suffixes like K" in p.message
    [p] = problems(pod(args=["m", "--max-model-len"]))
    assert p.message == "vllm serve: error: argument --max-model-len: expected one argument"
    [p] = problems(pod(args=["m", "--scheduling-policy", "lifo"]))
    assert "invalid choice: 'lifo'" in p.message


def test_duplicate_serve_hints_at_the_image_entrypoint():
    [p] = problems(pod(args=["vllm", "serve", "org/m"]))
    assert "unrecognized arguments: serve org/m" in p.message and "ENTRYPOINT" in p.hint


def test_known_but_unmodelled_flags_are_notices_and_env_escape():
    found = inspect_model_server(pod(args=["m", "--trust-remote-code", "--download-dir", "/d", "--swap-space", "8",
                                           "--enforce-eager", "--disable-log-requests", "--kv-events-config",
                                           '{"enable_kv_cache_events": true}', "--host", "0.0.0.0",
                                           "--served-model-name", "$$(X)"]), P)
    assert found is not None
    _, a, ps = found
    assert a is not None and a.served_model_name == ["$(X)"]
    assert {p.severity for p in ps} == {"notice"} and len(ps) == 7


def test_tgi_flags_env_and_defaults():
    spec = pod(image="ghcr.io/huggingface/text-generation-inference:3.3.4",
               args=["--max-concurrent-requests", "64", "--max-input-tokens", "2048", "--max-total-tokens=4096",
                     "--json-output"], env={"MODEL_ID": "org/t"}, gpus=2)
    _, a = find_model_server(spec, P)
    assert (a.engine, a.model, a.tensor_parallel_size, a.max_num_seqs) == ("tgi", "org/t", 2, 64)
    assert a.max_num_batched_tokens == 2098 and a.max_model_len == 4096  # prefill default max_input + 50
    assert a.gpu_memory_utilization == 1.0 and a.port == 80
    _, b = find_model_server(pod(image="x", command=["text-generation-launcher", "--model-id", "o/m", "--num-shard",
                                                      "4", "--cuda-memory-fraction", "0.8", "--lora-adapters", "a,b"]))
    assert (b.tensor_parallel_size, b.gpu_memory_utilization, b.port) == (4, 0.8, 3000)
    assert b.enable_lora and b.lora_modules == ["a", "b"] and not b.enable_prefix_caching
    [p] = problems(pod(image="ghcr.io/huggingface/text-generation-inference:3", args=["--bogus", "1"]))
    assert p.message == "text-generation-launcher: error: unexpected argument '--bogus' found"
    [p] = problems(pod(image="ghcr.io/huggingface/text-generation-inference:3", env={"MAX_TOTAL_TOKENS": "lots"}))
    assert "invalid value 'lots'" in p.message and p.field.endswith("env[MAX_TOTAL_TOKENS]")


def test_vllm_defaults_depend_on_gpu_memory_and_name():
    a = EngineArgs(model="m")
    h100 = resolve_defaults(a, 79.6, 131072, "NVIDIA H100 80GB HBM3")
    assert (h100.max_num_batched_tokens, h100.max_num_seqs, h100.max_model_len) == (8192, 1024, 131072)
    a100 = resolve_defaults(a, 79.2, 8192, "NVIDIA A100-SXM4-80GB")
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    l4 = resolve_defaults(a, 22.0, None, "NVIDIA L4")
    assert (l4.max_num_batched_tokens, l4.max_num_seqs, l4.max_model_len) == (2048, 256, None)
    small = resolve_defaults(EngineArgs(model="m", max_num_batched_tokens=128), 80, None, "H100")
    assert small.max_num_seqs == 128  # min(default, max_num_batched_tokens)
    assert resolve_defaults(a, 16, None, tpu_chip="v6e").max_num_batched_tokens == 1024
    kept = resolve_defaults(EngineArgs(model="m", max_num_seqs=7, enable_chunked_prefill=False), 80, None, "H100")
    assert kept.max_num_seqs == 7 and kept.enable_chunked_prefill  # V1 forces chunked prefill
    assert a.max_num_seqs is None  # a copy, not in place


def test_tgi_defaults():
    t = resolve_defaults(EngineArgs(model="m", engine="tgi", gpu_memory_utilization=1.0), 80, 131072)
    assert (t.max_model_len, t.max_num_batched_tokens, t.max_num_seqs) == (4096, 4145, 128)
    t2 = resolve_defaults(EngineArgs(model="m", engine="tgi"), 80, 2048)
    assert (t2.max_model_len, t2.max_num_batched_tokens) == (2048, 2097)


def test_image_sizes_cover_the_recognized_images():
    assert IMAGE_SIZES_GB["vllm/vllm-openai"] > 5 and "ghcr.io/huggingface/text-generation-inference" in IMAGE_SIZES_GB

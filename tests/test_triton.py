"""Triton Inference Server (issue 38 item 5): `tritonserver` recognized in the Deployments people write, its model
repository read from the ConfigMaps it mounts (config.pbtxt in protobuf's text format, the vLLM backend's model.json,
the TensorRT-LLM backend's parameters), served and timed by the engine model instead of answering 503, with Triton's
metric names and readiness path. Cases from triton-inference-server/server docs (model_configuration.md,
metrics.md, protocol/), vllm_backend (README, samples/model_repository, src/model.py) and tensorrtllm_backend
(docs/model_config.md, README's Triton metrics)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import write_yaml
from serving_builders import h100_pool, inference_pool, serving_scenario, trace
from typer.testing import CliRunner

from kubetwin.api.loader import Manifest
from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.serving.modelserver import pbtxt
from kubetwin.serving.modelserver.recognize import find_model_server, inspect_model_server, server_kind
from kubetwin.serving.modelserver.triton_args import image_backends
from kubetwin.validation.validate import validate

VLLM_IMAGE = "nvcr.io/nvidia/tritonserver:25.12-vllm-python-py3"
TRT_IMAGE = "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"
# vllm_backend samples/model_repository/vllm_model/config.pbtxt, with the backend's metrics parameter (its README)
VLLM_CONFIG = """backend: "vllm"

instance_group [
  {
    count: 1
    kind: KIND_MODEL
  }
]
parameters: {
  key: "REPORT_CUSTOM_METRICS"
  value: { string_value: "true" }
}
"""
MODEL_JSON = '{"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu_memory_utilization": 0.9, "max_num_seqs": 128}'
# all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt filled in (fill_template.py), the fields that matter
TRT_CONFIG = """name: "tensorrt_llm"
backend: "tensorrtllm"
max_batch_size: 64

model_transaction_policy {
  decoupled: true
}

dynamic_batching {
    preferred_batch_size: [ 64 ]
    max_queue_delay_microseconds: 50000
    default_queue_policy: { max_queue_size: 0 }
}
instance_group [
  {
    count: 1
    kind : KIND_CPU
  }
]
parameters: {
  key: "max_beam_width"
  value: {
    string_value: "1"
  }
}
parameters: {
  key: "gpt_model_type"
  value: {
    string_value: "inflight_fused_batching"
  }
}
parameters: {
  key: "gpt_model_path"
  value: {
    string_value: "/engines/llama-3.1-8b-instruct"
  }
}
parameters: {
  key: "kv_cache_free_gpu_mem_fraction"
  value: {
    string_value: "0.5"
  }
}
parameters: {
  key: "enable_kv_cache_reuse"
  value: {
    string_value: "true"
  }
}
parameters: {
  key: "max_tokens_in_paged_kv_cache"
  value: {
    string_value: "${max_tokens_in_paged_kv_cache}"
  }
}
"""


def _configmap(data: dict[str, str], name: str = "repo") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": data}


def _triton(image: str = VLLM_IMAGE, args: list[str] | None = None, items: list[dict] | None = None,
            probe: str = "/v2/health/ready") -> dict:
    """A Deployment running tritonserver with the ConfigMap "repo" mounted at /models (app=srv, one H100)."""
    items = items if items is not None else [{"key": "config.pbtxt", "path": "vllm_model/config.pbtxt"},
                                             {"key": "model.json", "path": "vllm_model/1/model.json"}]
    c = {"name": "triton", "image": image, "command": ["tritonserver"],
         "args": args if args is not None else ["--model-repository=/models"],
         "readinessProbe": {"httpGet": {"path": probe, "port": 8000}},
         "resources": {"limits": {"nvidia.com/gpu": "1"}},
         "volumeMounts": [{"name": "repo", "mountPath": "/models"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "triton", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "srv"}},
                     "template": {"metadata": {"labels": {"app": "srv"}},
                                  "spec": {"containers": [c], "volumes": [
                                      {"name": "repo", "configMap": {"name": "repo", "items": items}}]}}}}


def _lookup(*maps: dict):
    data = {m["metadata"]["name"]: m["data"] for m in maps}
    return data.get


def _spec(d: dict) -> dict:
    return d["spec"]["template"]["spec"]


def _validate(tmp_path: Path, objs: list[dict]) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", objs))])
    assert "Traceback" not in res.output
    return res.exit_code, res.output


# ---- recognition ----

@pytest.mark.parametrize("container", [
    {"image": VLLM_IMAGE, "command": ["tritonserver"], "args": ["--model-repository=/models"]},
    {"image": TRT_IMAGE, "command": ["tritonserver", "--model-repository", "/models"]},
    # the NGC image's entrypoint (nvidia_entrypoint.sh) runs the args as the command
    {"image": "nvcr.io/nvidia/tritonserver:24.08-vllm-python-py3", "args": ["tritonserver", "--model-store=/m"]},
    {"image": "nvcr.io/nvidia/tritonserver:25.01-py3", "command": ["/opt/tritonserver/bin/tritonserver",
                                                                   "--model-repository=/models"]},
    {"image": "us-docker.pkg.dev/p/r/triton:1",
     "command": ["sh", "-c", "pip list && exec tritonserver --model-repository=/models"]},
])
def test_tritonserver_is_recognized_across_images_and_command_shapes(container: dict) -> None:
    spec = {"containers": [{"name": "t", **container}]}
    assert server_kind(spec) == "triton"
    found = inspect_model_server(spec)
    assert found is not None and found[0] == 0 and found[1] is None  # no ConfigMaps given: not sized


def test_getopt_takes_an_unambiguous_prefix_of_an_option() -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": MODEL_JSON})
    found = find_model_server(_spec(_triton(args=["--model-repo=/models", "--http-p", "9000"])),
                              configmaps=_lookup(cm))
    assert found is not None and found[1].triton is not None and found[1].triton.http_port == 9000


def test_an_ngc_triton_image_without_a_tritonserver_command_runs_no_server() -> None:
    # nvidia_entrypoint.sh with no CMD: the container runs nothing the twin serves
    assert server_kind({"containers": [{"name": "t", "image": VLLM_IMAGE}]}) is None


def test_image_variants_ship_their_backends() -> None:
    assert "vllm" in image_backends(VLLM_IMAGE) and "tensorrtllm" not in image_backends(VLLM_IMAGE)
    assert "tensorrtllm" in image_backends(TRT_IMAGE) and "vllm" not in image_backends(TRT_IMAGE)
    plain = image_backends("nvcr.io/nvidia/tritonserver:24.08-py3")
    assert plain is not None and not {"vllm", "tensorrtllm"} & plain
    assert image_backends("registry.example.com/my-triton:latest") is None  # a custom build: any backend


@pytest.mark.parametrize(("args", "says"), [
    (["--model-repository=/models", "--http-prot=9000"], "tritonserver: unrecognized option '--http-prot'"),
    (["--model-repository=/models", "--http-port=abc"], 'Bad option: "--http-port". Invalid option value. Got abc'),
    (["--model-repository=/models", "--allow-http=maybe"], "invalid value for bool option: maybe"),
    (["--http-port=9000"], "--model-repository must be specified"),
    (["--model-repository=/models", "--load-model=vllm_model"],
     "Use of '--load-model' requires setting '--model-control-mode=explicit' as well."),
    (["--model-repository=/models", "extra"], "Unexpected argument: extra"),
    (["--model-repository=/models", "--grpc-keep=1"], "option '--grpc-keep' is ambiguous; possibilities: "
     "'--grpc-keepalive-permit-without-calls' '--grpc-keepalive-time' '--grpc-keepalive-timeout'"),
])
def test_command_line_errors_are_tritonservers(args: list[str], says: str) -> None:
    found = inspect_model_server(_spec(_triton(args=args)))
    assert found is not None and found[1] is None
    assert any(says in p.message and p.severity == "error" for p in found[2]), found[2]


# ---- config.pbtxt ----

def test_the_vllm_sample_config_parses_with_its_fields() -> None:
    cfg = pbtxt.parse(VLLM_CONFIG)
    group = cfg.first("instance_group")
    assert pbtxt.string(cfg.first("backend"), "") == "vllm"
    assert isinstance(group, pbtxt.Message) and pbtxt.ident(group.first("kind"), "") == "KIND_MODEL"
    assert pbtxt.integer(group.first("count"), 0) == 1
    trt = pbtxt.parse(TRT_CONFIG)
    assert pbtxt.integer(trt.first("max_batch_size"), 0) == 64
    assert len(trt.all("parameters")) == 6  # a repeated field written six times


@pytest.mark.parametrize(("text", "line", "says"), [
    ('backend: "vllm"\ninstance_groups [ { count: 1 } ]\n', 2,
     'Message type "inference.ModelConfig" has no field named "instance_groups".'),
    # fill_template.py not run: the placeholder is no integer
    ('backend: "tensorrtllm"\nmax_batch_size: ${triton_max_batch_size}\n', 2, "Expected integer, got: $"),
    ('backend: "vllm"\ninstance_group [\n  { count: 1\n', 4, 'Expected "}", got: end of input'),
    ('backend: "vllm"\ninstance_group [ { kind: KIND_GPU count: two } ]\n', 2, "Expected integer, got: two"),
])
def test_config_errors_point_at_the_configmap_line_in_protobufs_words(tmp_path: Path, text: str, line: int,
                                                                      says: str) -> None:
    indented = "".join("    " + ln + "\n" for ln in text.splitlines())
    doc = (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: repo\n  namespace: default\ndata:\n"
           f"  model.json: '{MODEL_JSON}'\n  config.pbtxt: |\n{indented}")
    dep = write_yaml(tmp_path / "d.yaml", [serving_scenario("10m").obj(), h100_pool(1).obj(), _triton()])
    (tmp_path / "cm.yaml").write_text(doc)
    res = CliRunner().invoke(app, ["validate", str(dep), str(tmp_path / "cm.yaml")])
    assert res.exit_code != 0, res.output
    key_line = doc.splitlines().index("  config.pbtxt: |") + 1
    want = rf"cm\.yaml:{key_line + line}: error: ConfigMap/default/repo: data\.config\.pbtxt: failed to load " \
           rf"'vllm_model': Internal: failed to read text proto from /models/vllm_model/config\.pbtxt"
    assert re.search(want, res.output), res.output
    assert says in res.output


def test_a_backend_the_image_lacks_fails_to_load_in_tritons_words() -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": MODEL_JSON})
    found = inspect_model_server(_spec(_triton(image=TRT_IMAGE)), configmaps=_lookup(cm))
    assert found is not None and found[1] is None
    assert any("unable to find backend library for backend 'vllm', try specifying runtime on the model "
               "configuration." in p.message for p in found[2])


def test_a_name_that_differs_from_the_folder_fails_to_load() -> None:
    cm = _configmap({"config.pbtxt": 'name: "other"\n' + VLLM_CONFIG, "model.json": MODEL_JSON})
    found = inspect_model_server(_spec(_triton()), configmaps=_lookup(cm))
    assert found is not None and found[1] is None
    assert any("must equal model name" in p.message for p in found[2])


# ---- the vLLM backend ----

def test_model_json_is_vllms_engine_arguments() -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": MODEL_JSON})
    found = find_model_server(_spec(_triton()), configmaps=_lookup(cm))
    assert found is not None
    args = found[1]
    assert args.engine == "vllm" and args.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert args.max_num_seqs == 128 and args.gpu_memory_utilization == 0.9
    assert args.triton is not None and args.triton.name == "vllm_model" and args.triton.backend == "vllm"
    assert args.triton.report_vllm_metrics and args.served_model_name[0] == "vllm_model"


@pytest.mark.parametrize(("config", "json_text", "says"), [
    (VLLM_CONFIG.replace("KIND_MODEL", "KIND_GPU"), '{"model": "meta-llama/Llama-3.1-8B-Instruct", '
     '"tensor_parallel_size": 2}', "KIND_GPU is currently for single-GPU models, please specify KIND_MODEL"),
    (VLLM_CONFIG + "model_transaction_policy { decoupled: false }\n", MODEL_JSON,
     "vLLM Triton backend must be configured to use decoupled model transaction policy"),
    (VLLM_CONFIG, None, "'model.json' containing vllm engine args must be provided in '/models/vllm_model/1'"),
    (VLLM_CONFIG, '{"model": "meta-llama/Llama-3.1-8B-Instruct", "max_num_seqs": "many"}', "invalid int value"),
])
def test_the_vllm_backends_load_errors(config: str, json_text: str | None, says: str) -> None:
    data = {"config.pbtxt": config} | ({"model.json": json_text} if json_text else {})
    found = inspect_model_server(_spec(_triton()), configmaps=_lookup(_configmap(data)))
    assert found is not None and found[1] is None
    assert any(says in p.message and p.severity == "error" for p in found[2]), found[2]


def test_triton_batching_fields_do_not_change_the_vllm_backend_and_say_so() -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG + "max_batch_size: 8\ndynamic_batching { }\n",
                     "model.json": MODEL_JSON})
    found = inspect_model_server(_spec(_triton()), configmaps=_lookup(cm))
    assert found is not None and found[1] is not None and found[1].triton.queue_delay_s == 0
    assert any("do not change the vLLM backend's batching" in p.message and p.severity == "notice"
               for p in found[2])


# ---- the TensorRT-LLM backend ----

def _trt_items() -> list[dict]:
    return [{"key": "config.pbtxt", "path": "tensorrt_llm/config.pbtxt"}]


def test_tensorrtllm_parameters_set_the_engine_and_its_speed_is_said_to_be_vllms() -> None:
    cm = _configmap({"config.pbtxt": TRT_CONFIG})
    found = inspect_model_server(_spec(_triton(image=TRT_IMAGE, items=_trt_items())), configmaps=_lookup(cm))
    assert found is not None and found[1] is not None, found
    args, problems = found[1], found[2]
    assert args.engine == "trtllm" and args.max_num_seqs == 64 and args.enable_prefix_caching
    assert args.block_size == 64 and args.model == "/engines/llama-3.1-8b-instruct"
    assert args.triton.kv_free_fraction == 0.5 and args.triton.max_kv_tokens is None  # ${...}: unset
    assert args.triton.queue_delay_s == pytest.approx(0.05)
    assert any("times this engine with the twin's vLLM step model" in p.message for p in problems)


def test_tensorrtllm_kv_cache_follows_its_free_memory_fraction_and_token_cap() -> None:
    from kubetwin.serving.modelserver.modelspec import lookup_server_model
    from kubetwin.serving.modelserver.sizing import size

    def blocks(config: str) -> int:
        found = find_model_server(_spec(_triton(image=TRT_IMAGE, items=_trt_items())),
                                  configmaps=_lookup(_configmap({"config.pbtxt": config})))
        assert found is not None
        args = found[1]
        spec = lookup_server_model(args.model, args.served_model_name)
        assert spec is not None
        return size(args, spec, "nvidia-h100-80gb", None).blocks

    half = blocks(TRT_CONFIG)
    most = blocks(TRT_CONFIG.replace('"0.5"', '"0.9"'))
    capped = blocks(TRT_CONFIG.replace('"${max_tokens_in_paged_kv_cache}"', '"6400"'))
    assert most == pytest.approx(half * 1.8, rel=0.01)  # the fraction applies to the memory left after loading
    assert capped == 100  # 6400 tokens / 64 per block


# ---- the run ----

def _serving(objs: list[dict], model: str = "vllm_model") -> list[dict]:
    return [serving_scenario("12m").obj(), h100_pool(1).obj(), *objs, inference_pool().obj(),
            trace().rate(2).duration("2m").start("8m").model(model).obj()]


def test_a_triton_deployment_is_served_priced_and_timed_not_503(tmp_path: Path) -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": MODEL_JSON})
    objs = _serving([cm, _triton()])
    code, out = _validate(tmp_path, objs)
    assert code == 0 and "not a model server" not in out, out
    r = run(objects=objs, out=tmp_path / "run")
    req = r.requests()
    assert len(req) > 100 and set(req.status) == {200}, req.status.value_counts()
    assert (req.ttft > 0).all() and r.summary["serving"]["overall"]["gpu_cost_usd"] > 0
    prom = (tmp_path / "run" / "metrics.prom").read_text()
    for name in ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
                 "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                 "nv_inference_compute_infer_duration_us", "nv_inference_pending_request_count",
                 "nv_gpu_utilization", "nv_gpu_memory_used_bytes", "vllm:time_to_first_token_seconds_bucket"):
        assert re.search(rf"^{re.escape(name)}\{{", prom, re.M), name
    ok = re.search(r'^nv_inference_request_success\{model="vllm_model",namespace="default",pod="[^"]+",'
                   r'version="1"\} (\d+)', prom, re.M)
    assert ok and int(ok.group(1)) == len(req)
    assert "vllm:num_requests_waiting" not in prom  # the vLLM backend exports no gauges


def test_without_a_readable_repository_the_pods_serve_nothing_and_validate_says_why(tmp_path: Path) -> None:
    objs = _serving([_triton()])
    code, out = _validate(tmp_path, objs)
    assert code == 0 and "the twin cannot read the model repository /models" in out, out
    r = run(objects=objs)
    assert set(r.requests().status) <= {503, 0}


def test_a_probe_triton_answers_404_keeps_the_pods_unready(tmp_path: Path) -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": MODEL_JSON})
    objs = _serving([cm, _triton(probe="/health")])
    code, out = _validate(tmp_path, objs)
    assert "Triton answers GET /health with 404" in out, out
    r = run(objects=objs)
    assert not (r.requests().status == 200).any()


def test_a_model_that_fails_to_load_is_refused_as_the_server_would_exit() -> None:
    from kubetwin.api.errors import KubetwinError

    cm = _configmap({"config.pbtxt": VLLM_CONFIG.replace("backend", "backends"), "model.json": MODEL_JSON})
    with pytest.raises(KubetwinError, match='failed to load .vllm_model.*has no field named "backends"'):
        run(objects=_serving([cm, _triton()]))


def test_a_keda_rule_on_tritons_queue_time_reads_a_series_triton_exports() -> None:
    so = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "so", "namespace": "default"},
          "spec": {"scaleTargetRef": {"name": "triton"}, "minReplicaCount": 1, "maxReplicaCount": 2, "triggers": [
              {"type": "prometheus", "metadata": {"serverAddress": "http://prometheus:9090", "threshold": "1000",
                                                  "query": "sum(rate(nv_inference_queue_duration_us[1m]))"}}]}}
    diags = validate([Manifest(so, "t.yaml", 1)])
    assert not [d for d in diags if "is not exported by any model server" in d.message], diags


PRE_CONFIG = """name: "preprocessing"
backend: "python"
max_batch_size: 64
parameters {
  key: "tokenizer_dir"
  value: { string_value: "meta-llama/Llama-3.1-8B-Instruct" }
}
instance_group [ { count: 1, kind: KIND_CPU } ]
"""
ENSEMBLE_CONFIG = """name: "ensemble"
platform: "ensemble"
max_batch_size: 64
ensemble_scheduling {
  step [
    {
      model_name: "preprocessing"
      model_version: -1
      input_map { key: "QUERY" value: "text_input" }
      output_map { key: "INPUT_ID" value: "_INPUT_ID" }
    },
    {
      model_name: "tensorrt_llm"
      model_version: -1
      input_map { key: "input_ids" value: "_INPUT_ID" }
      output_map { key: "output_ids" value: "_TOKENS_BATCH" }
    }
  ]
}
"""


def test_a_tensorrtllm_ensemble_is_served_with_its_queue_delay_and_the_vllm_speed_notice(tmp_path: Path) -> None:
    cm = _configmap({"trt": TRT_CONFIG, "pre": PRE_CONFIG, "ens": ENSEMBLE_CONFIG})
    items = [{"key": "trt", "path": "tensorrt_llm/config.pbtxt"}, {"key": "pre", "path": "preprocessing/config.pbtxt"},
             {"key": "ens", "path": "ensemble/config.pbtxt"}]
    objs = _serving([cm, _triton(image=TRT_IMAGE, items=items)], model="ensemble")
    code, out = _validate(tmp_path, objs)
    assert code == 0 and "times this engine with the twin's vLLM step model" in out, out
    r = run(objects=objs, out=tmp_path / "run")
    req = r.requests()
    assert len(req) > 100 and set(req.status) == {200}
    assert req.ttft.min() >= 0.05  # the dynamic batcher's max_queue_delay_microseconds: 50000 before the engine
    assert any("vLLM step model" in n for n in r.summary["notices"])
    prom = (tmp_path / "run" / "metrics.prom").read_text()
    assert re.search(r'^nv_trt_llm_kv_cache_block_metrics\{kv_cache_block_type="tokens_per",model="tensorrt_llm",'
                     r'namespace="default",pod="[^"]+",version="1"\} 64$', prom, re.M), prom
    assert re.search(r'^nv_trt_llm_request_metrics\{model="tensorrt_llm",namespace="default",pod="[^"]+",'
                     r'request_type="max",version="1"\} 64$', prom, re.M)
    queue = re.search(r'^nv_inference_queue_duration_us\{model="tensorrt_llm"[^}]*\} (\S+)$', prom, re.M)
    assert queue and float(queue.group(1)) == pytest.approx(len(req) * 50000)


@pytest.mark.parametrize(("backend", "labels", "seen"), [
    ("vllm", {}, False),  # the vLLM backend exports no gauge the picker reads
    ("tensorrtllm", {}, False),  # no engine-type label: the picker asks for vLLM's names
    ("tensorrtllm", {"inference.networking.k8s.io/engine-type": "triton-tensorrt-llm"}, True),
])
def test_the_endpoint_picker_sees_tritons_gauges_only_through_its_engine_type(backend: str, labels: dict,
                                                                              seen: bool) -> None:
    from kubetwin.serving.modelserver.triton_args import epp_reads_metrics
    from kubetwin.serving.types import EngineArgs, TritonModel

    args = EngineArgs(model="m", triton=TritonModel("m", backend))
    assert epp_reads_metrics(args, {"app": "srv", **labels}) is seen
    assert epp_reads_metrics(EngineArgs(model="m"), {})  # vLLM's own server


def test_a_pool_over_tritons_vllm_backend_sees_stale_metrics_and_sheds_sheddable_requests(tmp_path: Path) -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": MODEL_JSON})
    objective = {"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferenceObjective",
                 "metadata": {"name": "batch", "namespace": "default"},
                 "spec": {"priority": -1, "poolRef": {"name": "pool"}}}
    objs = [serving_scenario("12m").obj(), h100_pool(1).obj(), cm, _triton(), inference_pool().obj(), objective,
            trace().rate(2).duration("1m").start("8m").model("batch").obj()]
    code, out = _validate(tmp_path, objs)
    assert "Triton's vLLM backend exports no queue or KV-cache gauge" in out, out
    r = run(objects=objs)
    req = r.requests()
    # a stale endpoint counts saturated: the EPP's admission drops every sheddable (negative priority) request
    assert len(req) and set(req.status) == {429}, req.status.value_counts()


def test_a_model_json_key_the_twin_does_not_know_is_a_notice_and_the_rest_is_read() -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": '{"model": "meta-llama/Llama-3.1-8B-Instruct", '
                     '"max_num_seqs": 64, "frobnicate_level": 3, "disable_log_stats": false, "enforce_eager": true}'})
    found = inspect_model_server(_spec(_triton()), configmaps=_lookup(cm))
    assert found is not None and found[1] is not None, found
    assert found[1].max_num_seqs == 64
    said = [p.message for p in found[2]]
    assert any("model.json key 'frobnicate_level' is not a vLLM engine argument the twin knows" in m for m in said)
    assert not any("max_num_seqs" in m or "disable_log_stats" in m for m in said), said


def test_metrics_carry_the_version_triton_serves() -> None:
    # version_policy latest (model_configuration.md): the newest numeric folder is the one served
    items = [{"key": "config.pbtxt", "path": "vllm_model/config.pbtxt"},
             {"key": "model.json", "path": "vllm_model/3/model.json"}]
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": MODEL_JSON})
    found = find_model_server(_spec(_triton(items=items)), configmaps=_lookup(cm))
    assert found is not None and found[1].triton is not None and found[1].triton.version == "3"


def _keda(query: str, threshold: str) -> dict:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "so", "namespace": "default"},
            "spec": {"scaleTargetRef": {"name": "triton"}, "minReplicaCount": 1, "maxReplicaCount": 2,
                     "pollingInterval": 15, "triggers": [{"type": "prometheus", "metadata": {
                         "serverAddress": "http://prometheus:9090", "query": query, "threshold": threshold}}]}}


@pytest.mark.parametrize(("query", "threshold", "scales"), [
    # the engine's own queue, as the TensorRT-LLM backend reports it: the rule sees the load
    ('sum(nv_trt_llm_request_metrics{request_type="active"})', "8", True),
    # Triton's queue time: the decoupled backend takes every request at once, the series stays at 0 us
    ("sum(rate(nv_inference_queue_duration_us[1m]))", "1", False),
])
def test_keda_on_tritons_series_scales_as_the_series_say(query: str, threshold: str, scales: bool) -> None:
    config = TRT_CONFIG.replace("max_queue_delay_microseconds: 50000", "max_queue_delay_microseconds: 0")
    cm = _configmap({"config.pbtxt": config})
    objs = [serving_scenario("14m").obj(), h100_pool(2).obj(), cm, _triton(image=TRT_IMAGE, items=_trt_items()),
            inference_pool().obj(), _keda(query, threshold),
            trace().rate(20).duration("5m").start("8m").model("tensorrt_llm").output(400).obj()]
    r = run(objects=objs)
    most = max(int(v.object["spec"]["replicas"]) for v in r.versions("Deployment", "triton"))
    assert most == (2 if scales else 1)


def test_the_engines_start_up_refusals_point_at_model_json(tmp_path: Path) -> None:
    cm = _configmap({"config.pbtxt": VLLM_CONFIG, "model.json": '{"model": "meta-llama/Llama-3.1-8B-Instruct", '
                     '"tensor_parallel_size": 2}'})
    code, out = _validate(tmp_path, [serving_scenario("10m").obj(), h100_pool(1).obj(), cm, _triton()])
    assert code != 0 and re.search(r"error: ConfigMap/default/repo: data\.model\.json: AssertionError: "
                                   r"local_world_size \(2\) must be less than or equal to the number of visible "
                                   r"devices \(1\)", out), out


def test_a_tensorrtllm_container_with_several_gpus_serves_on_one_and_says_so() -> None:
    d = _triton(image=TRT_IMAGE, items=_trt_items())
    _spec(d)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    found = inspect_model_server(_spec(d), configmaps=_lookup(_configmap({"config.pbtxt": TRT_CONFIG})))
    assert found is not None and found[1] is not None and found[1].tensor_parallel_size == 1
    assert any("the other 1 sit idle and are billed" in p.message for p in found[2])

"""What `kubetwin validate` says about serving manifests the run would otherwise crash on or silently mis-handle:
an unknown router, a tensor-parallel size that does not divide the model's heads, a generated RequestTrace without
the token counts it needs, pipeline parallelism that needs more GPUs than the pod has (and, on enough GPUs, its KV
cache and weights split over the stages), flags the twin does not model, and a container behind a pool that is no
model server the twin simulates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import write_yaml
from serving_builders import MODEL, h100_pool, inference_pool, serving_scenario, trace, vllm
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import run


def _validate(tmp_path: Path, objs: list[dict]) -> tuple[int, str, Path]:
    path = write_yaml(tmp_path / "s.yaml", objs)
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert "Traceback" not in res.output
    return res.exit_code, res.output, path


def _run_cli(path: Path, out: Path) -> str:
    res = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert "Traceback" not in res.output and not isinstance(res.exception, (ValueError, KeyError, TypeError))
    return res.output


def test_an_unknown_router_is_a_validate_error_and_the_run_refuses_it_the_same_way(tmp_path: Path) -> None:
    objs = [serving_scenario("10m").obj(), h100_pool(1).obj(), vllm("srv", 1).obj(),
            inference_pool().router("prefix-aware").obj(), trace().obj()]
    code, out, path = _validate(tmp_path, objs)
    assert code == 1
    assert re.search(rf"{re.escape(str(path))}:\d+: error: InferencePool/default/pool: "
                     r"metadata\.annotations\.kubetwin\.io/router: unknown router preset 'prefix-aware'; known: "
                     r"round-robin, .*epp", out), out
    assert "fix: " in out
    ran = _run_cli(path, tmp_path / "out")
    assert "unknown router preset 'prefix-aware'" in ran and not (tmp_path / "out").exists()


def test_tensor_parallel_size_that_does_not_divide_the_heads_is_vllms_error(tmp_path: Path) -> None:
    srv = vllm("srv", 1).args(["--model", MODEL, "--tensor-parallel-size", "3"]).obj()
    srv["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    code, out, path = _validate(tmp_path, [serving_scenario("10m").obj(), srv])
    assert code == 1
    assert re.search(rf"{re.escape(str(path))}:\d+: error: Deployment/default/srv: "
                     r"spec\.template\.spec\.containers\[0\]\.args\[3\]: Total number of attention heads \(32\) "
                     r"must be divisible by tensor parallel size \(3\)\.", out), out


def test_a_generated_trace_without_token_counts_is_a_validate_error(tmp_path: Path) -> None:
    t = trace().obj()
    del t["spec"]["generator"]["promptTokens"]
    code, out, path = _validate(tmp_path, [serving_scenario("10m").obj(), t])
    assert code == 1
    assert re.search(rf"{re.escape(str(path))}:\d+: error: RequestTrace/default/t: spec\.generator\.promptTokens: "
                     r"spec\.generator\.promptTokens is required unless sharedPrefix is set", out), out


def test_pipeline_parallel_needs_tp_x_pp_gpus(tmp_path: Path) -> None:
    srv = vllm("srv", 1).args(["--model", MODEL, "--pipeline-parallel-size", "2"]).obj()
    code, out, path = _validate(tmp_path, [serving_scenario("10m").obj(), srv])
    assert code == 1
    assert re.search(r"error: Deployment/default/srv: spec\.template\.spec\.containers\[0\]\.args\[3\]: "
                     r"AssertionError: local_world_size \(2\) must be less than or equal to the number of visible "
                     r"devices \(1\)\.", out), out


def _two_gpu_pool() -> dict:
    pool = h100_pool(1).obj()
    pool["spec"]["machineType"] = "a3-highgpu-2g"
    pool["spec"]["accelerators"][0]["count"] = 2
    return pool


def _blocks(r) -> int:
    m = re.search(r'vllm:cache_config_info\{[^}]*num_gpu_blocks="(\d+)"', (r.metrics_text or b"").decode())
    assert m, "no vllm:cache_config_info"
    return int(m.group(1))


def test_pipeline_parallel_splits_weights_and_kv_over_the_stages() -> None:
    def serve(args: list[str], gpus: str) -> object:
        srv = vllm("srv", 1).args(["--model", MODEL, "--max-model-len", "8192", *args]).obj()
        srv["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = gpus
        return run(objects=[serving_scenario("12m").obj(), _two_gpu_pool(), srv, inference_pool().obj(),
                            trace().rate(2).duration("2m").start("8m").obj()])

    one, pp2 = serve([], "1"), serve(["--pipeline-parallel-size", "2"], "2")
    # each stage holds half the layers: half the weights and half of every token's KV per GPU
    assert _blocks(pp2) > 2 * _blocks(one)
    a, b = one.requests(), pp2.requests()
    assert set(a.status) == set(b.status) == {200}
    # a token passes both stages in turn (no micro-batch overlap modelled): no faster than on one GPU
    assert b.tpot.median() >= 0.95 * a.tpot.median()


@pytest.mark.parametrize("flags, says", [
    (["--data-parallel-size", "2"], "--data-parallel-size 2 is not modelled"),
    (["--quantization", "fp8"], "--quantization fp8 is not modelled"),
    (["--kv-cache-dtype", "fp8"], "--kv-cache-dtype fp8 is not modelled"),
    (["--no-enable-chunked-prefill"], "--no-enable-chunked-prefill is not modelled"),
])
def test_flags_that_would_change_the_answer_but_are_not_modelled_are_notices(tmp_path: Path, flags: list[str],
                                                                             says: str) -> None:
    srv = vllm("srv", 1).args(["--model", MODEL, *flags]).obj()
    srv["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    code, out, _ = _validate(tmp_path, [serving_scenario("10m").obj(), srv])
    assert code == 0 and re.search(rf"notice: Deployment/default/srv: \S+: {re.escape(says)}", out), out


def _sglang() -> dict:
    d = vllm("sgl", 1).obj()
    c = d["spec"]["template"]["spec"]["containers"][0]
    c.update(image="lmsysorg/sglang:v0.5.2", command=["python3", "-m", "sglang.launch_server", "--model-path", MODEL],
             args=[])
    return d


def test_an_unrecognised_server_behind_a_pool_is_a_notice_repeated_in_the_summary(tmp_path: Path) -> None:
    objs = [serving_scenario("12m").obj(), h100_pool(1).obj(), _sglang(), inference_pool().obj(),
            trace().rate(1).duration("1m").start("8m").obj()]
    code, out, path = _validate(tmp_path, objs)
    assert code == 0
    said = re.search(r"notice: Deployment/default/sgl: spec\.template\.spec\.containers\[0\]: container 'vllm' "
                     r"\(lmsysorg/sglang:v0\.5\.2\) is not a model server kubetwin "
                     r"simulates; requests to it through InferencePool/default/pool are answered 503", out)
    assert said, out
    r = run(objects=objs)
    assert any("is not a model server kubetwin simulates" in n for n in r.summary["notices"])
    assert set(r.requests().status) <= {503, 0} and len(r.requests())

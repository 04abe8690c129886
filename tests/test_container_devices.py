"""One model of what a container gets (devices/container.py), across the shapes it covers: every MIG profile of the
A100 40/80 GB and the H100, time-slicing and MPS, every TPU generation single- and multi-host; and the rule serving,
training and validate read from it: a CUDA process enumerates ONE MIG instance (NVIDIA MIG user guide, CUDA device
enumeration), so vLLM/TGI tensor parallelism over two MIG instances fails at start in the servers' own words."""

from __future__ import annotations

import pytest
from k8s_builders import make_pool
from serving_builders import inference_pool, serving_scenario, trace, vllm
from test_serving_shared_gpus import _crash_messages, _last_pods, _waiting_reasons

from kubetwin import catalog
from kubetwin.devices import container, mig, tpu
from kubetwin.runner import run
from kubetwin.serving.modelserver import sizing
from kubetwin.serving.modelserver.modelspec import lookup_server_model
from kubetwin.serving.modelserver.recognize import find_model_server

MIG_GPUS = {"A100-SXM4-40GB": "nvidia-tesla-a100", "A100-SXM4-80GB": "nvidia-a100-80gb",
            "H100-SXM5-80GB": "nvidia-h100-80gb"}
PROFILES = [(model, accel, name) for model, accel in MIG_GPUS.items() for name in mig.profiles(model)]
SMALL = "Qwen/Qwen3-0.6B"
VLLM_TP_ERROR = ("AssertionError: local_world_size (2) must be less than or equal to the number of visible devices "
                 "(1).")
TGI_SHARD_ERROR = "AssertionError: Each process is one gpu"


def _mig_labels(accel: str, profile: str) -> dict[str, str]:
    return {container.GPU_LABEL: accel, mig.PARTITION_LABEL: profile}


@pytest.mark.parametrize(("model", "accel", "profile"), PROFILES)
def test_a_cuda_process_sees_one_mig_instance_of_its_profile(model: str, accel: str, profile: str) -> None:
    p = mig.profiles(model)[profile]
    for n in (1, 2, 3):
        got = container.for_counts(_mig_labels(accel, profile), n, 0)
        assert got.allocated == n and got.visible == 1 and got.kind == "mig"
        d = got.device
        assert d is not None
        assert (d.memory_mib, d.partition) == (p.memory_mib, profile)
        assert d.compute == pytest.approx(p.compute_slices / 7)
        assert d.peak_tflops == pytest.approx(catalog.gpu_type(accel).bf16_tflops * p.compute_slices / 7)
        assert got.interconnect == "none"
        assert (got.invisible_error(n) is None) == (n == 1)


def test_whole_gpus_time_slicing_and_mps_shares() -> None:
    whole = container.for_counts({container.GPU_LABEL: "nvidia-h100-80gb"}, 8, 0)
    assert (whole.visible, whole.interconnect, whole.device.memory_mib, whole.device.compute) == (8, "nvlink", 81920, 1)
    assert container.for_counts({container.GPU_LABEL: "nvidia-l4"}, 2, 0).interconnect == "pcie"
    ts = container.for_counts({container.GPU_LABEL: "nvidia-l4", "cloud.google.com/gke-gpu-sharing-strategy":
                               "time-sharing", "cloud.google.com/gke-max-shared-clients-per-gpu": "4"}, 1, 0)
    assert (ts.kind, ts.device.memory_mib) == ("time-slicing", 24 * 1024)  # no memory isolation
    mps = container.for_counts({container.GPU_LABEL: "nvidia-l4", "cloud.google.com/gke-gpu-sharing-strategy": "mps",
                                "cloud.google.com/gke-max-shared-clients-per-gpu": "4"}, 1, 0)
    assert (mps.kind, mps.device.memory_mib) == ("mps", 24 * 1024 // 4)  # CUDA_MPS_PINNED_DEVICE_MEM_LIMIT


@pytest.mark.parametrize("gen", [t.name for t in catalog.tpu_types()])
def test_tpu_chips_single_and_multi_host(gen: str) -> None:
    """Every TPU machine type of the generation, its single-host topology and its first multi-host one (the 8-chip
    v5e/v6e machines have no multi-host topology; their 4-chip machines do): the multi-host case must run for
    every generation that has one."""
    t = catalog.tpu_type(gen)
    labels = {tpu.ACCELERATOR_LABEL: t.gke_accelerator, tpu.NODEPOOL_LABEL: "slice-a"}
    multi_host = 0
    for mt in (m for m in catalog.tpu_machine_types() if m.tpu == gen):
        single = [mt.single_host_topology] if mt.single_host_topology else []
        topologies = [s for s in tpu.valid_topologies(gen, mt.name) if tpu.slice_shape(mt.name, s)[1] > 1]
        pod = {"metadata": {"labels": {container.COMPLETION_INDEX: "1"}},
               "spec": {"containers": [{"resources": {"limits": {"google.com/tpu": str(mt.tpu_chips)}}}]}}
        for topology in [*single, *topologies[:1]]:
            node = {"metadata": {"labels": {**labels, tpu.TOPOLOGY_LABEL: topology}},
                    "status": {"capacity": {"google.com/tpu": str(mt.tpu_chips)}}}
            got = container.for_container(pod, node)
            assert got.kind == "tpu" and got.visible == got.allocated == mt.tpu_chips and got.interconnect == "ici"
            assert got.device.memory_mib == int(t.hbm_gib * 1024)
            chips, hosts = tpu.slice_shape(mt.name, topology)
            if hosts > 1:
                multi_host += 1
                assert got.slice == container.SliceMembership("slice-a", topology, chips, hosts, 1)
            else:
                assert got.slice is None
    has_multi_host = any(tpu.slice_shape(m.name, s)[1] > 1 for m in catalog.tpu_machine_types() if m.tpu == gen
                         for s in tpu.valid_topologies(gen, m.name))
    assert (multi_host > 0) == has_multi_host


def _tp2(server: str) -> dict:
    """A Deployment whose container asks for two nvidia.com/gpu and runs a two-way tensor-parallel server."""
    if server == "vllm":
        d = vllm("srv", 1).args(["--model", SMALL, "--max-model-len", "4096", "--tensor-parallel-size", "2"]).obj()
    else:
        d = vllm("srv", 1).obj()
        c = d["spec"]["template"]["spec"]["containers"][0]
        c.update({"name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:3.0.1",
                  "args": ["--model-id", SMALL, "--num-shard", "2", "--max-total-tokens", "4096"]})
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    return d


@pytest.mark.parametrize(("server", "error"), [("vllm", VLLM_TP_ERROR), ("tgi", TGI_SHARD_ERROR)])
@pytest.mark.parametrize(("accel", "profile"), [("nvidia-tesla-a100", "3g.20gb"), ("nvidia-a100-80gb", "1g.10gb"),
                                                 ("nvidia-h100-80gb", "2g.20gb")])
def test_tensor_parallel_over_two_mig_instances_fails_at_start(server: str, error: str, accel: str,
                                                                profile: str) -> None:
    dep = _tp2(server)
    pod = {"metadata": {"uid": "u", "name": "p", "annotations": {}}, "spec": dep["spec"]["template"]["spec"]}
    found = find_model_server(pod["spec"])
    assert found is not None
    args = found[1]
    spec = lookup_server_model(args.model, args.served_model_name)
    node = {"metadata": {"name": "n", "labels": _mig_labels(accel, profile)}}
    with pytest.raises(sizing.StartupFailure) as err:
        sizing.start(args, spec, pod, node, None)
    assert str(err.value) == error and err.value.stage == "init"
    whole = {"metadata": {"name": "n", "labels": {container.GPU_LABEL: accel}}}
    sizing.start(args, spec, pod, whole, None)  # two whole GPUs: the same server starts


@pytest.mark.parametrize("server", ["vllm", "tgi"])
def test_tp2_on_two_mig_instances_crash_loops_in_a_run(server: str) -> None:
    pool = make_pool("a100", "a2-ultragpu-1g", 1).gpus("nvidia-a100-80gb", 1).gpu_partition("3g.40gb").obj()
    r = run(objects=[serving_scenario("10m").obj(), pool, _tp2(server), inference_pool().obj(),
                     trace().rate(1).start("5m").model(SMALL).obj()])
    pod = next(iter(_last_pods(r).values()))
    msgs = _crash_messages(pod)
    assert msgs and msgs[0] == (VLLM_TP_ERROR if server == "vllm" else TGI_SHARD_ERROR), msgs
    assert "CrashLoopBackOff" in _waiting_reasons(r, pod["metadata"]["name"])


def _validate(tmp_path, objs: list[dict]) -> str:
    from conftest import write_yaml
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    res = CliRunner().invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", objs))])
    assert "Traceback" not in res.output
    return res.output


@pytest.mark.parametrize(("server", "error"), [("vllm", VLLM_TP_ERROR), ("tgi", TGI_SHARD_ERROR)])
@pytest.mark.parametrize("by", ["pool", "selector"])
def test_validate_warns_of_tensor_parallelism_over_mig_instances(tmp_path, server: str, error: str, by: str) -> None:
    dep = _tp2(server)
    pool = make_pool("a100", "a2-ultragpu-1g", 1).gpus("nvidia-a100-80gb", 1).gpu_partition("3g.40gb").obj()
    if by == "selector":
        dep["spec"]["template"]["spec"]["nodeSelector"] = {container.GPU_LABEL: "nvidia-a100-80gb",
                                                           mig.PARTITION_LABEL: "3g.40gb"}
        pool = make_pool("a100", "a2-ultragpu-1g", 1).gpus("nvidia-a100-80gb", 1).obj()
    out = _validate(tmp_path, [serving_scenario("10m").obj(), pool, dep])
    assert "warning: Deployment/default/srv" in out and "MIG instances (3g.40gb)" in out, out
    assert error in " ".join(out.split()), out
    whole = make_pool("a100", "a2-ultragpu-1g", 1).gpus("nvidia-a100-80gb", 1).obj()
    dep["spec"]["template"]["spec"].pop("nodeSelector", None)
    assert "MIG instances" not in _validate(tmp_path, [serving_scenario("10m").obj(), whole, dep])


def test_a_model_server_on_a_node_without_gpu_serves_nothing_and_says_so() -> None:
    """No traceback: the data plane's event is written after its watch handler, not during it."""
    d = vllm("srv", 1).args(["--model", SMALL]).obj()
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    r = run(objects=[serving_scenario("10m").obj(), make_pool("cpu", "e2-standard-4", 1).obj(), d,
                     inference_pool().obj(), trace().rate(1).start("3m").model(SMALL).obj()])
    events = [o for _, _, _, o in r.history if o["kind"] == "Event" and o.get("reason") == "ModelServerNotSimulated"]
    assert events and "has no GPU; the pod serves no requests" in events[0]["message"]


def test_serving_pods_on_gpus_get_dcgm_series(tmp_path) -> None:
    from serving_builders import h100_pool

    out = tmp_path / "out"
    run(objects=[serving_scenario("10m").obj(), h100_pool(1).obj(),
                 vllm("srv", 1).args(["--model", SMALL, "--max-model-len", "4096"]).obj(), inference_pool().obj(),
                 trace().rate(20).start("2m").duration("8m").model(SMALL).obj()], out=out)
    prom = (out / "metrics.prom").read_text()
    util = [line for line in prom.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    fb = [line for line in prom.splitlines() if line.startswith("DCGM_FI_DEV_FB_USED{")]
    assert len(util) == len(fb) == 1
    assert 'modelName="NVIDIA H100 80GB HBM3"' in util[0] and 'container="vllm"' in util[0]
    assert float(fb[0].split()[-2]) == pytest.approx(0.9 * 81559, abs=1)  # --gpu-memory-utilization 0.9 reserved
    import json

    series = json.loads((out / "timeseries.json").read_text())["dcgm"]["pods"]
    [s] = series.values()
    assert max(s["DCGM_FI_DEV_GPU_UTIL"]) > 0 and "DCGM_FI_PROF_SM_ACTIVE" not in s

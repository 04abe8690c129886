"""Training reads what its container really gets (devices/container.py): its memory is checked on every device kind
(a whole GPU, each MIG profile, an MPS client's share, a TPU chip's HBM) and it computes at the device's share of the
chip (a MIG instance: compute slices / 7); a process given two MIG instances sees one; `explain job` and the run
agree on whether a rank fits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from k8s_builders import make_pool, make_scenario
from typer.testing import CliRunner

from kubetwin import catalog
from kubetwin.cli.main import app
from kubetwin.devices import container, mig
from kubetwin.runner import run
from kubetwin.workloads import memory
from kubetwin.workloads.training_spec import parse

P = "training.kubetwin.io/"
ONE_B = {P + "params": "1B", P + "steps": "20", P + "global-batch-size": "8", P + "sequence-length": "1024"}
MIG_MACHINES = {"A100-SXM4-40GB": ("a2-highgpu-1g", "nvidia-tesla-a100"),
                "A100-SXM4-80GB": ("a2-ultragpu-1g", "nvidia-a100-80gb"),
                "H100-SXM5-80GB": ("a3-highgpu-1g", "nvidia-h100-80gb")}
PROFILES = [(model, name) for model in MIG_MACHINES for name in mig.profiles(model) if "+me" not in name]
TPUS = {"v5e": "ct5lp-hightpu-4t", "v5p": "ct5p-hightpu-4t", "v6e": "ct6e-standard-4t"}


def _job(ann: dict, limits: dict, selector: dict | None = None, ranks: int = 1) -> dict:
    spec: dict = {"restartPolicy": "Never", "containers": [{"name": "trainer", "image": "x", "resources": {
        "requests": {"cpu": "1"}, "limits": limits}}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"parallelism": ranks, "completions": ranks, "completionMode": "Indexed", "backoffLimit": 0,
                     "template": {"metadata": {"annotations": ann}, "spec": spec}}}


def _end(res) -> tuple[str, str]:
    """(the last pod's phase, its container's termination message)."""
    pods = [o for _, _, _, o in res.history if o["kind"] == "Pod"]
    last = pods[-1]
    term = (((last["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated") or {})
    return last["status"].get("phase", ""), term.get("message", "")


def _explain(out: Path) -> str:
    return CliRunner().invoke(app, ["explain", "job", "train", "--run", str(out)]).output


@pytest.mark.parametrize(("model", "profile"), PROFILES)
def test_training_memory_and_compute_on_each_mig_profile(tmp_path: Path, model: str, profile: str) -> None:
    machine, accel = MIG_MACHINES[model]
    p = mig.profiles(model)[profile]
    pool = make_pool("mig", machine, 1).gpus(accel, 1).gpu_partition(profile).obj()
    out = tmp_path / "out"
    res = run(objects=[make_scenario("3h").obj(), pool, _job(ONE_B, {"nvidia.com/gpu": "1"})], out=out)
    phase, message = _end(res)
    need = memory.used_mib(parse(ONE_B), 1)
    text = _explain(out)
    if need > p.memory_mib:
        assert phase == "Failed", (profile, need, p.memory_mib)
        assert message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ")
        # PyTorch's format_size: GiB with two decimals above 1 GiB
        assert f"GPU 0 has a total capacity of {p.memory_mib / 1024:.2f} GiB of which" in message
        # no step ran: explain says why instead of a step time (the old answer printed one, with a footnote)
        assert "Never trained: every rank failed at start with torch.OutOfMemoryError" in text
        assert "Step time" not in text
    else:
        assert phase == "Succeeded", (profile, message)
        assert "a rank does not fit" not in text
    rec = json.loads((out / "training.json").read_text())["default/train"]
    assert rec["placement"]["peak_tflops"] == pytest.approx(catalog.gpu_type(accel).bf16_tflops * p.compute_slices / 7)


def test_1b_model_on_a_1g_10gb_slice_runs_out_of_memory_and_on_a_7g_gets_the_whole_gpu(tmp_path: Path) -> None:
    small = make_pool("mig", "a3-highgpu-1g", 1).gpus("nvidia-h100-80gb", 1).gpu_partition("1g.10gb").obj()
    res = run(objects=[make_scenario("3h").obj(), small, _job(ONE_B, {"nvidia.com/gpu": "1"})])
    phase, message = _end(res)
    assert phase == "Failed" and "CUDA out of memory" in message and "total capacity of 9.75 GiB" in message


@pytest.mark.parametrize(("accel", "profile", "machine"), [("nvidia-a100-80gb", "3g.40gb", "a2-ultragpu-2g"),
                                                            ("nvidia-h100-80gb", "1g.20gb", "a3-highgpu-2g"),
                                                            ("nvidia-tesla-a100", "2g.10gb", "a2-highgpu-2g")])
def test_a_training_process_given_two_mig_instances_sees_one(accel: str, profile: str, machine: str) -> None:
    pool = make_pool("mig", machine, 1).gpus(accel, 2).gpu_partition(profile).obj()
    tiny = {**ONE_B, P + "params": "10M"}
    res = run(objects=[make_scenario("3h").obj(), pool, _job(tiny, {"nvidia.com/gpu": "2"})])
    phase, message = _end(res)
    assert phase == "Failed"
    assert message.startswith("RuntimeError: CUDA error: invalid device ordinal"), message


def _tpu_pool(gen: str) -> dict:
    zone = "us-central1-b" if gen == "v6e" else "us-central1-a"
    return make_pool("tpu", TPUS[gen], 1).spec(zones=[zone]).obj()


@pytest.mark.parametrize("gen", sorted(TPUS))
@pytest.mark.parametrize(("params", "fsdp"), [("8B", False), ("1B", True), ("5B", False)])
def test_tpu_training_memory_is_checked_against_the_chips_hbm(tmp_path: Path, gen: str, params: str,
                                                               fsdp: bool) -> None:
    ann = {**ONE_B, P + "params": params, P + "sequence-length": "256", P + "global-batch-size": "4"}
    if fsdp:
        ann[P + "fsdp"] = "true"
    out = tmp_path / "out"
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(gen), _job(ann, {"google.com/tpu": "4"})], out=out)
    phase, message = _end(res)
    t = catalog.tpu_type(gen)
    need = memory.used_mib(parse(ann), 4, tpu=True)
    text = _explain(out)
    if need > t.hbm_gib * 1024 * (1 - container.TPU_RESERVED):
        assert phase == "Failed", (gen, params, need)
        assert message.startswith("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile "
                                  "permanent error. Ran out of memory in memory space hbm. Used "), message
        assert "Never trained: every rank failed at start with jaxlib.xla_extension.XlaRuntimeError" in text
    else:
        assert phase == "Succeeded", (gen, params, message)
        assert "does not fit" not in text  # explain never says it about a job the run completes
    assert "DCGM" not in text  # a TPU job is not described in DCGM's series


def test_8b_without_fsdp_on_v5e_fails_with_xlas_out_of_memory() -> None:
    ann = {**ONE_B, P + "params": "8B"}
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool("v5e"), _job(ann, {"google.com/tpu": "4"})])
    phase, message = _end(res)
    assert phase == "Failed" and "Ran out of memory in memory space hbm." in message
    assert "of 15.38G hbm." in message  # 16 GiB less the runtime's reservation (twin assumption, see memory.py)


@pytest.mark.parametrize(("accel", "machine", "profile"), [("nvidia-a100-80gb", "a2-ultragpu-1g", "3g.40gb"),
                                                            ("nvidia-h100-80gb", "a3-highgpu-1g", "2g.20gb"),
                                                            ("nvidia-tesla-a100", "a2-highgpu-1g", "4g.20gb")])
def test_a_mig_rank_runs_for_the_step_models_time_once(tmp_path: Path, accel: str, machine: str, profile: str) -> None:
    """The step model already computes at compute slices / 7: the run takes its work time, not that slowed again."""
    small = {**ONE_B, P + "params": "100M", P + "steps": "2000"}
    out = tmp_path / "out"
    res = run(objects=[make_scenario("6h").obj(), make_pool("mig", machine, 1).gpus(accel, 1).gpu_partition(
        profile).obj(), _job(small, {"nvidia.com/gpu": "1"})], out=out)
    pods = [(t, o) for t, _, _, o in res.history if o["kind"] == "Pod"]
    start = next(t for t, o in pods if o["status"].get("phase") == "Running")
    end = next(t for t, o in pods if o["status"].get("phase") == "Succeeded")
    work = json.loads((out / "training.json").read_text())["default/train"]["breakdown"]["work_seconds"]
    assert end - start == pytest.approx(work, rel=0.01)


def _warnings(job: dict) -> list[str]:
    from kubetwin.api.loader import Manifest
    from kubetwin.validation.validate import validate

    return [d.message for d in validate([Manifest(job, "t.yaml", 1)]) if d.severity == "warning"]


@pytest.mark.parametrize(("accel", "profile", "fits"), [("nvidia-h100-80gb", "1g.10gb", False),
                                                         ("nvidia-a100-80gb", "3g.40gb", True),
                                                         ("nvidia-tesla-a100", "1g.5gb", False)])
def test_validate_checks_training_memory_on_the_mig_profile_selected(accel: str, profile: str, fits: bool) -> None:
    job = _job(ONE_B, {"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": accel,
                                                mig.PARTITION_LABEL: profile})
    warned = [w for w in _warnings(job) if "will not fit" in w]
    assert bool(warned) != fits, warned
    if warned:
        assert f"a {profile} MIG instance of {accel}" in warned[0] and "CUDA out of memory" in warned[0]


def test_validate_warns_of_two_mig_instances_per_training_process() -> None:
    job = _job({**ONE_B, P + "params": "10M"}, {"nvidia.com/gpu": "2"},
               {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb", mig.PARTITION_LABEL: "3g.40gb"})
    [w] = [w for w in _warnings(job) if "MIG" in w]
    assert "invalid device ordinal" in w


@pytest.mark.parametrize(("gen", "accel"), [("v5e", "tpu-v5-lite-podslice"), ("v5p", "tpu-v5p-slice")])
def test_validate_warns_of_xla_out_of_memory_on_the_tpu_selected(gen: str, accel: str) -> None:
    job = _job({**ONE_B, P + "params": "8B"}, {"google.com/tpu": "4"}, {"cloud.google.com/gke-tpu-accelerator": accel})
    [w] = [w for w in _warnings(job) if "will not fit" in w]
    assert f"a {accel} chip" in w and "RESOURCE_EXHAUSTED" in w


@pytest.mark.parametrize(("strategy", "fails"), [("MPS", True), ("TIME_SHARING", False)])
def test_training_memory_on_a_shared_gpu_is_the_share_it_gets(strategy: str, fails: bool) -> None:
    """MPS pins each client to the GPU's memory / clients (6 GiB of an L4 for 4); time-slicing isolates nothing,
    so one rank alone has the L4's 22.5 GiB."""
    pool = make_pool("l4", "g2-standard-8", 1).gpus("nvidia-l4", 1).gpu_sharing(strategy, 4).obj()
    res = run(objects=[make_scenario("6h").obj(), pool, _job(ONE_B, {"nvidia.com/gpu": "1"})])
    phase, message = _end(res)
    assert (phase == "Failed") == fails, message
    if fails:
        assert "CUDA out of memory" in message and "total capacity of 6.00 GiB" in message


def test_tpu_pods_get_gke_tpu_metrics_never_dcgm_series(tmp_path: Path) -> None:
    ann = {**ONE_B, P + "fsdp": "true", P + "steps": "2000"}
    out = tmp_path / "out"
    run(objects=[make_scenario("3h").obj(), _tpu_pool("v5e"), _job(ann, {"google.com/tpu": "4"})], out=out)
    prom = (out / "metrics.prom").read_text()
    assert "DCGM_FI_" not in prom
    for name in ("duty_cycle", "tensorcore_utilization", "memory_used", "memory_total"):
        assert f"# TYPE {name} gauge" in prom, name
    total = [line for line in prom.splitlines() if line.startswith("memory_total{")]
    assert len(total) == 4  # one series per chip of the pod
    assert all('make="cloud-tpu"' in line and 'model="tpu-v5-lite-podslice"' in line for line in total)
    assert all(float(line.split()[-2]) == 16 * 2**30 for line in total)  # the chip's 16 GiB, not an H100's 80 GB
    rec = json.loads((out / "training.json").read_text())["default/train"]
    assert "dcgm" not in rec and rec["tpu_metrics"]["memory_total"] == 16 * 2**30
    ts = json.loads((out / "timeseries.json").read_text())
    assert not (ts.get("dcgm") or {}).get("pods") and ts["dcgm"]["tpu_pods"]


def test_explain_says_what_a_rank_computes_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(objects=[make_scenario("3h").obj(), make_pool("mig", "a3-highgpu-1g", 1).gpus("nvidia-h100-80gb", 1)
                 .gpu_partition("3g.40gb").obj(), _job({**ONE_B, P + "params": "100M"}, {"nvidia.com/gpu": "1"})],
        out=out)
    text = _explain(out)
    assert "each rank computes on a MIG 3g.40gb instance of nvidia-h100-80gb: 39.50 GiB, 0.429 of the chip's" in text
    assert "peak 423.857 TFLOPS" in text  # 989 x 3/7, not the whole H100's 989

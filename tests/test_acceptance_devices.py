"""Acceptance scenarios for what a container gets (issue 31 items 1-2), written as a platform engineer writes them
from the real projects' docs (GKE "Running multi-instance GPUs", "GPU sharing with time-sharing / MPS", "Deploy TPU
workloads" with an Indexed Job + headless Service or a JobSet, vLLM / TGI / SGLang / Triton on GKE, torchrun and
JAX training) and run through `kubetwin validate`, `kubetwin run`, `get`, `describe` and `explain job`. Each
asserts the real platform's answer: the pod starts or fails with the real error, the memory and compute it gets, the
metric names, the gang, and the notice where the twin does not model something. The manifests are in
tests/data/devices/ (${...} placeholders fill the shape under test)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubetwin import catalog
from kubetwin.cli.main import app
from kubetwin.devices import mig

DATA = Path(__file__).parent / "data" / "devices"
MIG_MACHINES = {"nvidia-tesla-a100": ("A100-SXM4-40GB", "a2-highgpu-1g"),
                "nvidia-a100-80gb": ("A100-SXM4-80GB", "a2-ultragpu-1g"),
                "nvidia-h100-80gb": ("H100-SXM5-80GB", "a3-highgpu-1g")}
MIG_SHAPES = [(accel, profile) for accel, (model, _) in MIG_MACHINES.items() for profile in mig.profiles(model)
              if "+" not in profile]  # GKE partitions whole profiles (no +me media-extension ones)
CLI = CliRunner()


def _scenario(tmp_path: Path, name: str, **values: str) -> Path:
    """tests/data/devices/<name>.yaml with its ${...} placeholders filled, written under tmp_path."""
    text = string.Template((DATA / f"{name}.yaml").read_text()).substitute(values)
    out = tmp_path / f"{name}.yaml"
    out.write_text(text)
    return out


def _cli(*args: str) -> str:
    res = CLI.invoke(app, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.output


def _run(path: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    res = CLI.invoke(app, ["run", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    (tmp_path / "console.txt").write_text(res.output)
    return out


def _pods(out: Path) -> list[dict]:
    return yaml.safe_load(_cli("get", "pods", "-o", "yaml", "--run", str(out)))["items"]


# -- training on every MIG profile of the A100 40/80 GB and the H100 -----------------------------------------------
@pytest.mark.parametrize(("accel", "profile"), MIG_SHAPES)
def test_training_on_a_mig_pool_validate_run_and_explain_agree(tmp_path: Path, accel: str, profile: str) -> None:
    """A 1B model (~20 GiB with activations and the CUDA context) on each MIG profile: validate warns exactly when
    the run's rank dies of CUDA out of memory, the Job then fails, and `explain job` and the headline say it never
    trained (no step or job time); a fitting rank computes at compute slices / 7 of the GPU's peak. The Job selects
    only the GPU type: validate reads the pool's gpuPartitionSize as the run does."""
    model, machine = MIG_MACHINES[accel]
    p = mig.profiles(model)[profile]
    path = _scenario(tmp_path, "mig-training", ACCEL=accel, PROFILE=profile, MACHINE=machine)
    checked = _cli("validate", str(path))
    out = _run(path, tmp_path)
    [pod] = _pods(out)
    state = pod["status"]["containerStatuses"][0]["state"]
    explain = _cli("explain", "job", "train-1b", "--run", str(out))
    from kubetwin.report.headline import training_rows

    [row] = [v for k, v in training_rows(json.loads((out / "training.json").read_text()))
             if k == "training default/train-1b"]
    if p.memory_mib < 20 * 1024:  # 16 bytes/param + activations + the CUDA context do not fit
        assert "will not fit a " + profile + " MIG instance of " + accel in checked
        assert pod["status"]["phase"] == "Failed"
        assert state["terminated"]["message"].startswith("torch.OutOfMemoryError: CUDA out of memory.")
        assert "Step time" not in explain and "Never trained: every rank failed at start" in explain
        assert row.startswith("never trained: every rank failed at start") and "step" not in row
        console = (tmp_path / "console.txt").read_text()  # a MIG instance is not shared: no "slowdown x0.00"
        assert "slowdown" not in console and "GPU out of memory mig" in console
    else:
        assert "will not fit" not in checked
        assert pod["status"]["phase"] == "Succeeded"
        peak = catalog.gpu_type(accel).bf16_tflops * p.compute_slices / 7
        assert f"peak {peak:g} TFLOPS" in explain
        assert f"each rank computes on a MIG {profile} instance of {accel}" in explain
        assert row.startswith("step ")


# -- TPU: an 8B model without FSDP on v5e chips -------------------------------------------------------------------
def test_tpu_v5e_indexed_job_8b_without_fsdp_fails_with_xla_oom_and_never_trained(tmp_path: Path) -> None:
    """GKE's multi-host TPU Job (Indexed, headless Service, 2x4 v5e): 8B params replicated on 16 GiB chips dies of
    XLA's RESOURCE_EXHAUSTED at compile time on every worker; explain and the headline say it never trained."""
    path = DATA / "tpu-v5e-indexed-job-8b.yaml"
    assert "will not fit a tpu-v5-lite-podslice chip with 15.38 GiB" in _cli("validate", str(path))
    out = _run(path, tmp_path)
    pods = _pods(out)
    assert len(pods) == 2 and {p["status"]["phase"] for p in pods} == {"Failed"}
    for p in pods:
        msg = p["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        assert "RESOURCE_EXHAUSTED" in msg and "Ran out of memory in memory space hbm" in msg
    explain = _cli("explain", "job", "tpu-job-podslice", "--run", str(out))
    assert "Never trained: every rank failed at start" in explain and "Step time" not in explain
    assert "Which change" not in explain


# -- GKE's TPU webhook: TPU_WORKER_ID and TPU_WORKER_HOSTNAMES on multi-host TPU pods --------------------------------
def _env(pod: dict) -> dict[str, str]:
    [c] = [c for c in pod["spec"]["containers"] if "google.com/tpu" in str(c.get("resources"))]
    return {e["name"]: e.get("value") for e in c.get("env") or [] if e["name"].startswith("TPU_WORKER_")}


@pytest.mark.parametrize(("scenario", "job", "subdomain", "hosts"),
                         [("tpu-v5e-jobset-jax", "multislice-job-slice-0", "multislice-job", 4),
                          ("tpu-v5e-indexed-job-8b", "tpu-job-podslice", "headless-svc", 2)])
def test_gke_injects_tpu_worker_env_into_multi_host_tpu_pods(tmp_path: Path, scenario: str, job: str,
                                                              subdomain: str, hosts: int) -> None:
    """GKE's mutating webhook sets TPU_WORKER_ID (the pod's completion index) and TPU_WORKER_HOSTNAMES (every
    worker's `<job>-<index>.<subdomain>`, in index order) on the TPU containers of an Indexed Job with a subdomain
    and parallelism > 1 (GKE "Deploy TPU workloads in GKE Standard", multi-host: "GKE automatically injects these
    environment variables by using a mutating webhook when a Job is created with the completionMode: Indexed,
    subdomain, parallelism > 1, and requesting google.com/tpu properties"); a JobSet's Jobs are such Jobs."""
    out = _run(DATA / f"{scenario}.yaml", tmp_path)
    pods = _pods(out)
    assert len(pods) == hosts
    want = ",".join(f"{job}-{i}.{subdomain}" for i in range(hosts))
    for pod in pods:
        idx = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert _env(pod) == {"TPU_WORKER_ID": idx, "TPU_WORKER_HOSTNAMES": want}


def test_no_tpu_worker_env_without_the_webhook_conditions(tmp_path: Path) -> None:
    """A single-host TPU Job (parallelism 1) and an Indexed Job without a subdomain get no TPU_WORKER_* env."""
    docs = list(yaml.safe_load_all((DATA / "tpu-v5e-indexed-job-8b.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "Job")
    del job["spec"]["template"]["spec"]["subdomain"]
    for d in docs:
        for k in list((d.get("metadata") or {}).get("annotations") or {}):
            if k.startswith("training.kubetwin.io/"):
                del d["metadata"]["annotations"][k]
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "10m"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    for pod in _pods(_run(path, tmp_path)):
        assert not any(k.startswith("TPU_") for k in _env(pod))


# -- GPUs and MIG devices given through DRA ResourceClaims (the NVIDIA DRA driver twin) ------------------------------
TRAIN_1B = "\n".join(f"        training.kubetwin.io/{k}: \"{v}\"" for k, v in
                     (("params", "1B"), ("steps", "100"), ("global-batch-size", "8"), ("sequence-length", "2048")))
TORCHRUN = dict(WORKLOAD="training", ANNOTATIONS=TRAIN_1B, IMAGE="nvcr.io/nvidia/pytorch:24.05-py3",
                ARGS="[torchrun, --nproc_per_node=1, train.py]")
VLLM_JOB = dict(WORKLOAD="vLLM", ANNOTATIONS="        kubetwin.io/duration: 30m", IMAGE="vllm/vllm-openai:v0.10.1")


@pytest.mark.parametrize(("profile", "fits"), [("1g.10gb", False), ("2g.20gb", False), ("3g.40gb", True),
                                               ("7g.80gb", True)])
def test_training_on_a_dra_mig_device_gets_the_instance(tmp_path: Path, profile: str, fits: bool) -> None:
    """A training pod whose container gets one MIG device through a ResourceClaim computes on that instance as on
    a GKE MIG partition: its memory (CUDA out of memory below ~20 GiB for a 1B model) and compute slices / 7."""
    p = mig.profiles("A100-SXM4-80GB")[profile]
    out = _run(_scenario(tmp_path, "dra-mig", PROFILE=profile, COUNT="1", **TORCHRUN), tmp_path)
    [pod] = _pods(out)
    explain = _cli("explain", "job", "work", "--run", str(out))
    if fits:
        assert pod["status"]["phase"] == "Succeeded"
        assert f"each rank computes on a MIG {profile} instance of nvidia-a100-80gb" in explain
        assert f"peak {catalog.gpu_type('nvidia-a100-80gb').bf16_tflops * p.compute_slices / 7:g} TFLOPS" in explain
    else:
        assert pod["status"]["phase"] == "Failed"
        msg = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        assert msg.startswith("torch.OutOfMemoryError: CUDA out of memory.")
        assert f"GPU 0 has a total capacity of {p.memory_mib / 1024:.2f} GiB" in msg
        assert "Never trained: every rank failed at start" in explain


def test_vllm_on_dra_mig_devices_sees_one_instance(tmp_path: Path) -> None:
    """vLLM given two MIG devices by a claim with --tensor-parallel-size 2 exits at start with vLLM's own error
    (one MIG instance per CUDA process); an 8B model on one 1g.10gb device dies loading its weights."""
    out = _run(_scenario(tmp_path, "dra-mig", PROFILE="3g.40gb", COUNT="2", **VLLM_JOB,
                         ARGS='[--model, Qwen/Qwen3-0.6B, --tensor-parallel-size, "2"]'), tmp_path)
    [pod] = _pods(out)
    msg = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    assert pod["status"]["phase"] == "Failed"
    assert msg == ("AssertionError: local_world_size (2) must be less than or equal to the number of visible "
                   "devices (1).")
    out2 = tmp_path / "second"
    out2.mkdir()
    out = _run(_scenario(out2, "dra-mig", PROFILE="1g.10gb", COUNT="1", **VLLM_JOB,
                         ARGS="[--model, meta-llama/Llama-3.1-8B-Instruct]"), out2)
    [pod] = _pods(out)
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"].startswith(
        "torch.OutOfMemoryError: CUDA out of memory.")


def test_vllm_tensor_parallel_over_two_dra_gpus_serves_with_dcgm_series(tmp_path: Path) -> None:
    """Two whole H100s claimed through DRA and --tensor-parallel-size 2: validate accepts it (the container has no
    nvidia.com/gpu, its GPUs are the claim's), the server starts and serves, bills its two GPUs, and the DCGM
    exporter writes one series per GPU."""
    path = DATA / "dra-gpus-vllm.yaml"
    assert "0 errors" in _cli("validate", str(path))
    out = _run(path, tmp_path)
    [pod] = _pods(out)
    assert pod["status"]["phase"] == "Running"
    summary = json.loads((out / "summary.json").read_text())
    overall = summary["serving"]["overall"]
    # two GPUs from the pod's binding (after the node and its driver come up) to the end: not 0 as before
    assert overall["completed"] > 0 and 2 * 30 / 60 < overall["gpu_hours"] <= 2 * 40 / 60
    prom = (out / "metrics.prom").read_text()
    gpus = {line.split('gpu="')[1].split('"')[0] for line in prom.splitlines()
            if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'pod="' + pod["metadata"]["name"] in line}
    assert gpus == {"0", "1"}


def test_ddp_ranks_on_dra_gpus_train_as_one_job(tmp_path: Path) -> None:
    """A two-pod torchrun Indexed Job, one DRA-claimed H100 per pod: the step model counts both ranks (dp 2 on
    the H100's peak) and both pods complete, as with nvidia.com/gpu: 1 (before: no rank had a device, the pods
    ran until the end of the run)."""
    out = _run(DATA / "dra-gpus-ddp.yaml", tmp_path)
    pods = _pods(out)
    assert len(pods) == 2 and {p["status"]["phase"] for p in pods} == {"Succeeded"}
    explain = _cli("explain", "job", "ddp", "--run", str(out))
    assert "dp 2 x tp 1 x pp 1" in explain and "2 x nvidia-h100-80gb on 1 nodes" in explain
    assert f"peak {catalog.gpu_type('nvidia-h100-80gb').bf16_tflops:g} TFLOPS" in explain


# -- DCGM series follow the physical GPU ---------------------------------------------------------------------------
@pytest.mark.parametrize(("machine", "accel", "share", "replicas", "profile"), [
    ("a3-highgpu-1g", "nvidia-h100-80gb", "gpuSharingConfig: {gpuSharingStrategy: MPS, maxSharedClientsPerGpu: 4}",
     4, ""),
    ("g2-standard-8", "nvidia-l4", "gpuSharingConfig: {gpuSharingStrategy: TIME_SHARING, maxSharedClientsPerGpu: 3}",
     3, ""),
    ("a2-highgpu-1g", "nvidia-tesla-a100", "gpuPartitionSize: 1g.5gb", 7, "1g.5gb"),
    ("a3-highgpu-1g", "nvidia-h100-80gb", "gpuPartitionSize: 3g.40gb", 2, "3g.40gb")])
def test_dcgm_series_of_pods_sharing_one_gpu_name_that_gpu(tmp_path: Path, machine: str, accel: str, share: str,
                                                          replicas: int, profile: str) -> None:
    """Pods sharing the node's one GPU (time-slicing, MPS clients, MIG instances) are all on gpu="0", the same
    UUID: dcgm-exporter maps each pod to the device the kubelet's pod-resources API says it holds, and a shared or
    partitioned GPU is still the one physical GPU (MIG instances are told apart by GPU_I_PROFILE / GPU_I_ID)."""
    path = _scenario(tmp_path, "shared-gpu-vllm", MACHINE=machine, ACCEL=accel, SHARE=share,
                     REPLICAS=str(replicas), SHARING=share.split(":")[0],
                     UTIL="0.3" if "TIME_SHARING" in share else "0.9")  # time-slicing tenants share the memory
    out = _run(path, tmp_path)
    series = [line for line in (out / "metrics.prom").read_text().splitlines()
              if line.startswith("DCGM_FI_DEV_FB_USED{")]
    pods = {line.split('pod="')[1].split('"')[0] for line in series}
    assert len(pods) == replicas
    assert {line.split('gpu="')[1].split('"')[0] for line in series} == {"0"}
    assert len({line.split('UUID="')[1].split('"')[0] for line in series}) == 1
    if profile:
        assert {line.split('GPU_I_PROFILE="')[1].split('"')[0] for line in series} == {profile}
        assert len({line.split('GPU_I_ID="')[1].split('"')[0] for line in series}) == replicas
    else:
        assert "GPU_I_PROFILE" not in "".join(series)


# -- more than one shared GPU per container --------------------------------------------------------------------------
@pytest.mark.parametrize("share", ["gpuSharingConfig: {gpuSharingStrategy: TIME_SHARING, maxSharedClientsPerGpu: 2}",
                                   "gpuSharingConfig: {gpuSharingStrategy: MPS, maxSharedClientsPerGpu: 2}", ""])
@pytest.mark.parametrize("kind", ["Deployment", "Job"])
def test_validate_warns_of_two_shared_gpus_in_one_container(tmp_path: Path, share: str, kind: str) -> None:
    """GKE's device plugin gives a container at most one shared GPU: a container asking for two on a pool that
    shares its GPUs is failed by the kubelet (UnexpectedAdmissionError, the plugin's Allocate words); validate
    warns, naming the strategy. Whole GPUs: no warning. (Before: nothing, and a Deployment's run hot-looped.)"""
    docs = list(yaml.safe_load_all(string.Template((DATA / "shared-gpu-vllm.yaml").read_text()).substitute(
        MACHINE="g2-standard-24", ACCEL="nvidia-l4", SHARE=share or "count: 2", REPLICAS="1", SHARING="it",
        UTIL="0.3")))
    pool = next(d for d in docs if d["kind"] == "NodePool")
    pool["spec"]["accelerators"][0]["count"] = 2
    dep = next(d for d in docs if d["kind"] == "Deployment")
    dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    if kind == "Job":
        dep.update({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": dep["spec"]["template"]}})
        dep["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    text = _cli("validate", str(path))
    if share:
        strategy = "time-sharing" if "TIME" in share else "mps"
        assert f"invalid request for sharing GPU ({strategy}), at most 1 nvidia.com/gpu" in text
        assert ("replaces it again and again" in text) == (kind == "Deployment")
    else:
        assert "sharing GPU" not in text


def test_validate_reads_every_pool_a_training_job_can_land_on(tmp_path: Path) -> None:
    """The Job selects only the GPU type; the scenario has a 1g.10gb MIG pool and a whole-GPU pool of it: the rank
    fails only on the MIG nodes, so validate says so ("pods that land there"), not that every pod fails."""
    path = _scenario(tmp_path, "mig-training", ACCEL="nvidia-a100-80gb", PROFILE="1g.10gb", MACHINE="a2-ultragpu-1g")
    docs = list(yaml.safe_load_all(path.read_text()))
    docs.append({"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "whole"},
                 "spec": {"machineType": "a2-ultragpu-1g", "nodeCount": 1, "zones": ["us-central1-a"],
                          "accelerators": [{"type": "nvidia-a100-80gb", "count": 1}]}})
    path.write_text(yaml.safe_dump_all(docs))
    text = _cli("validate", str(path))
    assert "will not fit a 1g.10gb MIG instance of nvidia-a100-80gb" in text
    assert "pods that land there fail at start with CUDA out of memory" in text


def test_headline_prints_no_best_change_that_rounds_to_nothing() -> None:
    """A what-if that saves 0.1 % of the job was printed as "-0% job time"; one that saves 42 % still is."""
    from kubetwin.report.headline import training_rows

    rec = {"breakdown": {"step_seconds": 1.0, "job_seconds": 3600.0}, "placement": {"mfu": 0.4}}
    for saving, shown in ((0.001, False), (0.42, True)):
        rows = dict(training_rows({"default/j": {**rec, "advice": [{"change": "faster network tier (2x bandwidth)",
                                                                     "saving": saving}]}}))
        assert ("training default/j best change" in rows) == shown
        assert "-0%" not in str(rows)


@pytest.mark.parametrize(("accel", "profile"), [("nvidia-tesla-a100", "1g.5gb"), ("nvidia-a100-80gb", "3g.40gb"),
                                                 ("nvidia-h100-80gb", "1g.10gb")])
def test_validate_warns_of_mixed_strategy_mig_resources_on_gke(tmp_path: Path, accel: str, profile: str) -> None:
    """NVIDIA's MIG guide writes `nvidia.com/mig-<profile>: 1` (mixed strategy); GKE exposes partitions as
    nvidia.com/gpu. Validate warns and says what to ask for; the run leaves the pod Pending, as GKE does."""
    _, machine = MIG_MACHINES[accel]
    path = _scenario(tmp_path, "mig-training", ACCEL=accel, PROFILE=profile, MACHINE=machine)
    mixed = f"{{limits: {{nvidia.com/mig-{profile}: 1}}}}"
    path.write_text(path.read_text().replace("{limits: {nvidia.com/gpu: 1}}", mixed)
                    .replace("duration: 2h", "duration: 20m"))
    text = _cli("validate", str(path))
    assert f"no node of the scenario advertises nvidia.com/mig-{profile}" in text
    assert f"cloud.google.com/gke-gpu-partition-size: {profile}" in text
    [pod] = _pods(_run(path, tmp_path))
    assert pod["status"]["phase"] == "Pending"

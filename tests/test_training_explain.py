"""DCGM gauges derived from the step breakdown (compute-bound vs data-starved vs network-bound), the run folder's
training.json / metrics.prom / DCGM series, and `kubetwin explain job` with its error cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpudirect_builders import cluster_objects, set_up
from k8s_builders import make_pool, make_scenario
from training_builders import FakeNet, spec
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.workloads import dcgm
from kubetwin.workloads.storage import ReadPath
from kubetwin.workloads.training import Placement, step_breakdown

P = "training.kubetwin.io/"


def h100(n: int = 1) -> Placement:
    nodes = [{"metadata": {"name": f"n{i}", "labels": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}}}
             for i in range(n)]
    return Placement(tuple((nd, 8) for nd in nodes), 1000.0, read=ReadPath("filestore", 100e6, "Filestore 100 MB/s"))


def test_data_starved_job_shows_low_gpu_util_and_sm_active() -> None:
    fed = spec()  # no data path: local data, no stall
    starved = spec(data_path="/data", dataset_bytes_per_sample="1M", data_loading="streaming")  # 80 ms reads
    a = dcgm.steady_state(fed, h100(), step_breakdown(fed, h100(), FakeNet()))
    b = dcgm.steady_state(starved, h100(), step_breakdown(starved, h100(), FakeNet()))
    st = step_breakdown(starved, h100(), FakeNet())
    assert a.gpu_util > 95 and a.sm_active > 0.85 and a.tensor_active == pytest.approx(0.5, rel=0.02)
    assert b.gpu_util == pytest.approx(100 * (st.compute + st.exposed_comm) / st.total, abs=0.01)
    assert b.gpu_util < 20 < a.gpu_util and b.sm_active < a.sm_active / 5 and b.tensor_active < a.tensor_active
    assert b.pcie_rx > a.pcie_rx  # the batch crosses PCIe: 8 MB a step over 8 ranks


def test_network_bound_job_keeps_gpu_util_but_not_sm_active() -> None:
    """NCCL kernels spin while they wait: GPU_UTIL stays high, SM_ACTIVE and tensor activity drop (the Grafana
    signature of a network-bound job)."""
    s = spec(params="70B", global_batch_size="256", sequence_length="4096", tensor_parallel="8", fsdp="true")
    fast, slow = (step_breakdown(s, h100(32), FakeNet(inter=bw)) for bw in (1e11, 1.25e9))
    f, w = dcgm.steady_state(s, h100(32), fast), dcgm.steady_state(s, h100(32), slow)
    assert w.gpu_util > 90 and f.gpu_util > 90
    assert w.sm_active < f.sm_active / 2 and w.tensor_active < f.tensor_active / 2


def test_fb_used_counts_model_states_and_caps_at_memory() -> None:
    small = spec()  # 1B params, DDP: 16 GB of states + activations + context, fits
    mib, fits = dcgm.fb_used(small, step_breakdown(small, h100(), FakeNet()), "nvidia-h100-80gb")
    assert fits and 16e9 / 2**20 < mib < 81559
    big = spec(params="70B")  # 1.1 TB of Adam states on one GPU: capped, does not fit
    assert dcgm.fb_used(big, step_breakdown(big, h100(), FakeNet()), "nvidia-h100-80gb") == (81559, False)


# -- end to end -------------------------------------------------------------------------------------------
def _job(name: str, ann: dict, parallelism: int = 2) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parallelism": parallelism, "completions": parallelism, "completionMode": "Indexed",
                     "template": {"metadata": {"annotations": ann}, "spec": {
                         "restartPolicy": "Never", "containers": [{"name": "trainer", "image": "x", "resources": {
                             "limits": {"nvidia.com/gpu": "8"}}, "volumeMounts": [
                             {"name": "data", "mountPath": "/data"}]}],
                         "volumes": [{"name": "data", "csi": {"driver": "gcsfuse.csi.storage.gke.io",
                                                               "volumeAttributes": {"bucketName": "b"}}}]}}}}


def _tcpx(job: dict) -> dict:
    """The job with GKE's GPUDirect-TCPX set-up (workloads/gpudirect.py): its two nodes talk over TCPX."""
    job["spec"]["template"] = set_up(job["spec"]["template"], "tcpx")
    return job


TRAIN = {P + "params": "8B", P + "steps": "300", P + "global-batch-size": "64", P + "sequence-length": "4096",
         P + "fsdp": "true", P + "data-path": "/data", P + "dataset-bytes-per-token": "16Ki",
         P + "data-loading": "streaming", P + "checkpoint-every": "100"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    plain = _job("plain", {"kubetwin.io/duration": "10m"}, parallelism=1)
    run(objects=[make_scenario("3h").spec(sampleInterval="1m").obj(),
                 make_pool("a3", "a3-highgpu-8g", 3).gpus("nvidia-h100-80gb", 8).obj(),
                 *cluster_objects("tcpx"), _tcpx(_job("train", TRAIN)), plain], out=out)
    return out


def test_run_folder_carries_training_json_and_dcgm_series(run_dir: Path) -> None:
    jobs = json.loads((run_dir / "training.json").read_text())
    assert list(jobs) == ["default/train"]
    rec = jobs["default/train"]
    assert rec["kind"] == "Job" and rec["placement"]["world"] == 16 and rec["placement"]["tier"] == "tcpx"
    assert rec["storage"]["data"]["kind"] == "gcsfuse" and rec["breakdown"]["parts"]["data"] > 0
    prom = (run_dir / "metrics.prom").read_text()
    lines = [ln for ln in prom.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(lines) == 16  # 2 pods x 8 GPUs
    assert all('modelName="NVIDIA H100 80GB HBM3"' in ln and 'namespace="default"' in ln and 'pod="train-' in ln
               and 'container="trainer"' in ln for ln in lines)
    assert float(lines[0].rsplit(" ", 2)[1]) == pytest.approx(rec["dcgm"]["gpu_util"])
    series = json.loads((run_dir / "timeseries.json").read_text())["dcgm"]["pods"]
    assert len(series) == 2 and all(s["job"] == "default/train" for s in series.values())
    util = next(iter(series.values()))["DCGM_FI_DEV_GPU_UTIL"]
    assert max(util) == pytest.approx(rec["dcgm"]["gpu_util"]) and len(util) > 10


def test_explain_prints_sections_and_top_advice(run_dir: Path) -> None:
    res = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(run_dir)])
    assert res.exit_code == 0, res.output
    for section in ("Placement:", "network tier: tcpx", "Storage:", "Step time", "data stall", "comm fsdp (exposed)",
                    "checkpoint (amortized)", "DCGM_FI_DEV_GPU_UTIL", "Which change would help most:"):
        assert section in res.output
    top = json.loads((run_dir / "training.json").read_text())["default/train"]["advice"][0]["change"]
    assert f"  1. {top}:" in res.output
    assert top in ("pipelined loading", "prestaged data")  # 4 GB a step streamed from Cloud Storage FUSE


@pytest.mark.parametrize(("args", "text"), [
    (["explain", "job", "nope"], 'Job "nope" not found in namespace "default"'),
    (["explain", "job", "train", "-n", "other"], 'not found in namespace "other"'),
    (["explain", "job", "plain"], "not a training job"),
    (["explain", "node", "train"], 'cannot explain "node"'),
    (["explain", "pod", "train"], "re-run with `kubetwin run --trace-scheduling`"),
])
def test_explain_errors(run_dir: Path, args: list[str], text: str) -> None:
    res = CliRunner().invoke(app, [*args, "--run", str(run_dir)])
    assert res.exit_code == 1 and text in res.output and "Traceback" not in res.output


def test_explain_not_a_run_folder(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(tmp_path)])
    assert res.exit_code == 1 and "not a kubetwin run folder" in res.output and "Traceback" not in res.output


def test_explain_separates_the_prestage_from_the_work() -> None:
    from kubetwin.workloads.training_explain import _dur, job_record, render

    s = spec(data_path="/data", data_loading="prestaged", dataset_size="100G")  # 1000 s copy at 100 MB/s
    st = step_breakdown(s, h100(), FakeNet())
    assert st.prestage == pytest.approx(1000) and st.work == pytest.approx(1000 * st.total)
    text = render(job_record("default", "t", "Job", s, h100(), st))
    assert f"job {_dur(st.work)} of work after a {_dur(st.prestage)} prestage" in text

"""Gangs wait for their last rank, and training that cannot fit GPU memory fails (issue 16, items 1 and 4).

A multi-pod training job makes no progress until every rank runs: its ranks block in the launcher's rendezvous
(torchrun's c10d join timeout, 600 s by default), a rendezvous that does not complete fails the pods with the
launcher's error, and a rank lost mid-run stalls the survivors until NCCL's watchdog (600 s) takes them down. A spec
whose per-rank model states do not fit the GPU fails at start with PyTorch's CUDA out-of-memory message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import first_phase as _first
from conftest import pod_versions as _pods
from gpudirect_builders import cluster_objects, set_up
from k8s_builders import make_pool, make_scenario
from typer.testing import CliRunner

from kubetwin.api.loader import Manifest
from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.validation.validate import validate

P = "training.kubetwin.io/"
TRAIN = {P + "params": "8B", P + "steps": "2000", P + "global-batch-size": "64", P + "sequence-length": "4096",
         P + "fsdp": "true", P + "checkpoint-every": "100"}


def _job(name: str = "train", ranks: int = 4, ann: dict | None = None, backoff: int = 0, gpus: int = 8) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parallelism": ranks, "completions": ranks, "completionMode": "Indexed", "backoffLimit": backoff,
                     "template": {"metadata": {"annotations": dict(TRAIN if ann is None else ann)}, "spec": {
                         "restartPolicy": "Never", "containers": [{"name": "trainer", "image": "x", "resources": {
                             "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


def _gpudirect(job: dict) -> list[dict]:
    """The job with GKE's GPUDirect-TCPX set-up, and the cluster objects it needs: multi-node ranks on A3 High
    then talk over TCPX as these tests assume, not over the TCP fallback (workloads/gpudirect.py)."""
    job["spec"]["template"] = set_up(job["spec"]["template"], "tcpx")
    return [*cluster_objects("tcpx"), job]


def _terminated(pod: dict) -> dict:
    return ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated") or {}


def _final_job(res, name: str) -> dict:
    return [o for _, _, _, o in res.history if o["kind"] == "Job" and o["metadata"]["name"] == name][-1]


# -- rendezvous ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def waiting(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """4 ranks of 8 H100 on 3 nodes: one rank never schedules."""
    out = tmp_path_factory.mktemp("gang") / "out"
    res = run(objects=[make_scenario("3h").spec(sampleInterval="1m").obj(),
                       make_pool("a3", "a3-highgpu-8g", 3).gpus("nvidia-h100-80gb", 8).obj(), _job()], out=out)
    return res, out


def test_no_rank_trains_while_one_is_pending(waiting: tuple) -> None:
    res, _ = waiting
    pods = _pods(res)
    assert len(pods) == 4
    assert not any(_first(v, "Succeeded") for v in pods.values())
    pending = [n for n, v in pods.items() if _first(v, "Running") is None]
    assert len(pending) == 1


def test_rendezvous_timeout_fails_the_ranks_with_torchruns_error(waiting: tuple) -> None:
    res, _ = waiting
    for versions in _pods(res).values():
        started = _first(versions, "Running")
        if started is None:
            continue
        failed = _first(versions, "Failed")
        assert failed == pytest.approx(started + 600)  # c10d join_timeout default 600 s
        term = _terminated(versions[-1])
        assert term["exitCode"] == 1 and term["reason"] == "Error"
        assert "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError" in term["message"]
    job = _final_job(res, "train")
    assert any(c["type"] == "Failed" and c["reason"] == "BackoffLimitExceeded" for c in job["status"]["conditions"])


def test_waiting_ranks_hold_their_gpus_at_zero_util(waiting: tuple) -> None:
    res, out = waiting
    series = json.loads((out / "timeseries.json").read_text())["dcgm"]["pods"]
    assert len(series) == 3
    for s in series.values():
        assert s["DCGM_FI_DEV_GPU_UTIL"] and set(s["DCGM_FI_DEV_GPU_UTIL"]) == {0}
    gpu = res.summary["gpu_allocation"]["a3"]
    assert gpu["gpu_hours_requested"] == pytest.approx(3 * 8 * 600 / 3600, rel=0.02)  # billed while waiting


def test_explain_says_the_job_waited_for_which_rank_and_why(waiting: tuple) -> None:
    res, out = waiting
    pending = next(n for n, v in _pods(res).items() if _first(v, "Running") is None)
    rank = pending.split("-")[1]
    text = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(out)])
    assert text.exit_code == 0, text.output
    assert f"ranks 0, 1, 2 waited 10.0 min for rank {rank} ({pending}): Pending (Unschedulable: " in text.output
    assert "Insufficient nvidia.com/gpu" in text.output
    assert "RendezvousTimeoutError" in text.output


def test_rendezvous_timeout_annotation_and_jax_launcher() -> None:
    ann = {**TRAIN, P + "launcher": "jax", P + "rendezvous-timeout": "2m"}
    res = run(objects=[make_scenario("1h").obj(), make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj(),
                       _job(ranks=2, ann=ann)])
    [running] = [v for v in _pods(res).values() if _first(v, "Running") is not None]
    assert _first(running, "Failed") == pytest.approx(_first(running, "Running") + 120)
    assert "DEADLINE_EXCEEDED: Barrier timed out" in _terminated(running[-1])["message"]


def test_gang_annotations_are_validated() -> None:
    for key, value in ((P + "launcher", "mpi"), (P + "rendezvous-timeout", "soon"), (P + "gang", "maybe"),
                       (P + "collective-timeout", "-1s")):
        [err] = [d for d in validate([Manifest(_job(ann={**TRAIN, key: value}), "t.yaml", 1)])
                 if d.severity == "error"]
        assert err.field == f'spec.template.metadata.annotations["{key}"]' and err.hint
        assert "unknown training annotation" not in err.message and f'"{value}"' in err.message


def test_all_ranks_running_train_together() -> None:
    """With room for every rank the job trains as before: all ranks start, finish together, succeed."""
    res = run(objects=[make_scenario("1d").obj(), make_pool("a3", "a3-highgpu-8g", 4).gpus("nvidia-h100-80gb", 8).obj(),
                       *_gpudirect(_job())])
    pods = _pods(res)
    ends = {_first(v, "Succeeded") for v in pods.values()}
    assert len(pods) == 4 and None not in ends and len(ends) == 1


# -- a rank lost mid-run ---------------------------------------------------------------------------------
def _spot(backoff: int, pfp: dict | None = None) -> tuple:
    pool = (make_pool("spot", "a3-highgpu-8g", 4)
            .spec(spot=True, spotPreemption={"schedule": [{"at": "1500", "nodes": 1}]})
            .gpus("nvidia-h100-80gb", 8).obj())
    job = _job(backoff=backoff)
    if pfp is not None:
        job["spec"]["podFailurePolicy"] = pfp
    res = run(objects=[make_scenario("1d").obj(), pool, *_gpudirect(job)])
    return res, _pods(res)


def test_lost_rank_stalls_the_survivors_until_the_nccl_watchdog_fails_them() -> None:
    """backoffLimit 3: the lost rank is the first failure, the three survivors' watchdog failures exceed it."""
    res, pods = _spot(backoff=3)
    assert not any(_first(v, "Succeeded") for v in pods.values())
    lost = min((_first(v, "Failed") for v in pods.values()), key=lambda t: t or 1e18)
    assert 1500 <= lost < 1600
    survivors = [v for v in pods.values() if (_first(v, "Running") or 1e18) < lost < (_first(v, "Failed") or 0)]
    assert len(survivors) == 3
    for v in survivors:
        assert _first(v, "Failed") == pytest.approx(lost + 600)  # init_process_group's NCCL timeout
        msg = _terminated(v[-1])["message"]
        assert "Watchdog caught collective operation timeout: WorkNCCL(" in msg
        assert "ran for 600000 milliseconds before timing out." in msg
    job = _final_job(res, "train")
    assert any(c["type"] == "Failed" and c["reason"] == "BackoffLimitExceeded" for c in job["status"]["conditions"])
    lost_work = res.summary["lost_work"]["default/train"]
    assert lost_work["interruptions"] == 4


def test_lost_rank_restarts_per_backoff_limit_and_resumes_from_the_checkpoint() -> None:
    res, pods = _spot(backoff=8)
    job = _final_job(res, "train")
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
    assert sum(1 for v in pods.values() if _first(v, "Succeeded")) == 4
    assert sum(1 for v in pods.values() if _first(v, "Failed")) >= 4  # the lost rank and the 3 stalled ones


def test_a_spot_reclaim_ignored_by_the_pod_failure_policy_does_not_count_against_backoff_limit() -> None:
    """GKE's recommendation for Spot training: Ignore on DisruptionTarget. The reclaimed rank (DisruptionTarget,
    TerminationByKubelet) does not count; the 3 survivors' watchdog failures are 3, not above backoffLimit 3, so
    the Job retries and completes where without the rule (the test above) it fails BackoffLimitExceeded."""
    ignore = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    res, pods = _spot(backoff=3, pfp=ignore)
    job = _final_job(res, "train")
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
    reclaimed = [v for v in pods.values() if any(c["type"] == "DisruptionTarget" for c in
                                                 v[-1]["status"].get("conditions") or [])]
    assert len(reclaimed) == 1
    assert job["status"]["failed"] == sum(1 for v in pods.values() if _first(v, "Failed")) - 1 == 3


# -- out of GPU memory -----------------------------------------------------------------------------------
BIG = {P + "params": "70B", P + "steps": "100", P + "global-batch-size": "64", P + "sequence-length": "4096"}


def test_70b_data_parallel_on_8_h100_runs_out_of_memory(tmp_path: Path) -> None:
    out = tmp_path / "oom"
    res = run(objects=[make_scenario("2h").obj(), make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj(),
                       _job(ranks=1, ann=BIG)], out=out)
    [versions] = _pods(res).values()
    assert _first(versions, "Succeeded") is None
    assert _first(versions, "Failed") == pytest.approx(_first(versions, "Running"))
    term = _terminated(versions[-1])
    assert term["exitCode"] == 1
    assert term["message"].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ")
    assert "GPU 0 has a total capacity of 79.65 GiB of which " in term["message"]
    name = versions[-1]["metadata"]["name"]
    got = CliRunner().invoke(app, ["get", "pods", "--run", str(out)])
    assert got.exit_code == 0 and name in got.output and "Error" in got.output
    desc = CliRunner().invoke(app, ["describe", "pod", name, "--run", str(out)])
    assert desc.exit_code == 0 and "torch.OutOfMemoryError: CUDA out of memory." in desc.output


def test_validate_warns_a_spec_that_cannot_fit() -> None:
    job = _job(ranks=1, ann=BIG)
    job["spec"]["template"]["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    [warn] = [d for d in validate([Manifest(job, "t.yaml", 1)]) if "out of memory" in d.message]
    assert warn.severity == "warning" and "fsdp" in warn.hint.lower()
    fits = _job(ranks=4, ann={**BIG, P + "fsdp": "true", P + "tensor-parallel": "8"})
    fits["spec"]["template"]["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert not [d for d in validate([Manifest(fits, "t.yaml", 1)]) if "out of memory" in d.message]


# -- JobSets and declared gangs --------------------------------------------------------------------------
def test_jobset_ranks_wait_for_the_last_child_job_and_fail_the_set() -> None:
    """A JobSet of 4 one-pod Jobs (job-global-index = node rank) on 3 nodes: the failure policy sees the launcher's
    failures (maxRestarts 0: the JobSet fails)."""
    pod = _job(ranks=1)["spec"]
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "js", "namespace": "default"},
          "spec": {"failurePolicy": {"maxRestarts": 0},
                   "replicatedJobs": [{"name": "w", "replicas": 4, "template": {"spec": pod}}]}}
    res = run(objects=[make_scenario("3h").obj(), make_pool("a3", "a3-highgpu-8g", 3).gpus("nvidia-h100-80gb", 8).obj(),
                       js])
    pods = _pods(res)
    assert len(pods) == 4 and not any(_first(v, "Succeeded") for v in pods.values())
    ran = [v for v in pods.values() if _first(v, "Failed") is not None]
    assert len(ran) == 3  # the fourth binds as the others fail, and goes with the failed set
    for v in ran:
        assert _first(v, "Failed") == pytest.approx(_first(v, "Running") + 600)
        assert "RendezvousTimeoutError" in _terminated(v[-1])["message"]
    final = [o for _, _, _, o in res.history if o["kind"] == "JobSet"][-1]
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in final["status"]["conditions"])


def test_declared_gang_of_duration_pods_waits_too() -> None:
    """training.kubetwin.io/gang: "true" on pods that run for kubetwin.io/duration (no training spec): one node for
    two ranks, the running rank waits and fails instead of finishing its 30 minutes."""
    ann = {"kubetwin.io/duration": "30m", P + "gang": "true"}
    res = run(objects=[make_scenario("2h").obj(), make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj(),
                       _job(ranks=2, ann=ann)])
    [running] = [v for v in _pods(res).values() if _first(v, "Running") is not None]
    assert _first(running, "Succeeded") is None
    assert _first(running, "Failed") == pytest.approx(_first(running, "Running") + 600)
    plain = run(objects=[make_scenario("2h").obj(),
                         make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj(),
                         _job(ranks=2, ann={"kubetwin.io/duration": "30m"})])
    assert sum(1 for v in _pods(plain).values() if _first(v, "Succeeded")) == 2  # not a gang: one after the other


def test_gang_false_opts_a_multi_pod_training_job_out() -> None:
    res = run(objects=[make_scenario("1d").obj(), make_pool("a3", "a3-highgpu-8g", 3).gpus("nvidia-h100-80gb", 8).obj(),
                       *_gpudirect(_job(ann={**TRAIN, P + "gang": "false"}))])
    assert sum(1 for v in _pods(res).values() if _first(v, "Succeeded")) == 4


def test_kueue_pod_group_is_a_gang_of_its_total_count() -> None:
    """Plain pods of one Kueue pod group (kueue.x-k8s.io/pod-group-name, pod-group-total-count 2) on one node."""
    def pod(i: int) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"rank-{i}", "namespace": "default", "labels": {"kueue.x-k8s.io/pod-group-name": "g"},
            "annotations": {**TRAIN, "kueue.x-k8s.io/pod-group-total-count": "2"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "trainer", "image": "x", "resources": {
                "limits": {"nvidia.com/gpu": "8"}}}]}}
    res = run(objects=[make_scenario("3h").obj(), make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj(),
                       pod(0), pod(1)])
    pods = _pods(res)
    assert not any(_first(v, "Succeeded") for v in pods.values())
    [running] = [v for v in pods.values() if _first(v, "Running") is not None and _first(v, "Failed") is not None][:1]
    assert _first(running, "Failed") == pytest.approx(_first(running, "Running") + 600)


def test_validate_notices_a_gang_restarting_in_place() -> None:
    job = _job()
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    [note] = [d for d in validate([Manifest(job, "t.yaml", 1)]) if d.field == "spec.template.spec.restartPolicy"]
    assert note.severity == "notice" and "restart its container in place" in note.message


def test_explain_says_a_rank_does_not_fit(tmp_path: Path) -> None:
    out = tmp_path / "oom"
    run(objects=[make_scenario("1h").obj(), make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj(),
                 _job(ranks=1, ann=BIG)],
        out=out)
    text = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(out)]).output
    # no step ran: the reason instead of a step time (the old text printed one, with a footnote on the DCGM line)
    assert "Never trained: every rank failed at start with torch.OutOfMemoryError: CUDA out of memory" in text
    assert "Step time" not in text


def test_validate_gives_no_gang_notice_for_a_one_pod_training_job() -> None:
    """One pod is no gang: restartPolicy OnFailure on a parallelism-1 training Job restarts in place as usual."""
    job = _job(ranks=1)
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    assert not [d for d in validate([Manifest(job, "t.yaml", 1)]) if d.field == "spec.template.spec.restartPolicy"]

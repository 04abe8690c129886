"""Every multi-host workload is a gang (issue 31 item 2), with or without training.kubetwin.io/* annotations.

A JobSet or Indexed Job on a multi-host TPU slice needs every host: GKE gives each pod TPU_WORKER_ID (its completion
index) and TPU_WORKER_HOSTNAMES (every worker), and jax.distributed.initialize blocks until all processes register,
failing after its initialization_timeout (300 s). A GPU Job whose pods start torchrun over several nodes blocks in
the c10d rendezvous (join timeout 600 s). Meanwhile the waiting ranks hold, and the pool bills, their chips; then
the Job's backoffLimit or the JobSet's failurePolicy decides what follows. A pod of a worker whose peer host is
taken must not run its whole duration alone and then hand over to the next worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import first_phase as _first
from conftest import pod_versions as _pods
from k8s_builders import make_pool, make_scenario
from typer.testing import CliRunner

from kubetwin.api.loader import Manifest
from kubetwin.catalog import hourly_price, machine_type
from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.validation.validate import validate

P = "training.kubetwin.io/"
TRAIN = {P + "params": "1B", P + "steps": "200", P + "global-batch-size": "16", P + "sequence-length": "2048"}
ZONE = {"ct5lp-hightpu-4t": "us-central1-a", "ct5p-hightpu-4t": "us-east5-a", "ct4p-hightpu-4t": "us-central2-b",
        "ct6e-standard-4t": "us-east5-b"}
ACCEL = {"ct5lp-hightpu-4t": "tpu-v5-lite-podslice", "ct5p-hightpu-4t": "tpu-v5p-slice",
         "ct4p-hightpu-4t": "tpu-v4-podslice", "ct6e-standard-4t": "tpu-v6e-slice"}
JAX_BARRIER = "DEADLINE_EXCEEDED: Barrier timed out"
TORCH_RDZV = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"


def _tpu_pool(machine: str, topology: str, hosts: int, name: str = "tpu") -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"machineType": machine, "zones": [ZONE[machine]], "nodeCount": hosts,
                     "placementPolicy": {"tpuTopology": topology}}}


def _tpu_pod_spec(machine: str, topology: str, command: list[str] | None = None) -> dict:
    c: dict = {"name": "worker", "image": "us-docker.pkg.dev/cloud-tpu-images/jax:latest",
               "resources": {"limits": {"google.com/tpu": "4"}}}
    if command:
        c["command"] = command
    return {"restartPolicy": "Never", "containers": [c],
            "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": ACCEL[machine],
                             "cloud.google.com/gke-tpu-topology": topology}}


def _indexed_job(name: str, pods: int, pod_spec: dict, ann: dict | None = None, backoff: int = 0) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "annotations": {"kubetwin.io/create-at": "1m"}},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": backoff,
                     "template": {"metadata": {"annotations": dict(ann or {"kubetwin.io/duration": "40m"})},
                                  "spec": pod_spec}}}


def _jobset(name: str, pods: int, pod_spec: dict, ann: dict | None = None, restarts: int = 0) -> dict:
    job = _indexed_job(name, pods, pod_spec, ann)["spec"]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "default", "annotations": {"kubetwin.io/create-at": "1m"}},
            "spec": {"failurePolicy": {"maxRestarts": restarts},
                     "replicatedJobs": [{"name": "slice", "replicas": 1, "template": {"spec": job}}]}}


def _blocker(machine: str, topology: str, hold: str = "3h") -> dict:
    """A pod that takes one host of the slice first (another team's job)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "other-team", "namespace": "default", "annotations": {"kubetwin.io/duration": hold}},
        "spec": _tpu_pod_spec(machine, topology)}


def _message(pod: dict) -> str:
    return (((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated")
            or {}).get("message", "")


def _workers(res) -> dict[str, list[dict]]:
    return {n: v for n, v in _pods(res).items() if n != "other-team"}


def _final(res, kind: str, name: str) -> dict:
    return [o for _, _, _, o in res.history if o["kind"] == kind and o["metadata"]["name"] == name][-1]


def _cond(obj: dict, type_: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_
                 and c["status"] == "True"), None)


# -- a multi-host TPU slice whose other host is taken ----------------------------------------------------------
SHAPES = [("ct5lp-hightpu-4t", "2x4", 2), ("ct5lp-hightpu-4t", "4x4", 4), ("ct5p-hightpu-4t", "2x2x2", 2),
          ("ct4p-hightpu-4t", "2x2x2", 2), ("ct6e-standard-4t", "4x4", 4)]


@pytest.mark.parametrize("kind", ["Job", "JobSet"])
@pytest.mark.parametrize(("machine", "topology", "hosts"), SHAPES)
def test_a_worker_whose_peer_host_is_taken_waits_and_fails_as_jax_does(kind: str, machine: str, topology: str,
                                                                       hosts: int) -> None:
    """No annotations but kubetwin.io/duration: the running workers wait in jax.distributed.initialize for
    300 s and fail with its barrier error; none runs its 40 minutes; the Job (backoffLimit 0) or JobSet
    (maxRestarts 0) fails."""
    spec = _tpu_pod_spec(machine, topology)
    obj = _indexed_job("train", hosts, spec) if kind == "Job" else _jobset("train", hosts, spec)
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, hosts), _blocker(machine, topology),
                       obj])
    workers = _workers(res)
    assert not any(_first(v, "Succeeded") for v in workers.values())
    ran = [v for v in workers.values() if _first(v, "Running") is not None]
    assert len(ran) == hosts - 1
    for v in ran:
        assert _first(v, "Failed") == pytest.approx(_first(v, "Running") + 300)  # initialization_timeout
        assert JAX_BARRIER in _message(v[-1]) and "Wait_for_all_tasks_to_register" in _message(v[-1])
    assert _cond(_final(res, kind, "train"), "Failed") is not None


def test_a_multislice_jobset_waits_for_every_slice() -> None:
    """Two 2-host v5e slices, a JobSet of 2 replicated Jobs (one per slice, JAX multislice): one host taken, the
    three running workers of both slices wait for the fourth and fail; the set fails (maxRestarts 0)."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    js = _jobset("train", 2, _tpu_pod_spec(machine, topology))
    js["spec"]["replicatedJobs"][0]["replicas"] = 2
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2, "slice-a"),
                       _tpu_pool(machine, topology, 2, "slice-b"), _blocker(machine, topology), js])
    workers = _workers(res)
    ran = [v for v in workers.values() if _first(v, "Running") is not None]
    assert len(workers) == 4 and len(ran) == 3 and not any(_first(v, "Succeeded") for v in workers.values())
    for v in ran:
        assert _first(v, "Failed") == pytest.approx(_first(v, "Running") + 300)
    assert _cond(_final(res, "JobSet", "train"), "Failed") is not None


def test_training_annotations_do_not_change_the_rule_on_tpu() -> None:
    """The same slice with a training spec: the launcher defaults to jax on TPU (300 s, not torchrun's 600 s)."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       _jobset("train", 2, _tpu_pod_spec(machine, topology), ann=TRAIN)])
    [ran] = [v for v in _workers(res).values() if _first(v, "Running") is not None]
    assert _first(ran, "Failed") == pytest.approx(_first(ran, "Running") + 300)
    assert JAX_BARRIER in _message(ran[-1])


def test_the_slice_freed_before_the_timeout_lets_the_gang_start_together() -> None:
    """The other team's pod ends 2 minutes after the workers start: the last worker binds, every worker leaves the
    rendezvous at once and all finish their 40 minutes together."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2),
                       _blocker(machine, topology, hold="4m"),
                       _indexed_job("train", 2, _tpu_pod_spec(machine, topology))])
    workers = _workers(res)
    ends = {_first(v, "Succeeded") for v in workers.values()}
    assert len(workers) == 2 and None not in ends and len(ends) == 1
    last = max(_first(v, "Running") for v in workers.values())
    assert ends.pop() == pytest.approx(last + 40 * 60)


def test_backoff_limit_retries_the_rendezvous() -> None:
    """backoffLimit 2: the replacement worker waits another 300 s each time; the Job fails after 3 timeouts."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       _indexed_job("train", 2, _tpu_pod_spec(machine, topology), backoff=2)])
    failed = [v for v in _workers(res).values() if _first(v, "Failed") is not None]
    assert len(failed) == 3
    assert all(JAX_BARRIER in _message(v[-1]) for v in failed)
    assert _cond(_final(res, "Job", "train"), "Failed")["reason"] == "BackoffLimitExceeded"


def test_jobset_failure_policy_restarts_the_whole_gang() -> None:
    """maxRestarts 1: the JobSet restarts once after the first rendezvous timeout, then fails."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       _jobset("train", 2, _tpu_pod_spec(machine, topology), restarts=1)])
    final = _final(res, "JobSet", "train")
    assert final["status"].get("restarts") == 1 and _cond(final, "Failed") is not None
    failed = [v for v in _workers(res).values() if _first(v, "Failed") is not None and JAX_BARRIER in _message(v[-1])]
    assert len(failed) == 2


def test_waiting_workers_hold_their_chips_and_the_slice_bills_meanwhile() -> None:
    """The waiting worker is Running with its 4 chips for the whole 300 s (its host is not free for anyone else),
    and the pool bills both hosts all along: node-hours x the machine's hourly price."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    res = run(objects=[make_scenario("2h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       _indexed_job("train", 2, _tpu_pod_spec(machine, topology))])
    [ran] = [v for v in _workers(res).values() if _first(v, "Running") is not None]
    assert _first(ran, "Failed") - _first(ran, "Running") == pytest.approx(300)
    held = [v for v in ran if (v.get("status") or {}).get("phase") == "Running"]
    assert held and all(v["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4" for v in held)
    cost = res.summary["cost"]
    hours = cost["node_hours_by_pool"]["tpu"]
    assert hours == pytest.approx(2 * 2, abs=0.1)  # both hosts, the whole run (less their boot)
    assert cost["by_pool"]["tpu"] == pytest.approx(hours * hourly_price(machine_type(machine), False), rel=0.01)


def test_a_single_host_tpu_job_of_several_pods_is_no_gang() -> None:
    """Independent single-host slices (v5e 2x2 = one VM each): a two-pod Job on one such VM runs its pods one
    after the other, as before."""
    machine, topology = "ct5lp-hightpu-4t", "2x2"
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 1),
                       _indexed_job("train", 2, _tpu_pod_spec(machine, topology))])
    assert sum(1 for v in _workers(res).values() if _first(v, "Succeeded")) == 2


def test_gang_false_opts_a_multi_host_job_out() -> None:
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    ann = {"kubetwin.io/duration": "40m", P + "gang": "false"}
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       _indexed_job("train", 2, _tpu_pod_spec(machine, topology), ann=ann)])
    assert sum(1 for v in _workers(res).values() if _first(v, "Succeeded")) == 2


def test_a_worker_without_a_duration_still_times_out() -> None:
    """A worker that would run until stopped (no kubetwin.io/duration) still fails its rendezvous."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    res = run(objects=[make_scenario("2h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       _indexed_job("train", 2, _tpu_pod_spec(machine, topology), ann={"x": "y"})])
    [ran] = [v for v in _workers(res).values() if _first(v, "Running") is not None]
    assert _first(ran, "Failed") == pytest.approx(_first(ran, "Running") + 300)


def test_torchrun_on_tpu_uses_torchruns_rendezvous() -> None:
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    cmd = ["torchrun", "--nnodes=2", "--nproc-per-node=1", "train.py"]
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       _indexed_job("train", 2, _tpu_pod_spec(machine, topology, cmd))])
    [ran] = [v for v in _workers(res).values() if _first(v, "Running") is not None]
    assert _first(ran, "Failed") == pytest.approx(_first(ran, "Running") + 600)
    assert TORCH_RDZV in _message(ran[-1])


# -- GPU multi-node launchers -------------------------------------------------------------------------------
def _gpu_job(command: list[str], env: list[dict] | None = None, pods: int = 2) -> dict:
    c: dict = {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.07-py3", "command": command,
               "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    if env:
        c["env"] = env
    return _indexed_job("train", pods, {"restartPolicy": "Never", "containers": [c]})


def _gpu_run(job: dict) -> dict[str, list[dict]]:
    res = run(objects=[make_scenario("3h").obj(),
                       make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj(), job])
    return _workers(res)


@pytest.mark.parametrize("command", [
    ["torchrun", "--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d", "--rdzv-endpoint=train-0:29400",
     "train.py"],
    ["python", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "8", "train.py"],
    ["bash", "-c", "pip install -r req.txt && torchrun --nnodes=$NNODES --nproc-per-node=8 train.py"],
])
def test_gpu_torchrun_job_over_two_nodes_with_one_node_waits_in_the_rendezvous(command: list[str]) -> None:
    pods = _gpu_run(_gpu_job(command))
    assert not any(_first(v, "Succeeded") for v in pods.values())
    [ran] = [v for v in pods.values() if _first(v, "Running") is not None]
    assert _first(ran, "Failed") == pytest.approx(_first(ran, "Running") + 600)  # join_timeout default 600 s
    assert TORCH_RDZV in _message(ran[-1])


def test_torchrun_join_timeout_from_rdzv_conf() -> None:
    cmd = ["torchrun", "--nnodes=2", "--nproc-per-node=8", "--rdzv-conf=join_timeout=900", "train.py"]
    [ran] = [v for v in _gpu_run(_gpu_job(cmd)).values() if _first(v, "Running") is not None]
    assert _first(ran, "Failed") == pytest.approx(_first(ran, "Running") + 900)


def test_jax_on_gpu_by_its_coordinator_env() -> None:
    env = [{"name": "JAX_COORDINATOR_ADDRESS", "value": "train-0.train:1234"}]
    [ran] = [v for v in _gpu_run(_gpu_job(["python", "train.py"], env)).values()
             if _first(v, "Running") is not None]
    assert _first(ran, "Failed") == pytest.approx(_first(ran, "Running") + 300)
    assert JAX_BARRIER in _message(ran[-1])


@pytest.mark.parametrize("command", [["python", "train.py"], ["torchrun", "--nnodes=1", "--nproc-per-node=8", "x.py"],
                                     ["torchrun", "--nnodes=1:4", "--nproc-per-node=8", "x.py"],
                                     ["torchrun", "--standalone", "--nproc-per-node=8", "x.py"]])
def test_gpu_jobs_without_a_multi_node_launcher_are_no_gang(command: list[str]) -> None:
    """Plain pods, single-node torchrun, and elastic torchrun whose minimum is one node run one after the other."""
    assert sum(1 for v in _gpu_run(_gpu_job(command)).values() if _first(v, "Succeeded")) == 2


def test_a_lost_node_stalls_the_other_torchrun_rank_until_the_nccl_watchdog(tmp_path: Path) -> None:
    """Two Spot A3 nodes, a torchrun Job over both without annotations (2 h of kubetwin.io/duration): one VM is
    preempted at 25 min, the other rank hangs in its collectives and fails 600 s later with the watchdog's error."""
    pool = (make_pool("spot", "a3-highgpu-8g", 2).spec(spot=True, spotPreemption={"schedule": [{"at": "1500",
                                                                                              "nodes": 1}]})
            .gpus("nvidia-h100-80gb", 8).obj())
    job = _gpu_job(["torchrun", "--nnodes=2", "--nproc-per-node=8", "train.py"])
    job["spec"]["template"]["metadata"]["annotations"]["kubetwin.io/duration"] = "2h"
    job["spec"]["backoffLimit"] = 3  # 0 would delete the survivor with the Job at the first failure
    res = run(objects=[make_scenario("4h").obj(), pool, job], out=tmp_path / "out")
    text = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(tmp_path / "out")]).output
    assert "2 ranks (no training spec)" in text and "lost (Terminated" in text and "Never trained" not in text
    pods = _workers(res)
    lost = min(_first(v, "Failed") or 1e18 for v in pods.values())
    assert 1500 <= lost < 1600
    [survivor] = [v for v in pods.values() if (_first(v, "Running") or 1e18) < lost < (_first(v, "Failed") or 0)]
    assert _first(survivor, "Failed") == pytest.approx(lost + 600)
    assert "Watchdog caught collective operation timeout" in _message(survivor[-1])


def test_kueue_pod_group_on_a_tpu_slice_is_a_gang() -> None:
    """Plain pods of one Kueue pod group (total count 2) on a 2-host slice whose other host is taken."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"

    def pod(i: int) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"rank-{i}", "namespace": "default", "labels": {"kueue.x-k8s.io/pod-group-name": "g"},
            "annotations": {"kubetwin.io/duration": "40m", "kubetwin.io/create-at": "1m",
                            "kueue.x-k8s.io/pod-group-total-count": "2"}},
            "spec": _tpu_pod_spec(machine, topology)}
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                       pod(0), pod(1)])
    pods = _workers(res)  # one waits and fails, then the other takes its host, waits and fails: none runs 40 min
    assert len(pods) == 2 and not any(_first(v, "Succeeded") for v in pods.values())
    for v in pods.values():
        assert _first(v, "Failed") == pytest.approx(_first(v, "Running") + 300)


@pytest.mark.parametrize("pods", [1, 2])
def test_torchrun_waiting_for_more_nodes_than_the_job_runs_never_trains(pods: int) -> None:
    """--nnodes=4 with fewer pods: room for all of them, but the rendezvous waits for nodes that never come; validate
    warns first."""
    job = _gpu_job(["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py"], pods=pods)
    res = run(objects=[make_scenario("3h").obj(),
                       make_pool("a3", "a3-highgpu-8g", 4).gpus("nvidia-h100-80gb", 8).obj(), job])
    ran = list(_workers(res).values())
    assert len(ran) == pods and not any(_first(v, "Succeeded") for v in ran)
    for v in ran:
        assert _first(v, "Failed") == pytest.approx(_first(v, "Running") + 600)
        assert TORCH_RDZV in _message(v[-1])
    [warn] = [d for d in validate([Manifest(job, "t.yaml", 1)]) if "--nnodes=4" in d.message]
    assert warn.severity == "warning" and "never completes" in warn.message and "--nnodes=" in warn.hint


# -- validate ---------------------------------------------------------------------------------------------------
def test_validate_notices_a_multi_host_gang_restarting_in_place() -> None:
    spec = _tpu_pod_spec("ct5lp-hightpu-4t", "2x4")
    spec["restartPolicy"] = "OnFailure"
    diags = validate([Manifest(_jobset("train", 2, spec), "t.yaml", 1)])
    [note] = [d for d in diags if d.field.endswith("spec.restartPolicy")]
    assert note.severity == "notice" and "restart its container in place" in note.message


# -- explain and the headline for a gang that never trained (item 6) ----------------------------------------------
def test_explain_and_headline_say_why_a_gang_never_trained(tmp_path: Path) -> None:
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    out = tmp_path / "out"
    run(objects=[make_scenario("2h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                 _jobset("train", 2, _tpu_pod_spec(machine, topology), ann=TRAIN)], out=out)
    text = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(out)])
    assert text.exit_code == 0, text.output
    assert "Step time" not in text.output and "of work" not in text.output and "Which change" not in text.output
    assert "Never trained: rendezvous timed out at t=6.5 min after 5.0 min waiting for rank 1 (Pending)" \
        in text.output
    training = json.loads((out / "training.json").read_text())
    from kubetwin.report.headline import training_rows

    [row] = [v for k, v in training_rows(training) if k == "training default/train"]
    assert "step" not in row and "never trained" in row and "rendezvous timed out" in row and "t=" in row
    page = CliRunner().invoke(app, ["report", str(out)])
    assert page.exit_code == 0, page.output
    html = (out / "report.html").read_text()
    assert "Never trained: rendezvous timed out" in html and "never trained: rendezvous timed out" in html


def test_explain_a_gang_without_training_annotations(tmp_path: Path) -> None:
    """A plain multi-host JobSet that never trained: explain says so instead of 'not a training job'."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    out = tmp_path / "out"
    run(objects=[make_scenario("2h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                 _jobset("train", 2, _tpu_pod_spec(machine, topology))], out=out)
    text = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(out)])
    assert text.exit_code == 0, text.output
    assert "Never trained: rendezvous timed out" in text.output and "2 ranks (no training spec" in text.output
    assert "Barrier timed out" in text.output and "Step time" not in text.output


def test_a_gang_still_waiting_when_the_run_ends_never_trained(tmp_path: Path) -> None:
    """The run ends 3 minutes after the worker started, before its 300 s timeout: no step time, it is still waiting."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    out = tmp_path / "out"
    run(objects=[make_scenario("4m30s").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology),
                 _jobset("train", 2, _tpu_pod_spec(machine, topology), ann=TRAIN)], out=out)
    text = CliRunner().invoke(app, ["explain", "job", "train", "--run", str(out)]).output
    assert "Step time" not in text
    assert "Never trained: 1 of 2 ranks still waiting in the rendezvous at the end of the run (since t=90 s) for " \
           "rank 1 (Pending)" in text
    from kubetwin.report.headline import training_rows

    [row] = [v for k, v in training_rows(json.loads((out / "training.json").read_text()))
             if k == "training default/train"]
    assert row.startswith("never trained: 1 of 2 ranks still waiting")


# -- the Job's podFailurePolicy decides what a gang failure does (issue 31 items 2 and 6) -------------------------
FAIL_ON_1 = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]}


@pytest.mark.parametrize(("launcher", "timeout"), [("tpu-jax", 300), ("gpu-torchrun", 600)])
def test_a_fail_job_rule_on_the_rendezvous_exit_code_fails_the_job_at_once(launcher: str, timeout: int) -> None:
    """backoffLimit 6 would retry the rendezvous six more times; a FailJob rule on exit code 1 (the launchers'
    rendezvous error) fails the Job at the first timeout, with the Job controller's PodFailurePolicy reason."""
    if launcher == "tpu-jax":
        machine, topology = "ct5lp-hightpu-4t", "2x4"
        job = _indexed_job("train", 2, _tpu_pod_spec(machine, topology), backoff=6)
        objects = [_tpu_pool(machine, topology, 2), _blocker(machine, topology)]
    else:
        job = _gpu_job(["torchrun", "--nnodes=2", "--nproc-per-node=8", "train.py"])
        job["spec"]["backoffLimit"] = 6
        objects = [make_pool("a3", "a3-highgpu-8g", 1).gpus("nvidia-h100-80gb", 8).obj()]
    job["spec"]["podFailurePolicy"] = FAIL_ON_1
    res = run(objects=[make_scenario("3h").obj(), *objects, job])
    [ran] = [v for v in _workers(res).values() if _first(v, "Running") is not None]
    failed_at = _first(ran, "Failed")
    assert failed_at == pytest.approx(_first(ran, "Running") + timeout)
    final = _final(res, "Job", "train")
    cond = _cond(final, "Failed")
    assert cond["reason"] == "PodFailurePolicy"
    assert cond["message"].startswith(f"Container {ran[-1]['spec']['containers'][0]['name']} for pod "
                                      f"default/{ran[-1]['metadata']['name']} failed with exit code 1 matching "
                                      "FailJob rule at index 0")
    assert [c["type"] for c in final["status"]["conditions"]] == ["FailureTarget", "Failed"]
    assert sum(1 for v in _workers(res).values() if _first(v, "Failed")) == 1  # no retry


def test_a_jobset_fails_at_once_on_its_child_jobs_pod_failure_policy_reason() -> None:
    """JobSet failurePolicy rule onJobFailureReasons [PodFailurePolicy] -> FailJobSet, although maxRestarts is 3."""
    machine, topology = "ct5lp-hightpu-4t", "2x4"
    js = _jobset("train", 2, _tpu_pod_spec(machine, topology), restarts=3)
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"] = FAIL_ON_1
    js["spec"]["failurePolicy"]["rules"] = [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]
    res = run(objects=[make_scenario("3h").obj(), _tpu_pool(machine, topology, 2), _blocker(machine, topology), js])
    final = _final(res, "JobSet", "train")
    assert final["status"].get("restarts", 0) == 0
    assert _cond(final, "Failed")["reason"] == "FailJobSetFailurePolicyAction"

"""Round trip (issue 36 item 1's acceptance, for `kubetwin get -o yaml`): a run's own state at time T, dumped with
`kubetwin get ... -A -o yaml --run DIR --at T`, imported (`--snapshot-time` = T) and run again from T, makes the
same decisions as the original run continued from T: the Job's pods finish at the same instant, the pod waiting
for their GPUs is scheduled at the same instant on the same node, no pod is created twice."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import RunResult, run

DATA = Path(__file__).parent / "data" / "import"
WAITING = """\
apiVersion: v1
kind: Pod
metadata:
  name: wait-for-h100
  namespace: ml
  annotations: {kubetwin.io/duration: 20m}
spec:
  restartPolicy: Never
  nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: eval
    image: us-docker.pkg.dev/ml-prod/eval:1
    resources: {limits: {nvidia.com/gpu: "8"}}
"""
T = 1800.0


def running(result: RunResult, name: str) -> tuple[float | None, str | None]:
    t = result.first_time("Pod", lambda p: p["status"].get("phase") == "Running", name)
    return t, result.last("Pod", name)["spec"].get("nodeName")


def test_a_runs_state_at_t_imported_continues_as_the_run_did(tmp_path: Path) -> None:
    (tmp_path / "waiting.yaml").write_text(WAITING)
    first = run([DATA / "gke-kubectl.yaml", tmp_path / "waiting.yaml"], duration="2h", out=tmp_path / "first")
    res = CliRunner().invoke(app, ["get", "nodes,nodepools,namespaces,deployments,replicasets,jobs,pods", "-A",
                                   "-o", "yaml", "--run", str(tmp_path / "first"), "--at", "30m"])
    assert res.exit_code == 0, res.output
    (tmp_path / "state.yaml").write_text(res.output)
    res = CliRunner().invoke(app, ["import", str(tmp_path / "state.yaml"), "--out", str(tmp_path / "imp"),
                                   "--snapshot-time", "2026-12-01T10:29:30Z"])  # the first run's t=0 + 30m
    assert res.exit_code == 0, res.output
    again = run([tmp_path / "imp" / "cluster.yaml"], duration="90m")

    start, node = running(first, "wait-for-h100")
    assert start is not None and start == 3600.0  # waited for the Job's hour
    assert running(again, "wait-for-h100") == (start - T, node)
    for name in ("train-llama-0-b8xkd", "train-llama-1-pz6wq", "wait-for-h100"):
        done = first.first_time("Pod", lambda p: p["status"].get("phase") == "Succeeded", name)
        assert done is not None
        assert again.first_time("Pod", lambda p: p["status"].get("phase") == "Succeeded", name) == done - T
    assert {v.object["metadata"]["name"] for v in again.versions("Pod")} == {
        v.object["metadata"]["name"] for v in first.versions("Pod")}
    assert {v.object["metadata"]["name"] for v in again.versions("Node")} == {
        v.object["metadata"]["name"] for v in first.versions("Node")}
    assert again.summary["cost"]["node_hours_by_pool"] == {"cpu-pool": 1.5, "h100-pool": 3.0, "l4-spot": 3.0}


def test_kueue_jobs_are_queued_again_in_the_same_admission_state(tmp_path: Path) -> None:
    """What the import says it does with Kueue (its report's line): the Workloads of jobs are created again by the
    twin's Kueue, which admits the same ones at t=0 and keeps the same ones pending; a job running at the snapshot
    is suspended, so its pods start again (admitted Workloads' status is not restored yet)."""
    example = Path(__file__).parents[1] / "examples" / "kueue-cohort-borrowing.yaml"
    run([example], duration="2h", out=tmp_path / "first")
    kinds = "nodes,nodepools,namespaces,resourceflavors,clusterqueues,localqueues,workloads,jobs,pods"
    res = CliRunner().invoke(app, ["get", kinds, "-A", "-o", "yaml", "--run", str(tmp_path / "first"),
                                   "--at", "90m"])
    assert res.exit_code == 0, res.output
    (tmp_path / "state.yaml").write_text(res.output)
    res = CliRunner().invoke(app, ["import", str(tmp_path / "state.yaml"), "--out", str(tmp_path / "imp"),
                                   "--snapshot-time", "2026-01-01T01:30:00Z"])
    assert res.exit_code == 0, res.output
    assert "dropped: 5 Kueue Workloads of jobs: the twin's Kueue creates them again" in res.output
    assert "defaulted: 4 objects of a twin run keep no kubetwin.io/create-at" in res.output
    first = run([example], duration="90m")
    again = run([tmp_path / "imp" / "cluster.yaml"], duration="1m")

    def admitted(result: RunResult, at: float) -> dict[str, bool]:
        return {v.object["metadata"]["name"]: any(c["type"] == "Admitted" and c["status"] == "True" for c in (
            result.last("Workload", v.object["metadata"]["name"], at=at).get("status") or {}).get("conditions")
            or []) for v in result.versions("Workload")}

    assert admitted(again, 0.0) == admitted(first, 5400.0) == {
        "job-finetune-d1753": True, "job-sweep-a-91e4b": True, "job-sweep-b-ae126": True,
        "job-sweep-c-9361e": False, "job-sweep-d-9ae17": False}
    # the running jobs' pods start again at t=0 (new pods), as the report says
    running = {v.object["metadata"]["name"] for v in again.versions("Pod") if v.time == 0.0
               and v.object["status"].get("phase") == "Running"}
    dumped = yaml.safe_load((tmp_path / "state.yaml").read_text())["items"]
    before = {o["metadata"]["name"] for o in dumped if o["kind"] == "Pod" and o["status"]["phase"] == "Running"}
    assert len(running) == len(before) == 4 and not running & before

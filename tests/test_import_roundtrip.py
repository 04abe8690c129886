"""Round trip (issue 36 item 1's acceptance, for `kubetwin get -o yaml`): a run's own state at time T, dumped with
`kubetwin get ... -A -o yaml --run DIR --at T`, imported (`--snapshot-time` = T) and run again from T, makes the
same decisions as the original run continued from T: the Job's pods finish at the same instant, the pod waiting
for their GPUs is scheduled at the same instant on the same node, no pod is created twice."""

from __future__ import annotations

from pathlib import Path

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

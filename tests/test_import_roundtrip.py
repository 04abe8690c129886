"""Round trip (issue 36 item 1's acceptance, for `kubetwin get -o yaml`): a run's own state at time T, dumped with
`kubetwin get ... -A -o yaml --run DIR --at T`, imported (`--snapshot-time` = T) and run again from T, makes the
same decisions as the original run continued from T: the Job's pods finish at the same instant, the pod waiting
for their GPUs is scheduled at the same instant on the same node, no pod is created twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


def as_format(text: str, fmt: str, tmp_path: Path) -> Path:
    """`kubetwin get -o yaml`'s List as kubectl -o json prints it, or as kwokctl saves it (one document per object,
    resourceVersion cleared)."""
    dump = yaml.safe_load(text)
    if fmt == "kubectl-yaml":
        path = tmp_path / "state.yaml"
        path.write_text(text)
    elif fmt == "kubectl-json":
        path = tmp_path / "state.json"
        path.write_text(json.dumps(dump, indent=4))
    else:
        for o in dump["items"]:
            o["metadata"].pop("resourceVersion", None)
        path = tmp_path / "state-kwok.yaml"
        path.write_text("---\n".join(yaml.safe_dump(o) for o in dump["items"]))
    return path


def dump_and_import(tmp_path: Path, kinds: str, at: str, snapshot_time: str) -> str:
    """The first run's state (tmp_path/first) at `at` as `kubetwin get KINDS -A -o yaml` prints it, imported into
    tmp_path/imp with t=0 at `snapshot_time`: what `import` printed."""
    res = CliRunner().invoke(app, ["get", kinds, "-A", "-o", "yaml", "--run", str(tmp_path / "first"), "--at", at])
    assert res.exit_code == 0, res.output
    (tmp_path / "state.yaml").write_text(res.output)
    res = CliRunner().invoke(app, ["import", str(tmp_path / "state.yaml"), "--out", str(tmp_path / "imp"),
                                   "--snapshot-time", snapshot_time])
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("fmt", ["kubectl-yaml", "kubectl-json", "kwokctl"])
def test_a_runs_state_at_t_imported_continues_as_the_run_did(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "waiting.yaml").write_text(WAITING)
    first = run([DATA / "gke-kubectl.yaml", tmp_path / "waiting.yaml"], duration="2h", out=tmp_path / "first")
    res = CliRunner().invoke(app, ["get", "nodes,nodepools,namespaces,deployments,replicasets,jobs,pods", "-A",
                                   "-o", "yaml", "--run", str(tmp_path / "first"), "--at", "30m"])
    assert res.exit_code == 0, res.output
    state = as_format(res.output, fmt, tmp_path)
    res = CliRunner().invoke(app, ["import", str(state), "--out", str(tmp_path / "imp"),
                                   "--snapshot-time", "2026-12-01T10:29:30Z"])  # the first run's t=0 + 30m
    assert res.exit_code == 0, res.output
    assert f"read: 1 {'kwokctl' if fmt == 'kwokctl' else 'kubectl'} file" in res.output
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


def test_kueue_admitted_workloads_keep_their_quota_and_jobs_keep_running(tmp_path: Path) -> None:
    """The Kueue example dumped at 90 min: the admitted Workloads hold their quota and their jobs' pods keep
    running (no re-suspension, no duplicate Workload), the pending ones stay queued and are admitted at the instant
    the original run admitted them, on the same flavor."""
    example = Path(__file__).parents[1] / "examples" / "kueue-cohort-borrowing.yaml"
    first = run([example], duration="6h", out=tmp_path / "first")
    out = dump_and_import(tmp_path, "nodes,nodepools,namespaces,resourceflavors,clusterqueues,localqueues,workloads,"
                          "jobs,pods", "90m", "2026-01-01T01:30:00Z")
    assert ("defaulted: 3 Kueue Workloads keep their status: admitted ones hold their quota and flavors, their jobs "
            "run on") in out
    assert "defaulted: 4 objects of a twin run keep no kubetwin.io/create-at" in out
    again = run([tmp_path / "imp" / "cluster.yaml"], duration="270m")
    T = 5400.0

    def is_admitted(w: dict) -> bool:
        return any(c["type"] == "Admitted" and c["status"] == "True"
                   for c in (w.get("status") or {}).get("conditions") or [])

    def admissions(result: RunResult, name: str) -> list[float]:
        """When the Workload became admitted (each time)."""
        out, was = [], False
        for v in result.versions("Workload", name):
            now = v.type != "DELETED" and is_admitted(v.object)
            if now and not was:
                out.append(v.time)
            was = now
        return out

    names = {v.object["metadata"]["name"] for v in first.versions("Workload")}
    assert {v.object["metadata"]["name"] for v in again.versions("Workload")} == names  # none created twice
    for name in names:
        assert is_admitted(again.last("Workload", name, at=0.0)) == is_admitted(first.last("Workload", name, at=T))
        assert [t for t in admissions(again, name) if t > 0] == [t - T for t in admissions(first, name) if t > T]
        cq = (first.last("Workload", name).get("status") or {}).get("admission", {}).get("clusterQueue")
        assert (again.last("Workload", name).get("status") or {}).get("admission", {}).get("clusterQueue") == cq
    assert {n for n in names if [t for t in admissions(first, n) if t > T]} == {"job-sweep-c-9361e",
                                                                                "job-sweep-d-9ae17"}
    # the jobs running at the snapshot keep their pods, never suspended
    dumped = yaml.safe_load((tmp_path / "state.yaml").read_text())["items"]
    running = {o["metadata"]["name"] for o in dumped if o["kind"] == "Pod" and o["status"]["phase"] == "Running"}
    assert len(running) == 4
    for name in running:
        assert again.first_time("Pod", lambda p: p["status"].get("phase") == "Running", name) == 0.0
    suspended = {e.event["involvedObject"]["name"] for e in again.recorded_events("Suspended")}
    assert suspended == {"sweep-c", "sweep-d"}  # the pending ones, created suspended as they were
    # each job finishes when it did in the original run (those that finish within its 6 h)
    finished = 0
    for job in ("finetune", "sweep-a", "sweep-b", "sweep-c", "sweep-d"):
        ns = "prod" if job == "finetune" else "research"
        done = first.first_time("Job", lambda j: bool((j.get("status") or {}).get("completionTime")), job,
                                namespace=ns)
        finished += done is not None
        assert again.first_time("Job", lambda j: bool((j.get("status") or {}).get("completionTime")), job,
                                namespace=ns) == (None if done is None else done - T), job
    assert finished == 3


def test_spot_preemptions_and_checkpoints_continue_from_the_snapshot(tmp_path: Path) -> None:
    """The Spot example dumped at 2 h: its scheduled preemptions (3 h, 7 h) come 1 h and 5 h after the snapshot,
    the running pods' work counts from their real start (kubetwin.io/elapsed), so they checkpoint where they did,
    and both Jobs finish when they did, losing the same work; new objects never reuse an imported uid."""
    example = Path(__file__).parents[1] / "examples" / "spot-vs-on-demand.yaml"
    first = run([example], out=tmp_path / "first")
    out = dump_and_import(tmp_path, "nodes,nodepools,namespaces,jobs,pods", "2h", "2026-01-01T02:00:00Z")
    assert "defaulted: 2 scheduled Spot preemptions of a twin run counted again from the snapshot" in out
    again = run([tmp_path / "imp" / "cluster.yaml"], duration="10h")
    T = 7200.0

    def preempted(result: RunResult) -> list[float]:
        return [e.first_seen for e in result.recorded_events("Killing")]

    assert preempted(again) == [t - T for t in preempted(first)] == [3600.0, 18000.0]
    for ns in ("on-demand", "spot"):
        done = first.first_time("Job", lambda j: bool((j.get("status") or {}).get("completionTime")), "train",
                                namespace=ns)
        assert done is not None
        assert again.first_time("Job", lambda j: bool((j.get("status") or {}).get("completionTime")), "train",
                                namespace=ns) == done - T
    assert again.summary["lost_work"] == first.summary["lost_work"]
    uids = [v.object["metadata"]["uid"] for v in again.versions("Pod") if v.type == "ADDED"]
    assert len(uids) == len(set(uids)) == 4


TPU_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tpu-v5e-slice.yaml"


def test_a_multi_host_tpu_slice_is_imported_as_its_node_pool(tmp_path: Path) -> None:
    """A dump's multi-host TPU slice (four ct5lp-hightpu-4t hosts of a 4x4 v5e slice, GKE's gke-tpu-topology on
    each) becomes its NodePool (placementPolicy.tpuTopology 4x4) that adopts the four Nodes as a Ready slice: no VM
    boots, the training pods keep running on them and finish when the original run's did."""
    first = run([TPU_EXAMPLE], out=tmp_path / "first")
    dump_and_import(tmp_path, "nodes,namespaces,jobs,pods", "30m", "2026-01-01T00:30:00Z")
    pools = {d["metadata"]["name"]: d for d in yaml.safe_load_all((tmp_path / "imp" / "cluster.yaml").read_text())
             if d and d.get("kind") == "NodePool"}
    assert pools["tpu-v5e-4x4"]["spec"] == {"machineType": "ct5lp-hightpu-4t", "nodeCount": 4,
                                            "zones": ["us-central1-a"], "placementPolicy": {"tpuTopology": "4x4"}}
    again = run([tmp_path / "imp" / "cluster.yaml"], duration="4h")
    assert {v.object["metadata"]["name"] for v in again.versions("Node")} == {
        v.object["metadata"]["name"] for v in first.versions("Node")}  # the slice adopted: no VM booted
    for pod in [v.object["metadata"]["name"] for v in first.versions("Pod")]:
        done = first.first_time("Pod", lambda p: p["status"].get("phase") == "Succeeded", pod)
        assert done is not None
        assert again.last("Pod", pod, at=0.0)["status"]["phase"] == "Running"
        assert again.first_time("Pod", lambda p: p["status"].get("phase") == "Succeeded", pod) == done - T


def test_a_partial_tpu_slice_stays_static_nodes_with_the_reason(tmp_path: Path) -> None:
    run([TPU_EXAMPLE], out=tmp_path / "first")
    res = CliRunner().invoke(app, ["get", "nodes", "-o", "yaml", "--run", str(tmp_path / "first"), "--at", "30m"])
    dump = yaml.safe_load(res.output)
    dump["items"] = [n for n in dump["items"] if not n["metadata"]["name"].endswith(
        sorted(x["metadata"]["name"] for x in dump["items"] if "tpu" in x["metadata"]["name"])[0][-4:])]
    (tmp_path / "partial.yaml").write_text(yaml.safe_dump(dump))
    res = CliRunner().invoke(app, ["import", str(tmp_path / "partial.yaml"), "--out", str(tmp_path / "imp")])
    assert res.exit_code == 0, res.output
    assert ("3 Nodes stay static Nodes: pool tpu-v5e-4x4 is a multi-host TPU slice 4x4 of 4 hosts with 3 in the "
            "dump (a partial slice: GKE would be repairing it)") in " ".join(res.output.split())

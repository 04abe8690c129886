"""Each source format imports to the same twin manifests (issue 36 item 1): kubectl -o yaml and -o json Lists, the
kube-scheduler-simulator's export, kwokctl's snapshot; GKE nodes grouped into NodePools that adopt them; the report
says what was kept, dropped and defaulted, with counts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubetwin.autoscaler.nodepool import ADOPT_NODES
from kubetwin.cli.main import app
from kubetwin.importer import convert, kubectl, kwok, simulator
from kubetwin.importer import sources as import_sources

DATA = Path(__file__).parent / "data" / "import"
FORMATS = {"gke-kubectl.yaml": kubectl.FORMAT, "gke-kubectl.json": kubectl.FORMAT,
           "gke-simulator-export.json": simulator.FORMAT, "gke-kwokctl-snapshot.yaml": kwok.FORMAT}


def objs(manifests: list, kind: str) -> dict[str, dict]:
    return {m.obj["metadata"]["name"]: m.obj for m in manifests if m.kind == kind}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_is_detected_from_its_content(name: str) -> None:
    assert import_sources.read_file(DATA / name).format == FORMATS[name]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_imports_nodes_pools_and_pods(name: str) -> None:
    manifests, report = import_sources.load([DATA / name])
    assert report is not None and report.formats == {FORMATS[name]: 1}
    nodes, pools, pods = objs(manifests, "Node"), objs(manifests, "NodePool"), objs(manifests, "Pod")
    assert len(nodes) == 5 and len(pods) == 6
    assert set(pools) == {"h100-pool", "l4-spot", "cpu-pool"}
    for obj in [*nodes.values(), *pods.values()]:  # what the twin owns is gone, uids and owners stay
        meta = obj["metadata"]
        assert not {"managedFields", "resourceVersion", "creationTimestamp"} & set(meta)
        assert meta["uid"]
    assert pods["llm-server-6d9f7c8b5d-4kq7z"]["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    # bound pods keep their node and lose their status (the kubelet starts them at t=0); the pending one is unbound
    assert pods["train-llama-0-b8xkd"]["spec"]["nodeName"] == "gke-ml-prod-h100-pool-5f3c2a1b-7x2k"
    assert "status" not in pods["train-llama-0-b8xkd"] and "nodeName" not in pods["batch-prep"]["spec"]
    # nodes as dumped: labels, taints, capacity and allocatable
    h100 = nodes["gke-ml-prod-h100-pool-5f3c2a1b-7x2k"]
    assert h100["spec"]["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
    assert h100["status"]["allocatable"]["nvidia.com/gpu"] == "8" and h100["status"]["capacity"]["cpu"] == "208"
    assert "images" not in h100["status"]
    scenario = next(m.obj for m in manifests if m.kind == "Scenario")
    assert scenario["spec"]["startTime"] == "2026-12-01T09:59:30Z"  # the latest time the dump records


def test_gke_nodes_are_grouped_into_node_pools_that_adopt_them() -> None:
    manifests, _ = import_sources.load([DATA / "gke-kubectl.yaml"])
    pools = objs(manifests, "NodePool")
    assert pools["h100-pool"]["spec"] == {
        "machineType": "a3-highgpu-8g", "nodeCount": 2, "zones": ["us-central1-a"],
        "accelerators": [{"type": "nvidia-h100-80gb", "count": 8}], "labels": {"team": "ml-platform"}}
    # one Spot node in each of two zones: nodeCount is per zone
    assert pools["l4-spot"]["spec"] == {
        "machineType": "g2-standard-8", "nodeCount": 1, "zones": ["us-central1-a", "us-central1-b"], "spot": True,
        "accelerators": [{"type": "nvidia-l4", "count": 1}], "labels": {"team": "ml-platform"}}
    assert pools["cpu-pool"]["spec"]["machineType"] == "e2-standard-8" and "accelerators" not in pools[
        "cpu-pool"]["spec"]
    assert all(p["metadata"]["annotations"] == {ADOPT_NODES: "true"} for p in pools.values())


def test_the_report_counts_what_was_kept_dropped_and_defaulted() -> None:
    _, report = import_sources.load([DATA / "gke-kubectl.yaml"])
    assert report is not None
    assert report.kept == {"Deployment": 1, "Job": 1, "Namespace": 3, "Node": 5, "NodePool": 3, "Pod": 6,
                           "ReplicaSet": 1, "Scenario": 1}
    lines = report.lines()
    assert ("dropped: 6 statuses of objects the twin's controllers write again: 1 Deployment, 1 Job, 3 Namespace, "
            "1 ReplicaSet") in lines
    assert "defaulted: 1 Pending pods stay Pending and are scheduled" in lines
    assert ("defaulted: 1 pods whose controller (DaemonSet) is not in the dump keep running: nothing re-creates "
            "them") in lines
    assert any(line.startswith("defaulted: 2 bound pods of Jobs or of no owner have no run time: they run 3600s")
               for line in lines)


def test_remaining_run_time_per_owner_and_from_the_duration_annotation(tmp_path: Path) -> None:
    opts = convert.Options(remaining={"job/train-llama": 2700.0, "*": 600.0})
    manifests, _ = import_sources.load([DATA / "gke-kubectl.yaml"], opts)
    pods = objs(manifests, "Pod")
    # it had run 59m30s at the snapshot (kubetwin.io/elapsed, which the kubelet takes off): 45 min more
    assert pods["train-llama-1-pz6wq"]["metadata"]["annotations"]["kubetwin.io/duration"] == f"{3570 + 2700}s"
    assert pods["train-llama-1-pz6wq"]["metadata"]["annotations"]["kubetwin.io/elapsed"] == "3570s"
    assert "kubetwin.io/duration" not in (pods["llm-server-6d9f7c8b5d-9tm2x"]["metadata"].get("annotations") or {})
    # a pod that says its whole run time runs what is left of it at the snapshot (started 09:00, t=0 09:59:30)
    dump = yaml.safe_load((DATA / "gke-kubectl.yaml").read_text())
    for item in dump["items"]:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "train-llama-0-b8xkd":
            item["metadata"]["annotations"]["kubetwin.io/duration"] = "2h"
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(dump))
    pods = objs(import_sources.load([tmp_path / "d.yaml"])[0], "Pod")
    ann = pods["train-llama-0-b8xkd"]["metadata"]["annotations"]
    assert ann["kubetwin.io/duration"] == "2h" and ann["kubetwin.io/elapsed"] == "3570s"  # the kubelet counts it


def test_plain_manifests_pass_through_untouched() -> None:
    example = Path(__file__).parents[1] / "examples" / "spot-vs-on-demand.yaml"
    manifests, report = import_sources.load([example])
    assert report is None
    assert [m.obj for m in manifests] == [d for d in yaml.safe_load_all(example.read_text()) if d]


def test_kubetwin_import_writes_manifests_that_validate(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["import", str(DATA / "gke-kubectl.yaml"), "--out", str(tmp_path / "imp"),
                                   "--remaining-run-time", "job/train-llama=45m"])
    assert res.exit_code == 0, res.output
    assert "kept: 1 Deployment, 1 Job, 3 Namespace, 5 Node, 3 NodePool, 6 Pod, 1 ReplicaSet, 1 Scenario" in res.output
    assert "defaulted: 2 bound pods run the time --remaining-run-time gives their owner" in res.output
    written = tmp_path / "imp" / "cluster.yaml"
    # what import writes is plain manifests: read back as they are, not imported twice
    manifests, report = import_sources.load([written])
    assert report is None and len(objs(manifests, "NodePool")) == 3
    res = CliRunner().invoke(app, ["validate", str(written)])
    assert res.exit_code == 0 and "0 errors" in res.output, res.output
    again = CliRunner().invoke(app, ["import", str(DATA / "gke-kubectl.yaml"), "--out", str(tmp_path / "imp")])
    assert again.exit_code == 1 and "--overwrite" in again.output

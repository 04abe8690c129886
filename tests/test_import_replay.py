"""A kwokctl recording (`kwokctl snapshot export --record`: the objects, then ResourcePatch documents, every time
relative to the recording's start) replayed on the twin's timeline (importer/replay.py, issue 36 item 2): what a
user did happens at its time, what the cluster's controllers did is left to the twin's."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import yaml

from kubetwin.importer import replay, sources
from kubetwin.runner import run

DATA = Path(__file__).resolve().parent / "data" / "import"
START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)  # when the fixture's recording starts
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
NODE = "gke-ml-prod-cpu-pool-91d2c3e4-b7vn"
MIN = 60 * 10**9  # a minute in nanoseconds


def _relative(text: str) -> str:
    """kwok's ReplaceTimeToRelative: every RFC 3339 time as $(time-offset-nanosecond N) from START."""
    def offset(m: re.Match[str]) -> str:
        t = datetime.fromisoformat(m.group(0).replace("Z", "+00:00"))
        return f"$(time-offset-nanosecond {int((t - START).total_seconds() * 1e9)})"
    return STAMP.sub(offset, text)


def _patch(minutes: int, method: str, resource: dict, name: str, namespace: str = "", template=None) -> dict:
    doc = {"apiVersion": "action.kwok.x-k8s.io/v1alpha1", "kind": "ResourcePatch", "resource": resource,
           "target": {"name": name, **({"namespace": namespace} if namespace else {})},
           "durationNanosecond": minutes * MIN, "method": method}
    if template is not None:
        doc["template"] = template
    return doc


JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
    "name": "eval", "namespace": "ml", "uid": "0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6",
    "creationTimestamp": "2026-12-01T10:10:00Z", "resourceVersion": "9001"},
    "spec": {"completions": 1, "parallelism": 1, "template": {
        "metadata": {"annotations": {"kubetwin.io/duration": "1h"}},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "eval", "image": "python:3.12", "resources": {"requests": {"cpu": "1"}}}]}}}}


def _recording(tmp_path: Path) -> Path:
    jobs, pods, nodes = ({"group": "batch", "version": "v1", "resource": "jobs"},
                         {"version": "v1", "resource": "pods"}, {"version": "v1", "resource": "nodes"})
    docs = [
        _patch(10, "create", jobs, "eval", "ml", JOB),
        _patch(10, "create", pods, "eval-abcde", "ml", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "eval-abcde", "namespace": "ml", "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
            "name": "eval", "uid": JOB["metadata"]["uid"], "controller": True}]}, "spec": {"containers": []}}),
        _patch(11, "patch", pods, "batch-prep", "ml", {"status": {"phase": "Running"}}),
        _patch(12, "create", {"version": "v1", "resource": "events"}, "x.1", "ml", {"reason": "Scheduled"}),
        _patch(20, "patch", nodes, NODE, template={"spec": {"unschedulable": True}}),
        _patch(21, "patch", nodes, NODE, template={"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        _patch(50, "delete", jobs, "eval", "ml"),
    ]
    text = (DATA / "gke-kwokctl-snapshot.yaml").read_text() + "".join(
        "---\n" + yaml.safe_dump(d, sort_keys=False) for d in docs)
    path = tmp_path / "recording.yaml"
    path.write_text(_relative(text))
    return path


def test_relative_times_read_back_as_kwok_reverts_them() -> None:
    assert replay.revert_times("$(time-offset-nanosecond 0) $(time-offset-nanosecond -1500000000)") == \
        "2026-01-01T00:00:00.000000Z 2025-12-31T23:59:58.500000Z"


def test_a_recording_replays_what_users_did_and_skips_what_controllers_did(tmp_path: Path) -> None:
    path = _recording(tmp_path)
    manifests, report = sources.load([path])
    assert report is not None and report.snapshot_time == replay.RECORDING_START  # the recording's start is t=0
    lines = report.lines()
    assert "replayed: 1 created later (kubetwin.io/create-at), 1 changes (Change), 1 deleted later " \
           "(kubetwin.io/delete-at) from a kwokctl recording" in lines
    skipped = "\n".join(line for line in lines if line.startswith("skipped:"))
    for why in ("Event objects the run writes itself", "objects their controllers create",
                "pods' status and bindings", "status-only patches"):
        assert why in skipped, (why, skipped)
    job = next(m.obj for m in manifests if m.kind == "Job" and m.obj["metadata"]["name"] == "eval")
    assert job["metadata"]["annotations"] == {"kubetwin.io/create-at": "600s", "kubetwin.io/delete-at": "3000s"}
    assert "resourceVersion" not in job["metadata"] and "creationTimestamp" not in job["metadata"]

    res = run([path], duration="1h")
    versions = res.versions("Job", "eval")
    assert versions[0].time == 600 and versions[-1].type == "DELETED" and versions[-1].time == 3000
    assert res.first_time("Node", lambda o: bool((o.get("spec") or {}).get("unschedulable")), NODE) == 1200
    change = res.last("Change", "recorded-00001")
    assert change["status"]["phase"] == "Applied" and change["spec"]["patchType"] == "strategic"


def _record(seconds: float, event: str, resource: dict) -> str:
    t = datetime.fromtimestamp(START.timestamp() + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"time": t, "event": event, "resource": resource}) + "\n"


def _node(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "uid": f"u-{name}", "resourceVersion": "1", "creationTimestamp": "2026-12-01T09:00:00Z",
        "labels": {"kubernetes.io/hostname": name}}, "spec": spec,
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def _pod(name: str, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "default", "uid": f"u-{name}", "resourceVersion": "2",
        "creationTimestamp": "2026-12-01T10:00:00Z", **meta},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}}


def test_simulator_recorder_lines_replay_after_their_initial_sync(tmp_path: Path) -> None:
    """The recorder's first Adds (its informers' initial list, within the first flush) are the state at t=0; later
    Adds, Updates (as merge patches of what changed) and Deletes are the timeline; its first record is t=0."""
    path = tmp_path / "record.jsonl"
    path.write_text(
        _record(0, "Add", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": "default", "uid": "u-ns", "resourceVersion": "1", "creationTimestamp": "2026-12-01T09:00:00Z"}})
        + _record(0.2, "Add", _node("n1")) + _record(0.3, "Add", _node("n2"))
        + _record(600, "Add", _pod("late"))
        + _record(601, "Update", {**_pod("late"), "spec": {**_pod("late")["spec"], "nodeName": "n1"}})
        + _record(1200, "Update", _node("n1", unschedulable=True))
        + _record(1230, "Update", {**_node("n2"), "status": {**_node("n2")["status"], "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "x"}]}})
        + _record(3000, "Delete", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late",
                                                                                 "namespace": "default"}}))
    manifests, report = sources.load([path])
    assert report is not None and report.snapshot_time == "2026-12-01T10:00:00Z"
    assert "replayed: 1 created later (kubetwin.io/create-at), 1 changes (Change), 1 deleted later " \
           "(kubetwin.io/delete-at) from a kwokctl recording" in report.lines()
    change = next(m.obj for m in manifests if m.kind == "Change")
    assert change["spec"]["patchType"] == "merge" and change["spec"]["patch"] == {"spec": {"unschedulable": True}}
    res = run([path], duration="1h")
    late = res.versions("Pod", "late")
    assert late[0].time == 600 and late[-1].type == "DELETED" and late[-1].time == 3000
    assert res.first_time("Node", lambda o: bool((o.get("spec") or {}).get("unschedulable")), "n1") == 1200
    # the recorded binding to n1 is the real scheduler's: skipped; the twin's own scheduler binds the pod
    assert any("pods' status and bindings" in line for line in report.lines())
    assert [e.event["source"]["component"] for e in res.recorded_events("Scheduled", involved="late")] == [
        "default-scheduler"]

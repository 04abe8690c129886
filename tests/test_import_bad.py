"""Bad or partial dumps (issue 36 item 1): a truncated file, objects of unknown kinds, pods on nodes the dump does
not have, resourceVersion gaps between sources, recordings of changes (item 2, not built): clear messages with
counts and file:line, exit code 1 where the run could not go on, never a traceback; what `run` rejects, `validate`
rejects first."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubetwin.api.errors import KubetwinError
from kubetwin.cli.main import app
from kubetwin.importer import sources as import_sources
from kubetwin.runner import run

DATA = Path(__file__).parent / "data" / "import"


def dump() -> dict:
    return yaml.safe_load((DATA / "gke-kubectl.yaml").read_text())


def cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


@pytest.mark.parametrize("command", ["validate", "run", "import"])
def test_a_truncated_yaml_list_is_refused_as_cut_short(tmp_path: Path, command: str) -> None:
    text = (DATA / "gke-kubectl.yaml").read_text()
    cut = tmp_path / "cut.yaml"
    cut.write_text(text[:text.index("- apiVersion: v1\n  kind: Pod")])  # ends after the Job, before any pod
    args = [command, str(cut)] + (["--out", str(tmp_path / "o")] if command != "validate" else [])
    code, out = cli(*args)
    assert code == 1
    last = max(i for i, t in enumerate(cut.read_text().splitlines(), 1) if t.startswith("- apiVersion"))
    assert (f"{cut}:1: error: List: kind: a kubectl List without its closing `kind: List` (11 items read, the last "
            f"at line {last})") in out
    assert "the file was cut short" in out


def test_a_truncated_json_dump_names_where_it_ends(tmp_path: Path) -> None:
    text = (DATA / "gke-kubectl.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[:len(text) // 2])
    code, out = cli("validate", str(cut))
    assert code == 1
    assert f"{cut}:" in out and "not valid JSON" in out and "cut short" in out


def test_unknown_kinds_are_dropped_and_counted(tmp_path: Path) -> None:
    d = dump()
    for i in range(2):
        d["items"].append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {
            "name": f"llm-server-{i}", "namespace": "ml", "uid": f"u{i}", "resourceVersion": "9",
            "creationTimestamp": "2026-12-01T07:30:00Z"}, "addressType": "IPv4", "endpoints": []})
    d["items"].append({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
        "name": "kube-scheduler", "namespace": "kube-system", "resourceVersion": "7",
        "creationTimestamp": "2026-11-28T06:10:00Z"}, "spec": {}})
    d["items"].append({"apiVersion": "v1", "kind": "Event", "metadata": {
        "name": "batch-prep.1", "namespace": "ml", "resourceVersion": "8", "creationTimestamp": "2026-12-01T09:59:30Z"},
        "involvedObject": {"kind": "Pod", "name": "batch-prep"}, "reason": "FailedScheduling", "message": "x"})
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(d))
    code, out = cli("validate", str(tmp_path / "d.yaml"))
    assert code == 0, out
    assert "import dropped: 3 objects of kinds the twin does not know: 2 EndpointSlice, 1 Lease" in out
    assert "import dropped: 1 the run records its own: 1 Event" in out


def test_pods_on_nodes_not_in_the_dump_are_unbound_with_a_warning(tmp_path: Path) -> None:
    d = dump()
    d["items"] = [o for o in d["items"] if o["metadata"]["name"] != "gke-ml-prod-l4-spot-2a9b7f13-hx4c"]
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(d))
    code, out = cli("validate", str(tmp_path / "d.yaml"))
    assert code == 0, out
    assert ("warning: Pod/ml/llm-server-6d9f7c8b5d-9tm2x: spec.nodeName: bound to node "
            "gke-ml-prod-l4-spot-2a9b7f13-hx4c, which the dump does not have") in out
    assert "import defaulted: 1 pods on nodes not in the dump, unbound and scheduled again" in out
    result = run([tmp_path / "d.yaml"], duration="10m")
    pod = result.last("Pod", "llm-server-6d9f7c8b5d-9tm2x")  # the one L4 node left is taken: it waits
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    assert result.first_time("Pod", lambda p: p["status"].get("phase") == "Running", "llm-server-6d9f7c8b5d-4kq7z") == 0


def test_a_resource_version_gap_between_sources_keeps_the_newest(tmp_path: Path) -> None:
    d = dump()
    later = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [
        copy.deepcopy(o) for o in d["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "batch-prep"]}
    later["items"][0]["metadata"]["resourceVersion"] = "99999"
    later["items"][0]["metadata"]["labels"]["seen"] = "later"
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(d))
    (tmp_path / "b.json").write_text(json.dumps(later))
    manifests, report = import_sources.load([tmp_path / "b.json", tmp_path / "a.yaml"])
    assert report is not None
    pods = [m.obj for m in manifests if m.kind == "Pod" and m.obj["metadata"]["name"] == "batch-prep"]
    assert len(pods) == 1 and pods[0]["metadata"]["labels"]["seen"] == "later"
    assert [w.message[:60] for w in report.warnings] == [
        "1 objects appear in more than one source with different reso"]


def test_kwok_recordings_replay_and_bad_recorder_lines_are_refused_at_their_line(tmp_path: Path) -> None:
    """A kwokctl recording's ResourcePatch documents replay (importer/replay.py: here a bare pod deleted 5 s in); a
    recorder line that is not one is refused at its line."""
    rec = tmp_path / "rec.yaml"
    rec.write_text((DATA / "gke-kwokctl-snapshot.yaml").read_text() + "---\n" + yaml.safe_dump({
        "apiVersion": "action.kwok.x-k8s.io/v1alpha1", "kind": "ResourcePatch",
        "resource": {"version": "v1", "resource": "pods"}, "target": {"name": "batch-prep", "namespace": "ml"},
        "durationNanosecond": 5000000000, "method": "delete"}))
    code, out = cli("validate", str(rec))
    assert code == 0 and "1 deleted later (kubetwin.io/delete-at) from a kwokctl recording" in out
    manifests, _ = import_sources.load([rec])
    prep = next(m.obj for m in manifests if m.kind == "Pod" and m.obj["metadata"]["name"] == "batch-prep")
    assert prep["metadata"]["annotations"]["kubetwin.io/delete-at"] == "5s"
    lines = tmp_path / "recorder.jsonl"
    good = {"time": "2026-12-01T10:00:00Z", "event": "Add", "resource": {"apiVersion": "v1", "kind": "Namespace",
                                                                          "metadata": {"name": "ml"}}}
    lines.write_text(json.dumps(good) + "\n" + json.dumps({**good, "resource": {"kind": "Pod"}}) + "\n")
    code, out = cli("import", str(lines), "--out", str(tmp_path / "o"))
    assert code == 1 and f"{lines}:2: error: kube-scheduler-simulator recorder lines: a record is" in out


def test_validate_rejects_first_with_the_dumps_file_and_line(tmp_path: Path) -> None:
    d = dump()
    pod = next(o for o in d["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "batch-prep")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "six"
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(d))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "cpu: six" in text)
    code, out = cli("validate", str(path))
    assert code == 1 and f"{path}:{line}: error: Pod/ml/batch-prep:" in out
    with pytest.raises(KubetwinError):
        run([path], duration="1m")


def test_bad_remaining_run_time_flags_are_refused(tmp_path: Path) -> None:
    code, out = cli("import", str(DATA / "gke-kubectl.yaml"), "--out", str(tmp_path / "o"),
                    "--remaining-run-time", "train-llama")
    assert code == 1 and "want OWNER=DURATION" in out
    code, out = cli("import", str(DATA / "gke-kubectl.yaml"), "--out", str(tmp_path / "o"),
                    "--remaining-run-time", "job/train-llama=soon")
    assert code == 1 and "--remaining-run-time" in out


def test_a_list_over_3_mib_is_read_item_by_item(tmp_path: Path) -> None:
    """A kubectl List is not one request: `kubectl apply` sends its items one by one, so the API server's 3 MiB
    body limit applies to each item (a dump of a real cluster's pods is larger), while one object over it is still
    refused (tests/test_validate_hostile.py)."""
    d = dump()
    pod = next(o for o in d["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "batch-prep")
    d["items"] = [o for o in d["items"] if o["kind"] == "Namespace"]
    for i in range(1200):
        p = copy.deepcopy(pod)
        p["metadata"].update(name=f"w-{i}", uid=f"w-{i}")
        d["items"].append(p)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(d, indent=4))
    assert path.stat().st_size > 3 * 1024 * 1024
    manifests, report = import_sources.load([path])
    assert report is not None and report.kept["Pod"] == 1200
    pods = [m for m in manifests if m.kind == "Pod"]
    text = path.read_text().splitlines()
    assert '"name": "w-1199",' in text[pods[-1].line_of("metadata.name") - 1]  # each item keeps its own lines

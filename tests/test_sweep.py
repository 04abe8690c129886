"""kubetwin sweep (issue 21): patches, the Sweep kind and its validation, the backends (same bytes from each),
resume, failures, goals, export, the Indexed Job and the report."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import load_paths
from kubetwin.api.patch import PatchError, field_pointer, json_patch, strategic_merge
from kubetwin.cli.main import app
from kubetwin.sweep import cases, execute
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "examples" / "training-llama-8b-a3.yaml"


def _sweep(tmp_path: Path, **spec: object) -> Path:
    """A Sweep over the training example (copied next to it), 2 pool sizes x 2 scoring strategies, 2 seeds."""
    shutil.copy(BASE, tmp_path / "base.yaml")
    body = {"scenario": ["base.yaml"],
            "axes": [{"name": "nodes", "object": "NodePool/a3-high", "path": "spec.nodeCount", "values": [1, 2]},
                     {"name": "scoring", "object": "Scenario/training-llama-8b-a3", "path": "spec.scoringStrategy",
                      "values": ["LeastAllocated", "MostAllocated"]}],
            "seeds": [0, 1],
            "metrics": ["cost", "gpu_allocation", "pending_p99", "jct_p50", "jobs_unfinished",
                        {"name": "nodes_hours", "path": "cost.node_hours_by_pool.a3-high"}]}
    body.update(spec)
    f = tmp_path / "sweep.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "kubetwin.io/v1alpha1", "kind": "Sweep",
                                 "metadata": {"name": "a3-size"}, "spec": body}, sort_keys=False))
    return f


# ---- patches ----

def test_json_patch_rfc6902_operations() -> None:
    doc = {"spec": {"a": 1, "list": [1, 2], "m": {"x": "y"}}}
    out = json_patch(doc, [{"op": "replace", "path": "/spec/a", "value": 5},
                           {"op": "add", "path": "/spec/list/-", "value": 3},
                           {"op": "add", "path": "/spec/list/0", "value": 0},
                           {"op": "remove", "path": "/spec/m/x"},
                           {"op": "copy", "from": "/spec/a", "path": "/spec/b"},
                           {"op": "move", "from": "/spec/b", "path": "/spec/c"},
                           {"op": "test", "path": "/spec/c", "value": 5},
                           {"op": "add", "path": "/spec/a~1b", "value": True}])
    assert out == {"spec": {"a": 5, "list": [0, 1, 2, 3], "m": {}, "c": 5, "a/b": True}}
    assert doc["spec"]["a"] == 1  # the input is untouched
    with pytest.raises(PatchError, match="operation 0 \\(replace\\).*no field \"nope\""):
        json_patch(doc, [{"op": "replace", "path": "/spec/nope", "value": 1}])
    with pytest.raises(PatchError, match="test failed"):
        json_patch(doc, [{"op": "test", "path": "/spec/a", "value": 2}])
    with pytest.raises(PatchError, match="out of range"):
        json_patch(doc, [{"op": "add", "path": "/spec/list/5", "value": 1}])


def test_strategic_merge_merges_named_lists_and_deletes_nulls() -> None:
    cq = {"spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "on-demand", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]},
        {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}],
        "cohort": "x"}}
    flavors = {"flavors": [{"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 32}]},
                           {"name": "on-demand", "$patch": "delete"}]}
    out = strategic_merge(cq["spec"]["resourceGroups"][0], flavors)
    assert out["flavors"] == [{"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 32}]}]
    assert out["coveredResources"] == ["nvidia.com/gpu"]  # a list without a merge key: untouched when not patched
    assert strategic_merge(cq, {"spec": {"cohort": None}})["spec"].keys() == {"resourceGroups"}
    assert strategic_merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}  # plain lists are replaced


def test_field_pointer_resolves_named_items() -> None:
    cq = {"spec": {"resourceGroups": [{"flavors": [{"name": "a"}, {"name": "b", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}
    path = "spec.resourceGroups[0].flavors[name=b].resources[name=nvidia.com/gpu].nominalQuota"
    assert field_pointer(cq, path) == "/spec/resourceGroups/0/flavors/1/resources/0/nominalQuota"
    assert field_pointer(cq, "spec.newField") == "/spec/newField"  # the last step may be added
    with pytest.raises(PatchError, match="no item with name=c"):
        field_pointer(cq, "spec.resourceGroups[0].flavors[name=c].x")


# ---- the Sweep kind and validate ----

def test_validate_accepts_a_sweep_and_points_at_bad_axes(tmp_path: Path) -> None:
    good = _sweep(tmp_path)
    assert [d for d in validate(load_paths([good])) if d.severity == "error"] == []
    bad = _sweep(tmp_path, axes=[
        {"name": "nodes", "object": "NodePool/a4-missing", "path": "spec.nodeCount", "values": [1]},
        {"name": "typo", "object": "NodePool/a3-high", "path": "spec.nodes.count", "values": [1]},
        {"name": "neg", "object": "NodePool/a3-high", "path": "spec.nodeCount", "values": [2, -1]}],
        metrics=["cost", "no_such_metric"], goal={"minimize": "cost", "subjectTo": ["pending_p50 <= 1h"]})
    diags = [d for d in validate(load_paths([bad])) if d.severity == "error"]
    text = "\n".join(d.render() for d in diags)
    lines = bad.read_text().splitlines()
    by_field = {d.field: d for d in diags}
    assert 'Not found: "NodePool/a4-missing"' in by_field["spec.axes[0].object"].message
    assert "a4-missing" in lines[by_field["spec.axes[0].object"].line - 1]
    assert 'no field "nodes"' in by_field["spec.axes[1].path"].message
    assert "neg=-1 makes NodePool/a3-high invalid: spec.nodeCount" in by_field["spec.axes[2].values[1]"].message
    assert "spec.axes[2].values[0]" not in by_field
    assert '"no_such_metric": not a named metric' in by_field["spec.metrics[1]"].message
    assert '"pending_p50": not one of the sweep\'s metrics' in by_field["spec.goal.subjectTo[0]"].message
    assert str(bad) in text
    result = CliRunner().invoke(app, ["validate", str(bad)])
    assert result.exit_code == 1 and "a4-missing" in result.output


# ---- running ----

def test_sweep_runs_every_case_and_seed_in_process(tmp_path: Path) -> None:
    plan = cases.plan(_sweep(tmp_path))
    out = execute.execute(plan, tmp_path / "out", jobs=1)
    assert (out.ran, out.skipped, out.failed) == (8, 0, [])
    rows = {(r["case"], r["seed"]): r for r in out.rows}
    assert list(rows) == [(f"c000{i}", s) for i in range(4) for s in (0, 1)]
    assert rows[("c0002", 0)]["nodes"] == 2 and rows[("c0001", 1)]["scoring"] == "MostAllocated"
    # a 16-GPU job on one 8-GPU node never starts; on two it finishes; two nodes cost twice one
    assert rows[("c0000", 0)]["jobs_unfinished"] == 1 and rows[("c0000", 0)]["jct_p50"] is None
    assert rows[("c0002", 0)]["jobs_unfinished"] == 0 and rows[("c0002", 0)]["jct_p50"] > 3600
    assert rows[("c0002", 0)]["cost"] == pytest.approx(2 * rows[("c0000", 0)]["cost"], rel=1e-3)
    assert rows[("c0002", 0)]["nodes_hours"] == pytest.approx(2 * rows[("c0000", 0)]["nodes_hours"], rel=1e-3)
    csv = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert csv[0] == "case,seed,nodes,scoring,cost,gpu_allocation,pending_p99,jct_p50,jobs_unfinished,nodes_hours,error"
    assert len(csv) == 9
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "results.parquet")
    assert table.num_rows == 8 and str(table.schema.field("nodes").type) == "int64"


def test_sweep_resumes_and_refuses_another_sweeps_folder(tmp_path: Path) -> None:
    f = _sweep(tmp_path, seeds=[0])
    plan = cases.plan(f)
    first = execute.execute(plan, tmp_path / "out", jobs=1)
    before = (tmp_path / "out" / "results.csv").read_bytes()
    (tmp_path / "out" / "cases" / "c0003-s0.json").unlink()
    again = execute.execute(plan, tmp_path / "out", jobs=1)
    assert (first.ran, again.ran, again.skipped) == (4, 1, 3)
    assert (tmp_path / "out" / "results.csv").read_bytes() == before
    other = cases.plan(_sweep(tmp_path, seeds=[5]))
    with pytest.raises(KubetwinError, match="results of a different sweep"):
        execute.execute(other, tmp_path / "out", jobs=1)


def test_a_failing_case_is_reported_and_the_others_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kubetwin.runner as runner

    real = runner.run

    def flaky(*args, **kwargs):  # the 1-node cases fail as a bug in the twin would
        pool = next(m for m in kwargs["manifests"] if m.kind == "NodePool")
        if pool.obj["spec"]["nodeCount"] == 1:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "run", flaky)
    out = execute.execute(cases.plan(_sweep(tmp_path, seeds=[0])), tmp_path / "out", jobs=1)
    assert [r["case"] for r in out.failed] == ["c0000", "c0001"]
    assert out.failed[0]["error"].startswith("RuntimeError: boom at test_sweep.py:")
    assert [r["cost"] is not None for r in out.rows] == [False, False, True, True]
    row = (tmp_path / "out" / "results.csv").read_text().splitlines()[1]
    assert row.startswith("c0000,0,1,LeastAllocated,,,,,,,RuntimeError: boom")


def test_process_pool_gives_the_same_bytes_as_one_process(tmp_path: Path) -> None:
    f = _sweep(tmp_path)
    one = execute.execute(cases.plan(f), tmp_path / "one", jobs=1)
    pool = execute.execute(cases.plan(f), tmp_path / "pool", jobs=2)
    assert one.ran == pool.ran == 8
    assert (tmp_path / "one" / "results.csv").read_bytes() == (tmp_path / "pool" / "results.csv").read_bytes()
    assert (tmp_path / "one" / "results.parquet").read_bytes() == (tmp_path / "pool" / "results.parquet").read_bytes()


@pytest.fixture
def local_ray():
    """A local Ray on loopback only (2 CPUs, no dashboard), shut down after the test."""
    from kubetwin.sweep.backends import ray_available

    if not ray_available():
        pytest.skip("ray is not importable: pip install 'kubetwin[ray]'")
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_gives_the_same_bytes_as_the_process_pool(tmp_path: Path, local_ray) -> None:
    f = _sweep(tmp_path)
    execute.execute(cases.plan(f), tmp_path / "pool", jobs=2)
    on_ray = execute.execute(cases.plan(f), tmp_path / "ray", backend="ray", jobs=2)
    assert on_ray.ran == 8 and not on_ray.failed
    assert local_ray.cluster_resources().get("CPU") == 2.0  # ran on the fixture's loopback Ray
    assert (tmp_path / "pool" / "results.csv").read_bytes() == (tmp_path / "ray" / "results.csv").read_bytes()

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
from kubetwin.catalog import storage as catalog_storage
from kubetwin.cli.main import app
from kubetwin.sweep import cases, execute
from kubetwin.validation.validate import validate

pytestmark = pytest.mark.slow  # whole runs or processes: make test-fast leaves them out

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
    # the command line: --ray on the Ray this process already runs (the command starts one only when none is)
    result = CliRunner().invoke(app, ["sweep", str(f), "--out", str(tmp_path / "cli"), "--ray", "--jobs", "2",
                                      "--no-report"])
    assert result.exit_code == 0, result.output
    assert "8 cases and seeds: 8 run, 0 already done, 0 failed" in result.output
    assert (tmp_path / "cli" / "results.csv").read_bytes() == (tmp_path / "ray" / "results.csv").read_bytes()


# ---- search strategies ----

def test_random_and_bayesian_search_pick_the_same_cases_on_any_backend(tmp_path: Path) -> None:
    f = _sweep(tmp_path, seeds=[0], search={"strategy": "random", "budget": 3, "seed": 7})
    rnd = execute.execute(cases.plan(f), tmp_path / "rnd", jobs=1)
    assert len(rnd.rows) == 3 and len({r["case"] for r in rnd.rows}) == 3
    again = execute.execute(cases.plan(f), tmp_path / "rnd2", jobs=2)
    assert [r["case"] for r in again.rows] == [r["case"] for r in rnd.rows]
    goal = {"minimize": "cost", "subjectTo": ["jobs_unfinished <= 0"]}
    bay = _sweep(tmp_path, seeds=[0], search={"strategy": "bayesian", "budget": 3, "batch": 2}, goal=goal)
    one = execute.execute(cases.plan(bay), tmp_path / "bay1", jobs=1)
    two = execute.execute(cases.plan(bay), tmp_path / "bay2", jobs=2)
    assert [r["case"] for r in two.rows] == [r["case"] for r in one.rows]
    assert 1 <= len(one.rows) <= 3 and not one.failed
    assert (tmp_path / "bay1" / "results.csv").read_bytes() == (tmp_path / "bay2" / "results.csv").read_bytes()
    no_goal = _sweep(tmp_path, search={"strategy": "bayesian", "budget": 3})
    with pytest.raises(KubetwinError, match="a Bayesian search needs spec.goal"):
        cases.plan(no_goal)


# ---- goals, export, report ----

def test_goal_answer_export_and_report(tmp_path: Path) -> None:
    f = _sweep(tmp_path, goal={"minimize": "cost", "subjectTo": ["jobs_unfinished <= 0", "pending_p99 <= 10m"]})
    result = CliRunner().invoke(app, ["sweep", str(f), "--out", str(tmp_path / "out"), "--jobs", "1",
                                      "--keep-runs", "--export", str(tmp_path / "best")])
    assert result.exit_code == 0, result.output
    # one node cannot hold the 16-GPU job: the cheapest feasible case is two nodes (either scoring strategy,
    # the first case wins a tie)
    assert "best feasible case: c0002 (nodes=2, scoring=LeastAllocated): cost 1057.46" in result.output
    assert "2 of 4 cases feasible" in result.output
    assert "Pareto front: cost against jobs_unfinished" in result.output
    exported = tmp_path / "best" / "base.yaml"
    assert exported.is_file() and "case c0002: nodes=2, scoring=LeastAllocated" in exported.read_text()
    assert [d for d in validate(load_paths([exported])) if d.severity == "error"] == []
    diff = (tmp_path / "best" / "diff.patch").read_text()
    assert "+  scoringStrategy: LeastAllocated" in diff and "nodeCount" not in diff  # the base has 2 nodes already
    report = (tmp_path / "out" / "report.html").read_text()
    assert "best feasible case: <b>c0002</b>" in report
    assert "href='runs/c0002-s1/report.html'" in report and (tmp_path / "out" / "runs" / "c0002-s1" /
                                                             "report.html").is_file()
    assert report.count("<svg") == 2 + 6 * 2  # two Pareto fronts, six metrics against two axes
    from kubetwin.sweep import goals

    plan = cases.plan(f)
    ans = goals.answer(plan, execute.execute(plan, tmp_path / "out", jobs=1).rows)  # resumed: nothing runs
    assert ans is not None and [c["case"] for c in ans.fronts["pending_p99"]] == ["c0000", "c0002"]
    infeasible = _sweep(tmp_path, goal={"minimize": "cost", "subjectTo": ["cost <= 10"]})
    result = CliRunner().invoke(app, ["sweep", str(infeasible), "--out", str(tmp_path / "out2"), "--jobs", "1",
                                      "--export", str(tmp_path / "none")])
    assert result.exit_code == 1 and "no feasible case" in result.output


# ---- the Indexed Job ----

def test_emitted_indexed_job_runs_the_same_cases(tmp_path: Path) -> None:
    f = _sweep(tmp_path, seeds=[0])
    job = tmp_path / "job.yaml"
    result = CliRunner().invoke(app, ["sweep", str(f), "--emit-job", str(job), "--jobs", "2"])
    assert result.exit_code == 0, result.output
    objs = list(yaml.safe_load_all(job.read_text()))
    assert [d for d in validate(load_paths([job])) if d.severity == "error"] == []
    cm, pvc, indexed = objs
    assert indexed["spec"]["completionMode"] == "Indexed" and indexed["spec"]["completions"] == 4
    assert indexed["spec"]["parallelism"] == 2 and pvc["kind"] == "PersistentVolumeClaim"
    # every index writes to the claim at once: ReadWriteMany, which on GKE only a Filestore class gives (a PD's CSI
    # driver refuses a multi-writer filesystem, catalog.storage)
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    default = catalog_storage.storage_class(catalog_storage.GKE_DEFAULT_CLASS, None) or {}
    assert catalog_storage.provisioning_error(default["provisioner"], ["ReadWriteMany"], "Filesystem") is not None
    assert pvc["spec"]["storageClassName"] == "standard-rwx"  # GKE's Filestore CSI driver's Basic HDD class
    # what each pod sees: the ConfigMap's files under /sweep, one --index per completion
    mount = tmp_path / "mount"
    for item in indexed["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"]:
        (mount / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (mount / item["path"]).write_text(cm["data"][item["key"]])
    script = indexed["spec"]["template"]["spec"]["containers"][0]["command"][2]
    sweep_in_pod = mount / script.split()[2].removeprefix("/sweep/")
    results = tmp_path / "results"
    for i in range(4):
        r = CliRunner().invoke(app, ["sweep", str(sweep_in_pod), "--out", str(results), "--index", str(i)])
        assert r.exit_code == 0, r.output
    collect = CliRunner().invoke(app, ["sweep", str(sweep_in_pod), "--out", str(results), "--jobs", "1"])
    assert "4 run, " not in collect.output and "0 run, 4 already done" in collect.output
    local = execute.execute(cases.plan(f), tmp_path / "local", jobs=1)
    assert local.ran == 4
    assert (results / "results.csv").read_bytes() == (tmp_path / "local" / "results.csv").read_bytes()


# ---- constraints over seeds ----

def _rows(per_case: dict[str, list[tuple[float, float]]]) -> list[dict]:
    """Result rows: case id -> [(cost, jct_p50) per seed]; the other metrics fixed."""
    out = []
    for case, seeds in per_case.items():
        i = int(case[1:])
        for seed, (cost, jct) in enumerate(seeds):
            out.append({"case": case, "seed": seed, "nodes": [1, 2][i // 2],
                        "scoring": ["LeastAllocated", "MostAllocated"][i % 2], "cost": cost, "jct_p50": jct,
                        "gpu_allocation": 50.0, "pending_p99": 0.0, "jobs_unfinished": 0, "nodes_hours": 1.0,
                        "error": ""})
    return out


# c0000 is cheapest and meets jct_p50 <= 3h on the mean over its seeds, but one seed takes 4h; c0001 meets it in
# every seed; c0002 meets it at p50 only
ROWS = {"c0000": [(100.0, 7200.0), (100.0, 14400.0)], "c0001": [(150.0, 9000.0), (150.0, 9000.0)],
        "c0002": [(120.0, 3600.0), (120.0, 18000.0)], "c0003": [(90.0, 20000.0), (90.0, 20000.0)]}


@pytest.mark.parametrize(("goal", "best"), [
    ({"subjectTo": ["jct_p50 <= 3h"]}, "c0001"),  # default: every seed meets it
    ({"subjectTo": ["jct_p50 <= 3h"], "overSeeds": "all"}, "c0001"),
    ({"subjectTo": ["jct_p50 <= 3h"], "overSeeds": "mean"}, "c0000"),  # (2h + 4h) / 2 = 3h
    ({"subjectTo": [{"constraint": "jct_p50 <= 3h", "overSeeds": "mean"}]}, "c0000"),
    ({"subjectTo": [{"constraint": "jct_p50 <= 3h", "overSeeds": "min"}]}, "c0000"),
    ({"subjectTo": [{"constraint": "jct_p50 <= 3h", "overSeeds": "p50"}]}, "c0000"),  # nearest rank: the lower
    ({"subjectTo": [{"constraint": "jct_p50 <= 3h", "overSeeds": "p90"}]}, "c0001"),
    ({"subjectTo": [{"constraint": "jct_p50 <= 3h", "overSeeds": "max"}]}, "c0001"),
    ({"subjectTo": [{"constraint": "jct_p50 <= 3h"}], "overSeeds": "median"}, "c0000"),  # median of 2h, 4h = 3h
])
def test_constraints_are_judged_over_seeds_as_the_sweep_says(tmp_path: Path, goal: dict, best: str) -> None:
    from kubetwin.sweep import goals

    plan = cases.plan(_sweep(tmp_path, goal={"minimize": "cost", **goal}))
    ans = goals.answer(plan, _rows(ROWS))
    assert ans is not None and ans.best is not None and ans.best["case"] == best


def test_the_winner_is_shown_seed_by_seed_in_the_cli_and_the_report(tmp_path: Path) -> None:
    from kubetwin.cli import sweep as cli_sweep
    from kubetwin.sweep import goals
    from kubetwin.sweep.report import render

    plan = cases.plan(_sweep(tmp_path, goal={"minimize": "cost", "subjectTo": ["jct_p50 <= 3h"]}))
    rows = _rows(ROWS)
    with cli_sweep.console.capture() as cap:
        cli_sweep._print_answer(plan, rows)
    text = cap.get()
    assert "subject to jct_p50 <= 3h in every seed" in text
    assert "c0001 seed by seed" in text and "seed 0" in text and "seed 1" in text
    assert "jct_p50 <= 3h in every seed" in text and "9000" in text
    page = render(plan, tmp_path, rows, goals.answer(plan, rows))
    assert "<caption>c0001 seed by seed</caption>" in page
    # durations as a person writes them (9000 s is 2h30m), the number itself in the cell's tooltip; money in $
    seconds = "".join(["<td title='9000.0'>2h30m</td>"] * 3)  # seed 0, seed 1, judged
    assert f"<td>jct_p50 &lt;= 3h in every seed</td>{seconds}<td>yes</td>" in page
    usd = "".join(["<td title='150.0'>$150.00</td>"] * 3)
    assert f"<td>cost (objective, mean over seeds)</td>{usd}<td></td>" in page


def test_a_bad_over_seeds_is_refused_at_validate(tmp_path: Path) -> None:
    f = _sweep(tmp_path, goal={"minimize": "cost", "subjectTo": [{"constraint": "cost <= 5", "overSeeds": "p100"}]})
    with pytest.raises(KubetwinError, match="overSeeds"):
        cases.plan(f)

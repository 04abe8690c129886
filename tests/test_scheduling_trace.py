"""The scheduling trace (`--trace-scheduling`) and `kubetwin explain pod|workload`: the per-plugin verdicts, computed
the scalar way, agree with what the vectorized scheduler decided and with the messages it wrote; Kueue's flavor
attempts carry the Pending condition's words; tracing changes no decision."""

from __future__ import annotations

import filecmp
import json
import re
from pathlib import Path

import pytest
from conftest import RUNNABLE, SHORT_DURATION, missing_shared_trace, with_namespaces
from typer.testing import CliRunner

from kubetwin.cli.explain import podset_message
from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.scheduler.fiterror import fit_error
from kubetwin.scheduler.trace import passed_all, reason_counts
from kubetwin.sim.trace import FILE, read

ROOT = Path(__file__).resolve().parents[1]


def _events(out: Path, reason: str, kind: str) -> list[tuple[float, str, str]]:
    found = []
    with (out / "events.jsonl").open() as f:
        for line in f:
            rec = json.loads(line)
            o = rec["object"]
            if rec["type"] == "DELETED":  # the API server's deletion an hour after the last write
                continue
            if o.get("reason") == reason and o["involvedObject"]["kind"] == kind:
                ref = o["involvedObject"]
                found.append((rec["t"], f"{ref.get('namespace') or 'default'}/{ref['name']}", o["message"]))
    return found


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
@pytest.mark.slow
def test_the_trace_agrees_with_the_scheduler(path: Path, tmp_path: Path) -> None:
    """Every FailedScheduling has its attempt in the trace, whose per-node Filter verdicts (scalar plugins) count
    exactly the message's "0/N nodes are available: ..." reasons; every bound attempt's nodes that pass every
    Filter are the feasible nodes the vectorized path found, and the chosen node has the top total score."""
    if not path.exists() or missing_shared_trace(path):
        pytest.skip(f"{path.name}: needs ../shared")
    out = tmp_path / "run"
    run(with_namespaces(path), out=out, duration=SHORT_DURATION.get(path.name), trace_scheduling=True)
    pods = [r for r in read(out / FILE) if r["kind"] == "Pod"]
    failed = [r for r in pods if not r["selectedNode"]]
    assert [(r["t"], r["pod"], r["message"]) for r in failed] == _events(out, "FailedScheduling", "Pod")
    for r in failed:
        if r["filter"]:  # a PreFilter rejection has no per-node table
            assert r["message"].startswith(fit_error(r["numNodes"], reason_counts(r["filter"]))), r["pod"]
            assert sum(len(e["nodes"]) for e in r["filter"]) == r["numNodes"]
    bound = [r for r in pods if r["selectedNode"]]
    scheduled = _events(out, "Scheduled", "Pod")
    assert [(r["t"], r["pod"]) for r in bound] == [(t, key) for t, key, _ in scheduled]
    for r in bound:
        assert {n for e in r["filter"] if passed_all(e) for n in e["nodes"]} == set(r["feasibleNodes"]), r["pod"]
        assert r["selectedNode"] in r["feasibleNodes"]
        if not r["selectedBy"]:  # default scoring: selectHost takes a node with the top total
            assert max(e["total"] for e in r["score"]) == next(e["total"] for e in r["score"]
                                                               if r["selectedNode"] in e["nodes"])


@pytest.mark.parametrize("pod", ["default/training-job", "research/exp-23-h100-ts6zk"])
def test_explain_pod_prints_the_failed_attempts_counts(pod: str, tmp_path: Path) -> None:
    """The demo: the seed's Pod (Pending until the GPU pools are up) and a research pod (Pending behind others, then
    preempting): the attempt prints its Filter table, whose reasons make the FailedScheduling message."""
    out = tmp_path / "run"
    run([ROOT / "src" / "kubetwin" / "scenarios" / "demo"], out=out, duration="7h", trace_scheduling=True)
    failed = [r for r in read(out / FILE) if r["kind"] == "Pod" and r["pod"] == pod and not r["selectedNode"]
              and r["filter"]]
    r = failed[-1]
    assert r["message"].startswith(fit_error(r["numNodes"], reason_counts(r["filter"])))
    ns, name = r["pod"].split("/")
    res = CliRunner().invoke(app, ["explain", "pod", name, "-n", ns, "--run", str(out), "--at", f"{r['t']:g}s"])
    assert res.exit_code == 0, res.output
    assert f"FailedScheduling: {r['message']}" in res.output
    for entry in r["filter"]:
        for node in entry["nodes"]:
            row = next(line for line in res.output.splitlines() if line.strip().startswith(node))
            for v in entry["filter"]:
                assert (v.get("status") or ", ".join(v["reasons"])) in row
    if pod.startswith("research/"):  # it preempts two lower-priority pods on the H100 node
        victims = next(c["victims"] for c in r["postFilter"]["candidates"] if c["node"] == r["postFilter"][
            "nominatedNode"])
        assert len(victims) == 2 and f"victims {', '.join(victims)}" in res.output
    upto = sum(1 for a in read(out / FILE) if a["kind"] == "Pod" and a["pod"] == r["pod"] and a["t"] <= r["t"])
    assert f"Pod {r['pod']}: {upto} scheduling attempt(s)" in res.output
    assert re.search(rf"^Attempt 1 of {upto} at .*, scheduling cycle \d+\): ", res.output, re.M)
    missing = CliRunner().invoke(app, ["explain", "pod", "nope", "--run", str(out)])
    assert missing.exit_code == 1 and 'pod "default/nope" has no scheduling attempts' in missing.output


@pytest.mark.parametrize("name", ["kueue-cohort-borrowing.yaml", "kueue-wait-for-pods-ready.yaml"])
def test_explain_workload_names_the_pending_conditions_reasons(name: str, tmp_path: Path) -> None:
    """Each cycle that left a Workload pending wrote its QuotaReserved=False condition with the message the trace
    holds; `explain workload` (by the owner Job's name) prints each pod set's reasons in the same words."""
    out = tmp_path / "run"
    run([ROOT / "examples" / name], out=out, trace_scheduling=True)
    records = [r for r in read(out / FILE) if r["kind"] == "Workload"]
    assert records
    pending = _events(out, "Pending", "Workload")
    for t, key, message in pending:
        assert any(r["t"] == t and r["workload"] == key and r["message"] == message for r in records), message
    for r in records:
        if r["outcome"] in ("Pending", "Preempting") and r["mode"] != "Fit":
            parts = [podset_message(ps) for ps in r["podSets"] if ps["reasons"] or ps["error"]]
            assert r["message"].startswith("; ".join(parts))
    if name.startswith("kueue-cohort"):
        preempting = next(r for r in records if r["outcome"] == "Preempting")
        assert {t["reason"] for t in preempting["targets"]} == {"InCohortReclamation"}
        wl_ns, wl_name = preempting["workload"].split("/")
        owner = next(json.loads(line)["object"]["metadata"]["ownerReferences"][0]["name"]
                     for line in (out / "history.jsonl").open() if f'"name":"{wl_name}"' in line)
        res = CliRunner().invoke(app, ["explain", "workload", owner, "-n", wl_ns, "--run", str(out)])
        assert res.exit_code == 0, res.output
        assert "mode Preempt -> Preempting (WaitingForPreemptedWorkloads)" in res.output
        # numbered among the Workload's own cycles, Kueue's counter beside (issue 35 item 7)
        own = [r for r in records if r["workload"] == preempting["workload"]]
        assert re.findall(r"^Cycle (\d+) of (\d+) at .*Kueue cycle (\d+)\)", res.output, re.M) == [
            (str(i), str(len(own)), str(r["cycle"])) for i, r in enumerate(own, start=1)]
        assert "insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed" in res.output
        assert "(ClusterQueue research): InCohortReclamation" in res.output
        assert f"message: {preempting['message']}" in res.output


@pytest.mark.parametrize("path", [ROOT / "examples" / "kueue-cohort-borrowing.yaml",
                                  ROOT / "src" / "kubetwin" / "scenarios" / "dra",
                                  ROOT / "src" / "kubetwin" / "scenarios" / "gpu-sharing"], ids=lambda p: p.name)
@pytest.mark.slow
def test_tracing_changes_no_decision(path: Path, tmp_path: Path) -> None:
    plain, traced = tmp_path / "off" / "run", tmp_path / "on" / "run"  # one folder name: report.html's title
    run([path], out=plain, duration="2h")
    run([path], out=traced, duration="2h", trace_scheduling=True)
    off, on = sorted(p.name for p in plain.iterdir()), sorted(p.name for p in traced.iterdir())
    assert sorted([*off, FILE]) == on
    match, mismatch, errors = filecmp.cmpfiles(plain, traced, off, shallow=False)
    assert (mismatch, errors) == ([], [])
    assert (traced / FILE).stat().st_size > 0


def test_the_scenario_field_turns_tracing_on(tmp_path: Path) -> None:
    from conftest import write_yaml
    from k8s_builders import make_pod, make_pool, make_scenario

    spec = write_yaml(tmp_path / "s.yaml", [make_scenario("1h").spec(traceScheduling=True).obj(),
                                            make_pool("l4", "g2-standard-4", 1).gpus("nvidia-l4", 1).obj(),
                                            make_pod("big").gpus(2).create_at("10m").obj()])
    out = tmp_path / "run"
    run([spec], out=out)
    (r,) = [r for r in read(out / FILE) if r["kind"] == "Pod"][:1]
    assert r["pod"] == "default/big"
    assert r["message"].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu")


def test_explain_without_a_trace_says_how_to_get_one(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run([ROOT / "examples" / "kueue-cohort-borrowing.yaml"], out=out, duration="10m")
    for kind in ("pod", "workload"):
        res = CliRunner().invoke(app, ["explain", kind, "x", "--run", str(out)])
        assert res.exit_code == 1 and "kubetwin run --trace-scheduling" in res.output, res.output


def _kueue_objects() -> list[dict]:
    """One ClusterQueue with two GPU flavors: spot (its nodes tainted, the Job does not tolerate it) and on-demand
    (8 GPUs of nominal quota, no cohort to borrow from); a Job asks for 16 GPUs, one for 4."""
    def flavor(name: str, **spec: object) -> dict:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
                "spec": spec}

    def job(name: str, gpus: int) -> dict:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"parallelism": 1, "completions": 1, "template": {
                "metadata": {"annotations": {"kubetwin.io/duration": "1h"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "resources": {
                    "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}

    quota = [{"name": "nvidia.com/gpu", "nominalQuota": 8}]
    return [
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
         "spec": {"duration": "30m", "report": ["summary"], "traceScheduling": True}},
        flavor("spot", nodeTaints=[{"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"}]),
        flavor("on-demand"),
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "spot", "resources": quota}, {"name": "on-demand", "resources": quota}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "main",
                                                                                    "namespace": "default"},
         "spec": {"clusterQueue": "cq"}},
        job("big", 16), job("small", 4)]


def test_explain_workload_gives_each_flavors_reason(tmp_path: Path) -> None:
    """The tainted flavor and the one without enough quota each carry Kueue's reason; the Workload's Pending
    condition is those reasons in the same words, and `explain workload big` prints them; the small Job fits the
    second flavor."""
    out = tmp_path / "run"
    run(objects=_kueue_objects(), out=out)
    records = [r for r in read(out / FILE) if r["kind"] == "Workload"]
    big = next(r for r in records if r["workload"].startswith("default/job-big-"))
    (ps,) = big["podSets"]
    attempts = {a["flavor"]: a for a in ps["attempts"]}
    assert attempts["spot"]["reasons"] == ["untolerated taint cloud.google.com/gke-spot=true:NoSchedule in flavor spot"]
    assert attempts["on-demand"]["mode"] == "NoFit" and attempts["on-demand"]["reasons"] == [
        "insufficient quota for nvidia.com/gpu in flavor on-demand, previously considered podsets requests (0) + "
        "current podset request (16) > maximum capacity (8)"]
    assert (big["mode"], big["outcome"], big["reason"]) == ("NoFit", "Pending", "ExceedsMaxQuota")
    pending = [m for t, key, m in _events(out, "Pending", "Workload") if key == big["workload"]]
    assert pending == [big["message"]] == [podset_message(ps)]
    small = next(r for r in records if r["workload"].startswith("default/job-small-"))
    assert small["outcome"] == "Admitted" and small["podSets"][0]["flavors"]["nvidia.com/gpu"]["flavor"] == "on-demand"
    res = CliRunner().invoke(app, ["explain", "workload", "big", "--run", str(out)])
    assert res.exit_code == 0, res.output
    assert "mode NoFit -> Pending (ExceedsMaxQuota)" in res.output
    assert f"message: {big['message']}" in res.output
    for reason in (*attempts["spot"]["reasons"], *attempts["on-demand"]["reasons"]):
        assert reason in res.output


def test_trace_scheduling_must_be_a_boolean(tmp_path: Path) -> None:
    from kubetwin.api.errors import KubetwinError

    objs = _kueue_objects()
    objs[0]["spec"]["traceScheduling"] = "sometimes"
    with pytest.raises(KubetwinError, match="traceScheduling"):
        run(objects=objs)

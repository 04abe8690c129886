"""Run-time distributions per owner (`--runtime OWNER=DIST`, kubetwin.importer.runtime; issue 36 item 3): parsed
with clear errors, drawn given how long a pod has run, applied by the import's one rule for run times (convert's
`remaining`, its pending pods and its Jobs' templates), drawn again per seed so `simulate --runs` spreads over them;
and imported pending Workloads queue ahead of the incoming one whatever the seed (their creation time kept)."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest
import yaml
from conftest import load_script
from typer.testing import CliRunner

from kubetwin.api.errors import KubetwinError
from kubetwin.cli.main import app
from kubetwin.importer import sources
from kubetwin.importer.convert import Options
from kubetwin.importer.runtime import Rule, parse_dist, parse_rules, rng
from kubetwin.k8s.units import parse_duration

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "tests" / "data" / "import" / "gke-kubectl.yaml"
bench = load_script(ROOT / "benchmarks" / "bench_simulate_calibration.py")


@pytest.mark.parametrize(("text", "kind", "mean"), [
    ("1h", "fixed", 3600.0), ("fixed:90s", "fixed", 90.0), ("exp:mean=30m", "exp", 1800.0),
    ("uniform:min=10m,max=30m", "uniform", 1200.0),
    ("lognormal:median=1h,sigma=0.5", "lognormal", 3600 * math.exp(0.125)),
    ("lognormal:mean=1h,sigma=0.5", "lognormal", 3600.0)])
def test_the_forms_parse_to_their_means(text: str, kind: str, mean: float) -> None:
    d = parse_dist(text)
    assert d.kind == kind and d.mean() == pytest.approx(mean)
    draws = [d.draw(rng(0, str(i))) for i in range(4000)]
    assert statistics.fmean(draws) == pytest.approx(mean, rel=0.05)


def test_empirical_reads_a_file_and_says_where_it_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "runs.txt").write_text("# past runs of job/eval\n10m\n20m\n1800\n")
    d = parse_dist(f"empirical:{tmp_path / 'runs.txt'}")
    assert d.values == (600.0, 1200.0, 1800.0)
    assert {d.draw(rng(1, str(i))) for i in range(50)} == {600.0, 1200.0, 1800.0}
    assert {d.draw(rng(1, str(i)), ran=900) for i in range(50)} == {1200.0, 1800.0}  # the tail past what it ran
    assert d.draw(rng(1, "x"), ran=4000) == 4000  # past every value: it ends at once
    (tmp_path / "bad.txt").write_text("10m\nsoon\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: not a duration: 'soon'"):
        parse_dist(f"empirical:{tmp_path / 'bad.txt'}")


def test_a_running_pod_draws_given_how_long_it_ran() -> None:
    """The lognormal's inverse transform from F(ran) up is the distribution conditioned on lasting past `ran`: its
    mean is the mean of unconditioned draws that exceed `ran` (rejection sampling); the exponential's rest is
    memoryless; a fixed time already past ends at once."""
    d = parse_dist("lognormal:median=20m,sigma=0.6")
    ran = 1800.0
    ours = [d.draw(rng(2, str(i)), ran) for i in range(6000)]
    assert min(ours) >= ran
    r = random.Random(3)
    kept = [x for x in (math.exp(d.a + d.b * r.gauss(0, 1)) for _ in range(200000)) if x > ran]
    assert statistics.fmean(ours) == pytest.approx(statistics.fmean(kept), rel=0.03)
    assert statistics.fmean(ours) > ran + 0.3 * d.mean()  # not a draw from scratch cut at `ran`
    e = parse_dist("exp:mean=10m")
    assert statistics.fmean(e.draw(rng(4, str(i)), 3600) - 3600 for i in range(6000)) == pytest.approx(600, rel=0.05)
    assert parse_dist("fixed:10m").draw(rng(0, "x"), 900) == 900


@pytest.mark.parametrize(("value", "message"), [
    ("job/x", "want OWNER=DIST"), ("a/b/c/d=1h", "want OWNER=DIST"),
    ("job/x=gamma:k=2", "unknown distribution 'gamma'"),
    ("job/x=lognormal:median=1h", "lognormal takes mean, median, sigma; missing: sigma"),
    ("job/x=lognormal:median=1h,sigma=wide", "lognormal's sigma must be a number"),
    ("job/x=lognormal:median=1h,mean=1h,sigma=1", "exactly one of median= and mean="),
    ("job/x=exp:mean=0s", "mean must be greater than 0"), ("job/x=exp:rate=2", "exp takes mean; unknown: rate"),
    ("job/x=uniform:min=2h,max=1h", "uniform's min (2h) is above its max (1h)"),
    ("job/x=empirical:/nonexistent/runs.txt", "cannot read the run times file")])
def test_bad_rules_say_what_is_wrong(value: str, message: str) -> None:
    with pytest.raises(KubetwinError) as exc:
        parse_rules([value])
    (d,) = exc.value.diagnostics
    assert d.field == "--runtime" and message in d.message and d.hint.startswith("e.g. --runtime")


def test_owner_patterns() -> None:
    rules = parse_rules(["ml/Job/train-*=1h", "job/eval=2h", "*=3h"])
    assert [r.owner for r in rules] == ["ml/job/train-*", "job/eval", "*"]
    ml, ev, star = rules
    assert ml.matches("Job", ["ml/job/train-llama", "job/train-llama"])
    assert not ml.matches("Job", ["research/job/train-llama", "job/train-llama"])
    assert ev.matches("Job", ["ml/job/eval", "job/eval"]) and not ev.matches("Job", ["ml/job/eval2", "job/eval2"])
    assert star.matches("Job", ["a/job/x", "job/x"]) and star.matches(None, ["a/pod/x", "pod/x"])
    assert not star.matches("ReplicaSet", ["a/replicaset/web-1", "replicaset/web-1"])  # servers run until stopped
    assert Rule("deployment/web", parse_dist("1h")).matches("ReplicaSet", ["a/replicaset/web-1", "deployment/web"])


def _pods(manifests: list, prefix: str) -> dict[str, dict]:
    return {m.obj["metadata"]["name"]: m.obj for m in manifests
            if m.kind == "Pod" and m.obj["metadata"]["name"].startswith(prefix)}


def test_the_import_draws_running_pods_run_times_per_seed() -> None:
    """The running train-llama pods run a drawn time at least as long as they have run (their kubetwin.io/elapsed),
    the same for the same seed, another for another; Report.draw redraws in place; the llm-server's pods (a
    ReplicaSet's) are not `*`'s."""
    rules = parse_rules(["*=lognormal:median=2h,sigma=0.8"])

    def durations(seed: int) -> dict[str, float]:
        manifests, report = sources.load([DUMP], Options(runtime=rules, seed=seed))
        assert report is not None and any("draw their run time from the distribution --runtime" in line
                                          for line in report.lines())
        pods = _pods(manifests, "train-llama-")
        assert len(pods) == 2
        for p in pods.values():
            ann = p["metadata"]["annotations"]
            assert parse_duration(ann["kubetwin.io/duration"]) >= parse_duration(ann["kubetwin.io/elapsed"]) > 0
        assert all("kubetwin.io/duration" not in (p["metadata"].get("annotations") or {})
                   for p in _pods(manifests, "llm-server-").values())
        return {n: parse_duration(p["metadata"]["annotations"]["kubetwin.io/duration"]) for n, p in pods.items()}

    assert durations(0) == durations(0)
    assert durations(0) != durations(1)
    manifests, report = sources.load([DUMP], Options(runtime=rules, seed=0))
    assert report is not None
    report.draw(1)
    assert {n: parse_duration(p["metadata"]["annotations"]["kubetwin.io/duration"])
            for n, p in _pods(manifests, "train-llama-").items()} == durations(1)


def test_import_takes_runtime_and_seed(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["import", str(DUMP), "--out", str(tmp_path), "--runtime",
                                   "ml/job/train-*=exp:mean=1h", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert "bound pods draw their run time from the distribution --runtime gives their owner" in res.output
    bad = CliRunner().invoke(app, ["import", str(DUMP), "--out", str(tmp_path / "b"), "--runtime", "job/x=soon"])
    assert bad.exit_code != 0 and "error: --runtime: Invalid value: 'job/x=soon': unknown distribution" in \
        bad.output and "Traceback" not in bad.output


def _trial_files(tmp_path: Path, trial: int) -> tuple[Path, Path, float]:
    """The calibration's mixed world dumped at T, the incoming job, and its realized start after T."""
    t = bench.trial("mixed", trial, 1, tmp_path)
    base = tmp_path / f"trial-{trial}"
    assert t.realized is not None
    return base / "incoming.yaml", base / "state.yaml", t.realized


def test_simulate_spreads_over_the_run_times_and_without_them_is_the_round_trip(tmp_path: Path) -> None:
    """On the twin's own dump at T, simulate with no --runtime (the run times the world drew, in the dump) gives the
    realized start to the second for every seed: the imported pending Workloads queue ahead of the incoming one
    (their creation time kept; before, a seed whose uids sorted the other way let it jump the queue); with
    --runtime the runs spread."""
    incoming, state, realized = _trial_files(tmp_path, 1)
    snap = bench._rfc3339(bench.T)
    exact = CliRunner().invoke(app, ["simulate", "-f", str(incoming), "--from", str(state), "--duration", "12h",
                                     "--runs", "3", "--snapshot-time", snap, "-o", "json"])
    assert exact.exit_code == 0, exact.output
    starts = [r[0]["started"] for r in yaml.safe_load(exact.output)["runs"]]
    assert realized > 600 and all(abs(s - realized) < 1.0 for s in starts), (starts, realized)
    args = ["simulate", "-f", str(incoming), "--from", str(state), "--duration", "12h", "--runs", "5",
            "--snapshot-time", snap, "-o", "json"]
    for rule in bench.rules(bench.WORLDS["mixed"]):
        args += ["--runtime", rule]
    spread = CliRunner().invoke(app, args)
    assert spread.exit_code == 0, spread.output
    data = yaml.safe_load(spread.output)
    assert len({r[0]["started"] for r in data["runs"]}) == 5
    (row,) = data["start"]
    assert row["p10"] < row["p50"] < row["p90"]


def test_simulate_runtime_errors_are_messages(tmp_path: Path) -> None:
    manifests = tmp_path / "m.yaml"
    manifests.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(bench.incoming(bench.WORLDS["mixed"])))
    for args, message in [
            (["--runtime", "job/x=lognormal:median=1h"], "error: --runtime: Invalid value: "
             "'job/x=lognormal:median=1h': lognormal takes mean, median, sigma; missing: sigma"),
            (["--runtime", "job/x=1h"], "error: --runtime: Invalid value: no cluster dump among --from's sources"),
            (["--snapshot-time", "noon"], "error: --snapshot-time: Invalid value: 'noon': not an RFC 3339 time")]:
        res = CliRunner().invoke(app, ["simulate", "-f", str(job), "--from", str(manifests), *args])
        assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output, res.output


# -- JobSets, LeaderWorkerSets and the incoming workload (issue 36's leftover: --runtime named none of them) ----------
CLUSTER = ROOT / "examples" / "your-cluster" / "cluster.json"


def _ann(template: dict) -> dict:
    return (template.get("metadata") or {}).get("annotations") or {}


def test_a_jobset_rule_draws_for_its_running_pods_its_jobs_and_its_template() -> None:
    """your-cluster's running JobSet ml-serving/llm-eval (2 Jobs of 2 pods): a rule naming the JobSet reaches its
    pods through their Job (the pod's owner chain), each drawing given how long it ran; the Jobs made from its
    replicatedJob `shard` and the JobSet's own template (what it makes a Job from again) share one draw per seed."""
    rules = parse_rules(["ml-serving/jobset/llm-eval=lognormal:median=3h,sigma=0.5"])

    def drawn(seed: int) -> tuple[dict[str, float], set[str]]:
        manifests, report = sources.load([CLUSTER], Options(runtime=rules, seed=seed))
        assert report is not None
        pods = {m.obj["metadata"]["name"]: m.obj["metadata"]["annotations"] for m in manifests
                if m.kind == "Pod" and m.obj["metadata"]["name"].startswith("llm-eval-")}
        assert len(pods) == 4
        templates = {_ann(m.obj["spec"]["template"])["kubetwin.io/duration"] for m in manifests
                     if m.kind == "Job" and m.obj["metadata"]["name"].startswith("llm-eval-")}
        (js,) = [m.obj for m in manifests if m.kind == "JobSet"]
        templates |= {_ann(rj["template"]["spec"]["template"])["kubetwin.io/duration"]
                      for rj in js["spec"]["replicatedJobs"]}
        for ann in pods.values():  # not the import's 1 h default, and never less than it has run
            assert parse_duration(ann["kubetwin.io/duration"]) > parse_duration(ann["kubetwin.io/elapsed"]) > 0
        return {n: parse_duration(a["kubetwin.io/duration"]) for n, a in pods.items()}, templates

    pods0, templates0 = drawn(0)
    assert len(set(pods0.values())) == 4  # each running pod its own draw
    assert len(templates0) == 1  # one draw for the replicatedJob: its Jobs and the JobSet's template
    pods1, templates1 = drawn(1)
    assert pods1 != pods0 and templates1 != templates0
    assert drawn(0) == (pods0, templates0)


def _dump(*items: dict) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                           "items": list(items)}, sort_keys=False)


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n1-uid", "labels": {
    "kubernetes.io/hostname": "n1"}, "creationTimestamp": "2026-12-01T08:00:00Z"},
    "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
               "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                               "lastTransitionTime": "2026-12-01T08:00:00Z"}]}}
CONTAINER = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}


def test_a_queued_jobset_draws_its_templates_per_replicated_job(tmp_path: Path) -> None:
    """A JobSet Kueue keeps suspended has no Jobs yet: the rule draws into each replicatedJob's template (one draw
    per replicatedJob: the Jobs made from it share it), again per seed; a rule for another JobSet leaves it be."""
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
        "name": "sweep", "namespace": "default", "uid": "js-uid", "creationTimestamp": "2026-12-01T09:00:00Z",
        "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": True, "replicatedJobs": [
            {"name": name, "replicas": 2, "template": {"spec": {"parallelism": 1, "completions": 1, "template": {
                "spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}}} for name in ("driver", "workers")]},
        "status": {"conditions": [{"type": "Suspended", "status": "True", "reason": "SuspendedJobs",
                                   "message": "jobset is suspended", "lastTransitionTime": "2026-12-01T09:00:00Z"}]}}
    (tmp_path / "dump.yaml").write_text(_dump(NODE, js))

    def durations(rule: str, seed: int) -> list[str | None]:
        manifests, _ = sources.load([tmp_path / "dump.yaml"], Options(runtime=parse_rules([rule]), seed=seed))
        (obj,) = [m.obj for m in manifests if m.kind == "JobSet"]
        return [_ann(rj["template"]["spec"]["template"]).get("kubetwin.io/duration")
                for rj in obj["spec"]["replicatedJobs"]]

    d0 = durations("jobset/sweep=exp:mean=1h", 0)
    assert all(d0) and d0[0] != d0[1]
    assert durations("jobset/sweep=exp:mean=1h", 1) != d0 and durations("jobset/sweep=exp:mean=1h", 0) == d0
    assert durations("jobset/other=exp:mean=1h", 0) == [None, None]


def test_a_leaderworkerset_rule_reaches_its_leader_and_the_workers_the_leader_owns(tmp_path: Path) -> None:
    """A LeaderWorkerSet's leader pod is its own, its workers are their leader's (the twin's and upstream's
    ownerReferences): a rule naming the LWS draws for both, given how long they ran, and for its templates (one
    draw: a group's pods run together)."""
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {
        "name": "infer", "namespace": "default", "uid": "lws-uid", "creationTimestamp": "2026-12-01T09:00:00Z"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
            "containers": [CONTAINER]}}}}}

    def pod(name: str, owner: tuple[str, str, str]) -> dict:
        kind, oname, ouid = owner
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "default", "uid": f"{name}-uid", "creationTimestamp": "2026-12-01T09:00:00Z",
            "ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1" if kind == "LeaderWorkerSet" else "v1",
                                 "kind": kind, "name": oname, "uid": ouid, "controller": True}]},
            "spec": {"nodeName": "n1", "containers": [CONTAINER]},
            "status": {"phase": "Running", "startTime": "2026-12-01T09:30:00Z"}}

    (tmp_path / "dump.yaml").write_text(_dump(NODE, lws, pod("infer-0", ("LeaderWorkerSet", "infer", "lws-uid")),
                                              pod("infer-0-1", ("Pod", "infer-0", "infer-0-uid"))))
    manifests, report = sources.load([tmp_path / "dump.yaml"], Options(
        runtime=parse_rules(["leaderworkerset/infer=fixed:2h"]), snapshot_time="2026-12-01T10:00:00Z"))
    assert report is not None
    pods = {m.obj["metadata"]["name"]: m.obj["metadata"]["annotations"] for m in manifests if m.kind == "Pod"}
    assert {n: (a["kubetwin.io/elapsed"], a["kubetwin.io/duration"]) for n, a in pods.items()} == {
        "infer-0": ("1800s", "7200s"), "infer-0-1": ("1800s", "7200s")}
    (obj,) = [m.obj for m in manifests if m.kind == "LeaderWorkerSet"]
    assert _ann(obj["spec"]["leaderWorkerTemplate"]["workerTemplate"])["kubetwin.io/duration"] == "7200s"


def _node_manifest(tmp_path: Path) -> Path:
    """NODE as a manifest, not a dump (no server-set uid or creationTimestamp)."""
    node = {**NODE, "metadata": {"name": "n1", "labels": NODE["metadata"]["labels"]}}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(node, sort_keys=False))
    return tmp_path / "cluster.yaml"


def test_the_incoming_workload_runs_what_its_rule_draws(tmp_path: Path) -> None:
    """The rules reach the workloads simulate is asked about, as the snapshot's (before their own
    kubetwin.io/duration), from plain manifests too: a fixed rule is its run time; a distribution spreads its finish
    over the runs (the same seed the same), not its start on an idle node; a JobSet's rule its Jobs'; a rule that
    names none of them is still refused when --from holds no dump."""
    job = bench.incoming(bench.WORLDS["mixed"])  # job/default/incoming, 600 s of its own
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "pair"},
          "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {
              "parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never",
                                                                        "containers": [CONTAINER]}}}}}]}}
    (tmp_path / "jobset.yaml").write_text(yaml.safe_dump(js))
    cluster = _node_manifest(tmp_path)

    def runs(f: str, *rules: str, n: int = 1) -> list[dict]:
        args = ["simulate", "-f", str(tmp_path / f), "--from", str(cluster), "--duration", "6h", "--runs", str(n),
                "-o", "json"]
        for r in rules:
            args += ["--runtime", r]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        return [r[0] for r in yaml.safe_load(res.output)["runs"]]

    (own,) = runs("job.yaml")
    assert own["finished"] - own["started"] == pytest.approx(600, abs=5)
    (fixed,) = runs("job.yaml", "job/incoming=fixed:25m")
    assert fixed["finished"] - fixed["started"] == pytest.approx(1500, abs=5)
    spread = runs("job.yaml", "default/job/incoming=exp:mean=30m", n=4)
    assert len({r["started"] for r in spread}) == 1 and len({round(r["finished"]) for r in spread}) == 4
    assert runs("job.yaml", "default/job/incoming=exp:mean=30m", n=4) == spread
    (pair,) = runs("jobset.yaml", "jobset/pair=fixed:40m")
    assert pair["finished"] - pair["started"] == pytest.approx(2400, abs=10)
    res = CliRunner().invoke(app, ["simulate", "-f", str(tmp_path / "job.yaml"), "--from", str(cluster),
                                   "--runtime", "job/x=1h"])
    assert res.exit_code != 0 and "no cluster dump among --from's sources" in res.output

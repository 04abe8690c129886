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

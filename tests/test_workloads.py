"""Job and Deployment controllers, and the built-in demo."""

from __future__ import annotations

from conftest import final_objects
from k8s_builders import make_pool, make_scenario
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import run


def batch_job(name: str, parallelism: int, completions: int, duration: str, suspend: bool = False) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": parallelism, "completions": completions, "suspend": suspend, "template": {
                "metadata": {"annotations": {"kubetwin.io/duration": duration}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x",
                                                                  "resources": {"requests": {"cpu": "1"}}}]}}}}


def test_job_runs_completions_in_waves_of_parallelism() -> None:
    result = run(objects=[make_scenario("2h").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
                          batch_job("j", 2, 4, "10m")])
    job = final_objects(result, "Job")["j"]
    assert job["status"]["succeeded"] == 4
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
    # two waves of 10 minutes; the first pods failed at 0 s with no nodes. The Node add at 90 s requeues them and
    # their 1 s backoff (counted from the last attempt, as kube's queue does) is long over, so they bind at 90 s.
    start = job["status"]["startTime"]
    assert start == "2026-01-01T00:00:00Z" and job["status"]["completionTime"] == "2026-01-01T00:21:30Z"


def test_suspended_job_creates_no_pods() -> None:
    result = run(objects=[make_scenario("1h").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
                          batch_job("s", 1, 1, "5m", True)])
    assert final_objects(result, "Pod") == {}
    job = final_objects(result, "Job")["s"]
    assert any(c["type"] == "Suspended" for c in job["status"]["conditions"])


def test_deployment_keeps_replicas_running() -> None:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
               "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    result = run(objects=[make_scenario("30m").obj(), make_pool("cpu", "e2-standard-4", 2).obj(), dep])
    pods = final_objects(result, "Pod")
    assert len(pods) == 3 and all(p["status"]["phase"] == "Running" for p in pods.values())
    assert all(n.startswith("web-") for n in pods)
    assert final_objects(result, "Deployment")["web"]["status"]["readyReplicas"] == 3


def test_demo_writes_report(tmp_path) -> None:
    res = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "demo")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "demo" / "report.html").read_text()
    assert "kubetwin run report" in page and "<script src=\"http" not in page
    assert "h100-pool" in page and "llama-finetune" in page

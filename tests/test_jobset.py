"""JobSet controller and its webhooks: child Jobs, success and failure policies, suspend, exclusive placement."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import SHARED, condition, final_objects, run_with
from k8s_builders import make_pool, make_scenario

from kubetwin.controllers import jobset_webhook as J
from kubetwin.runner import run
from kubetwin.store.store import Store

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
POOL_KEY = "cloud.google.com/gke-nodepool"


def rjob(name: str, replicas: int = 1, pods: int = 1, duration: str = "10m", fail_after: str | None = None) -> dict:
    annotations = {"kubetwin.io/duration": duration, **({"kubetwin.io/fail-after": fail_after} if fail_after else {})}
    return {"name": name, "replicas": replicas, "template": {"spec": {
        "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {
            "metadata": {"annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}}


def jobset(name: str, *rjobs: dict, annotations: dict | None = None, **spec) -> dict:
    return {"apiVersion": J.API, "kind": "JobSet", "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"replicatedJobs": list(rjobs), **spec}}


def cluster(pools: int = 1, nodes: int = 4) -> list[dict]:
    return [make_scenario("3h").obj(),
            *(make_pool(f"pool-{i}", "n2-standard-32", nodes).spec(bootDelay="0s").obj() for i in range(pools))]


def test_child_jobs_carry_the_real_names_labels_and_annotations() -> None:
    result = run(objects=[*cluster(), jobset("train", rjob("driver"), rjob("workers", replicas=2, pods=2))])
    jobs = final_objects(result, "Job")
    assert sorted(jobs) == ["train-driver-0", "train-workers-0", "train-workers-1"]
    job = jobs["train-workers-1"]
    want = {"jobset.sigs.k8s.io/jobset-name": "train", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
            "jobset.sigs.k8s.io/job-index": "1", "jobset.sigs.k8s.io/job-global-index": "2",
            "jobset.sigs.k8s.io/replicatedjob-replicas": "2", "jobset.sigs.k8s.io/global-replicas": "3",
            "jobset.sigs.k8s.io/restart-attempt": "0",
            "jobset.sigs.k8s.io/job-key": hashlib.sha1(b"default/train-workers-1").hexdigest()}
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        assert want.items() <= meta["labels"].items() and want.items() <= meta["annotations"].items()
    ref = job["metadata"]["ownerReferences"][0]
    assert ref["kind"] == "JobSet" and ref["name"] == "train" and ref["controller"] is True
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["suspend"] is False  # webhook defaults
    pods = [p for p in final_objects(result, "Pod").values()
            if p["metadata"]["labels"].get("job-name") == "train-workers-1"]
    assert sorted(p["metadata"]["name"][:-6] for p in pods) == ["train-workers-1-0", "train-workers-1-1"]
    assert {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods} == {"0", "1"}
    assert {p["spec"]["hostname"] for p in pods} == {"train-workers-1-0", "train-workers-1-1"}
    assert all(p["spec"]["subdomain"] == "train" and p["metadata"]["labels"]["jobset.sigs.k8s.io/priority"] == "0"
               for p in pods)
    js = final_objects(result, "JobSet")["train"]
    assert condition(js, "Completed")["reason"] == "AllJobsCompleted" and js["status"]["terminalState"] == "Completed"
    assert {s["name"]: s["succeeded"] for s in js["status"]["replicatedJobsStatus"]} == {"driver": 1, "workers": 2}


def test_success_policy_any_on_a_target_completes_early_and_deletes_the_rest() -> None:
    js = jobset("train", rjob("driver", duration="5m"), rjob("workers", replicas=2, duration="2h"),
                successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]})
    result = run(objects=[*cluster(), js])
    done = final_objects(result, "JobSet")["train"]
    assert condition(done, "Completed")["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert sorted(final_objects(result, "Job")) == ["train-driver-0"]  # the active workers were deleted with their pods
    assert not any(p["metadata"]["name"].startswith("train-workers") for p in final_objects(result, "Pod").values())


def test_success_policy_all_waits_for_every_target_job() -> None:
    js = jobset("train", rjob("driver", duration="5m"), rjob("workers", replicas=2, duration="20m"))
    done = final_objects(run(objects=[*cluster(), js]), "JobSet")["train"]
    assert condition(done, "Completed")["lastTransitionTime"] == "2026-01-01T00:20:00Z"


def test_failed_child_job_restarts_the_whole_set_until_max_restarts() -> None:
    js = jobset("train", rjob("workers", replicas=2, pods=2, duration="1h", fail_after="5m"),
                failurePolicy={"maxRestarts": 2})
    result = run(objects=[*cluster(), js])
    final = final_objects(result, "JobSet")["train"]
    failed = condition(final, "Failed")
    assert failed["reason"] == "ReachedMaxRestarts" and final["status"]["terminalState"] == "Failed"
    assert failed["message"] == ("jobset failed due to reaching max number of restarts "
                                 "(first failed job: train-workers-0)")
    assert final["status"]["restarts"] == 2 and final["status"]["restartsCountTowardsMax"] == 2
    assert failed["lastTransitionTime"] == "2026-01-01T00:15:00Z"  # three attempts of 5 minutes
    attempts: dict[str, set[str]] = {}
    for _, _, etype, o in result.history:
        if o["kind"] == "Pod" and etype == "ADDED":
            attempts.setdefault(o["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"], set()).add(
                o["metadata"]["name"])
    assert sorted(attempts) == ["0", "1", "2"] and all(len(v) == 4 for v in attempts.values())
    assert len(set().union(*attempts.values())) == 12  # every attempt recreated the pods
    restarts = [e.event for e in result.recorded_events("RestartJobSetFailurePolicyAction")]
    assert restarts[0]["message"] == "applying RestartJobSet failure policy action (first failed job: train-workers-0)"
    assert restarts[0]["count"] == 2 and restarts[0]["type"] == "Warning"
    jobs = final_objects(result, "Job")
    assert not jobs or all(condition(j, "Failed") for j in jobs.values())


def test_no_failure_policy_fails_at_once_and_rules_pick_the_action() -> None:
    plain = run(objects=[*cluster(), jobset("a", rjob("w", fail_after="5m"))])
    failed = condition(final_objects(plain, "JobSet")["a"], "Failed")
    assert (failed["reason"], failed["message"]) == ("FailedJobs", "jobset failed due to one or more job failures "
                                                     "(first failed job: a-w-0)")
    rules = {"maxRestarts": 5, "rules": [{"name": "failFast", "action": "FailJobSet",
                                          "onJobFailureReasons": ["BackoffLimitExceeded"]}]}
    ruled = final_objects(run(objects=[*cluster(), jobset("b", rjob("w", fail_after="5m"), failurePolicy=rules)]),
                          "JobSet")
    failed = condition(ruled["b"], "Failed")
    assert failed["reason"] == "FailJobSetFailurePolicyAction" and ruled["b"]["status"]["restarts"] == 0
    ignore = {"maxRestarts": 0, "rules": [{"name": "always", "action": "RestartJobSetAndIgnoreMaxRestarts"}]}
    js = jobset("c", rjob("w", duration="1h", fail_after="20m"), failurePolicy=ignore)
    kept = final_objects(run(objects=[*cluster(), js], duration="50m"), "JobSet")["c"]
    assert kept["status"]["restarts"] == 2 and "restartsCountTowardsMax" not in kept["status"]
    assert condition(kept, "Failed") == {}


def test_on_failure_pods_restart_in_place_until_the_backoff_limit() -> None:
    js = jobset("t", rjob("w", duration="1h", fail_after="1m"))
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 2
    del js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"]  # OnFailure
    result = run(objects=[*cluster(), js])
    job = condition(final_objects(result, "Job")["t-w-0"], "Failed")
    assert job["reason"] == "BackoffLimitExceeded"
    # 1m run, 10 s back-off, 1m run, then the second restart reaches backoffLimit 2
    assert job["lastTransitionTime"] == "2026-01-01T00:02:10Z"
    backoff = result.recorded_events("BackOff")
    assert backoff[0].message.startswith("Back-off restarting failed container c in pod t-w-0-0-")
    assert condition(final_objects(result, "JobSet")["t"], "Failed")["reason"] == "FailedJobs"


def test_suspend_and_resume_use_the_templates_kueue_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    def admit(store: Store) -> None:  # as Kueue admits: inject the flavor's node selector, then unsuspend
        def resume(js: dict) -> dict:
            rjs = [{**rj, "template": {**rj["template"], "spec": {**rj["template"]["spec"], "template": {
                **rj["template"]["spec"]["template"], "spec": {**rj["template"]["spec"]["template"]["spec"],
                                                               "nodeSelector": {POOL_KEY: "pool-1"}}}}}}
                   for rj in js["spec"]["replicatedJobs"]]
            return {**js, "spec": {**js["spec"], "suspend": False, "replicatedJobs": rjs}}
        store.patch("JobSet", "default", "train", resume)

    js = jobset("train", rjob("w", replicas=2, pods=2, duration="30m"), suspend=True)
    result = run_with(monkeypatch, [*cluster(pools=2), js], [(600.0, admit)])
    assert [e["message"] for e in [e.event for e in result.recorded_events("SuspendedJobs")]] == ["jobset is suspended"]
    assert [e["message"] for e in [e.event for e in result.recorded_events("ResumeJobs")]] == ["jobset is resumed"]
    pods = [o for _, _, et, o in result.history if o["kind"] == "Pod" and et == "ADDED"]
    assert len(pods) == 4 and all(p["spec"]["nodeSelector"] == {POOL_KEY: "pool-1"} for p in pods)
    assert {p["metadata"]["creationTimestamp"] for p in pods} == {"2026-01-01T00:10:00Z"}
    done = final_objects(result, "JobSet")["train"]
    assert condition(done, "Suspended")["status"] == "False" and condition(done, "Completed")["lastTransitionTime"] == (
        "2026-01-01T00:40:00Z")
    job = condition(final_objects(result, "Job")["train-w-0"], "Suspended")
    assert (job["status"], job["reason"], job["message"]) == ("False", "JobResumed", "Job resumed")


def test_suspending_a_running_jobset_deletes_its_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    def suspend(store: Store) -> None:
        store.patch("JobSet", "default", "train", lambda js: {**js, "spec": {**js["spec"], "suspend": True}})

    result = run_with(monkeypatch, [*cluster(), jobset("train", rjob("w", pods=2, duration="1h"))], [(300.0, suspend)])
    assert not final_objects(result, "Pod")
    job = final_objects(result, "Job")["train-w-0"]
    assert job["spec"]["suspend"] is True and condition(job, "Suspended")["reason"] == "JobSuspended"
    assert job["status"]["failed"] == 0 and "startTime" not in job["status"]
    status = {s["name"]: s for s in final_objects(result, "JobSet")["train"]["status"]["replicatedJobsStatus"]}
    assert status["w"]["suspended"] == 1 and status["w"]["active"] == 0


def test_startup_policy_in_order_and_ttl_after_finished() -> None:
    js = jobset("train", rjob("driver", duration="10m"), rjob("workers", replicas=2, duration="10m"),
                startupPolicy={"startupPolicyOrder": "InOrder"}, ttlSecondsAfterFinished=60)
    result = run(objects=[*cluster(), js])
    h = result.history
    created = {o["metadata"]["name"]: i for i, (_, _, et, o) in enumerate(h) if o["kind"] == "Job" and et == "ADDED"}
    driver_ready = next(i for i, (_, _, _, o) in enumerate(h) if o["kind"] == "Job" and o["metadata"]["name"] ==
                        "train-driver-0" and (o.get("status") or {}).get("ready"))
    assert created["train-driver-0"] < driver_ready < created["train-workers-0"] < created["train-workers-1"]
    finished = [t for t, _, _, o in result.history if o["kind"] == "JobSet" and condition(o, "Completed")]
    gone = [t for t, _, et, o in result.history if o["kind"] == "JobSet" and et == "DELETED"]
    assert gone == [finished[0] + 60] and not final_objects(result, "Job") and not final_objects(result, "Pod")
    reasons = [e["reason"] for e in [e.event for e in result.recorded_events("InOrderStartupPolicyCompleted")]]
    assert reasons == ["InOrderStartupPolicyCompleted"]


def test_exclusive_placement_one_job_per_node_pool_and_a_fifth_waits() -> None:
    js = jobset("train", rjob("slice", replicas=5, pods=4, duration="1h"),
                annotations={J.EXCLUSIVE_KEY: POOL_KEY})
    result = run(objects=[*cluster(pools=4, nodes=4), js], duration="30m")
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"][POOL_KEY] for n in final_objects(result, "Node").values()}
    pools: dict[str, set[str]] = {}
    pods = final_objects(result, "Pod")
    for p in pods.values():
        if p["spec"].get("nodeName"):
            pools.setdefault(p["metadata"]["labels"]["job-name"], set()).add(nodes[p["spec"]["nodeName"]])
    assert len(pools) == 4 and all(len(v) == 1 for v in pools.values())  # each Job entirely in one pool
    assert len(set().union(*pools.values())) == 4  # and no pool shared
    assert sum(1 for p in pods.values() if p["spec"].get("nodeName")) == 16
    waiting = [p for p in pods.values() if not p["spec"].get("nodeName")]
    assert len(waiting) == 1 and waiting[0]["metadata"]["annotations"][J.EXCLUSIVE_KEY] == POOL_KEY
    leader = waiting[0]
    assert leader["metadata"]["labels"]["job-name"] not in pools  # its followers were never created
    msg = next(c for c in leader["status"]["conditions"] if c["type"] == "PodScheduled")["message"]
    assert msg == ("0/16 nodes are available: 16 node(s) didn't match pod anti-affinity rules. preemption: 0/16 nodes "
                   "are available: 16 No preemption victims found for incoming pod.")
    key = leader["metadata"]["labels"][J.JOB_KEY]
    anti = leader["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [{"labelSelector": {"matchExpressions": [
        {"key": J.JOB_KEY, "operator": "Exists"}, {"key": J.JOB_KEY, "operator": "NotIn", "values": [key]},
        {"key": J.PRIORITY_KEY, "operator": "In", "values": ["0"]}]}, "topologyKey": POOL_KEY, "namespaceSelector": {}}]
    refused = [e.event for e in result.recorded_events("FailedCreate")]
    assert refused and all(e["message"] == 'Error creating: admission webhook "vpod.kb.io" denied the request: '
                           "follower pod node selector for topology domain not found. missing selector: "
                           "cloud.google.com/gke-nodepool" for e in refused)
    followers = [p for p in pods.values() if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                 != "0"]
    assert all(p["spec"]["nodeSelector"] == {POOL_KEY: nodes[p["spec"]["nodeName"]]} for p in followers)


def test_example_jobset_runs_one_slice_per_pool() -> None:
    result = run([EXAMPLES / "jobset-exclusive-placement.yaml"])
    js = final_objects(result, "JobSet")["llm-train"]
    assert condition(js, "Completed")["reason"] == "AllJobsCompleted"
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"][POOL_KEY] for n in final_objects(result, "Node").values()}
    pools: dict[str, set[str]] = {}
    for _, _, _, o in result.history:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            pools.setdefault(o["metadata"]["labels"]["job-name"], set()).add(nodes[o["spec"]["nodeName"]])
    assert len(pools) == 4 and all(len(v) == 1 for v in pools.values()) and len(set().union(*pools.values())) == 4


def test_the_upstream_exclusive_placement_example_as_written() -> None:
    """kubernetes-sigs/jobset's examples/simple/exclusive-placement.yaml (staged in ../shared) on three pools."""
    path = SHARED / "reference" / "jobset" / "exclusive-placement.yaml"
    if not path.exists():
        pytest.skip("research material not staged")
    result = run([path], objects=cluster(pools=3, nodes=3), duration="10m")
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"][POOL_KEY] for n in final_objects(result, "Node").values()}
    pools: dict[str, set[str]] = {}
    for p in final_objects(result, "Pod").values():
        assert p["spec"]["restartPolicy"] == "OnFailure" and p["status"]["phase"] == "Running"  # webhook default
        pools.setdefault(p["metadata"]["labels"]["job-name"], set()).add(nodes[p["spec"]["nodeName"]])
    assert sorted(pools) == [f"exclusive-placement-workers-{i}" for i in range(3)]
    assert all(len(v) == 1 for v in pools.values()) and len(set().union(*pools.values())) == 3


def test_child_job_creates_go_through_the_managers_client() -> None:
    """The JobSet manager's client (main.go: QPS and Burst from clientConnection, 500 / 500 by default, one bucket
    per resource as controller-runtime builds them): of 600 child Jobs, 500 are created at once and the rest
    1/500 s apart; the status update has its own bucket; summary.json counts the requests."""
    res = run(objects=[make_scenario("1m").obj(), jobset("wide", rjob("w", replicas=600), suspend=True)])
    created = sorted(vs[0][0] for name in {o["metadata"]["name"] for _, _, _, o in res.history if o["kind"] == "Job"}
                     if (vs := res.versions("Job", name)))
    assert len(created) == 600
    assert created[:500] == [created[0]] * 500
    assert created[500:] == pytest.approx([created[0] + k / 500 for k in range(1, 101)])
    client = res.summary["jobset_api_client"]
    assert client["requests"]["create jobs"] == 600 and client["rateLimiter"] == "per resource"
    assert client["max_wait_s"] == pytest.approx(0.2)
    js = final_objects(res, "JobSet")["wide"]
    assert next(s for s in js["status"]["replicatedJobsStatus"] if s["name"] == "w")["suspended"] == 600

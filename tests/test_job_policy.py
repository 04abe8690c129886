"""The Job controller's failure and success policies against kubernetes/kubernetes pkg/controller/job (1.34):
pod_failure_policy_test.go (TestMatchPodFailurePolicy), success_policy_test.go (TestMatchSuccessPolicy),
job_controller_test.go's backoffLimitPerIndex / podFailurePolicy / activeDeadlineSeconds sync cases, the conditions
sequence (FailureTarget / SuccessCriteriaMet before Failed / Complete), the TTL-after-finished controller, and the
API server's validation of these fields (pkg/apis/batch/validation/validation.go) in its words."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import final_objects
from k8s_builders import make_pool, make_scenario

from kubetwin.api.loader import Manifest
from kubetwin.cli.describe import describe
from kubetwin.controllers import admission
from kubetwin.controllers import job_policy as policy
from kubetwin.controllers.job import COMPLETION_INDEX, JobController
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.runner import run
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store
from kubetwin.validation.validate import validate

NOW = "2026-01-01T00:00:00Z"
LONG_AGO = "2025-12-31T00:00:00Z"


def _failed_pod(exit_codes: dict[str, int | None] | None = None, conditions: list[tuple[str, str]] | None = None,
                init: dict[str, int] | None = None, name: str = "mypod") -> dict:
    """A failed pod: container name -> exit code (None: still running), pod conditions (type, status)."""
    def statuses(codes: dict) -> list[dict]:
        return [{"name": n, "state": {"running": {}} if c is None else {"terminated": {"exitCode": c}}}
                for n, c in codes.items()]
    st: dict = {"phase": "Failed", "containerStatuses": statuses(exit_codes or {}),
                "conditions": [{"type": t, "status": s} for t, s in conditions or []]}
    if init:
        st["initContainerStatuses"] = statuses(init)
    return {"metadata": {"name": name, "namespace": "default"}, "status": st}


def _exit_rule(action: str, op: str, values: list[int], container: str | None = None) -> dict:
    req: dict = {"operator": op, "values": values}
    if container:
        req["containerName"] = container
    return {"action": action, "onExitCodes": req}


def _cond_rule(action: str, ctype: str = "DisruptionTarget", status: str = "True") -> dict:
    return {"action": action, "onPodConditions": [{"type": ctype, "status": status}]}


# -- TestMatchPodFailurePolicy ---------------------------------------------------------------------------------
MSG_42 = "Container main-container for pod default/mypod failed with exit code 42 matching FailJob rule at index 0"
PFP_CASES = {  # name: (rules, pod, (message, count, action))
    "unknown action for rule matching by exit codes - skip rule with unknown action": (
        [_exit_rule("UnknownAction", "In", [1, 2]), _exit_rule("FailJob", "In", [2, 3])],
        _failed_pod({"main-container": 2}),
        ("Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 1",
         True, "FailJob")),
    "no policy rules": ([], _failed_pod({"main-container": 2}), (None, True, None)),
    "ignore rule matched for exit codes": (
        [_exit_rule("Ignore", "In", [1, 2, 3])], _failed_pod({"main-container": 2}), (None, False, "Ignore")),
    "FailJob rule matched for exit codes": (
        [_exit_rule("FailJob", "In", [1, 2, 42])], _failed_pod({"main-container": 42}), (MSG_42, True, "FailJob")),
    "successful containers are skipped by the rules": (
        [_exit_rule("FailJob", "NotIn", [111])], _failed_pod({"init": 0, "main-container": 0}), (None, True, None)),
    "FailIndex rule matched for exit codes": (
        [_exit_rule("FailIndex", "In", [1, 2, 3])], _failed_pod({"main-container": 2}), (None, True, "FailIndex")),
    "FailJob rule matched for exit codes; container name matched": (
        [_exit_rule("FailJob", "In", [1, 2, 3], "main-container")], _failed_pod({"main-container": 2}),
        ("Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 0",
         True, "FailJob")),
    "FailJob rule not matched for exit codes; container name not matched": (
        [_exit_rule("FailJob", "In", [1, 2, 3], "sidecar")], _failed_pod({"main-container": 2, "sidecar": 0}),
        (None, True, None)),
    "FailJob rule matched for init container": (
        [_exit_rule("FailJob", "In", [5])], _failed_pod({"main-container": None}, init={"init-container": 5}),
        ("Container init-container for pod default/mypod failed with exit code 5 matching FailJob rule at index 0",
         True, "FailJob")),
    "running containers are not matched": (
        [_exit_rule("FailJob", "NotIn", [0])], _failed_pod({"main-container": None}), (None, True, None)),
    "NotIn: the code outside the list matches": (
        [_exit_rule("FailJob", "NotIn", [1, 2, 3])], _failed_pod({"main-container": 42}), (MSG_42, True, "FailJob")),
    "NotIn: a listed code does not match": (
        [_exit_rule("FailJob", "NotIn", [1, 2, 42])], _failed_pod({"main-container": 42}), (None, True, None)),
    "the first matching rule decides": (
        [_exit_rule("Ignore", "In", [42]), _exit_rule("FailJob", "In", [42])], _failed_pod({"main-container": 42}),
        (None, False, "Ignore")),
    "count rule matched for exit codes": (
        [_exit_rule("Count", "In", [42])], _failed_pod({"main-container": 42}), (None, True, "Count")),
    "ignore rule matched for pod conditions": (
        [_cond_rule("Ignore")], _failed_pod({"main-container": 137}, [("DisruptionTarget", "True")]),
        (None, False, "Ignore")),
    "ignore rule not matched for the condition's status": (
        [_cond_rule("Ignore")], _failed_pod({"main-container": 137}, [("DisruptionTarget", "False")]),
        (None, True, None)),
    "FailJob rule matched for pod conditions": (
        [_cond_rule("FailJob")], _failed_pod({"main-container": 137}, [("DisruptionTarget", "True")]),
        ("Pod default/mypod has condition DisruptionTarget matching FailJob rule at index 0", True, "FailJob")),
    "count rule matched for pod conditions": (
        [_cond_rule("Count")], _failed_pod({"main-container": 137}, [("DisruptionTarget", "True")]),
        (None, True, "Count")),
    "no rule matched": (
        [_exit_rule("FailJob", "In", [3]), _cond_rule("Ignore")], _failed_pod({"main-container": 1}),
        (None, True, None)),
}


@pytest.mark.parametrize("name", list(PFP_CASES))
def test_match_pod_failure_policy_as_upstreams_table(name: str) -> None:
    rules, pod, want = PFP_CASES[name]
    assert policy.match_pod_failure_policy({"rules": rules} if rules else None, pod) == want


# -- TestMatchSuccessPolicy ------------------------------------------------------------------------------------
SP_CASES = {  # name: (rules, succeeded intervals, message or None); completions 10 throughout
    "successPolicy is null": (None, [(0, 0)], None),
    "any rules are nothing": ([], [(0, 0)], None),
    "rules.succeededIndexes is invalid format": ([{"succeededIndexes": "invalid-form"}], [(0, 0)], None),
    "succeededIndexes matched rules": ([{"succeededIndexes": "0-2"}], [(0, 2), (4, 7)], 0),
    "succeededIndexes didn't match rules": ([{"succeededIndexes": "3"}], [(0, 2)], None),
    "succeededCount matched": ([{"succeededCount": 2}], [(0, 2)], 0),
    "succeededCount didn't match": ([{"succeededCount": 4}], [(0, 2)], None),
    "multiple rules; met one of rules": ([{"succeededIndexes": "9"}, {"succeededIndexes": "4,6"}],
                                         [(0, 2), (4, 7)], 1),
    "multiple rules; met all rules": ([{"succeededIndexes": "0,1"}, {"succeededIndexes": "5"}], [(0, 2), (4, 7)], 0),
    "indexes and count; met": ([{"succeededIndexes": "3-6", "succeededCount": 2}], [(0, 2), (4, 7)], 0),
    "indexes and count; not met": ([{"succeededIndexes": "3-6", "succeededCount": 2}], [(0, 2), (6, 7)], None),
    "succeededIndexes are nothing": ([{"succeededCount": 4}], [], None),
    "rules is proper subset of succeededIndexes": ([{"succeededIndexes": "2-4,6-8"}], [(1, 5), (6, 9)], 0),
    "rules equals succeededIndexes": ([{"succeededIndexes": "2-4,6-9"}], [(2, 4), (6, 9)], 0),
    "rules is subset of succeededIndexes": ([{"succeededIndexes": "2-4,8-12"}], [(2, 5), (7, 15)], 0),
    "rules is an empty set": ([{"succeededIndexes": ""}], [(1, 3)], None),
    "rules outside succeededIndexes": ([{"succeededIndexes": "10-12,14-16"}], [(1, 3), (5, 7)], None),
    "rules overlaps succeededIndexes at first": ([{"succeededIndexes": "1-3,5-7"}], [(2, 4), (6, 8)], None),
    "overlaps at first; count met": ([{"succeededIndexes": "1-3,5-7", "succeededCount": 4}], [(2, 4), (6, 8)], 0),
    "rules overlaps succeededIndexes at last": ([{"succeededIndexes": "2-4,6-9"}], [(1, 3), (5, 7)], None),
    "overlaps at last; count met": ([{"succeededIndexes": "2-4,6-9", "succeededCount": 4}], [(1, 3), (5, 7)], 0),
    "rules completely overlaps succeededIndexes": ([{"succeededIndexes": "0-4,6-9"}], [(1, 3), (7, 8)], None),
    "completely overlaps; count met": ([{"succeededIndexes": "0-4,6-9", "succeededCount": 5}], [(1, 3), (7, 8)], 0),
    "overlaps multiple at last": ([{"succeededIndexes": "0-6,8-9"}], [(1, 3), (5, 9)], None),
    "overlaps multiple at last; count met": ([{"succeededIndexes": "0-6,8-9", "succeededCount": 7}],
                                             [(1, 3), (5, 9)], 0),
    "first rule overlaps at first": ([{"succeededIndexes": "0-3,6-9"}], [(1, 10)], None),
    "first rule overlaps at first; count met": ([{"succeededIndexes": "0-3,6-9", "succeededCount": 7}],
                                                [(1, 10)], 0),
}


@pytest.mark.parametrize("name", list(SP_CASES))
def test_match_success_policy_as_upstreams_table(name: str) -> None:
    rules, succeeded, want = SP_CASES[name]
    got = policy.match_success_policy(None if rules is None else {"rules": rules}, 10, succeeded)
    assert got == (None if want is None else f"Matched rules at index {want}")


# -- the controller, one sync at a time ------------------------------------------------------------------------

def _job(completions: int = 3, parallelism: int = 3, indexed: bool = True, **spec: object) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"completions": completions, "parallelism": parallelism,
                     **({"completionMode": "Indexed"} if indexed else {}), **spec,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "main-container", "image": "x"}]}}}}


def _sync(job: dict, pods: list[tuple[str | None, str, int | None, list, dict]]):
    """A store holding the Job and its pods (index, phase, exit code, conditions, annotations); one sync."""
    env = Environment()
    store = Store(env, 0, NOW)
    store.admit(admission.api_defaults, admission.API_DEFAULTED)
    ctrl = JobController(store, env, EventRecorder(store), NameGenerator(0))
    stored = store.create(job)
    for i, (index, phase, code, conds, ann) in enumerate(pods):
        meta: dict = {"name": f"pod-{i}", "namespace": "default", "annotations": dict(ann), "labels": {},
                      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                           "uid": stored["metadata"]["uid"], "controller": True}]}
        if index is not None:
            meta["annotations"][COMPLETION_INDEX] = index
        # finished long before the sync, as upstream's pods of zero time: no pod-failure back-off left
        state = {"terminated": {"exitCode": code, "finishedAt": LONG_AGO}} if code is not None else {"running": {}}
        store.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                      "spec": {"containers": [{"name": "main-container", "image": "x"}]},
                      "status": {"phase": phase, "containerStatuses": [{"name": "main-container", "state": state}],
                                 "conditions": [{"type": t, "status": "True"} for t in conds]}})
    made: list[dict] = []
    gone: list[str] = []
    store.watch("Pod", lambda e, o, old: made.append(o) if e == "ADDED" else
                gone.append(o["metadata"]["name"]) if e == "DELETED" else None)
    ctrl.sync(store.get("Job", "default", "j"))
    return store.get("Job", "default", "j"), made, gone, store


def _conds(job: dict) -> list[tuple[str, str, str]]:
    return [(c["type"], c["reason"], c["message"]) for c in job["status"].get("conditions") or []]


def test_fail_job_rule_fails_the_job_with_failure_target_then_failed() -> None:
    """job_controller_test.go "fail job based on OnExitCodes": the running pods are deleted and counted failed."""
    rules = [_exit_rule("FailJob", "In", [5, 6, 42])]
    job, _, gone, _ = _sync(_job(podFailurePolicy={"rules": rules}),
                            [("0", "Failed", 42, [], {}), ("1", "Running", None, [], {}),
                             ("2", "Running", None, [], {})])
    msg = "Container main-container for pod default/pod-0 failed with exit code 42 matching FailJob rule at index 0"
    assert _conds(job) == [("FailureTarget", "PodFailurePolicy", msg), ("Failed", "PodFailurePolicy", msg)]
    assert sorted(gone) == ["pod-1", "pod-2"]
    assert (job["status"]["failed"], job["status"]["active"]) == (3, 0)


def test_ignore_rule_does_not_count_the_failure_and_the_pod_is_replaced() -> None:
    """"ignore pod failure based on OnPodConditions": failed stays 0 with backoffLimit 0; a new pod starts."""
    job, made, _, _ = _sync(_job(1, 1, indexed=False, backoffLimit=0,
                                 podFailurePolicy={"rules": [_cond_rule("Ignore")]}),
                            [(None, "Failed", 137, ["DisruptionTarget"], {})])
    assert job["status"]["failed"] == 0 and not job["status"].get("conditions")
    assert len(made) == 1 and job["status"]["active"] == 1


def test_count_rule_and_no_match_count_against_backoff_limit() -> None:
    for rules in ([_exit_rule("Count", "In", [42])], [_exit_rule("Ignore", "In", [1])]):
        job, _, _, _ = _sync(_job(1, 1, indexed=False, backoffLimit=0, podFailurePolicy={"rules": rules}),
                             [(None, "Failed", 42, [], {})])
        assert _conds(job) == [("FailureTarget", *policy.BACKOFF_LIMIT), ("Failed", *policy.BACKOFF_LIMIT)]


@pytest.mark.parametrize(("limit", "pods", "failed_indexes", "created_counts"), [
    # "backoffLimitPerIndex: the first failure of an index is retried, with the failure count on the new pod"
    (1, [("0", "Failed", 1, [], {policy.INDEX_FAILURE_COUNT: "0"})], "", {"0": "1"}),
    # "the index fails once its failures reach backoffLimitPerIndex"
    (1, [("0", "Failed", 1, [], {policy.INDEX_FAILURE_COUNT: "1"})], "0", {}),
    # backoffLimitPerIndex 0: the first failure fails the index
    (0, [("1", "Failed", 1, [], {policy.INDEX_FAILURE_COUNT: "0"})], "1", {}),
])
def test_backoff_limit_per_index(limit: int, pods: list, failed_indexes: str, created_counts: dict) -> None:
    job, made, _, _ = _sync(_job(3, 1, backoffLimitPerIndex=limit), pods)
    assert job["status"]["failedIndexes"] == failed_indexes
    got = {p["metadata"]["annotations"][COMPLETION_INDEX]: p["metadata"]["annotations"][policy.INDEX_FAILURE_COUNT]
           for p in made}
    if created_counts:
        assert got == created_counts
    else:  # the failed index is skipped: the next pending index starts with no failures
        assert failed_indexes not in got and set(got.values()) == {"0"}


def test_failed_indexes_fail_the_job_when_every_index_is_done() -> None:
    """"job with backoffLimitPerIndex; the Job is failed when all indexes finished and one failed"."""
    pods = [("0", "Succeeded", 0, [], {}), ("1", "Failed", 1, [], {policy.INDEX_FAILURE_COUNT: "1"}),
            ("2", "Succeeded", 0, [], {})]
    job, _, _, _ = _sync(_job(3, 3, backoffLimitPerIndex=1), pods)
    assert job["status"]["failedIndexes"] == "1" and job["status"]["completedIndexes"] == "0,2"
    assert _conds(job) == [("FailureTarget", *policy.FAILED_INDEXES), ("Failed", *policy.FAILED_INDEXES)]


def test_max_failed_indexes_exceeded_fails_the_job_at_once() -> None:
    pods = [("0", "Failed", 1, [], {}), ("1", "Running", None, [], {}), ("2", "Running", None, [], {})]
    job, _, gone, _ = _sync(_job(3, 3, backoffLimitPerIndex=0, maxFailedIndexes=0), pods)
    assert _conds(job)[-1] == ("Failed", *policy.MAX_FAILED_INDEXES) and sorted(gone) == ["pod-1", "pod-2"]


def test_fail_index_rule_fails_only_its_index() -> None:
    rules = [_exit_rule("FailIndex", "In", [3])]
    job, made, _, _ = _sync(_job(3, 1, backoffLimitPerIndex=5, podFailurePolicy={"rules": rules}),
                            [("0", "Failed", 3, [], {})])
    assert job["status"]["failedIndexes"] == "0" and [p["metadata"]["annotations"][COMPLETION_INDEX]
                                                      for p in made] == ["1"]


def test_ignored_failure_is_counted_on_the_index_as_ignored() -> None:
    """getNewIndexFailureCounts: an ignored failure raises job-index-ignored-failure-count, not the count."""
    rules = [_cond_rule("Ignore")]
    job, made, _, _ = _sync(_job(1, 1, backoffLimitPerIndex=0, podFailurePolicy={"rules": rules}),
                            [("0", "Failed", 137, ["DisruptionTarget"], {policy.INDEX_FAILURE_COUNT: "0"})])
    [pod] = made
    ann = pod["metadata"]["annotations"]
    assert (ann[policy.INDEX_FAILURE_COUNT], ann[policy.INDEX_IGNORED_FAILURE_COUNT]) == ("0", "1")
    assert job["status"]["failedIndexes"] == ""


def test_success_policy_completes_with_success_criteria_met_and_deletes_the_rest() -> None:
    """"job with successPolicy; jobPodReplacementPolicy feature enabled; job has SuccessCriteriaMet and Complete
    condition when job meets to successPolicy and all pods have been already removed"."""
    sp = {"rules": [{"succeededIndexes": "0,1", "succeededCount": 1}]}
    job, _, gone, _ = _sync(_job(3, 3, successPolicy=sp),
                            [("0", "Succeeded", 0, [], {}), ("1", "Running", None, [], {}),
                             ("2", "Running", None, [], {})])
    msg = "Matched rules at index 0"
    assert _conds(job) == [("SuccessCriteriaMet", "SuccessPolicy", msg), ("Complete", "SuccessPolicy", msg)]
    assert sorted(gone) == ["pod-1", "pod-2"] and job["status"]["failed"] == 0
    assert job["status"]["completionTime"] == NOW


def test_active_deadline_fails_the_job_and_deletes_its_pods() -> None:
    """"activeDeadlineSeconds less than single pod execution": the sync at startTime + deadline fails it."""
    env = Environment()
    store = Store(env, 0, NOW)
    store.admit(admission.api_defaults, admission.API_DEFAULTED)
    JobController(store, env, EventRecorder(store), NameGenerator(0))
    store.create(_job(1, 1, indexed=False, activeDeadlineSeconds=10))
    env.run(until=9)
    assert len(store.list("Pod")) == 1 and not store.get("Job", "default", "j")["status"].get("conditions")
    env.run(until=11)
    job = store.get("Job", "default", "j")
    assert _conds(job) == [("FailureTarget", *policy.DEADLINE), ("Failed", *policy.DEADLINE)]
    assert job["status"]["conditions"][-1]["lastTransitionTime"] == "2026-01-01T00:00:10Z"
    assert store.list("Pod") == [] and job["status"]["failed"] == 1


# -- whole runs ------------------------------------------------------------------------------------------------

def _run_job(spec_extra: dict, ann: dict, until: str = "2h", completions: int = 2, indexed: bool = True):
    job = _job(completions, completions, indexed=indexed, **spec_extra)
    job["metadata"]["name"] = "x"
    job["spec"]["template"]["metadata"] = {"annotations": ann}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    return run(objects=[make_scenario(until).obj(), make_pool("cpu", "e2-standard-4", 1).obj(), job])


def test_run_fail_job_on_exit_code_42_and_describe_shows_the_reason() -> None:
    rules = [_exit_rule("FailJob", "In", [42])]
    res = _run_job({"podFailurePolicy": {"rules": rules}, "backoffLimit": 6},
                   {"kubetwin.io/fail-after": "5m", "kubetwin.io/exit-code": "42"}, completions=1, indexed=False)
    job = final_objects(res, "Job")["x"]
    [pod] = final_objects(res, "Pod").values()  # failed once; no retry although backoffLimit is 6
    msg = (f"Container main-container for pod default/{pod['metadata']['name']} failed with exit code 42 "
           "matching FailJob rule at index 0")
    assert _conds(job) == [("FailureTarget", "PodFailurePolicy", msg), ("Failed", "PodFailurePolicy", msg)]
    events = [o for _, _, _, o in res.history if o["kind"] == "Event"
              and o["involvedObject"]["name"] == "x"]
    text = describe(job, events, datetime(2026, 1, 1, 1, tzinfo=UTC))
    assert "Warning  PodFailurePolicy" in text and msg in text


def test_run_exit_code_annotation_is_validated() -> None:
    m = Manifest(_job(1, 1, indexed=False), "job.yaml", 1)
    m.obj["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/exit-code": "0"}}
    assert any("must be an exit code from 1 to 255" in d.message for d in validate([m]))


def test_run_active_deadline_and_ttl_after_finished() -> None:
    """The deadline fails the Job 10 minutes after it started; 60 s later the TTL controller deletes the Job and
    its pods (`get jobs --at` then shows it gone)."""
    res = _run_job({"activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 60},
                   {"kubetwin.io/duration": "1h"}, completions=1, indexed=False)
    versions = [(t, et, o) for t, _, et, o in res.history if o["kind"] == "Job"]
    failed_at = next(t for t, _, o in versions if any(c["type"] == "Failed" for c in
                                                      (o.get("status") or {}).get("conditions") or []))
    started = next(t for t, _, o in versions if (o.get("status") or {}).get("startTime"))
    assert failed_at == pytest.approx(started + 600, abs=1)
    deleted = [t for t, et, _ in versions if et == "DELETED"]
    assert deleted == [pytest.approx(failed_at + 60, abs=1)]
    assert final_objects(res, "Job") == {} and final_objects(res, "Pod") == {}


def test_get_jobs_at_shows_the_job_gone_after_its_ttl(tmp_path) -> None:
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    job = _job(1, 1, indexed=False, ttlSecondsAfterFinished=300)
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "10m"}}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    out = tmp_path / "run"
    run(objects=[make_scenario("1h").obj(), make_pool("cpu", "e2-standard-4", 1).obj(), job], out=out)
    before = CliRunner().invoke(app, ["get", "jobs", "--run", str(out), "--at", "14m"])
    after = CliRunner().invoke(app, ["get", "jobs", "--run", str(out), "--at", "30m"])
    assert before.exit_code == 0 and "Complete" in before.output, before.output
    assert after.exit_code == 0 and " j " not in f" {after.output} " and "Complete" not in after.output, after.output


def test_run_backoff_limit_per_index_reports_failed_indexes() -> None:
    """Every pod fails: each index is tried twice (backoffLimitPerIndex 1), then the Job fails FailedIndexes."""
    res = _run_job({"backoffLimitPerIndex": 1}, {"kubetwin.io/fail-after": "1m"})
    job = final_objects(res, "Job")["x"]
    assert job["status"]["failedIndexes"] == "0,1" and job["status"]["failed"] == 4
    assert _conds(job)[-1] == ("Failed", *policy.FAILED_INDEXES)
    assert len(final_objects(res, "Pod")) == 4


def test_run_success_policy_completes_with_the_leader() -> None:
    """succeededIndexes "0", one pod at a time: the Job completes when index 0 succeeds; no other index runs."""
    job = _job(3, 1, successPolicy={"rules": [{"succeededIndexes": "0"}]})
    job["spec"]["template"]["metadata"] = {"annotations": {"kubetwin.io/duration": "10m"}}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    res = run(objects=[make_scenario("2h").obj(), make_pool("cpu", "e2-standard-4", 1).obj(), job])
    final = final_objects(res, "Job")["j"]
    assert _conds(final) == [("SuccessCriteriaMet", "SuccessPolicy", "Matched rules at index 0"),
                             ("Complete", "SuccessPolicy", "Matched rules at index 0")]
    assert final["status"]["completedIndexes"] == "0" and len(final_objects(res, "Pod")) == 1


# -- validation: the API server's errors -----------------------------------------------------------------------

def _errors(spec_extra: dict, restart: str = "Never", indexed: bool = True) -> list[tuple[str, str]]:
    job = _job(3, 3, indexed=indexed, **spec_extra)
    job["spec"]["template"]["spec"]["restartPolicy"] = restart
    return [(d.field, d.message) for d in validate([Manifest(job, "job.yaml", 1)]) if d.severity == "error"]


@pytest.mark.parametrize(("extra", "restart", "indexed", "want"), [
    ({"podFailurePolicy": {"rules": [_exit_rule("FailJob", "In", [1])]}}, "OnFailure", True,
     ("spec.template.spec.restartPolicy",
      'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified')),
    ({"podFailurePolicy": {"rules": [_exit_rule("FailIndex", "In", [1])]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0].action",
      'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set')),
    ({"podFailurePolicy": {"rules": [_exit_rule("FailJob", "In", [0, 1])]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "Invalid value: 0: must not be 0 for the In operator")),
    ({"podFailurePolicy": {"rules": [_exit_rule("FailJob", "In", [2, 1])]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0].onExitCodes.values", "Invalid value: []int32{2, 1}: must be ordered")),
    ({"podFailurePolicy": {"rules": [_exit_rule("FailJob", "In", [1, 1])]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0].onExitCodes.values[1]", "Duplicate value: 1")),
    ({"podFailurePolicy": {"rules": [_exit_rule("FailJob", "In", [1], "nope")]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0].onExitCodes.containerName",
      'Invalid value: "nope": must be one of the container or initContainer names in the pod template')),
    ({"podFailurePolicy": {"rules": [_exit_rule("Restart", "In", [1])]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0].action",
      'Unsupported value: "Restart": supported values: "Count", "FailIndex", "FailJob", "Ignore"')),
    ({"podFailurePolicy": {"rules": [{"action": "Ignore"}]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0]",
      "Invalid value: specifying one of OnExitCodes and OnPodConditions is required")),
    ({"podFailurePolicy": {"rules": [{**_exit_rule("Ignore", "In", [1]), **_cond_rule("Ignore")}]}}, "Never", True,
     ("spec.podFailurePolicy.rules[0]",
      "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported")),
    ({"podFailurePolicy": {"rules": [_cond_rule("Ignore")]}, "podReplacementPolicy": "TerminatingOrFailed"},
     "Never", True, ("spec.podReplacementPolicy", 'Unsupported value: "TerminatingOrFailed": supported values: '
                     '"Failed"')),
    ({"maxFailedIndexes": 1}, "Never", True,
     ("spec.backoffLimitPerIndex", "Required value: when maxFailedIndexes is specified")),
    ({"backoffLimitPerIndex": 1}, "Never", False,
     ("spec.backoffLimitPerIndex", "Invalid value: 1: requires indexed completion mode")),
    ({"backoffLimitPerIndex": 1, "maxFailedIndexes": 4}, "Never", True,
     ("spec.maxFailedIndexes", "Invalid value: 4: must be less than or equal to completions")),
    ({"successPolicy": {"rules": []}}, "Never", True,
     ("spec.successPolicy.rules",
      "Required value: at least one rules must be specified when the successPolicy is specified")),
    ({"successPolicy": {"rules": [{"succeededIndexes": "0-5"}]}}, "Never", True,
     ("spec.successPolicy.rules[0].succeededIndexes",
      'Invalid value: "0-5": error parsing succeededIndexes: too large index: "5"')),
    ({"successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 3}]}}, "Never", True,
     ("spec.successPolicy.rules[0].succeededCount", "Invalid value: 3: must be less than or equal to 2 (the number "
      "of indexes in the specified succeededIndexes field)")),
    ({"activeDeadlineSeconds": -1}, "Never", True,
     ("spec.activeDeadlineSeconds", "Invalid value: -1: must be greater than or equal to 0")),
])
def test_validate_refuses_what_the_api_server_refuses(extra: dict, restart: str, indexed: bool, want: tuple) -> None:
    assert want in _errors(extra, restart, indexed)


def test_validate_accepts_gkes_recommended_policy_without_notices() -> None:
    """GKE's TPU/JobSet guides: Ignore on DisruptionTarget, FailJob on exit code 42; no 'not simulated' notice."""
    rules = [_cond_rule("Ignore"), _exit_rule("FailJob", "In", [42])]
    job = _job(2, 2, podFailurePolicy={"rules": rules}, activeDeadlineSeconds=3600, ttlSecondsAfterFinished=60,
               backoffLimitPerIndex=1, maxFailedIndexes=1, successPolicy={"rules": [{"succeededIndexes": "0"}]})
    assert [d for d in validate([Manifest(job, "job.yaml", 1)]) if "not simulated" in d.message] == []


def test_validate_notices_a_condition_the_twin_never_sets() -> None:
    job = _job(2, 2, podFailurePolicy={"rules": [_cond_rule("Ignore", "ConfigIssue")]})
    [d] = [d for d in validate([Manifest(job, "job.yaml", 1)]) if d.severity == "notice" and "ConfigIssue" in d.message]
    assert d.field == "spec.podFailurePolicy.rules[0].onPodConditions[0].type"


def test_jobset_template_restart_policy_defaults_to_on_failure_so_a_pod_failure_policy_is_refused() -> None:
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "js", "namespace": "default"},
          "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {
              "parallelism": 1, "completions": 1, "podFailurePolicy": {"rules": [_exit_rule("FailJob", "In", [42])]},
              "template": {"spec": {"containers": [{"name": "main-container", "image": "x"}]}}}}}]}}
    errs = [(d.field, d.message) for d in validate([Manifest(js, "js.yaml", 1)]) if d.severity == "error"]
    assert ("spec.replicatedJobs[0].template.spec.template.spec.restartPolicy",
            'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified') in errs


def test_jobset_restart_job_action_is_refused_without_the_feature_gate() -> None:
    """RestartJob is modelled (controllers/jobset_policy.py); upstream's webhook refuses it while the JobSet
    manager's RestartJob gate is off (pkg/webhooks/jobset_webhook.go validateFailurePolicy), as the twin does."""
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "js", "namespace": "default"},
          "spec": {"failurePolicy": {"maxRestarts": 2, "rules": [{"action": "RestartJob"}]},
                   "replicatedJobs": [{"name": "w", "template": {"spec": {
                       "parallelism": 1, "completions": 1,
                       "template": {"spec": {"containers": [{"name": "main-container", "image": "x"}]}}}}}]}}
    [d] = [d for d in validate([Manifest(js, "js.yaml", 1)]) if d.field == "spec.failurePolicy.rules[0].action"]
    assert d.severity == "error" and "not allowed when RestartJob feature gate is disabled" in d.message

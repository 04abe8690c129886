"""JobSet's policies checked against kubernetes-sigs/jobset's own cases (@08dfbdfd, Apache-2.0: the cases' facts,
re-written here). Each case names its upstream file and case: pkg/controllers/failure_policy_test.go,
success_policy_test.go, startup_policy_test.go, depends_on_test.go (unit cases, on controllers.jobset_policy),
pkg/webhooks/jobset_webhook_test.go TestValidateCreate (through `kubetwin validate`) and
test/integration/controller/jobset_controller_test.go (whole runs of the twin)."""

from __future__ import annotations

import copy

import pytest
from conftest import condition, final_objects
from test_jobset import cluster, jobset, rjob

from kubetwin.api.loader import Manifest
from kubetwin.api.twin import TWIN_API
from kubetwin.controllers import jobset_policy as P
from kubetwin.runner import run
from kubetwin.validation.validate import validate

FP = "pkg/controllers/failure_policy_test.go"
SP = "pkg/controllers/success_policy_test.go"
ST = "pkg/controllers/startup_policy_test.go"
DO = "pkg/controllers/depends_on_test.go"
WH = "pkg/webhooks/jobset_webhook_test.go TestValidateCreate"
IT = "test/integration/controller/jobset_controller_test.go"
BACKOFF, DEADLINE, INDEXES = "BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes"


def failed_job(name: str, at: str, reason: str = BACKOFF, message: str = "", rjob_name: str | None = "rj",
               index: int = 0) -> dict:
    """A child Job whose Failed condition is True since `at`."""
    labels = {P.JOB_INDEX: str(index), **({P.RJOB_NAME: rjob_name} if rjob_name else {})}
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": reason, "message": message, "lastTransitionTime": at}]}}


# -- failure_policy_test.go -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "failed", "want"), [
    ("No failed jobs", [], None),
    ("Single failed job", [failed_job("job1", "2026-01-01T05:00:00Z")], "job1"),
    ("Multiple failed jobs, earliest first",
     [failed_job("job1", "2026-01-01T03:00:00Z"), failed_job("job2", "2026-01-01T01:00:00Z")], "job2"),
    ("Jobs without failed condition", [{"metadata": {"name": "job1"}}, {"metadata": {"name": "job2"}}], None),
])
def test_find_first_failed_job(case: str, failed: list, want: str | None) -> None:
    """FP TestFindFirstFailedJob."""
    got = P.first_failed_job(failed)
    assert (got["metadata"]["name"] if got else None) == want, case


RJ1, RJ2 = "test-replicated-job-1", "test-replicated-job-2"


@pytest.mark.parametrize(("case", "rule", "parent", "reason", "message", "want"), [
    ("matches all possible parent replicated jobs and matches all possible job failure reasons",
     {"onJobFailureReasons": [], "targetReplicatedJobs": []}, RJ1, BACKOFF, "", True),
    ("matches all possible parent replicated jobs and matches the job failure reason",
     {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": []}, RJ1, BACKOFF, "", True),
    ("matches all possible parent replicated jobs and does not match the job failure reason",
     {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": []}, RJ1, DEADLINE, "", False),
    ("matches the parent replicatedJob and matches all possible job failure reasons",
     {"onJobFailureReasons": [], "targetReplicatedJobs": [RJ1]}, RJ1, BACKOFF, "", True),
    ("matches the parent replicatedJob and matches the job failure reason",
     {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]}, RJ1, BACKOFF, "", True),
    ("matches the parent replicatedJob and does not match the job failure reason",
     {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]}, RJ1, DEADLINE, "", False),
    ("does not match the parent replicatedJob and matches all possible job failure reasons",
     {"onJobFailureReasons": [], "targetReplicatedJobs": [RJ1]}, RJ2, BACKOFF, "", False),
    ("does not match the parent replicatedJob and matches the job failure reason",
     {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]}, RJ2, BACKOFF, "", False),
    ("does not match the parent replicatedJob and does not match the job failure reason",
     {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]}, RJ2, DEADLINE, "", False),
    ("matches the job failure message pattern",
     {"onJobFailureMessagePatterns": ["^job failed because.*"]}, RJ1, "", "job failed because of a bug", True),
    ("does not match the job failure message pattern",
     {"onJobFailureMessagePatterns": ["^job failed because.*"]}, RJ1, "", "another error message", False),
    ("matches both the job failure reason and message pattern",
     {"onJobFailureReasons": [BACKOFF], "onJobFailureMessagePatterns": [".*bug.*"]}, RJ1, BACKOFF,
     "job failed because of a bug", True),
    ("matches the job failure reason but not the message pattern",
     {"onJobFailureReasons": [BACKOFF], "onJobFailureMessagePatterns": [".*bug.*"]}, RJ1, BACKOFF,
     "job failed due to something else", False),
])
def test_failure_policy_rule_is_applicable(case: str, rule: dict, parent: str, reason: str, message: str,
                                           want: bool) -> None:
    """FP TestFailurePolicyRuleIsApplicable: "a job has failed and the failure policy rule <case>"."""
    job = failed_job("test-job", "2026-01-01T00:00:00Z", rjob_name=parent)
    assert P.rule_applies(rule, job, reason, message) is want, case


def test_a_job_without_its_replicated_job_label_matches_no_rule_and_a_bad_pattern_matches_nothing() -> None:
    """failure_policy.go ruleIsApplicable (no parent replicatedJob) and anyMatchFound (an invalid regex is logged
    and skipped)."""
    assert not P.rule_applies({}, failed_job("j", "t", rjob_name=None), BACKOFF, "")
    assert not P.rule_applies({"onJobFailureMessagePatterns": ["("]}, failed_job("j", "t"), BACKOFF, "(")
    assert P.rule_applies({"onJobFailureMessagePatterns": ["(", "bug"]}, failed_job("j", "t"), BACKOFF, "a bug")


_J1 = failed_job("job1", "2026-01-01T06:00:00Z", BACKOFF, rjob_name="test-replicatedJob")
_J1_EARLIER = failed_job("job1DupEarlierFailure", "2026-01-01T00:00:00Z", BACKOFF, rjob_name="test-replicatedJob")
_J2 = failed_job("job2", "2026-01-01T09:00:00Z", DEADLINE, rjob_name="test-replicatedJob")
_J3 = failed_job("job3", "2026-01-01T11:00:00Z", INDEXES, rjob_name="test-replicatedJob")
_R1 = {"name": "r1", "action": "RestartJobSet", "onJobFailureReasons": [BACKOFF]}
_R2 = {"name": "r2", "action": "RestartJobSet", "onJobFailureReasons": [DEADLINE]}
_R3 = {"name": "r3", "action": "RestartJobSet", "onJobFailureReasons": [INDEXES]}
_UNMATCHED = {"name": "u", "action": "RestartJobSet", "targetReplicatedJobs": ["fakeReplicatedJobName"]}


@pytest.mark.parametrize(("case", "rules", "failed", "want_rule", "want_job"), [
    ("There are 0 failed jobs and there are 0 failure policy rules", [], [], None, None),
    ("There is 1 failed job and there are 0 failure policy rules", [], [_J1], None, None),
    ("There is 1 failed job, there is 1 failure policy rule, and the failure policy rule does not match the job",
     [_R2], [_J1], None, None),
    ("There is 1 failed job, there are 3 failure policy rules, and the failed job matches the first failure policy "
     "rule", [_R1, _R2, _R3], [_J1], "r1", "job1"),
    ("There is 1 failed job, there are 3 failure policy rules, the failed job does not match the first failure "
     "policy rule, and the failed job matches the second failure policy rule", [_R1, _R2, _R3], [_J2], "r2", "job2"),
    ("There is 1 failed job, there are 3 failure policy rules, the failed job does not match the first nor second "
     "failure policy rules, and the failed job matches the third failure policy rule", [_R1, _R2, _R3], [_J3], "r3",
     "job3"),
    ("There are 2 failed jobs and there are 0 failure policy rules", [], [_J1, _J2], None, None),
    ("There are 2 failed jobs, the second job failed before the first job, there is 1 failure policy rule, and the "
     "failure policy rule does not match any of the jobs", [_R2], [_J1, _J1_EARLIER], None, None),
    ("There are 2 failed jobs, the second job failed before the first job, there is 1 failure policy rule, and the "
     "failure policy rule matches both jobs", [_R1], [_J1, _J1_EARLIER], "r1", "job1DupEarlierFailure"),
    ("There are 2 failed jobs, the second job failed before the first job, there are 2 failure policy rules, the "
     "first failure policy does not match any of the jobs, and the second failure policy rule matches both jobs",
     [_UNMATCHED, _R1], [_J1, _J1_EARLIER], "r1", "job1DupEarlierFailure"),
])
def test_find_first_failed_policy_rule_and_job(case: str, rules: list, failed: list, want_rule: str | None,
                                               want_job: str | None) -> None:
    """FP TestFindFirstFailedPolicyRuleAndJob."""
    rule, job = P.first_matching_rule(rules, failed)
    assert ((rule or {}).get("name"), (job or {}).get("metadata", {}).get("name")) == (want_rule, want_job), case


def _js(max_restarts: int, restarts: int = 0, toward: int = 0, rjob_status: dict | None = None) -> tuple[dict, dict]:
    spec = {"failurePolicy": {"maxRestarts": max_restarts}, "replicatedJobs": [{"name": "rjob", "replicas": 1}]}
    st = {"name": "rjob", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0, **(rjob_status or {})}
    status = {"restarts": restarts, "conditions": [], "replicatedJobsStatus": [st]}
    if toward:
        status["restartsCountTowardsMax"] = toward
    return spec, status


_FAILED = failed_job("failed-job", "2026-01-01T00:00:00Z", rjob_name="rjob")


@pytest.mark.parametrize(("case", "setup", "action", "rule", "want"), [
    ("FailJobSet action", _js(0), "FailJobSet", None,
     {"terminal": "Failed", "cond": ("Failed", "True", "FailJobSetFailurePolicyAction")}),
    ("RestartJobSet when restarts < maxRestarts increments restarts count and counts towards max", _js(5, 1, 1),
     "RestartJobSet", None,
     {"restarts": 2, "toward": 2, "cond": ("RestartingJobSet", "True", "DefaultFailurePolicy")}),
    ("RestartJobSet when restarts < maxRestarts with matching rule sets FailurePolicy_{RuleName} reason",
     _js(5, 1, 1), "RestartJobSet", {"name": "Rule1", "action": "RestartJobSet"},
     {"restarts": 2, "toward": 2, "cond": ("RestartingJobSet", "True", "FailurePolicy_Rule1")}),
    ("RestartJobSet action when restarts >= maxRestarts fails the jobset", _js(2, 2, 2), "RestartJobSet", None,
     {"restarts": 2, "toward": 2, "terminal": "Failed", "cond": ("Failed", "True", "ReachedMaxRestarts")}),
    ("RestartJobSetAndIgnoreMaxRestarts action does not count toward max restarts", _js(1, 1, 1),
     "RestartJobSetAndIgnoreMaxRestarts", None,
     {"restarts": 2, "toward": 1, "cond": ("RestartingJobSet", "True", "DefaultFailurePolicy")}),
    ("RestartJob action when combined restarts < maxRestarts increments jobRestart count and counts towards max",
     _js(5, 0, 0, {"jobRestarts": [0], "jobRestartsCountTowardsMax": [0]}), "RestartJob", None,
     {"restarts": 0, "toward": 0, "jobRestarts": [1], "jobToward": [1]}),
    ("RestartJob action when combined restarts >= maxRestarts fails the jobset",
     _js(2, 1, 1, {"jobRestarts": [1], "jobRestartsCountTowardsMax": [1]}), "RestartJob", None,
     {"restarts": 1, "toward": 1, "jobRestarts": [1], "jobToward": [1], "terminal": "Failed",
      "cond": ("Failed", "True", "ReachedMaxRestarts")}),
    ("RestartJobSet action when combined restarts >= maxRestarts and a previous individual restart fails the jobset",
     _js(2, 1, 1, {"jobRestarts": [1], "jobRestartsCountTowardsMax": [1]}), "RestartJobSet", None,
     {"restarts": 1, "toward": 1, "jobRestarts": [1], "jobToward": [1], "terminal": "Failed",
      "cond": ("Failed", "True", "ReachedMaxRestarts")}),
    ("RestartJobAndIgnoreMaxRestarts action does not count toward max restarts",
     _js(1, 0, 0, {"jobRestarts": [1], "jobRestartsCountTowardsMax": [0]}), "RestartJobAndIgnoreMaxRestarts", None,
     {"restarts": 0, "toward": 0, "jobRestarts": [2], "jobToward": [0]}),
])
def test_apply_failure_policy_rule_action(case: str, setup: tuple[dict, dict], action: str, rule: dict | None,
                                          want: dict) -> None:
    """FP TestApplyFailurePolicyRuleAction: the JobSet status each action leaves."""
    spec, status = copy.deepcopy(setup)
    events: list = []
    P.apply_action(spec, status, events, action, _FAILED, rule)
    assert status["restarts"] == want.get("restarts", 0), case
    assert status.get("restartsCountTowardsMax", 0) == want.get("toward", 0), case
    assert status.get("terminalState") == want.get("terminal"), case
    st = status["replicatedJobsStatus"][0]
    assert st.get("jobRestarts") == want.get("jobRestarts"), case
    assert st.get("jobRestartsCountTowardsMax") == want.get("jobToward"), case
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == (
        [want["cond"]] if "cond" in want else []), case
    assert events, case  # shouldUpdate: every action queues at least one event for the status update


def test_restart_actions_messages_and_events_are_upstreams() -> None:
    """failure_policy.go's event and condition messages (constants.go), and the first failed job they name."""
    spec, status = _js(3)
    events: list = []
    P.apply_action(spec, status, events, "RestartJobSet", _FAILED, {"name": "Rule1"})
    msg = "applying RestartJobSet failure policy action (first failed job: failed-job)"
    assert events == [("Warning", "FailurePolicy_Rule1", msg), ("Warning", "RestartJobSetFailurePolicyAction", msg)]
    assert status["conditions"][0]["message"] == msg
    events = []
    P.apply_action(spec, status, events, "RestartJob", _FAILED, None)
    assert events == [("Warning", "RestartJobFailurePolicyAction",
                       "applying RestartJob failure policy action (first failed job: failed-job)")]
    events = []
    P.execute_failure_policy({"replicatedJobs": spec["replicatedJobs"]}, status, events, [_FAILED])
    failed = P.find_condition(status["conditions"], "Failed")
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs", "jobset failed due to one or more job failures (first failed job: failed-job)")
    restarting = P.find_condition(status["conditions"], "RestartingJobSet")
    assert (restarting["status"], restarting["reason"], restarting["message"]) == ("False", "JobSetFailed",
                                                                                  "jobset failed")
    assert status["terminalState"] == "Failed"


# -- success_policy_test.go -----------------------------------------------------------------------------------------
def _job_of(rjob_name: str) -> dict:
    return {"metadata": {"name": f"js-{rjob_name}-0", "labels": {P.RJOB_NAME: rjob_name}}}


def _sp(operator: str, targets: list[str], *rjobs: tuple[str, int]) -> dict:
    return {"successPolicy": {"operator": operator, "targetReplicatedJobs": targets},
            "replicatedJobs": [{"name": n, "replicas": r} for n, r in rjobs]}


@pytest.mark.parametrize(("case", "targets", "rjob_name", "want"), [
    ("jobset's TargetReplicatedJobs is empty", [], "rjob1", True),
    ("job matches one of the TargetReplicatedJobs", ["rjob1", "rjob2"], "rjob1", True),
    ("job does not match any of the TargetReplicatedJobs", ["rjob2"], "rjob1", False),
])
def test_job_matches_success_policy(case: str, targets: list, rjob_name: str, want: bool) -> None:
    """SP TestJobMatchesSuccessPolicy and TestReplicatedJobMatchesSuccessPolicy."""
    spec = _sp("All", targets, ("rjob1", 1))
    assert P.job_matches_success_policy(spec, _job_of(rjob_name)) is want, case
    assert P.replicated_job_matches_success_policy(spec, {"name": rjob_name}) is want, case


T1, T2, T3, T4 = (f"test-replicated-job-{i}" for i in range(1, 5))


@pytest.mark.parametrize(("case", "targets", "jobs", "want"), [
    ("one job matches the success policy", [T1, T2], [T1, T3], 1),
    ("all jobs matches the success policy", [T1, T2], [T1, T2], 2),
    ("no jobs match the success policy", [T1, T2], [T3, T4], 0),
    ("empty target replicated jobs, all job matches the success policy", [], [T1, T2], 2),
])
def test_num_jobs_matching_success_policy(case: str, targets: list, jobs: list, want: int) -> None:
    """SP TestNumJobsMatchingSuccessPolicy."""
    assert P.num_jobs_matching_success_policy(_sp("All", targets), [_job_of(j) for j in jobs]) == want, case


@pytest.mark.parametrize(("case", "spec", "want"), [
    ("any job completion fulfills success policy", _sp("Any", [], ("rjob1", 3), ("rjob2", 2)), 1),
    ("all replicated jobs match success policy", _sp("All", [], ("rjob1", 3), ("rjob2", 2)), 5),
    ("some replicated jobs don't match success policy", _sp("All", ["rjob2"], ("rjob1", 3), ("rjob2", 2)), 2),
])
def test_num_jobs_expected_to_succeed(case: str, spec: dict, want: int) -> None:
    """SP TestNumJobsExpectedToSucceed."""
    assert P.num_jobs_expected_to_succeed(spec) == want, case


# -- startup_policy_test.go, depends_on_test.go ---------------------------------------------------------------------
@pytest.mark.parametrize(("case", "policy", "want"), [
    ("startup policy AnyOrder", {"startupPolicyOrder": "AnyOrder"}, False),
    ("startup policy InOrder", {"startupPolicyOrder": "InOrder"}, True),
    ("nil startup policy", None, False),
])
def test_in_order_startup_policy(case: str, policy: dict | None, want: bool) -> None:
    """ST TestInOrderStartupPolicy."""
    assert P.in_order({"startupPolicy": policy} if policy else {}) is want, case


@pytest.mark.parametrize(("case", "replicas", "st", "want"), [
    ("replicas 1; no replicatedJobStatus", 1, {}, False),
    ("replicas 4; replicatedJobStatus all ready", 4, {"ready": 4}, True),
    ("replicas 4; replicatedJobStatus mix of ready, failed and succeeded", 4,
     {"ready": 2, "failed": 1, "succeeded": 1}, True),
    ("replicas 4; replicatedJobStatus all active", 4, {"active": 4}, False),
])
def test_replicated_job_started(case: str, replicas: int, st: dict, want: bool) -> None:
    """ST TestReplicatedJobStarted."""
    assert P.all_replicas_started(replicas, {"name": "rj", **st}) is want, case


MODEL, DATASET, TRAINER = "model-initializer", "dataset-initializer", "trainer-node"


def _status(name: str, ready: int = 0, succeeded: int = 0, failed: int = 0) -> dict:
    return {"name": name, "ready": ready, "succeeded": succeeded, "failed": failed, "suspended": 0, "active": 0}


@pytest.mark.parametrize(("case", "deps", "replicas", "statuses", "want"), [
    ("ReplicatedJob doesn't have any dependencies", [], {MODEL: 1}, [], True),
    ("status for ReplicatedJob is nil", [(MODEL, "Complete")], {MODEL: 1, TRAINER: 1},
     [_status("invalid", succeeded=1)], False),
    ("rJobStatuses is nil", [(MODEL, "Complete")], {MODEL: 1, TRAINER: 1}, None, False),
    ("depends on ReplicatedJob reaches complete status", [(MODEL, "Complete"), (DATASET, "Complete")],
     {MODEL: 2, DATASET: 2, TRAINER: 1}, [_status(MODEL, succeeded=2), _status(DATASET, succeeded=2)], True),
    ("one depends on ReplicatedJob doesn't reach complete status", [(MODEL, "Complete"), (DATASET, "Complete")],
     {MODEL: 2, DATASET: 2, TRAINER: 1}, [_status(MODEL, succeeded=1), _status(DATASET, succeeded=2)], False),
    ("two depends on ReplicatedJob doesn't reach complete status", [(MODEL, "Complete"), (DATASET, "Complete")],
     {MODEL: 2, DATASET: 2, TRAINER: 1}, [_status(MODEL, succeeded=1), _status(DATASET, succeeded=1)], False),
    ("depends on ReplicatedJob reaches ready status", [(MODEL, "Ready"), (DATASET, "Ready")],
     {MODEL: 3, DATASET: 3, TRAINER: 1},
     [_status(MODEL, ready=1, succeeded=1, failed=1), _status(DATASET, ready=1, succeeded=1, failed=1)], True),
    ("one depends on ReplicatedJob doesn't reach ready status", [(MODEL, "Ready"), (DATASET, "Ready")],
     {MODEL: 3, DATASET: 3, TRAINER: 1}, [_status(MODEL, ready=2), _status(DATASET, ready=1, succeeded=1, failed=1)],
     False),
    ("two depends on ReplicatedJobs doesn't reach ready status", [(MODEL, "Ready"), (DATASET, "Ready")],
     {MODEL: 3, DATASET: 3, TRAINER: 1}, [_status(MODEL, ready=2), _status(DATASET, ready=2)], False),
])
def test_dependency_reached_status(case: str, deps: list, replicas: dict, statuses: list | None, want: bool) -> None:
    """DO TestDependencyReachedStatus."""
    rj = {"name": TRAINER, "dependsOn": [{"name": n, "status": s} for n, s in deps]}
    assert P.dependency_reached(rj, replicas, statuses) is want, case


# -- jobset_webhook_test.go TestValidateCreate, through kubetwin validate -------------------------------------------
def _rj(name: str, replicas: int = 1, completions: int | None = 1, **extra) -> dict:
    spec: dict = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    if completions is not None:
        spec |= {"completionMode": "Indexed", "completions": completions, "parallelism": completions}
    return {"name": name, "replicas": replicas, "template": {"spec": spec}, **extra}


def _refusals(spec: dict, name: str = "js", scenario: dict | None = None) -> list[tuple[str, str]]:
    """validate's errors for a JobSet (and an optional Scenario spec): (field, message after "is invalid: ")."""
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace":
                                                                                      "default"}, "spec": spec}
    ms = [Manifest(obj, "js.yaml", 1)]
    if scenario is not None:
        ms.append(Manifest({"apiVersion": TWIN_API, "kind": "Scenario", "metadata": {"name": "s"}, "spec": scenario},
                           "s.yaml", 1))
    out = []
    for d in validate(ms):
        if d.severity == "error":
            head = f'admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "{name}" is invalid: '
            assert d.message.startswith(head), d.message
            out.append((d.field, d.message.removeprefix(head)))
    return out


def _internal(msg: str) -> str:
    return f"<nil>: Internal error: {msg}"


NAME_RULE = ("a failure policy rule name must start with an alphabetic character, optionally followed by a string of "
             "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'")


@pytest.mark.parametrize(("case", "spec", "want"), [
    ("success policy has non matching replicated job",
     {"replicatedJobs": [_rj("rj")], "successPolicy": {"operator": "All", "targetReplicatedJobs": ["does not exist"]}},
     [("spec.successPolicy.targetReplicatedJobs[0]",
       _internal("invalid replicatedJob name 'does not exist' does not appear in .spec.ReplicatedJobs"))]),
    ("jobset failure policy has an invalid on job failure reason",
     {"replicatedJobs": [_rj("rj")], "failurePolicy": {"rules": [
         {"action": "FailJobSet", "onJobFailureReasons": ["fakeReason"]}]}},
     [("spec.failurePolicy.rules[0].onJobFailureReasons[0]",
       _internal("invalid job failure reason 'fakeReason' in failure policy is not a recognized job failure reason"))]),
    ("jobset failure policy has an invalid replicated job",
     {"replicatedJobs": [_rj("rj")], "failurePolicy": {"rules": [
         {"action": "FailJobSet", "targetReplicatedJobs": ["fakeReplicatedJob"]}]}},
     [("spec.failurePolicy.rules[0].targetReplicatedJobs[0]", _internal(
         "invalid replicatedJob name 'fakeReplicatedJob' in failure policy does not appear in .spec.ReplicatedJobs"))]),
    ("there are two failure policy rules with the same name",
     {"replicatedJobs": [_rj("rj")], "failurePolicy": {"rules": [
         {"name": "repeatedRuleName", "action": "FailJobSet"}, {"name": "repeatedRuleName", "action": "FailJobSet"}]}},
     [("spec.failurePolicy.rules[1].name", _internal(
         "rule names are not unique, rules with indices [0 1] all have the same name 'repeatedRuleName'"))]),
    ("failure policy rule name does not start with an alphabetic character",
     {"replicatedJobs": [_rj("rj")], "failurePolicy": {"rules": [{"name": "1ruleToRuleThemAll",
                                                                   "action": "FailJobSet"}]}},
     [("spec.failurePolicy.rules[0].name",
       _internal(f"invalid failure policy rule name '1ruleToRuleThemAll', {NAME_RULE}"))]),
    ("failure policy rule name does not end with an alphanumeric nor '_'",
     {"replicatedJobs": [_rj("rj")], "failurePolicy": {"rules": [{"name": "ruleToRuleThemAll,",
                                                                   "action": "FailJobSet"}]}},
     [("spec.failurePolicy.rules[0].name",
       _internal(f"invalid failure policy rule name 'ruleToRuleThemAll,', {NAME_RULE}"))]),
    ("jobset failure policy rule name is greater than 128 characters long",
     {"replicatedJobs": [_rj("rj")], "failurePolicy": {"rules": [{"name": "a" * 129, "action": "FailJobSet"}]}},
     [("spec.failurePolicy.rules[0].name", _internal(
         "invalid failure policy rule name of length 129, the rule name must be at least 1 characters long and at "
         "most 128 characters long"))]),
    ("coordinator replicated job does not exist",
     {"replicatedJobs": [_rj("replicatedjob-a", 2, 2)], "coordinator": {"replicatedJob": "fake-rjob"}},
     [("spec.coordinator.replicatedJob", _internal("coordinator replicatedJob fake-rjob does not exist"))]),
    ("coordinator replicated job missing completions",
     {"replicatedJobs": [_rj("replicatedjob-a", 2, None)], "coordinator": {"replicatedJob": "replicatedjob-a"}},
     [("spec.coordinator", _internal("job for coordinator pod must be indexed completion mode, and completions "
                                     "number must be set"))]),
    ("coordinator job index invalid",
     {"replicatedJobs": [_rj("replicatedjob-a", 2, 2)],
      "coordinator": {"replicatedJob": "replicatedjob-a", "jobIndex": 2}},
     [("spec.coordinator.jobIndex",
       _internal("coordinator job index 2 is invalid for replicatedJob replicatedjob-a"))]),
    ("coordinator pod index invalid",
     {"replicatedJobs": [_rj("replicatedjob-a", 2, 2)],
      "coordinator": {"replicatedJob": "replicatedjob-a", "jobIndex": 1, "podIndex": 2}},
     [("spec.coordinator.podIndex",
       _internal("coordinator pod index 2 is invalid for replicatedJob replicatedjob-a job index 1"))]),
    ("DependsOn is valid since job-3 depends on job-1 and job-2",
     {"replicatedJobs": [_rj("job-1"), _rj("job-2"), _rj("job-3", dependsOn=[
         {"name": "job-1", "status": "Complete"}, {"name": "job-2", "status": "Ready"}])]}, []),
    ("DependsOn is invalid since job-2 depends on job-3",
     {"replicatedJobs": [_rj("job-1"), _rj("job-2", dependsOn=[{"name": "job-3", "status": "Ready"}]), _rj("job-3")]},
     [("spec.replicatedJobs[1].dependsOn[0].name",
       _internal("replicatedJob: job-2 cannot depend on replicatedJob: job-3"))]),
    ("network has invalid dns name",
     {"replicatedJobs": [_rj("test-jobset-replicated-job-0")], "network": {"subdomain": "a" * 64}},
     [("spec.network.subdomain", f'spec.network.subdomain: Invalid value: "{"a" * 64}": .spec.network.subdomain is '
       "too long, must be less than 63 characters")]),
    ("group name is not DNS 1035 compliant",
     {"replicatedJobs": [_rj("rj", groupName="a" * 64)]},
     [("spec.replicatedJobs[0].groupName", f'spec.replicatedJobs[0].groupName: Invalid value: "{"a" * 64}": '
       ".spec.replicatedJob[].groupName is too long, must be less than 63 characters")]),
    ("jobset failure policy rule has RestartJob action and a replicated job with replicas > 1024",
     {"replicatedJobs": [_rj("rj", 1025)], "failurePolicy": {"rules": [{"action": "RestartJob"}]}},
     [("spec.failurePolicy.rules", _internal(
         "JobSet cannot have a failure policy rule with RestartJob or RestartJobAndIgnoreMaxRestarts action and a "
         "replicated job with replicas > 1024"))]),
])
def test_webhook_refusals_in_upstreams_words(case: str, spec: dict, want: list) -> None:
    """WH: the refusals of the JobSet validating webhook, with their field for file:line (the RestartJob cases run
    with the gate on, as upstream's)."""
    assert _refusals(spec, scenario={"jobsetController": {"featureGates": {"RestartJob": True}}}) == want, case


def test_webhook_refuses_overlong_generated_names() -> None:
    """WH "jobset name will result in job name being too long" and "... a pod name being too long"."""
    [(f, msg)] = _refusals({"replicatedJobs": [_rj("rj", 101, None)]}, name="a" * 62)
    assert (f, msg) == ("spec.replicatedJobs[0].name", f'spec.replicatedJobs[0].name: Invalid value: "{"a" * 62}-rj-'
                        '100": JobSet name is too long, job names generated for this JobSet will exceed 63 characters')
    [(f, msg)] = _refusals({"replicatedJobs": [_rj("rj", 1, 1)]}, name="a" * 56)
    assert msg.endswith("JobSet name is too long, pod names generated for this JobSet will exceed 63 characters")


def test_restart_job_actions_need_the_feature_gate() -> None:
    """WH "jobset failure policy rule has RestartJob action and RestartJob feature gate is disabled" (and its
    RestartJobAndIgnoreMaxRestarts twin): refused while the JobSet manager's RestartJob gate is off (its default),
    accepted with the Scenario's jobsetController.featureGates RestartJob: true."""
    for action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
        spec = {"replicatedJobs": [_rj("rj")], "failurePolicy": {"maxRestarts": 1, "rules": [{"action": action}]}}
        assert _refusals(spec) == [("spec.failurePolicy.rules[0].action", _internal(
            "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when RestartJob "
            "feature gate is disabled"))]
        assert _refusals(spec, scenario={"jobsetController": {"featureGates": {"RestartJob": True}}}) == []


def test_first_replicated_job_cannot_depend_and_depends_on_excludes_in_order() -> None:
    """jobset_webhook.go: "DependsOn can't be set for the first ReplicatedJob"; the CRD's CEL rule (jobset_types.go
    JobSetSpec): "StartupPolicy and DependsOn APIs are mutually exclusive"."""
    first = {"replicatedJobs": [_rj("a", dependsOn=[{"name": "a", "status": "Ready"}]), _rj("b")]}
    assert _refusals(first) == [("spec.replicatedJobs[0].dependsOn",
                                 _internal("DependsOn can't be set for the first ReplicatedJob"))]
    both = {"startupPolicy": {"startupPolicyOrder": "InOrder"},
            "replicatedJobs": [_rj("a"), _rj("b", dependsOn=[{"name": "a", "status": "Ready"}])]}
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"}, "spec": both}
    errs = [d.message for d in validate([Manifest(obj, "js.yaml", 1)]) if d.severity == "error"]
    assert any("StartupPolicy and DependsOn APIs are mutually exclusive" in e for e in errs), errs


# -- test/integration/controller/jobset_controller_test.go: whole runs ------------------------------------------------
def _pfp_failing(rj: dict, after: str = "5m") -> dict:
    """The replicatedJob's pods exit 42 after `after`, and a podFailurePolicy FailJob rule on 42 fails the Job with
    reason PodFailurePolicy (as upstream's failJobWithOptions(reason: PodFailurePolicy))."""
    rj = copy.deepcopy(rj)
    jspec = rj["template"]["spec"]
    jspec["template"]["metadata"]["annotations"] |= {"kubetwin.io/fail-after": after, "kubetwin.io/exit-code": "42"}
    jspec["podFailurePolicy"] = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    return rj


def _restart_job_scenario(duration: str = "3h") -> list[dict]:
    objs = cluster()
    objs[0]["spec"]["duration"] = duration
    objs[0]["spec"]["jobsetController"] = {"featureGates": {"RestartJob": True}}
    return objs


def _conditions_seen(result, name: str, ctype: str) -> list[tuple[str, str]]:
    """(status, reason) of the JobSet's condition each time it changed, in order."""
    seen: list[tuple[str, str]] = []
    for _, _, _, o in result.history:
        if o["kind"] == "JobSet" and o["metadata"]["name"] == name and condition(o, ctype):
            c = condition(o, ctype)
            if not seen or seen[-1] != (c["status"], c["reason"]):
                seen.append((c["status"], c["reason"]))
    return seen


def test_restarting_condition_transitions() -> None:
    """IT "jobset restarting condition transitions": a PodFailurePolicy failure under rule Rule1 (RestartJobSet) sets
    RestartingJobSet True with reason FailurePolicy_Rule1; once the recreated Jobs are ready it turns False
    (JobsReady); the second failure passes maxRestarts 1 and the Failed JobSet leaves it False (JobSetFailed)."""
    js = jobset("r", _pfp_failing(rjob("w", replicas=2, duration="1h"), "10m"), failurePolicy={
        "maxRestarts": 1, "rules": [{"name": "Rule1", "action": "RestartJobSet",
                                     "onJobFailureReasons": ["PodFailurePolicy"]}]})
    result = run(objects=[*cluster(), js])
    assert _conditions_seen(result, "r", "RestartingJobSet") == [
        ("True", "FailurePolicy_Rule1"), ("False", "JobsReady"), ("False", "JobSetFailed")]
    final = final_objects(result, "JobSet")["r"]
    assert condition(final, "Failed")["reason"] == "ReachedMaxRestarts" and final["status"]["restarts"] == 1
    msg = condition(final, "RestartingJobSet")["message"]
    assert msg == "jobset failed"
    [restart] = [e.event for e in result.recorded_events("FailurePolicy_Rule1")]
    assert restart["type"] == "Warning" and restart["message"] == (
        "applying RestartJobSet failure policy action (first failed job: r-w-0)")


def test_restart_job_recreates_only_the_failed_job() -> None:
    """IT "[failure policy] jobset restarts with RestartJob failure policy action." (RestartJob gate on): the failed
    Job alone is recreated with job-restart-attempt 1 (jobRestarts [1], jobRestartsCountTowardsMax [1], restarts
    0); the other replicatedJob's Job runs on untouched; the next failure passes maxRestarts 1."""
    flaky = _pfp_failing(rjob("flaky", duration="1h"), "10m")
    js = jobset("s", flaky, rjob("steady", duration="2h"), failurePolicy={"maxRestarts": 1, "rules": [
        {"action": "RestartJob", "onJobFailureReasons": ["PodFailurePolicy"]}, {"action": "FailJobSet"}]})
    result = run(objects=[*_restart_job_scenario(), js])
    steady_uids = {o["metadata"]["uid"] for _, _, et, o in result.history if o["kind"] == "Job"
                   and et == "ADDED" and o["metadata"]["name"] == "s-steady-0"}
    flaky_jobs = [o for _, _, et, o in result.history if o["kind"] == "Job" and et == "ADDED"
                  and o["metadata"]["name"] == "s-flaky-0"]
    assert len(steady_uids) == 1 and len(flaky_jobs) == 2
    assert [j["metadata"]["labels"]["jobset.sigs.k8s.io/job-restart-attempt"] for j in flaky_jobs] == ["0", "1"]
    assert all(j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0" for j in flaky_jobs)
    final = final_objects(result, "JobSet")["s"]
    status = {s["name"]: s for s in final["status"]["replicatedJobsStatus"]}
    assert (status["flaky"]["jobRestarts"], status["flaky"]["jobRestartsCountTowardsMax"]) == ([1], [1])
    assert final["status"]["restarts"] == 0 and "restartsCountTowardsMax" not in final["status"]
    assert condition(final, "Failed")["reason"] == "ReachedMaxRestarts"
    assert condition(final, "Failed")["lastTransitionTime"] == "2026-01-01T00:20:00Z"  # two 10-minute attempts
    events = [e.event for e in result.recorded_events("RestartJobFailurePolicyAction")]
    assert [e["message"] for e in events] == ["applying RestartJob failure policy action (first failed job: s-flaky-0)"]
    assert _conditions_seen(result, "s", "RestartingJobSet") == []  # a per-Job restart is not a JobSet restart


def test_restart_job_and_ignore_max_restarts_counts_each_recreation() -> None:
    """IT "[failure policy] jobset restarts with RestartJobAndIgnoreMaxRestarts failure policy action.": each
    failure bumps jobRestarts only (not the count toward maxRestarts), so the Job is recreated past maxRestarts."""
    js = jobset("i", _pfp_failing(rjob("w", duration="1h"), "10m"), failurePolicy={"maxRestarts": 1, "rules": [
        {"action": "RestartJobAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]},
        {"action": "FailJobSet"}]})
    final = final_objects(run(objects=[*_restart_job_scenario("35m"), js]), "JobSet")["i"]
    [st] = final["status"]["replicatedJobsStatus"]
    assert st["jobRestarts"] == [3] and "jobRestartsCountTowardsMax" not in st
    assert final["status"]["restarts"] == 0 and not condition(final, "Failed")


def test_fail_job_set_only_on_the_reason_and_message_it_names() -> None:
    """IT "[failure policy] jobset does not fail immediately with FailJobSet failure policy action as the failure
    reason is not matched." and "... fails immediately with FailJobSet failure policy action as the failure reason
    and message are matched.": a Job past its activeDeadlineSeconds fails with DeadlineExceeded ("Job was active
    longer than specified deadline")."""
    late = rjob("w", duration="1h")
    late["template"]["spec"]["activeDeadlineSeconds"] = 600
    rule = {"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    other = jobset("a", late, failurePolicy={"maxRestarts": 1, "rules": [rule]})
    final = final_objects(run(objects=[*cluster(), other]), "JobSet")["a"]
    assert final["status"]["restarts"] == 1 and condition(final, "Failed")["reason"] == "ReachedMaxRestarts"
    matched = {"action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"],
               "onJobFailureMessagePatterns": ["active longer than specified deadline$"]}
    fast = jobset("b", late, failurePolicy={"maxRestarts": 1, "rules": [matched]})
    final = final_objects(run(objects=[*cluster(), fast]), "JobSet")["b"]
    failed = condition(final, "Failed")
    assert (failed["reason"], failed["message"]) == (
        "FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action (first failed job: b-w-0)")
    assert final["status"]["restarts"] == 0 and failed["lastTransitionTime"] == "2026-01-01T00:10:00Z"


def test_rules_apply_to_their_target_replicated_jobs_only() -> None:
    """IT "[failure policy] job fails and the parent replicated job is contained in TargetReplicatedJobs." and
    "... is not contained in TargetReplicatedJobs.": FailJobSet targeting the driver leaves a worker's failure to
    the default RestartJobSet."""
    rules = {"maxRestarts": 1, "rules": [{"name": "driverFails", "action": "FailJobSet",
                                          "targetReplicatedJobs": ["driver"]}]}
    workers = jobset("t", rjob("driver", duration="1h"), rjob("workers", duration="1h", fail_after="5m"),
                     failurePolicy=rules)
    final = final_objects(run(objects=[*cluster(), workers]), "JobSet")["t"]
    assert final["status"]["restarts"] == 1 and condition(final, "Failed")["reason"] == "ReachedMaxRestarts"
    driver = jobset("u", rjob("driver", duration="1h", fail_after="5m"), rjob("workers", duration="1h"),
                    failurePolicy=rules)
    final = final_objects(run(objects=[*cluster(), driver]), "JobSet")["u"]
    assert final["status"]["restarts"] == 0 and condition(final, "Failed")["reason"] == "FailJobSetFailurePolicyAction"


def _created(result) -> dict[str, float]:
    return {o["metadata"]["name"]: t for t, _, et, o in result.history if o["kind"] == "Job" and et == "ADDED"}


def test_depends_on_ready_and_complete() -> None:
    """IT "DependsOn: rjob-b depends on ready status of rjob-a" and "DependsOn: rjob-c depends on complete status of
    rjob-a and rjob-b": b's Jobs are created once a's are ready (its pods running), c's once a and b completed."""
    b = rjob("rjob-b", replicas=2, duration="30m")
    b["dependsOn"] = [{"name": "rjob-a", "status": "Ready"}]
    c = rjob("rjob-c", duration="5m")
    c["dependsOn"] = [{"name": "rjob-a", "status": "Complete"}, {"name": "rjob-b", "status": "Complete"}]
    result = run(objects=[*cluster(), jobset("d", rjob("rjob-a", replicas=2, duration="10m"), b, c)])
    created = _created(result)
    a_ready = min(t for t, _, _, o in result.history if o["kind"] == "Job" and o["metadata"]["name"] == "d-rjob-a-1"
                  and (o.get("status") or {}).get("ready"))
    assert created["d-rjob-a-0"] == created["d-rjob-a-1"] == 0.0
    assert a_ready <= created["d-rjob-b-0"] == created["d-rjob-b-1"] < 60  # b waits for a's pods, not a's end
    assert created["d-rjob-c-0"] >= 30 * 60  # after b's 30 minutes
    final = final_objects(result, "JobSet")["d"]
    assert condition(final, "Completed")["reason"] == "AllJobsCompleted"


def test_coordinator_and_headless_service() -> None:
    """IT "jobset with coordinator set should have annotation and label set on all jobs" and "jobset with DNS
    hostnames enabled should created 1 headless service per job and succeed when all jobs succeed": the coordinator
    label and annotation `<jobset>-<rjob>-<job>-<pod>.<subdomain>` on every Job and pod; one headless Service named
    after the subdomain (clusterIP None, selecting the JobSet's pods, publishNotReadyAddresses); the pods' hostname
    and subdomain make the coordinator's name theirs."""
    js = jobset("c", rjob("leader", pods=1, duration="5m"), rjob("workers", replicas=2, pods=2, duration="5m"),
                coordinator={"replicatedJob": "workers", "jobIndex": 1, "podIndex": 1},
                network={"subdomain": "net", "publishNotReadyAddresses": False})
    result = run(objects=[*cluster(), js])
    key = "jobset.sigs.k8s.io/coordinator"
    jobs = [o for _, _, et, o in result.history if o["kind"] == "Job" and et == "ADDED"]
    pods = [o for _, _, et, o in result.history if o["kind"] == "Pod" and et == "ADDED"]
    assert len(jobs) == 3 and len(pods) == 5
    for o in [*jobs, *pods]:
        assert o["metadata"]["labels"][key] == o["metadata"]["annotations"][key] == "c-workers-1-1.net"
    coordinator = [p for p in pods if p["spec"]["hostname"] == "c-workers-1-1"]
    assert len(coordinator) == 1 and coordinator[0]["spec"]["subdomain"] == "net"
    [svc] = final_objects(result, "Service").values()
    assert svc["metadata"]["name"] == "net" and svc["metadata"]["ownerReferences"][0]["name"] == "c"
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is False
    assert svc["spec"]["selector"] == {"jobset.sigs.k8s.io/jobset-name": "c"}
    off = jobset("n", rjob("w", duration="5m"), network={"enableDNSHostnames": False})
    result = run(objects=[*cluster(), off])
    assert not final_objects(result, "Service")
    assert all("subdomain" not in o["spec"] for _, _, _, o in result.history if o["kind"] == "Pod")


def test_group_labels_and_uid_on_every_job() -> None:
    """jobset_controller.go labelAndAnnotateObject: jobset-uid, group-name, group-replicas and job-group-index
    (the index within the replicatedJobs of the same groupName, in spec order)."""
    a, b, c = rjob("a", replicas=2), rjob("b"), rjob("c", replicas=2)
    a["groupName"], b["groupName"], c["groupName"] = "x", "y", "x"
    result = run(objects=[*cluster(), jobset("g", a, b, c)], duration="1m")
    jobs = {o["metadata"]["name"]: o["metadata"]["labels"] for _, _, et, o in result.history
            if o["kind"] == "Job" and et == "ADDED"}
    uid = final_objects(result, "JobSet")["g"]["metadata"]["uid"]
    got = {n: (lab["jobset.sigs.k8s.io/group-name"], lab["jobset.sigs.k8s.io/group-replicas"],
               lab["jobset.sigs.k8s.io/job-group-index"]) for n, lab in jobs.items()}
    assert got == {"g-a-0": ("x", "4", "0"), "g-a-1": ("x", "4", "1"), "g-b-0": ("y", "1", "0"),
                   "g-c-0": ("x", "4", "2"), "g-c-1": ("x", "4", "3")}
    assert all(lab["jobset.sigs.k8s.io/jobset-uid"] == uid for lab in jobs.values())


def _max_failed_indexes(rj: dict) -> dict:
    """The replicatedJob's Jobs fail with reason MaxFailedIndexesExceeded: one failed index is past maxFailedIndexes
    0 (backoffLimitPerIndex 0), as upstream's failFirstMatchingJobWithOptions(reason: MaxFailedIndexesExceeded)."""
    rj = copy.deepcopy(rj)
    jspec = rj["template"]["spec"]
    jspec |= {"completionMode": "Indexed", "backoffLimitPerIndex": 0, "maxFailedIndexes": 0}
    del jspec["backoffLimit"]
    return rj


_A_ONLY = {"onJobFailureReasons": ["MaxFailedIndexesExceeded"], "targetReplicatedJobs": ["replicated-job-a"]}


@pytest.mark.parametrize(("case", "rules", "want"), [
    ("[failure policy] failure policy rules order verification test 1",
     [{"action": "FailJobSet", **_A_ONLY}, {"action": "RestartJobSet", **_A_ONLY}], (0, 0, True)),
    ("[failure policy] failure policy rules order verification test 2",
     [{"action": "RestartJobSet", **_A_ONLY}, {"action": "FailJobSet", **_A_ONLY}], (1, 1, False)),
    ("[failure policy] failure policy rules order verification test 3",
     [{"action": "RestartJobSetAndIgnoreMaxRestarts", **_A_ONLY}, {"action": "FailJobSet"}], (1, 0, False)),
])
def test_failure_policy_rules_order(case: str, rules: list, want: tuple[int, int, bool]) -> None:
    """IT "<case>": the first rule matching decides, whatever the later ones say (the run stops after the first
    failure, at 10m, and before the second, at 20m)."""
    a = _max_failed_indexes(rjob("replicated-job-a", duration="1h", fail_after="10m"))
    js = jobset("o", a, rjob("replicated-job-b", replicas=3, duration="1h"),
                failurePolicy={"maxRestarts": 1, "rules": rules})
    final = final_objects(run(objects=[*cluster(), js], duration="15m"), "JobSet")["o"]
    got = (final["status"]["restarts"], final["status"].get("restartsCountTowardsMax", 0),
           condition(final, "Failed").get("reason") == "FailJobSetFailurePolicyAction")
    assert got == want, case


def test_in_order_suspended_creates_every_job_suspended() -> None:
    """IT "startupPolicy with InOrder; suspend should keep jobs suspended": a suspended InOrder JobSet creates all its
    Jobs, suspended, without waiting for readiness (and sets no StartupPolicy condition)."""
    js = jobset("s", rjob("replicated-job-a"), rjob("replicated-job-b", replicas=3), suspend=True,
                startupPolicy={"startupPolicyOrder": "InOrder"})
    final = final_objects(run(objects=[*cluster(), js], duration="10m"), "JobSet")["s"]
    assert {s["name"]: s["suspended"] for s in final["status"]["replicatedJobsStatus"]} == {
        "replicated-job-a": 1, "replicated-job-b": 3}
    assert not condition(final, "StartupPolicyInProgress") and not condition(final, "StartupPolicyCompleted")


def test_depends_on_resume_waits_for_the_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    """IT "DependsOn: resume suspended JobSet when rjob-b depends on ready status of rjob-a": while suspended only
    rjob-a's Job exists (suspended); resumed at 10m, rjob-a runs and, once ready, rjob-b's 3 Jobs are created
    running."""
    from test_jobset import run_with

    b = rjob("rjob-b", replicas=3, duration="10m")
    b["dependsOn"] = [{"name": "rjob-a", "status": "Ready"}]
    js = jobset("depends-on", rjob("rjob-a", duration="30m"), b, suspend=True)

    def resume(store) -> None:
        store.patch("JobSet", "default", "depends-on", lambda o: {**o, "spec": {**o["spec"], "suspend": False}})

    result = run_with(monkeypatch, [*cluster(), js], [(600.0, resume)], duration="1h")
    created = _created(result)
    assert created["depends-on-rjob-a-0"] == 0.0
    assert all(600 <= created[f"depends-on-rjob-b-{i}"] < 660 for i in range(3))
    first_a = next(o for _, _, et, o in result.history if o["kind"] == "Job" and et == "ADDED")
    assert first_a["spec"]["suspend"] is True
    assert all(not o["spec"]["suspend"] for _, _, et, o in result.history
               if o["kind"] == "Job" and et == "ADDED" and "rjob-b" in o["metadata"]["name"])
    assert condition(final_objects(result, "JobSet")["depends-on"], "Completed")["lastTransitionTime"] == (
        "2026-01-01T00:40:00Z")  # rjob-a's 30 minutes from the resume


def test_volume_claim_policies_are_a_notice() -> None:
    """volume_claim_policy.go is not modelled: validate says so instead of dropping the field silently (the
    template's container mounts the claim, as the webhook requires)."""
    rj = _rj("rj")
    rj["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "cache",
                                                                                    "mountPath": "/cache"}]
    spec = {"replicatedJobs": [rj], "volumeClaimPolicies": [{"templates": [
        {"metadata": {"name": "cache"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                 "resources": {"requests": {"storage": "1Gi"}}}}]}]}
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"}, "spec": spec}
    [d] = [d for d in validate([Manifest(obj, "js.yaml", 1)]) if d.field == "spec.volumeClaimPolicies"]
    assert d.severity == "notice" and "volumeClaimPolicies are not simulated" in d.message

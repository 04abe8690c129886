"""The JobSet controller's policies as pure functions of the JobSet's spec, its status and its child Jobs, so each
can be checked against upstream's unit cases: failurePolicy (rules, actions, restart counting), successPolicy,
startupPolicy InOrder, dependsOn, the conditions' bookkeeping and the coordinator endpoint.

Followed (kubernetes-sigs/jobset @08dfbdfd): pkg/controllers/failure_policy.go, success_policy.go,
startup_policy.go, depends_on.go, jobset_controller.go (updateCondition, setRestartingConditionFalse,
allJobsReady, CoordinatorEndpoint, GetSubdomain), pkg/constants/constants.go (reasons and messages, as written
there), api/jobset/v1alpha2/jobset_types.go (actions, status fields).

`status` is the JobSet's status dict the sync is building; `events` collects (type, reason, message) to emit once
the status update succeeds, as upstream's statusUpdateOpts does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kubetwin.k8s.conditions import conditions_of, find_condition

Obj = dict[str, Any]
Event = tuple[str, str, str]

RJOB_NAME, JOB_INDEX = "jobset.sigs.k8s.io/replicatedjob-name", "jobset.sigs.k8s.io/job-index"

# Reasons and messages, pkg/constants/constants.go
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
RESTART_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
RESTART_IGNORE_ACTION = ("RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
                         "applying RestartJobSetAndIgnoreMaxRestarts failure policy action")
RESTART_JOB_ACTION = ("RestartJobFailurePolicyAction", "applying RestartJob failure policy action")
RESTART_JOB_IGNORE_ACTION = ("RestartJobAndIgnoreMaxRestartsFailurePolicyAction",
                             "applying RestartJobAndIgnoreMaxRestarts failure policy action")
SUSPENDED, RESUMED = ("SuspendedJobs", "jobset is suspended"), ("ResumeJobs", "jobset is resumed")
IN_ORDER = ("InOrderStartupPolicyInProgress", "in order startup policy is in progress")
IN_ORDER_DONE = ("InOrderStartupPolicyCompleted", "in order startup policy has completed")
# The RestartingJobSet condition's reasons (RestartingJobSetReason*)
RESTARTING = "RestartingJobSet"
DEFAULT_FAILURE_POLICY = "DefaultFailurePolicy"
RULE_REASON = "FailurePolicy_{}"  # RestartingJobSetReasonFailurePolicyFormat, with the rule's name
JOBS_READY = ("JobsReady", "all jobs are ready")
JOBSET_FAILED = ("JobSetFailed", "jobset failed")
JOBSET_COMPLETED = ("JobSetCompleted", COMPLETED[1])
JOBSET_SUSPENDED = ("JobSetSuspended", SUSPENDED[1])

# The actions of failurePolicy rules (FailurePolicyAction); the default when no rule matches: RestartJobSet
FAIL_JOBSET, RESTART_JOBSET = "FailJobSet", "RestartJobSet"
RESTART_JOBSET_IGNORE = "RestartJobSetAndIgnoreMaxRestarts"
RESTART_JOB, RESTART_JOB_IGNORE = "RestartJob", "RestartJobAndIgnoreMaxRestarts"
PER_JOB_ACTIONS = (RESTART_JOB, RESTART_JOB_IGNORE)
_EXCLUSIVE = {"StartupPolicyInProgress", "StartupPolicyCompleted"}


# -- conditions -----------------------------------------------------------------------------------------------------
def set_condition(status: dict, events: list[Event], ctype: str, cstatus: str, reason_msg: tuple[str, str],
                  etype: str) -> bool:
    """updateCondition + setCondition: a changed status replaces the condition (a new transition time); the same
    status with another reason or message is rewritten keeping its time; a new True one is appended; the
    StartupPolicy InProgress/Completed pair exclude each other. Each change queues an event with the condition's
    reason and message. Whether anything changed."""
    reason, msg = reason_msg
    conds, changed, found = status["conditions"], False, False
    new = {"type": ctype, "status": cstatus, "reason": reason, "message": msg, "lastTransitionTime": ""}
    for i, c in enumerate(conds):
        if c["type"] == ctype:
            found = True
            if c["status"] != cstatus:
                conds[i], changed = new, True
            elif c.get("reason") != reason or c.get("message") != msg:
                conds[i], changed = {**new, "lastTransitionTime": c.get("lastTransitionTime", "")}, True
        elif {c["type"], ctype} == _EXCLUSIVE and c["status"] == "True" and cstatus == "True":
            conds[i], changed = {**c, "status": "False"}, True
    if not found and cstatus == "True":
        conds.append(new)
        changed = True
    if changed:
        events.append((etype, reason, msg))
    return changed


def restarting_false(status: dict, events: list[Event], reason_msg: tuple[str, str]) -> None:
    """setRestartingConditionFalse: RestartingJobSet False (only where it exists: a False condition is never
    added)."""
    set_condition(status, events, RESTARTING, "False", reason_msg, "Normal")


def fail(status: dict, events: list[Event], reason_msg: tuple[str, str], job_name: str) -> None:
    """setJobSetFailedCondition: Failed with the first failed job in the message, RestartingJobSet False,
    terminalState Failed."""
    reason, msg = reason_msg
    set_condition(status, events, "Failed", "True", (reason, with_first_failed_job(msg, job_name)), "Warning")
    restarting_false(status, events, JOBSET_FAILED)
    status["terminalState"] = "Failed"


def complete(status: dict, events: list[Event]) -> None:
    """setJobSetCompletedCondition."""
    set_condition(status, events, "Completed", "True", COMPLETED, "Normal")
    restarting_false(status, events, JOBSET_COMPLETED)
    status["terminalState"] = "Completed"


def with_first_failed_job(msg: str, job_name: str) -> str:
    """messageWithFirstFailedJob."""
    return f"{msg} (first failed job: {job_name})"


# -- failure policy -------------------------------------------------------------------------------------------------
def failure_condition(job: Obj) -> Obj | None:
    """findJobFailureCondition: the Job's Failed condition when it is True."""
    cond = find_condition(conditions_of(job), "Failed")
    return cond if cond is not None and cond.get("status") == "True" else None


def _failure_time(job: Obj) -> str:
    return (failure_condition(job) or {}).get("lastTransitionTime", "")


def first_failed_job(failed: Sequence[Obj]) -> Obj | None:
    """findFirstFailedJob: the Job whose Failed condition is the oldest (the first listed among equals: the API
    lists by name)."""
    best: Obj | None = None
    for job in failed:
        if failure_condition(job) is not None and (best is None or _failure_time(job) < _failure_time(best)):
            best = job
    return best


def rule_applies(rule: dict, job: Obj, reason: str, message: str) -> bool:
    """ruleIsApplicable: the failure reason is listed (or none are), a message pattern matches (or none are
    given; an invalid pattern matches nothing), and the Job's replicatedJob is a target (or none are named). A Job
    without its replicatedJob label matches no rule."""
    reasons, patterns = rule.get("onJobFailureReasons") or [], rule.get("onJobFailureMessagePatterns") or []
    if reasons and reason not in reasons:
        return False
    if patterns and not any(_search(p, message) for p in patterns):
        return False
    parent = ((job.get("metadata") or {}).get("labels") or {}).get(RJOB_NAME)
    if not parent:
        return False
    targets = rule.get("targetReplicatedJobs") or []
    return not targets or parent in targets


def _search(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except re.error:  # upstream logs the invalid regex and goes on to the next pattern
        return False


def first_matching_rule(rules: Sequence[dict], failed: Sequence[Obj]) -> tuple[dict | None, Obj | None]:
    """findFirstFailedPolicyRuleAndJob: rules in order; for the first that some failed Job matches, the Job of the
    earliest failure among those it matches."""
    for rule in rules:
        matched: Obj | None = None
        for job in failed:
            cond = failure_condition(job)
            if cond is None:
                continue
            earlier = matched is None or cond.get("lastTransitionTime", "") < _failure_time(matched)
            if rule_applies(rule, job, cond.get("reason", ""), cond.get("message", "")) and earlier:
                matched = job
        if matched is not None:
            return rule, matched
    return None, None


def _rjob_status(status: dict, name: str) -> dict | None:
    return next((s for s in status.get("replicatedJobsStatus") or [] if s["name"] == name), None)


def job_restarts(spec: dict, status: dict, rjob: str, key: str = "jobRestarts") -> list[int]:
    """getJobRestarts / getJobRestartsCountTowardsMax: the per-Job counts of a replicatedJob (zeros, one per
    replica, when the status has none)."""
    st = _rjob_status(status, rjob)
    if st is not None and st.get(key):
        return list(st[key])
    replicas = next((rj.get("replicas", 1) for rj in spec["replicatedJobs"] if rj["name"] == rjob), 0)
    return [0] * replicas


def total_restarts_toward_max(status: dict) -> int:
    """totalRestartsCountTowardsMax: the JobSet's restartsCountTowardsMax plus every Job's
    jobRestartsCountTowardsMax."""
    return status.get("restartsCountTowardsMax", 0) + sum(
        sum(s.get("jobRestartsCountTowardsMax") or []) for s in status.get("replicatedJobsStatus") or [])


def apply_action(spec: dict, status: dict, events: list[Event], action: str, job: Obj, rule: dict | None) -> None:
    """The action appliers of failure_policy.go. FailJobSet fails the JobSet; RestartJobSet (past maxRestarts:
    fail) and RestartJobSetAndIgnoreMaxRestarts bump status.restarts (the first also restartsCountTowardsMax), set
    RestartingJobSet True and emit their event; RestartJob (past maxRestarts: fail) and
    RestartJobAndIgnoreMaxRestarts bump the failed Job's jobRestarts (the first also its
    jobRestartsCountTowardsMax), which marks only that Job for recreation. maxRestarts counts the JobSet's and the
    Jobs' restarts together."""
    name = job["metadata"]["name"]
    max_restarts = (spec.get("failurePolicy") or {}).get("maxRestarts", 0)
    if action == FAIL_JOBSET:
        fail(status, events, FAIL_ACTION, name)
        return
    if action in (RESTART_JOBSET, RESTART_JOB) and total_restarts_toward_max(status) >= max_restarts:
        fail(status, events, MAX_RESTARTS, name)
        return
    if action in PER_JOB_ACTIONS:
        reason, msg = RESTART_JOB_ACTION if action == RESTART_JOB else RESTART_JOB_IGNORE_ACTION
        labels = job["metadata"].get("labels") or {}
        rjob, idx = labels.get(RJOB_NAME, ""), int(labels.get(JOB_INDEX, 0))
        st = _rjob_status(status, rjob)
        if st is None:
            return
        restarts = job_restarts(spec, status, rjob)
        restarts[idx] += 1
        st["jobRestarts"] = restarts
        if action == RESTART_JOB:
            toward = job_restarts(spec, status, rjob, "jobRestartsCountTowardsMax")
            toward[idx] += 1
            st["jobRestartsCountTowardsMax"] = toward
        events.append(("Warning", reason, with_first_failed_job(msg, name)))
        return
    reason, msg = RESTART_ACTION if action == RESTART_JOBSET else RESTART_IGNORE_ACTION
    message = with_first_failed_job(msg, name)
    status["restarts"] = status.get("restarts", 0) + 1
    if action == RESTART_JOBSET:
        status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
    cond_reason = RULE_REASON.format(rule["name"]) if rule is not None else DEFAULT_FAILURE_POLICY
    set_condition(status, events, RESTARTING, "True", (cond_reason, message), "Warning")
    events.append(("Warning", reason, message))


def execute_failure_policy(spec: dict, status: dict, events: list[Event], failed: Sequence[Obj]) -> None:
    """executeFailurePolicy: no failurePolicy fails the JobSet at once (FailedJobs); else the first matching rule's
    action on its Job, or RestartJobSet on the first failed Job when no rule matches."""
    fp = spec.get("failurePolicy")
    if fp is None:
        first = first_failed_job(failed)
        fail(status, events, FAILED_JOBS, first["metadata"]["name"] if first else "")
        return
    rule, job = first_matching_rule(fp.get("rules") or [], failed)
    action = rule["action"] if rule is not None else RESTART_JOBSET
    if rule is None:
        job = first_failed_job(failed)
    if job is not None:
        apply_action(spec, status, events, action, job, rule)


# -- success policy -------------------------------------------------------------------------------------------------
def _targets(spec: dict) -> list[str]:
    return (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []


def job_matches_success_policy(spec: dict, job: Obj) -> bool:
    """jobMatchesSuccessPolicy: no targets, or the Job's replicatedJob is one."""
    targets = _targets(spec)
    return not targets or ((job.get("metadata") or {}).get("labels") or {}).get(RJOB_NAME) in targets


def replicated_job_matches_success_policy(spec: dict, rjob: dict) -> bool:
    targets = _targets(spec)
    return not targets or rjob["name"] in targets


def num_jobs_matching_success_policy(spec: dict, jobs: Sequence[Obj]) -> int:
    return sum(1 for j in jobs if job_matches_success_policy(spec, j))


def num_jobs_expected_to_succeed(spec: dict) -> int:
    """numJobsExpectedToSucceed: Any -> 1; All -> the replicas of every targeted replicatedJob."""
    operator = (spec.get("successPolicy") or {}).get("operator", "All")
    if operator == "Any":
        return 1
    if operator == "All":
        return sum(rj.get("replicas", 1) for rj in spec["replicatedJobs"]
                   if replicated_job_matches_success_policy(spec, rj))
    return 0


def succeeded(spec: dict, ok: Sequence[Obj]) -> bool:
    """executeSuccessPolicy's test."""
    return num_jobs_matching_success_policy(spec, ok) >= num_jobs_expected_to_succeed(spec)


# -- startup: InOrder and dependsOn ---------------------------------------------------------------------------------
def in_order(spec: dict) -> bool:
    """inOrderStartupPolicy."""
    return (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"


def all_replicas_started(replicas: int, st: dict | None) -> bool:
    """allReplicasStarted: every Job of the replicatedJob is ready, succeeded or failed."""
    st = st or {}
    return replicas == st.get("failed", 0) + st.get("ready", 0) + st.get("succeeded", 0)


def dependency_reached(rjob: dict, replicas: dict[str, int], statuses: Sequence[dict] | None) -> bool:
    """dependencyReachedStatus: every dependsOn entry's replicatedJob has a status, and Complete: all its Jobs
    succeeded; Ready: all are ready, succeeded or failed. `replicas` holds the replicatedJobs seen so far (this one
    included), as the controller builds it walking the list."""
    for dep in rjob.get("dependsOn") or []:
        st = next((s for s in statuses or [] if s["name"] == dep["name"]), None)
        if st is None:
            return False
        want = replicas.get(dep["name"], 0)
        if dep.get("status") == "Complete" and want != st.get("succeeded", 0):
            return False
        if dep.get("status") == "Ready" and want != st.get("failed", 0) + st.get("ready", 0) + st.get("succeeded", 0):
            return False
    return True


def all_jobs_ready(spec: dict, statuses: Sequence[dict]) -> bool:
    """allJobsReady: ready + succeeded Jobs equal the replicas of all replicatedJobs."""
    return sum(rj.get("replicas", 1) for rj in spec["replicatedJobs"]) == sum(
        s.get("ready", 0) + s.get("succeeded", 0) for s in statuses)


# -- network ----------------------------------------------------------------------------------------------------------
def subdomain(name: str, spec: dict) -> str:
    """GetSubdomain: network.subdomain, else the JobSet's name."""
    return (spec.get("network") or {}).get("subdomain") or name


def coordinator_endpoint(name: str, spec: dict) -> str:
    """CoordinatorEndpoint: `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>`."""
    c = spec["coordinator"]
    return f"{name}-{c['replicatedJob']}-{c.get('jobIndex', 0)}-{c.get('podIndex', 0)}.{subdomain(name, spec)}"

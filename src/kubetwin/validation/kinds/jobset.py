"""JobSet: what the JobSet validating webhook refuses beyond the CRD's schema and CEL rules (kubernetes-sigs/jobset
pkg/webhooks/jobset_webhook.go ValidateCreate, in its words), its replicated Jobs' pod templates as the Jobs' pods
get them from the API server, then the Job policies of each template (validation.jobs), once the CRD passes."""

from __future__ import annotations

import re

from kubetwin.api import fields
from kubetwin.api.errors import Diagnostic
from kubetwin.api.jobset_defaults import jobset_defaults
from kubetwin.api.loader import Manifest
from kubetwin.k8s import validation as kv
from kubetwin.validation import jobs, kueue_tas
from kubetwin.validation.kinds.base import KindChecks

INT32_MAX = 2**31 - 1
MAX_REPLICAS_RESTART_JOB = 1024  # maxReplicasPerReplicatedJob: the 1024 MaxItems of status jobRestarts
RULE_NAME_FMT = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# validOnJobFailureReasons: the reasons of a failed Job's condition (k8s.io/api batch/v1 JobReason*)
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                       "PodFailurePolicy")
RESTART_JOB_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")
_TOO_LONG = {"subdomain": ".spec.network.subdomain is too long, must be less than 63 characters",
             "group": ".spec.replicatedJob[].groupName is too long, must be less than 63 characters",
             "job": "JobSet name is too long, job names generated for this JobSet will exceed 63 characters",
             "pod": "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"}
WEBHOOK = 'admission webhook "vjobset.kb.io" denied the request'

# (where in the file, the field.Error's text: "<field>: Invalid value: ..." or "<nil>: Internal error: ...")
_Err = tuple[str, str]


def _invalid(path: str, value: object, msg: str) -> _Err:
    """field.Invalid: a string value quoted, a number as is."""
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return path, f"{path}: Invalid value: {shown}: {msg}"


def _internal(where: str, msg: str) -> _Err:
    """A plain error of the webhook, which invalidError wraps as field.InternalError with no path."""
    return where, f"<nil>: Internal error: {msg}"


def _dns1035(path: str, value: str, too_long: str) -> list[_Err]:
    return [_invalid(path, value, too_long if msg.startswith("must be no more than") else msg)
            for msg in kv.is_dns1035_label(value)]


def webhook(m: Manifest) -> list[Diagnostic]:
    """ValidateCreate on the defaulted JobSet: dependsOn, subdomain, managedBy, each replicatedJob's names and
    size, successPolicy targets, failurePolicy rules, coordinator. The RestartJob feature gate is judged with the
    Scenario (restart_job_gate)."""
    obj = jobset_defaults(m.obj)
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    name = meta.get("name") or ((meta.get("generateName") or "") + "xxxxx")  # generateName + 5 random characters
    rjobs = [rj for rj in spec.get("replicatedJobs") or [] if isinstance(rj, dict)]
    out: list[_Err] = []
    fp = spec.get("failurePolicy") or {}
    if fp.get("restartStrategy") == "InPlaceRestart":
        out.append(_internal("spec.failurePolicy.restartStrategy", "InPlaceRestart restart strategy cannot be set "
                             "when InPlaceRestart feature gate is disabled"))
    if rjobs and rjobs[0].get("dependsOn") is not None:
        out.append(_internal("spec.replicatedJobs[0].dependsOn", "DependsOn can't be set for the first ReplicatedJob"))
    sub = (spec.get("network") or {}).get("subdomain")
    if sub:
        out += [_invalid("spec.network.subdomain", sub, msg) for msg in kv.is_dns1123_subdomain(sub)]
        out += _dns1035("spec.network.subdomain", sub, _TOO_LONG["subdomain"])
    if spec.get("managedBy") is not None:
        manager = str(spec["managedBy"])
        out += [_invalid("spec.managedBy", v, msg) for v, msg in kv.domain_prefixed_path_errors(manager)]
        if len(manager) > 63:
            out.append(("spec.managedBy", "spec.managedBy: Too long: may not be more than 63 bytes"))
    names: set[str] = set()
    for i, rj in enumerate(rjobs):
        path, rname = f"spec.replicatedJobs[{i}]", str(rj.get("name", ""))
        names.add(rname)
        jspec = (rj.get("template") or {}).get("spec") or {}
        replicas = rj.get("replicas", 1)
        if jspec.get("parallelism", 1) * replicas > INT32_MAX:
            out.append(_internal(f"{path}.replicas", f"the product of replicas and parallelism must not exceed "
                                 f"{INT32_MAX} for replicatedJob '{rname}'"))
        out += _dns1035(f"{path}.groupName", str(rj.get("groupName", "")), _TOO_LONG["group"])
        longest_job = f"{name}-{rname}-{replicas - 1}"
        out += _dns1035(f"{path}.name", longest_job, _TOO_LONG["job"])
        if jspec.get("completionMode") == "Indexed" and jspec.get("completions") is not None:
            pod = f"{name}-{rname}-{replicas - 1}-{jspec['completions'] - 1}-abcde"
            out += [_invalid(f"{path}.name", longest_job, _TOO_LONG["pod"] if msg.startswith("must be no more") else
                             msg) for msg in kv.is_dns1035_label(pod)]
        for j, dep in enumerate(rj.get("dependsOn") or []):
            if dep.get("name") not in names:
                out.append(_internal(f"{path}.dependsOn[{j}].name", f"replicatedJob: {rname} cannot depend on "
                                     f"replicatedJob: {dep.get('name')}"))
    for j, target in enumerate((spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []):
        if target not in names:
            out.append(_internal(f"spec.successPolicy.targetReplicatedJobs[{j}]", f"invalid replicatedJob name "
                                 f"'{target}' does not appear in .spec.ReplicatedJobs"))
    if spec.get("failurePolicy") is not None:
        out += _failure_policy(spec, rjobs, names)
    if spec.get("coordinator") is not None:
        out += _coordinator(spec, rjobs, name)
    return [Diagnostic(m.file, m.line_of(p), m.ref, p, f'{WEBHOOK}: JobSet.jobset.x-k8s.io "{name}" is invalid: '
                       f"{text}", "") for p, text in out]


def _failure_policy(spec: dict, rjobs: list[dict], names: set[str]) -> list[_Err]:
    """validateFailurePolicy (the RestartJob gate aside): RestartJob with more than 1024 replicas, rule names
    (length, pattern, unique), targets and failure reasons."""
    fp, out = spec["failurePolicy"], []
    rules = [r for r in fp.get("rules") or [] if isinstance(r, dict)]
    if any(r.get("action") in RESTART_JOB_ACTIONS for r in rules) and any(
            rj.get("replicas", 1) > MAX_REPLICAS_RESTART_JOB for rj in rjobs):
        out.append(_internal("spec.failurePolicy.rules", "JobSet cannot have a failure policy rule with RestartJob "
                             "or RestartJobAndIgnoreMaxRestarts action and a replicated job with replicas > "
                             f"{MAX_REPLICAS_RESTART_JOB}"))
    by_name: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        path, rname = f"spec.failurePolicy.rules[{i}]", str(rule.get("name", ""))
        if not 1 <= len(rname) <= 128:
            out.append(_internal(f"{path}.name", f"invalid failure policy rule name of length {len(rname)}, the rule "
                                 "name must be at least 1 characters long and at most 128 characters long"))
        by_name.setdefault(rname, []).append(i)
        if not re.match(RULE_NAME_FMT, rname):
            out.append(_internal(f"{path}.name", f"invalid failure policy rule name '{rname}', a failure policy rule "
                                 "name must start with an alphabetic character, optionally followed by a string of "
                                 "alphanumeric characters or '_,:', and must end with an alphanumeric character "
                                 "or '_'"))
        for j, target in enumerate(rule.get("targetReplicatedJobs") or []):
            if target not in names:
                out.append(_internal(f"{path}.targetReplicatedJobs[{j}]", f"invalid replicatedJob name '{target}' "
                                     "in failure policy does not appear in .spec.ReplicatedJobs"))
        for j, reason in enumerate(rule.get("onJobFailureReasons") or []):
            if reason not in JOB_FAILURE_REASONS:
                out.append(_internal(f"{path}.onJobFailureReasons[{j}]", f"invalid job failure reason '{reason}' in "
                                     "failure policy is not a recognized job failure reason"))
    for rname, idx in by_name.items():  # Go ranges over a map: the order of these errors is not fixed upstream
        if len(idx) > 1:
            shown = "[" + " ".join(map(str, idx)) + "]"
            out.append(_internal(f"spec.failurePolicy.rules[{idx[1]}].name", "rule names are not unique, rules with "
                                 f"indices {shown} all have the same name '{rname}'"))
    return out


def _coordinator(spec: dict, rjobs: list[dict], name: str) -> list[_Err]:
    """validateCoordinator (its first problem) and validateCoordinatorLabelValue."""
    from kubetwin.controllers.jobset_policy import coordinator_endpoint

    c, path = spec["coordinator"], "spec.coordinator"
    rj = next((r for r in rjobs if r.get("name") == c.get("replicatedJob")), None)
    jspec = ((rj or {}).get("template") or {}).get("spec") or {}
    job_idx, pod_idx = c.get("jobIndex", 0), c.get("podIndex", 0)
    out = []
    if rj is None:
        out.append(_internal(f"{path}.replicatedJob", f"coordinator replicatedJob {c.get('replicatedJob')} does not "
                             "exist"))
    elif not 0 <= job_idx < rj.get("replicas", 1):
        out.append(_internal(f"{path}.jobIndex", f"coordinator job index {job_idx} is invalid for replicatedJob "
                             f"{rj['name']}"))
    elif jspec.get("completionMode") != "Indexed" or jspec.get("completions") is None:
        out.append(_internal(path, "job for coordinator pod must be indexed completion mode, and completions number "
                             "must be set"))
    elif not 0 <= pod_idx < jspec["completions"]:
        out.append(_internal(f"{path}.podIndex", f"coordinator pod index {pod_idx} is invalid for replicatedJob "
                             f"{c.get('replicatedJob')} job index {job_idx}"))
    value = coordinator_endpoint(name, spec)
    errs = kv.is_valid_label_value(value)
    if errs:
        out.append(_internal(path, f'spec will lead to invalid label value "{value}" for coordinator label '
                             '"jobset.sigs.k8s.io/coordinator" (long JobSet / ReplicatedJob / SubDomain name?): '
                             + ", ".join(errs)))
    return out


def restart_job_gate(manifests: list[Manifest]) -> list[Diagnostic]:
    """validateFailurePolicy's first refusal, which depends on the JobSet manager's RestartJob feature gate (the
    Scenario's jobsetController.featureGates; alpha, off by default): RestartJob actions refused while it is off."""
    from kubetwin.api.twin import TWIN_API

    on = False
    for m in manifests:
        if m.kind == "Scenario" and m.obj.get("apiVersion") == TWIN_API:
            gates = ((m.obj.get("spec") or {}).get("jobsetController") or {}).get("featureGates") or {}
            on = gates.get("RestartJob") is True
    out = []
    for m in manifests:
        if m.kind != "JobSet" or on:
            continue
        rules = fields.get_path(m.obj, "spec.failurePolicy.rules")
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            if isinstance(rule, dict) and rule.get("action") in RESTART_JOB_ACTIONS:
                p = f"spec.failurePolicy.rules[{i}].action"
                name = (m.obj.get("metadata") or {}).get("name", "")
                out.append(Diagnostic(m.file, m.line_of(p), m.ref, p, f'{WEBHOOK}: JobSet.jobset.x-k8s.io "{name}" is '
                                      "invalid: <nil>: Internal error: RestartJob and RestartJobAndIgnoreMaxRestarts "
                                      "failure policy actions are not allowed when RestartJob feature gate is disabled",
                                      "turn the gate on: Scenario spec.jobsetController.featureGates: "
                                      "{RestartJob: true} (as the manager's --feature-gates=RestartJob=true)"))
                break
    return out


def pod_templates(m: Manifest) -> list[Diagnostic]:
    """The pod templates of a JobSet's replicated Jobs: container names and resources, as the Job's pods get
    them from the API server."""
    out: list[Diagnostic] = []
    rjs = fields.get_path(m.obj, "spec.replicatedJobs")
    for i, rj in enumerate(rjs if isinstance(rjs, list) else []):
        replicas = fields.get_path(rj, "replicas") if isinstance(rj, dict) else None
        replicas = replicas if isinstance(replicas, int) and replicas > 0 else 1
        if isinstance(rj, dict) and isinstance(rj.get("template"), dict):
            out += fields.pod_counts(m, rj["template"], f"spec.replicatedJobs[{i}].template.", replicas)
        spec = fields.get_path(rj, "template.spec.template.spec")
        if isinstance(spec, dict):
            out += fields.containers(m, f"spec.replicatedJobs[{i}].template.spec.template.spec", spec)
    return out


def what_the_run_does(m: Manifest) -> list[Diagnostic]:
    """The parts of a JobSet the run does not model, said rather than dropped."""
    if not fields.get_path(m.obj, "spec.volumeClaimPolicies"):
        return []
    return [Diagnostic(m.file, m.line_of("spec.volumeClaimPolicies"), m.ref, "spec.volumeClaimPolicies",
                       "JobSet: volumeClaimPolicies are not simulated: no PersistentVolumeClaim <claim>-<jobset> is "
                       "created and the Jobs' pods get no volume for it", "", "notice")]


CHECKS = KindChecks("jobset.x-k8s.io", "JobSet", checks=(webhook, pod_templates, jobs.diagnostics,
                                                        kueue_tas.diagnostics, what_the_run_does))

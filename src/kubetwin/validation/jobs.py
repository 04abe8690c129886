"""The API server's validation of a Job's failure and success policies (kubernetes/kubernetes
pkg/apis/batch/validation/validation.go: validateJobSpec, validatePodFailurePolicy, validateSuccessPolicy,
validateIndexesFormat), on a Job and on each JobSet job template (the API server refuses the child Job the JobSet
controller creates from it, so the twin refuses the JobSet at validate). The errors are field.Error's words.

The Job controller (controllers/job.py, job_policy.py) runs podFailurePolicy, backoffLimitPerIndex /
maxFailedIndexes, successPolicy and activeDeadlineSeconds; the TTL-after-finished controller
(controllers/ttlafterfinished.py) deletes finished Jobs. One twin limit stays a notice: an onPodConditions rule on a
condition type the twin never sets on a pod matches nothing."""

from __future__ import annotations

from typing import Any

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest

MAX_RULES = 20  # maxPodFailurePolicyRules, maxSuccessPolicyRule
MAX_EXIT_CODES = 255  # maxPodFailurePolicyOnExitCodesValues
MAX_CONDITION_PATTERNS = 20  # maxPodFailurePolicyOnPodConditionsPatterns
MAX_FAILED_INDEXES = 100_000  # maxFailedIndexesForIndexedJob
ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")  # sets.List: sorted
OPERATORS = ("In", "NotIn")
STATUSES = ("False", "True", "Unknown")
# the pod condition types the twin's kubelet, scheduler, Spot, taint eviction and pod GC write
TWIN_POD_CONDITIONS = ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready",
                       "DisruptionTarget")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _go_list(values: list[str]) -> str:
    """Go's %q of a []string: ["Count" "FailIndex"]."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _supported(values: tuple[str, ...]) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)


def _ints(values: list) -> str:
    """Go's %#v of a []int32."""
    return "[]int32{" + ", ".join(str(v) for v in values) + "}"


class _Check:
    """Collects one object's errors at field paths under `prefix` (the Job spec's path)."""

    def __init__(self, m: Manifest, prefix: str) -> None:
        self.m, self.prefix = m, prefix
        self.out: list[Diagnostic] = []

    def add(self, path: str, message: str, hint: str, severity: str = "error") -> None:
        full = f"{self.prefix}.{path}" if path else self.prefix
        self.out.append(Diagnostic(self.m.file, self.m.line_of(full), self.m.ref, full, message, hint, severity))


def _spec_errors(c: _Check, spec: dict, jobset: bool) -> None:
    """validateJobSpec's rules for the fields the Job controller's policies read."""
    mode = spec.get("completionMode") or ("Indexed" if jobset else "NonIndexed")
    completions = _int(spec.get("completions"))
    for key in ("activeDeadlineSeconds", "backoffLimitPerIndex", "maxFailedIndexes"):
        value = _int(spec.get(key))
        if value is not None and value < 0:
            c.add(key, f"Invalid value: {value}: must be greater than or equal to 0", f"set {key} to 0 or more")
    per_index, max_failed = _int(spec.get("backoffLimitPerIndex")), _int(spec.get("maxFailedIndexes"))
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        c.add("backoffLimitPerIndex", "Required value: when maxFailedIndexes is specified",
              "set backoffLimitPerIndex (the retries each index gets)")
    if mode == "Indexed":
        if completions is not None and max_failed is not None and max_failed > completions:
            c.add("maxFailedIndexes", f"Invalid value: {max_failed}: must be less than or equal to completions",
                  f"set maxFailedIndexes to at most {completions}")
        elif max_failed is not None and max_failed > MAX_FAILED_INDEXES:
            c.add("maxFailedIndexes", f"Invalid value: {max_failed}: must be less than or equal to "
                  f"{MAX_FAILED_INDEXES}", f"set maxFailedIndexes to at most {MAX_FAILED_INDEXES}")
    else:
        for key, value in (("backoffLimitPerIndex", per_index), ("maxFailedIndexes", max_failed)):
            if value is not None:
                c.add(key, f"Invalid value: {value}: requires indexed completion mode",
                      "set completionMode: Indexed, or use backoffLimit")
    pfp = spec.get("podFailurePolicy")
    if isinstance(pfp, dict):
        _pod_failure_policy(c, spec, pfp)
    replacement = spec.get("podReplacementPolicy")
    if isinstance(pfp, dict) and replacement not in (None, "Failed"):  # validatePodReplacementPolicy
        c.add("podReplacementPolicy", f'Unsupported value: "{replacement}": supported values: "Failed"',
              "remove podReplacementPolicy (it defaults to Failed with a podFailurePolicy)")
    if replacement == "Failed":  # the twin's notice: it models no grace period, so no terminating pods
        c.add("podReplacementPolicy", "podReplacementPolicy Failed waits for a deleted pod to be terminal; the twin "
              "deletes pods without a grace period, so the replacement is created at the same instant as under "
              "TerminatingOrFailed (after the pod-failure back-off) and status.terminating stays 0",
              "run knowing this", "notice")
    sp = spec.get("successPolicy")
    if isinstance(sp, dict):
        if mode != "Indexed":
            c.add("successPolicy", "Invalid value: batch.SuccessPolicy{...}: requires indexed completion mode",
                  "set completionMode: Indexed (a success policy names indexes)")
        else:
            _success_policy(c, sp, completions or 0)
    restart = _dict(_dict(spec.get("template")).get("spec")).get("restartPolicy")
    restart = restart or ("OnFailure" if jobset else None)  # the JobSet webhook's default for its Jobs' pods
    if isinstance(pfp, dict) and restart == "OnFailure":
        c.add("template.spec.restartPolicy", 'Invalid value: "OnFailure": only "Never" is supported when '
              "podFailurePolicy is specified", "set template.spec.restartPolicy: Never")


def _pod_failure_policy(c: _Check, spec: dict, pfp: dict) -> None:
    """validatePodFailurePolicy and its rules."""
    rules = _list(pfp.get("rules"))
    if len(rules) > MAX_RULES:
        c.add("podFailurePolicy.rules", f"Too many: {len(rules)}: must have at most {MAX_RULES} items",
              f"keep at most {MAX_RULES} rules")
    pod = _dict(_dict(spec.get("template")).get("spec"))
    names = {x.get("name") for key in ("containers", "initContainers") for x in _list(pod.get(key))
             if isinstance(x, dict)}
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        base = f"podFailurePolicy.rules[{i}]"
        action = rule.get("action")
        if not action:
            c.add(f"{base}.action", f"Required value: valid values: {_go_list(list(ACTIONS))}", "set an action")
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                c.add(f"{base}.action", 'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
                      "set backoffLimitPerIndex (FailIndex fails one index of an Indexed Job)")
        elif action not in ACTIONS:
            c.add(f"{base}.action", f'Unsupported value: "{action}": {_supported(ACTIONS)}', "use one of them")
        on_exit, on_conds = rule.get("onExitCodes"), rule.get("onPodConditions")
        if isinstance(on_exit, dict):
            _on_exit_codes(c, f"{base}.onExitCodes", on_exit, names)
        if isinstance(on_conds, list) and on_conds:
            _on_pod_conditions(c, f"{base}.onPodConditions", on_conds)
        if on_exit is not None and on_conds:
            c.add(base, "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
                  "split it into two rules")
        if on_exit is None and not on_conds:
            c.add(base, "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                  "add onExitCodes or onPodConditions")


def _on_exit_codes(c: _Check, base: str, req: dict, names: set) -> None:
    """validatePodFailurePolicyRuleOnExitCodes."""
    op = req.get("operator")
    if not op:
        c.add(f"{base}.operator", f"Required value: valid values: {_go_list(list(OPERATORS))}", "set In or NotIn")
    elif op not in OPERATORS:
        c.add(f"{base}.operator", f'Unsupported value: "{op}": {_supported(OPERATORS)}', "set In or NotIn")
    name = req.get("containerName")
    if name is not None and name not in names:
        c.add(f"{base}.containerName", f'Invalid value: "{name}": must be one of the container or initContainer '
              "names in the pod template", f"name one of: {', '.join(sorted(str(n) for n in names))}")
    values = _list(req.get("values"))
    if not values:
        shown = "[]int32{}" if isinstance(req.get("values"), list) else "[]int32(nil)"
        c.add(f"{base}.values", f"Invalid value: {shown}: at least one value is required", "list exit codes")
    elif len(values) > MAX_EXIT_CODES:
        c.add(f"{base}.values", f"Too many: {len(values)}: must have at most {MAX_EXIT_CODES} items",
              f"keep at most {MAX_EXIT_CODES} codes")
    seen: set = set()
    ordered = True
    for j, value in enumerate(values):
        if op == "In" and value == 0:
            c.add(f"{base}.values[{j}]", "Invalid value: 0: must not be 0 for the In operator",
                  "exit code 0 is success, never a failure")
        if value in seen:
            c.add(f"{base}.values[{j}]", f"Duplicate value: {value}", "list each code once")
        seen.add(value)
        if j and isinstance(value, int) and isinstance(values[j - 1], int) and values[j - 1] > value:
            ordered = False
    if not ordered:
        c.add(f"{base}.values", f"Invalid value: {_ints(values)}: must be ordered", "sort the codes")


def _on_pod_conditions(c: _Check, base: str, patterns: list) -> None:
    """validatePodFailurePolicyRuleOnPodConditions, and the twin's notice for a type it never sets."""
    if len(patterns) > MAX_CONDITION_PATTERNS:
        c.add(base, f"Too many: {len(patterns)}: must have at most {MAX_CONDITION_PATTERNS} items",
              f"keep at most {MAX_CONDITION_PATTERNS} patterns")
    for j, p in enumerate(patterns):
        if not isinstance(p, dict):
            continue
        status = p.get("status")
        if not status:
            c.add(f"{base}[{j}].status", f"Required value: valid values: {_go_list(list(STATUSES))}",
                  "set status: \"True\"")
        elif status not in STATUSES:
            c.add(f"{base}[{j}].status", f'Unsupported value: "{status}": {_supported(STATUSES)}',
                  "set True, False or Unknown")
        ctype = p.get("type")
        if ctype and ctype not in TWIN_POD_CONDITIONS:
            c.add(f"{base}[{j}].type", f"pod condition {ctype} is not simulated: the twin never sets it on a pod, "
                  "so this rule matches no failed pod and the next rules decide", "remove the rule, or read the "
                  f"run knowing this (the twin sets {', '.join(TWIN_POD_CONDITIONS)})", "notice")


def _success_policy(c: _Check, sp: dict, completions: int) -> None:
    """validateSuccessPolicy and validateSuccessPolicyRule."""
    rules = _list(sp.get("rules"))
    if not rules:
        c.add("successPolicy.rules", "Required value: at least one rules must be specified when the successPolicy "
              "is specified", "add a rule with succeededIndexes and/or succeededCount")
    if len(rules) > MAX_RULES:
        c.add("successPolicy.rules", f"Too many: {len(rules)}: must have at most {MAX_RULES} items",
              f"keep at most {MAX_RULES} rules")
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        base = f"successPolicy.rules[{i}]"
        count, indexes = rule.get("succeededCount"), rule.get("succeededIndexes")
        if count is None and indexes is None:
            c.add(base, "Required value: at least one of succeededCount or succeededIndexes must be specified",
                  "set succeededIndexes (\"0-3,7\") or succeededCount")
        total = 0
        if isinstance(indexes, str):
            total, err = indexes_format(indexes, completions)
            if err:
                c.add(f"{base}.succeededIndexes", f'Invalid value: "{indexes}": error parsing succeededIndexes: '
                      f"{err}", f"indexes below completions ({completions}), increasing, as \"0,2-4\"")
        n = _int(count)
        if n is not None:
            if n < 0:
                c.add(f"{base}.succeededCount", f"Invalid value: {n}: must be greater than or equal to 0",
                      "set succeededCount to 0 or more")
            if n > completions:
                c.add(f"{base}.succeededCount", f"Invalid value: {n}: must be less than or equal to {completions} "
                      "(the number of specified completions)", f"set succeededCount to at most {completions}")
            if isinstance(indexes, str) and n > total:
                c.add(f"{base}.succeededCount", f"Invalid value: {n}: must be less than or equal to {total} (the "
                      "number of indexes in the specified succeededIndexes field)",
                      f"set succeededCount to at most {total}")


def indexes_format(text: str, completions: int) -> tuple[int, str]:
    """validateIndexesFormat + parseIndexInterval: (how many indexes, the error or "")."""
    if not text:
        return 0, ""
    last: int | None = None
    total = 0
    for part in text.split(","):
        limits = part.split("-")
        if len(limits) > 2:
            return 0, (f'the fragment "{part}" violates the requirement that an index interval can have at most '
                       "two parts separated by '-'")
        bounds = []
        for raw in limits:
            try:
                value = int(raw)
            except ValueError:
                return 0, f'cannot convert string to integer for index: "{raw}"'
            if value >= completions:
                return 0, f'too large index: "{raw}"'
            bounds.append(value)
        x, y = bounds[0], bounds[-1]
        if len(bounds) == 2 and x >= y:
            return 0, f"non-increasing order, previous: {x}, current: {y}"
        if last is not None and last >= x:
            return 0, f"non-increasing order, previous: {last}, current: {x}"
        total += y - x + 1
        last = y
    return total, ""


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """The API server's errors (and the twin's notices) for a Job's, or each JobSet job template's, policies."""
    spec = m.obj.get("spec")
    if m.kind == "Job" and isinstance(spec, dict):
        c = _Check(m, "spec")
        _spec_errors(c, spec, jobset=False)
        return c.out
    if m.kind == "JobSet" and isinstance(spec, dict):
        out: list[Diagnostic] = []
        for i, rj in enumerate(spec.get("replicatedJobs") or []):
            tmpl = (rj or {}).get("template") if isinstance(rj, dict) else None
            jspec = (tmpl or {}).get("spec") if isinstance(tmpl, dict) else None
            if isinstance(jspec, dict):
                c = _Check(m, f"spec.replicatedJobs[{i}].template.spec")
                _spec_errors(c, jspec, jobset=True)
                out += c.out
        return out
    return []

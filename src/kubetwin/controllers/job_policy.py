"""The Job controller's failure and success rules (batch/v1, Kubernetes 1.34), as plain functions the controller asks.

Followed files (kubernetes/kubernetes pkg/controller/job): pod_failure_policy.go (matchPodFailurePolicy: the first
matching rule decides; FailJob, Ignore, Count, FailIndex), success_policy.go (matchSuccessPolicy,
matchSucceededIndexesRule), indexed_job_utils.go (orderedIntervals, parseIndexesFromString, isIndexFailed,
getNewIndexFailureCounts, the job-index-failure-count annotations) and job_controller.go (getFailJobMessage,
nonIgnoredFailedPodsCount, pastActiveDeadline, the reasons and messages of the conditions it writes).
"""

from __future__ import annotations

from kubetwin.store.store import Obj

INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"  # batch.JobIndexFailureCountAnnotation
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"

# Condition reasons and messages (k8s.io/api/batch/v1 types.go; job_controller.go)
BACKOFF_LIMIT = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")
MAX_FAILED_INDEXES = ("MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes")
FAILED_INDEXES = ("FailedIndexes", "Job has failed indexes")
POD_FAILURE_POLICY = "PodFailurePolicy"
SUCCESS_POLICY = "SuccessPolicy"

Intervals = list[tuple[int, int]]


def pod_failed(pod: Obj) -> bool:
    """isPodFailed: phase Failed (a deleted pod is gone from the twin's store, so it is never counted)."""
    return (pod.get("status") or {}).get("phase") == "Failed"


def match_pod_failure_policy(policy: dict | None, pod: Obj) -> tuple[str | None, bool, str | None]:
    """matchPodFailurePolicy: (the FailJob message or None, whether the failure counts against the backoff
    limits, the matched action or None). Rules are tried in order; the first that matches decides."""
    if not policy:
        return None, True, None
    st = pod.get("status") or {}
    meta = pod["metadata"]
    who = f"{meta.get('namespace') or 'default'}/{meta['name']}"
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            cs = _matching_container(st, rule["onExitCodes"])
            if cs is None:
                continue
            msg = (f"Container {cs['name']} for pod {who} failed with exit code "
                   f"{cs['state']['terminated']['exitCode']} matching {action} rule at index {index}")
        elif rule.get("onPodConditions") is not None:
            cond = _matching_condition(st, rule["onPodConditions"])
            if cond is None:
                continue
            msg = f"Pod {who} has condition {cond['type']} matching {action} rule at index {index}"
        else:
            continue
        if action == "Ignore":
            return None, False, "Ignore"
        if action == "Count":
            return None, True, "Count"
        if action == "FailJob":
            return msg, True, "FailJob"
        if action == "FailIndex":  # counted, no message; the index fails (isIndexFailed)
            return None, True, "FailIndex"
    return None, True, None


def _matching_container(st: dict, req: dict) -> dict | None:
    """matchOnExitCodes: the first terminated container (then init container) with a non-zero exit code the
    requirement's operator accepts, of the named container when containerName is set."""
    for statuses in (st.get("containerStatuses") or [], st.get("initContainerStatuses") or []):
        for cs in statuses:
            term = (cs.get("state") or {}).get("terminated")
            if term is None:
                continue  # still terminating: no exit code to match
            if req.get("containerName") not in (None, cs.get("name")):
                continue
            code = int(term.get("exitCode", 0))
            if code == 0:
                continue
            values = req.get("values") or []
            if (req.get("operator") == "In" and code in values) or (req.get("operator") == "NotIn"
                                                                    and code not in values):
                return cs
    return None


def _matching_condition(st: dict, patterns: list[dict]) -> dict | None:
    """matchOnPodConditions: the first pod condition whose type and status a pattern names."""
    for cond in st.get("conditions") or []:
        for p in patterns:
            if cond.get("type") == p.get("type") and cond.get("status") == p.get("status"):
                return cond
    return None


def fail_job_message(policy: dict | None, pods: list[Obj]) -> str | None:
    """getFailJobMessage: the message of the first failed pod that matches a FailJob rule."""
    if not policy:
        return None
    for p in pods:
        if pod_failed(p):
            msg, _, _ = match_pod_failure_policy(policy, p)
            if msg is not None:
                return msg
    return None


def counts_as_failure(policy: dict | None, pod: Obj) -> bool:
    """nonIgnoredFailedPodsCount's test: a failed pod counts unless an Ignore rule matched it."""
    return match_pod_failure_policy(policy, pod)[1]


# -- indexes -----------------------------------------------------------------------------------------------------

def parse_indexes(text: str | None, completions: int) -> Intervals:
    """parseIndexesFromString: "1,3-5" into ordered intervals below `completions` (corrupt parts skipped)."""
    out: Intervals = []
    for part in (text or "").split(",") if text else []:
        limits = part.split("-")
        try:
            first = int(limits[0])
        except ValueError:
            continue
        if first >= completions:
            break
        last = first
        if len(limits) > 1:
            try:
                last = min(int(limits[1]), completions - 1)
            except ValueError:
                continue
        if out and out[-1][1] == first - 1:
            out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def to_intervals(indexes: set[int]) -> Intervals:
    out: Intervals = []
    for i in sorted(indexes):
        if out and out[-1][1] >= i - 1:
            out[-1] = (out[-1][0], max(out[-1][1], i))
        else:
            out.append((i, i))
    return out


def intervals_string(iv: Intervals) -> str:
    """orderedIntervals.String: two neighbours are "4,5", three or more a range "7-9"."""
    return ",".join(str(a) if a == b else f"{a},{b}" if b == a + 1 else f"{a}-{b}" for a, b in iv)


def total(iv: Intervals) -> int:
    return sum(b - a + 1 for a, b in iv)


def expand(iv: Intervals) -> set[int]:
    return {i for a, b in iv for i in range(a, b + 1)}


def match_success_policy(policy: dict | None, completions: int, succeeded: Intervals) -> str | None:
    """matchSuccessPolicy: "Matched rules at index N" for the first rule the succeeded indexes satisfy."""
    if not policy or not succeeded:
        return None
    for index, rule in enumerate(policy.get("rules") or []):
        count = rule.get("succeededCount")
        if rule.get("succeededIndexes") is not None:
            required = parse_indexes(rule["succeededIndexes"], completions)
            if not required:
                continue
            contains = _overlap(required, succeeded)
            if contains == total(required) or (count is not None and contains >= int(count)):
                return f"Matched rules at index {index}"
        elif count is not None and total(succeeded) >= int(count):
            return f"Matched rules at index {index}"
    return None


def _overlap(a: Intervals, b: Intervals) -> int:
    """matchSucceededIndexesRule's count: how many indexes of `a` are in `b` (both ordered)."""
    i = j = n = 0
    while i < len(a) and j < len(b):
        n += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]) + 1)
        if b[j][1] < a[i][1]:
            j += 1
        elif b[j][1] > a[i][1]:
            i += 1
        else:
            i, j = i + 1, j + 1
    return n


def _count_annotation(pod: Obj, key: str) -> int:
    """parseIndexFailureCountAnnotation: 0 when missing, unparsable, negative or past int32."""
    raw = (pod["metadata"].get("annotations") or {}).get(key)
    try:
        value = int(str(raw))
    except ValueError:
        return 0
    return value if 0 <= value <= 2**31 - 1 else 0


def index_failure_count(pod: Obj) -> int:
    return _count_annotation(pod, INDEX_FAILURE_COUNT)


def absolute_failure_count(pod: Obj) -> int:
    return _count_annotation(pod, INDEX_FAILURE_COUNT) + _count_annotation(pod, INDEX_IGNORED_FAILURE_COUNT)


def index_failed(policy: dict | None, backoff_limit_per_index: int, pod: Obj) -> bool:
    """isIndexFailed: a FailIndex rule matched, or the counted failures of the index reached
    backoffLimitPerIndex (the failed pod's own job-index-failure-count holds the failures before it)."""
    if not pod_failed(pod):
        return False
    counted = True
    if policy:
        _, counted, action = match_pod_failure_policy(policy, pod)
        if action == "FailIndex":
            return True
    return counted and index_failure_count(pod) >= backoff_limit_per_index


def new_index_failure_counts(policy: dict | None, replaced: Obj | None) -> tuple[int, int]:
    """getNewIndexFailureCounts: the replacement pod's (failure count, ignored failure count)."""
    if replaced is None:
        return 0, 0
    failures, ignored = index_failure_count(replaced), _count_annotation(replaced, INDEX_IGNORED_FAILURE_COUNT)
    if match_pod_failure_policy(policy, replaced)[1]:
        failures += 1
    else:
        ignored += 1
    return failures, ignored

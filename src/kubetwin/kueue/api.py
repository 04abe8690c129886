"""Kueue manifests (plain dicts, kueue.x-k8s.io v1beta1 and v1beta2) as frozen dataclasses with Kueue's defaults.

Field names and defaults follow apis/kueue/v1beta2/*_types.go (kubernetes-sigs/kueue) and the CRDs in
shared/reference/kueue_crds/; v1beta1 spellings are converted as apis/kueue/v1beta1/*_conversion.go does
(ClusterQueue ``spec.cohort`` -> ``cohortName``, flavorFungibility ``Borrow``/``Preempt`` -> ``MayStopSearch``).

Quantities are kept as exact integers the way Kueue's ``resources.ResourceValue`` keeps them: ``cpu`` in milli-units,
every other resource in whole units (bytes for memory), rounded up. No floats, so no drift.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from kubetwin.api.podresources import pod_requests
from kubetwin.k8s.conditions import find_condition, is_condition_true
from kubetwin.k8s.units import parse_quantity
from kubetwin.kueue.tas.assignment import assignment_from_api
from kubetwin.kueue.tas.request import TopologyRequest
from kubetwin.kueue.tas.request import from_api as topology_request_from_api

GROUP = "kueue.x-k8s.io"
CPU = "cpu"
PODS = "pods"

# Preemption policies (apis/kueue/v1beta2/clusterqueue_types.go).
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
ANY = "Any"
# Flavor fungibility.
MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

_V1BETA1_FUNGIBILITY = {"Borrow": MAY_STOP_SEARCH, "Preempt": MAY_STOP_SEARCH}


def amount(resource: str, value: object) -> int:
    """A quantity as Kueue's int64: milli-units for cpu, whole units (rounded up) for everything else."""
    q = parse_quantity(value)
    if resource == CPU:
        q = q * 1000
    return int(q.to_integral_value(rounding="ROUND_CEILING"))


_DECIMAL_SUFFIXES = [(18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k")]
_BINARY_SUFFIXES = [(60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")]


def format_amount(resource: str, value: int) -> str:
    """The canonical Quantity string Kueue writes for an amount (resource.Quantity.String()).

    cpu is a DecimalSI milli quantity, memory and ephemeral-storage BinarySI, everything else DecimalSI
    (pkg/resources/resource.go ResourceQuantity).
    """
    if resource == CPU:
        if value % 1000:
            return f"{value}m"
        value //= 1000
    if value == 0:
        return "0"
    sign, v = ("-", -value) if value < 0 else ("", value)
    if resource in ("memory", "ephemeral-storage"):
        for shift, suffix in _BINARY_SUFFIXES:
            if v % (1 << shift) == 0:
                return f"{sign}{v >> shift}{suffix}"
        return f"{sign}{v}"
    for exp, suffix in _DECIMAL_SUFFIXES:
        if v % (10**exp) == 0:
            return f"{sign}{v // 10**exp}{suffix}"
    return f"{sign}{v}"


# An imported Workload's creationTimestamp in the dumped cluster (importer/convert.py): it was created before the
# snapshot, the twin's t=0, so it queues ahead of every Workload created in the run, in the cluster's order (Kueue
# orders a ClusterQueue by creation time: pkg/workload/workload.go Ordering.GetQueueOrderTimestamp).
CREATED_IN_CLUSTER = "kubetwin.io/creation-timestamp"


def _creation_time(meta: dict[str, Any]) -> float:
    created = parse_time(meta.get("creationTimestamp"))
    before = (meta.get("annotations") or {}).get(CREATED_IN_CLUSTER)
    if before:
        try:
            return min(created, parse_time(before)) if created else parse_time(before)
        except ValueError:
            return created  # validate does not read it: a bad one is ignored
    return created


def parse_time(value: object) -> float:
    """RFC 3339 timestamp (metav1.Time) to epoch seconds; numbers pass through; missing is 0."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


def format_time(seconds: float) -> str:
    """Epoch seconds as metav1.Time's RFC 3339 form (second precision, UTC)."""
    return datetime.fromtimestamp(int(seconds), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ResourceQuota:
    """One resource of one flavor: nominalQuota plus optional borrowingLimit / lendingLimit (None = unset)."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    name: str
    resources: tuple[tuple[str, ResourceQuota], ...]


@dataclass(frozen=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True)
class Preemption:
    """ClusterQueue.spec.preemption with defaults: everything Never."""

    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort_policy: str = NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    namespace_selector: dict | None = None  # None matches no namespace, {} matches all
    queueing_strategy: str = BEST_EFFORT_FIFO
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    fair_weight: Decimal = Decimal(1)
    stop_policy: str = "None"
    # (AdmissionCheck name, onFlavors): v1beta2 admissionChecksStrategy, v1beta1 admissionChecks (every flavor)
    admission_checks: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # set by the admission checks controller (kueue.controller.admissionchecks): why its checks keep it inactive
    checks_inactive: str = ""  # "" = they don't


@dataclass(frozen=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: Decimal = Decimal(1)


@dataclass(frozen=True)
class ResourceFlavor:
    name: str
    node_labels: tuple[tuple[str, str], ...] = ()
    node_taints: tuple[dict, ...] = ()
    tolerations: tuple[dict, ...] = ()
    topology_name: str | None = None  # spec.topologyName: a TAS flavor


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str


@dataclass(frozen=True)
class WorkloadPriorityClass:
    name: str
    value: int


def _check_group(obj: dict, kind: str) -> None:
    api_version = obj.get("apiVersion", "")
    if not api_version.startswith(GROUP + "/") or obj.get("kind") != kind:
        raise ValueError(f"expected {GROUP} {kind}, got {api_version} {obj.get('kind')}")


def _resource_groups(spec: dict) -> tuple[ResourceGroup, ...]:
    groups = []
    for rg in spec.get("resourceGroups") or []:
        flavors = []
        for fq in rg.get("flavors") or []:
            res = []
            for r in fq.get("resources") or []:
                name = r["name"]
                bl, ll = r.get("borrowingLimit"), r.get("lendingLimit")
                res.append((name, ResourceQuota(amount(name, r.get("nominalQuota", 0)),
                                                None if bl is None else amount(name, bl),
                                                None if ll is None else amount(name, ll))))
            flavors.append(FlavorQuotas(fq["name"], tuple(res)))
        groups.append(ResourceGroup(tuple(rg.get("coveredResources") or ()), tuple(flavors)))
    return tuple(groups)


def _weight(spec: dict) -> Decimal:
    fs = spec.get("fairSharing") or {}
    return parse_quantity(fs["weight"]) if fs.get("weight") is not None else Decimal(1)


def parse_cluster_queue(obj: dict) -> ClusterQueue:
    """ClusterQueue in either served version; v1beta1 ``cohort`` and fungibility values are converted."""
    _check_group(obj, "ClusterQueue")
    spec = obj.get("spec") or {}
    cohort = spec.get("cohortName") or spec.get("cohort") or None
    p = spec.get("preemption") or {}
    bwc = p.get("borrowWithinCohort") or {}
    preemption = Preemption(p.get("withinClusterQueue") or NEVER, p.get("reclaimWithinCohort") or NEVER,
                            bwc.get("policy") or NEVER, bwc.get("maxPriorityThreshold"))
    ff = spec.get("flavorFungibility") or {}
    can_borrow, can_preempt = str(ff.get("whenCanBorrow") or ""), str(ff.get("whenCanPreempt") or "")
    fungibility = FlavorFungibility(
        _V1BETA1_FUNGIBILITY.get(can_borrow, can_borrow) or MAY_STOP_SEARCH,
        _V1BETA1_FUNGIBILITY.get(can_preempt, can_preempt) or TRY_NEXT_FLAVOR,
        ff.get("preference"))
    return ClusterQueue(
        name=obj["metadata"]["name"], cohort=cohort, resource_groups=_resource_groups(spec),
        namespace_selector=spec.get("namespaceSelector"),
        queueing_strategy=spec.get("queueingStrategy") or BEST_EFFORT_FIFO,
        preemption=preemption, flavor_fungibility=fungibility, fair_weight=_weight(spec),
        stop_policy=spec.get("stopPolicy") or "None", admission_checks=_admission_checks(spec))


def _admission_checks(spec: dict) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """spec.admissionChecksStrategy.admissionChecks[{name, onFlavors}], and v1beta1's spec.admissionChecks (names,
    on every flavor), in the order written (apis/kueue/v1beta2/clusterqueue_types.go AdmissionChecksStrategy)."""
    out: list[tuple[str, tuple[str, ...]]] = [(str(n), ()) for n in spec.get("admissionChecks") or []]
    for rule in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []:
        out.append((str(rule["name"]), tuple(str(f) for f in rule.get("onFlavors") or ())))
    return tuple(out)


def parse_cohort(obj: dict) -> Cohort:
    _check_group(obj, "Cohort")
    spec = obj.get("spec") or {}
    return Cohort(obj["metadata"]["name"], spec.get("parentName") or spec.get("parent") or None,
                  _resource_groups(spec), _weight(spec))


def parse_resource_flavor(obj: dict) -> ResourceFlavor:
    _check_group(obj, "ResourceFlavor")
    spec = obj.get("spec") or {}
    return ResourceFlavor(obj["metadata"]["name"], tuple(sorted((spec.get("nodeLabels") or {}).items())),
                          tuple(spec.get("nodeTaints") or ()), tuple(spec.get("tolerations") or ()),
                          spec.get("topologyName"))


def parse_local_queue(obj: dict) -> LocalQueue:
    _check_group(obj, "LocalQueue")
    meta = obj["metadata"]
    return LocalQueue(meta.get("namespace") or "default", meta["name"], (obj.get("spec") or {}).get("clusterQueue", ""))


def parse_workload_priority_class(obj: dict) -> WorkloadPriorityClass:
    _check_group(obj, "WorkloadPriorityClass")
    return WorkloadPriorityClass(obj["metadata"]["name"], int(obj.get("value", 0)))


# ---------------------------------------------------------------------------------------------------- Workload


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int
    min_count: int | None
    requests: tuple[tuple[str, int], ...]  # per pod
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity_terms: tuple[dict, ...] | None = None  # nodeSelectorTerms, None if unset
    tolerations: tuple[dict, ...] = ()
    topology_request: TopologyRequest | None = None  # podSets[].topologyRequest (TAS)

@dataclass(frozen=True)
class PodSetAssignment:
    name: str
    flavors: tuple[tuple[str, str], ...]  # resource -> flavor
    resource_usage: tuple[tuple[str, int], ...]  # resource -> total amount
    count: int | None
    # topologyAssignment as (levels, ((values, count), ...)), None without TAS
    topology_assignment: tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], int], ...]] | None = None


@dataclass(frozen=True)
class Admission:
    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...]


@dataclass(frozen=True)
class Workload:
    """The fields of a kueue.x-k8s.io Workload that admission reads."""

    namespace: str
    name: str
    uid: str
    creation_time: float
    queue_name: str
    priority: int
    priority_class_name: str | None
    active: bool
    pod_sets: tuple[PodSet, ...]
    admission: Admission | None
    conditions: tuple[dict, ...]
    labels: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def key(self) -> str:  # read millions of times per run by queues and preemption
        return f"{self.namespace}/{self.name}"

    def condition(self, ctype: str) -> dict | None:
        return find_condition(self.conditions, ctype)

    def condition_true(self, ctype: str) -> bool:
        return is_condition_true(self.conditions, ctype)

    @property
    def has_quota_reservation(self) -> bool:
        return self.admission is not None and self.condition_true("QuotaReserved")

    @property
    def is_evicted(self) -> bool:
        return self.condition_true("Evicted")

    def queue_order_time(self) -> float:
        """Creation time, or the eviction time after a PodsReadyTimeout / AdmissionCheck eviction.

        pkg/workload/workload.go Ordering.GetQueueOrderTimestamp with requeuingStrategy.timestamp Eviction.
        """
        c = self.condition("Evicted")
        if c is not None and c.get("status") == "True" and c.get("reason") in ("PodsReadyTimeout", "AdmissionCheck"):
            return parse_time(c.get("lastTransitionTime"))
        return self.creation_time

    @property
    def job_uid(self) -> str:
        return dict(self.labels).get(JOB_UID_LABEL, "")

    def can_be_partially_admitted(self) -> bool:
        return any(ps.min_count is not None and ps.min_count < ps.count for ps in self.pod_sets)


def _affinity_terms(spec: dict) -> tuple[dict, ...] | None:
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not req:
        return None
    return tuple(req.get("nodeSelectorTerms") or ())


def parse_workload(obj: dict, priority_classes: dict[str, int] | None = None) -> Workload:
    """A Workload dict (v1beta2 shape; v1beta1 priorityClassName is read too) as the scheduler sees it."""
    _check_group(obj, "Workload")
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    pod_sets = []
    for ps in spec.get("podSets") or []:
        tmpl_spec = ((ps.get("template") or {}).get("spec")) or {}
        pod_sets.append(PodSet(
            name=ps.get("name", "main"), count=int(ps.get("count", 1)),
            min_count=None if ps.get("minCount") is None else int(ps["minCount"]),
            requests=tuple(pod_requests({"spec": tmpl_spec}).items()),  # pkg/resources: PodRequests
            node_selector=tuple(sorted((tmpl_spec.get("nodeSelector") or {}).items())),
            required_affinity_terms=_affinity_terms(tmpl_spec),
            tolerations=tuple(tmpl_spec.get("tolerations") or ()),
            topology_request=topology_request_from_api(ps.get("topologyRequest"))))
    admission = None
    if status.get("admission"):
        adm = status["admission"]
        psas = []
        for psa in adm.get("podSetAssignments") or []:
            usage = tuple(sorted((k, amount(k, v)) for k, v in (psa.get("resourceUsage") or {}).items()))
            ta = None
            if psa.get("topologyAssignment"):
                parsed = assignment_from_api(psa["topologyAssignment"])
                ta = (parsed.levels, tuple(parsed.domains))
            psas.append(PodSetAssignment(psa.get("name", "main"), tuple(sorted((psa.get("flavors") or {}).items())),
                                         usage, None if psa.get("count") is None else int(psa["count"]), ta))
        admission = Admission(adm.get("clusterQueue", ""), tuple(psas))
    pc_name = spec.get("priorityClassName") or ((spec.get("priorityClassRef") or {}).get("name")) or None
    priority = spec.get("priority")
    if priority is None:
        priority = (priority_classes or {}).get(pc_name or "", 0)
    active = spec.get("active")
    return Workload(
        namespace=meta.get("namespace") or "default", name=meta["name"], uid=meta.get("uid") or "",
        creation_time=_creation_time(meta), queue_name=spec.get("queueName") or "",
        priority=int(priority), priority_class_name=pc_name, active=True if active is None else bool(active),
        pod_sets=tuple(pod_sets), admission=admission, conditions=tuple(status.get("conditions") or ()),
        labels=tuple(sorted((meta.get("labels") or {}).items())))


def parse_any(obj: dict) -> Any:
    """Dispatch on kind (ClusterQueue, Cohort, ResourceFlavor, LocalQueue, WorkloadPriorityClass, Workload)."""
    parsers = {"ClusterQueue": parse_cluster_queue, "Cohort": parse_cohort, "ResourceFlavor": parse_resource_flavor,
               "LocalQueue": parse_local_queue, "WorkloadPriorityClass": parse_workload_priority_class,
               "Workload": parse_workload}
    kind = obj.get("kind", "")
    if kind not in parsers:
        raise ValueError(f"not a Kueue kind: {kind}")
    return parsers[kind](obj)

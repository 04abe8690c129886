"""Flavor assignment: for each podSet and resource group, which ResourceFlavor, and whether it fits now, needs
preemption, or cannot fit.

Ported from kubernetes-sigs/kueue pkg/scheduler/flavorassigner/flavorassigner.go (assignFlavors,
findFlavorForPodSets, checkFlavorForPodSets, flavorSelector, fitsResourceQuota, isPreferred, shouldTryNextFlavor,
Status.Message, Assignment.Message/ToAPI) and flavor_assignment_attempts.go (the ``Flavors considered`` event text).

Flavors of a resource group are tried in listed order; the scan stops at the first flavor fungibility accepts,
otherwise the best seen wins (noFit worst; no preemption candidates below any viable mode; then the configured
preference). TAS flavors (``spec.topologyName``) take the pod sets that ask for a topology, which are then
placed by ``kueue.tas`` once their quota fits (tas_flavorassigner.go). Not modelled: resuming the scan at
``LastAssignment.NextFlavorToTry`` across cycles, DRA, podSet groups, workload slices, TAS-aware preemption.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetwin.k8s.labels import requirement_matches
from kubetwin.k8s.taints import tolerates
from kubetwin.kueue.api import (
    BORROWING_OVER_PREEMPTION,
    NEVER,
    PODS,
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    PodSet,
    format_amount,
)
from kubetwin.kueue.preemption import Preemptor
from kubetwin.kueue.preemption.common import NO_CANDIDATES, PREEMPT, RECLAIM
from kubetwin.kueue.quota import FlavorResource, find_height_of_lowest_subtree_that_fits
from kubetwin.kueue.snapshot import ClusterQueueSnapshot, Snapshot, Usage, WorkloadInfo
from kubetwin.kueue.tas.assignment import Assignment as TopologyAssignment
from kubetwin.kueue.tas.snapshot import PodSetRequest

# The QuotaReserved reason of a workload whose topology does not fit even on empty domains
# (apis/kueue/v1beta2/workload_types.go WorkloadQuotaReservedReasonTopologyPlacementFailed).
TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"

# FlavorAssignmentMode, ordered from least to most preferred.
NO_FIT, PREEMPT_MODE, FIT = 0, 1, 3
MODE_NAMES = {NO_FIT: "NoFit", PREEMPT_MODE: "Preempt", 2: "DeferredFit", FIT: "Fit"}
# Internal preemption modes (granularMode.preemptionMode).
PM_NO_FIT, PM_NO_CANDIDATES, PM_PREEMPT, PM_RECLAIM, PM_FIT = range(5)
_PM_FROM_POSSIBILITY = {NO_CANDIDATES: PM_NO_CANDIDATES, PREEMPT: PM_PREEMPT, RECLAIM: PM_RECLAIM}
_POSSIBILITY_FROM_PM = {v: k for k, v in _PM_FROM_POSSIBILITY.items()}
_WORST = (PM_NO_FIT, 1 << 62)


def _assignment_mode(pm: int) -> int:
    return NO_FIT if pm == PM_NO_FIT else FIT if pm == PM_FIT else PREEMPT_MODE


def is_preferred(a: tuple[int, int], b: tuple[int, int], preference: str | None) -> bool:
    """Whether granular mode a = (preemptionMode, borrowingLevel) beats b."""
    if a[0] == PM_NO_FIT:
        return False
    if b[0] == PM_NO_FIT:
        return True
    a_none, b_none = a[0] == PM_NO_CANDIDATES, b[0] == PM_NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if preference == PREEMPTION_OVER_BORROWING:
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:  # BorrowingOverPreemption, also the default
        return a[0] > b[0]
    return a[1] < b[1]


def should_try_next_flavor(mode: tuple[int, int], when_can_borrow: str, when_can_preempt: str) -> bool:
    if mode[0] in (PM_NO_FIT, PM_NO_CANDIDATES):
        return True
    if mode[0] in (PM_PREEMPT, PM_RECLAIM) and when_can_preempt == TRY_NEXT_FLAVOR:
        return True
    return mode[1] != 0 and when_can_borrow == TRY_NEXT_FLAVOR


@dataclass
class FlavorAssignment:
    name: str
    mode: int
    borrow: int = 0


@dataclass
class FlavorAttempt:
    """One flavor tried for a podSet: worst mode, most borrowing, preemption possibility, reasons."""

    flavor: str
    mode: int
    borrow: int = 0
    possibility: str | None = None
    reasons: tuple[str, ...] = ()


@dataclass
class PodSetAssignment:
    name: str
    flavors: dict[str, FlavorAssignment]
    requests: dict[str, int]  # total for the podSet at ``count``
    count: int
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    attempts: list[FlavorAttempt] = field(default_factory=list)
    topology_assignment: TopologyAssignment | None = None  # TAS: where its pods go
    tas_flavor: str | None = None  # the TAS flavor it was placed on (or failed on)

    @property
    def is_fit(self) -> bool:
        return self.error is None and not self.reasons

    def representative_mode(self) -> int:
        if self.is_fit:
            return FIT
        if self.error is not None or not self.flavors:
            return NO_FIT
        return min(fa.mode for fa in self.flavors.values())

    def status_message(self) -> str:
        if self.error is not None:
            return self.error
        return ", ".join(sorted(self.reasons))

    def to_api(self) -> dict:
        """A status.admission.podSetAssignments entry as Kueue writes it."""
        out = {"name": self.name,
               "flavors": {r: self.flavors[r].name for r in sorted(self.flavors)},
               "resourceUsage": {r: format_amount(r, self.requests.get(r, 0)) for r in sorted(self.flavors)},
               "count": self.count}
        if self.topology_assignment is not None:
            out["topologyAssignment"] = self.topology_assignment.to_api()
        return out

    def update_mode(self, mode: int) -> None:
        """Every flavor of the pod set to ``mode`` (PodSetAssignment.updateMode)."""
        for fa in self.flavors.values():
            fa.mode = mode


@dataclass
class Assignment:
    pod_sets: list[PodSetAssignment] = field(default_factory=list)
    borrowing: int = 0
    usage: Usage = field(default_factory=dict)
    # the quota fits but the topology does not: waiting for TAS workloads to leave (Kueue's TAS-aware preemption,
    # which picks victims by the domains they free, is not modelled, so no quota preemption is tried for it)
    tas_preempt: bool = False

    def append(self, psa: PodSetAssignment) -> None:
        """Add a podSet's assignment: its flavors' borrowing level and usage accumulate."""
        self.pod_sets.append(psa)
        for res, fa in sorted(psa.flavors.items()):
            self.borrowing = max(self.borrowing, fa.borrow)
            fr = (fa.name, res)
            self.usage[fr] = self.usage.get(fr, 0) + psa.requests.get(res, 0)

    def representative_mode(self) -> int:
        if not self.pod_sets:
            return NO_FIT
        return min(ps.representative_mode() for ps in self.pod_sets)

    def message(self) -> str:
        parts = []
        for ps in self.pod_sets:
            if ps.is_fit:
                continue
            if ps.error is not None:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.status_message()}")
        return "; ".join(parts)

    def total_requests(self) -> Usage:
        return {fr: v for fr, v in sorted(self.usage.items()) if v}

    def flavor_resources_need_preemption(self) -> set[FlavorResource]:
        return {(fa.name, r) for ps in self.pod_sets for r, fa in ps.flavors.items() if fa.mode == PREEMPT_MODE}

    def to_api(self) -> list[dict]:
        return [ps.to_api() for ps in self.pod_sets]

    def flavors_considered(self) -> str:
        """The ``Flavors considered:`` part of the QuotaReserved event (FormatFlavorAssignmentAttemptsForEvents)."""
        out = []
        for ps in self.pod_sets:
            items = []
            for att in ps.attempts:
                if att.mode == FIT and att.borrow == 0:
                    continue
                text = f"{att.flavor}("
                text += MODE_NAMES[att.mode] if att.possibility is None else f"preemptionMode={att.possibility}"
                if att.borrow > 0:
                    text += f";borrow={att.borrow}"
                if att.reasons:
                    text += ";" + ";".join(att.reasons)
                items.append(text + ")")
            if items:
                out.append(f"{ps.name}: " + ", ".join(items))
        return " | ".join(out)


def _taint_string(t: dict) -> str:
    value = t.get("value")
    return f"{t['key']}={value}:{t.get('effect', '')}" if value else f"{t['key']}:{t.get('effect', '')}"


def tas_flavor_mismatch(flavor, ps: PodSet, cq: ClusterQueueSnapshot, snapshot: Snapshot,
                        covered: tuple[str, ...]) -> str | None:
    """Kueue's checkPodSetAndFlavorMatchForTAS (pkg/scheduler/flavorassigner/tas_flavorassigner.go): a pod set
    asking for TAS needs a TAS flavor that knows its levels; a TAS flavor takes only pod sets that ask for TAS,
    or any pod set when every flavor of the ClusterQueue is a TAS flavor (TAS implied)."""
    if tas_requested(ps, cq, snapshot):
        if not explicitly_requests_tas(ps):
            return None
        if flavor.topology_name is None:
            if not any(r in covered for r, _ in ps.requests):
                return None
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        tas = snapshot.tas_flavors.get(flavor.name)
        if tas is None:
            return f'Flavor "{flavor.name}" information missing in TAS cache'
        if not tas.has_level(ps.topology_request):
            return f'Flavor "{flavor.name}" does not contain the requested level'
        return None
    if flavor.topology_name is not None:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    return None


def explicitly_requests_tas(ps: PodSet) -> bool:
    """workload.IsExplicitlyRequestingTAS: required, preferred, unconstrained or a slice topology."""
    tr = ps.topology_request
    return tr is not None and (tr.required is not None or tr.preferred is not None or bool(tr.unconstrained)
                               or tr.slice_required is not None)


def tas_only(cq: ClusterQueueSnapshot, snapshot: Snapshot) -> bool:
    """ClusterQueueSnapshot.IsTASOnly: every flavor of every resource group is a TAS flavor."""
    names = [fq.name for rg in cq.spec.resource_groups for fq in rg.flavors]
    return bool(names) and all(snapshot.tas_flavors.get(n) is not None for n in names)


def tas_requested(ps: PodSet, cq: ClusterQueueSnapshot, snapshot: Snapshot) -> bool:
    return explicitly_requests_tas(ps) or (bool(snapshot.tas_flavors) and tas_only(cq, snapshot))


def flavor_matches_pod_set(flavor, ps: PodSet) -> str | None:
    """None if the podSet may use the flavor, else the reason: an untolerated NoSchedule/NoExecute taint, or a
    nodeSelector/required affinity that conflicts with the flavor's nodeLabels on the flavor's own label keys."""
    tolerations = list(ps.tolerations) + list(flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerates(tolerations, taint):
            return f"untolerated taint {_taint_string(taint)} in flavor {flavor.name}"
    labels = dict(flavor.node_labels)
    for k, v in ps.node_selector:
        if k in labels and labels[k] != v:
            return f"flavor {flavor.name} doesn't match node affinity"
    if ps.required_affinity_terms is not None:
        terms: list[list[dict]] = []
        for term in ps.required_affinity_terms:
            exprs = [e for e in term.get("matchExpressions") or [] if e["key"] in labels]
            if not exprs:
                terms = []
                break
            terms.append(exprs)
        if terms and not any(all(requirement_matches(e, labels) for e in exprs) for exprs in terms):
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


class FlavorAssigner:
    """Assigns flavors for one workload against one ClusterQueue of a Snapshot."""

    def __init__(self, wl: WorkloadInfo, cq: ClusterQueueSnapshot, snapshot: Snapshot, preemptor: Preemptor,
                 fair_sharing: bool = False) -> None:
        self.wl, self.cq, self.snapshot, self.preemptor = wl, cq, snapshot, preemptor
        self.fair_sharing = fair_sharing

    def assign(self, counts: list[int] | None = None) -> Assignment:
        """Flavors for every podSet at ``counts`` (default: full counts). Stops at the first podSet that fails."""
        assignment = Assignment()
        for i, ps in enumerate(self.wl.obj.pod_sets):
            count = ps.count if counts is None else counts[i]
            requests = {r: v * count for r, v in ps.requests}
            if self.cq.rg_by_resource(PODS) is not None:
                requests[PODS] = count
            psa = PodSetAssignment(ps.name, {}, requests, count)
            group_flavors: dict[str, FlavorAssignment] = {}
            attempts: dict[str, FlavorAttempt] = {}
            failed = False
            for res in sorted(requests):
                if self.cq.rg_by_resource(res) is None and requests[res] == 0:
                    continue
                if res in group_flavors:
                    continue
                flavors, reasons, error = self._find_flavor(ps, requests, res, assignment.usage, attempts)
                if error is not None or (not flavors and requests):
                    group_flavors = {}
                    psa.reasons = list(reasons)
                    psa.error = error
                    failed = True
                    break
                group_flavors.update(flavors or {})
                psa.reasons.extend(reasons)
            psa.attempts = [attempts[f] for f in sorted(attempts)]
            if group_flavors:
                psa.flavors = {r: fa for r, fa in group_flavors.items() if r in requests}
            assignment.append(psa)
            if failed:
                return assignment
        if self.snapshot.tas_flavors and assignment.representative_mode() != NO_FIT:
            self._assign_topology(assignment)
        return assignment

    def _tas_requests(self, assignment: Assignment) -> dict[str, list[tuple[PodSetAssignment, PodSetRequest]]]:
        """Per TAS flavor, the pod sets to place there (Assignment.WorkloadsTopologyRequests)."""
        out: dict[str, list[tuple[PodSetAssignment, PodSetRequest]]] = {}
        for ps, psa in zip(self.wl.obj.pod_sets, assignment.pod_sets, strict=False):
            if not tas_requested(ps, self.cq, self.snapshot) or psa.error is not None or psa.count == 0:
                continue
            tas_flavors = sorted({fa.name for fa in psa.flavors.values() if fa.name in self.snapshot.tas_flavors})
            if len(tas_flavors) != 1:
                psa.error = ("workload requires Topology, but there is no TAS cache information assigned"
                             if not tas_flavors else
                             f"more than one TAS flavor assigned: {', '.join(tas_flavors)}")
                continue
            tr = ps.topology_request if explicitly_requests_tas(ps) else None
            out.setdefault(tas_flavors[0], []).append((psa, PodSetRequest(
                ps.name, psa.count, dict(ps.requests), tr, dict(ps.node_selector), ps.required_affinity_terms,
                tuple(ps.tolerations))))
        return out

    def _assign_topology(self, assignment: Assignment) -> None:
        """Place the TAS pod sets when the quota fits; a pod set that does not fit makes the workload wait for
        preemption if it would fit on empty domains, else NoFit (flavorassigner.go assignFlavors' TAS step)."""
        requests = self._tas_requests(assignment)
        if assignment.representative_mode() == FIT:
            for flavor, items in sorted(requests.items()):
                found = self.snapshot.tas_flavors[flavor].find_assignments([r for _, r in items])
                for psa, req in items:
                    ta, reason = found.get(req.name, (None, ""))
                    psa.tas_flavor = flavor
                    if reason:
                        psa.reasons.append(reason)
                        psa.update_mode(PREEMPT_MODE)
                        assignment.tas_preempt = True
                        break
                    psa.topology_assignment = ta
        if assignment.representative_mode() == PREEMPT_MODE and assignment.tas_preempt:
            for flavor, items in sorted(requests.items()):
                found = self.snapshot.tas_flavors[flavor].find_assignments([r for _, r in items],
                                                                           simulate_empty=True)
                for psa, req in items:
                    _, reason = found.get(req.name, (None, ""))
                    if reason:
                        psa.update_mode(NO_FIT)
                        psa.attempts = [FlavorAttempt(a.flavor, NO_FIT, a.borrow, a.possibility,
                                                      a.reasons + (TOPOLOGY_PLACEMENT_FAILED,))
                                        if a.flavor == flavor else a for a in psa.attempts]
                        break

    def _find_flavor(self, ps: PodSet, requests: dict[str, int], res: str, usage: Usage,
                     attempts: dict[str, FlavorAttempt]) -> tuple[dict[str, FlavorAssignment] | None, list[str],
                                                                 str | None]:
        rg = self.cq.rg_by_resource(res)
        if rg is None:
            return None, [f"resource {res} unavailable in ClusterQueue"], None
        group_requests = {r: v for r, v in sorted(requests.items()) if r in rg.covered_resources}
        fungibility = self.cq.spec.flavor_fungibility
        reasons: list[str] = []
        best: dict[str, FlavorAssignment] | None = None
        best_mode = _WORST
        for fq in rg.flavors:
            fname = fq.name
            flavor = self.snapshot.resource_flavors.get(fname)
            mismatch = f"flavor {fname} not found" if flavor is None else flavor_matches_pod_set(flavor, ps)
            if mismatch is None and flavor is not None and (flavor.topology_name is not None
                                                             or ps.topology_request is not None):
                mismatch = tas_flavor_mismatch(flavor, ps, self.cq, self.snapshot, rg.covered_resources)
            if mismatch is not None:
                reasons.append(mismatch)
                _merge_attempt(attempts, FlavorAttempt(fname, NO_FIT, reasons=(mismatch,)))
                continue
            assignments: dict[str, FlavorAssignment] = {}
            rep = (PM_FIT, 0)
            max_borrow = 0
            flavor_reasons: list[str] = []
            for r, val in group_requests.items():
                fr = (fname, r)
                pm, borrow, why = self._fits_resource_quota(fr, usage.get(fr, 0), val)
                if why:
                    flavor_reasons.append(why)
                    reasons.append(why)
                max_borrow = max(max_borrow, borrow)
                mode = (pm, borrow)
                if is_preferred(rep, mode, fungibility.preference):
                    rep = mode
                if rep[0] == PM_NO_FIT:
                    continue
                assignments[r] = FlavorAssignment(fname, _assignment_mode(pm), borrow)
            _merge_attempt(attempts, FlavorAttempt(fname, _assignment_mode(rep[0]), max_borrow,
                                                   _POSSIBILITY_FROM_PM.get(rep[0]), tuple(sorted(flavor_reasons))))
            if not should_try_next_flavor(rep, fungibility.when_can_borrow, fungibility.when_can_preempt):
                best, best_mode = assignments, rep
                break
            if is_preferred(rep, best_mode, fungibility.preference):
                best, best_mode = assignments, rep
        if best_mode[0] == PM_FIT:
            return best, [], None
        return best, reasons, None

    def _fits_resource_quota(self, fr: FlavorResource, assumed: int, request: int) -> tuple[int, int, str]:
        """(preemption mode, borrowing level, reason) for adding ``request`` of fr on top of ``assumed``."""
        avail = self.cq.available(fr)
        max_capacity = self.cq.potential_available(fr)
        val = assumed + request
        flavor, res = fr
        if val > max_capacity:
            return PM_NO_FIT, 0, (
                f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests "
                f"({format_amount(res, assumed)}) + current podset request ({format_amount(res, request)}) > "
                f"maximum capacity ({format_amount(res, max_capacity)})")
        borrow, may_reclaim = find_height_of_lowest_subtree_that_fits(self.cq.node, fr, val)
        if val <= avail:
            return PM_FIT, borrow, ""
        why = f"insufficient unused quota for {res} in flavor {flavor}, {format_amount(res, val - avail)} more needed"
        if self.cq.quota_for(fr).nominal >= val or may_reclaim or self._can_preempt_while_borrowing():
            possibility, borrow_after = self.preemptor.simulate_preemption(self.cq, self.wl, self.snapshot, fr, val)
            return _PM_FROM_POSSIBILITY[possibility], borrow_after, why
        return PM_NO_FIT, borrow, why

    def _can_preempt_while_borrowing(self) -> bool:
        p = self.cq.preemption
        return p.borrow_within_cohort_policy != NEVER or (self.fair_sharing and p.reclaim_within_cohort != NEVER)


def _merge_attempt(attempts: dict[str, FlavorAttempt], att: FlavorAttempt) -> None:
    old = attempts.get(att.flavor)
    if old is None:
        attempts[att.flavor] = FlavorAttempt(att.flavor, att.mode, att.borrow, att.possibility,
                                             tuple(sorted(set(att.reasons))))
        return
    order = [NO_CANDIDATES, PREEMPT, RECLAIM]
    possibility = old.possibility
    if att.possibility is not None and (possibility is None or order.index(att.possibility) < order.index(possibility)):
        possibility = att.possibility
    attempts[att.flavor] = FlavorAttempt(att.flavor, min(old.mode, att.mode), max(old.borrow, att.borrow),
                                         possibility, tuple(sorted(set(old.reasons) | set(att.reasons))))


__all__ = ["Assignment", "FlavorAssigner", "FlavorAssignment", "PodSetAssignment", "BORROWING_OVER_PREEMPTION",
           "NO_FIT", "PREEMPT_MODE", "FIT", "is_preferred", "should_try_next_flavor", "flavor_matches_pod_set"]

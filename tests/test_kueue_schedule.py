"""Kueue TestSchedule vectors (shared/conformance/kueue/kueue_vectors.md K*): one scheduling cycle each.

Fixture S is Kueue's scheduler_test.go base fixture; every case checks the full outcome: who got quota with which
flavors and counts, who was preempted and why, what stays pending with which condition, and where each pending
workload sits (heap or inadmissible set).
"""

from __future__ import annotations

import pytest
from kueue_builders import NOW, make_cohort, make_cq, make_flavor, make_lq, make_wl

from kubetwin.kueue import KueueScheduler

NAMESPACES = {"sales": {"dep": "sales"}, "eng-alpha": {"dep": "eng"}, "eng-beta": {"dep": "eng"},
              "eng-gamma": {"dep": "eng"}, "lend": {"dep": "lend"}, "default": {}}


def fixture_s() -> list[dict]:
    flavors = [make_flavor(n).obj() for n in ("default", "on-demand", "spot", "model-a")]
    flavors += [make_flavor("spot-tainted").taints([{"key": "key", "value": "val", "effect": "NoSchedule"}]).obj(),
                make_flavor("spot-tainted-2").obj()]
    cqs = [
        make_cq("sales").dep("sales").strategy("StrictFIFO").flavor("default", cpu="50").obj(),
        make_cq("eng-alpha").cohort("eng").dep("eng").strategy("StrictFIFO")
        .flavor("on-demand", cpu=("50", "50")).flavor("spot", cpu=("100", "0")).obj(),
        make_cq("eng-beta").cohort("eng").dep("eng").strategy("StrictFIFO")
        .preemption(within="LowerPriority", reclaim="Any")
        .flavor("on-demand", cpu=("50", "10")).flavor("spot", cpu=("0", "100"))
        .flavor("model-a", {"example.com/gpu": ("20", "0")}).obj(),
        make_cq("lend-a").cohort("lend").flavor("default", cpu=("3", None, "2")).obj(),
        make_cq("lend-b").cohort("lend").flavor("default", cpu=("2", None, "2")).obj(),
    ]
    lqs = [make_lq("main", "sales").cluster_queue("sales").obj(),
           make_lq("blocked", "sales").cluster_queue("eng-alpha").obj(),
           make_lq("main", "eng-alpha").cluster_queue("eng-alpha").obj(),
           make_lq("main", "eng-beta").cluster_queue("eng-beta").obj(),
           make_lq("lend-a-queue", "lend").cluster_queue("lend-a").obj(),
           make_lq("lend-b-queue", "lend").cluster_queue("lend-b").obj()]
    return flavors + cqs + lqs


def run_cycle(workloads: list[dict], extra: list[dict] = (), partial_admission: bool = True):
    sched = KueueScheduler(partial_admission=partial_admission)
    for ns, labels in NAMESPACES.items():
        sched.set_namespace(ns, labels)
    for obj in fixture_s() + list(extra):
        sched.apply(obj)
    for wl in workloads:
        sched.add_workload(wl)
    return sched, sched.schedule(NOW)


def queues_state(sched: KueueScheduler) -> tuple[dict, dict]:
    left, inadmissible = {}, {}
    for name, q in sorted(sched.queues.queues.items()):
        if q.active():
            left[name] = q.active()
        if q.pending_inadmissible():
            inadmissible[name] = q.pending_inadmissible()
    return left, inadmissible


def admitted_summary(result) -> dict:
    """key -> {podSet: (flavors, resourceUsage, count)} from the status.admission dicts."""
    return {a.key: {psa["name"]: (psa["flavors"], psa["resourceUsage"], psa["count"])
                    for psa in a.admission["podSetAssignments"]} for a in result.admitted}


def wl(ns, name):
    return make_wl(ns, name)


CASES = {
    "K1 single clusterQueue full": dict(
        workloads=[wl("sales", "new").queue("main").podset("one", 11, cpu="1").obj(),
                   wl("sales", "assigned").podset("one", 40, cpu="1").admitted("sales", {"one": {"cpu": "default"}})
                   .obj()],
        admitted={},
        left={"sales": ["sales/new"]},
        pending={"sales/new": ("WaitingForQuota", "couldn't assign flavors to pod set one: insufficient unused quota "
                                                  "for cpu in flavor default, 1 more needed")}),
    "K2 failed to match clusterQueue selector": dict(
        workloads=[wl("sales", "new").queue("blocked").podset("one", 1, cpu="1").obj()],
        admitted={},
        inadmissible={"eng-alpha": ["sales/new"]},
        pending={"sales/new": ("Misconfigured", "workload namespace doesn't match ClusterQueue selector")}),
    "K3 admit in different cohorts": dict(
        workloads=[wl("sales", "new").queue("main").podset("one", 1, cpu="1").obj(),
                   wl("eng-alpha", "new").queue("main").podset("one", 51, cpu="1").obj()],
        admitted={"sales/new": {"one": ({"cpu": "default"}, {"cpu": "1"}, 1)},
                  "eng-alpha/new": {"one": ({"cpu": "on-demand"}, {"cpu": "51"}, 51)}}),
    "K4 admit in same cohort with no borrowing": dict(
        workloads=[wl("eng-alpha", "new").queue("main").podset("one", 40, cpu="1").obj(),
                   wl("eng-beta", "new").queue("main").podset("one", 40, cpu="1").obj()],
        admitted={"eng-alpha/new": {"one": ({"cpu": "on-demand"}, {"cpu": "40"}, 40)},
                  "eng-beta/new": {"one": ({"cpu": "on-demand"}, {"cpu": "40"}, 40)}}),
    "K5 assign multiple resources and flavors": dict(
        workloads=[wl("eng-beta", "new").queue("main").podset("one", 10, cpu="6", res={"example.com/gpu": "1"})
                   .podset("two", 40, cpu="1").obj()],
        admitted={"eng-beta/new": {
            "one": ({"cpu": "on-demand", "example.com/gpu": "model-a"}, {"cpu": "60", "example.com/gpu": "10"}, 10),
            "two": ({"cpu": "spot"}, {"cpu": "40"}, 40)}}),
    # K6 is not spelled out in the vectors file; reconstructed from scheduler_test.go ("cannot borrow if cohort
    # was assigned and would result in overadmission").
    "K6 cannot borrow if cohort was assigned and would result in overadmission": dict(
        workloads=[wl("eng-alpha", "new").queue("main").podset("one", 45, cpu="1").obj(),
                   wl("eng-beta", "new").queue("main").podset("one", 56, cpu="1").obj()],
        admitted={"eng-alpha/new": {"one": ({"cpu": "on-demand"}, {"cpu": "45"}, 45)}},
        left={"eng-beta": ["eng-beta/new"]},
        pending={"eng-beta/new": ("WaitingForQuota", "Workload no longer fits after processing another workload")}),
    "K7 can borrow if cohort was assigned and will not result in overadmission": dict(
        workloads=[wl("eng-alpha", "new").queue("main").podset("one", 45, cpu="1").obj(),
                   wl("eng-beta", "new").queue("main").podset("one", 55, cpu="1").obj()],
        admitted={"eng-alpha/new": {"one": ({"cpu": "on-demand"}, {"cpu": "45"}, 45)},
                  "eng-beta/new": {"one": ({"cpu": "on-demand"}, {"cpu": "55"}, 55)}}),
    "K8 can borrow if needs reclaim from cohort in different flavor": dict(
        workloads=[wl("eng-alpha", "can-reclaim").queue("main").request("cpu", "100").obj(),
                   wl("eng-beta", "needs-to-borrow").queue("main").request("cpu", "1").obj(),
                   wl("eng-beta", "user-on-demand").request("cpu", "50")
                   .admitted("eng-beta", {"main": {"cpu": "on-demand"}}).obj(),
                   wl("eng-beta", "user-spot").request("cpu", "1")
                   .admitted("eng-beta", {"main": {"cpu": "spot"}}).obj()],
        admitted={"eng-beta/needs-to-borrow": {"main": ({"cpu": "on-demand"}, {"cpu": "1"}, 1)}},
        left={"eng-alpha": ["eng-alpha/can-reclaim"]},
        pending={"eng-alpha/can-reclaim": (
            "WaitingForQuota", "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                               "on-demand, 50 more needed, insufficient unused quota for cpu in flavor spot, "
                               "1 more needed")}),
    "K9 workload exceeds lending limit when borrow in cohort": dict(
        workloads=[wl("lend", "a").request("cpu", "2").admitted("lend-b", {"main": {"cpu": "default"}}).obj(),
                   wl("lend", "b").queue("lend-b-queue").request("cpu", "3").obj()],
        admitted={},
        inadmissible={"lend-b": ["lend/b"]},
        pending={"lend/b": ("WaitingForQuota", "couldn't assign flavors to pod set main: insufficient unused quota "
                                               "for cpu in flavor default, 1 more needed")}),
    "K14 not enough resources to borrow, fallback to next flavor": dict(
        workloads=[wl("eng-alpha", "new").queue("main").podset("one", 60, cpu="1").obj(),
                   wl("eng-beta", "existing").podset("one", 45, cpu="1")
                   .admitted("eng-beta", {"one": {"cpu": "on-demand"}}).obj()],
        admitted={"eng-alpha/new": {"one": ({"cpu": "spot"}, {"cpu": "60"}, 60)}}),
    "K15 no overadmission while borrowing": dict(
        extra=[make_cq("eng-gamma").cohort("eng").dep("eng").preemption(within="LowerPriority", reclaim="Any")
               .flavor("on-demand", cpu=("50", "10")).flavor("spot", cpu=("0", "100")).obj(),
               make_lq("main", "eng-gamma").cluster_queue("eng-gamma").obj()],
        workloads=[wl("eng-beta", "new").queue("main").created(NOW - 2).podset("one", 50, cpu="1").obj(),
                   wl("eng-alpha", "new-alpha").queue("main").created(NOW - 1).podset("one", 1, cpu="1").obj(),
                   wl("eng-gamma", "new-gamma").queue("main").podset("one", 50, cpu="1").obj(),
                   wl("eng-gamma", "existing").podset("borrow-on-demand", 51, cpu="1").podset("use-all-spot", 100,
                                                                                                cpu="1")
                   .admitted("eng-gamma", {"borrow-on-demand": {"cpu": "on-demand"}, "use-all-spot": {"cpu": "spot"}})
                   .obj()],
        admitted={"eng-beta/new": {"one": ({"cpu": "on-demand"}, {"cpu": "50"}, 50)},
                  "eng-alpha/new-alpha": {"one": ({"cpu": "on-demand"}, {"cpu": "1"}, 1)}},
        inadmissible={"eng-gamma": ["eng-gamma/new-gamma"]}),
    "K16 partial admission single variable pod set": dict(
        workloads=[wl("sales", "new").queue("main").podset("one", 50, min_count=20, cpu="2").obj()],
        admitted={"sales/new": {"one": ({"cpu": "default"}, {"cpu": "50"}, 25)}}),
    "K17 partial admission multiple variable pod sets": dict(
        workloads=[wl("sales", "new").queue("main").podset("one", 20, cpu="1").podset("two", 30, min_count=10, cpu="1")
                   .podset("three", 15, min_count=5, cpu="1").obj()],
        admitted={"sales/new": {"one": ({"cpu": "default"}, {"cpu": "20"}, 20),
                                "two": ({"cpu": "default"}, {"cpu": "20"}, 20),
                                "three": ({"cpu": "default"}, {"cpu": "10"}, 10)}}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule(name):
    case = CASES[name]
    sched, result = run_cycle(case["workloads"], case.get("extra", ()))
    assert admitted_summary(result) == case["admitted"]
    assert result.victims == []
    assert result.skipped_preemptions == {}
    left, inadmissible = queues_state(sched)
    assert left == case.get("left", {})
    assert inadmissible == case.get("inadmissible", {})
    pending = {p.key: (p.reason, p.message) for p in result.pending}
    if "pending" in case:
        assert pending == case["pending"]
    else:
        assert set(pending) == {k for v in list(case.get("left", {}).values())
                                + list(case.get("inadmissible", {}).values()) for k in v}


def test_k12_preempt_workloads_in_cluster_queue_and_cohort():
    workloads = [
        wl("eng-beta", "preemptor").uid("wl-preemptor").job_uid("job-preemptor").queue("main").request("cpu", "20")
        .obj(),
        wl("eng-alpha", "use-all-spot").request("cpu", "100").admitted("eng-alpha", {"main": {"cpu": "spot"}}).obj(),
        wl("eng-beta", "low-1").priority(-1).request("cpu", "30").admitted("eng-beta", {"main": {"cpu": "on-demand"}})
        .obj(),
        wl("eng-beta", "low-2").priority(-2).request("cpu", "10").admitted("eng-beta", {"main": {"cpu": "on-demand"}})
        .obj(),
        wl("eng-alpha", "borrower").request("cpu", "60").admitted("eng-alpha", {"main": {"cpu": "on-demand"}}).obj(),
    ]
    sched, result = run_cycle(workloads)
    assert result.admitted == []
    msg = ("Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to {}; "
           "preemptor path: /eng/eng-beta; preemptee path: {}")
    victims = {v.key: (v.reason, v.message) for v in result.victims}
    assert victims == {
        "eng-alpha/borrower": ("InCohortReclamation", msg.format("reclamation within the cohort", "/eng/eng-alpha")),
        "eng-beta/low-2": ("InClusterQueue", msg.format("prioritization in the ClusterQueue", "/eng/eng-beta")),
    }
    low2 = next(v for v in result.victims if v.key == "eng-beta/low-2")
    assert [(c["type"], c["status"], c["reason"]) for c in low2.conditions] == [
        ("Evicted", "True", "Preempted"), ("Preempted", "True", "InClusterQueue")]
    [pending] = result.pending
    assert (pending.key, pending.reason) == ("eng-beta/preemptor", "WaitingForPreemptedWorkloads")
    assert pending.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 20 more "
        "needed, insufficient unused quota for cpu in flavor spot, 20 more needed. Pending the preemption of 2 "
        "workload(s)")
    assert queues_state(sched) == ({"eng-beta": ["eng-beta/preemptor"]}, {})
    # The victims keep their quota until their eviction is observed; then the preemptor gets in.
    second = sched.schedule(NOW + 1)
    assert second.admitted == [] and second.victims == []
    sched.remove_workload("eng-alpha/borrower")
    sched.remove_workload("eng-beta/low-2")
    third = sched.schedule(NOW + 2)
    assert admitted_summary(third) == {"eng-beta/preemptor": {"main": ({"cpu": "on-demand"}, {"cpu": "20"}, 1)}}


def test_k10_k11_hierarchical_cohort_lending_limit():
    """K10 (reconstructed from scheduler_test.go: lender LL=3 lends too little) and K11 (LL=5 is enough)."""
    for lending_limit, request, admitted in (("3", "4", False), ("5", "5", True)):
        extra = [make_cohort("root").obj(), make_cohort("child").parent("root").obj(),
                 make_cq("cq-lender").cohort("child").dep("eng").flavor("on-demand", cpu=("10", None, lending_limit))
                 .obj(),
                 make_cq("cq-borrower").cohort("child").dep("eng").flavor("on-demand", cpu=("5", "10")).obj(),
                 make_lq("lq-lender", "eng-alpha").cluster_queue("cq-lender").obj(),
                 make_lq("lq-borrower", "eng-alpha").cluster_queue("cq-borrower").obj()]
        workloads = [wl("eng-alpha", "wl-existing").request("cpu", "5")
                     .admitted("cq-borrower", {"main": {"cpu": "on-demand"}}).obj(),
                     wl("eng-alpha", "wl-pending").queue("lq-borrower").request("cpu", request).obj()]
        sched, result = run_cycle(workloads, extra)
        if admitted:
            assert admitted_summary(result) == {"eng-alpha/wl-pending": {"main": ({"cpu": "on-demand"},
                                                                                  {"cpu": "5"}, 1)}}
            assert queues_state(sched) == ({}, {})
        else:
            assert result.admitted == []
            assert queues_state(sched) == ({}, {"cq-borrower": ["eng-alpha/wl-pending"]})
            assert result.pending[0].message == ("couldn't assign flavors to pod set main: insufficient unused quota "
                                                 "for cpu in flavor on-demand, 1 more needed")


def test_k18_partial_admission_disabled():
    sched, result = run_cycle([wl("sales", "new").queue("main").podset("one", 50, min_count=20, cpu="2").obj()],
                              partial_admission=False)
    assert result.admitted == []
    [pending] = result.pending
    assert pending.reason == "ExceedsMaxQuota"
    assert pending.message == ("couldn't assign flavors to pod set one: insufficient quota for cpu in flavor default, "
                               "previously considered podsets requests (0) + current podset request (100) > maximum "
                               "capacity (50)")
    assert pending.resource_requests == ({"name": "one", "resources": {"cpu": "100"}},)
    assert queues_state(sched) == ({"sales": ["sales/new"]}, {})


def test_k20_second_flavor_when_first_needs_preemption():
    extra = [make_cq("preempt-attempts-cq").preemption(within="LowerPriority")
             .fungibility(when_can_preempt="TryNextFlavor").flavor("on-demand", cpu="1").flavor("spot", cpu="1").obj(),
             make_lq("main").cluster_queue("preempt-attempts-cq").obj()]
    workloads = [wl("default", "blocker").priority(50).request("cpu", "1")
                 .admitted("preempt-attempts-cq", {"main": {"cpu": "on-demand"}}).obj(),
                 wl("default", "test-wl").priority(100).queue("main").request("cpu", "1").obj()]
    sched, result = run_cycle(workloads, extra)
    assert admitted_summary(result) == {"default/test-wl": {"main": ({"cpu": "spot"}, {"cpu": "1"}, 1)}}
    assert result.victims == []
    assert result.admitted[0].event_message == (
        "Quota reserved in ClusterQueue preempt-attempts-cq, wait time since queued was 0s; Flavors considered: "
        "main: on-demand(preemptionMode=Preempt;insufficient unused quota for cpu in flavor on-demand, 1 more needed)")
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in result.admitted[0].conditions] == [
        ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue preempt-attempts-cq"),
        ("Admitted", "True", "Admitted", "The workload is admitted")]


def _preference_case(prefix: str, preference: str):
    """K22/K23 shape (reconstructed; the vectors file only sketches it): a ClusterQueue whose own on-demand quota is
    taken by an equal-priority workload (preemption finds no candidate) or a lower one (preemption possible), and
    spot quota that only a cohort higher up holds (borrowing)."""
    return [make_cohort(f"{prefix}-root").flavor("spot", cpu="5").obj(),
            make_cohort(f"{prefix}-mid").parent(f"{prefix}-root").obj(),
            make_cq(f"{prefix}-cq").cohort(f"{prefix}-mid").preemption(within="LowerPriority", reclaim="Any")
            .fungibility("TryNextFlavor", "TryNextFlavor", preference)
            .flavor("on-demand", cpu=("5", "0")).flavor("spot", cpu="0").obj(),
            make_cq(f"{prefix}-sibling").cohort(f"{prefix}-mid").flavor("on-demand", cpu="5").flavor("spot", cpu="0")
            .obj(),
            make_lq(prefix).cluster_queue(f"{prefix}-cq").obj()]


def test_k22_borrowing_over_preemption():
    extra = _preference_case("bop", "BorrowingOverPreemption")
    workloads = [wl("default", "low-bop").priority(0).request("cpu", "5")
                 .admitted("bop-cq", {"main": {"cpu": "on-demand"}}).obj(),
                 wl("default", "high-bop").priority(100).queue("bop").request("cpu", "5").obj()]
    sched, result = run_cycle(workloads, extra)
    assert admitted_summary(result) == {"default/high-bop": {"main": ({"cpu": "spot"}, {"cpu": "5"}, 1)}}
    assert result.admitted[0].borrowing == 2
    assert result.victims == [] and result.pending == []
    assert "on-demand(preemptionMode=Preempt;" in result.admitted[0].event_message
    # With PreemptionOverBorrowing the same state preempts on on-demand instead of borrowing spot.
    extra = _preference_case("bop", "PreemptionOverBorrowing")
    sched, result = run_cycle(workloads, extra)
    assert result.admitted == []
    assert [(v.key, v.reason) for v in result.victims] == [("default/low-bop", "InClusterQueue")]


def test_k23_preemption_over_borrowing_skips_flavor_without_candidates():
    extra = _preference_case("nopc", "PreemptionOverBorrowing")
    workloads = [wl("default", "admitted-nopc").priority(0).request("cpu", "5")
                 .admitted("nopc-cq", {"main": {"cpu": "on-demand"}}).obj(),
                 wl("default", "pending-nopc").priority(0).queue("nopc").request("cpu", "5").obj()]
    sched, result = run_cycle(workloads, extra)
    assert admitted_summary(result) == {"default/pending-nopc": {"main": ({"cpu": "spot"}, {"cpu": "5"}, 1)}}
    assert result.victims == []
    assert queues_state(sched) == ({}, {})


def test_strict_fifo_head_blocks_and_best_effort_requeues_on_release():
    """StrictFIFO keeps a non-fitting head in the heap; BestEffortFIFO parks it until quota is released."""
    workloads = [wl("sales", "assigned").podset("one", 40, cpu="1").admitted("sales", {"one": {"cpu": "default"}})
                 .obj(),
                 wl("sales", "big").queue("main").created(NOW - 5).podset("one", 11, cpu="1").obj(),
                 wl("sales", "small").queue("main").podset("one", 1, cpu="1").obj()]
    sched, result = run_cycle(workloads)
    assert result.admitted == []
    assert queues_state(sched) == ({"sales": ["sales/big", "sales/small"]}, {})
    # The head keeps blocking the smaller workload behind it, cycle after cycle.
    assert sched.schedule(NOW + 1).admitted == []
    sched.remove_workload("sales/assigned")
    assert set(admitted_summary(sched.schedule(NOW + 2))) == {"sales/big"}
    assert set(admitted_summary(sched.schedule(NOW + 3))) == {"sales/small"}

    lend = [wl("lend", "a").request("cpu", "2").admitted("lend-b", {"main": {"cpu": "default"}}).obj(),
            wl("lend", "b").queue("lend-b-queue").request("cpu", "3").obj()]
    sched, result = run_cycle(lend)
    assert queues_state(sched) == ({}, {"lend-b": ["lend/b"]})
    assert sched.schedule(NOW + 1).pending == []  # nothing to try: the workload is parked
    sched.remove_workload("lend/a")  # quota released in the cohort: inadmissible workloads come back
    assert queues_state(sched) == ({"lend-b": ["lend/b"]}, {})
    assert admitted_summary(sched.schedule(NOW + 2)) == {"lend/b": {"main": ({"cpu": "default"}, {"cpu": "3"}, 1)}}


def _reclaim_case(reclaim: str) -> tuple[list[dict], list[dict]]:
    """ClusterQueueA (gpu 2 on on-demand, reclaimWithinCohort ``reclaim``) lends to ClusterQueueB (gpu 0) in cohort
    root. a1-admitted uses 1 in A; a2-pending (2) cannot get its nominal back without preempting a1 within A, which
    A's withinClusterQueue (Never, the default) forbids: Preempt mode without candidates. b1-pending (1) would borrow
    A's free unit."""
    extra = [make_cq("ClusterQueueA").cohort("root").preemption(reclaim=reclaim).flavor("on-demand", gpu="2").obj(),
             make_cq("ClusterQueueB").cohort("root").flavor("on-demand", gpu="0").obj(),
             make_lq("lq", "eng-alpha").cluster_queue("ClusterQueueA").obj(),
             make_lq("lq", "eng-beta").cluster_queue("ClusterQueueB").obj()]
    workloads = [wl("eng-alpha", "a1-admitted").request("gpu", "1")
                 .admitted("ClusterQueueA", {"main": {"gpu": "on-demand"}}).obj(),
                 wl("eng-alpha", "a2-pending").queue("lq").request("gpu", "2").obj(),
                 wl("eng-beta", "b1-pending").queue("lq").request("gpu", "1").obj()]
    return workloads, extra


A2_PENDING = ("WaitingForQuota", "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor "
                             "on-demand, 1 more needed")


def test_k24_capacity_not_blocked_when_lending_cq_can_reclaim():
    """K24: Kueue TestSchedule "capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)"
    (pkg/scheduler/scheduler_test.go). A can always reclaim its nominal later (preemption.CanAlwaysReclaim), so its
    preemptor without candidates reserves nothing and B borrows the free unit."""
    sched, result = run_cycle(*_reclaim_case("Any"))
    assert admitted_summary(result) == {"eng-beta/b1-pending": {"main": ({"gpu": "on-demand"}, {"gpu": "1"}, 1)}}
    assert result.victims == [] and result.skipped_preemptions == {}
    assert queues_state(sched) == ({}, {"ClusterQueueA": ["eng-alpha/a2-pending"]})
    assert set(sched.admitted) == {"eng-alpha/a1-admitted", "eng-beta/b1-pending"}
    assert {p.key: (p.reason, p.message) for p in result.pending} == {"eng-alpha/a2-pending": A2_PENDING}


@pytest.mark.parametrize("reclaim", ["LowerPriority", "Never"])
def test_k25_capacity_blocked_when_lending_cq_not_guaranteed_to_reclaim(reclaim):
    """K25: Kueue TestSchedule "capacity blocked when lending clusterqueue not guaranteed to reclaim
    (ReclaimWithinCohort=LowerPriority)" and "(ReclaimWithinCohort=Never)" (pkg/scheduler/scheduler_test.go).
    A is not sure to get its quota back, so a2-pending reserves up to A's nominal (min(2, 2 - 1) = 1,
    scheduler.go reserveCapacityForUnreclaimablePreempt / quotaResourcesToReserve); b1-pending, processed after it
    (it borrows), no longer fits and stays in B's heap; a2-pending goes to the inadmissible set."""
    sched, result = run_cycle(*_reclaim_case(reclaim))
    assert result.admitted == [] and result.victims == [] and result.skipped_preemptions == {}
    assert queues_state(sched) == ({"ClusterQueueB": ["eng-beta/b1-pending"]},
                                   {"ClusterQueueA": ["eng-alpha/a2-pending"]})
    assert set(sched.admitted) == {"eng-alpha/a1-admitted"}
    assert {p.key: (p.reason, p.message) for p in result.pending} == {
        "eng-alpha/a2-pending": A2_PENDING,
        "eng-beta/b1-pending": ("WaitingForQuota", "Workload no longer fits after processing another workload")}

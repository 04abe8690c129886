"""Kueue TestPreemption vectors (kueue_vectors.md P*): given an assignment needing preemption, which victims.

Fixture P is preemption_test.go's defaultClusterQueues. The incoming workload's assignment is given (flavor and
mode per resource), as in Kueue's test; the preemptor returns the exact victim set with each victim's reason.
"""

from __future__ import annotations

import pytest
from kueue_builders import NOW, make_cohort, make_cq, make_flavor, make_wl

from kubetwin.kueue import api
from kubetwin.kueue.flavorassigner import FIT, PREEMPT_MODE, Assignment, FlavorAssignment, PodSetAssignment
from kubetwin.kueue.preemption import Preemptor
from kubetwin.kueue.snapshot import Snapshot, WorkloadInfo, admission_usage

CPU_MEM = {"cpu": ("6", "6"), "memory": ("3Gi", "3Gi")}


def fixture_p() -> list[dict]:
    cqs = [
        make_cq("standalone").preemption(within="LowerPriority").flavor("default", cpu="6")
        .flavor("alpha", memory="3Gi").flavor("beta", memory="3Gi"),
        make_cq("c1").cohort("cohort").preemption(within="LowerPriority", reclaim="LowerPriority")
        .flavor("default", CPU_MEM),
        make_cq("c2").cohort("cohort").preemption(within="Never", reclaim="Any").flavor("default", CPU_MEM),
        make_cq("d1").cohort("cohort-no-limits").preemption(within="LowerPriority", reclaim="LowerPriority")
        .flavor("default", cpu="6", memory="3Gi"),
        make_cq("d2").cohort("cohort-no-limits").preemption(within="Never", reclaim="Any")
        .flavor("default", cpu="6", memory="3Gi"),
        make_cq("l1").cohort("legion").preemption(within="LowerPriority", reclaim="LowerPriority")
        .flavor("default", cpu=("6", "12"), memory=("3Gi", "6Gi")),
        make_cq("preventStarvation").preemption(within="LowerOrNewerEqualPriority").flavor("default", cpu="6"),
        make_cq("a_standard").cohort("with_shared_cq")
        .preemption(within="Never", reclaim="LowerPriority", bwc="LowerPriority", threshold=0)
        .flavor("default", cpu=("1", "12")),
        make_cq("b_standard").cohort("with_shared_cq")
        .preemption(within="LowerPriority", reclaim="Any", bwc="LowerPriority", threshold=0)
        .flavor("default", cpu=("1", "12")),
        make_cq("a_best_effort").cohort("with_shared_cq")
        .preemption(within="Never", reclaim="LowerPriority", bwc="LowerPriority", threshold=0)
        .flavor("default", cpu=("1", "12")),
        make_cq("b_best_effort").cohort("with_shared_cq")
        .preemption(within="Never", reclaim="LowerPriority", bwc="LowerPriority", threshold=0)
        .flavor("default", cpu=("0", "13")),
        make_cq("shared").cohort("with_shared_cq").flavor("default", cpu="10"),
        make_cq("lend1").cohort("cohort-lend").preemption(within="LowerPriority", reclaim="LowerPriority")
        .flavor("default", cpu=("6", None, "4")),
        make_cq("lend2").cohort("cohort-lend").preemption(within="LowerPriority", reclaim="LowerPriority")
        .flavor("default", cpu=("6", None, "2")),
        make_cq("a").cohort("cohort-three").preemption(within="LowerPriority", reclaim="Any")
        .flavor("default", cpu="2", memory="2"),
        make_cq("b").cohort("cohort-three").flavor("default", cpu="2", memory="2"),
        make_cq("c").cohort("cohort-three").flavor("default", cpu="2", memory="2"),
        # P27's hierarchy
        make_cq("cq-left").cohort("cohort-left").preemption(reclaim="Any").flavor("default", cpu="10"),
        make_cq("cq-right").cohort("cohort-right").flavor("default", cpu="0"),
    ]
    cohorts = [make_cohort("root").obj(), make_cohort("cohort-left").parent("root").obj(),
               make_cohort("cohort-right").parent("root").obj()]
    return [c.obj() for c in cqs] + cohorts + [make_flavor(f) for f in ("default", "alpha", "beta")]


def admitted(name: str, priority: int, cq: str, at: float = NOW, **requests: str) -> WorkloadInfo:
    """An admitted single-pod workload; a request "2Gi@alpha" names its flavor, else flavor "default"."""
    reqs = {r: q.split("@")[0] for r, q in requests.items()}
    flavors = {r: (q.split("@")[1] if "@" in q else "default") for r, q in requests.items()}
    obj = make_wl("default", name).priority(priority).podset("main", 1, res=reqs) \
        .admitted(cq, {"main": flavors}, at=at).obj()
    wl = api.parse_workload(obj)
    return WorkloadInfo(wl, cq, admission_usage(wl))


def incoming(priority: int, cq: str, pod_sets: list[tuple[str, int, dict[str, tuple[str, str, int]]]],
             created: float = NOW) -> tuple[WorkloadInfo, Assignment]:
    """The preemptor and its assignment: per podSet (name, count, {resource: (quantity, flavor, mode)})."""
    builder = make_wl("default", "in").priority(priority).created(created).uid("wl-in")
    for name, count, res in pod_sets:
        builder.podset(name, count, res={r: q for r, (q, _, _) in res.items()})
    wl = api.parse_workload(builder.obj())
    assignment = Assignment()
    for (name, count, res), ps in zip(pod_sets, wl.pod_sets, strict=True):
        requests = {r: v * count for r, v in ps.requests}
        flavors = {r: FlavorAssignment(f, mode) for r, (_, f, mode) in res.items()}
        assignment.append(PodSetAssignment(name, flavors, requests, count))
    return WorkloadInfo(wl, cq), assignment


def cpu(q: str, mode: int = PREEMPT_MODE) -> dict:
    return {"cpu": (q, "default", mode)}


P = PREEMPT_MODE
# name -> (admitted workloads, (priority, cq, podsets[, created]), {victim: reason})
CASES = {
    "P1 preempt lowest priority": (
        [admitted("low", -1, "standalone", cpu="2"), admitted("mid", 0, "standalone", cpu="2"),
         admitted("high", 1, "standalone", cpu="2")],
        (1, "standalone", [("main", 1, cpu("2"))]), {"low": "InClusterQueue"}),
    "P2 preempt multiple": (
        [admitted("low", -1, "standalone", cpu="2"), admitted("mid", 0, "standalone", cpu="2"),
         admitted("high", 1, "standalone", cpu="2")],
        (1, "standalone", [("main", 1, cpu("3"))]), {"low": "InClusterQueue", "mid": "InClusterQueue"}),
    "P3 no preemption for low priority": (
        [admitted("low", -1, "standalone", cpu="3"), admitted("mid", 0, "standalone", cpu="3")],
        (-1, "standalone", [("main", 1, cpu("1"))]), {}),
    "P5 some free quota, preempt low priority": (
        [admitted("low", -1, "standalone", cpu="1"), admitted("mid", 0, "standalone", cpu="1"),
         admitted("high", 1, "standalone", cpu="3")],
        (1, "standalone", [("main", 1, cpu("2"))]), {"low": "InClusterQueue"}),
    "P6 minimal set excludes low priority": (
        [admitted("low", -1, "standalone", cpu="1"), admitted("mid", 0, "standalone", cpu="2"),
         admitted("high", 1, "standalone", cpu="3")],
        (1, "standalone", [("main", 1, cpu("2"))]), {"mid": "InClusterQueue"}),
    "P7 only preempt workloads using the chosen flavor": (
        [admitted("low", -1, "standalone", memory="2Gi@alpha"), admitted("mid", 0, "standalone", memory="1Gi@beta"),
         admitted("high", 1, "standalone", memory="1Gi@beta")],
        (1, "standalone", [("main", 1, {"cpu": ("1", "default", FIT), "memory": ("2Gi", "beta", P)})]),
        {"mid": "InClusterQueue"}),
    "P9 no workloads borrowing": (
        [admitted("c1-high", 1, "c1", cpu="4"), admitted("c2-low-1", -1, "c2", cpu="4")],
        (1, "c1", [("main", 1, cpu("4"))]), {}),
    "P10 preempting locally and borrowing same resource in cohort": (
        [admitted("c1-med", 0, "c1", cpu="4"), admitted("c1-low", -1, "c1", cpu="4"),
         admitted("c2-low-1", -1, "c2", cpu="4")],
        (1, "c1", [("main", 1, cpu("4"))]), {"c1-low": "InClusterQueue"}),
    "P11 preempting locally and borrowing other resources in cohort, with cohort candidates": (
        [admitted("c1-med", 0, "c1", cpu="4"), admitted("c2-low-1", -1, "c2", cpu="5"),
         admitted("c2-low-2", -1, "c2", cpu="1"), admitted("c2-low-3", -1, "c2", cpu="1")],
        (1, "c1", [("main", 1, {"cpu": ("2", "default", P), "memory": ("5Gi", "default", P)})]),
        {"c1-med": "InClusterQueue"}),
    "P13 don't reclaim same priority (reclaim LowerPriority)": (
        [admitted("c1", 0, "c1", cpu="2"), admitted("c2-1", 0, "c2", cpu="4"), admitted("c2-2", 0, "c2", cpu="4")],
        (0, "c1", [("main", 1, cpu("4"))]), {}),
    "P14 reclaim same priority (reclaim Any)": (
        [admitted("c1-1", 0, "c1", cpu="4"), admitted("c1-2", 1, "c1", cpu="4"), admitted("c2", 0, "c2", cpu="2")],
        (0, "c2", [("main", 1, cpu("4"))]), {"c1-1": "InCohortReclamation"}),
    "P15 preempt from all ClusterQueues in cohort": (
        [admitted("c1-low", -1, "c1", cpu="3"), admitted("c1-mid", 0, "c1", cpu="2"),
         admitted("c2-low", -1, "c2", cpu="3"), admitted("c2-mid", 0, "c2", cpu="4")],
        (0, "c1", [("main", 1, cpu("4"))]), {"c1-low": "InClusterQueue", "c2-low": "InCohortReclamation"}),
    "P17 each podset preempts a different flavor": (
        [admitted("low-alpha", -1, "standalone", memory="2Gi@alpha"),
         admitted("low-beta", -1, "standalone", memory="2Gi@beta")],
        (0, "standalone", [("launcher", 1, {"memory": ("2Gi", "alpha", P)}),
                           ("workers", 2, {"memory": ("1Gi", "beta", P)})]),
        {"low-alpha": "InClusterQueue", "low-beta": "InClusterQueue"}),
    "P18 preempt newer workloads with the same priority": (
        [admitted("wl1", 2, "preventStarvation", cpu="2"),
         admitted("wl2", 1, "preventStarvation", at=NOW + 1, cpu="2"),
         admitted("wl3", 1, "preventStarvation", cpu="2")],
        (1, "preventStarvation", [("main", 1, cpu("2"))], NOW - 15), {"wl2": "InClusterQueue"}),
    "P19 borrowWithinCohort allows lower-priority victim while borrowing": (
        [admitted("a_best_effort_low", -1, "a_best_effort", cpu="10"),
         admitted("b_best_effort_low", -1, "b_best_effort", cpu="1")],
        (0, "a_standard", [("main", 1, cpu("10"))]), {"a_best_effort_low": "InCohortReclaimWhileBorrowing"}),
    "P21 borrowWithinCohort: victim above threshold, preemptor not borrowing afterwards": (
        [admitted("b_standard", 1, "b_standard", cpu="13")],
        (2, "a_standard", [("main", 1, cpu("1"))]), {"b_standard": "InCohortReclamation"}),
    "P22 borrowWithinCohort never preempts same-CQ lower priority when within is Never": (
        [admitted("a_standard", 1, "a_standard", cpu="13")],
        (2, "a_standard", [("main", 1, cpu("1"))]), {}),
    "P23 reclaim quota from lender": (
        [admitted("lend1-low", -1, "lend1", cpu="3"), admitted("lend2-mid", 0, "lend2", cpu="3"),
         admitted("lend2-high", 1, "lend2", cpu="4")],
        (1, "lend1", [("main", 1, cpu("3"))]), {"lend2-mid": "InCohortReclamation"}),
    "P25 preempt in target queue when it is exhausted (single resource)": (
        [admitted("a1", -2, "a", cpu="1"), admitted("a2", -2, "a", cpu="1"), admitted("a3", -1, "a", cpu="1"),
         admitted("b1", 0, "b", cpu="1"), admitted("b2", 0, "b", cpu="1"), admitted("b3", 0, "b", cpu="1")],
        (0, "a", [("main", 1, cpu("2"))]), {"a1": "InClusterQueue", "a2": "InClusterQueue"}),
    "P26 allow preemption from other ClusterQueues if target not exhausted": (
        [admitted("a1", -1, "a", cpu="1")] + [admitted(f"b{i}", 0, "b", cpu="1") for i in range(1, 5)]
        + [admitted("b5", -1, "b", cpu="1")],
        (0, "a", [("main", 1, cpu("2"))]), {"a1": "InClusterQueue", "b5": "InCohortReclamation"}),
    "P27 long range preemption in a cohort hierarchy": (
        [admitted("to-be-preempted", 0, "cq-right", cpu="5")],
        (0, "cq-left", [("main", 1, cpu("8"))]), {"to-be-preempted": "InCohortReclamation"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_preemption(name):
    workloads, (priority, cq, pod_sets, *created), want = CASES[name]
    specs = [api.parse_any(o) for o in fixture_p()]
    snap = Snapshot.build([s for s in specs if isinstance(s, api.ClusterQueue)],
                          [s for s in specs if isinstance(s, api.Cohort)],
                          [s for s in specs if isinstance(s, api.ResourceFlavor)], workloads)
    usage_before = {n: {fr: v for fr, v in c.node.usage.items() if v} for n, c in snap.cluster_queues.items()}
    wl, assignment = incoming(priority, cq, pod_sets, *(created or [NOW]))
    targets = Preemptor(now=NOW + 10).get_targets(wl, assignment, snap)
    assert {t.workload.obj.name: t.reason for t in targets} == want
    assert len(targets) == len(want)
    # The search leaves the snapshot as it found it.
    assert {n: {fr: v for fr, v in c.node.usage.items() if v} for n, c in snap.cluster_queues.items()} == usage_before


def test_preemption_message_and_paths():
    specs = [api.parse_any(o) for o in fixture_p()]
    snap = Snapshot.build([s for s in specs if isinstance(s, api.ClusterQueue)],
                          [s for s in specs if isinstance(s, api.Cohort)],
                          [s for s in specs if isinstance(s, api.ResourceFlavor)], [])
    assert snap.cluster_queues["cq-left"].path() == "/root/cohort-left/cq-left"
    assert snap.cluster_queues["standalone"].path() == "/standalone"

"""Kueue TestPreemption vectors (kueue_vectors.md P*): given an assignment needing preemption, which victims.

Fixture P is preemption_test.go's defaultClusterQueues. The incoming workload's assignment is given (flavor and
mode per resource), as in Kueue's test; the preemptor returns the exact victim set with each victim's reason.
"""

from __future__ import annotations

from typing import NamedTuple

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
    return [c.obj() for c in cqs] + cohorts + [make_flavor(f).obj() for f in ("default", "alpha", "beta")]


def admitted(name: str, priority: int, cq: str, at: float = NOW, **requests: str) -> WorkloadInfo:
    """An admitted single-pod workload; a request "2Gi@alpha" names its flavor, else flavor "default"."""
    reqs = {r: q.split("@")[0] for r, q in requests.items()}
    flavors = {r: (q.split("@")[1] if "@" in q else "default") for r, q in requests.items()}
    obj = make_wl("default", name).priority(priority).podset("main", 1, res=reqs) \
        .admitted(cq, {"main": flavors}, at=at).obj()
    wl = api.parse_workload(obj)
    return WorkloadInfo(wl, cq, admission_usage(wl))


class FlavorRequest(NamedTuple):
    """One resource of an incoming podSet: its quantity and the flavor and mode the flavor assigner gave it."""
    quantity: str
    flavor: str
    mode: int


class PodSetRequest(NamedTuple):
    name: str
    count: int
    resources: dict[str, FlavorRequest]


class Incoming(NamedTuple):
    """The preemptor: its priority, creation time and podSets with their assignment."""
    priority: int
    pod_sets: list[PodSetRequest]
    created: float = NOW


class Case(NamedTuple):
    """A row of upstream's TestPreemption table (preemption_test.go: admitted, incoming, targetCQ, assignment,
    wantPreempted; here the victims carry their reasons)."""
    admitted: list[WorkloadInfo]
    target_cq: str
    incoming: Incoming
    want_preempted: dict[str, str]


def incoming_workload(inc: Incoming, cq: str) -> tuple[WorkloadInfo, Assignment]:
    """The preemptor's WorkloadInfo in ``cq`` and its assignment."""
    builder = make_wl("default", "in").priority(inc.priority).created(inc.created).uid("wl-in")
    for ps in inc.pod_sets:
        builder.podset(ps.name, ps.count, res={r: fr.quantity for r, fr in ps.resources.items()})
    wl = api.parse_workload(builder.obj())
    assignment = Assignment()
    for ps, parsed in zip(inc.pod_sets, wl.pod_sets, strict=True):
        requests = {r: v * ps.count for r, v in parsed.requests}
        flavors = {r: FlavorAssignment(fr.flavor, fr.mode) for r, fr in ps.resources.items()}
        assignment.append(PodSetAssignment(ps.name, flavors, requests, ps.count))
    return WorkloadInfo(wl, cq), assignment


def main(resources: dict[str, FlavorRequest]) -> list[PodSetRequest]:
    """One podSet "main" of one pod, as upstream's MakeWorkload(...).Request(...)."""
    return [PodSetRequest(name="main", count=1, resources=resources)]


def cpu(q: str, mode: int = PREEMPT_MODE) -> dict[str, FlavorRequest]:
    return {"cpu": FlavorRequest(q, "default", mode)}


P = PREEMPT_MODE
CASES = {
    "P1 preempt lowest priority": Case(
        admitted=[admitted("low", -1, "standalone", cpu="2"), admitted("mid", 0, "standalone", cpu="2"),
                  admitted("high", 1, "standalone", cpu="2")],
        target_cq="standalone",
        incoming=Incoming(priority=1, pod_sets=main(cpu("2"))),
        want_preempted={"low": "InClusterQueue"}),
    "P2 preempt multiple": Case(
        admitted=[admitted("low", -1, "standalone", cpu="2"), admitted("mid", 0, "standalone", cpu="2"),
                  admitted("high", 1, "standalone", cpu="2")],
        target_cq="standalone",
        incoming=Incoming(priority=1, pod_sets=main(cpu("3"))),
        want_preempted={"low": "InClusterQueue", "mid": "InClusterQueue"}),
    "P3 no preemption for low priority": Case(
        admitted=[admitted("low", -1, "standalone", cpu="3"), admitted("mid", 0, "standalone", cpu="3")],
        target_cq="standalone",
        incoming=Incoming(priority=-1, pod_sets=main(cpu("1"))),
        want_preempted={}),
    "P5 some free quota, preempt low priority": Case(
        admitted=[admitted("low", -1, "standalone", cpu="1"), admitted("mid", 0, "standalone", cpu="1"),
                  admitted("high", 1, "standalone", cpu="3")],
        target_cq="standalone",
        incoming=Incoming(priority=1, pod_sets=main(cpu("2"))),
        want_preempted={"low": "InClusterQueue"}),
    "P6 minimal set excludes low priority": Case(
        admitted=[admitted("low", -1, "standalone", cpu="1"), admitted("mid", 0, "standalone", cpu="2"),
                  admitted("high", 1, "standalone", cpu="3")],
        target_cq="standalone",
        incoming=Incoming(priority=1, pod_sets=main(cpu("2"))),
        want_preempted={"mid": "InClusterQueue"}),
    "P7 only preempt workloads using the chosen flavor": Case(
        admitted=[admitted("low", -1, "standalone", memory="2Gi@alpha"),
                  admitted("mid", 0, "standalone", memory="1Gi@beta"),
                  admitted("high", 1, "standalone", memory="1Gi@beta")],
        target_cq="standalone",
        incoming=Incoming(priority=1, pod_sets=main({"cpu": FlavorRequest("1", "default", FIT),
                                                   "memory": FlavorRequest("2Gi", "beta", P)})),
        want_preempted={"mid": "InClusterQueue"}),
    "P9 no workloads borrowing": Case(
        admitted=[admitted("c1-high", 1, "c1", cpu="4"), admitted("c2-low-1", -1, "c2", cpu="4")],
        target_cq="c1",
        incoming=Incoming(priority=1, pod_sets=main(cpu("4"))),
        want_preempted={}),
    "P10 preempting locally and borrowing same resource in cohort": Case(
        admitted=[admitted("c1-med", 0, "c1", cpu="4"), admitted("c1-low", -1, "c1", cpu="4"),
                  admitted("c2-low-1", -1, "c2", cpu="4")],
        target_cq="c1",
        incoming=Incoming(priority=1, pod_sets=main(cpu("4"))),
        want_preempted={"c1-low": "InClusterQueue"}),
    "P11 preempting locally and borrowing other resources in cohort, with cohort candidates": Case(
        admitted=[admitted("c1-med", 0, "c1", cpu="4"), admitted("c2-low-1", -1, "c2", cpu="5"),
                  admitted("c2-low-2", -1, "c2", cpu="1"), admitted("c2-low-3", -1, "c2", cpu="1")],
        target_cq="c1",
        incoming=Incoming(priority=1, pod_sets=main({"cpu": FlavorRequest("2", "default", P),
                                                   "memory": FlavorRequest("5Gi", "default", P)})),
        want_preempted={"c1-med": "InClusterQueue"}),
    "P13 don't reclaim same priority (reclaim LowerPriority)": Case(
        admitted=[admitted("c1", 0, "c1", cpu="2"), admitted("c2-1", 0, "c2", cpu="4"),
                  admitted("c2-2", 0, "c2", cpu="4")],
        target_cq="c1",
        incoming=Incoming(priority=0, pod_sets=main(cpu("4"))),
        want_preempted={}),
    "P14 reclaim same priority (reclaim Any)": Case(
        admitted=[admitted("c1-1", 0, "c1", cpu="4"), admitted("c1-2", 1, "c1", cpu="4"),
                  admitted("c2", 0, "c2", cpu="2")],
        target_cq="c2",
        incoming=Incoming(priority=0, pod_sets=main(cpu("4"))),
        want_preempted={"c1-1": "InCohortReclamation"}),
    "P15 preempt from all ClusterQueues in cohort": Case(
        admitted=[admitted("c1-low", -1, "c1", cpu="3"), admitted("c1-mid", 0, "c1", cpu="2"),
                  admitted("c2-low", -1, "c2", cpu="3"), admitted("c2-mid", 0, "c2", cpu="4")],
        target_cq="c1",
        incoming=Incoming(priority=0, pod_sets=main(cpu("4"))),
        want_preempted={"c1-low": "InClusterQueue", "c2-low": "InCohortReclamation"}),
    "P17 each podset preempts a different flavor": Case(
        admitted=[admitted("low-alpha", -1, "standalone", memory="2Gi@alpha"),
                  admitted("low-beta", -1, "standalone", memory="2Gi@beta")],
        target_cq="standalone",
        incoming=Incoming(priority=0, pod_sets=[
            PodSetRequest(name="launcher", count=1, resources={"memory": FlavorRequest("2Gi", "alpha", P)}),
            PodSetRequest(name="workers", count=2, resources={"memory": FlavorRequest("1Gi", "beta", P)})]),
        want_preempted={"low-alpha": "InClusterQueue", "low-beta": "InClusterQueue"}),
    "P18 preempt newer workloads with the same priority": Case(
        admitted=[admitted("wl1", 2, "preventStarvation", cpu="2"),
                  admitted("wl2", 1, "preventStarvation", at=NOW + 1, cpu="2"),
                  admitted("wl3", 1, "preventStarvation", cpu="2")],
        target_cq="preventStarvation",
        incoming=Incoming(priority=1, pod_sets=main(cpu("2")), created=NOW - 15),
        want_preempted={"wl2": "InClusterQueue"}),
    "P19 borrowWithinCohort allows lower-priority victim while borrowing": Case(
        admitted=[admitted("a_best_effort_low", -1, "a_best_effort", cpu="10"),
                  admitted("b_best_effort_low", -1, "b_best_effort", cpu="1")],
        target_cq="a_standard",
        incoming=Incoming(priority=0, pod_sets=main(cpu("10"))),
        want_preempted={"a_best_effort_low": "InCohortReclaimWhileBorrowing"}),
    "P21 borrowWithinCohort: victim above threshold, preemptor not borrowing afterwards": Case(
        admitted=[admitted("b_standard", 1, "b_standard", cpu="13")],
        target_cq="a_standard",
        incoming=Incoming(priority=2, pod_sets=main(cpu("1"))),
        want_preempted={"b_standard": "InCohortReclamation"}),
    "P22 borrowWithinCohort never preempts same-CQ lower priority when within is Never": Case(
        admitted=[admitted("a_standard", 1, "a_standard", cpu="13")],
        target_cq="a_standard",
        incoming=Incoming(priority=2, pod_sets=main(cpu("1"))),
        want_preempted={}),
    "P23 reclaim quota from lender": Case(
        admitted=[admitted("lend1-low", -1, "lend1", cpu="3"), admitted("lend2-mid", 0, "lend2", cpu="3"),
                  admitted("lend2-high", 1, "lend2", cpu="4")],
        target_cq="lend1",
        incoming=Incoming(priority=1, pod_sets=main(cpu("3"))),
        want_preempted={"lend2-mid": "InCohortReclamation"}),
    "P25 preempt in target queue when it is exhausted (single resource)": Case(
        admitted=[admitted("a1", -2, "a", cpu="1"), admitted("a2", -2, "a", cpu="1"), admitted("a3", -1, "a", cpu="1"),
                  admitted("b1", 0, "b", cpu="1"), admitted("b2", 0, "b", cpu="1"), admitted("b3", 0, "b", cpu="1")],
        target_cq="a",
        incoming=Incoming(priority=0, pod_sets=main(cpu("2"))),
        want_preempted={"a1": "InClusterQueue", "a2": "InClusterQueue"}),
    "P26 allow preemption from other ClusterQueues if target not exhausted": Case(
        admitted=[admitted("a1", -1, "a", cpu="1")] + [admitted(f"b{i}", 0, "b", cpu="1") for i in range(1, 5)]
                  + [admitted("b5", -1, "b", cpu="1")],
        target_cq="a",
        incoming=Incoming(priority=0, pod_sets=main(cpu("2"))),
        want_preempted={"a1": "InClusterQueue", "b5": "InCohortReclamation"}),
    "P27 long range preemption in a cohort hierarchy": Case(
        admitted=[admitted("to-be-preempted", 0, "cq-right", cpu="5")],
        target_cq="cq-left",
        incoming=Incoming(priority=0, pod_sets=main(cpu("8"))),
        want_preempted={"to-be-preempted": "InCohortReclamation"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_preemption(name):
    case = CASES[name]
    specs = [api.parse_any(o) for o in fixture_p()]
    snap = Snapshot.build([s for s in specs if isinstance(s, api.ClusterQueue)],
                          [s for s in specs if isinstance(s, api.Cohort)],
                          [s for s in specs if isinstance(s, api.ResourceFlavor)], case.admitted)
    usage_before = {n: {fr: v for fr, v in c.node.usage.items() if v} for n, c in snap.cluster_queues.items()}
    wl, assignment = incoming_workload(case.incoming, case.target_cq)
    targets = Preemptor(now=NOW + 10).get_targets(wl, assignment, snap)
    assert {t.workload.obj.name: t.reason for t in targets} == case.want_preempted
    assert len(targets) == len(case.want_preempted)
    # The search leaves the snapshot as it found it.
    assert {n: {fr: v for fr, v in c.node.usage.items() if v} for n, c in snap.cluster_queues.items()} == usage_before


def test_preemption_message_and_paths():
    specs = [api.parse_any(o) for o in fixture_p()]
    snap = Snapshot.build([s for s in specs if isinstance(s, api.ClusterQueue)],
                          [s for s in specs if isinstance(s, api.Cohort)],
                          [s for s in specs if isinstance(s, api.ResourceFlavor)], [])
    assert snap.cluster_queues["cq-left"].path() == "/root/cohort-left/cq-left"
    assert snap.cluster_queues["standalone"].path() == "/standalone"

"""Kueue TestFairPreemptions vectors (kueue_vectors.md F*): fair-sharing victim selection, and DRS arithmetic.

Fixture F: ClusterQueues a, b, c (cpu 3 each) and preemptible (cpu 0) in cohort "all"; every admitted workload is
priority 0 and reserved at the same time. Default strategies [LessThanOrEqualToFinalShare, LessThanInitialShare];
the strategy vectors also run each one alone.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
from kueue_builders import NOW, make_configuration, make_cq, make_flavor, make_lq, make_wl

from kubetwin.kueue import KueueScheduler, api
from kubetwin.kueue import config as kueue_config
from kubetwin.kueue.controller.core import KueueController
from kubetwin.kueue.fairsharing import DRS, compare_drs, dominant_resource_share
from kubetwin.kueue.flavorassigner import PREEMPT_MODE, Assignment, FlavorAssignment, PodSetAssignment
from kubetwin.kueue.preemption import Preemptor
from kubetwin.kueue.snapshot import Snapshot, WorkloadInfo, admission_usage
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store


def fixture_f() -> list[dict]:
    cqs = [make_cq(n).cohort("all").preemption(within="LowerPriority", reclaim="Any", bwc="LowerPriority",
                                               threshold=-3).flavor("default", cpu="3").obj() for n in "abc"]
    cqs.append(make_cq("preemptible").cohort("all").flavor("default", cpu="0").obj())
    return cqs + [make_flavor("default").obj()]


def unit(name: str, cq: str, cpu: str = "1", priority: int = 0) -> WorkloadInfo:
    wl = api.parse_workload(make_wl("default", name).priority(priority).request("cpu", cpu)
                            .admitted(cq, {"main": {"cpu": "default"}}).obj())
    return WorkloadInfo(wl, cq, admission_usage(wl))


def units(prefix: str, n: int, cq: str) -> list[WorkloadInfo]:
    return [unit(f"{prefix}{i}", cq) for i in range(1, n + 1)]


def snapshot(workloads: list[WorkloadInfo]) -> Snapshot:
    specs = [api.parse_any(o) for o in fixture_f()]
    return Snapshot.build([s for s in specs if isinstance(s, api.ClusterQueue)], [],
                          [s for s in specs if isinstance(s, api.ResourceFlavor)], workloads)


class FairCase(NamedTuple):
    """A row of upstream's TestFairPreemptions table (preemption_fair_test.go: admitted, incoming, targetCQ,
    wantPreempted; here the incoming workload is a single pod named ``incoming`` asking ``incoming_cpu``, and the
    victims carry their reasons)."""
    admitted: list[WorkloadInfo]
    incoming: str
    incoming_cpu: str
    target_cq: str
    want_preempted: dict[str, str]


class StrategyCase(NamedTuple):
    """The fair-sharing preemption strategies (None: Kueue's default list) and the one workload they preempt."""
    strategies: tuple[str, ...] | None
    want_preempted: str


def incoming(name: str, cq: str, cpu: str) -> tuple[WorkloadInfo, Assignment]:
    wl = api.parse_workload(make_wl("default", name).uid(name).request("cpu", cpu).obj())
    assignment = Assignment()
    assignment.append(PodSetAssignment("main", {"cpu": FlavorAssignment("default", PREEMPT_MODE)},
                                       {"cpu": api.amount("cpu", cpu)}, 1))
    return WorkloadInfo(wl, cq), assignment


CASES = {
    "F1 reclaim nominal quota from the ClusterQueue using the most": FairCase(
        admitted=units("a", 3, "a") + units("b", 5, "b") + units("c", 1, "c"),
        incoming="c_incoming", incoming_cpu="1", target_cq="c",
        want_preempted={"b1": "InCohortReclamation"}),
    "F2 reclaim quota when the largest borrower alone is not enough": FairCase(
        admitted=[unit("a1", "a", "3"), unit("a2", "a", "1"), unit("b1", "b", "2"), unit("b2", "b", "3")],
        incoming="c_incoming", incoming_cpu="3", target_cq="c",
        want_preempted={"a1": "InCohortReclamation"}),
    "F3 preempt from the ClusterQueue with the larger share while borrowing": FairCase(
        admitted=units("a", 3, "a") + units("b", 5, "b") + units("c", 1, "c"),
        incoming="a_incoming", incoming_cpu="1", target_cq="a",
        want_preempted={"b1": "InCohortFairSharing"}),
    "F5 nobody borrows, nothing to preempt": FairCase(
        admitted=units("a", 3, "a") + units("b", 3, "b") + units("c", 3, "c"),
        incoming="c_incoming", incoming_cpu="1", target_cq="c",
        want_preempted={}),
    "F6 preempting would flip the imbalance": FairCase(
        admitted=units("a", 3, "a") + units("b", 5, "b"),
        incoming="a_incoming", incoming_cpu="2", target_cq="a",
        want_preempted={}),
    "F7 preempt lower priority in own ClusterQueue first": FairCase(
        admitted=[unit("a1_low", "a", priority=-1), unit("a2_low", "a", priority=-1), unit("a3", "a"), unit("a4", "a")]
                  + units("b", 5, "b"),
        incoming="a_incoming", incoming_cpu="2", target_cq="a",
        want_preempted={"a1_low": "InClusterQueue", "a2_low": "InClusterQueue"}),
    "F9 reclaim within nominal from a single large borrower": FairCase(
        admitted=[unit("b1", "b", "9")],
        incoming="a_incoming", incoming_cpu="2", target_cq="a",
        want_preempted={"b1": "InCohortReclamation"}),
    "F10 no preemption when the target would end up below the preemptor": FairCase(
        admitted=[unit("a1", "a", "2"), unit("b1", "b", "7")],
        incoming="a_incoming", incoming_cpu="5", target_cq="a",
        want_preempted={}),
    "F11 rule S2-b preempts one workload but not enough": FairCase(
        admitted=[unit("b1", "b", "2"), unit("b2", "b", "2"), unit("b3", "b", "3")],
        incoming="a_incoming", incoming_cpu="6", target_cq="a",
        want_preempted={}),
    "F13 rule S2-a is satisfied before S2-b": FairCase(
        admitted=[unit("b1", "b", "2"), unit("b2", "b", "1"), unit("b3", "b", "2"), unit("c1", "c", "1")],
        incoming="a_incoming", incoming_cpu="3.5", target_cq="a",
        want_preempted={"b2": "InCohortFairSharing"}),
    "F14 rule S2-b across two ClusterQueues": FairCase(
        admitted=[unit("b1", "b", "2"), unit("b2", "b", "2.5"), unit("c1", "c", "2"), unit("c2", "c", "2.5")],
        incoming="a_incoming", incoming_cpu="3.5", target_cq="a",
        want_preempted={"b1": "InCohortFairSharing", "c1": "InCohortFairSharing"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fair_preemption(name):
    case = CASES[name]
    snap = snapshot(case.admitted)
    before = {n: {fr: v for fr, v in c.node.usage.items() if v} for n, c in snap.cluster_queues.items()}
    wl, assignment = incoming(case.incoming, case.target_cq, case.incoming_cpu)
    targets = Preemptor(now=NOW + 10, fair_sharing=True).get_targets(wl, assignment, snap)
    assert {t.workload.obj.name: t.reason for t in targets} == case.want_preempted
    assert len(targets) == len(case.want_preempted)
    assert {n: {fr: v for fr, v in c.node.usage.items() if v} for n, c in snap.cluster_queues.items()} == before


def test_dominant_resource_share():
    snap = snapshot(units("a", 3, "a") + units("b", 5, "b"))
    b, a, root = snap.cluster_queues["b"].node, snap.cluster_queues["a"].node, snap.cohorts["all"]
    drs = dominant_resource_share(b)
    assert (drs.resource, drs.borrowing, round(drs.ratio, 3)) == ("cpu", True, 222.222)  # 2 of 9 lendable
    assert drs.rounded() == 223
    assert dominant_resource_share(a) == DRS(1.0, 0.0)
    assert dominant_resource_share(a, {("default", "cpu"): 1000}).ratio == pytest.approx(1000 / 9)
    assert dominant_resource_share(root) == DRS(1.0, 0.0)  # the root never borrows
    zero = DRS(0.0, 100.0, "cpu", True)
    assert zero.weighted_share() == math.inf and compare_drs(zero, drs) == 1


def test_fair_sharing_cycle_preempts_then_admits():
    sched = KueueScheduler(fair_sharing=True)
    sched.set_namespace("default")
    for obj in fixture_f():
        sched.apply(obj)
    sched.apply(make_lq("a").cluster_queue("a").obj())
    for w in units("a", 3, "a") + units("b", 5, "b") + units("c", 1, "c"):
        sched.add_workload(w.obj)
    sched.add_workload(make_wl("default", "a_incoming").queue("a").request("cpu", "1").obj())
    result = sched.schedule(NOW + 10)
    assert [(v.key, v.reason) for v in result.victims] == [("default/b1", "InCohortFairSharing")]
    assert result.victims[0].message.endswith("due to Fair Sharing within the cohort; preemptor path: /all/a; "
                                              "preemptee path: /all/b")
    sched.remove_workload("default/b1")
    assert [a.key for a in sched.schedule(NOW + 11).admitted] == ["default/a_incoming"]


def test_fair_sharing_admission_order_prefers_lower_share():
    """Both heads fit alone and both would borrow; classical order takes the higher priority (a_new), the fair
    sharing tournament the one leaving the lower DRS (b_new: 2 borrowed of 9 against a_new's 3)."""
    admitted_units = units("a", 4, "a") + units("b", 3, "b")
    results = {}
    for fair in (False, True):
        sched = KueueScheduler(fair_sharing=fair)
        sched.set_namespace("default")
        for obj in fixture_f():
            sched.apply(obj)
        for q in "ab":
            sched.apply(make_lq(q).cluster_queue(q).obj())
        for w in admitted_units:
            sched.add_workload(w.obj)
        sched.add_workload(make_wl("default", "a_new").queue("a").priority(10).request("cpu", "2").obj())
        sched.add_workload(make_wl("default", "b_new").queue("b").request("cpu", "2").obj())
        result = sched.schedule(NOW + 10)
        results[fair] = ([a.key for a in result.admitted], [(p.key, p.message, p.queue) for p in result.pending])
    assert results[False] == (["default/a_new"], [("default/b_new", "Workload no longer fits after processing "
                                                                    "another workload", "active")])
    assert results[True] == (["default/b_new"], [("default/a_new", "Workload no longer fits after processing "
                                                                   "another workload", "active")])


# Kueue TestFairPreemptions (pkg/scheduler/preemption/preemption_fair_test.go), base fixture F, incoming a 1 cpu:
# "preempt lower priority first, even if big" with strategies [LessThanInitialShare] preempts b_low, and
# "preempt workload that doesn't transfer the imbalance, even if high priority" with [LessThanOrEqualToFinalShare]
# preempts b_high. a would borrow 1 (DRS 111), b borrows 3 (333). S2-a (preemptor's share <= the target's share
# after the removal) rejects b_low (b would drop to 0) and takes b_high (b keeps 222); S2-b (preemptor's share <
# the target's share before) accepts the first candidate, b_low (lower priority first). The default list runs S2-a
# first, so it matches [LessThanOrEqualToFinalShare] here.
STRATEGY_CASES = {
    "default": StrategyCase(strategies=None, want_preempted="b_high"),
    "LessThanOrEqualToFinalShare": StrategyCase(strategies=("LessThanOrEqualToFinalShare",), want_preempted="b_high"),
    "LessThanInitialShare": StrategyCase(strategies=("LessThanInitialShare",), want_preempted="b_low"),
}


def strategy_admitted() -> list[WorkloadInfo]:
    return [unit("a1", "a", "3"), unit("b_low", "b", "5", priority=0), unit("b_high", "b", "1", priority=1)]


@pytest.mark.parametrize("case", sorted(STRATEGY_CASES))
def test_fair_preemption_strategies(case):
    c = STRATEGY_CASES[case]
    snap = snapshot(strategy_admitted())
    wl, assignment = incoming("a_incoming", "a", "1")
    targets = Preemptor(now=NOW + 10, fair_sharing=True, fair_sharing_strategies=c.strategies).get_targets(
        wl, assignment, snap)
    assert [(t.workload.obj.name, t.reason) for t in targets] == [(c.want_preempted, "InCohortFairSharing")]


@pytest.mark.parametrize("case", sorted(STRATEGY_CASES))
def test_fair_preemption_strategies_in_a_cycle(case):
    """The strategies reach preemption through ``KueueScheduler(fair_sharing_strategies=...)``."""
    c = STRATEGY_CASES[case]
    sched = KueueScheduler(fair_sharing=True, fair_sharing_strategies=c.strategies)
    sched.set_namespace("default")
    for obj in fixture_f():
        sched.apply(obj)
    sched.apply(make_lq("a").cluster_queue("a").obj())
    for w in strategy_admitted():
        sched.add_workload(w.obj)
    sched.add_workload(make_wl("default", "a_incoming").queue("a").request("cpu", "1").obj())
    result = sched.schedule(NOW + 10)
    assert [(v.key, v.reason) for v in result.victims] == [(f"default/{c.want_preempted}", "InCohortFairSharing")]
    assert [(p.key, p.reason) for p in result.pending] == [("default/a_incoming", "WaitingForPreemptedWorkloads")]


@pytest.mark.parametrize("strategies", [["LessThanInitialShare"], ["LessThanOrEqualToFinalShare"], None])
def test_controller_passes_configuration_strategies(strategies):
    """The manager Configuration's fairSharing.preemptionStrategies reach the scheduler (default: both)."""
    fs = {"preemptionStrategies": strategies} if strategies else {"enable": True}
    version = "v1beta2" if strategies else "v1beta1"
    cfg = kueue_config.parse(make_configuration().version(version).fields(fairSharing=fs).obj())
    env = Environment()
    store = Store(env, 0)  # start_time: RFC 3339 text (NOW is the builders' epoch seconds)
    ctrl = KueueController(store, env, EventRecorder(store), config=cfg)
    assert ctrl.sched.fair_sharing
    assert ctrl.sched.fair_sharing_strategies == tuple(strategies or ("LessThanOrEqualToFinalShare",
                                                                      "LessThanInitialShare"))


def test_unsupported_strategy_lists_are_rejected():
    with pytest.raises(ValueError, match="unsupported fair sharing preemption strategies"):
        KueueScheduler(fair_sharing=True, fair_sharing_strategies=["LessThanInitialShare",
                                                                   "LessThanOrEqualToFinalShare"])

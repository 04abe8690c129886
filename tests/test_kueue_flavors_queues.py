"""Flavor matching (taints, nodeLabels vs nodeSelector/affinity), queue order, inactive ClusterQueues."""

from __future__ import annotations

from kueue_builders import NOW, make_cohort, make_cq, make_flavor, make_lq, make_wl

from kubetwin.kueue import KueueScheduler, api
from kubetwin.kueue.flavorassigner import flavor_matches_pod_set

TAINT = {"key": "key", "value": "val", "effect": "NoSchedule"}


def scheduler(*objs: dict) -> KueueScheduler:
    sched = KueueScheduler()
    sched.set_namespace("default")
    for o in objs:
        sched.apply(o)
    return sched


def flavors_of(result) -> dict:
    return {a.key: a.admission["podSetAssignments"][0]["flavors"] for a in result.admitted}


def test_flavor_matching_rules():
    tainted = api.parse_resource_flavor(
        make_flavor("spot-tainted").node_labels({"instance": "spot"}).taints([TAINT]).obj())
    ps = api.parse_workload(make_wl("default", "w").podset("main", 1, cpu="1").obj()).pod_sets[0]
    assert flavor_matches_pod_set(tainted, ps) == "untolerated taint key=val:NoSchedule in flavor spot-tainted"
    tolerating = api.parse_workload(make_wl("default", "w").podset(
        "main", 1, cpu="1", tolerations=[{"key": "key", "operator": "Exists"}]).obj()).pod_sets[0]
    assert flavor_matches_pod_set(tainted, tolerating) is None
    plain = api.parse_resource_flavor(make_flavor("od").node_labels({"instance": "on-demand"}).obj())
    sel = api.parse_workload(make_wl("default", "w").podset(
        "main", 1, cpu="1", node_selector={"instance": "spot", "other": "x"}).obj()).pod_sets[0]
    assert flavor_matches_pod_set(plain, sel) == "flavor od doesn't match node affinity"
    # keys the flavor does not label are ignored
    assert flavor_matches_pod_set(api.parse_resource_flavor(make_flavor("bare").obj()), sel) is None
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "instance", "operator": "NotIn", "values": ["on-demand"]}]}]}}}
    obj = make_wl("default", "w").podset("main", 1, cpu="1").obj()
    obj["spec"]["podSets"][0]["template"]["spec"]["affinity"] = affinity
    assert flavor_matches_pod_set(plain, api.parse_workload(obj).pod_sets[0]) == \
        "flavor od doesn't match node affinity"


def test_cycle_skips_tainted_flavor_unless_tolerated():
    sched = scheduler(make_flavor("spot-tainted").taints([TAINT]).obj(), make_flavor("on-demand").obj(),
                      make_cq("cq").flavor("spot-tainted", cpu="5").flavor("on-demand", cpu="5").obj(),
                      make_lq("main").cluster_queue("cq").obj())
    sched.add_workload(make_wl("default", "plain").queue("main").podset("main", 1, cpu="1").obj())
    sched.add_workload(make_wl("default", "tolerant").queue("main").created(NOW - 1).podset(
        "main", 1, cpu="1", tolerations=[{"key": "key", "operator": "Equal", "value": "val"}]).obj())
    # one head per ClusterQueue per cycle: the older one first
    assert flavors_of(sched.schedule(NOW)) == {"default/tolerant": {"cpu": "spot-tainted"}}
    result = sched.schedule(NOW + 1)
    assert flavors_of(result) == {"default/plain": {"cpu": "on-demand"}}
    assert result.admitted[0].event_message.endswith(
        "Flavors considered: main: spot-tainted(NoFit;untolerated taint key=val:NoSchedule in flavor spot-tainted)")


def test_heap_orders_by_priority_then_creation():
    sched = scheduler(make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="1").obj(),
                      make_lq("main").cluster_queue("cq").obj())
    sched.add_workload(make_wl("default", "old-low").queue("main").created(NOW - 10).request("cpu", "1").obj())
    sched.add_workload(make_wl("default", "new-high").queue("main").priority(5).request("cpu", "1").obj())
    sched.add_workload(make_wl("default", "older-high").queue("main").priority(5).created(NOW - 1)
                       .request("cpu", "1").obj())
    assert sched.queues.queues["cq"].active() == ["default/older-high", "default/new-high", "default/old-low"]
    assert [a.key for a in sched.schedule(NOW).admitted] == ["default/older-high"]


def test_cohort_cycle_makes_cluster_queues_inactive():
    sched = scheduler(make_flavor("default").obj(), make_cohort("x").parent("y").obj(),
                      make_cohort("y").parent("x").obj(),
                      make_cq("cq").cohort("x").flavor("default", cpu="1").obj(),
                      make_lq("main").cluster_queue("cq").obj())
    sched.add_workload(make_wl("default", "w").queue("main").request("cpu", "1").obj())
    result = sched.schedule(NOW)
    assert result.admitted == [] and result.pending == []
    assert sched.pending("default/w") == ("cq", "active")
    sched.delete("Cohort", "y")  # breaks the cycle
    assert [a.key for a in sched.schedule(NOW + 1).admitted] == ["default/w"]


def test_missing_local_queue_waits_for_it():
    sched = scheduler(make_flavor("default").obj(), make_cq("cq").flavor("default", cpu="1").obj())
    sched.add_workload(make_wl("default", "w").queue("main").request("cpu", "1").obj())
    assert sched.pending("default/w") is None and sched.schedule(NOW).pending == []
    sched.apply(make_lq("main").cluster_queue("cq").obj())
    assert [a.key for a in sched.schedule(NOW + 1).admitted] == ["default/w"]


def test_overlapping_preemption_targets_are_skipped():
    """Two ClusterQueues reclaiming from the same borrower: the first preempts, the second is skipped this cycle."""
    sched = scheduler(make_flavor("default").obj(),
                      make_cq("cq1").cohort("co").preemption(reclaim="Any").flavor("default", cpu="5").obj(),
                      make_cq("cq2").cohort("co").preemption(reclaim="Any").flavor("default", cpu="5").obj(),
                      make_cq("borrower").cohort("co").flavor("default", cpu="0").obj(),
                      make_lq("q1").cluster_queue("cq1").obj(), make_lq("q2").cluster_queue("cq2").obj())
    sched.add_workload(make_wl("default", "big").request("cpu", "10")
                       .admitted("borrower", {"main": {"cpu": "default"}}).obj())
    sched.add_workload(make_wl("default", "w1").queue("q1").created(NOW - 1).request("cpu", "5").obj())
    sched.add_workload(make_wl("default", "w2").queue("q2").request("cpu", "5").obj())
    result = sched.schedule(NOW)
    assert [(v.key, v.reason) for v in result.victims] == [("default/big", "InCohortReclamation")]
    assert {p.key: (p.reason, p.message) for p in result.pending} == {
        "default/w1": ("WaitingForPreemptedWorkloads", "couldn't assign flavors to pod set main: insufficient unused "
                       "quota for cpu in flavor default, 5 more needed. Pending the preemption of 1 workload(s)"),
        "default/w2": ("WaitingForQuota", "Workload has overlapping preemption targets with another workload")}
    assert result.skipped_preemptions == {"cq2": 1}
    sched.remove_workload("default/big")
    assert sorted(a.key for a in sched.schedule(NOW + 1).admitted) == ["default/w1", "default/w2"]

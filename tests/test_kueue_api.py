"""Kueue manifests -> dataclasses: both served versions, the real defaults, Kueue's request arithmetic."""

from __future__ import annotations

from kueue_builders import make_cq, make_wl

from kubetwin.api.podresources import pod_requests
from kubetwin.k8s.labels import selects
from kubetwin.kueue import api
from kubetwin.kueue.quota import (
    ResourceNode,
    add_usage,
    available,
    potential_available,
    remove_usage,
    update_tree,
)


def test_cluster_queue_defaults():
    cq = api.parse_cluster_queue({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                  "metadata": {"name": "q"}, "spec": {}})
    assert cq.queueing_strategy == "BestEffortFIFO"
    assert cq.preemption == api.Preemption("Never", "Never", "Never", None)
    assert cq.flavor_fungibility == api.FlavorFungibility("MayStopSearch", "TryNextFlavor", None)
    assert cq.namespace_selector is None and cq.cohort is None
    # nil selector matches no namespace, {} matches all
    assert not selects(cq.namespace_selector, {"a": "b"})
    assert selects({}, {})


def test_v1beta1_cluster_queue_converts():
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "q"},
           "spec": {"cohort": "eng", "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
                    "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                        {"name": "default", "resources": [
                            {"name": "cpu", "nominalQuota": "500m", "borrowingLimit": 2},
                            {"name": "memory", "nominalQuota": "3Gi", "lendingLimit": "1Gi"}]}]}]}}
    cq = api.parse_cluster_queue(obj)
    assert cq.cohort == "eng"
    assert cq.flavor_fungibility == api.FlavorFungibility("MayStopSearch", "MayStopSearch", None)
    [rg] = cq.resource_groups
    assert rg.covered_resources == ("cpu", "memory")
    assert dict(rg.flavors[0].resources) == {"cpu": api.ResourceQuota(500, 2000, None),
                                             "memory": api.ResourceQuota(3 << 30, None, 1 << 30)}
    v1beta2 = make_cq("q").cohort("eng").obj()
    assert api.parse_cluster_queue(v1beta2).cohort == "eng"


def test_pod_requests_follow_kueue():
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}},
                           {"name": "b", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}],
            "overhead": {"cpu": "100m"}}
    # max(sum containers 1.5, init 2) + overhead 0.1; limits stand in for missing requests
    assert pod_requests({"spec": spec}) == {"cpu": 2100, "memory": 1 << 30}


def test_workload_view():
    obj = make_wl("ns", "w").queue("main").priority(7).job_uid("j").podset("one", 3, min_count=2, cpu="250m") \
        .admitted("cq", {"one": {"cpu": "default"}}).obj()
    wl = api.parse_workload(obj)
    assert (wl.key, wl.queue_name, wl.priority, wl.job_uid) == ("ns/w", "main", 7, "j")
    assert wl.pod_sets[0].requests == (("cpu", 250),) and wl.pod_sets[0].min_count == 2
    assert wl.has_quota_reservation and wl.can_be_partially_admitted()
    assert wl.admission.pod_set_assignments[0].resource_usage == (("cpu", 750),)


def test_format_amount():
    assert api.format_amount("cpu", 51000) == "51"
    assert api.format_amount("cpu", 1500) == "1500m"
    assert api.format_amount("memory", 2 << 30) == "2Gi"
    assert api.format_amount("memory", 1500) == "1500"
    assert api.format_amount("example.com/gpu", 10) == "10"
    assert api.format_amount("pods", 2000) == "2k"


def test_quota_tree_lending_and_borrowing_limits():
    """lender (10, lendingLimit 3) and borrower (5, borrowingLimit 10) under one cohort (K10's numbers)."""
    cohort = ResourceNode("child", True)
    lender = ResourceNode("lender", False, api.parse_cluster_queue(
        make_cq("lender").flavor("f", cpu=("10", None, "3")).obj()).resource_groups)
    borrower = ResourceNode("borrower", False, api.parse_cluster_queue(
        make_cq("borrower").flavor("f", cpu=("5", "10")).obj()).resource_groups)
    for n in (lender, borrower):
        n.parent = cohort
        cohort.child_cqs.append(n)
    update_tree(cohort)
    fr = ("f", "cpu")
    assert cohort.subtree_quota[fr] == 8000  # 3 lent + 5
    assert potential_available(borrower, fr) == 8000
    assert potential_available(lender, fr) == 15000  # localQuota 7 + cohort 8
    add_usage(borrower, fr, 5000)
    assert (borrower.usage[fr], cohort.usage[fr]) == (5000, 5000)
    assert available(borrower, fr) == 3000
    assert available(lender, fr) == 10000  # its 7 guaranteed + 3 left in the cohort
    add_usage(lender, fr, 8000)  # 7 from its local quota, 1 from the cohort
    assert cohort.usage[fr] == 6000
    remove_usage(lender, fr, 8000)
    assert (lender.usage[fr], cohort.usage[fr]) == (0, 5000)

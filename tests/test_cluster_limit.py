"""GKE's nodes per cluster (15,000, https://cloud.google.com/kubernetes-engine/quotas): validate refuses pools that
start above it and notices maxima above it; the cluster autoscaler stops there, as CA's --max-nodes-total does."""

from __future__ import annotations

import pytest
from k8s_builders import make_pod, make_scenario
from test_cluster_autoscaler import conditions, events, nodes_over_time, owned, pod_template, pool, provreq

from kubetwin.api import twin
from kubetwin.api.loader import Manifest
from kubetwin.runner import run
from kubetwin.validation.validate import validate

ZONES = ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]


def manifests(*objs: dict) -> list[Manifest]:
    return [Manifest(o, "pools.yaml", 1 + 20 * i) for i, o in enumerate(objs)]


def fixed(name: str, per_zone: int) -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"machineType": "e2-standard-8", "nodeCount": per_zone, "zones": ZONES}}


def test_pools_that_start_above_the_cluster_limit_are_refused_at_the_crossing_pool():
    # 3 x 4 zones x 1,000 = 12,000, then 4 x 1,000 more: the fourth pool crosses 15,000
    ds = validate(manifests(*[fixed(f"p{i}", 1000) for i in range(4)]))
    errors = [d for d in ds if d.severity == "error"]
    assert len(errors) == 1
    e = errors[0]
    assert (e.obj, e.field) == ("NodePool/p3", "spec.nodeCount")
    assert "16,000 nodes (12,000 in the pools before this one + 1000 x 4 zones here)" in e.message
    assert "above GKE's limit of 15,000 nodes per cluster" in e.message
    assert "at most 750 (per zone)" in e.hint


def test_autoscaling_minimum_counts_as_started_nodes():
    auto = pool("a", "e2-standard-8", 1000, 1000, zones=ZONES)
    ds = validate(manifests(*[fixed(f"p{i}", 1000) for i in range(3)], auto))
    assert [(d.obj, d.field) for d in ds if d.severity == "error"] == [("NodePool/a",
                                                                        "spec.autoscaling.minNodeCount")]


def test_maxima_above_the_limit_are_a_notice_and_under_it_nothing():
    pools = [pool(f"a{i}", "e2-standard-8", 0, 1000, zones=ZONES) for i in range(4)]
    ds = validate(manifests(*pools))
    assert not [d for d in ds if d.severity == "error"]
    notices = [d for d in ds if "nodes per cluster" in d.message]
    assert [(d.severity, d.obj, d.field) for d in notices] == [("notice", "NodePool/a3",
                                                                "spec.autoscaling.maxNodeCount")]
    assert "16,000 with this pool" in notices[0].message
    assert not [d for d in validate(manifests(*pools[:3])) if "nodes per cluster" in d.message]


def test_cluster_autoscaler_stops_at_max_nodes_total(monkeypatch):
    monkeypatch.setattr(twin, "MAX_NODES_PER_CLUSTER", 3)
    cpu = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "cpu"},
           "spec": {"machineType": "e2-standard-8", "nodeCount": 1, "zones": ["us-central1-a"]}}
    pods = [owned(make_pod(f"p{i}").gpus(1).cpu("2").duration("1h").obj()) for i in range(4)]
    r = run(objects=[make_scenario("30m").obj(), cpu, pool("l4", "g2-standard-8", 0, 5, "nvidia-l4", 1), *pods])
    added = [n for _, e, n in nodes_over_time(r) if e == "ADDED"]
    assert len(added) == 3  # the cpu node + 2 L4 nodes: the cluster holds 3
    assert sorted(o for _, o, _, _ in events(r, "TriggeredScaleUp")) == ["p0", "p1"]
    assert "0->2 (max: 5)" in events(r, "TriggeredScaleUp")[0][2]
    nts = events(r, "NotTriggerScaleUp")
    assert {o for _, o, _, _ in nts} == {"p2", "p3"}
    assert {m for _, _, m, _ in nts} == {"pod didn't trigger scale-up: 1 max node total count already reached"}
    assert r.summary["pods"]["by_phase"].get("Pending") == 2


@pytest.mark.parametrize("limit", [15_000, 4])
def test_under_the_limit_the_scale_up_is_unchanged(monkeypatch, limit):
    monkeypatch.setattr(twin, "MAX_NODES_PER_CLUSTER", limit)
    pods = [owned(make_pod(f"p{i}").gpus(1).cpu("2").duration("1h").obj()) for i in range(3)]
    r = run(objects=[make_scenario("2h").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1), *pods])
    assert len([1 for _, e, _ in nodes_over_time(r) if e == "ADDED"]) == 3
    assert not events(r, "NotTriggerScaleUp")
    assert r.summary["pods"]["by_phase"].get("Succeeded") == 3


def test_multi_host_slice_that_would_cross_the_limit_is_skipped(monkeypatch):
    monkeypatch.setattr(twin, "MAX_NODES_PER_CLUSTER", 3)  # the 4x4 v5e slice has 4 hosts
    tpu = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "v5e"},
           "spec": {"machineType": "ct5lp-hightpu-4t", "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4},
                    "zones": ["us-central1-a"], "placementPolicy": {"tpuTopology": "4x4"}}}
    pod = owned(make_pod("w0").cpu("1").duration("1h").obj())
    pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
    r = run(objects=[make_scenario("10m").obj(), tpu, pod])
    assert not nodes_over_time(r) and not events(r, "TriggeredScaleUp")
    assert {m for _, _, m, _ in events(r, "NotTriggerScaleUp")} == {
        "pod didn't trigger scale-up: 1 atomic scale-up exceeds cluster node count limit"}


def test_best_effort_atomic_request_is_all_or_nothing_within_the_limit(monkeypatch):
    ba = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    objs = [pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1), pod_template("t"), provreq("pr", ba, "t", 3)]
    monkeypatch.setattr(twin, "MAX_NODES_PER_CLUSTER", 2)  # 3 nodes wanted, the cluster may hold 2: none made
    r = run(objects=[make_scenario("10m").obj(), *objs])
    assert conditions(r, "pr")[-1][1][1] == ("Provisioned", "False", "CapacityIsNotFound")
    assert not nodes_over_time(r)
    monkeypatch.setattr(twin, "MAX_NODES_PER_CLUSTER", 3)
    r = run(objects=[make_scenario("10m").obj(), *objs])
    assert conditions(r, "pr")[-1][1][1] == ("Provisioned", "True", "CapacityIsProvisioned")

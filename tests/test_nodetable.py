"""The vectorized node table and the per-pod-shape caches against the scalar plugins they mirror: same verdicts,
reasons and scores."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scheduler_builders import SAME_TEAM, TEAM

from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodeinfo import DEFAULT_MEMORY, DEFAULT_MILLI_CPU, NodeInfo
from kubetwin.scheduler.nodetable import NodeTable, ScoreCache, StaticVerdicts
from kubetwin.scheduler.podshapes import PodShapes

GPU = "nvidia.com/gpu"
GIB = 1024 ** 3


def _node(rng: random.Random, i: int) -> NodeInfo:
    labels = {"topology.kubernetes.io/zone": rng.choice(["us-central1-a", "us-central1-b", "us-central1-c"]),
              "pool": rng.choice(["cpu", "gpu", "spot"]), TEAM: "ab"[i % 2]}
    taints = []
    if labels["pool"] == "gpu":
        taints.append({"key": GPU, "value": "present", "effect": "NoSchedule"})
    if rng.random() < 0.2:
        taints.append({"key": "cloud.google.com/gke-spot", "value": "true", "effect": "PreferNoSchedule"})
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": labels},
            "spec": {"taints": taints, "unschedulable": rng.random() < 0.05}}
    alloc = {"cpu": rng.choice([0, 1930, 7910, 31850]), "memory": rng.choice([0, 6 * GIB, 27 * GIB, 120 * GIB]),
             "pods": rng.choice([0, 3, 110])}
    if labels["pool"] == "gpu":
        alloc[GPU] = rng.choice([1, 2, 8])
    used = {k: rng.randint(0, v) for k, v in alloc.items()}
    nonzero = {"cpu": max(used["cpu"], DEFAULT_MILLI_CPU * used["pods"]),
               "memory": max(used["memory"], DEFAULT_MEMORY * used["pods"])}
    return NodeInfo(f"n{i}", node, alloc, used, nonzero)


def _pod(rng: random.Random) -> P.PodInfo:
    requests = {"cpu": rng.choice([0, 100, 2000, 16000]), "memory": rng.choice([0, GIB, 8 * GIB])}
    if rng.random() < 0.5:
        requests[GPU] = rng.choice([1, 2, 8])
    tols = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}] if GPU in requests else []
    selector = {"pool": rng.choice(["cpu", "gpu"])} if rng.random() < 0.3 else {}
    required = None
    if rng.random() < 0.3:
        required = [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                           "values": ["us-central1-a", "us-central1-b"]}]}]
    preferred = [{"weight": 5, "preference": {"matchExpressions": [
        {"key": "pool", "operator": "In", "values": ["spot"]}]}}] if rng.random() < 0.3 else []
    return P.PodInfo({"metadata": {"name": "p", "namespace": "default"}, "spec": {}}, requests, tols, selector,
                     required, preferred, 0)


def _table(nodes: list[NodeInfo]) -> NodeTable:
    table = NodeTable()
    for ni in nodes:
        table.upsert(ni)
    table.scan_order()
    return table


@pytest.mark.parametrize("seed", range(6))
def test_vector_filters_and_scores_match_the_scalar_plugins(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [_node(rng, i) for i in range(200)]
    table = _table(nodes)
    rows = np.arange(len(nodes))
    for _ in range(20):
        pi = _pod(rng)
        fit = [P.node_resources_fit(pi, ni) for ni in nodes]
        assert table.fits(pi.requests)[:len(nodes)].tolist() == [code == P.SUCCESS for code, _ in fit]
        assert [P.fits_request(pi.requests, ni) for ni in nodes] == [code == P.SUCCESS for code, _ in fit]
        for reason, bad in table.insufficient(pi.requests, rows):
            assert bad.tolist() == [reason in reasons for _, reasons in fit], reason
        for strategy in ("LeastAllocated", "MostAllocated"):
            assert table.resources_fit_score(pi.requests, rows, strategy).tolist() == [
                P.resources_fit_score(pi, ni, strategy) for ni in nodes]
        assert table.balanced_allocation_score(pi.requests, rows).tolist() == [
            P.balanced_allocation_score(pi, ni) for ni in nodes]
        _assert_static_matches_scalar(table, table.static(pi, StaticVerdicts()), pi, nodes, P.DEFAULT)


def _assert_static_matches_scalar(table: NodeTable, static: StaticVerdicts, pi: P.PodInfo, nodes: list[NodeInfo],
                                  profile: P.Profile) -> None:
    """Each node's cached node-only verdict is the first scalar Filter that rejects, and its raw scores."""
    for i, ni in enumerate(nodes):
        first = next(((code, reasons[0]) for plugin in profile.filters
                      for code, reasons in [plugin.check(pi, ni)] if code != P.SUCCESS), (P.SUCCESS, ""))
        assert (int(static.code[i]), table.reasons[static.reason[i]]) == first, (ni.name, pi.pod)
        if first[0] == P.SUCCESS:
            assert static.scores[:, i].tolist() == [s.score(pi, ni) for s in profile.scores]



def _pod_object(rng: random.Random, i: int) -> dict:
    """A Pod object drawn from few enough values that many pods share a node-only shape."""
    spec: dict = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {
        "cpu": rng.choice(["100m", "2"])}}}]}
    if rng.random() < 0.5:
        spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"pool": rng.choice(["cpu", "gpu"])}
    node_affinity: dict = {}
    if rng.random() < 0.3:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rng.choice(["us-central1-a",
                                                                                           "us-central1-b"])]}]}]}
    if rng.random() < 0.3:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 5, "preference": {
            "matchExpressions": [{"key": "pool", "operator": "In", "values": ["spot"]}]}}]
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    labels = {TEAM: rng.choice("ab")} if rng.random() < 0.7 else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default",
                                                           "labels": labels}, "spec": spec}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("profile", [P.DEFAULT, P.Profile([*P.DEFAULT.filters, SAME_TEAM], P.DEFAULT.scores)],
                         ids=["default", "with-pod-label-filter"])
def test_shape_cache_matches_the_scalar_plugins(seed: int, profile: P.Profile) -> None:
    """Pods through one PodShapes, nodes relabelled and tainted between them: every cached verdict is what the
    scalar plugins say for that pod, so pods that share a shape key differ in nothing the plugins read."""
    rng = random.Random(seed)
    nodes = [_node(rng, i) for i in range(120)]
    table = _table(nodes)
    shapes = PodShapes(table, profile)
    for step in range(150):
        pi, static, _, _ = shapes.pod_info(_pod_object(rng, step))
        _assert_static_matches_scalar(table, static, pi, nodes, profile)
        ni = nodes[rng.randrange(len(nodes))]
        meta = ni.node["metadata"]
        labels = {**meta["labels"], TEAM: rng.choice("ab"), "pool": rng.choice(["cpu", "gpu", "spot"])}
        taints = [] if rng.random() < 0.5 else [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
        ni.node = {**ni.node, "metadata": {**meta, "labels": labels}, "spec": {**ni.node["spec"], "taints": taints}}
        table.upsert(ni)
    assert len(shapes.static) < 150  # pods did share shapes: the cache was exercised


def test_incremental_refresh_matches_a_full_recompute() -> None:
    rng = random.Random(7)
    nodes = [_node(rng, i) for i in range(300)]
    table = _table(nodes)
    pi = _pod(random.Random(3))
    pi.requests = {"cpu": 500, "memory": GIB}
    cache = table.refresh(pi, ScoreCache(), "LeastAllocated", (1, 1))
    for step in range(200):  # bind and release pods on random nodes: a few changed rows per refresh
        ni = nodes[rng.randrange(len(nodes))]
        pod = {"metadata": {"name": f"x{step}", "namespace": "default"}, "spec": {}}
        ni.add_pod(pod, pi.requests)
        table.add_requests(ni.name, pi.requests, 1, 0)
        cache = table.refresh(pi, cache, "LeastAllocated", (1, 1))
        full = table.refresh(pi, ScoreCache(), "LeastAllocated", (1, 1))
        assert cache.fit.tolist() == full.fit.tolist()
        assert cache.total.tolist() == full.total.tolist()
    assert cache.total[:len(nodes)].tolist() == [
        P.resources_fit_score(pi, ni, "LeastAllocated") + P.balanced_allocation_score(pi, ni) for ni in nodes]


@pytest.mark.parametrize("want", [0, 1, 5, 40, 300, 1000])
def test_first_feasible_is_the_rotated_scan(want: int) -> None:
    rng = random.Random(want)
    table = _table([_node(rng, i) for i in range(500)])
    order = table.order.tolist()
    for density in (0.01, 0.3, 0.95):
        mask = np.array([rng.random() < density for _ in range(len(table.alive))])
        for start in (0, 17, 499):
            rotated = order[start:] + order[:start]
            expect, processed = [], len(rotated)
            for pos, row in enumerate(rotated):
                if mask[row]:
                    expect.append(row)
                    if want and len(expect) == want:
                        processed = pos + 1
                        break
            rows, got_processed = table.first_feasible(mask, start, want)
            assert rows.tolist() == expect
            assert got_processed == processed


def test_scan_order_round_robins_zones() -> None:
    table = NodeTable()
    for i, zone in enumerate("aabbbc"):
        table.upsert(NodeInfo(f"n{i}", {"metadata": {"name": f"n{i}", "labels": {
            "topology.kubernetes.io/zone": zone}}, "spec": {}}, {"cpu": 1000, "memory": GIB, "pods": 10}))
    # nodeTree: one node from each zone in turn, creation order within a zone
    assert [table.infos[r].name for r in table.scan_order()] == ["n0", "n2", "n5", "n1", "n3", "n4"]


@pytest.mark.parametrize("want", [1, 3, 4, 100])
def test_first_feasible_across_scan_windows(want: int) -> None:
    table = _table([_node(random.Random(1), i) for i in range(2000)])
    order = table.order.tolist()
    start = 123
    rotated = order[start:] + order[:start]
    positions = [255, 256, 257, 767, 768, 1791, 1999]  # on and around the window edges (256, 768, 1792)
    mask = np.zeros(len(table.alive), bool)
    mask[[rotated[p] for p in positions]] = True
    rows, processed = table.first_feasible(mask, start, want)
    assert rows.tolist() == [rotated[p] for p in positions][:want]
    assert processed == (positions[want - 1] + 1 if want <= len(positions) else len(order))

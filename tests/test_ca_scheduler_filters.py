"""The cluster autoscaler simulates with the scheduler's own filters (issue 31 item 6).

cluster-autoscaler runs the scheduler framework's PreFilter and Filter plugins on template NodeInfos
(simulator/clustersnapshot/predicate: SchedulerPluginRunner; older releases simulator/predicatechecker
SchedulerBasedPredicateChecker), so a node group whose template a Filter rejects is not scaled up, and the pod's
NotTriggerScaleUp event counts the Filter's reason ("pod didn't trigger scale-up: 1 node(s) didn't match ...").
The rule is tested for every pool shape the CA scales (CPU, GPU, single-host TPU, a multi-host TPU slice), with a
Filter registered the way docs/architecture.md's "Plugging in" says (tests/test_plugging_in.py), for scale-up,
FilterOutSchedulable and scale-down.
"""

from __future__ import annotations

import pytest
from k8s_builders import make_pod, make_scenario
from scheduler_builders import SAME_TEAM, TEAM

from kubetwin.runner import run
from kubetwin.scheduler import plugins as P


def owned(pod: dict) -> dict:
    """A pod with a controller, so the autoscaler may move it."""
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                           "uid": "u-rs", "controller": True}]
    return pod


def pool(name: str, team: str, shape: str, lo: int = 0, hi: int = 4, nodes: int | None = None) -> dict:
    """An autoscaling pool of one shape whose nodes carry the team label (NodePool spec.labels)."""
    spec: dict = {"zones": ["us-central1-a"], "labels": {TEAM: team},
                  "autoscaling": {"minNodeCount": lo, "maxNodeCount": hi}}
    if nodes is not None:
        spec["nodeCount"] = nodes
    if shape == "cpu":
        spec["machineType"] = "n2-standard-8"
    elif shape == "gpu":
        spec.update(machineType="g2-standard-8", accelerators=[{"type": "nvidia-l4", "count": 1}])
    elif shape == "tpu":
        spec.update(machineType="ct5lp-hightpu-4t", placementPolicy={"tpuTopology": "2x2"})
    else:  # a multi-host slice: 4 hosts of 4 chips
        spec.update(machineType="ct5lp-hightpu-4t", placementPolicy={"tpuTopology": "4x4"})
        spec["autoscaling"] = {"minNodeCount": 0, "maxNodeCount": 4}
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def pods_for(shape: str, team: str, n: int = 1, prefix: str = "p") -> list[dict]:
    out = []
    for i in range(n if shape != "tpu-slice" else 4):
        pod = owned(make_pod(f"{prefix}{i}").cpu("1").duration("1h").obj())
        pod["metadata"]["labels"] = {TEAM: team}
        if shape == "gpu":
            pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        elif shape.startswith("tpu"):
            pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
        out.append(pod)
    return out


def added_nodes(result) -> list[str]:
    return sorted({o["metadata"]["name"] for _, _, etype, o in result.history if o["kind"] == "Node"
                   and etype == "ADDED"})


def messages(result, reason: str) -> list[str]:
    return [e.message for e in result.recorded_events(reason)]


SHAPES = ["cpu", "gpu", "tpu", "tpu-slice"]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_pool_a_registered_filter_rejects_is_not_bought(shape: str) -> None:
    """Only the other team's pool: nothing is bought, and the pod's NotTriggerScaleUp names the Filter's reason."""
    objs = [make_scenario("20m").obj(), pool("theirs", "b", shape), *pods_for(shape, "a")]
    with P.registered(SAME_TEAM):
        r = run(objects=objs)
    assert added_nodes(r) == []
    nts = messages(r, "NotTriggerScaleUp")
    assert nts and set(nts) == {"pod didn't trigger scale-up: 1 node(s) belong to another team"}
    assert not messages(r, "TriggeredScaleUp")
    # the same scenario without the Filter buys the pool's nodes: the Filter alone made the difference
    assert added_nodes(run(objects=objs))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_pool_the_filter_accepts_is_the_one_bought(shape: str) -> None:
    """Two pools alike but for the team label: the pod's own team's pool grows, the other never does."""
    objs = [make_scenario("20m").obj(), pool("aaa-theirs", "b", shape), pool("zzz-ours", "a", shape),
            *pods_for(shape, "a")]
    with P.registered(SAME_TEAM):
        r = run(objects=objs)
    nodes = added_nodes(r)
    assert nodes and all("zzz-ours" in n for n in nodes), nodes
    assert all("zzz-ours" in m for m in messages(r, "TriggeredScaleUp"))


def test_pods_differing_only_in_what_a_filter_reads_are_simulated_apart() -> None:
    """The simulation's per-shape cache keys on the fields the profile's Filters read (as the scheduler's): two pods
    alike but for the team label each buy a node of their own team's pool."""
    objs = [make_scenario("20m").obj(), pool("pool-a", "a", "cpu"), pool("pool-b", "b", "cpu"),
            *pods_for("cpu", "a", prefix="a"), *pods_for("cpu", "b", prefix="b")]
    with P.registered(SAME_TEAM):
        r = run(objects=objs)
    nodes = added_nodes(r)
    assert len(nodes) == 2 and any("pool-a" in n for n in nodes) and any("pool-b" in n for n in nodes), nodes
    assert not messages(r, "NotTriggerScaleUp")


def test_room_a_filter_rejects_is_not_counted_as_room() -> None:
    """FilterOutSchedulable: an existing node with free room that the Filter rejects does not hold the pod, so the
    autoscaler still buys a node of the pod's team."""
    objs = [make_scenario("20m").obj(), pool("pool-b", "b", "cpu", lo=1, hi=2, nodes=1),
            pool("pool-a", "a", "cpu"), *pods_for("cpu", "a")]
    with P.registered(SAME_TEAM):
        r = run(objects=objs)
    assert any("pool-a" in n for n in added_nodes(r)), added_nodes(r)


def test_scale_down_keeps_a_node_whose_pods_only_fit_where_a_filter_rejects() -> None:
    """Scale-down moves a node's pods only where the scheduler's Filters let them: team a's pod on an underused
    node of pool-a has only team b's node to go to, so pool-a's node is not removed."""
    a = pool("pool-a", "a", "cpu", lo=0, hi=2, nodes=1)
    b = pool("pool-b", "b", "cpu", lo=1, hi=2, nodes=1)
    for p in (a, b):  # nodes up before the pod: no scale-up, one node of each pool
        p["spec"]["bootDelay"] = "0s"
    pods = pods_for("cpu", "a")
    pods[0]["metadata"]["annotations"] = {"kubetwin.io/create-at": "30s"}
    objs = [make_scenario("40m").obj(), a, b, *pods]
    with P.registered(SAME_TEAM):
        r = run(objects=objs)
    deleted = [o["metadata"]["name"] for _, _, etype, o in r.history if o["kind"] == "Node" and etype == "DELETED"]
    assert not any("pool-a" in n for n in deleted), deleted
    # without the Filter the pod may move to pool-b's node, and pool-a's node goes after the unneeded time
    r = run(objects=objs)
    deleted = [o["metadata"]["name"] for _, _, etype, o in r.history if o["kind"] == "Node" and etype == "DELETED"]
    assert any("pool-a" in n for n in deleted), deleted


@pytest.mark.parametrize("shape", ["cpu", "gpu"])
def test_a_pod_volumebindings_prefilter_rejects_buys_nothing(shape: str) -> None:
    """VolumeBinding's PreFilter rejects a pod whose claim does not exist on every node, new ones too: no node is
    bought (the old fixed subset of Filters skipped PreFilter and bought one), and NotTriggerScaleUp says why."""
    pod = pods_for(shape, "a")[0]
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    r = run(objects=[make_scenario("20m").obj(), pool("any", "a", shape), pod])
    assert added_nodes(r) == []
    assert set(messages(r, "NotTriggerScaleUp")) == {
        'pod didn\'t trigger scale-up: 1 persistentvolumeclaim "data" not found'}


def _anti(pod: dict, key: str = "kubernetes.io/hostname", app: str = "web") -> dict:
    pod["metadata"]["labels"] = {"app": app}
    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}
    return pod


@pytest.mark.parametrize("shape", ["cpu", "gpu"])
def test_pod_anti_affinity_buys_one_node_per_replica(shape: str) -> None:
    """InterPodAffinity in the bin-packing estimate: three replicas that must not share a node (hostname
    anti-affinity) and would fit one node together buy three nodes in one scale-up (the old subset packed them on
    one, and the other two waited for more loops)."""
    pods = [_anti(p) for p in pods_for(shape, "a", n=3)]
    if shape == "gpu":  # two L4s per node: room for two replicas, were it not for the anti-affinity
        p = pool("l4x2", "a", "cpu")
        p["spec"].update(machineType="g2-standard-24", accelerators=[{"type": "nvidia-l4", "count": 2}])
    else:
        p = pool("cpu", "a", "cpu")
    r = run(objects=[make_scenario("20m").obj(), p, *pods])
    ups = messages(r, "TriggeredScaleUp")
    assert len(ups) == 3 and all("0->3 (max: 4)" in m for m in ups), ups
    assert len(added_nodes(r)) == 3


def test_pod_affinity_to_a_zone_buys_in_that_zone() -> None:
    """Required pod affinity to the zone of a running database: only the pool in that zone can help; the other
    zone's pool, cheaper by the expander's tie-break or not, is not bought."""
    db = owned(make_pod("db").cpu("1").duration("1h").obj())
    db["metadata"]["labels"] = {"app": "db"}
    db["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "us-central1-b"}
    app = owned(make_pod("app").cpu("7").duration("1h").obj())
    app["metadata"]["annotations"] = {"kubetwin.io/create-at": "5m"}
    app["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}
    a, b = pool("aaa-zone-a", "a", "cpu"), pool("zzz-zone-b", "a", "cpu")
    b["spec"]["zones"] = ["us-central1-b"]
    r = run(objects=[make_scenario("20m").obj(), a, b, db, app])
    app_nodes = {o["spec"].get("nodeName") for _, _, _, o in r.history
                 if o["kind"] == "Pod" and o["metadata"]["name"] == "app"} - {None}
    assert app_nodes and all("zzz-zone-b" in n for n in app_nodes), app_nodes
    assert not any("aaa-zone-a" in n for n in added_nodes(r)), added_nodes(r)


def test_existing_anti_affinity_keeps_the_pool_that_only_has_that_zone() -> None:
    """An existing pod's anti-affinity (symmetry) against the pending pod, zone-wide: the pool in that zone cannot
    help, and NotTriggerScaleUp says so in InterPodAffinity's words."""
    guard = _anti(owned(make_pod("guard").cpu("1").duration("1h").obj()), "topology.kubernetes.io/zone", "noisy")
    guard["metadata"]["labels"] = {"app": "guard"}
    guard["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "labelSelector"] = {"matchLabels": {"app": "noisy"}}
    noisy = owned(make_pod("noisy").cpu("7").duration("1h").obj())
    noisy["metadata"]["labels"] = {"app": "noisy"}
    noisy["metadata"]["annotations"] = {"kubetwin.io/create-at": "5m"}
    r = run(objects=[make_scenario("20m").obj(), pool("only", "a", "cpu"), guard, noisy])
    assert len(added_nodes(r)) == 1  # the guard's node only
    assert set(messages(r, "NotTriggerScaleUp")) == {
        "pod didn't trigger scale-up: 1 node(s) didn't satisfy existing pods anti-affinity rules"}


def _dra_pool(name: str = "h100", hi: int = 2) -> dict:
    """An autoscaling a3-highgpu-8g pool whose GPUs the NVIDIA DRA driver publishes (device plugin off)."""
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"machineType": "a3-highgpu-8g", "zones": ["us-central1-a"],
                     "autoscaling": {"minNodeCount": 0, "maxNodeCount": hi},
                     "accelerators": [{"type": "nvidia-h100-80gb", "count": 8,
                                       "gpuDriverInstallation": "INSTALLATION_DISABLED"}],
                     "labels": {"gke-no-default-nvidia-gpu-device-plugin": "true"}}}


@pytest.mark.parametrize(("gpus", "pods", "nodes"), [(8, 2, 2), (4, 2, 1), (1, 3, 1)])
def test_dra_claims_buy_dra_gpu_nodes_not_cpu_nodes(gpus: int, pods: int, nodes: int) -> None:
    """DynamicResources in the simulation: a pod whose GPUs come from ResourceClaims fits only a template node
    whose driver's ResourceSlices can satisfy the claims (CA simulates the template's slices), and claims share a
    new node's devices as the allocator packs them. The old subset saw a pod requesting only CPU, bought CPU nodes
    that could never run it, and the pods stayed Pending."""
    from dra_builders import claim_pod, gpu_claim

    cpu = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "aaa-cpu"},
           "spec": {"machineType": "n2-standard-8", "zones": ["us-central1-a"],
                    "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4}}}
    objs = [make_scenario("30m").obj(), _dra_pool(), cpu]
    for i in range(pods):
        objs += [gpu_claim(f"c{i}", gpus).obj(), owned(claim_pod(f"w{i}", f"c{i}").duration("1h").obj())]
    r = run(objects=objs)
    added = added_nodes(r)
    assert not any("aaa-cpu" in n for n in added), added
    assert len(added) == nodes and all("h100" in n for n in added), added
    assert r.summary["pods"]["by_phase"] == {"Running": pods}


def test_scale_down_keeps_a_node_whose_pod_anti_affinity_forbids_the_other_node() -> None:
    """Scale-down's drain simulation runs InterPodAffinity: web-1 on an underused node could fit the other node's
    free room, but web-0 there repels it (hostname anti-affinity), so its node is not removed. Without the
    anti-affinity the node is removed after the unneeded time."""
    def scenario(anti: bool) -> list[dict]:
        a = pool("pool-a", "a", "cpu", lo=0, hi=2, nodes=2)
        a["spec"]["bootDelay"] = "0s"
        pods = pods_for("cpu", "a", n=2, prefix="web-")
        for i, p in enumerate(pods):
            p["metadata"]["annotations"] = {"kubetwin.io/create-at": f"{30 + i}s"}
            if anti:
                _anti(p)
        return [make_scenario("40m").obj(), a, *pods]

    def deleted(r) -> list[str]:
        return [o["metadata"]["name"] for _, _, etype, o in r.history if o["kind"] == "Node" and etype == "DELETED"]

    r = run(objects=scenario(anti=True))
    bound = {o["spec"].get("nodeName") for _, _, _, o in r.history if o["kind"] == "Pod"} - {None}
    assert len(bound) == 2 and deleted(r) == []
    assert len(deleted(run(objects=scenario(anti=False)))) == 1

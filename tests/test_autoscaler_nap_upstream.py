"""Upstream cluster autoscaler cases for node auto-provisioning and the cluster's resource limits, ported as table
tests against the twin's NAP (autoscaler/nap.py) and its cluster autoscaler: same inputs, same decision (which pool
is created, how many nodes, which pods stay Pending and with which reason). Facts carry over, not code: upstream's
millicore/byte test nodes become GKE machines of the same ratios, its node groups NodePools.

Sources (each case names its test):
- RM: kubernetes/autoscaler cluster-autoscaler/core/scaleup/resource/manager_test.go
  @068ce782723fb71e554e0edc1eab58ad9e2c4dae (TestDeltaForNode, TestResourcesLeft, TestApplyLimits,
  TestCheckDeltaWithinLimits, TestResourceManagerWithGpuResource)
- OR: kubernetes/autoscaler cluster-autoscaler/core/scaleup/orchestrator/orchestrator_test.go
  @2fc0cb0ab57c0928896d8327a3e8e63613c2f32c (TestCheckDeltaWithinLimits, TestScaleUpAutoprovisionedNodeGroup,
  TestScaleUpBalanceAutoprovisionedNodeGroups, TestNoCreateNodeGroupMaxCoresLimitHit, TestNoScaleUpMaxCoresLimitHit,
  TestScaleUpMaxCoresLimitHit[WithNotAutoscaledGroup], TestScaleUpMaxMemoryLimitHit[WithNotAutoscaledGroup],
  TestZeroOrMaxNodeScaling "Atomic ScaleUp max cores/memory limit hit")
- GKE: GoogleCloudPlatform/cluster-autoscaler (GKE's fork) pkg/autoprovisioning/gpu_requests_test.go
  @7d250507339b3a7583b380349f217ea191ff15ff (TestAutoprovisioningNodeGroupManager_gpuRequestsForPod, the A100
  rows: the machine is the one with enough GPUs for the pod's GPUs, CPUs and memory; TestGpuPodsRequirements
  "pod requesting a GPU without a limit defined", "pod requesting an unsupported GPU")
"""

from __future__ import annotations

import pytest
from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.autoscaler import nap
from kubetwin.runner import run

RM = "core/scaleup/resource/manager_test.go@068ce782"
OR = "core/scaleup/orchestrator/orchestrator_test.go@2fc0cb0a"
GKE = "GoogleCloudPlatform/cluster-autoscaler pkg/autoprovisioning/gpu_requests_test.go@7d250507"
POOL = "cloud.google.com/gke-nodepool"
ACCEL = "cloud.google.com/gke-accelerator"
BIG = [{"resourceType": "cpu", "maximum": 100000}, {"resourceType": "memory", "maximum": 100000}]


def node(cpu: int, mem_gib: int, gpus: int = 0) -> dict:
    """A node as the resource manager sees it (capacity; a GPU node's accelerator label)."""
    labels = {ACCEL: "nvidia-tesla-a100"} if gpus else {}
    cap = {"cpu": str(cpu), "memory": f"{mem_gib}Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"metadata": {"name": "n", "labels": labels}, "status": {"capacity": cap}}


# -- the resource manager ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "cpu", "mem", "want"), [
    (f"{RM} TestDeltaForNode ng1", 8, 16, {"cpu": 8, "memory": 16}),
    (f"{RM} TestDeltaForNode ng2", 4, 32, {"cpu": 4, "memory": 32}),
])
def test_delta_for_node(case: str, cpu: int, mem: int, want: dict) -> None:
    assert nap.node_usage(node(cpu, mem)) == want, case


@pytest.mark.parametrize(("case", "size", "cpu", "mem", "want"), [
    (f"{RM} TestResourcesLeft ng1", 5, 8, 16, {"cpu": 960, "memory": 920}),
    (f"{RM} TestResourcesLeft ng2", 100, 4, 8, {"cpu": 600, "memory": 200}),
])
def test_resources_left(case: str, size: int, cpu: int, mem: int, want: dict) -> None:
    usage = nap.scaled(nap.node_usage(node(cpu, mem)), size)
    assert nap.resources_left({"cpu": 1000, "memory": 1000}, usage) == want, case


def test_resources_left_maximum_zero_is_no_limit() -> None:
    """Upstream ResourcesLeft keeps "only actual limits" (max > 0)."""
    assert nap.resources_left({"cpu": 0, "memory": 10}, {"cpu": 5, "memory": 12}) == {"memory": 0}


@pytest.mark.parametrize(("case", "left", "want"), [
    (f"{RM} TestApplyLimits ng1", {"cpu": 80, "memory": 160}, 10),
    (f"{RM} TestApplyLimits ng2 (memory: 100 / 16)", {"cpu": 80, "memory": 100}, 6),
    (f"{RM} TestApplyLimits ng3 (cpu: 39 / 8)", {"cpu": 39, "memory": 160}, 4),
    (f"{RM} TestApplyLimits ng4 (cpu and memory)", {"cpu": 40, "memory": 80}, 5),
])
def test_apply_limits(case: str, left: dict, want: int) -> None:
    assert nap.apply_limits(10, left, nap.node_usage(node(8, 16))) == want, case


@pytest.mark.parametrize(("case", "left", "delta", "want"), [
    (f"{RM} TestCheckDeltaWithinLimits #1", {"cpu": 10, "memory": 20}, {"cpu": 8, "memory": 16}, []),
    (f"{RM} TestCheckDeltaWithinLimits #2", {"cpu": 10, "memory": 20}, {"cpu": 12, "memory": 16}, ["cpu"]),
    (f"{RM} TestCheckDeltaWithinLimits #3", {"cpu": 10, "memory": 20}, {"cpu": 8, "memory": 32}, ["memory"]),
    (f"{RM} TestCheckDeltaWithinLimits #4", {"cpu": 10, "memory": 20}, {"cpu": 16, "memory": 96},
     ["cpu", "memory"]),
    (f"{OR} TestCheckDeltaWithinLimits #1 (equal is within)", {"a": 10}, {"a": 10}, []),
    (f"{OR} TestCheckDeltaWithinLimits #2", {"a": 10}, {"a": 11}, ["a"]),
    (f"{OR} TestCheckDeltaWithinLimits #3 (unlimited resource)", {"a": 10}, {"b": 10}, []),
    (f"{OR} TestCheckDeltaWithinLimits #6 (sorted)", {"a": 10, "b": 20, "c": 30}, {"a": 11, "b": 20, "c": 31},
     ["a", "c"]),
])
def test_check_delta_within_limits(case: str, left: dict, delta: dict, want: list) -> None:
    assert nap.exceeded(left, delta) == want, case


def test_resource_manager_with_gpu_resource() -> None:
    """RM TestResourceManagerWithGpuResource: one 8-core 16-GiB node with 4 GPUs against 320 / 640 / 16."""
    delta = nap.node_usage(node(8, 16, gpus=4))
    assert delta == {"cpu": 8, "memory": 16, "nvidia-tesla-a100": 4}
    left = nap.resources_left({"cpu": 320, "memory": 640, "nvidia-tesla-a100": 16}, delta)
    assert left == {"cpu": 312, "memory": 624, "nvidia-tesla-a100": 12}
    assert nap.exceeded(left, delta) == []
    assert nap.apply_limits(10, left, delta) == 3  # GPUs left / GPUs per node: 12 / 4


def test_limit_reason_words() -> None:
    """skippedreasons.go NewMaxResourceLimitReached over CheckDeltaWithinLimits' sorted list; the words GKE logs
    as no.scale.up.mig.skipped's parameter ("max cluster cpu limit reached")."""
    assert nap.limit_reason(["memory", "cpu"]) == "max cluster cpu, memory limit reached"
    assert nap.limit_reason(["cpu"]) == "max cluster cpu limit reached"


# -- the orchestrator, on GKE pools ---------------------------------------------------------------------------------
def limits(cpu: int, memory: int, **more: int) -> list[dict]:
    return [{"resourceType": "cpu", "maximum": cpu}, {"resourceType": "memory", "maximum": memory},
            *[{"resourceType": k, "maximum": v} for k, v in more.items()]]


def pod(name: str, cpu: str, pool: str | None = None, memory: str | None = None, duration: str = "2h",
        at: str | None = None) -> dict:
    w = make_pod(name).cpu(cpu).duration(duration)
    p = (w.create_at(at) if at else w).obj()
    if memory:
        p["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory
    if pool:
        p["spec"]["nodeSelector"] = {POOL: pool}
    return p


def two_groups(ng2_autoscaled: bool = True) -> list[dict]:
    """OR's n1 (ng1, the small machine) and n2 (ng2, twice its size), each full with a running pod (the new pods
    come at 5m, once both nodes are up)."""
    ng1 = make_pool("ng1", "e2-standard-2", 1).autoscaling(1, 10).obj()
    ng2 = make_pool("ng2", "e2-standard-4", 1)
    if ng2_autoscaled:
        ng2 = ng2.autoscaling(1, 10)
    return [ng1, ng2.obj(), pod("p1", "1500m", "ng1"), pod("p2", "3500m", "ng2")]


def not_triggered(r) -> dict[str, str]:
    return {e.event["involvedObject"]["name"]: e.message for e in r.recorded_events("NotTriggerScaleUp")}


def triggered(r) -> set[str]:
    return {e.event["involvedObject"]["name"] for e in r.recorded_events("TriggeredScaleUp")}


def ups(r) -> list[tuple[str, int, int]]:
    return [(u["group"].split("/")[0], u["from"], u["to"]) for u in r.summary["cluster_autoscaler"]["scale_ups"]]


def created(r) -> list[dict]:
    return [o["spec"] for t, _, etype, o in r.history if o.get("kind") == "NodePool" and etype == "ADDED" and t > 0]


@pytest.mark.parametrize(("case", "ng2_autoscaled", "cap", "new_pods", "want_to"), [
    # cores 9: 2 + 4 used, 3 left: two new 2-core ng1 nodes capped to one; both pods triggered it
    (f"{OR} TestScaleUpMaxCoresLimitHit", True, limits(9, 1000), 2, 2),
    (f"{OR} TestScaleUpMaxCoresLimitHitWithNotAutoscaledGroup", False, limits(9, 1000), 2, 2),
    # memory 40 GiB: 8 + 16 used, 16 left: three new 8-GiB ng1 nodes capped to two
    (f"{OR} TestScaleUpMaxMemoryLimitHit", True, limits(1000, 40), 3, 3),
    (f"{OR} TestScaleUpMaxMemoryLimitHitWithNotAutoscaledGroup", False, limits(1000, 40), 3, 3),
])
def test_scale_up_capped_by_limit(case: str, ng2_autoscaled: bool, cap: list, new_pods: int, want_to: int) -> None:
    """The chosen option is capped (ApplyLimits) and still counts every pod it was chosen for; a node of a pool
    without autoscaling counts against the limits too."""
    news = [pod(f"p-new-{i}", "1500m", "ng1", at="5m") for i in range(1, new_pods + 1)]
    r = run(objects=[make_scenario("30m").spec(clusterAutoscaling={"resourceLimits": cap}).obj(),
                     *two_groups(ng2_autoscaled), *news])
    assert ups(r)[0] == ("ng1", 1, want_to), case
    assert triggered(r) >= {p["metadata"]["name"] for p in news}, case
    # later loops: ng1 is at the limit and skipped (so is ng2 when it autoscales), and the pod left over says so
    resource = "cpu" if cap[0]["maximum"] < 1000 else "memory"
    left_over = {k: v for k, v in not_triggered(r).items() if k.startswith("p-new")}
    assert left_over == {f"p-new-{new_pods}": f"pod didn't trigger scale-up: {2 if ng2_autoscaled else 1} max "
                                              f"cluster {resource} limit reached"}, case


def test_no_scale_up_max_cores_limit_hit() -> None:
    """OR TestNoScaleUpMaxCoresLimitHit: cores 7 and memory just above what the two nodes have: both groups are
    skipped before simulation, and each pending pod's event counts both."""
    r = run(objects=[make_scenario("20m").spec(clusterAutoscaling={"resourceLimits": limits(7, 25)}).obj(),
                     *two_groups(), pod("p-new-1", "1", at="5m"), pod("p-new-2", "1", at="5m")])
    assert "scale_ups" not in r.summary.get("cluster_autoscaler", {}) or not ups(r)
    assert not_triggered(r) == {f"p-new-{i}": "pod didn't trigger scale-up: 2 max cluster cpu, memory limit reached"
                                for i in (1, 2)}
    skipped = [w for w in r.summary["cluster_autoscaler"]["autoprovisioning"]["no_scale_up"]
               if w["messageId"] == nap.MIG_SKIPPED]
    assert {(w["mig"]["nodepool"], w["parameters"][0]) for w in skipped} == {
        ("ng1", "max cluster cpu, memory limit reached"), ("ng2", "max cluster cpu, memory limit reached")}


def test_no_create_node_group_max_cores_limit_hit() -> None:
    """OR TestNoCreateNodeGroupMaxCoresLimitHit: NAP on, cores 7, one 2-core group; a pod only an 8-core machine
    takes: no pool is created and the event names the existing group's reason only (the pool that would be created
    does not exist); GKE's log names the zone."""
    scenario = make_scenario("20m").spec(clusterAutoscaling={"enableNodeAutoprovisioning": True,
                                                             "resourceLimits": limits(7, 100000)}).obj()
    small = make_pool("ng-small", "e2-standard-2", 1).autoscaling(1, 10).obj()
    r = run(objects=[scenario, small, pod("large-pod", "6")])
    assert created(r) == [] and r.summary["pods"]["by_phase"] == {"Pending": 1}
    assert not_triggered(r) == {"large-pod": "pod didn't trigger scale-up: 1 Insufficient cpu"}
    reasons = r.summary["cluster_autoscaler"]["autoprovisioning"]["no_scale_up"]
    assert {(w["messageId"], tuple(w["parameters"])) for w in reasons} == {
        (nap.NAP_RESOURCES_EXCEEDED, ("us-central1-a",))}


@pytest.mark.parametrize(("case", "cap", "reason"), [
    (f"{OR} TestZeroOrMaxNodeScaling 'Atomic ScaleUp max cores limit hit'", limits(300, 100000), "cpu"),
    (f"{OR} TestZeroOrMaxNodeScaling 'Atomic ScaleUp max memory limit hit'", limits(100000, 500), "memory"),
])
def test_atomic_slice_past_a_limit_is_skipped_whole(case: str, cap: list, reason: str) -> None:
    """A multi-host TPU slice (4 x ct5lp-hightpu-4t: 112 vCPU, 192 GiB each) scales whole: one host fits the limit,
    the slice does not, so nothing is added and the pods stay Pending."""
    tpu = make_pool("v5e", "ct5lp-hightpu-4t", 0).autoscaling(0, 4).spec(
        placementPolicy={"tpuTopology": "4x4"}).obj()
    tpu["spec"].pop("nodeCount")
    pods = []
    for i in range(2):
        p = pod(f"p-new-{i}", "1")
        p["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
        pods.append(p)
    r = run(objects=[make_scenario("20m").spec(clusterAutoscaling={"resourceLimits": cap}).obj(), tpu, *pods])
    assert not r.summary.get("cluster_autoscaler", {}).get("scale_ups"), case
    assert not_triggered(r) == {p["metadata"]["name"]: f"pod didn't trigger scale-up: 1 max cluster {reason} "
                                "limit reached" for p in pods}, case


def test_scale_up_autoprovisioned_node_group() -> None:
    """OR TestScaleUpAutoprovisionedNodeGroup: no pools, NAP on, one small pod: one pool created, grown by 1."""
    scenario = make_scenario("30m").spec(clusterAutoscaling={"enableNodeAutoprovisioning": True,
                                                             "resourceLimits": BIG}).obj()
    r = run(objects=[scenario, pod("p1", "80m", duration="10m")])
    (spec,) = created(r)
    assert spec["machineType"] == "e2-standard-2"  # GKE's default E2 series, cheapest that fits
    assert [(f, t) for _, f, t in ups(r)] == [(0, 1)]
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 1}


def test_scale_up_balance_autoprovisioned_node_groups() -> None:
    """OR TestScaleUpBalanceAutoprovisionedNodeGroups: three pods, one per node, NAP on with three locations:
    one pool created (its MIGs are the similar groups) and one node added in each zone."""
    zones = ["us-central1-a", "us-central1-b", "us-central1-c"]
    scenario = make_scenario("30m").spec(clusterAutoscaling={
        "enableNodeAutoprovisioning": True, "resourceLimits": BIG, "autoprovisioningLocations": zones}).obj()
    r = run(objects=[scenario, *[pod(f"p{i}", "1500m", duration="10m") for i in (1, 2, 3)]])
    (spec,) = created(r)
    assert spec["zones"] == zones and spec["machineType"] == "e2-standard-2"
    grown = sorted((u["group"], u["from"], u["to"]) for u in r.summary["cluster_autoscaler"]["scale_ups"])
    assert [(g.split("/")[1], f, t) for g, f, t in grown] == [(z, 0, 1) for z in zones]
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 3}


# -- GKE's fork: which accelerator machine a GPU pod gets ------------------------------------------------------------
@pytest.mark.parametrize(("case", "gpus", "cpu", "memory", "machine"), [
    (f"{GKE} '1 a100 GPU request'", 1, "1", "1Gi", "a2-highgpu-1g"),
    (f"{GKE} '1 a100 GPU request with high memory'", 1, "1", "96Gi", "a2-highgpu-2g"),
    (f"{GKE} '1 a100 GPU request with significant number of CPUs'", 1, "8", "1Gi", "a2-highgpu-1g"),
    (f"{GKE} '1 a100 GPU request with many CPUs'", 1, "16", "1Gi", "a2-highgpu-2g"),
    (f"{GKE} '1 a100 GPU request with many CPUs and high memory'", 1, "16", "96Gi", "a2-highgpu-2g"),
    (f"{GKE} '4 a100 GPU request with many CPUs and high memory'", 4, "16", "96Gi", "a2-highgpu-4g"),
    (f"{GKE} '7 a100 GPU request with many CPUs'", 7, "40", "1Gi", "a2-highgpu-8g"),
    (f"{GKE} '12 a100 GPU request with very high memory'", 12, "8", "600Gi", "a2-megagpu-16g"),
])
def test_gpu_request_picks_the_machine(case: str, gpus: int, cpu: str, memory: str, machine: str) -> None:
    p = make_pod("p").gpus(gpus).cpu(cpu).duration("10m").obj()
    p["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory
    p["spec"]["nodeSelector"] = {ACCEL: "nvidia-tesla-a100"}
    scenario = make_scenario("1h").spec(clusterAutoscaling={
        "enableNodeAutoprovisioning": True, "resourceLimits": [*BIG, {"resourceType": "nvidia-tesla-a100",
                                                                       "maximum": 16}]}).obj()
    r = run(objects=[scenario, p])
    assert [s["machineType"] for s in created(r)] == [machine], case
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 1}, case


@pytest.mark.parametrize(("case", "gpu", "message_id"), [
    (f"{GKE} TestGpuPodsRequirements 'pod requesting a GPU without a limit defined'", "nvidia-l4",
     nap.NAP_GPU_NO_LIMIT),
    (f"{GKE} TestGpuPodsRequirements 'pod requesting an unsupported GPU'", "unsupported-gpu",
     nap.NAP_GPU_NOT_SUPPORTED),
])
def test_gpu_pod_without_a_limit_gets_no_pool(case: str, gpu: str, message_id: str) -> None:
    p = make_pod("p").gpus(1).cpu("1").duration("10m").obj()
    p["spec"]["nodeSelector"] = {ACCEL: gpu}
    scenario = make_scenario("20m").spec(clusterAutoscaling={"enableNodeAutoprovisioning": True,
                                                             "resourceLimits": BIG}).obj()
    r = run(objects=[scenario, p])
    assert created(r) == [] and r.summary["pods"]["by_phase"] == {"Pending": 1}, case
    (why,) = r.summary["cluster_autoscaler"]["autoprovisioning"]["no_scale_up"]
    assert (why["messageId"], why["parameters"]) == (message_id, [gpu]), case

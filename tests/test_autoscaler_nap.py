"""GKE node auto-provisioning in the cluster autoscaler twin (autoscaler/nap.py): the pool created for a pod no pool
fits (machine from the pod's GPU selector and request), the cluster's resource limits and the pod's
NotTriggerScaleUp when a scale-up would pass one, the empty pool's deletion, ComputeClass nodePoolAutoCreation, and
node auto-provisioning off leaving today's behaviour.

GKE's behaviour: https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning; the limit's reason
is upstream CA's (core/scaleup/orchestrator/skippedreasons.go: NewMaxResourceLimitReached, "max cluster %s limit
reached"). Upstream's own cases, ported: tests/test_autoscaler_nap_upstream.py.
"""

from __future__ import annotations

import pytest
from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.api import twin
from kubetwin.api.twin import ClusterAutoscaling
from kubetwin.autoscaler import nap
from kubetwin.runner import run

ACCEL = "cloud.google.com/gke-accelerator"
CLASS = "cloud.google.com/compute-class"
LIMITS = [{"resourceType": "cpu", "maximum": 1000}, {"resourceType": "memory", "maximum": 10000}]


def nap_scenario(duration: str = "2h", limits: list[dict] | None = None, **spec) -> dict:
    return make_scenario(duration).spec(clusterAutoscaling={
        "enableNodeAutoprovisioning": True, "resourceLimits": LIMITS + (limits or [])}, **spec).obj()


def gpu_pod(name: str, gpu: str = "nvidia-l4", count: int = 1, duration: str = "30m") -> dict:
    pod = make_pod(name).gpus(count).cpu("1").duration(duration).obj()
    pod["spec"]["nodeSelector"] = {ACCEL: gpu}
    return pod


def pools_created(r) -> list[tuple[float, str, dict]]:
    """(t, name, spec) of every NodePool the run's history created after t=0."""
    return [(t, o["metadata"]["name"], o["spec"]) for t, _, etype, o in r.history
            if o.get("kind") == "NodePool" and etype == "ADDED" and t > 0]


def events(r, reason: str) -> list[tuple[str, str]]:
    return [(o["involvedObject"]["name"], o["message"]) for _, _, etype, o in r.history
            if o.get("kind") == "Event" and o.get("reason") == reason and etype == "ADDED"]


@pytest.mark.parametrize(("gpu", "count", "machine"), [
    ("nvidia-l4", 1, "g2-standard-4"),        # the cheapest G2 with one L4
    ("nvidia-l4", 2, "g2-standard-24"),       # the only G2 with two
    ("nvidia-h100-80gb", 8, "a3-highgpu-8g"),  # A3 High, not A3 Edge
    ("nvidia-tesla-a100", 4, "a2-highgpu-4g"),
])
def test_gpu_pod_gets_a_pool_of_the_machine_it_asks_for_and_runs(gpu: str, count: int, machine: str) -> None:
    r = run(objects=[nap_scenario(limits=[{"resourceType": gpu, "maximum": 64}]), gpu_pod("p", gpu, count)])
    created = pools_created(r)
    assert len(created) == 1
    t, name, spec = created[0]
    assert t == 10.0 and name.startswith(f"nap-{machine}-") and spec["machineType"] == machine
    assert spec["autoscaling"]["minNodeCount"] == 0
    nodes = [(t, o) for t, _, etype, o in r.history if o.get("kind") == "Node" and etype == "ADDED"]
    # pool creation (60 s, twin assumption) then the VM's boot (90 s) after the 10 s scan
    assert nodes and nodes[0][0] == 10.0 + nap.POOL_CREATION + 90.0
    assert nodes[0][1]["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == name
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 1}
    assert r.summary["cluster_autoscaler"]["autoprovisioning"]["created"][0]["pool"] == name
    assert r.summary["cost"]["by_pool"][name] > 0  # billed under the created pool


def test_scale_up_past_the_resource_limit_leaves_the_pod_pending_with_the_reason() -> None:
    """Two 1-L4 pods, the cluster's nvidia-l4 maximum 1: one node, the other pod stays Pending."""
    r = run(objects=[nap_scenario("1h", limits=[{"resourceType": "nvidia-l4", "maximum": 1}]),
                     gpu_pod("a", duration="2h"), gpu_pod("b", duration="2h")])
    grown = [(u["group"].split("/")[0], u["to"]) for u in r.summary["cluster_autoscaler"]["scale_ups"]]
    assert len(grown) == 1 and grown[0][1] == 1
    msgs = dict(events(r, "NotTriggerScaleUp"))
    assert msgs == {"b": "pod didn't trigger scale-up: 1 max cluster nvidia-l4 limit reached"}
    assert r.summary["pods"]["by_phase"] == {"Running": 1, "Pending": 1}


def test_cpu_limit_counts_the_cluster_nodes() -> None:
    """A 6-core maximum: a 4-vCPU E2 node fits, a second does not (upstream counts node capacity)."""
    scenario = make_scenario("1h").spec(clusterAutoscaling={"enableNodeAutoprovisioning": True, "resourceLimits": [
        {"resourceType": "cpu", "maximum": 6}, {"resourceType": "memory", "maximum": 100}]}).obj()
    pods = [make_pod(f"p{i}").cpu("3").duration("2h").obj() for i in range(2)]
    r = run(objects=[scenario, *pods])
    (created,) = pools_created(r)
    assert created[2]["machineType"] == "e2-standard-4"
    assert dict(events(r, "NotTriggerScaleUp")) == {"p1": "pod didn't trigger scale-up: 1 max cluster cpu limit "
                                                          "reached"}


def test_empty_auto_created_pool_is_deleted() -> None:
    r = run(objects=[nap_scenario("2h", limits=[{"resourceType": "nvidia-l4", "maximum": 4}]),
                     gpu_pod("p", duration="10m")])
    (created,) = pools_created(r)
    ca = r.summary["cluster_autoscaler"]
    (down,) = ca["scale_downs"]
    (deleted,) = ca["autoprovisioning"]["deleted"]
    assert deleted["pool"] == created[1] and deleted["t"] == down["t"] + nap.EMPTY_POOL_TTL
    gone = [t for t, _, etype, o in r.history if o.get("kind") == "NodePool" and etype == "DELETED"]
    assert gone == [deleted["t"]]


def test_node_auto_provisioning_off_creates_no_pool() -> None:
    """The default: the pod stays Pending, no pool, the autoscaler idle (no section in summary.json)."""
    r = run(objects=[make_scenario("1h").obj(), gpu_pod("p")])
    assert pools_created(r) == [] and "cluster_autoscaler" not in r.summary
    assert r.summary["pods"]["by_phase"] == {"Pending": 1}


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "google.com/tpu"])
def test_pod_without_an_accelerator_type_selector_gets_no_pool(resource: str) -> None:
    """GKE auto-provisions GPUs and TPUs for pods that name the type (gke-accelerator, gke-tpu-accelerator); a bare
    accelerator request gets no pool, and no candidate pools are weighed for it (a TPU request used to get every
    E2 machine as a candidate)."""
    pod = make_pod("p").cpu("1").duration("10m").obj()
    pod["spec"]["containers"][0]["resources"]["limits"] = {resource: "1"}
    spec = ClusterAutoscaling(enableNodeAutoprovisioning=True, resourceLimits=LIMITS)
    assert nap.NodeAutoprovisioning(None, spec).candidates(pod) == []  # type: ignore[arg-type]
    r = run(objects=[nap_scenario("30m"), pod])
    assert pools_created(r) == [] and r.summary["pods"]["by_phase"] == {"Pending": 1}


def test_a_pool_is_tainted_only_for_what_the_pod_tolerates_by_the_toleration_rule() -> None:
    """A selector label the pod also tolerates becomes the pool's taint (k8s.taints' rule): an Equal toleration of
    another value, or of another operator, does not."""
    spec = ClusterAutoscaling(enableNodeAutoprovisioning=True, resourceLimits=LIMITS)
    auto = nap.NodeAutoprovisioning(None, spec)  # type: ignore[arg-type]

    def taints(tolerations: list[dict]) -> list:
        pod = make_pod("p").cpu("1").obj()
        pod["spec"]["nodeSelector"] = {"team": "a"}
        pod["spec"]["tolerations"] = tolerations
        return auto.candidates(pod)[0]["spec"].get("taints") or []

    assert taints([{"key": "team", "operator": "Equal", "value": "a", "effect": "NoExecute"}]) == [
        {"key": "team", "value": "a", "effect": "NoExecute"}]
    assert taints([{"key": "team", "operator": "Exists"}]) == [{"key": "team", "value": "a", "effect": "NoSchedule"}]
    assert taints([{"key": "team", "operator": "Equal", "value": "b"}]) == []
    assert taints([{"key": "team", "operator": "Gt", "value": "a"}]) == []


def test_compute_class_auto_creation_takes_the_first_available_rule() -> None:
    """nodePoolAutoCreation without cluster NAP: rule 1 (Spot g2-standard-4) first; its zone has none, so the
    resize fails, the pool backs off and the next loop creates rule 2's on-demand pool; both carry the class's label
    and taint."""
    scenario = make_scenario("2h").spec(capacity=[{"zone": "us-central1-a", "machineType": "g2-standard-4",
                                                   "spot": True, "available": 0}]).obj()
    klass = {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "c"},
             "spec": {"priorities": [{"machineType": "g2-standard-4", "spot": True},
                                     {"machineType": "g2-standard-4"}],
                      "nodePoolAutoCreation": {"enabled": True}}}
    pod = make_pod("p").gpus(1).cpu("1").duration("20m").obj()
    pod["spec"]["nodeSelector"] = {CLASS: "c"}
    r = run(objects=[scenario, klass, pod])
    created = pools_created(r)
    assert [(c[2]["machineType"], bool(c[2].get("spot"))) for c in created] == [("g2-standard-4", True),
                                                                                ("g2-standard-4", False)]
    assert created[0][0] == 10.0 and created[1][0] > created[0][0]
    for _, _, spec in created:
        assert spec["labels"][CLASS] == "c"
        assert {"key": CLASS, "value": "c", "effect": "NoSchedule"} in spec["taints"]
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 1}
    rules = r.summary["compute_classes"]["c"]["rules"]
    assert rules["priorities[1]"]["pods_started"] == 1


def test_compute_class_without_auto_creation_creates_nothing() -> None:
    klass = {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "c"},
             "spec": {"priorities": [{"machineFamily": "g2"}]}}
    pod = make_pod("p").gpus(1).cpu("1").duration("20m").obj()
    pod["spec"]["nodeSelector"] = {CLASS: "c"}
    r = run(objects=[nap_scenario("30m"), klass, pod])
    assert pools_created(r) == []


def test_enabling_needs_cpu_and_memory_limits() -> None:
    with pytest.raises(ValueError, match="--max-cpu and --max-memory"):
        twin.ClusterAutoscaling(enableNodeAutoprovisioning=True,
                                resourceLimits=[{"resourceType": "cpu", "maximum": 8}])  # type: ignore[list-item]
    assert not twin.ClusterAutoscaling().enableNodeAutoprovisioning


def test_limit_reason_words() -> None:
    assert nap.limit_reason(["cpu", "memory"]) == "max cluster cpu, memory limit reached"


@pytest.mark.parametrize(("topology", "hosts"), [("2x2", 1), ("4x4", 4)])
def test_tpu_pod_gets_a_slice_pool_of_its_topology(topology: str, hosts: int) -> None:
    """gke-tpu-accelerator + gke-tpu-topology + google.com/tpu: a v6e pool of that topology; a multi-host topology
    is one slice, scaled up whole."""
    pod = make_pod("p").cpu("1").duration("10m").obj()
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": topology}
    pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
    r = run(objects=[nap_scenario("1h", limits=[{"resourceType": "tpu-v6e-slice", "maximum": 64}]), pod])
    (created,) = pools_created(r)
    assert created[2]["machineType"] == "ct6e-standard-4t"
    assert created[2]["placementPolicy"] == {"tpuTopology": topology}
    (up,) = r.summary["cluster_autoscaler"]["scale_ups"]
    assert (up["from"], up["to"], up["granted"]) == (0, hosts, hosts)
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 1}


def test_tpu_slice_past_the_chip_limit_is_not_created() -> None:
    """A 4-host slice (16 chips) against a 8-chip maximum: atomic, so nothing is created."""
    pod = make_pod("p").cpu("1").duration("10m").obj()
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "4x4"}
    pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
    r = run(objects=[nap_scenario("30m", limits=[{"resourceType": "tpu-v6e-slice", "maximum": 8}]), pod])
    assert pools_created(r) == []
    # the pool that would be created does not exist: upstream's event names no reason for it; GKE's visibility
    # log says no.scale.up.nap.pod.zonal.resources.exceeded for the zone
    assert dict(events(r, "NotTriggerScaleUp")) == {"p": "pod didn't trigger scale-up:"}
    (why,) = r.summary["cluster_autoscaler"]["autoprovisioning"]["no_scale_up"]
    assert (why["messageId"], why["parameters"], why["pod"]) == (nap.NAP_RESOURCES_EXCEEDED, ["us-central1-a"],
                                                                 "default/p")


def test_example_answers() -> None:
    """examples/node-auto-provisioning.yaml gives what docs/autoscaler.md says."""
    from pathlib import Path

    r = run([Path(__file__).resolve().parents[1] / "examples" / "node-auto-provisioning.yaml"])
    ca = r.summary["cluster_autoscaler"]
    assert ca["autoprovisioning"] == {
        "created": [{"t": 10.0, "pool": "nap-g2-standard-4-f5dc5d67", "machineType": "g2-standard-4", "pods": 2}],
        "deleted": [{"t": 3940.0, "pool": "nap-g2-standard-4-f5dc5d67"}],
        # GKE's visibility reasons: the L4 pool skipped at the limit, and no other G2 pool created for the late pod
        "no_scale_up": [{"t": 310.0, "messageId": "no.scale.up.mig.skipped",
                         "parameters": ["max cluster nvidia-l4 limit reached"],
                         "mig": {"nodepool": "nap-g2-standard-4-f5dc5d67", "zone": "us-central1-a"}},
                        {"t": 310.0, "messageId": "no.scale.up.nap.pod.zonal.resources.exceeded",
                         "parameters": ["us-central1-a"], "pod": "default/l4-late-7rk2v"}]}
    assert [(u["from"], u["to"]) for u in ca["scale_ups"]] == [(0, 2)]
    assert [d["t"] for d in ca["scale_downs"]] == [2750.0, 3340.0]
    late = [m for n, m in events(r, "NotTriggerScaleUp") if n.startswith("l4-late")]
    assert late == ["pod didn't trigger scale-up: 1 max cluster nvidia-l4 limit reached"]
    assert sorted(row["scheduled"] for row in r.pod_rows) == [340.0, 340.0, 2140.0]
    assert r.summary["cost"]["total_usd"] == 1.13
    from kubetwin.report.headline import autoscaler_rows

    assert dict(autoscaler_rows(r.summary))["cluster autoscaler noScaleUp"] == (
        "no.scale.up.mig.skipped [max cluster nvidia-l4 limit reached]; "
        "no.scale.up.nap.pod.zonal.resources.exceeded [us-central1-a]")


def test_tpu_type_without_a_limit_is_not_auto_provisioned() -> None:
    pod = make_pod("p").cpu("1").duration("10m").obj()
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "2x2"}
    pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
    r = run(objects=[nap_scenario("30m"), pod])
    assert pools_created(r) == []
    (why,) = r.summary["cluster_autoscaler"]["autoprovisioning"]["no_scale_up"]
    assert (why["messageId"], why["parameters"]) == (nap.NAP_TPU_NO_LIMIT, ["tpu-v6e-slice"])


def affinity_pod(name: str, **labels: str) -> dict:
    pod = make_pod(name).cpu("1").duration("10m").obj()
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]}
                                                    for k, v in labels.items()]}]}}}
    return pod


def test_required_node_affinity_names_the_pool_as_a_node_selector_does() -> None:
    """A machine family and a custom label through required node affinity: an N2 pool with the label, and the pod
    runs on it (the affinity matches the new node)."""
    pod = affinity_pod("p", **{"cloud.google.com/machine-family": "n2", "team": "ml"})
    r = run(objects=[nap_scenario("1h"), pod])
    (created,) = pools_created(r)
    assert created[2]["machineType"].startswith("n2-") and created[2]["labels"] == {"team": "ml"}
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 1}


def test_node_affinity_with_two_values_names_no_label() -> None:
    """Twin assumption (nap.required_affinity_labels): `In` with two values names no label, and the default E2 pool
    without it would not take the pod: no pool is created and the pod stays Pending."""
    pod = affinity_pod("p", team="ml")
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["ml", "web"]
    r = run(objects=[nap_scenario("30m"), pod])
    assert pools_created(r) == [] and r.summary["pods"]["by_phase"] == {"Pending": 1}


def test_auto_created_pool_spans_every_autoprovisioning_location() -> None:
    """autoprovisioningLocations a and b: the pool has both zones (one MIG each, as GKE's nodePoolCreated events list
    them); two L4 pods get one node in each zone (BALANCED)."""
    zones = ["us-central1-a", "us-central1-b"]
    scenario = nap_scenario("1h", limits=[{"resourceType": "nvidia-l4", "maximum": 4}])
    scenario["spec"]["clusterAutoscaling"]["autoprovisioningLocations"] = zones
    r = run(objects=[scenario, gpu_pod("a"), gpu_pod("b")])
    (created,) = pools_created(r)
    assert created[2]["zones"] == zones
    grown = sorted((u["group"].split("/")[1], u["from"], u["to"]) for u in r.summary["cluster_autoscaler"]["scale_ups"])
    assert grown == [(zones[0], 0, 1), (zones[1], 0, 1)]


@pytest.mark.parametrize("case", ["fixed", "other-zone", "autoscaled"])
def test_a_pool_of_the_same_machine_stands_in_only_where_it_can_grow(case: str) -> None:
    """A user's g2-standard-4 pool holding one L4 pod, and a second L4 pod for zone a: without autoscaling (it cannot
    grow) or autoscaled only in zone b, NAP creates a pool for the pod, as GKE provisions one for a pod no existing
    pool can be scaled up to fit; autoscaled where NAP would create, it is scaled up and no pool is created."""
    user = make_pool("l4", "g2-standard-4", 1).gpus("nvidia-l4", 1)
    if case != "fixed":
        user.autoscaling(1, 4)
    if case == "other-zone":
        user.spec(zones=["us-central1-b"])
    b = gpu_pod("b", duration="2h")
    b["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] = "us-central1-a"  # where NAP provisions
    r = run(objects=[nap_scenario("1h", limits=[{"resourceType": "nvidia-l4", "maximum": 4}]), user.obj(),
                     gpu_pod("a", duration="2h"), b])
    created = pools_created(r)
    assert r.summary["pods"]["by_phase"] == {"Running": 2}
    if case == "autoscaled":
        assert created == [] and [u["group"].split("/")[0] for u in r.summary["cluster_autoscaler"]["scale_ups"]] == [
            "l4"]
    else:
        (pool,) = created
        assert pool[1].startswith("nap-g2-standard-4-") and pool[2]["zones"] == ["us-central1-a"]


def test_a_second_multi_host_slice_gets_its_own_pool() -> None:
    """Four pods on v6e 2x4 slices (2 hosts of 4 chips each; each pod takes a host's 4 chips): they need two
    slices. A slice pool holds one slice and cannot grow past it, so it does not stand in for the second: GKE
    creates a node pool per multi-host slice."""
    pods = []
    for i in range(4):
        pod = make_pod(f"w{i}").cpu("1").duration("30m").obj()
        pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                       "cloud.google.com/gke-tpu-topology": "2x4"}
        pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
        pods.append(pod)
    r = run(objects=[nap_scenario("2h", limits=[{"resourceType": "tpu-v6e-slice", "maximum": 64}]), *pods])
    created = pools_created(r)
    assert len(created) == 2 and len({name for _, name, _ in created}) == 2
    assert created[1][1] == created[0][1] + "-2"  # the same configuration: GKE's name, made unique
    assert all(spec["placementPolicy"] == {"tpuTopology": "2x4"} for _, _, spec in created)
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 4}


def test_a_pool_at_its_max_size_does_not_stand_in() -> None:
    """A user's autoscaled g2-standard-4 pool at its maximum (1) and a second L4 pod: that pool cannot be scaled up
    to fit it, so NAP creates a pool (GKE: a pool for a pod no existing pool can be scaled up to fit)."""
    user = make_pool("l4", "g2-standard-4", 1).gpus("nvidia-l4", 1).autoscaling(1, 1)
    user.spec(zones=["us-central1-a"])
    r = run(objects=[nap_scenario("1h", limits=[{"resourceType": "nvidia-l4", "maximum": 4}]), user.obj(),
                     gpu_pod("a", duration="2h"), gpu_pod("b", duration="2h")])
    (pool,) = pools_created(r)
    assert pool[1].startswith("nap-g2-standard-4-")
    assert r.summary["pods"]["by_phase"] == {"Running": 2}


def test_gpu_type_without_a_limit_is_not_auto_provisioned() -> None:
    """GKE's fork (pkg/autoprovisioning/gpu_requests_test.go, "pod requesting a GPU without a limit defined"): no
    pool; GKE logs no.scale.up.nap.pod.gpu.no.limit.defined."""
    r = run(objects=[nap_scenario("30m"), gpu_pod("p")])
    assert pools_created(r) == [] and r.summary["pods"]["by_phase"] == {"Pending": 1}
    (why,) = r.summary["cluster_autoscaler"]["autoprovisioning"]["no_scale_up"]
    assert (why["messageId"], why["parameters"], why["pod"]) == (nap.NAP_GPU_NO_LIMIT, ["nvidia-l4"], "default/p")


def test_scale_up_loop_writes_no_not_triggered_events() -> None:
    """Upstream's eventing processor writes NotTriggerScaleUp only in loops without a scale-up: the pod the limit
    leaves out gets none in the loop that grows the pool for the other, one once the pool is skipped."""
    r = run(objects=[nap_scenario("30m", limits=[{"resourceType": "nvidia-l4", "maximum": 1}]),
                     gpu_pod("a", duration="1h"), gpu_pod("b", duration="1h")])
    times = [(e.first_seen, e.event["involvedObject"]["name"]) for e in r.recorded_events("NotTriggerScaleUp")]
    assert times and all(t > 10.0 and name == "b" for t, name in times)
    # GKE's noScaleUp log likewise: the pool's skip is logged from the first loop that scaled nothing up
    why = r.summary["cluster_autoscaler"]["autoprovisioning"]["no_scale_up"]
    assert why and why[0]["messageId"] == nap.MIG_SKIPPED and why[0]["t"] == times[0][0]


def test_validate_says_nap_pool_defaults_are_not_modelled(tmp_path) -> None:
    from kubetwin.api.loader import load_paths
    from kubetwin.validation.validate import validate

    f = tmp_path / "s.yaml"
    f.write_text("apiVersion: kubetwin.io/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nspec:\n"
                 "  clusterAutoscaling:\n    enableNodeAutoprovisioning: true\n    resourceLimits:\n"
                 "    - {resourceType: cpu, maximum: 8}\n    - {resourceType: memory, maximum: 32}\n"
                 "    autoprovisioningNodePoolDefaults: {diskSizeGb: 100, serviceAccount: sa@p.iam}\n")
    found = validate(load_paths([f]))
    assert [(d.severity, d.field) for d in found] == [
        ("notice", "spec.clusterAutoscaling.autoprovisioningNodePoolDefaults.diskSizeGb"),
        ("notice", "spec.clusterAutoscaling.autoprovisioningNodePoolDefaults.serviceAccount")]
    assert all("not modelled" in d.message and "ignores it" in d.message for d in found)
    bad = tmp_path / "b.yaml"
    bad.write_text(f.read_text().replace("diskSizeGb", "diskSizeGB"))
    assert any(d.severity == "error" for d in validate(load_paths([bad])))


def test_the_next_loop_provisions_for_the_pods_the_last_scale_up_left_out() -> None:
    """Two pending pods no pool helps, of different shapes (a class's and a plain machine family's): a loop creates
    one pool (the autoscaler scales one option per loop); the next loop, 10 s later, creates the other's, as CA
    runs every --scan-interval, rather than waiting until the first pool's node registers."""
    klass = {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "c"},
             "spec": {"priorities": [{"machineFamily": "n2"}], "nodePoolAutoCreation": {"enabled": True}}}
    a = make_pod("a").cpu("2").duration("30m").obj()
    a["spec"]["nodeSelector"] = {CLASS: "c"}
    b = make_pod("b").cpu("2").duration("30m").obj()
    b["spec"]["nodeSelector"] = {"cloud.google.com/machine-family": "n2d"}
    r = run(objects=[nap_scenario("1h"), klass, a, b])
    assert [t for t, _, _ in pools_created(r)] == [10.0, 20.0]

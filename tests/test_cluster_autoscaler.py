"""Cluster autoscaler twin: scale-up with CA's events, max size, expanders, quota and stockout, scale-down,
ProvisioningRequest classes (check-capacity, best-effort-atomic, GKE queued provisioning) and determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.api.loader import Manifest, load_paths
from kubetwin.runner import run
from kubetwin.validation.validate import validate

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dws-flex-start.yaml"
MIG = "https://www.googleapis.com/compute/v1/projects/kubetwin/zones/us-central1-a/instanceGroups/gke-kubetwin-{}-grp"
L4_GROUP = MIG.format("l4-ce5e7585")


def pool(name: str, machine: str, lo: int, hi: int, gpu: str | None = None, count: int = 0, **spec) -> dict:
    s: dict = {"machineType": machine, "autoscaling": {"minNodeCount": lo, "maxNodeCount": hi},
               "zones": ["us-central1-a"], **spec}
    if gpu:
        s["accelerators"] = [{"type": gpu, "count": count}]
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": s}


def owned(pod: dict) -> dict:
    """A pod with a controller (a ReplicaSet that does not exist), so the autoscaler may move it."""
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                           "uid": "u-rs", "controller": True}]
    return pod


def gpu_pod(name: str, gpus: int = 1, cpu: str = "2", duration: str = "1h", memory: str | None = None) -> dict:
    pod = make_pod(name).gpus(gpus).cpu(cpu).duration(duration).obj()
    if memory:
        pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory
    return pod


def conditions(result, name: str) -> list[tuple[float, list[tuple[str, str, str]]]]:
    out = []
    for t, _, etype, o in result.history:
        if o["kind"] == "ProvisioningRequest" and o["metadata"]["name"] == name and etype == "MODIFIED":
            out.append((t, [(c["type"], c["status"], c["reason"]) for c in o["status"]["conditions"]]))
    return out


def nodes_over_time(result) -> list[tuple[float, str, str]]:
    return [(t, etype, o["metadata"]["name"]) for t, _, etype, o in result.history
            if o["kind"] == "Node" and etype in ("ADDED", "DELETED")]


# -- scale-up --------------------------------------------------------------------------------------------
def events(result, reason: str) -> list[tuple[float, str, str, int]]:
    """(first seen, object name, message, count) of every Event with that reason, in time order."""
    return sorted((e.first_seen, e.event["involvedObject"]["name"], e.message, e.event["count"])
                  for e in result.recorded_events(reason))


def test_scale_up_fits_pending_gpu_pods_with_ca_events():
    pods = [owned(gpu_pod(f"p{i}")) for i in range(3)]
    r = run(objects=[make_scenario("2h").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1), *pods])
    assert [(t, o, m) for t, o, m, _ in events(r, "TriggeredScaleUp")] == [
        (10.0, f"p{i}", f"pod triggered scale-up: [{{{L4_GROUP} 0->3 (max: 3)}}]") for i in range(3)]
    assert not events(r, "NotTriggerScaleUp")
    added = [(t, n) for t, e, n in nodes_over_time(r) if e == "ADDED"]
    assert len(added) == 3 and {t for t, _ in added} == {100.0}  # 10 s scan + 90 s bootDelay
    assert r.summary["pods"]["by_phase"].get("Succeeded") == 3


def test_max_node_count_respected_not_trigger_scale_up():
    pods = [owned(gpu_pod(f"p{i}", duration="30m")) for i in range(3)]
    r = run(objects=[make_scenario("30m").obj(), pool("l4", "g2-standard-8", 0, 2, "nvidia-l4", 1), *pods])
    assert [o for _, o, _, _ in events(r, "TriggeredScaleUp")] == ["p0", "p1"]
    assert f"{L4_GROUP} 0->2 (max: 2)" in events(r, "TriggeredScaleUp")[0][2]
    nts = events(r, "NotTriggerScaleUp")
    assert nts and {o for _, o, _, _ in nts} == {"p2"}
    assert nts[0][2] == "pod didn't trigger scale-up: 1 max node group size reached"
    assert len([1 for _, e, _ in nodes_over_time(r) if e == "ADDED"]) == 2


def test_no_matching_pool_gives_the_filters_reasons():
    pod = owned(gpu_pod("p"))
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    r = run(objects=[make_scenario("5m").obj(), pool("l4", "g2-standard-8", 0, 2, "nvidia-l4", 1), pod])
    nts = events(r, "NotTriggerScaleUp")
    assert nts[0][2] == "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector"
    assert not nodes_over_time(r)


def test_expanders_choose_differently():
    """11 vCPU / 70Gi / 1 GPU fits an a2-highgpu-1g snugly (least waste) and a g2-standard-24 more cheaply."""
    objs = [pool("a100", "a2-highgpu-1g", 0, 2, "nvidia-tesla-a100", 1),
            pool("l4x2", "g2-standard-24", 0, 2, "nvidia-l4", 2),
            owned(gpu_pod("p", cpu="11", memory="70Gi", duration="20m"))]
    chosen = {}
    for expander in ("least-waste", "price"):
        r = run(objects=[make_scenario("30m").spec(clusterAutoscaler={"expander": expander}).obj(), *objs])
        (_, _, msg, _), = events(r, "TriggeredScaleUp")
        chosen[expander] = msg.split("gke-kubetwin-")[1].split(" ")[0].rsplit("-", 2)[0]
    assert chosen == {"least-waste": "a100", "price": "l4x2"}


def test_priority_expander_reads_its_configmap():
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
          "data": {"priorities": "10:\n  - .*a100.*\n50:\n  - .*l4x2.*\n"}}
    objs = [pool("a100", "a2-highgpu-1g", 0, 2, "nvidia-tesla-a100", 1),
            pool("l4x2", "g2-standard-24", 0, 2, "nvidia-l4", 2), cm,
            owned(gpu_pod("p", cpu="11", memory="70Gi", duration="20m"))]
    r = run(objects=[make_scenario("30m").spec(clusterAutoscaler={"expander": "priority"}).obj(), *objs])
    assert "gke-kubetwin-l4x2-" in events(r, "TriggeredScaleUp")[0][2]


def test_multi_host_tpu_pool_scales_whole_slice_up_and_down():
    tpu = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "v5e"},
           "spec": {"machineType": "ct5lp-hightpu-4t", "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4},
                    "zones": ["us-central1-a"], "placementPolicy": {"tpuTopology": "4x4"}}}
    pods = []
    for i in range(4):
        pod = owned(make_pod(f"w{i}").cpu("1").duration("1h").obj())
        pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
        pods.append(pod)
    r = run(objects=[make_scenario("3h").obj(), tpu, *pods])
    ups = events(r, "TriggeredScaleUp")
    assert len(ups) == 4 and all(m.endswith("0->4 (max: 4)}]") for _, _, m, _ in ups)
    nodes = nodes_over_time(r)
    assert [t for t, e, _ in nodes if e == "ADDED"] == [100.0] * 4  # the whole slice at once
    assert [t for t, e, _ in nodes if e == "DELETED"] == [100.0 + 3600 + 600] * 4  # empty 10 min: slice deleted


def test_location_policy_balanced_spreads_any_avoids_stockout():
    zones = ["us-central1-a", "us-central1-b"]
    pods = [owned(gpu_pod(f"p{i}", duration="20m")) for i in range(4)]
    r = run(objects=[make_scenario("10m").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1, zones=zones), *pods])
    b_group = L4_GROUP.replace("us-central1-a", "us-central1-b")
    assert {m for _, _, m, _ in events(r, "TriggeredScaleUp")} == {
        f"pod triggered scale-up: [{{{L4_GROUP} 0->2 (max: 3)}} {{{b_group} 0->2 (max: 3)}}]"}
    # Spot pools use location policy ANY: the zone without capacity is skipped
    cap = [{"zone": "us-central1-a", "machineType": "g2-standard-8", "available": 0}]
    spot = []
    for p in pods:
        p = {**p, "spec": {**p["spec"], "tolerations": [{"key": "cloud.google.com/gke-spot", "operator": "Exists"}]}}
        spot.append(p)
    r = run(objects=[make_scenario("10m").spec(capacity=cap).obj(),
                     pool("l4", "g2-standard-8", 0, 4, "nvidia-l4", 1, zones=zones, spot=True), *spot])
    assert {m for _, _, m, _ in events(r, "TriggeredScaleUp")} == {
        f"pod triggered scale-up: [{{{b_group} 0->4 (max: 4)}}]"}
    assert not events(r, "FailedScaleUp")


# -- capacity and quota ------------------------------------------------------------------------------------
def test_quota_exceeded_partial_scale_up_and_backoff():
    pods = [owned(gpu_pod(f"p{i}", gpus=8, cpu="50", duration="2h")) for i in range(3)]
    r = run(objects=[make_scenario("30m").spec(quotas={"us-central1": {"NVIDIA_H100_GPUS": 16}}).obj(),
                     pool("a3", "a3-highgpu-8g", 0, 4, "nvidia-h100-80gb", 8), *pods])
    failed = events(r, "FailedScaleUp")
    pod_msgs = {(o, m) for _, o, m, _ in failed if o.startswith("p")}
    assert pod_msgs == {(f"p{i}", "Node scale up in zones us-central1-a associated with this pod failed: GCE quota "
                         "exceeded. Pod is at risk of not being scheduled.") for i in range(3)}
    pool_msg = next(m for _, o, m, _ in failed if o == "a3")
    assert pool_msg.endswith("(project quota): QUOTA_EXCEEDED: Quota 'NVIDIA_H100_GPUS' exceeded.  "
                             "Limit: 16.0 in region us-central1.")
    assert len([1 for _, e, _ in nodes_over_time(r) if e == "ADDED"]) == 2
    nts = events(r, "NotTriggerScaleUp")
    assert any(m == "pod didn't trigger scale-up: 1 in backoff after failed scale-up" for _, _, m, _ in nts)
    # node group backoff 5 min, then 10 min: the third VM is asked for again at 5m10s and 15m10s
    assert bumps(r, "FailedScaleUp", "a3") == [10.0, 310.0, 910.0]


def bumps(result, reason: str, obj: str) -> list[float]:
    """The times an Event (reason, involved object) was written or its count bumped."""
    return [t for t, _, etype, o in result.history if o["kind"] == "Event" and etype != "DELETED"
            and o["reason"] == reason and o["involvedObject"]["name"] == obj]


def test_stockout_message_and_global_gpu_quota():
    cap = [{"zone": "us-central1-a", "machineType": "a3-highgpu-8g", "available": 1}]
    pods = [owned(gpu_pod(f"p{i}", gpus=8, cpu="50")) for i in range(2)]
    r = run(objects=[make_scenario("5m").spec(capacity=cap).obj(),
                     pool("a3", "a3-highgpu-8g", 0, 4, "nvidia-h100-80gb", 8), *pods])
    msgs = {m for _, o, m, _ in events(r, "FailedScaleUp")}
    assert ("Node scale up in zones us-central1-a associated with this pod failed: GCE out of resources. Pod is at "
            "risk of not being scheduled.") in msgs
    assert any(m.endswith("(hardware availability in the zone (stockout)): ZONE_RESOURCE_POOL_EXHAUSTED: The zone "
                          "'projects/kubetwin/zones/us-central1-a' does not have enough resources available to "
                          "fulfill the request.  Try a different zone, or try again later.") for m in msgs)
    r = run(objects=[make_scenario("5m").spec(quotas={"global": {"GPUS_ALL_REGIONS": 8}}).obj(),
                     pool("a3", "a3-highgpu-8g", 0, 4, "nvidia-h100-80gb", 8), *pods])
    assert any(m.endswith("Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 8.0 globally.")
               for _, _, m, _ in events(r, "FailedScaleUp"))


def test_spot_pools_count_against_preemptible_quota():
    pods = [owned(gpu_pod("p", gpus=8, cpu="50"))]
    quota = {"us-central1": {"NVIDIA_H100_GPUS": 0, "PREEMPTIBLE_NVIDIA_H100_GPUS": 8}}
    pod = pods[0]
    pod["spec"]["tolerations"] = [{"key": "cloud.google.com/gke-spot", "operator": "Exists"}]
    r = run(objects=[make_scenario("5m").spec(quotas=quota).obj(),
                     pool("a3s", "a3-highgpu-8g", 0, 1, "nvidia-h100-80gb", 8,
                                                         spot=True), pod])
    assert not events(r, "FailedScaleUp")
    assert len([1 for _, e, _ in nodes_over_time(r) if e == "ADDED"]) == 1


# -- scale-down --------------------------------------------------------------------------------------------
def test_scale_down_after_unneeded_time_respects_min():
    pods = [owned(gpu_pod(f"p{i}", duration="30m")) for i in range(3)]
    r = run(objects=[make_scenario("2h").obj(), pool("l4", "g2-standard-8", 1, 3, "nvidia-l4", 1), *pods])
    # the minNodeCount node is still booting at the first scan: CA counts it as upcoming room for one pod
    assert {(o, m.split(" (max")[0][-4:]) for _, o, m, _ in events(r, "TriggeredScaleUp")} == {
        ("p1", "1->3"), ("p2", "1->3")}
    nodes = nodes_over_time(r)
    assert [t for t, e, _ in nodes if e == "ADDED"] == [90.0, 100.0, 100.0]
    # pods start when the driver is up (+3 min), run 30 min, then the nodes are unneeded for 10 min
    assert [t for t, e, _ in nodes if e == "DELETED"] == [90 + 180 + 1800 + 600, 100 + 180 + 1800 + 600]
    assert [m for _, _, m, _ in events(r, "ScaleDown")] == ["marked the node as toBeDeleted/unschedulable"] * 2
    # one node stays: minNodeCount


def test_scale_down_evicts_movable_pods_and_keeps_bare_ones():
    """Two nodes, each with a 6-CPU filler for 20 min and a small long pod: the owned one ("mover") is evicted
    and its node removed; the bare pod (no controller) keeps its node."""
    a = owned(make_pod("mover").cpu("500m").obj())
    b = make_pod("bare").cpu("500m").obj()
    filler = [owned(make_pod(f"f{i}").cpu("6").duration("20m").obj()) for i in range(2)]
    r = run(objects=[make_scenario("2h").obj(), pool("cpu", "n2-standard-8", 0, 4), *filler, a, b])
    where = {o: m.rsplit(" ", 1)[1] for _, o, m, _ in events(r, "Scheduled")}
    assert where["mover"] != where["bare"]
    assert [(t, o, m) for t, o, m, _ in events(r, "ScaleDown")] == [
        (1900.0, where["mover"], "marked the node as toBeDeleted/unschedulable"),
        (1900.0, "mover", "deleting pod for node scale down")]
    assert [(t, n) for t, e, n in nodes_over_time(r) if e == "DELETED"] == [(1900.0, where["mover"])]


# -- ProvisioningRequest -------------------------------------------------------------------------------------
def pod_template(name: str, gpus: int = 1, cpu: str = "2") -> dict:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "namespace": "default"},
            "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {
                "requests": {"cpu": cpu}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}


def provreq(name: str, cls: str, template: str, count: int, **params: str) -> dict:
    spec: dict = {"provisioningClassName": cls, "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}
    if params:
        spec["parameters"] = params
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def static_pool(name: str, machine: str, nodes: int, gpu: str, count: int) -> dict:
    return make_pool(name, machine, nodes).gpus(gpu, count).obj()


def test_provisioning_request_kinds_are_simulated():
    objs = [pod_template("t"), provreq("pr", "check-capacity.autoscaling.x-k8s.io", "t", 1)]
    diags = validate([Manifest(o, "x.yaml", 1) for o in objs])
    assert not diags


def test_check_capacity_found_not_found_and_booking_expired():
    cc = "check-capacity.autoscaling.x-k8s.io"
    r = run(objects=[make_scenario("15m").obj(), static_pool("l4", "g2-standard-8", 2, "nvidia-l4", 1),
                     pod_template("t"),
                     provreq("fits", cc, "t", 2), provreq("too-big", cc, "t", 3)])
    fits = conditions(r, "fits")
    assert fits[-1][1] == [("Accepted", "True", "Accepted"), ("Provisioned", "True", "CapacityIsFound"),
                           ("BookingExpired", "True", "CapacityReservationTimeExpired")]
    t_prov = next(t for t, c in fits if ("Provisioned", "True", "CapacityIsFound") in c)
    t_exp = next(t for t, c in fits if len(c) == 3)
    assert t_exp - t_prov == 600.0
    big = conditions(r, "too-big")[-1][1]
    assert big == [("Accepted", "True", "Accepted"), ("Provisioned", "False", "CapacityIsNotFound")]
    # the booked capacity of "fits" is what keeps "too-big" out even though each alone would find 2 nodes
    assert len([1 for _, e, _ in nodes_over_time(r) if e == "ADDED"]) == 2  # no scale-up


def test_best_effort_atomic_all_or_nothing():
    ba = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    r = run(objects=[make_scenario("10m").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1), pod_template("t"),
                     provreq("ok", ba, "t", 2)])
    assert conditions(r, "ok")[-1][1][:2] == [("Accepted", "True", "Accepted"),
                                              ("Provisioned", "True", "CapacityIsProvisioned")]
    assert len([1 for _, e, _ in nodes_over_time(r) if e == "ADDED"]) == 2
    # 3 nodes wanted, quota for 2 L4s: nothing is created
    r = run(objects=[make_scenario("10m").spec(quotas={"us-central1": {"NVIDIA_L4_GPUS": 2}}).obj(),
                     pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1), pod_template("t"), provreq("no", ba, "t", 3)])
    assert conditions(r, "no")[-1][1] == [("Accepted", "True", "Accepted"),
                                          ("Provisioned", "False", "CapacityIsNotFound")]
    assert not nodes_over_time(r)
    # beyond max size: nothing either
    r = run(objects=[make_scenario("10m").obj(), pool("l4", "g2-standard-8", 0, 2, "nvidia-l4", 1), pod_template("t"),
                     provreq("big", ba, "t", 3)])
    assert conditions(r, "big")[-1][1][1] == ("Provisioned", "False", "CapacityIsNotFound")
    assert not nodes_over_time(r)


def test_missing_pod_template_fails():
    r = run(objects=[make_scenario("1m").obj(), pool("l4", "g2-standard-8", 0, 2, "nvidia-l4", 1),
                     provreq("pr", "check-capacity.autoscaling.x-k8s.io", "nope", 1)])
    assert conditions(r, "pr")[-1][1][-1] == ("Failed", "True", "FailedToCreatePods")


def test_dws_flex_start_example_timeline():
    r = run([EXAMPLE])
    conds = conditions(r, "train-pr")
    assert conds[0] == (10.0, [("Accepted", "True", "Accepted")])
    waiting = conds[1]
    assert waiting[0] == 10.0 and waiting[1][1] == ("Provisioned", "False", "ResourcePoolExhausted")
    t_prov = next(t for t, c in conds if ("Provisioned", "True", "Provisioned") in c)
    assert t_prov == 7200.0  # the zone's capacity appears at 2h
    nodes = nodes_over_time(r)
    added = [t for t, e, _ in nodes if e == "ADDED"]
    assert added == [7290.0] * 4  # all four together, after bootDelay
    starts = sorted(t for t, _, _, _ in events(r, "Scheduled"))
    assert starts == [7470.0] * 4  # the GPU driver (3m) then the scheduler
    deleted = [t for t, e, _ in nodes if e == "DELETED"]
    assert deleted == [7470.0 + 3 * 3600 + 600] * 4  # pods done after 3 h, nodes unneeded 10 min
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 4}
    assert r.summary["cost"]["node_hours_by_pool"]["a3-flex"] == round(4 * (deleted[0] - 7290.0) / 3600, 3)


def test_dws_max_run_duration_deletes_nodes():
    docs = [m.obj for m in load_paths([EXAMPLE])]
    for o in docs:
        if o["kind"] == "ProvisioningRequest":
            o["spec"]["parameters"]["maxRunDurationSeconds"] = "3600"
    r = run(objects=docs)
    deleted = [t for t, e, _ in nodes_over_time(r) if e == "DELETED"]
    assert deleted == [7200.0 + 3600] * 4
    assert [m for _, _, m, _ in events(r, "MaxRunDurationReached")] == [
        "maxRunDurationSeconds reached: deleting 4 node(s) of a3-flex"]
    for o in docs:
        if o["kind"] == "ProvisioningRequest":
            o["spec"]["parameters"]["maxRunDurationSeconds"] = str(8 * 86400)
    r = run(objects=docs)
    assert conditions(r, "train-pr")[-1][1][-1] == ("Failed", "True", "InvalidParameter")


def test_same_seed_same_summary(tmp_path):
    a = run([EXAMPLE], out=tmp_path / "a")
    b = run([EXAMPLE], out=tmp_path / "b")
    assert (tmp_path / "a" / "summary.json").read_bytes() == (tmp_path / "b" / "summary.json").read_bytes()
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["cost"] == a.summary["cost"] == b.summary["cost"]


def test_obtainability_is_seeded():
    cap = [{"zone": "us-central1-a", "machineType": "g2-standard-8", "obtainability": 0.5}]
    pods = [owned(gpu_pod(f"p{i}", duration="20m")) for i in range(6)]
    objs = [pool("l4", "g2-standard-8", 0, 6, "nvidia-l4", 1), *pods]
    runs = [nodes_over_time(run(objects=[make_scenario("1h").seed(s).spec(capacity=cap).obj(), *objs]))
            for s in (1, 1, 2)]
    assert runs[0] == runs[1]


def test_autoscaling_quota_example():
    r = run([Path(__file__).resolve().parents[1] / "examples" / "autoscaling-gpu-quota.yaml"])
    ups = {m for _, o, m, _ in events(r, "TriggeredScaleUp") if o.startswith("inference")}
    assert len(ups) == 1 and "us-central1-a" in ups.pop().split("} {")[0]
    nodes = nodes_over_time(r)
    assert [t for t, e, n in nodes if e == "ADDED" and "-l4-pool-" in n] == [100.0] * 6  # 3 per zone
    assert [t for t, e, n in nodes if "-h100-pool-" in n] == [1900.0, 1900.0, 9880.0, 17080.0]
    pool_err = [m for _, o, m, _ in events(r, "FailedScaleUp") if o == "h100-pool"]
    assert pool_err == ["1 VM(s) of " + MIG.format("h100-pool-7793de85") + " could not be created (project quota): "
                        "QUOTA_EXCEEDED: Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 16.0 in region us-central1."]
    assert bumps(r, "FailedScaleUp", "h100-pool")[:4] == [1810.0, 2110.0, 2710.0, 3910.0]  # 5, 10, 20 min backoff
    assert r.summary["cost"]["total_usd"] == 610.12


def test_best_effort_atomic_valid_until_and_consumers_land_on_new_nodes():
    ba = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    r = run(objects=[make_scenario("5m").obj(), pool("l4", "g2-standard-8", 0, 2, "nvidia-l4", 1), pod_template("t"),
                     provreq("big", ba, "t", 3, ValidUntilSeconds="60")])
    conds = conditions(r, "big")
    assert conds[-1] == (60.0, [("Accepted", "True", "Accepted"), ("Provisioned", "False", "CapacityIsNotFound"),
                                ("Failed", "True", "Expired")])
    consumers = []
    for i in range(2):
        pod = gpu_pod(f"c{i}", duration="30m")
        pod["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] = "ok"
        consumers.append(owned(pod))
    r = run(objects=[make_scenario("1h").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1), pod_template("t"),
                     provreq("ok", ba, "t", 2), *consumers])
    assert not events(r, "TriggeredScaleUp")  # consuming pods are the request's, not the ordinary scale-up's
    new = {n for t, e, n in nodes_over_time(r) if e == "ADDED"}
    assert len(new) == 2 and {m.rsplit(" ", 1)[1] for _, _, m, _ in events(r, "Scheduled")} == new
    assert [m for _, o, m, _ in events(r, "ScaledUpGroup")] == [
        f"Scale-up: setting group {L4_GROUP} size to 2 instead of 0 (max: 3)"]


def _pdb(**spec) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep", "namespace":
            "default"}, "spec": {"selector": {"matchLabels": {"app": "mover"}}, **spec}}


def test_scale_down_honours_pod_disruption_budgets():
    """The same two nodes as above, with a budget over the movable pod: minAvailable 1 leaves no disruption, so
    its node stays; maxUnavailable 1 allows one, so it is drained and removed as without a budget."""
    def scenario_with(budget: dict) -> object:
        a = owned(make_pod("mover").cpu("500m").obj())
        a["metadata"]["labels"] = {"app": "mover"}
        b = make_pod("bare").cpu("500m").obj()
        filler = [owned(make_pod(f"f{i}").cpu("6").duration("20m").obj()) for i in range(2)]
        return run(objects=[make_scenario("2h").obj(), pool("cpu", "n2-standard-8", 0, 4), *filler, a, b, budget])

    blocked = scenario_with(_pdb(minAvailable=1))
    assert events(blocked, "ScaleDown") == []
    assert [n for _, e, n in nodes_over_time(blocked) if e == "DELETED"] == []
    allowed = scenario_with(_pdb(maxUnavailable=1))
    assert [(t, o) for t, o, _, _ in events(allowed, "ScaleDown")][1] == (1900.0, "mover")
    assert len([n for _, e, n in nodes_over_time(allowed) if e == "DELETED"]) == 1


def test_budget_arithmetic():
    from kubetwin.controllers.disruption import _scaled  # the disruption controller's, the autoscaler reads it

    assert _scaled("50%", 3) == 2 and _scaled(1, 3) == 1 and _scaled("10%", 5) == 1


def test_gpu_node_waiting_for_its_driver_is_unready_not_unneeded():
    """With --scale-down-unneeded-time and --scale-down-delay-after-add of 2m, a new GPU node whose driver has not
    advertised nvidia.com/gpu yet (3 min) is not removed as unneeded: CA's GPU processor
    (utils/gpu FilterOutNodesWithUnreadyResources) treats it as unready, removable only after
    --scale-down-unready-time (20m). The pod that triggered the scale-up runs on the node it bought."""
    ca = {"scaleDownUnneededTime": "2m", "scaleDownDelayAfterAdd": "2m"}
    r = run(objects=[make_scenario("40m").spec(clusterAutoscaler=ca).obj(),
                     pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1),
                     owned(gpu_pod("p", duration="10m"))])
    assert len([1 for _, e, _ in nodes_over_time(r) if e == "ADDED"]) == 1
    assert r.summary["pods"]["by_phase"] == {"Succeeded": 1}
    # after the pod finished the node is unneeded (ready now) and goes 2 min later
    assert [e for _, e, _ in nodes_over_time(r)] == ["ADDED", "DELETED"]


# -- a pool's starting size (GKE: a node pool's initial node count is its size; the autoscaler's target starts at
# the instance group's current size, not at minNodeCount) ------------------------------------------------
def test_a_booting_initial_node_counts_as_coming_up_and_no_second_node_is_bought():
    """nodeCount 1, minNodeCount 0: the pool's one node is still booting when the pod goes Pending; the CA counts
    it as upcoming (its target is the group's size, 1) and buys nothing for the pod, which lands on that node."""
    spec = {"nodeCount": 1, "bootDelay": "5m"}
    r = run(objects=[make_scenario("30m").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1, **spec),
                     owned(gpu_pod("p0", duration="10m"))])
    assert not events(r, "TriggeredScaleUp")
    assert len([n for _, e, n in nodes_over_time(r) if e == "ADDED"]) == 1
    assert r.summary["pods"]["by_phase"].get("Succeeded") == 1


def test_scale_up_counts_from_the_initial_node_count():
    """nodeCount 2 (min 0, max 3), three GPU pods: the group's target is 2 before the scale-up, so CA asks for one
    more node (2->3), not three (0->3)."""
    spec = {"nodeCount": 2, "bootDelay": "5m"}
    pods = [owned(gpu_pod(f"p{i}", duration="10m")) for i in range(3)]
    r = run(objects=[make_scenario("40m").obj(), pool("l4", "g2-standard-8", 0, 3, "nvidia-l4", 1, **spec), *pods])
    msgs = {m for _, _, m, _ in events(r, "TriggeredScaleUp")}
    assert msgs == {f"pod triggered scale-up: [{{{L4_GROUP} 2->3 (max: 3)}}]"}
    assert len([n for _, e, n in nodes_over_time(r) if e == "ADDED"]) == 3
    assert r.summary["pods"]["by_phase"].get("Succeeded") == 3


def test_a_booting_multi_host_slice_is_not_bought_twice():
    """A 2x4 v5e pool (two hosts) created with nodeCount 2 and minNodeCount 0: the slice is coming up, so the CA
    buys no second slice for the gang waiting on it."""
    tpu = pool("v5e", "ct5lp-hightpu-4t", 0, 2, nodeCount=2, bootDelay="5m",
               placementPolicy={"tpuTopology": "2x4"})
    pods = []
    for i in range(2):
        pod = owned(make_pod(f"w{i}").cpu("1").duration("10m").obj())
        pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
        pods.append(pod)
    r = run(objects=[make_scenario("30m").obj(), tpu, *pods])
    assert not events(r, "TriggeredScaleUp")
    assert len([n for _, e, n in nodes_over_time(r) if e == "ADDED"]) == 2


@pytest.mark.parametrize(("entry", "spot_nodes"), [({}, 0), ({"spot": True}, 1), ({"spot": False}, 1)])
def test_a_capacity_entry_without_spot_is_shared_by_spot_and_on_demand_vms(entry: dict, spot_nodes: int):
    """An entry with `spot` unset covers both provisioning models: one zone's stock of the machine type, so an
    on-demand node already there leaves a Spot pool nothing of `available: 1` (each model was counted alone, and
    the zone gave out twice its stock); an entry for one model leaves the other unlimited or its own."""
    cap = [{"zone": "us-central1-a", "machineType": "a3-highgpu-8g", "available": 1, **entry}]
    pod = owned(gpu_pod("p", gpus=8, cpu="50"))
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-spot": "true"}
    pod["spec"]["tolerations"] = [{"key": "cloud.google.com/gke-spot", "operator": "Exists"}]
    pod["metadata"].setdefault("annotations", {})["kubetwin.io/create-at"] = "5m"  # once the on-demand node is up
    r = run(objects=[make_scenario("10m").spec(capacity=cap).obj(),
                     pool("od", "a3-highgpu-8g", 1, 1, "nvidia-h100-80gb", 8),
                     pool("sp", "a3-highgpu-8g", 0, 1, "nvidia-h100-80gb", 8, spot=True), pod])
    spot = [n for _, e, n in nodes_over_time(r) if e == "ADDED" and "-sp-" in n]
    assert len(spot) == spot_nodes
    assert bool(events(r, "FailedScaleUp")) == (spot_nodes == 0)

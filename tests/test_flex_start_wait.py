"""A flex-start scale-up waits for capacity (GKE's resize requests) before it fails and a ComputeClass falls back.

GKE's autoscaler keeps a non-queued flex-start pool's resize request open for the pool's capacity-check wait time
(DefaultFlexStartCapacityCheckWaitTime, 15 min; a rule's capacityCheckWaitTimeSeconds, never below that) and
takes the VMs when Compute Engine has them; what is missing then fails the scale-up like a stockout
(GoogleCloudPlatform/cluster-autoscaler pkg/resizerequests/error_reporter.go, pkg/cloudprovider/gke/gke_manager.go
capacityCheckWaitTimeSecondsLabelValue, gke_cloud_provider_impl.go; selfservice/capacity_check_wait_time.go puts a
rule's value on the pool it creates). A Spot or on-demand pool's stockout fails at once, as before.
"""

from __future__ import annotations

import pytest
from k8s_builders import make_pod, make_scenario

from kubetwin.api.loader import Manifest
from kubetwin.autoscaler import cluster_autoscaler as ca
from kubetwin.runner import run
from kubetwin.validation.validate import validate

CLASS = "cloud.google.com/compute-class"
ZONE = "us-central1-a"


def capacity(flex_at: str | None, flex_after: int = 4) -> list[dict]:
    """No flex-start g2 in the zone until `flex_at` (then `flex_after`); on-demand g2 plenty."""
    flex: dict = {"zone": ZONE, "machineType": "g2-standard-8", "spot": False, "flexStart": True, "available": 0}
    if flex_at is not None:
        flex["schedule"] = [{"at": flex_at, "available": flex_after}]
    return [flex, {"zone": ZONE, "machineType": "g2-standard-8", "spot": False, "flexStart": False, "available": 8}]


def pool(name: str, flex: bool, labels: dict | None = None) -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"machineType": "g2-standard-8", "zones": [ZONE], "flexStart": flex,
                     "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4},
                     "accelerators": [{"type": "nvidia-l4", "count": 1}],
                     "labels": {CLASS: "c", **(labels or {})},
                     "taints": [{"key": CLASS, "value": "c", "effect": "NoSchedule"}]}}


def klass(wait: int | None = None) -> dict:
    flex: dict = {"machineFamily": "g2", "flexStart": {"enabled": True}}
    if wait is not None:
        flex["capacityCheckWaitTimeSeconds"] = wait
    return {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "c"},
            "spec": {"priorities": [flex, {"machineFamily": "g2", "spot": False}]}}


def pod() -> dict:
    p = make_pod("train").gpus(1).cpu("1").duration("1h").obj()
    p["spec"]["nodeSelector"] = {CLASS: "c"}
    return p


def the_run(flex_at: str | None, wait_label: str | None = None, wait: int | None = None):
    labels = {"cloud.google.com/gke-capacity-check-wait-time-seconds": wait_label} if wait_label else None
    return run(objects=[make_scenario("3h").spec(capacity=capacity(flex_at)).obj(), klass(wait),
                        pool("flex", True, labels), pool("od", False), pod()])


def started_on(r) -> tuple[float, str]:
    for t, _, _, o in r.history:
        if o.get("kind") == "Pod" and (o.get("status") or {}).get("phase") == "Running":
            return t, o["spec"]["nodeName"]
    raise AssertionError("the pod never ran")


def events(r, reason: str) -> list[tuple[float, str]]:
    return [(t, o["involvedObject"]["name"]) for t, _, e, o in r.history
            if o.get("kind") == "Event" and o.get("reason") == reason and e == "ADDED"]


def test_flex_start_capacity_that_appears_within_the_wait_is_taken() -> None:
    """Flex-start capacity appears at 10 min: the resize asked for at 10 s waits for it, no failure, no fallback."""
    r = the_run(flex_at="10m")
    (up,) = r.summary["cluster_autoscaler"]["scale_ups"]
    assert up["group"] == f"flex/{ZONE}" and (up["granted"], up["waiting_for_capacity"], up["error"]) == (0, 1, None)
    t, node = started_on(r)
    assert "-flex-" in node and 600 < t < 600 + 90 + 180 + 20  # boot, GPU driver, a scan
    assert events(r, "FailedScaleUp") == []


def test_past_the_wait_the_scale_up_fails_and_the_class_falls_back() -> None:
    """No flex-start capacity for an hour: at 15 min (the default wait) the resize fails (FailedScaleUp, the group
    backs off) and the next loop takes the on-demand rule."""
    r = the_run(flex_at="1h")
    ups = r.summary["cluster_autoscaler"]["scale_ups"]
    assert [u["group"] for u in ups[:2]] == [f"flex/{ZONE}", f"od/{ZONE}"]
    failed = [t for t, name in events(r, "FailedScaleUp") if name == "train"]
    assert failed and failed[0] == pytest.approx(10 + ca.CAPACITY_CHECK_WAIT, abs=10)
    assert ups[1]["t"] >= failed[0] and ups[1]["t"] - failed[0] <= 20
    t, node = started_on(r)
    assert "-od-" in node


@pytest.mark.parametrize(("label", "wait_s"), [("1800", 1800.0), ("300", 900.0), ("x", 900.0), (None, 900.0)])
def test_the_wait_is_the_pools_label_never_below_fifteen_minutes(label: str | None, wait_s: float) -> None:
    p = pool("flex", True, {"cloud.google.com/gke-capacity-check-wait-time-seconds": label} if label else None)
    assert ca.capacity_check_wait(p) == wait_s
    assert ca.waits_for_capacity(p)
    assert not ca.waits_for_capacity(pool("od", False))
    queued = pool("q", True, {"cloud.google.com/gke-queued": "true"})
    assert not ca.waits_for_capacity(queued)  # queued provisioning: ProvisioningRequests, not resize requests


def test_a_longer_wait_on_the_pool_holds_the_scale_up_longer() -> None:
    r = the_run(flex_at="25m", wait_label="1800")
    (up,) = r.summary["cluster_autoscaler"]["scale_ups"]
    assert up["group"] == f"flex/{ZONE}"
    t, node = started_on(r)
    assert "-flex-" in node and t > 1500
    assert events(r, "FailedScaleUp") == []


def test_a_rules_wait_goes_on_the_pool_auto_creation_makes_and_is_noticed_off_flex_start() -> None:
    cc = klass(wait=1800)
    cc["spec"]["nodePoolAutoCreation"] = {"enabled": True}
    cc["spec"]["priorities"][0] = {"machineType": "g2-standard-8", **{k: v for k, v in cc["spec"]["priorities"][0]
                                                                     .items() if k != "machineFamily"}}
    r = run(objects=[make_scenario("2h").spec(capacity=capacity("20m")).obj(), cc, pod()])
    created = [o for t, _, e, o in r.history if o.get("kind") == "NodePool" and e == "ADDED" and t > 0]
    assert created and created[0]["spec"]["flexStart"]
    assert created[0]["spec"]["labels"]["cloud.google.com/gke-capacity-check-wait-time-seconds"] == "1800"
    t, node = started_on(r)
    assert t > 1200 and events(r, "FailedScaleUp") == []  # waited past the default 15 min for its capacity
    off = klass()
    off["spec"]["priorities"][1]["capacityCheckWaitTimeSeconds"] = 1800  # the CRD's rule refuses it off flex-start
    (err,) = [d for d in validate([Manifest(off, "t.yaml", 1)]) if d.severity == "error"]
    assert "only supported for Flex Start and for multi-host TPUs" in err.message
    tpu = klass()
    tpu["spec"]["priorities"][1] = {"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"},
                                    "capacityCheckWaitTimeSeconds": 1800}
    notes = [d for d in validate([Manifest(tpu, "t.yaml", 1)]) if d.severity in ("error", "notice")]
    assert [(d.severity, d.field) for d in notes] == [("notice", "spec.priorities[1].capacityCheckWaitTimeSeconds")]
    assert [d for d in validate([Manifest(cc, "t.yaml", 1)]) if d.severity in ("error", "notice")] == []


def test_a_spot_stockout_still_fails_at_once() -> None:
    spot = pool("spot", False)
    spot["spec"]["spot"] = True
    cap = [{"zone": ZONE, "machineType": "g2-standard-8", "spot": True, "available": 0}]
    r = run(objects=[make_scenario("30m").spec(capacity=cap).obj(), spot, pod()])
    up = r.summary["cluster_autoscaler"]["scale_ups"][0]
    assert up["error"] and "waiting_for_capacity" not in up
    assert events(r, "FailedScaleUp")[0][0] == 10.0


# -- TPU flex-start: a multi-host slice's resize request waits whole; a single-host TPU pool waits the
# autoscaler's max node provision time (15 min + 15 min offset) and takes no custom wait -------------------------
TPU = "ct6e-standard-4t"
TPU_ZONE = "us-central1-b"  # a zone with v6e


def tpu_pool(topology: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "v6e"},
            "spec": {"machineType": TPU, "zones": [TPU_ZONE], "flexStart": True,
                     "autoscaling": {"minNodeCount": 0, "maxNodeCount": 2 if topology == "2x4" else 4},
                     "placementPolicy": {"tpuTopology": topology}, "labels": labels or {}}}


def tpu_pods(n: int, topology: str) -> list[dict]:
    pods = []
    for i in range(n):
        p = make_pod(f"w{i}").cpu("1").duration("1h").obj()
        p["spec"]["nodeSelector"] = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                     "cloud.google.com/gke-tpu-topology": topology}
        p["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
        pods.append(p)
    return pods


def tpu_run(topology: str, pods: int, flex_at: str, labels: dict | None = None):
    cap = [{"zone": TPU_ZONE, "machineType": TPU, "flexStart": True, "available": 0,
            "schedule": [{"at": flex_at, "available": 4}]}]
    return run(objects=[make_scenario("3h").spec(capacity=cap).obj(), tpu_pool(topology, labels),
                        *tpu_pods(pods, topology)])


@pytest.mark.parametrize(("flex_at", "waited"), [("10m", True), ("20m", False)])
def test_a_multi_host_slice_waits_whole_for_flex_start_capacity(flex_at: str, waited: bool) -> None:
    r = tpu_run("2x4", 2, flex_at)
    up = r.summary["cluster_autoscaler"]["scale_ups"][0]
    assert (up["from"], up["to"], up["granted"], up["error"], up["waiting_for_capacity"]) == (0, 2, 0, None, 2)
    nodes = [t for t, _, e, o in r.history if o.get("kind") == "Node" and e == "ADDED"]
    failed = [t for t, name in events(r, "FailedScaleUp") if name.startswith("w")]
    if waited:  # the slice registers whole once its 2 hosts' capacity appears within the 15 min
        assert len(nodes) >= 2 and nodes[0] == nodes[1] and 600 <= nodes[0] < 900 and failed == []
    else:  # 15 min with no capacity: the scale-up fails, the group backs off
        assert failed and failed[0] == pytest.approx(10 + ca.CAPACITY_CHECK_WAIT, abs=10)


def test_a_single_host_tpu_pool_waits_its_provision_time_and_no_custom_wait() -> None:
    """GKE: single-host TPU flex-start MIGs take no capacityCheckWaitTimeSeconds (customCapacityCheckWaitTime...
    Enabled excludes them) and time out at the max node provision time, DefaultFlexStartCapacityCheckWaitTime +
    maxNodeProvisionTimeOffset = 30 min (gke_cloud_provider_impl.go getMaxNodeProvisionTime)."""
    labelled = tpu_pool("2x2", {"cloud.google.com/gke-capacity-check-wait-time-seconds": "3600"})
    assert ca.capacity_check_wait(labelled, multi_host=False) == 1800.0
    assert ca.capacity_check_wait(labelled, multi_host=True) == 3600.0
    r = tpu_run("2x2", 1, "25m", {"cloud.google.com/gke-capacity-check-wait-time-seconds": "3600"})
    assert events(r, "FailedScaleUp") == []  # capacity at 25 min: within its 30 min
    nodes = [t for t, _, e, o in r.history if o.get("kind") == "Node" and e == "ADDED"]
    assert nodes and 1500 <= nodes[0] < 1800
    r = tpu_run("2x2", 1, "40m")
    failed = [t for t, name in events(r, "FailedScaleUp") if name.startswith("w")]
    assert failed and failed[0] == pytest.approx(10 + 1800, abs=10)

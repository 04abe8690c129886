"""A VM's end and flex-start node recycling: a NodePool's maxRunDuration (gcloud --max-run-duration; flex-start VMs
run at most 7 days, https://cloud.google.com/kubernetes-engine/docs/concepts/dws), the node's
node.gke.io/machine-termination-datetime annotation, Compute Engine deleting the VM then and the pool shrinking by
it; ComputeClass rules' maxRunDurationSeconds and flexStart.nodeRecycling matched as GKE's autoscaler matches them
(GoogleCloudPlatform/cluster-autoscaler pkg/computeclass/rules/max_run_duration.go, flex_start.go) and the
recycling plugin replacing a node before its end (pkg/defrag/plugins/recycling/recycling.go; the upstream case
pkg/test/integration/dws/flex_start_node_recycling_test.go TestNodeRecyclingCustomComputeClass, GPU, ported below).
"""

from __future__ import annotations

import pytest
from k8s_builders import make_scenario

from kubetwin.api.loader import Manifest
from kubetwin.autoscaler import computeclass as cc
from kubetwin.runner import run
from kubetwin.store.store import sim_seconds
from kubetwin.validation.validate import validate

ACCEL = "cloud.google.com/gke-accelerator"
CLASS = "cloud.google.com/compute-class"
TERMINATION = "node.gke.io/machine-termination-datetime"
LEAD = "cloud.google.com/gke-node-recycle-lead-time-seconds"
START = "2026-01-01T00:00:00Z"


def pool(name: str = "p", machine: str = "n2-standard-8", **spec) -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"machineType": machine, "zones": ["us-central1-a"], **spec}}


def deployment(name: str, selector: dict, gpus: int = 0) -> dict:
    res = {"cpu": "1", "memory": "1000Mi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": selector, "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": res, "limits": res}}]}}}}


def node_events(r, kind: str = "Node") -> list[tuple[float, str, str]]:
    return [(t, etype, o["metadata"]["name"]) for t, _, etype, o in r.history
            if o.get("kind") == kind and etype in ("ADDED", "DELETED")]


def events(r, reason: str) -> list[tuple[float, str, str]]:
    return [(t, o["involvedObject"]["name"], o["message"]) for t, _, etype, o in r.history
            if o.get("kind") == "Event" and o.get("reason") == reason and etype == "ADDED"]


def errors(*objs: dict) -> list:
    return [d for d in validate([Manifest(o, "t.yaml", 1) for o in objs]) if d.severity == "error"]


# -- a pool's max run duration ----------------------------------------------------------------------------------
def test_a_fixed_pools_vm_is_deleted_at_its_max_run_duration_and_billed_until_then() -> None:
    """nodeCount 1, maxRunDuration 1h: the VM starts at t=0 (registers at 90 s) and Compute Engine deletes it at
    1 h; the node is not re-created (a fixed pool has no autoscaler to grow it again)."""
    r = run(objects=[make_scenario("2h").obj(), pool(nodeCount=1, maxRunDuration="1h")])
    (t0, _, name), (t1, etype, gone) = node_events(r)
    assert (t0, t1, etype, gone) == (90.0, 3600.0, "DELETED", name)
    node = next(o for _, _, e, o in r.history if o.get("kind") == "Node" and e == "ADDED")
    assert sim_seconds(START, node["metadata"]["annotations"][TERMINATION]) == 3600.0
    assert node["metadata"]["labels"]["cloud.google.com/gke-max-run-duration-seconds"] == "3600"
    assert [(t, n) for t, n, _ in events(r, "MaxRunDurationReached")] == [(3600.0, name)]
    assert r.summary["max_run_duration"] == {"vms_deleted_by_pool": {"p": 1}}
    assert r.summary["cost"]["node_hours_by_pool"]["p"] == pytest.approx((3600 - 90) / 3600, abs=1e-3)


def test_without_max_run_duration_vms_live_on_and_flex_start_ends_at_seven_days() -> None:
    r = run(objects=[make_scenario("1h").obj(), pool("od", nodeCount=1), pool("flex", flexStart=True, nodeCount=1)])
    nodes = {o["spec"]["providerID"].rsplit("/", 1)[1]: o for _, _, e, o in r.history
             if o.get("kind") == "Node" and e == "ADDED"}
    ends = {o["metadata"]["labels"]["cloud.google.com/gke-nodepool"]:
            (o["metadata"].get("annotations") or {}).get(TERMINATION) for o in nodes.values()}
    assert ends["od"] is None
    assert sim_seconds(START, ends["flex"]) == 7 * 86400.0  # created at t=0, 7 days
    assert "max_run_duration" not in r.summary


def test_an_autoscaled_pools_node_runs_out_and_the_autoscaler_grows_the_pool_again() -> None:
    """The pod's Deployment re-creates it; the group's size fell with the deleted VM, so the pending pod triggers a
    new scale-up rather than waiting for a VM the autoscaler thinks is still coming."""
    auto = pool("a", autoscaling={"minNodeCount": 0, "maxNodeCount": 2}, maxRunDuration="30m")
    r = run(objects=[make_scenario("2h").obj(), auto, deployment("web", {})])
    ups = r.summary["cluster_autoscaler"]["scale_ups"]
    assert len(ups) >= 2 and ups[1]["t"] > 1800
    added = [t for t, e, _ in node_events(r) if e == "ADDED"]
    deleted = [t for t, e, _ in node_events(r) if e == "DELETED"]
    assert deleted[0] == pytest.approx(added[0] - 90 + 1800)  # the VM's run counts from its creation
    assert len(added) >= 2 and added[1] > deleted[0]
    pods = [o for _, _, e, o in r.history if o.get("kind") == "Pod" and e == "MODIFIED"
            and (o.get("status") or {}).get("phase") == "Running"]
    assert {o["spec"]["nodeName"] for o in pods} >= {n for _, e, n in node_events(r) if e == "ADDED"}


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"flexStart": True, "maxRunDuration": "8d"}, "maxRunDuration", "at most 7 days"),
    ({"maxRunDuration": "0s"}, "maxRunDuration", "must be positive"),
    ({"maxRunDuration": "soon"}, "maxRunDuration", ""),
])
def test_bad_max_run_durations_are_refused(spec: dict, field: str, words: str) -> None:
    errs = errors(make_scenario("1h").obj(), pool(nodeCount=1, **spec))
    assert errs and any(field in d.field and words in d.message for d in errs), [(d.field, d.message) for d in errs]
    assert errors(make_scenario("1h").obj(), pool(nodeCount=1, flexStart=True, maxRunDuration="604800s")) == []


# -- ComputeClass rules ------------------------------------------------------------------------------------------
def test_rules_match_pools_by_max_run_duration_and_recycling_lead_time() -> None:
    """max_run_duration.go: the pool's --max-run-duration equals the rule's, in seconds (a rule without one
    matches any); flex_start.go: an enabled rule matches a flex-start pool whose recycle lead-time label equals the
    rule's nodeRecycling.leadTimeSeconds ("" when either has none)."""
    plain = pool(nodeCount=0)
    hour = pool(nodeCount=0, maxRunDuration="1h")
    flex = pool(nodeCount=0, flexStart=True)
    flex_lead = pool(nodeCount=0, flexStart=True, labels={LEAD: "1500"})
    assert cc.rule_matches({"maxRunDurationSeconds": 3600}, hour)
    assert not cc.rule_matches({"maxRunDurationSeconds": 3600}, plain)
    assert not cc.rule_matches({"maxRunDurationSeconds": 7200}, hour)
    assert cc.rule_matches({"machineFamily": "n2"}, hour)
    recycling = {"flexStart": {"enabled": True, "nodeRecycling": {"leadTimeSeconds": 1500}}}
    assert cc.rule_matches(recycling, flex_lead) and not cc.rule_matches(recycling, flex)
    assert cc.rule_matches({"flexStart": {"enabled": True}}, flex)
    assert not cc.rule_matches({"flexStart": {"enabled": True}}, flex_lead)
    assert not cc.rule_matches(recycling, pool(nodeCount=0, labels={LEAD: "1500"}))  # not flex-start
    assert cc.rule_matches({"machineFamily": "n2"}, flex_lead)  # no flexStart in the rule: any pool


def test_a_rule_with_max_run_duration_and_recycling_validates_without_notices() -> None:
    klass = gpu_class(recycle=True)
    diags = validate([Manifest(klass, "t.yaml", 1)])
    assert [d for d in diags if d.severity in ("error", "notice")] == []


# -- node recycling (upstream TestNodeRecyclingCustomComputeClass, GPU) -----------------------------------------
SETUP = 25 * 60  # the upstream case's setupTimeout: the lead time
MAX_RUN = 2 * SETUP  # its maxRunDuration, 50 min


def gpu_class(recycle: bool) -> dict:
    flex: dict = {"enabled": True}
    if recycle:
        flex["nodeRecycling"] = {"leadTimeSeconds": SETUP}
    return {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "gpu-ccc"},
            "spec": {"nodePoolAutoCreation": {"enabled": True}, "whenUnsatisfiable": "DoNotScaleUp",
                     "priorities": [{"maxRunDurationSeconds": MAX_RUN, "flexStart": flex,
                                     "gpu": {"type": "nvidia-l4", "count": 1, "driverVersion": "default"}}]}}


def recycling_run(recycle: bool, duration: str = "1h"):
    return run(objects=[make_scenario(duration).obj(), gpu_class(recycle),
                        deployment("train", {CLASS: "gpu-ccc", ACCEL: "nvidia-l4"}, gpus=1)])


def test_node_recycling_scales_up_a_replacement_before_the_node_ends_and_drains_it() -> None:
    r = recycling_run(recycle=True)
    created = [o for t, _, e, o in r.history if o.get("kind") == "NodePool" and e == "ADDED" and t > 0]
    assert len(created) == 1
    spec = created[0]["spec"]
    assert spec["flexStart"] and spec["maxRunDuration"] == f"{MAX_RUN}s" and spec["labels"][LEAD] == str(SETUP)
    first = next(n for t, e, n in node_events(r) if e == "ADDED")
    node = next(o for _, _, e, o in r.history if o.get("kind") == "Node" and e == "ADDED")
    end = sim_seconds(START, node["metadata"]["annotations"][TERMINATION])
    assert node["metadata"]["labels"][LEAD] == str(SETUP)
    ups = r.summary["cluster_autoscaler"]["scale_ups"]
    recycled = [u for u in ups if u.get("recycling") == first]
    assert len(recycled) == 1
    # the replacement is asked for once the node has less than its lead time left, in the same pool (upstream:
    # a new NAP group or the initial one grown to twice the pods)
    assert end - SETUP < recycled[0]["t"] <= end - SETUP + 10 and recycled[0]["to"] == 2
    gone = [t for t, e, n in node_events(r) if e == "DELETED" and n == first]
    assert gone and gone[0] < end  # drained and removed before Compute Engine would have deleted it
    assert events(r, "MaxRunDurationReached") == []
    moved = r.summary["compute_classes"]["gpu-ccc"]["migrations"]
    assert [(m["node"], m["plugin"], m["evicted"]) for m in moved][:1] == [(first, "recycling", 1)]
    # the Deployment's pod was evicted by the drain and runs again on the replacement
    assert r.summary["cluster_autoscaler"]["scale_downs"][0] == {
        "t": gone[0], "node": first, "group": recycled[0]["group"], "evicted": 1, "recycling": True}


def test_without_recycling_the_node_runs_out_and_its_pod_waits_for_a_new_one() -> None:
    r = recycling_run(recycle=False)
    ups = r.summary["cluster_autoscaler"]["scale_ups"]
    assert not any("recycling" in u for u in ups)
    first = next(n for t, e, n in node_events(r) if e == "ADDED")
    ran_out = events(r, "MaxRunDurationReached")
    assert [n for _, n, _ in ran_out] == [first]
    assert len(ups) == 2 and ups[1]["t"] > ran_out[0][0]  # the pod's replacement needed a new scale-up


def tpu_class() -> dict:
    return {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "tpu-ccc"},
            "spec": {"nodePoolAutoCreation": {"enabled": True}, "whenUnsatisfiable": "DoNotScaleUp",
                     "priorities": [{"machineType": "ct6e-standard-4t", "maxRunDurationSeconds": MAX_RUN,
                                     "flexStart": {"enabled": True, "nodeRecycling": {"leadTimeSeconds": SETUP}},
                                     "tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "2x4"}}]}}


def tpu_deployment() -> dict:
    """The upstream case's two pods: 1 CPU, 1000Mi, 4 chips each, on a v6e 2x4 slice (two 4-chip hosts)."""
    d = deployment("tpu", {CLASS: "tpu-ccc", "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                           "cloud.google.com/gke-tpu-topology": "2x4", "cloud.google.com/gke-accelerator-count": "4"})
    d["spec"]["replicas"] = 2
    c = d["spec"]["template"]["spec"]["containers"][0]["resources"]
    c["requests"]["google.com/tpu"] = c["limits"]["google.com/tpu"] = "4"
    return d


def test_node_recycling_of_a_multi_host_slice_provisions_a_new_slice_pool_and_drains_the_old_slice() -> None:
    """Upstream MultiHostTPU: the slice's pool holds one slice, so the replacement is a new auto-created pool of the
    same configuration, scaled up to the slice's two hosts (upstream: "a replacement nodegroup ... scaled up");
    once it is ready the old slice is drained and deleted whole, before its termination."""
    r = run(objects=[make_scenario("1h").obj(), tpu_class(), tpu_deployment()])
    created = [(t, o["metadata"]["name"], o["spec"]) for t, _, e, o in r.history
               if o.get("kind") == "NodePool" and e == "ADDED" and t > 0]
    # (a second recycling, of the new slice, comes near the end of the hour: the first pool, reaped when empty, is
    # created again then)
    assert len(created) >= 2 and created[1][1] == created[0][1] + "-2"
    for _, _, spec in created[:2]:
        assert spec["labels"][LEAD] == str(SETUP) and spec["labels"]["cloud.google.com/gke-accelerator-count"] == "4"
        assert spec["maxRunDuration"] == f"{MAX_RUN}s" and spec["placementPolicy"] == {"tpuTopology": "2x4"}
    ups = r.summary["cluster_autoscaler"]["scale_ups"]
    first, second = ups[0], next(u for u in ups if u.get("recycling"))
    assert (first["from"], first["to"]) == (0, 2)
    assert second["group"].startswith(created[1][1] + "/") and (second["from"], second["to"], second["granted"]) == (
        0, 2, 2)
    old_hosts = sorted(n for t, e, n in node_events(r) if e == "ADDED" and t < second["t"])
    gone = {n: t for t, e, n in node_events(r) if e == "DELETED"}
    ends = [sim_seconds(START, o["metadata"]["annotations"][TERMINATION]) for _, _, e, o in r.history
            if o.get("kind") == "Node" and e == "ADDED" and o["metadata"]["name"] in old_hosts]
    assert len(old_hosts) == 2 and all(gone[h] < min(ends) for h in old_hosts)
    drain = [d for d in r.summary["cluster_autoscaler"]["scale_downs"] if d.get("slice")][0]
    assert sorted(drain["slice"]) == old_hosts and drain["evicted"] == 2 and drain["recycling"]
    assert events(r, "MaxRunDurationReached") == []
    running = [o["spec"]["nodeName"] for _, _, e, o in r.history if o.get("kind") == "Pod" and e == "MODIFIED"
               and (o.get("status") or {}).get("phase") == "Running"]
    assert any(created[1][1] in n for n in running)  # the Deployment's pods run on the new slice


def test_the_run_summary_says_which_vms_ran_out_and_which_were_recycled() -> None:
    from kubetwin.report.headline import autoscaler_rows

    ran_out = dict(autoscaler_rows(recycling_run(recycle=False).summary))
    assert ran_out["max run duration reached"].startswith("1 VM of nap-g2-standard-4-")
    recycled = dict(autoscaler_rows(recycling_run(recycle=True).summary))
    # within the hour: the first node at 26 min, its replacement (which has its own 50 min) at 51 min
    assert recycled["cluster autoscaler recycling"] == "2 nodes replaced before their max run duration"
    assert "max run duration reached" not in recycled


def test_a_given_node_with_a_termination_time_ends_then() -> None:
    """A Node given in the scenario (or adopted from a dump) that carries GKE's machine-termination-datetime, as
    flex-start nodes do, is deleted by Compute Engine at that time like the twin's own."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "flex-1",
        "labels": {"cloud.google.com/gke-nodepool": "imported", "cloud.google.com/gke-flex-start": "true"},
        "annotations": {TERMINATION: "2026-01-01T00:30:00Z"}},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    r = run(objects=[make_scenario("1h").obj(), node])
    assert [(t, e) for t, e, n in node_events(r) if n == "flex-1"] == [(0.0, "ADDED"), (1800.0, "DELETED")]
    assert [(t, n) for t, n, _ in events(r, "MaxRunDurationReached")] == [(1800.0, "flex-1")]


@pytest.mark.parametrize("value", ["soon", "2026-01-01T00:30:00", "2026-01-01", "2026-01-01T00:30Z"])
def test_a_malformed_termination_time_is_a_warning_and_ends_nothing(value: str) -> None:
    """Not RFC 3339 (Go's time.RFC3339, what GKE writes): a word, a time without its offset, a date, no seconds."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "flex-1", "annotations": {TERMINATION: value}},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}
    diags = [d for d in validate([Manifest(node, "t.yaml", 1)]) if d.severity != "notice"]
    assert [(d.severity, d.field) for d in diags] == [("warning", f"metadata.annotations[{TERMINATION}]")]
    assert "RFC 3339" in diags[0].message
    r = run(objects=[make_scenario("1h").obj(), node])
    assert [e for _, e, n in node_events(r) if n == "flex-1"] == ["ADDED"]

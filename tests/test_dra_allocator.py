"""The structured allocator against the real allocator's own test vectors
(../shared/conformance/dra/dra_vectors.md, from k8s.io/dynamic-resource-allocation v0.34.0 TestAllocator)."""

from __future__ import annotations

import pytest
from dra_builders import claim, class_, node, slice_

from kubetwin.devices.dra.allocator import AllocationError, Allocator, Features

CLASSES = {"class-a": class_("class-a", "driver-a").obj(), "class-b": class_("class-b", "driver-b").obj()}
LOCAL = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}


def allocate(claims, slices, on="node-1", region="region-1", allocated=(), features=Features(), classes=CLASSES,
             consumed=None):
    return Allocator(classes, slices, set(allocated), features, consumed).allocate(node(on, region).obj(), claims)


def results(out):
    return [[tuple(r[k] for k in ("request", "driver", "pool", "device")) + ((True,) if r.get("adminAccess") else ())
             for r in c["devices"]["results"]] for c in out]


def one(name="claim-0", req="req-0", cls="class-a", **kw):
    return claim(name).request(req, cls, **kw).obj()


def test_d1_simple():
    out = allocate([one()], [slice_("slice-1").node("node-1").devices("device-1").obj()])
    assert results(out) == [[("req-0", "driver-a", "pool-1", "device-1")]]
    assert out[0]["nodeSelector"] == LOCAL


def test_d2_other_node():
    slices = [slice_("slice-1").node("node-1").driver("driver-b").devices("device-1").obj(),
              slice_("slice-2").node("node-2").pool("pool-2").devices("device-1").obj()]
    assert results(allocate([one()], slices, on="node-2")) == [[("req-0", "driver-a", "pool-2", "device-1")]]


def test_d4_devices_split_across_pools():
    slices = [slice_("slice-1").node("node-1").devices("device-1").obj(),
              slice_("slice-2").node("node-1").pool("pool-2").devices("device-1").obj()]
    assert results(allocate([one(count=2)], slices)) == [[("req-0", "driver-a", "pool-1", "device-1"),
                                                          ("req-0", "driver-a", "pool-2", "device-1")]]


def test_d5_obsolete_slice_is_ignored():
    slices = [slice_("slice-1-obsolete").node("node-1").devices("device-0").obj(),
              slice_("slice-1").node("node-1").pool("pool-1", generation=2).devices("device-1").obj()]
    assert results(allocate([one()], slices)) == [[("req-0", "driver-a", "pool-1", "device-1")]]


def test_d5_duplicate_device_names_make_the_pool_invalid():
    slices = [slice_("slice-1").node("node-1").pool("pool-1", count=2).devices("device-1").obj(),
              slice_("slice-2").node("node-1").pool("pool-1", count=2).devices("device-1").obj()]
    with pytest.raises(AllocationError, match="^pool pool-1 is invalid: duplicate device name device-1$"):
        allocate([one()], slices)


def test_d6_not_enough_devices():
    slices = [slice_("slice-1").node("node-1").devices("device-1").obj()]
    assert allocate([one(), one("claim-1", "req-1")], slices) is None


def test_d6_missing_class_and_empty_class_name():
    slices = [slice_("slice-1").node("node-1").devices("device-1").obj()]
    with pytest.raises(AllocationError, match="^claim default/claim-0, request req-0: could not retrieve device "
                                              "class class-a: "):
        allocate([one()], slices, classes={})
    with pytest.raises(AllocationError, match=r"^claim default/claim-0, request req-0: missing device class name "
                                              r"\(unsupported request type\?\)$"):
        allocate([one(cls="")], slices)


def test_d7_all_mode():
    slices = [slice_("slice-1").node("node-1").devices("device-1").obj()]
    assert results(allocate([one(mode="All")], slices)) == [[("req-0", "driver-a", "pool-1", "device-1")]]
    both = slices + [slice_("slice-2").node("node-1").driver("driver-b").devices("device-1").obj()]
    out = allocate([one(mode="All"), one("claim-1", cls="class-b")], both)
    assert results(out) == [[("req-0", "driver-a", "pool-1", "device-1")],
                            [("req-0", "driver-b", "pool-1", "device-1")]]
    # the only device goes to the first claim: All then needs a device that is taken
    assert allocate([one("claim-1"), one(mode="All")], slices) is None


def test_d7_all_mode_on_incomplete_pool_is_an_error():
    slices = [slice_("slice-1").node("node-1").pool("pool-1", count=2).devices("device-1").obj()]
    with pytest.raises(AllocationError, match="^claim default/claim-0, request req-0: asks for all devices, but "
                                              "resource pool driver-a/pool-1 is currently being updated$"):
        allocate([one(mode="All")], slices)


def test_d8_network_attached_devices():
    net = [slice_("slice-1").node_selector("region", "region-1").devices("device-1").obj()]
    out = allocate([one()], net)
    assert out[0]["nodeSelector"] == {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "region", "operator": "In", "values": ["region-1"]}]}]}
    assert allocate([one()], net, region="region-2") is None


def test_d8_selectors_of_several_slices_are_anded():
    slices = [slice_("s1").node_selector("region", "region-1").pool("p1").devices("device-1").obj(),
              slice_("s2").all_nodes().pool("p2").devices("device-1").obj(),
              slice_("s3").node_selector("planet", "earth").pool("p3").devices("device-1").obj()]
    slices.append(slice_("s4").pool("p4").devices("device-1").obj())
    slices[-1]["spec"]["nodeSelector"] = LOCAL
    out = allocate([one(count=4)], slices)
    assert out[0]["nodeSelector"] == {"nodeSelectorTerms": [{
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}],
        "matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]},
                             {"key": "planet", "operator": "In", "values": ["earth"]}]}]}
    mixed = [slice_("s1").node_selector("region", "region-1").pool("p1").devices("device-1").obj(),
             slice_("s2").node("node-1").pool("p2").devices("device-1").obj()]
    assert allocate([one(count=2)], mixed)[0]["nodeSelector"] == LOCAL


def test_d10_cel_compile_errors_name_selector_and_position():
    slices = [slice_("slice-1").node("node-1").devices("device-1").obj()]
    for c in (one(selectors=("noSuchVar",)), one(mode="All", selectors=("noSuchVar",))):
        with pytest.raises(AllocationError, match="^claim default/claim-0: selector #0: CEL compile error: "
                                                  ".*undeclared reference") as e:
            allocate([c], slices)
        assert "<input>:1:1" in str(e.value)
    bad = {"class-a": class_("class-a", "driver-a", "noSuchVar").obj()}
    with pytest.raises(AllocationError, match="^class class-a: selector #1: CEL compile error"):
        allocate([one()], slices, classes=bad)


def test_d12_partitionable_devices_share_counters():
    on = Features(partitionable_devices=True)
    def memory(mem):
        return [{"counterSet": "counter-set-1", "counters": {"memory": {"value": mem}}}]
    s = (slice_("slice-1").node("node-1").counters("counter-set-1", memory="8Gi")
         .device("device-1", consumesCounters=memory("4Gi")).device("device-2", consumesCounters=memory("6Gi"))
         .device("device-3", consumesCounters=memory("4Gi")).obj())
    out = allocate([claim("claim-0").request("req-0", "class-a").request("req-1", "class-a").obj()], [s], features=on)
    assert results(out) == [[("req-0", "driver-a", "pool-1", "device-1"), ("req-1", "driver-a", "pool-1", "device-3")]]
    big = (slice_("slice-1").node("node-1").counters("counter-set-1", memory="18Gi")
           .device("device-1", consumesCounters=memory("4Gi"))
           .device("device-2", consumesCounters=memory("16Gi")).obj())
    from decimal import Decimal
    used = {("driver-a", "pool-1", "counter-set-1"): {"memory": Decimal(16 * 2**30)}}
    assert allocate([one()], [big], allocated={("driver-a", "pool-1", "device-2")}, features=on,
                    consumed=used) is None
    assert allocate([one()], [s]) is None  # feature off: devices with consumesCounters are never allocated


def test_d13_device_taints():
    on = Features(device_taints=True)
    s = (slice_("slice-1").node("node-1")
         .device("device-1", taints=[{"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}])
         .device("device-2", taints=[{"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}]).obj())
    assert allocate([one()], [s], features=on) is None
    tol = [{"key": "taint-key", "operator": "Equal", "value": "taint-value-2", "effect": "NoExecute"}]
    assert results(allocate([one(tolerations=tol)], [s], features=on)) == [[("req-0", "driver-a", "pool-1",
                                                                           "device-2")]]


def test_d14_admin_access():
    slices = [slice_("slice-1").node("node-1").devices("device-1").obj()]
    with pytest.raises(AllocationError, match="^claim default/claim-0, request req-0: admin access is requested, "
                                              "but the feature is disabled$"):
        allocate([one(admin=True)], slices, features=Features(admin_access=False))
    out = allocate([one(admin=True)], slices, allocated={("driver-a", "pool-1", "device-1")})
    assert results(out) == [[("req-0", "driver-a", "pool-1", "device-1", True)]]


def test_backtracking_across_requests_with_match_attribute():
    """The first free device of req-0 has no partner under the same root: the search must backtrack."""
    def pcie_root(root):
        return {"resource.kubernetes.io/pcieRoot": {"string": root}}
    s = (slice_("slice-1").node("node-1").device("gpu-0", attributes=pcie_root("pci0"))
         .device("gpu-1", attributes=pcie_root("pci1")).device("gpu-2", attributes=pcie_root("pci1")).obj())
    c = claim("claim-0").request("req-0", "class-a", count=2).match_attribute("resource.kubernetes.io/pcieRoot").obj()
    assert [r[3] for r in results(allocate([c], [s]))[0]] == ["gpu-1", "gpu-2"]
    c = claim("claim-0").request("a", "class-a").request("b", "class-a").match_attribute(
        "resource.kubernetes.io/pcieRoot", "a", "b").obj()
    assert [r[3] for r in results(allocate([c], [s]))[0]] == ["gpu-1", "gpu-2"]


def test_first_available_takes_the_first_subrequest_that_fits():
    s = slice_("slice-1").node("node-1").devices("device-1", "device-2").obj()
    c = claim("claim-0").first_available("gpu", ("big", "class-a", 3, ()), ("small", "class-a", 2, ())).obj()
    assert results(allocate([c], [s])) == [[("gpu/small", "driver-a", "pool-1", "device-1"),
                                            ("gpu/small", "driver-a", "pool-1", "device-2")]]


def test_cel_runtime_error_aborts_allocation():
    s = slice_("slice-1").node("node-1").devices("device-1").obj()
    bad = {"nvidia-gpu": class_("nvidia-gpu", "driver-a", 'device.attributes["memory"].quantity >= "40Gi"').obj()}
    c = claim("claim-0").request("gpu", "nvidia-gpu").obj()
    with pytest.raises(AllocationError, match="^class nvidia-gpu: selector #1: CEL runtime error: no such key: "
                                              "quantity$"):
        allocate([c], [s], classes=bad)


def test_claim_over_the_result_limit_is_an_error():
    slices = [slice_("slice-1").node("node-1").devices(*[f"device-{i}" for i in range(40)]).obj()]
    with pytest.raises(AllocationError, match="^claim default/claim-0: number of requested devices 33 exceeds "
                                              "the claim limit of 32$"):
        allocate([one(count=33)], slices)

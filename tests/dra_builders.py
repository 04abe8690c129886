"""Fluent builders for DRA objects, after the real allocator tests' fixture helpers (allocator_testing.go):
`class_("class-a", "driver-a")`, `claim("claim-0").request("req-0", "class-a")`,
`slice_("slice-1").node("node-1").pool("pool-1").driver("driver-a").devices("device-1")`."""

from __future__ import annotations

from typing import Any


def class_(name: str, driver: str, *exprs: str) -> dict:
    """DeviceClass with selector `device.driver == "<driver>"` (plus any extra expressions)."""
    sels = [{"cel": {"expression": f'device.driver == "{driver}"'}}] + [{"cel": {"expression": e}} for e in exprs]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": sels}}


class ClaimBuilder(dict):
    def __init__(self, name: str, namespace: str = "default"):
        super().__init__(apiVersion="resource.k8s.io/v1", kind="ResourceClaim",
                         metadata={"name": name, "namespace": namespace}, spec={"devices": {"requests": []}})

    def request(self, name: str, cls: str, count: int = 1, mode: str = "ExactCount", selectors: tuple = (),
                admin: bool = False, tolerations: list | None = None) -> ClaimBuilder:
        exact: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
        if mode == "ExactCount":
            exact["count"] = count
        if selectors:
            exact["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        if admin:
            exact["adminAccess"] = True
        if tolerations:
            exact["tolerations"] = tolerations
        self["spec"]["devices"]["requests"].append({"name": name, "exactly": exact})
        return self

    def first_available(self, name: str, *subs: tuple[str, str, int, tuple]) -> ClaimBuilder:
        alts = []
        for sub, cls, count, sels in subs:
            alt: dict[str, Any] = {"name": sub, "deviceClassName": cls, "count": count}
            if sels:
                alt["selectors"] = [{"cel": {"expression": e}} for e in sels]
            alts.append(alt)
        self["spec"]["devices"]["requests"].append({"name": name, "firstAvailable": alts})
        return self

    def match_attribute(self, attr: str, *requests: str) -> ClaimBuilder:
        con: dict[str, Any] = {"matchAttribute": attr}
        if requests:
            con["requests"] = list(requests)
        self["spec"]["devices"].setdefault("constraints", []).append(con)
        return self


def claim(name: str, namespace: str = "default") -> ClaimBuilder:
    return ClaimBuilder(name, namespace)


class SliceBuilder(dict):
    def __init__(self, name: str):
        super().__init__(apiVersion="resource.k8s.io/v1", kind="ResourceSlice",
                         metadata={"name": name, "resourceVersion": "1"},
                         spec={"driver": "driver-a", "pool": {"name": "pool-1", "generation": 1,
                                                              "resourceSliceCount": 1}, "devices": []})

    def node(self, name: str) -> SliceBuilder:
        self["spec"]["nodeName"] = name
        return self

    def all_nodes(self) -> SliceBuilder:
        self["spec"]["allNodes"] = True
        return self

    def node_selector(self, key: str, *values: str) -> SliceBuilder:
        self["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": list(values)}]}]}
        return self

    def pool(self, name: str, generation: int = 1, count: int = 1) -> SliceBuilder:
        self["spec"]["pool"] = {"name": name, "generation": generation, "resourceSliceCount": count}
        return self

    def driver(self, name: str) -> SliceBuilder:
        self["spec"]["driver"] = name
        return self

    def devices(self, *names: str, **fields: Any) -> SliceBuilder:
        for n in names:
            self["spec"]["devices"].append({"name": n, **fields})
        return self

    def device(self, name: str, **fields: Any) -> SliceBuilder:
        self["spec"]["devices"].append({"name": name, **fields})
        return self

    def counters(self, name: str, **values: str) -> SliceBuilder:
        self["spec"].setdefault("sharedCounters", []).append(
            {"name": name, "counters": {k: {"value": v} for k, v in values.items()}})
        return self


def slice_(name: str) -> SliceBuilder:
    return SliceBuilder(name)


def node(name: str, region: str = "region-1") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"region": region,
                                                                                     "planet": "earth"}}}


# -- whole scenarios for kubetwin.run: an H100 node running the NVIDIA DRA driver ---------------------------------
DRA_POOL = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "h100"},
            "spec": {"machineType": "a3-highgpu-8g", "nodeCount": 1,
                     "accelerators": [{"type": "nvidia-h100-80gb", "count": 8,
                                       "gpuDriverInstallation": "INSTALLATION_DISABLED"}],
                     "labels": {"gke-no-default-nvidia-gpu-device-plugin": "true"}}}
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SLICES_AT = 90 + 180  # boot delay + driver install delay (NodePool defaults)


def claim_pod(name: str, claim: str, *, template: bool = False, duration: str = "1h", **ann: str) -> dict:
    """A pod whose container uses one ResourceClaim (or a claim from a template), tolerating the GPU taint."""
    ref = {"name": "gpu", ("resourceClaimTemplateName" if template else "resourceClaimName"): claim}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"kubetwin.io/duration": duration, **ann}},
            "spec": {"resourceClaims": [ref], "tolerations": TOLERATE,
                     "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]}}


def gpu_claim(name: str, count: int, cls: str = "gpu.nvidia.com") -> dict:
    """A ResourceClaim for `count` devices of a DeviceClass (ExactCount)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls,
                                                                          "count": count}}]}}}

"""Fluent builders for DRA objects, after the real allocator tests' fixture helpers (allocator_testing.go), each
ending in `.obj()` as every builder in tests/ (k8s_builders.py): `class_("class-a", "driver-a").obj()`,
`claim("claim-0").request("req-0", "class-a").obj()`,
`slice_("slice-1").node("node-1").pool("pool-1").driver("driver-a").devices("device-1").obj()`."""

from __future__ import annotations

from typing import Any

from k8s_builders import NodePoolWrapper, NodeWrapper, PodWrapper, Wrapper


def class_(name: str, driver: str, *exprs: str) -> Wrapper:
    """DeviceClass with selector `device.driver == "<driver>"` (plus any extra expressions)."""
    sels = [{"cel": {"expression": f'device.driver == "{driver}"'}}] + [{"cel": {"expression": e}} for e in exprs]
    return Wrapper({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                    "spec": {"selectors": sels}})


class ClaimWrapper(Wrapper):
    def request(self, name: str, cls: str, count: int = 1, mode: str = "ExactCount", selectors: tuple = (),
                admin: bool = False, tolerations: list | None = None) -> ClaimWrapper:
        exact: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
        if mode == "ExactCount":
            exact["count"] = count
        if selectors:
            exact["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        if admin:
            exact["adminAccess"] = True
        if tolerations:
            exact["tolerations"] = tolerations
        self._obj["spec"]["devices"]["requests"].append({"name": name, "exactly": exact})
        return self

    def first_available(self, name: str, *subs: tuple[str, str, int, tuple]) -> ClaimWrapper:
        alts = []
        for sub, cls, count, sels in subs:
            alt: dict[str, Any] = {"name": sub, "deviceClassName": cls, "count": count}
            if sels:
                alt["selectors"] = [{"cel": {"expression": e}} for e in sels]
            alts.append(alt)
        self._obj["spec"]["devices"]["requests"].append({"name": name, "firstAvailable": alts})
        return self

    def device_class(self, cls: str) -> ClaimWrapper:
        """Every request's DeviceClass."""
        for req in self._obj["spec"]["devices"]["requests"]:
            req["exactly"]["deviceClassName"] = cls
        return self

    def match_attribute(self, attr: str, *requests: str) -> ClaimWrapper:
        con: dict[str, Any] = {"matchAttribute": attr}
        if requests:
            con["requests"] = list(requests)
        self._obj["spec"]["devices"].setdefault("constraints", []).append(con)
        return self


def claim(name: str, namespace: str = "default") -> ClaimWrapper:
    return ClaimWrapper({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": namespace}, "spec": {"devices": {"requests": []}}})


class SliceWrapper(Wrapper):
    def __init__(self, name: str) -> None:
        super().__init__({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                          "metadata": {"name": name, "resourceVersion": "1"},
                          "spec": {"driver": "driver-a", "pool": {"name": "pool-1", "generation": 1,
                                                                  "resourceSliceCount": 1}, "devices": []}})

    def node(self, name: str) -> SliceWrapper:
        self._obj["spec"]["nodeName"] = name
        return self

    def all_nodes(self) -> SliceWrapper:
        self._obj["spec"]["allNodes"] = True
        return self

    def node_selector(self, key: str, *values: str) -> SliceWrapper:
        self._obj["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": list(values)}]}]}
        return self

    def pool(self, name: str, generation: int = 1, count: int = 1) -> SliceWrapper:
        self._obj["spec"]["pool"] = {"name": name, "generation": generation, "resourceSliceCount": count}
        return self

    def driver(self, name: str) -> SliceWrapper:
        self._obj["spec"]["driver"] = name
        return self

    def devices(self, *names: str, **fields: Any) -> SliceWrapper:
        for n in names:
            self._obj["spec"]["devices"].append({"name": n, **fields})
        return self

    def device(self, name: str, **fields: Any) -> SliceWrapper:
        self._obj["spec"]["devices"].append({"name": name, **fields})
        return self

    def counters(self, name: str, **values: str) -> SliceWrapper:
        self._obj["spec"].setdefault("sharedCounters", []).append(
            {"name": name, "counters": {k: {"value": v} for k, v in values.items()}})
        return self


def slice_(name: str) -> SliceWrapper:
    return SliceWrapper(name)


def node(name: str, region: str = "region-1") -> NodeWrapper:
    return NodeWrapper({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "region": region, "planet": "earth"}}})


# -- whole scenarios for kubetwin.run: an H100 node running the NVIDIA DRA driver ---------------------------------
def dra_pool() -> NodePoolWrapper:
    """One a3-highgpu-8g node "h100" whose GPUs the NVIDIA DRA driver publishes (GKE's device plugin and driver
    install turned off, as GKE's DRA guide asks)."""
    return NodePoolWrapper({"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "h100"},
                            "spec": {"machineType": "a3-highgpu-8g", "nodeCount": 1,
                                     "accelerators": [{"type": "nvidia-h100-80gb", "count": 8,
                                                       "gpuDriverInstallation": "INSTALLATION_DISABLED"}],
                                     "labels": {"gke-no-default-nvidia-gpu-device-plugin": "true"}}})


TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SLICES_AT = 90 + 180  # boot delay + driver install delay (NodePool defaults)


def claim_template(name: str, claim: ClaimWrapper) -> Wrapper:
    """A ResourceClaimTemplate whose claims have `claim`'s spec (one claim per pod that names it)."""
    return Wrapper({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                    "spec": {"spec": claim.obj()["spec"]}})


class ClaimPodWrapper(PodWrapper):
    def template(self) -> ClaimPodWrapper:
        """The claim comes from a ResourceClaimTemplate of that name (one claim per pod)."""
        ref = self._obj["spec"]["resourceClaims"][0]
        ref["resourceClaimTemplateName"] = ref.pop("resourceClaimName")
        return self


def claim_pod(name: str, claim: str) -> ClaimPodWrapper:
    """A pod running 1 h whose container uses one ResourceClaim, tolerating the GPU taint."""
    return ClaimPodWrapper({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "annotations": {"kubetwin.io/duration": "1h"}},
                            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                                     "tolerations": TOLERATE, "containers": [{"name": "c", "image": "x", "resources": {
                                         "claims": [{"name": "gpu"}]}}]}})


def gpu_claim(name: str, count: int) -> ClaimWrapper:
    """A ResourceClaim (no namespace: the scenario's default) for `count` devices of the NVIDIA driver's
    gpu.nvidia.com DeviceClass; `.device_class(...)` picks another."""
    return ClaimWrapper({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                             "deviceClassName": "gpu.nvidia.com", "count": count}}]}}})

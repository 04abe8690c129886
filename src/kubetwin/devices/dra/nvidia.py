"""A twin of the NVIDIA DRA driver for GPUs: one ResourceSlice per GPU node, and the driver's DeviceClasses.

On GKE a node pool runs the DRA driver instead of the device plugin when its nodes carry
`gke-no-default-nvidia-gpu-device-plugin=true` and GPU driver installation is disabled
(https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra); GKE's DRA support excludes
time-sharing, MIG and MPS, so only full GPUs are published. The slice appears once the driver's kubelet
plugin is up (the pool's driverInstallDelay) and goes away with the node.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from typing import Any

import yaml

from kubetwin.devices import mig
from kubetwin.devices.dra.claims import claim_name
from kubetwin.k8s.names import GKE_ACCELERATOR, GKE_NODEPOOL
from kubetwin.k8s.units import parse_duration
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

NO_DEVICE_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"
DRIVER = "gpu.nvidia.com"
MIG_CONFIG = "nvidia.com/mig.config"  # the GPU Operator's mig-manager label: all-<profile> or all-disabled
DYNAMIC_MIG = "kubetwin.io/nvidia-dra-dynamic-mig"  # twin knob for the driver's DynamicMIG feature gate


@functools.cache
def catalog() -> dict[str, Any]:
    return yaml.safe_load(resources.files("kubetwin.catalog").joinpath("data/nvidia-dra.yaml").read_text())


def uses_dra(labels: dict[str, str]) -> bool:
    return labels.get(NO_DEVICE_PLUGIN) == "true"


def device_uuid(prefix: str, seed: str) -> str:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _gpu(node_name: str, accelerator: str, i: int, count: int) -> dict:
    cat = catalog()
    gpu = cat["gpus"][accelerator]
    # Twin assumption: GPUs split evenly over two PCIe roots (one per CPU socket on 8-GPU machines).
    root = "pci0000:00" if count < 2 or i < count // 2 else "pci0000:80"
    return {"name": f"gpu-{i}", "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": device_uuid("GPU", f"{node_name}/{i}")},
        "productName": {"string": gpu["productName"]}, "brand": {"string": "Nvidia"},
        "architecture": {"string": gpu["architecture"]},
        "cudaComputeCapability": {"version": gpu["cudaComputeCapability"]},
        "driverVersion": {"version": cat["driverVersion"]},
        "cudaDriverVersion": {"version": cat["cudaDriverVersion"]},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x04 + i:02x}:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": root},
    }, "capacity": {"memory": {"value": f"{gpu['memory_mib']}Mi"}}}


def _mig(parent: dict, placement: mig.Placement, node_name: str) -> dict:
    """A MIG device as mig.go publishes it (v25.8 name gpu-<minor>-mig-<giProfileId>-<start>-<size>). The
    catalog has no copy-engine/decoder/encoder/JPEG/OFA counts, so those capacities are not published."""
    p = placement.profile
    attrs = {k: v for k, v in parent["attributes"].items() if k not in ("uuid", "type")}
    name = f"{parent['name']}-mig-{p.gi_profile_id}-{placement.start}-{p.size}"
    attrs.update({"type": {"string": "mig"}, "uuid": {"string": device_uuid("MIG", f"{node_name}/{name}")},
                  "parentUUID": parent["attributes"]["uuid"], "profile": {"string": p.name}})
    caps: dict = {"memory": {"value": f"{p.memory_mib}Mi"}}
    if p.sms is not None:
        caps["multiprocessors"] = {"value": str(p.sms)}
    for s in placement.slices:
        caps[f"memorySlice{s}"] = {"value": "1"}
    return {"name": name, "attributes": attrs, "capacity": caps}


def devices(node_name: str, accelerator: str, count: int, mig_config: str = "") -> list[dict]:
    """The devices the driver publishes for `count` GPUs of one model: full GPUs, or with mig-parted's
    `all-<profile>` applied, each GPU's MIG devices instead (a MIG-enabled GPU is not published whole)."""
    if accelerator not in catalog()["gpus"]:
        return []
    out = []
    for i in range(count):
        gpu = _gpu(node_name, accelerator, i, count)
        if mig_config and mig_config != "all-disabled":
            out += [_mig(gpu, pl, node_name) for pl in static_layout(accelerator, mig_config)]
        else:
            out.append(gpu)
    return out


def static_layout(accelerator: str, mig_config: str) -> list[mig.Placement]:
    """mig-parted's all-<profile>: as many instances of the profile as one GPU holds."""
    model = mig.model_of(accelerator)
    if model is None:
        raise mig.MigError(f"{accelerator} does not support MIG")
    name = mig_config.removeprefix("all-")
    prof = mig.profiles(model).get(name)
    if prof is None:
        raise mig.MigError(f"{model} has no MIG profile {name!r}; its profiles are "
                           f"{', '.join(mig.profiles(model))}")
    return mig.layout(model, [name] * prof.max_count)


def partitionable(node_name: str, accelerator: str, i: int, count: int) -> dict:
    """DynamicMIG: one GPU as partitionable devices. A counter set holds the GPU's 8 memory slices; the whole
    GPU and every placement of every profile consume the slices they cover, so the allocator can only pick
    a non-overlapping, physically legal layout (needs DRAPartitionableDevices, alpha and off in 1.34)."""
    gpu = _gpu(node_name, accelerator, i, count)
    counter_set = f"gpu-{i}-counter-set"
    every = {f"memorySlice{s}": {"value": "1"} for s in range(mig.MEMORY_SLICES)}
    whole = {**gpu, "consumesCounters": [{"counterSet": counter_set, "counters": every}]}
    parts = [whole]
    model = mig.model_of(accelerator)
    for prof in (mig.profiles(model) if model else {}).values():
        if prof.kind == "1g+me":
            continue  # media-extension profiles are left out (one per GPU; 19 devices per GPU already)
        for start in prof.starts:
            dev = _mig(gpu, mig.Placement(prof, start), node_name)
            dev["consumesCounters"] = [{"counterSet": counter_set, "counters": {
                f"memorySlice{s}": {"value": "1"} for s in range(start, start + prof.size)}}]
            parts.append(dev)
    return {"sharedCounters": [{"name": counter_set, "counters": every}], "devices": parts}


def catalog_count(machine_type: str) -> int:
    from kubetwin import catalog as machines

    return machines.machine_type(machine_type).gpu_count


def pool_gpu_count(spec: dict) -> int:
    """How many GPUs a node of the pool has for the driver to publish: the accelerator count, else the machine's."""
    accels = spec.get("accelerators") or []
    return accels[0]["count"] if accels else catalog_count(spec["machineType"])


def device_classes() -> list[Obj]:
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": expr}}]}}
            for name, expr in catalog()["deviceClasses"].items()]


def slices_for(node_name: str, accelerator: str, count: int, labels: dict[str, str], suffix: Any) -> list[Obj]:
    """The node's pool: one slice, or with DynamicMIG one slice per GPU (a slice holds at most 64 devices
    that consume counters)."""
    def one(spec: dict, n: int) -> Obj:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{node_name}-{DRIVER}-{suffix()}"},
                "spec": {"driver": DRIVER, "nodeName": node_name,
                         "pool": {"name": node_name, "generation": 1, "resourceSliceCount": n}, **spec}}
    if labels.get(DYNAMIC_MIG) == "true" and mig.model_of(accelerator):
        return [one(partitionable(node_name, accelerator, i, count), count) for i in range(count)]
    return [one({"devices": devices(node_name, accelerator, count, labels.get(MIG_CONFIG, ""))}, 1)]


class NvidiaDraDriver:
    """Publishes a node's ResourceSlice after its driver comes up; installs the DeviceClasses once."""

    def __init__(self, store: Store, env: Environment, suffix: Any) -> None:
        self.store, self.env, self.suffix = store, env, suffix
        self._slices: dict[str, list[str]] = {}
        store.watch("Node", self._on_node)

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":  # the node's slices go with it, written after dispatch (handlers only enqueue)
            gone = self._slices.pop(name, [])
            if gone:
                self.env.after(0, lambda: self._unpublish(gone))
            return
        labels = node["metadata"].get("labels") or {}
        if etype != "ADDED" or not uses_dra(labels) or not labels.get(GKE_ACCELERATOR):
            return
        pool = self.store.get("NodePool", "", labels.get(GKE_NODEPOOL, ""))
        if pool is None:
            return
        spec = pool["spec"]
        count = pool_gpu_count(spec)
        delay = parse_duration(spec.get("driverInstallDelay", "3m"))
        if count:
            self.env.after(delay, lambda: self._publish(name, labels, count))

    def _unpublish(self, slices: list[str]) -> None:
        for sl in slices:
            if self.store.get("ResourceSlice", "", sl):
                self.store.delete("ResourceSlice", "", sl)

    def _publish(self, node_name: str, labels: dict[str, str], count: int) -> None:
        if self.store.get("Node", "", node_name) is None:
            return
        for cls in device_classes():
            if self.store.get("DeviceClass", "", cls["metadata"]["name"]) is None:
                self.store.create(cls)
        for sl in slices_for(node_name, labels[GKE_ACCELERATOR], count, labels, self.suffix):
            self._slices.setdefault(node_name, []).append(sl["metadata"]["name"])
            self.store.create(sl)


def _device_share(d: dict) -> tuple[str, float] | None:
    """(physical GPU uuid, share of it) of one of the driver's published devices: a whole GPU is 1, a MIG device
    the share of its GPU's 8 memory slices it holds; None for anything else."""
    attrs = d.get("attributes") or {}
    kind = (attrs.get("type") or {}).get("string")
    if kind == "gpu":
        return attrs["uuid"]["string"], 1.0
    if kind == "mig":
        slices = sum(1 for c in d.get("capacity") or {} if c.startswith("memorySlice"))
        return attrs["parentUUID"]["string"], slices / mig.MEMORY_SLICES
    return None


def _device_shares(store: Store, pools: set[str] | None = None) -> tuple[dict[tuple[str, str], float],
                                                                           dict[str, set[str]]]:
    """The driver's published GPU devices: (pool, device) -> the share of a physical GPU it holds, and per node the
    physical GPUs' UUIDs; only the pools named, when given (pools are named after nodes)."""
    weight: dict[tuple[str, str], float] = {}
    physical: dict[str, set[str]] = {}
    for s in store.list("ResourceSlice"):
        spec = s["spec"]
        node = spec.get("nodeName")
        if spec.get("driver") != DRIVER or not node or (pools is not None and spec["pool"]["name"] not in pools):
            continue
        for d in spec.get("devices") or []:
            share = _device_share(d)
            if share is not None:
                physical.setdefault(node, set()).add(share[0])
                weight[(spec["pool"]["name"], d["name"])] = share[1]
    return weight, physical


def published_gpus(store: Store, node: str) -> int:
    """The physical GPUs the driver publishes for one node (its pool is named after the node)."""
    return len(_device_shares(store, {node})[1].get(node, ()))


def gpu_devices_by_node(store: Store) -> dict[str, list[float]]:
    """[allocated, published] GPUs per node through DRA, for utilization: a MIG device counts as the share of
    its GPU's 8 memory slices it holds; a GPU published both whole and as partitions (DynamicMIG) once."""
    weight, physical = _device_shares(store)
    out = {node: [0.0, float(len(uuids))] for node, uuids in physical.items()}
    for c in store.list("ResourceClaim"):
        st = c.get("status") or {}
        if not st.get("reservedFor"):
            continue
        for r in ((st.get("allocation") or {}).get("devices") or {}).get("results") or []:
            if r["driver"] == DRIVER and not r.get("adminAccess") and r["pool"] in out:
                out[r["pool"]][0] += weight.get((r["pool"], r["device"]), 0.0)  # pools are named after nodes
    return out


def pod_gpus(store: Store, pod: Obj) -> float:
    """GPUs a pod holds through its allocated ResourceClaims (MIG devices as shares), for the work a stopped pod
    loses: what its claims' allocation results name on the driver's slices (admin access holds none)."""
    results = _claim_results(store, pod)
    if not results:
        return 0.0
    weight, _ = _device_shares(store, {r["pool"] for r in results})
    return sum(weight.get((r["pool"], r["device"]), 0.0) for r in results)


def _claim_results(store: Store, pod: Obj, container: dict | None = None) -> list[dict]:
    """The driver's allocation results (admin access excluded) of the claims `container` uses -- those its
    resources.claims name (a request, when one is named) --, or of every claim of the pod when it is None."""
    return claim_results(store, pod, DRIVER, container)


def claim_results(store: Store, pod: Obj, driver: str, container: dict | None = None) -> list[dict]:
    """`driver`'s allocation results (admin access excluded) of the pod's allocated claims (those `container`
    uses, when given): what a DRA driver's kubelet plugin prepares for the pod (this driver, or DRANET's NICs)."""
    ns = pod["metadata"].get("namespace") or "default"
    entries = {pc.get("name"): pc for pc in pod["spec"].get("resourceClaims") or []}
    uses = ((container or {}).get("resources") or {}).get("claims") if container is not None else None
    wanted = [(u.get("name"), u.get("request")) for u in uses or []] if container is not None else \
        [(n, None) for n in entries]
    results = []
    for entry, request in wanted:
        pc = entries.get(entry)
        name = claim_name(pod, pc) if pc else None
        claim = store.get("ResourceClaim", ns, name) if name else None
        alloc = ((claim or {}).get("status") or {}).get("allocation") or {}
        results += [r for r in (alloc.get("devices") or {}).get("results") or []
                    if r.get("driver") == driver and not r.get("adminAccess")
                    and (not request or str(r.get("request", "")).split("/")[0] == request)]
    return results


def claimed_devices(store: Store, pod: Obj, container: dict | None = None) -> list[dict]:
    """The driver's published devices (their ResourceSlice entries: attributes, capacity) that the allocation of
    the pod's ResourceClaims gives `container` -- the claims its resources.claims name (a request, when one is
    named), every claim of the pod when `container` is None --, in the allocation's order; admin access gives
    none. What devices/container.py turns into the devices a container sees."""
    results = _claim_results(store, pod, container)
    if not results:
        return []
    published, pools = {}, {r["pool"] for r in results}
    for s in store.list("ResourceSlice"):
        spec = s["spec"]
        if spec.get("driver") == DRIVER and spec["pool"]["name"] in pools:
            published.update({(spec["pool"]["name"], d["name"]): d for d in spec.get("devices") or []})
    return [published[(r["pool"], r["device"])] for r in results if (r["pool"], r["device"]) in published]

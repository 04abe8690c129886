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

from kubetwin.api.units import parse_duration
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

NO_DEVICE_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"
DRIVER = "gpu.nvidia.com"


@functools.cache
def catalog() -> dict[str, Any]:
    return yaml.safe_load(resources.files("kubetwin.catalog").joinpath("data/nvidia-dra.yaml").read_text())


def uses_dra(labels: dict[str, str]) -> bool:
    return labels.get(NO_DEVICE_PLUGIN) == "true"


def devices(node_name: str, accelerator: str, count: int) -> list[dict]:
    """The devices the driver publishes for `count` GPUs of one model."""
    cat = catalog()
    gpu = cat["gpus"].get(accelerator)
    if gpu is None:
        return []
    out = []
    for i in range(count):
        uid = hashlib.sha256(f"{node_name}/{i}".encode()).hexdigest()
        # Twin assumption: GPUs split evenly over two PCIe roots (one per CPU socket on 8-GPU machines).
        root = "pci0000:00" if count < 2 or i < count // 2 else "pci0000:80"
        out.append({"name": f"gpu-{i}", "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"},
            "productName": {"string": gpu["productName"]}, "brand": {"string": "Nvidia"},
            "architecture": {"string": gpu["architecture"]},
            "cudaComputeCapability": {"version": gpu["cudaComputeCapability"]},
            "driverVersion": {"version": cat["driverVersion"]},
            "cudaDriverVersion": {"version": cat["cudaDriverVersion"]},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x04 + i:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": root},
        }, "capacity": {"memory": {"value": f"{gpu['memory_mib']}Mi"}}})
    return out


def catalog_count(machine_type: str) -> int:
    from kubetwin import catalog as machines

    return machines.machine_type(machine_type).gpu_count


def device_classes() -> list[Obj]:
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": expr}}]}}
            for name, expr in catalog()["deviceClasses"].items()]


def slice_for(node_name: str, accelerator: str, count: int, suffix: str) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{DRIVER}-{suffix}"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices(node_name, accelerator, count)}}


class NvidiaDraDriver:
    """Publishes a node's ResourceSlice after its driver comes up; installs the DeviceClasses once."""

    def __init__(self, store: Store, env: Environment, suffix: Any) -> None:
        self.store, self.env, self.suffix = store, env, suffix
        self._slices: dict[str, str] = {}
        store.watch("Node", self._on_node)

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            sl = self._slices.pop(name, None)
            if sl and self.store.get("ResourceSlice", "", sl):
                self.store.delete("ResourceSlice", "", sl)
            return
        labels = node["metadata"].get("labels") or {}
        if etype != "ADDED" or not uses_dra(labels) or not labels.get("cloud.google.com/gke-accelerator"):
            return
        pool = self.store.get("NodePool", "", labels.get("cloud.google.com/gke-nodepool", ""))
        if pool is None:
            return
        spec = pool["spec"]
        accels = spec.get("accelerators") or []
        count = accels[0]["count"] if accels else catalog_count(spec["machineType"])
        delay = parse_duration(spec.get("driverInstallDelay", "3m"))
        if count:
            self.env.after(delay, lambda: self._publish(name, labels["cloud.google.com/gke-accelerator"], count))

    def _publish(self, node_name: str, accelerator: str, count: int) -> None:
        if self.store.get("Node", "", node_name) is None:
            return
        for cls in device_classes():
            if self.store.get("DeviceClass", "", cls["metadata"]["name"]) is None:
                self.store.create(cls)
        sl = slice_for(node_name, accelerator, count, self.suffix())
        self._slices[node_name] = sl["metadata"]["name"]
        self.store.create(sl)


def gpu_devices_by_node(store: Store) -> dict[str, list[int]]:
    """[allocated, published] full GPUs per node through DRA (for utilization and cost attribution)."""
    out: dict[str, list[int]] = {}
    for s in store.list("ResourceSlice"):
        spec = s["spec"]
        if spec.get("driver") == DRIVER and spec.get("nodeName"):
            n = sum(1 for d in spec.get("devices") or []
                    if ((d.get("attributes") or {}).get("type") or {}).get("string") == "gpu")
            out.setdefault(spec["nodeName"], [0, 0])[1] += n
    for c in store.list("ResourceClaim"):
        st = c.get("status") or {}
        if not st.get("reservedFor"):
            continue
        for r in ((st.get("allocation") or {}).get("devices") or {}).get("results") or []:
            if r["driver"] == DRIVER and not r.get("adminAccess") and r["pool"] in out:
                out[r["pool"]][0] += 1  # the driver names each node's pool after the node
    return out

"""A twin of DRANET, the DRA network driver (kubernetes-sigs/dranet, driver ``dra.net``): a GPU node's RDMA NICs
published as DRA devices, so a ResourceClaim can ask for NICs beside its GPUs and, with
``constraints: [{matchAttribute: resource.kubernetes.io/pcieRoot}]``, get the NICs on its GPUs' PCIe root.

What the driver publishes (kubernetes-sigs/dranet@f258477 pkg/inventory/db.go scan, pkg/apis/attributes.go,
pkg/names/names.go): one device per PCI network function, named after its PCI address (``pci-0000-c8-00-0``,
NormalizePCIAddress), with ``dra.net/pciAddress``, ``dra.net/ifName``, ``dra.net/mac``, ``dra.net/mtu``,
``dra.net/numaNode`` (int), ``dra.net/pciVendor``, ``dra.net/rdma`` (bool), ``dra.net/rdmaDevice`` (the kernel RDMA
link, ``mlx5_N``), and the standardized ``resource.kubernetes.io/pcieRoot`` and ``resource.kubernetes.io/numaNode``
(k8s.io/dynamic-resource-allocation/deviceattribute); on GCE also ``gce.dra.net/machineType`` and the
``gce.dra.net/block`` / ``subBlock`` / ``host`` of the VM (pkg/cloudprovider/gce/gce.go). The node's default
(uplink) interface is left out. On GKE A3 Ultra / A4 the GPU NICs are ``gpu{i}rdma0`` on ``mlx5_{i}``, MTU 8896,
"Mellanox Technologies", NUMA node 0 or 1 (the project's examples/demo_gke_rdma/README.md).

The twin publishes them for GPU machines with RDMA NICs (catalog network.yaml tiers ``rdma`` and ``rdma_a4x``: 8
ConnectX-7 on A3 Ultra / A4, 4 on A4X, one per GPU) whose nodes carry GKE's label
``cloud.google.com/gke-networking-dra-driver=true`` (how GKE's managed DRANET is turned on for a node pool, with
``--accelerator-network-profile=auto``). Twin assumptions: NIC i sits on GPU i's PCIe root (the NVIDIA driver
twin's two roots, one per socket: devices/dra/nvidia.py) and NUMA node, at an arbitrary PCI bus number; the
slice appears when the node is added. The DeviceClasses installed: ``dranet`` (the project's examples:
``device.driver == "dra.net"``) and ``mrdma.google.com`` (the class GKE's managed DRANET installs for GPU RDMA
NICs, here selecting the same driver's RDMA devices).
"""

from __future__ import annotations

import fnmatch
import functools
from importlib import resources
from typing import Any

import yaml

from kubetwin.devices.dra.nvidia import claim_results
from kubetwin.k8s.names import INSTANCE_TYPE
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

DRIVER = "dra.net"
ENABLED_LABEL = "cloud.google.com/gke-networking-dra-driver"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA_NODE = "resource.kubernetes.io/numaNode"
DEVICE_CLASSES = {
    "dranet": 'device.driver == "dra.net"',
    "mrdma.google.com": 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true',
}
RDMA_TIERS = ("rdma", "rdma_a4x")  # catalog network.yaml tiers whose machines have one RDMA NIC per GPU


@functools.cache
def _tiers() -> dict[str, Any]:
    text = resources.files("kubetwin.catalog").joinpath("data/network.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)["tiers"]


def nic_count(machine_type: str) -> int:
    """The RDMA NICs of a machine type: node line rate / per-GPU rate of its network.yaml tier (8 on A3 Ultra and
    A4, 4 on A4X); 0 for machines without GPU RDMA NICs."""
    for name in RDMA_TIERS:
        t = _tiers()[name]
        if any(fnmatch.fnmatch(machine_type, p) for p in t["machines"]):
            return round(float(t["node_line_gbs"]) / float(t["per_gpu_gbs"]))
    return 0


def uses_dranet(labels: dict[str, str]) -> bool:
    return labels.get(ENABLED_LABEL) == "true"


def nic(node_name: str, machine_type: str, i: int, count: int, labels: dict[str, str]) -> dict:
    """NIC i of `count` as DRANET publishes it (module docstring)."""
    upper = count >= 2 and i >= count // 2
    address = f"0000:{0x91 + i:02x}:00.0"  # twin assumption: only the root and NUMA node matter
    attrs: dict[str, dict] = {
        "dra.net/pciAddress": {"string": address},
        "dra.net/ifName": {"string": f"gpu{i}rdma0"},
        "dra.net/mtu": {"int": 8896},
        "dra.net/numaNode": {"int": 1 if upper else 0},
        "dra.net/pciVendor": {"string": "Mellanox Technologies"},
        "dra.net/rdma": {"bool": True},
        "dra.net/rdmaDevice": {"string": f"mlx5_{i}"},
        "dra.net/state": {"string": "up"},
        "dra.net/type": {"string": "device"},
        "dra.net/virtual": {"bool": False},
        PCIE_ROOT: {"string": "pci0000:80" if upper else "pci0000:00"},
        NUMA_NODE: {"int": 1 if upper else 0},
        "gce.dra.net/machineType": {"string": machine_type},
    }
    for key, label in (("block", "cloud.google.com/gce-topology-block"),
                       ("subBlock", "cloud.google.com/gce-topology-subblock")):
        if labels.get(label):
            attrs[f"gce.dra.net/{key}"] = {"string": labels[label]}
    return {"name": "pci-" + address.replace(":", "-").replace(".", "-"), "attributes": attrs}


def device_classes() -> list[Obj]:
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": expr}}]}} for name, expr in DEVICE_CLASSES.items()]


def slice_for(node_name: str, machine_type: str, labels: dict[str, str], suffix: Any) -> Obj | None:
    """The node's one ResourceSlice of RDMA NICs (None: the machine has none)."""
    count = nic_count(machine_type)
    if not count:
        return None
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{DRIVER}-{suffix()}"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [nic(node_name, machine_type, i, count, labels) for i in range(count)]}}


class DranetDriver:
    """Publishes a labelled GPU node's RDMA NICs when it is added and removes them with it; installs the
    DeviceClasses with the first slice. Nodes without the label are never touched (no names drawn)."""

    def __init__(self, store: Store, env: Environment, suffix: Any) -> None:
        self.store, self.env, self.suffix = store, env, suffix
        self._slices: dict[str, str] = {}
        store.watch("Node", self._on_node)

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            gone = self._slices.pop(name, None)
            if gone:
                self.env.after(0, lambda: self._unpublish(gone))
            return
        labels = node["metadata"].get("labels") or {}
        if etype != "ADDED" or not uses_dranet(labels) or not nic_count(labels.get(INSTANCE_TYPE, "")):
            return
        self.env.after(0, lambda: self._publish(name, labels))

    def _unpublish(self, name: str) -> None:
        if self.store.get("ResourceSlice", "", name):
            self.store.delete("ResourceSlice", "", name)

    def _publish(self, node_name: str, labels: dict[str, str]) -> None:
        if self.store.get("Node", "", node_name) is None:
            return
        for cls in device_classes():
            if self.store.get("DeviceClass", "", cls["metadata"]["name"]) is None:
                self.store.create(cls)
        sl = slice_for(node_name, labels.get(INSTANCE_TYPE, ""), labels, self.suffix)
        if sl is not None:
            self._slices[node_name] = sl["metadata"]["name"]
            self.store.create(sl)


def claimed_nics(store: Store, pod: Obj) -> list[dict]:
    """The RDMA NICs (their slice entries) the pod's allocated ResourceClaims hold from DRANET."""
    results = claim_results(store, pod, DRIVER)
    if not results:
        return []
    pools = {r["pool"] for r in results}
    published: dict[tuple[str, str], dict] = {}
    for s in store.list("ResourceSlice"):
        spec = s["spec"]
        if spec.get("driver") == DRIVER and spec["pool"]["name"] in pools:
            published.update({(spec["pool"]["name"], d["name"]): d for d in spec.get("devices") or []})
    nics = [published.get((r["pool"], r["device"])) for r in results]
    return [d for d in nics if d and ((d.get("attributes") or {}).get("dra.net/rdma") or {}).get("bool")]

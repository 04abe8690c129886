"""NodePool controller: turns a kubetwin NodePool into GKE-shaped Node objects after a boot delay."""

from __future__ import annotations

import hashlib

from kubetwin import catalog
from kubetwin.api.units import parse_duration
from kubetwin.devices import mig, sharing
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}  # GKE GPU node pools
NODE_VERSION = "v1.34.1-gke.1829001"


def _suffix(seed: str, n: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


class NodePoolController:
    """Creates nodeCount nodes per zone (autoscaling: minNodeCount per zone) and tracks node lifetimes."""

    def __init__(self, store: Store, env: Environment, cluster: str = "kubetwin") -> None:
        self.store, self.env, self.cluster = store, env, cluster
        self.node_seconds: dict[str, float] = {}
        self._up_since: dict[str, float] = {}
        self.pool_of: dict[str, str] = {}
        self._names: set[str] = set()
        store.watch("NodePool", self._on_pool)
        store.watch("Node", self._on_static_node)

    def _on_static_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        """A Node given in the scenario itself (as KWOK fakes them): account it under its nodepool label."""
        name = node["metadata"]["name"]
        if etype != "ADDED" or name in self._names:
            return
        self.pool_of[name] = (node["metadata"].get("labels") or {}).get("cloud.google.com/gke-nodepool", "static")
        self._up_since[name] = self.env.now
    def _on_pool(self, etype: str, pool: Obj, old: Obj | None) -> None:
        if etype != "ADDED":
            return
        spec = pool["spec"]
        name = pool["metadata"]["name"]
        mt = catalog.machine_type(spec["machineType"])
        per_zone = spec.get("nodeCount")
        if per_zone is None:
            per_zone = (spec.get("autoscaling") or {}).get("minNodeCount", 0)
        boot = parse_duration(spec.get("bootDelay", "90s"))
        group = _suffix(f"{self.cluster}/{name}", 8)
        for zone in spec.get("zones") or ["us-central1-a"]:
            for i in range(per_zone):
                salt = 0
                node_name = f"gke-{self.cluster}-{name}-{group}-{_suffix(f'{name}/{zone}/{i}', 4)}"
                while node_name in self._names:  # GKE's 4-character instance suffixes are unique per group
                    salt += 1
                    node_name = f"gke-{self.cluster}-{name}-{group}-{_suffix(f'{name}/{zone}/{i}/{salt}', 4)}"
                self._names.add(node_name)
                self.env.after(boot, lambda z=zone, nn=node_name: self._register(pool, mt, z, nn))

    def _register(self, pool: Obj, mt: catalog.MachineType, zone: str, node_name: str) -> None:
        spec = pool["spec"]
        pool_name = pool["metadata"]["name"]
        accels = spec.get("accelerators") or []
        gpu = accels[0]["type"] if accels else mt.gpu
        labels = {
            "kubernetes.io/hostname": node_name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": mt.name, "node.kubernetes.io/instance-type": mt.name,
            "topology.kubernetes.io/region": zone.rsplit("-", 1)[0], "topology.kubernetes.io/zone": zone,
            "cloud.google.com/gke-nodepool": pool_name, "cloud.google.com/machine-family": mt.family,
            "cloud.google.com/gke-os-distribution": "cos", "cloud.google.com/gke-boot-disk": "pd-balanced",
            **(spec.get("labels") or {}),
        }
        taints = [dict(t) for t in spec.get("taints") or []]
        if spec.get("spot"):
            labels["cloud.google.com/gke-spot"] = "true"
            labels["cloud.google.com/gke-provisioning"] = "spot"
        partition = accels[0].get("gpuPartitionSize") if accels else None
        if partition:
            labels[mig.PARTITION_LABEL] = partition
        shared, share_labels, _ = sharing.gke_sharing(accels[0].get("gpuSharingConfig") if accels else None)
        labels.update(share_labels)
        if gpu:
            labels["cloud.google.com/gke-accelerator"] = gpu
            labels["cloud.google.com/gke-gpu"] = "true"
            taints.append(dict(GPU_TAINT))
        if spec.get("placementPolicy"):
            labels["cloud.google.com/gke-placement-group"] = f"{pool_name}-placement"
        max_pods = int(spec.get("maxPodsPerNode", 110))
        cap = {k: str(v) for k, v in catalog.capacity(mt, max_pods).items()}
        alloc = {k: str(v) for k, v in catalog.allocatable(mt, max_pods).items()}
        cap["cpu"], alloc["cpu"] = f"{mt.vcpus}", f"{alloc['cpu']}m"  # quantities as the kubelet reports them
        now = self.store.timestamp(self.env.now)
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name, "labels": labels, "annotations": {
                "kubetwin.io/hourly-price-usd": f"{catalog.hourly_price(mt, bool(spec.get('spot'))):.6f}"}},
            "spec": {"providerID": f"gce://kubetwin/{zone}/{node_name}", "taints": taints},
            "status": {"capacity": cap, "allocatable": alloc, "nodeInfo": {"kubeletVersion": NODE_VERSION},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status", "lastTransitionTime": now}]},
        }
        self.store.create(node)
        self.pool_of[node_name] = pool_name
        self._up_since[node_name] = self.env.now
        gpus = (accels[0]["count"] if accels else mt.gpu_count) if gpu else 0
        driver = accels[0].get("gpuDriverInstallation", "DEFAULT") if accels else "DEFAULT"
        if gpus and partition:  # GKE advertises every MIG partition as one nvidia.com/gpu
            gpus *= mig.partition_count(mig.model_of(gpu) or "", partition)
        gpus = shared.advertised({"nvidia.com/gpu": gpus})["nvidia.com/gpu"] if gpus else 0
        # DRA node pools run the NVIDIA DRA driver (devices/dra/nvidia.py) instead of the device plugin.
        if gpus and driver != "INSTALLATION_DISABLED" and not nvidia_dra.uses_dra(labels):
            delay = parse_duration(spec.get("driverInstallDelay", "3m"))
            self.env.after(delay, lambda: self._driver_ready(node_name, gpus))

    def _driver_ready(self, node_name: str, gpus: int) -> None:
        """The GKE driver installer finished: the device plugin advertises nvidia.com/gpu."""
        def add(n: Obj) -> Obj:
            st = n["status"]
            return {**n, "status": {**st, "capacity": {**st["capacity"], "nvidia.com/gpu": str(gpus)},
                                    "allocatable": {**st["allocatable"], "nvidia.com/gpu": str(gpus)}}}
        self.store.patch("Node", "", node_name, add)

    def finish(self, until: float) -> None:
        """Close node lifetimes at the end of the run (for cost)."""
        for name, since in self._up_since.items():
            self.node_seconds[name] = self.node_seconds.get(name, 0.0) + (until - since)
        self._up_since.clear()

"""GPUDirect set-ups as GKE's guides write them (GoogleCloudPlatform/container-engine-accelerators@992db81
gpudirect-tcpx/nccl-test-latest.yaml, gpudirect-tcpxo/nccl-test-latest.yaml, gpudirect-rdma/nccl-test.yaml and
the installer DaemonSets), for tests: the cluster objects and a pod template with everything a pod needs."""

from __future__ import annotations

import copy
import json

# machine type, GPU, capability (workloads/network.py), GPUs per node
SHAPES = {
    "a3-high": ("a3-highgpu-8g", "nvidia-h100-80gb", "tcpx", 8),
    "a3-mega": ("a3-megagpu-8g", "nvidia-h100-mega-80gb", "tcpxo", 8),
    "a3-ultra": ("a3-ultragpu-8g", "nvidia-h200-141gb", "rdma", 8),
    "a4": ("a4-highgpu-8g", "nvidia-b200", "rdma", 8),
}
INSTALLER_IMAGE = {
    "tcpx": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
    "tcpxo": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
    "rdma": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1",
}
INSTALLER_NAME = {"tcpx": "nccl-tcpx-installer", "tcpxo": "nccl-tcpxo-installer", "rdma": "nccl-rdma-installer"}
SIDECAR_IMAGE = {"tcpx": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
                 "tcpxo": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"}


def network_names(plugin: str) -> list[str]:
    """The guides' Network names: vpc1..vpc4 (TCPX), vpc1..vpc8 (TCPXO), rdma-0..rdma-7 (RDMA)."""
    return {"tcpx": [f"vpc{i}" for i in range(1, 5)], "tcpxo": [f"vpc{i}" for i in range(1, 9)],
            "rdma": [f"rdma-{i}" for i in range(8)]}[plugin]


def param_set(name: str, plugin: str) -> dict:
    return {"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": name},
            "spec": {"vpc": f"{name}-net", "vpcSubnet": f"{name}-sub",
                     "deviceMode": "RDMA" if plugin == "rdma" else "NetDevice"}}


def network_object(name: str) -> dict:
    return {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": name},
            "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                         "name": name}}}


def installer(plugin: str) -> dict:
    name = INSTALLER_NAME[plugin]
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"k8s-app": name}}, "template": {
                "metadata": {"labels": {"k8s-app": name}},
                "spec": {"tolerations": [{"operator": "Exists"}], "hostNetwork": True,
                         "initContainers": [{"name": name, "image": INSTALLER_IMAGE[plugin]}],
                         "containers": [{"name": "pause", "image": "gke.gcr.io/pause:3.8"}]}}}}


def cluster_objects(plugin: str) -> list[dict]:
    """The GKENetworkParamSets and Networks of the GPU NICs and the plugin's installer DaemonSet."""
    names = network_names(plugin)
    return [*(param_set(n, plugin) for n in names), *(network_object(n) for n in names), installer(plugin)]


def set_up(template: dict, plugin: str) -> dict:
    """A copy of a pod template (metadata + spec; its first container runs NCCL) with the guide's set-up."""
    t = copy.deepcopy(template)
    meta, spec = t.setdefault("metadata", {}), t.setdefault("spec", {})
    ifaces = [{"interfaceName": "eth0", "network": "default"}]
    first = 2 if plugin == "rdma" else 1
    ifaces += [{"interfaceName": f"eth{first + i}", "network": n} for i, n in enumerate(network_names(plugin))]
    meta.setdefault("annotations", {}).update({"networking.gke.io/default-interface": "eth0",
                                               "networking.gke.io/interfaces": json.dumps(ifaces)})
    gpu = spec["containers"][0]
    env = gpu.setdefault("env", [])
    env.append({"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"})
    mounts = gpu.setdefault("volumeMounts", [])
    vols = spec.setdefault("volumes", [])
    if plugin == "rdma":
        vols += [{"name": "library-dir-host", "hostPath": {"path": "/home/kubernetes/bin/nvidia"}},
                 {"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib"}}]
        mounts += [{"name": "library-dir-host", "mountPath": "/usr/local/nvidia"},
                   {"name": "gib", "mountPath": "/usr/local/gib"}]
        return t
    vols += [{"name": "libraries", "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib64"}},
             {"name": "sys", "hostPath": {"path": "/sys"}}, {"name": "proc-sys", "hostPath": {"path": "/proc/sys"}}]
    mounts.append({"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"})
    daemon_mounts = [{"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"},
                     {"name": "sys", "mountPath": "/hostsysfs"}, {"name": "proc-sys", "mountPath": "/hostprocsysfs"}]
    if plugin == "tcpx":
        vols.append({"name": "tcpx-socket", "hostPath": {"path": "/run/tcpx"}})
        daemon_mounts.append({"name": "tcpx-socket", "mountPath": "/run/tcpx"})
        mounts.append({"name": "tcpx-socket", "mountPath": "/tmp"})
    else:
        vols.append({"name": "aperture-devices", "hostPath": {"path": "/dev/aperture_devices"}})
        mounts.append({"name": "aperture-devices", "mountPath": "/dev/aperture_devices"})
        env.append({"name": "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "value": "/dev/aperture_devices"})
    spec["containers"].append({"name": f"{plugin}-daemon", "image": SIDECAR_IMAGE[plugin],
                               "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                               "volumeMounts": daemon_mounts,
                               "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}]})
    return t

"""What a pod needs before NCCL uses GPUDirect on a GPUDirect machine, and what it uses without it.

A node pool of A3 High (TCPX), A3 Mega (TCPXO), A3 Ultra / A4 (RDMA) or A4X (RDMA) gives its nodes the extra GPU
NICs, but a pod only reaches them when its manifest does what GKE's guides say (cloud.google.com/kubernetes-engine/
docs/how-to/gpu-bandwidth-gpudirect-tcpx "Maximize GPU network bandwidth with GPUDirect and multi-networking", and
.../gpu-bandwidth-gpudirect-rdma for A3 Ultra / A4; the manifests they apply are GoogleCloudPlatform/
container-engine-accelerators@992db81 gpudirect-tcpx/, gpudirect-tcpxo/, gpudirect-rdma/):

- **multi-network interfaces**: the annotations ``networking.gke.io/default-interface`` and
  ``networking.gke.io/interfaces`` (a JSON list of {interfaceName, network}) naming, besides ``default``, one
  Network per GPU NIC — 4 on A3 High (vpc1..vpc4), 8 on A3 Mega (vpc1..vpc8), 8 on A3 Ultra / A4 (rdma-0..rdma-7),
  4 on A4X — each a ``networking.gke.io/v1`` Network of ``type: Device`` whose ``parametersRef`` names a
  GKENetworkParamSet that exists, with ``deviceMode: NetDevice`` (TCPX/TCPXO) or ``deviceMode: RDMA``;
- **the NCCL plugin**: its installer DaemonSet (nccl-tcpx-installer / nccl-tcpxo-installer / nccl-rdma-installer,
  recognized by their images ``gpudirect-tcpx/nccl-plugin-gpudirecttcpx``, ``gpudirect-tcpxo/nccl-plugin-
  gpudirecttcpx``, ``gpudirect-gib/nccl-plugin-gib``), which copies the plugin to the host, and in the GPU
  container the host's ``/home/kubernetes/bin/nvidia/lib64`` (RDMA: ``/home/kubernetes/bin/nvidia``) mounted and on
  ``LD_LIBRARY_PATH``; RDMA also mounts ``/home/kubernetes/bin/gib`` (the gIB plugin and its set_nccl_env.sh);
- **the receive-data-path daemon** (TCPX/TCPXO only): a sidecar running tcpgpudmarxd (images ``gpudirect-tcpx/
  tcpgpudmarxd`` / ``gpudirect-tcpxo/tcpgpudmarxd``) with the NVIDIA libraries mounted, and its volumes: TCPX's
  UNIX socket directory (hostPath ``/run/tcpx``) mounted into both the daemon and the GPU container; TCPXO's
  ``/dev/aperture_devices`` (hostPath) in the GPU container with ``NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY`` pointing at
  it.

Without them NCCL finds no net plugin (or no GPU NICs) and uses its socket transport over the pod's primary
interface, eth0: the pool's plain-TCP fallback tier, or Fast Socket where the pool enables it (network.py
``effective_tier`` with gpuDirect "none", the same rule as a pool that runs without GPUDirect). The twin reads
what the pod asks for, not what a real host would do with a half set-up (a partial NIC list, an RxDM that fails
to start): anything missing is the fallback (twin assumption, fail closed). Only traffic between nodes is
affected: ranks on one node talk over NVLink either way, so a single-pod job needs none of this. GKE's managed
RDMA through DRA ResourceClaims (gpudirect-rdma/nccl-test-managed-rdma.yaml) is not modelled: such a pod is read
as missing its interfaces, unless its claims hold RDMA NICs from DRANET (devices/dra/dranet.py): one per GPU it
holds stands in for the interfaces (GKE's managed DRANET attaches GPU NICs by ResourceClaim, class
mrdma.google.com); the NCCL plugin is still needed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubetwin.k8s.names import GPU
from kubetwin.workloads import network

GROUP = "networking.gke.io"
DEFAULT_INTERFACE = "networking.gke.io/default-interface"
INTERFACES = "networking.gke.io/interfaces"
NVIDIA_LIB64 = "/home/kubernetes/bin/nvidia/lib64"
NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
GIB_DIR = "/home/kubernetes/bin/gib"
TCPX_SOCKET = "/run/tcpx"
APERTURE = "/dev/aperture_devices"
LLCM_ENV = "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"


@dataclass(frozen=True)
class Requirement:
    """What one GPUDirect flavour needs of a pod (sources in the module docstring)."""

    name: str  # TCPX, TCPXO, RDMA
    nics: int  # GPU NIC networks besides the default one
    device_mode: str  # the GKENetworkParamSets' deviceMode
    installer: str  # image path of the plugin installer DaemonSet
    installer_name: str  # the DaemonSet's name in GKE's manifests (for the message)
    sidecar: str | None  # image path of the receive-data-path daemon
    example_networks: str  # the guide's network names


REQUIREMENTS = {
    "tcpx": Requirement("GPUDirect-TCPX", 4, "NetDevice", "gpudirect-tcpx/nccl-plugin-gpudirecttcpx",
                        "nccl-tcpx-installer", "gpudirect-tcpx/tcpgpudmarxd", "vpc1..vpc4"),
    "tcpxo": Requirement("GPUDirect-TCPXO", 8, "NetDevice", "gpudirect-tcpxo/nccl-plugin-gpudirecttcpx",
                         "nccl-tcpxo-installer", "gpudirect-tcpxo/tcpgpudmarxd", "vpc1..vpc8"),
    "rdma": Requirement("GPUDirect-RDMA", 8, "RDMA", "gpudirect-gib/nccl-plugin-gib", "nccl-rdma-installer", None,
                        "rdma-0..rdma-7"),
    "rdma_a4x": Requirement("GPUDirect-RDMA", 4, "RDMA", "gpudirect-gib/nccl-plugin-gib", "nccl-rdma-installer",
                            None, "rdma-0..rdma-3"),
}


@dataclass(frozen=True)
class Cluster:
    """The cluster objects the set-up refers to: Networks and GKENetworkParamSets by name, DaemonSets' images."""

    networks: dict[str, dict] = field(default_factory=dict)
    param_sets: dict[str, dict] = field(default_factory=dict)
    daemonset_images: tuple[str, ...] = ()

    @classmethod
    def of(cls, objects: list[dict]) -> Cluster:
        """From plain objects (a scenario's manifests, or the store's lists)."""
        nets: dict[str, dict] = {}
        params: dict[str, dict] = {}
        images: list[str] = []
        for o in objects:
            kind, group = o.get("kind"), str(o.get("apiVersion", "")).split("/")[0]
            name = str((o.get("metadata") or {}).get("name") or "")
            if group == GROUP and kind == "Network":
                nets[name] = o
            elif group == GROUP and kind == "GKENetworkParamSet":
                params[name] = o
            elif kind == "DaemonSet":
                spec = ((o.get("spec") or {}).get("template") or {}).get("spec") or {}
                images += [str(c.get("image") or "") for c in
                           [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]]
        return cls(nets, params, tuple(images))


@dataclass(frozen=True)
class Setup:
    """A pod's GPUDirect set-up on a machine built for `plugin`: what is missing (empty: NCCL uses GPUDirect)."""

    plugin: str  # capability: tcpx, tcpxo, rdma, rdma_a4x
    missing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        """One sentence for validate's notice and explain."""
        req = REQUIREMENTS[self.plugin]
        return (f"{req.name} needs what GKE's guide sets up and this pod lacks: " + "; ".join(self.missing)
                + ". NCCL falls back to its socket transport over eth0 (plain TCP, or Fast Socket where the pool "
                  "enables it) for traffic between nodes")


def _volumes(spec: dict) -> dict[str, str]:
    """Volume name -> hostPath path (hostPath volumes only)."""
    return {str(v.get("name")): str((v.get("hostPath") or {}).get("path") or "").rstrip("/")
            for v in spec.get("volumes") or [] if isinstance(v, dict) and v.get("hostPath")}


def _mounts(container: dict, vols: dict[str, str]) -> dict[str, str]:
    """Host path -> mountPath of the container's hostPath mounts."""
    return {vols[m["name"]]: str(m.get("mountPath") or "").rstrip("/") for m in container.get("volumeMounts") or []
            if isinstance(m, dict) and m.get("name") in vols}


def _env(container: dict) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value") or "") for e in container.get("env") or [] if isinstance(e, dict)}


def _gpu_container(spec: dict) -> dict:
    """The container that runs NCCL: the first requesting nvidia.com/gpu, else the first container."""
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    for c in containers:
        res = c.get("resources") or {}
        if any(str(k) == GPU for part in ("limits", "requests") for k in (res.get(part) or {})):
            return c
    return containers[0] if containers else {}


def _interfaces(annotations: dict, req: Requirement, cluster: Cluster) -> list[str]:
    """What is missing of the multi-network interfaces."""
    out: list[str] = []
    if not annotations.get(DEFAULT_INTERFACE):
        out.append(f"the annotation {DEFAULT_INTERFACE}: eth0")
    raw = annotations.get(INTERFACES)
    try:
        listed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        listed = None
    if not isinstance(listed, list):
        out.append(f"the annotation {INTERFACES} listing eth0 on network default and {req.nics} GPU NIC networks "
                   f"({req.example_networks})" + (" (its value is not a JSON list)" if raw else ""))
        return out
    names = list(dict.fromkeys(str(i.get("network")) for i in listed  # a network listed twice is one NIC
                               if isinstance(i, dict) and i.get("network") not in (None, "default")))
    good = 0
    for name in names:
        net = cluster.networks.get(name)
        if net is None:
            out.append(f"Network {name} (networking.gke.io/v1), named in {INTERFACES}, does not exist")
            continue
        spec = net.get("spec") or {}
        ref = spec.get("parametersRef") or {}
        params = cluster.param_sets.get(str(ref.get("name"))) if ref.get("kind") == "GKENetworkParamSet" else None
        if spec.get("type") != "Device":
            out.append(f"Network {name} has type {spec.get('type')!r}; GPU NICs need type: Device")
        elif params is None:
            out.append(f"Network {name}'s parametersRef names GKENetworkParamSet {ref.get('name')!r}, which does "
                       "not exist")
        elif (params.get("spec") or {}).get("deviceMode") != req.device_mode:
            out.append(f"GKENetworkParamSet {ref.get('name')} has deviceMode "
                       f"{(params.get('spec') or {}).get('deviceMode')!r}; {req.name} needs {req.device_mode}")
        else:
            good += 1
    if good < req.nics and not any(n not in cluster.networks for n in names):
        out.append(f"{INTERFACES} names {good} GPU NIC network(s) of the {req.nics} {req.name} needs "
                   f"({req.example_networks}, deviceMode {req.device_mode})")
    return out


def _plugin(spec: dict, gpu: dict, vols: dict[str, str], plugin: str, req: Requirement,
            cluster: Cluster) -> list[str]:
    """What is missing of the NCCL plugin: its installer DaemonSet, the host library mount, LD_LIBRARY_PATH."""
    out: list[str] = []
    if not any(req.installer in image for image in cluster.daemonset_images):
        out.append(f"the NCCL plugin installer DaemonSet ({req.installer_name}, image .../{req.installer})")
    mounts = _mounts(gpu, vols)
    lib = mounts.get(NVIDIA_LIB64) or (mounts[NVIDIA_DIR] + "/lib64" if NVIDIA_DIR in mounts else None)
    ld = _env(gpu).get("LD_LIBRARY_PATH", "").split(":")
    if lib is None:
        out.append(f"in container {gpu.get('name')}, a hostPath volume {NVIDIA_LIB64} mounted (the plugin the "
                   "installer put there) and on LD_LIBRARY_PATH")
    elif lib not in ld:
        out.append(f"in container {gpu.get('name')}, LD_LIBRARY_PATH including {lib} (where the NCCL plugin is "
                   "mounted)")
    if plugin in ("rdma", "rdma_a4x") and GIB_DIR not in mounts:
        out.append(f"in container {gpu.get('name')}, the hostPath volume {GIB_DIR} (the gIB plugin and its "
                   "set_nccl_env.sh) mounted")
    return out


def _daemon(spec: dict, gpu: dict, vols: dict[str, str], plugin: str, req: Requirement) -> list[str]:
    """What is missing of the tcpx/tcpxo receive-data-path daemon sidecar and its volumes."""
    if req.sidecar is None:
        return []
    containers = [c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
                  if isinstance(c, dict)]
    daemon = next((c for c in containers if req.sidecar in str(c.get("image") or "")), None)
    out: list[str] = []
    if daemon is None:
        out.append(f"the {plugin}-daemon sidecar (image .../{req.sidecar}, the receive-data-path manager RxDM)")
        return out
    if NVIDIA_LIB64 not in _mounts(daemon, vols):
        out.append(f"in the {daemon.get('name')} sidecar, the hostPath volume {NVIDIA_LIB64} mounted")
    gpu_mounts = _mounts(gpu, vols)
    if plugin == "tcpx" and not (TCPX_SOCKET in _mounts(daemon, vols) and TCPX_SOCKET in gpu_mounts):
        out.append(f"the hostPath volume {TCPX_SOCKET} (the daemon's UNIX socket) mounted in both "
                   f"{daemon.get('name')} and {gpu.get('name')}")
    if plugin == "tcpxo":
        if APERTURE not in gpu_mounts:
            out.append(f"in container {gpu.get('name')}, the hostPath volume {APERTURE} mounted")
        elif _env(gpu).get(LLCM_ENV) != gpu_mounts[APERTURE]:
            out.append(f"in container {gpu.get('name')}, {LLCM_ENV}={gpu_mounts[APERTURE]}")
    return out


def _dra_nics(nics: int, gpus: int, req: Requirement) -> list[str]:
    """What is missing when the pod's NICs come from DRANET ResourceClaims instead of multi-network interfaces:
    one RDMA NIC per GPU the pod holds (twin rule: fewer NICs than GPUs is read as missing, not as shared NICs)."""
    if req.device_mode != "RDMA":
        return [f"{req.name} NICs through multi-network interfaces: DRANET's RDMA NICs serve GPUDirect-RDMA only"]
    if nics < max(gpus, 1):
        return [f"an RDMA NIC per GPU from its DRANET ResourceClaims (it holds {nics} for {gpus} GPUs; ask for as many "
                "NICs as GPUs, with matchAttribute resource.kubernetes.io/pcieRoot to keep each beside its GPU)"]
    return []


def check(pod: dict[str, Any], plugin: str, cluster: Cluster, dra_nics: int = 0, gpus: int = 0) -> Setup:
    """The pod's set-up for `plugin` (a network.capability: tcpx, tcpxo, rdma, rdma_a4x). `dra_nics`: the RDMA NICs
    the pod's allocated ResourceClaims hold from DRANET (devices/dra/dranet.py), which stand in for the
    multi-network interfaces when there are any (GKE's DRANET guides attach the NICs by claim, not annotation)."""
    req = REQUIREMENTS[plugin]
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    vols = _volumes(spec)
    gpu = _gpu_container(spec)
    nics = _dra_nics(dra_nics, gpus, req) if dra_nics else _interfaces(meta.get("annotations") or {}, req, cluster)
    missing = [*nics, *_plugin(spec, gpu, vols, plugin, req, cluster), *_daemon(spec, gpu, vols, plugin, req)]
    return Setup(plugin, tuple(missing))


def installs(daemonset: dict) -> str | None:
    """The GPUDirect flavour whose NCCL plugin this DaemonSet installs (GKE's installer images), None otherwise."""
    images = Cluster.of([daemonset]).daemonset_images
    return next((r.name for r in REQUIREMENTS.values() if any(r.installer in i for i in images)), None)


def node_plugin(node: dict) -> str | None:
    """The GPUDirect flavour the node's pool runs (None: no GPUDirect there, whatever the pod does)."""
    tier = network.node_net(node).tier
    return tier if tier in REQUIREMENTS else None


def as_used(node: dict, pod: dict, cluster: Cluster, dra_nics: int = 0, gpus: int = 0) -> tuple[dict, Setup | None]:
    """The node as the pod's NCCL sees it, and the set-up checked (None: not a GPUDirect node): a pod missing
    any of it sees the node as a pool without GPUDirect (gpuDirect: none: plain TCP, or Fast Socket)."""
    plugin = node_plugin(node)
    if plugin is None:
        return node, None
    setup = check(pod, plugin, cluster, dra_nics, gpus)
    if setup.ok:
        return node, setup
    meta = node.get("metadata") or {}
    labels = {**(meta.get("labels") or {}), network.GPUDIRECT_LABEL: "none"}
    return {**node, "metadata": {**meta, "labels": labels}}, setup


# The guide's manifests as objects, for studies that want a job on GPUDirect (benchmarks/study_training_*.py):
# images and paths as container-engine-accelerators@992db81 writes them.
_INSTALLER_IMAGES = {"tcpx": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
                     "tcpxo": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
                     "rdma": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"}
_DAEMON_IMAGES = {"tcpx": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
                  "tcpxo": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"}


def guide_set_up(template: dict, plugin: str) -> tuple[dict, list[dict]]:
    """A copy of a pod template (its first container runs NCCL) with GKE's set-up for `plugin` (tcpx, tcpxo,
    rdma), and the cluster objects it needs (GKENetworkParamSets, Networks, the installer DaemonSet)."""
    import copy

    flavour = "rdma" if plugin.startswith("rdma") else plugin
    req = REQUIREMENTS[plugin]
    names = [f"rdma-{i}" for i in range(req.nics)] if flavour == "rdma" else [f"vpc{i}" for i in
                                                                             range(1, req.nics + 1)]
    objects: list[dict] = []
    for n in names:
        objects.append({"apiVersion": f"{GROUP}/v1", "kind": "GKENetworkParamSet", "metadata": {"name": n},
                        "spec": {"vpc": f"{n}-net", "vpcSubnet": f"{n}-sub", "deviceMode": req.device_mode}})
        objects.append({"apiVersion": f"{GROUP}/v1", "kind": "Network", "metadata": {"name": n}, "spec": {
            "type": "Device", "parametersRef": {"group": GROUP, "kind": "GKENetworkParamSet", "name": n}}})
    objects.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
        "name": req.installer_name, "namespace": "kube-system"}, "spec": {
        "selector": {"matchLabels": {"k8s-app": req.installer_name}}, "template": {
            "metadata": {"labels": {"k8s-app": req.installer_name}}, "spec": {
                "tolerations": [{"operator": "Exists"}],
                "initContainers": [{"name": req.installer_name, "image": _INSTALLER_IMAGES[flavour]}],
                "containers": [{"name": "pause", "image": "gke.gcr.io/pause:3.8"}]}}}})
    t = copy.deepcopy(template)
    meta, spec = t.setdefault("metadata", {}), t.setdefault("spec", {})
    ifaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"eth{i + 1}", "network": n} for i, n in enumerate(names)]
    meta.setdefault("annotations", {}).update({DEFAULT_INTERFACE: "eth0", INTERFACES: json.dumps(ifaces)})
    gpu = spec["containers"][0]
    env, mounts, vols = gpu.setdefault("env", []), gpu.setdefault("volumeMounts", []), spec.setdefault("volumes", [])
    env.append({"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"})
    vols.append({"name": "nvidia-lib64", "hostPath": {"path": NVIDIA_LIB64}})
    mounts.append({"name": "nvidia-lib64", "mountPath": "/usr/local/nvidia/lib64"})
    if flavour == "rdma":
        vols.append({"name": "gib", "hostPath": {"path": GIB_DIR}})
        mounts.append({"name": "gib", "mountPath": "/usr/local/gib"})
        return t, objects
    daemon_mounts = [{"name": "nvidia-lib64", "mountPath": "/usr/local/nvidia/lib64"}]
    if flavour == "tcpx":
        vols.append({"name": "tcpx-socket", "hostPath": {"path": TCPX_SOCKET}})
        daemon_mounts.append({"name": "tcpx-socket", "mountPath": TCPX_SOCKET})
        mounts.append({"name": "tcpx-socket", "mountPath": "/tmp"})
    else:
        vols.append({"name": "aperture-devices", "hostPath": {"path": APERTURE}})
        mounts.append({"name": "aperture-devices", "mountPath": APERTURE})
        env.append({"name": LLCM_ENV, "value": APERTURE})
    spec["containers"].append({"name": f"{flavour}-daemon", "image": _DAEMON_IMAGES[flavour],
                               "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                               "volumeMounts": daemon_mounts})
    return t, objects

"""GPU sharing by time-slicing and MPS: the NVIDIA device plugin's config file and GKE's gpuSharingConfig.

NVIDIA k8s-device-plugin api/config/v1 (config.go, replicas.go; README "Shared Access to GPUs"): `version: v1`,
`sharing.timeSlicing` or `sharing.mps` (not both) with a non-empty `resources` list of `{name, replicas >= 2}`;
every device of that resource is advertised `replicas` times, under `<name>.shared` with `renameByDefault`;
`failRequestsGreaterThanOne` (default true for MPS) makes a request for more than one shared device fail at
admission. GKE (cloud.google.com/kubernetes-engine/docs/concepts/timesharing-gpus): `gpuSharingConfig
{gpuSharingStrategy: TIME_SHARING|MPS, maxSharedClientsPerGpu}` labels the node and advertises GPUs x clients as
`nvidia.com/gpu`; a container may ask for at most one shared GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubetwin.api.podresources import container_requests
from kubetwin.k8s.names import GKE_GPU_SHARING_STRATEGY, GKE_MAX_SHARED_CLIENTS_PER_GPU, GPU

MPS_MAX_CLIENTS = 48  # NVIDIA MPS documentation: Volta and later support up to 48 clients per GPU
STRATEGY_LABEL = GKE_GPU_SHARING_STRATEGY
CLIENTS_LABEL = GKE_MAX_SHARED_CLIENTS_PER_GPU
GKE_STRATEGIES = {"TIME_SHARING": "time-sharing", "MPS": "mps"}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config: the field path inside it, what, and how to fix it."""

    field: str
    message: str
    hint: str = ""


@dataclass
class SharingConfig:
    strategy: str = "none"  # none | time-slicing | mps
    replicas: dict[str, int] = field(default_factory=dict)  # resource name -> replicas
    rename: bool = False
    fail_requests_greater_than_one: bool = False

    def advertised(self, base: dict[str, int]) -> dict[str, int]:
        """Allocatable after sharing: each shared resource's devices times its replicas."""
        out = dict(base)
        for name, replicas in self.replicas.items():
            if name in out:
                count = out.pop(name)
                out[f"{name}.shared" if self.rename else name] = count * replicas
        return out


def parse_plugin_config(doc: object) -> tuple[SharingConfig, list[Problem]]:
    """The device plugin's config file (already parsed from YAML), checked as the plugin checks it."""
    problems: list[Problem] = []
    if not isinstance(doc, dict):
        return SharingConfig(), [Problem("", "the config must be a mapping", "start with `version: v1`")]
    if doc.get("version") != "v1":
        problems.append(Problem("version", f"unknown version: {doc.get('version')!r}", "set version: v1"))
    sharing = doc.get("sharing") or {}
    if not isinstance(sharing, dict):
        return SharingConfig(), [*problems, Problem("sharing", "must be a mapping",
                                                    "indent timeSlicing: (or mps:) under sharing:")]
    modes = [k for k in ("timeSlicing", "mps") if sharing.get(k)]
    if len(modes) > 1:
        problems.append(Problem("sharing", "timeSlicing and mps are mutually exclusive", "keep one of them"))
    if not modes:
        return SharingConfig(), problems
    mode = modes[0]
    spec = sharing[mode]
    cfg = SharingConfig("time-slicing" if mode == "timeSlicing" else "mps", {}, bool(spec.get("renameByDefault")),
                        bool(spec.get("failRequestsGreaterThanOne", mode == "mps")))
    resources = spec.get("resources")
    if not resources or not isinstance(resources, list):
        problems.append(Problem(f"sharing.{mode}.resources", "no resources are configured",
                                "list at least one: resources: [{name: nvidia.com/gpu, replicas: 4}]"))
        return cfg, problems
    for i, r in enumerate(resources):
        path = f"sharing.{mode}.resources[{i}]"
        name, replicas = (r or {}).get("name"), (r or {}).get("replicas")
        if not isinstance(name, str) or not (name == GPU or name.startswith("nvidia.com/mig-")):
            problems.append(Problem(f"{path}.name", f"unsupported resource name {name!r}",
                                    "use nvidia.com/gpu, or nvidia.com/mig-<profile> with migStrategy mixed"))
            continue
        if not isinstance(replicas, int) or replicas < 2:
            problems.append(Problem(f"{path}.replicas", f"number of replicas must be >= 2, got {replicas!r}",
                                    "set replicas to how many pods may share each GPU"))
            continue
        if mode == "mps" and replicas > MPS_MAX_CLIENTS:
            problems.append(Problem(f"{path}.replicas", f"MPS supports at most {MPS_MAX_CLIENTS} clients per GPU",
                                    f"set replicas to {MPS_MAX_CLIENTS} or fewer"))
            continue
        cfg.replicas[name] = replicas
    return cfg, problems


def gke_sharing(config: dict | None) -> tuple[SharingConfig, dict[str, str], list[Problem]]:
    """GKE gpuSharingConfig: the sharing it sets up, the node labels, and any problem with the config."""
    if not config:
        return SharingConfig(), {}, []
    strategy: Any = config.get("gpuSharingStrategy")
    clients: Any = config.get("maxSharedClientsPerGpu")
    problems = []
    if strategy not in GKE_STRATEGIES:
        problems.append(Problem("gpuSharingStrategy", f"Unsupported value: {strategy!r}",
                                "use TIME_SHARING or MPS"))
    if not isinstance(clients, int) or clients < 1:
        problems.append(Problem("maxSharedClientsPerGpu", f"Invalid value: {clients!r}: must be a positive integer",
                                "set how many containers may share each GPU"))
    elif strategy == "MPS" and clients > MPS_MAX_CLIENTS:
        problems.append(Problem("maxSharedClientsPerGpu", f"Invalid value: {clients}: MPS supports at most "
                                f"{MPS_MAX_CLIENTS} clients per GPU", f"set {MPS_MAX_CLIENTS} or fewer"))
    if problems:
        return SharingConfig(), {}, problems
    label = GKE_STRATEGIES[strategy]
    cfg = SharingConfig(label, {GPU: clients}, False, True)
    return cfg, {STRATEGY_LABEL: label, CLIENTS_LABEL: str(clients)}, []


def admission_error(labels: dict[str, str], pod: dict) -> str | None:
    """The GKE device plugin's Allocate failure for a container asking for more than one shared GPU."""
    strategy = labels.get(STRATEGY_LABEL)
    if not strategy:
        return None
    for c in pod["spec"].get("containers") or []:
        if container_requests(c).get(GPU, 0) > 1:  # an extended resource's requests are its limits
            return ("Pod Allocate failed due to rpc error: code = Unknown desc = [invalid request for sharing GPU "
                    f"({strategy}), at most 1 nvidia.com/gpu can be requested on GPU nodes], which is unexpected")
    return None

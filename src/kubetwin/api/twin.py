"""The twin's own kinds (apiVersion kubetwin.io/v1alpha1), modelled on GKE's node pool API."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kubetwin.api.units import parse_duration

TWIN_API = "kubetwin.io/v1alpha1"


def _check_duration(v: str) -> str:
    """Durations are validated at load time so a bad one is reported with its field path."""
    parse_duration(v)
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Taint(_Strict):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Accelerator(_Strict):
    """GKE `accelerators[]` of a node pool (gcloud --accelerator type=…,count=…,gpu-driver-version=…)."""

    type: str
    count: int = Field(ge=1)
    # GKE gpuDriverInstallationConfig.gpuDriverVersion; DEFAULT is GKE's default since 1.30.1-gke.1156000
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#create-gpu-pool-auto-drivers).
    gpuDriverInstallation: Literal["DEFAULT", "LATEST", "INSTALLATION_DISABLED"] = "DEFAULT"
    gpuSharingConfig: dict | None = None
    gpuPartitionSize: str | None = None


class Autoscaling(_Strict):
    minNodeCount: int = Field(ge=0)
    maxNodeCount: int = Field(ge=0)


class PlacementPolicy(_Strict):
    """GKE NodePool.placementPolicy: `type`, `tpuTopology` (a TPU pool's slice shape, e.g. "4x4" or "2x2x4";
    multi-host when it spans several VMs) and `policyName` (a workload/resource policy, as Ironwood (TPU7x)
    multi-host pools use instead of --tpu-topology)."""

    type: Literal["COMPACT", "TYPE_UNSPECIFIED"] = "COMPACT"
    tpuTopology: str | None = None
    policyName: str | None = None


class NodePoolSpec(_Strict):
    machineType: str
    nodeCount: int | None = Field(default=None, ge=0, description="nodes per zone, as in GKE")
    autoscaling: Autoscaling | None = None
    spot: bool = False
    zones: list[str] = Field(default_factory=lambda: ["us-central1-a"])
    # GPUs; a TPU machine type implies its chips (google.com/tpu), so TPU pools need no entry here
    accelerators: list[Accelerator] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    placementPolicy: PlacementPolicy | None = None
    maxPodsPerNode: int = Field(default=110, ge=1, le=256)
    # Twin-only timing knobs (assumptions, not GKE facts): VM boot + kubelet registration, and the
    # GKE-managed driver installer DaemonSet finishing before the device plugin advertises GPUs.
    bootDelay: str = "90s"
    driverInstallDelay: str = "3m"

    _durations = field_validator("bootDelay", "driverInstallDelay")(_check_duration)


class ScenarioSpec(_Strict):
    duration: str = "1d"
    seed: int = 0
    clusterName: str = "kubetwin"
    startTime: str = "2026-01-01T00:00:00Z"
    scoringStrategy: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"
    report: list[Literal["summary", "html"]] = Field(default_factory=lambda: ["summary", "html"])
    sampleInterval: str = "5m"
    # The FGD paper's GPU placement policies as the Score step for GPU pods (scheduler/gpushare.py); None keeps
    # kube-scheduler's default scoring.
    gpuPlacementPolicy: Literal["Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD"] | None = None
    # Kubernetes feature gates the twin models (kube-scheduler --feature-gates); defaults are Kubernetes 1.34's.
    featureGates: dict[Literal["DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices",
                               "DRADeviceTaints"], bool] = Field(default_factory=dict)

    _durations = field_validator("duration", "sampleInterval")(_check_duration)


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class NodePool(_Strict):
    apiVersion: Literal["kubetwin.io/v1alpha1"]
    kind: Literal["NodePool"]
    metadata: Metadata
    spec: NodePoolSpec


class Scenario(_Strict):
    apiVersion: Literal["kubetwin.io/v1alpha1"]
    kind: Literal["Scenario"]
    metadata: Metadata
    spec: ScenarioSpec = Field(default_factory=ScenarioSpec)


TWIN_KINDS: dict[str, type[BaseModel]] = {"NodePool": NodePool, "Scenario": Scenario}

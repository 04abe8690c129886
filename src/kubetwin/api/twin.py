"""The twin's own kinds (apiVersion kubetwin.io/v1alpha1), modelled on GKE's node pool API."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from kubetwin.k8s.units import parse_duration, parse_positive_duration

TWIN_API = "kubetwin.io/v1alpha1"
INT32_MAX = 2**31 - 1  # counts are int32, as Kubernetes API conventions have them
DEFAULT_ZONE = "us-central1-a"  # twin assumption: where a NodePool without spec.zones runs (the twin's location)
MAX_SEED = 2**63 - 1  # twin limit: seeds are int64, as --seed flags of Go tools are
FLEX_START_MAX_RUN = 7 * 86400  # GKE flex-start: VMs run up to seven days (docs/concepts/dws)
MAX_SAMPLES = 1_000_000  # twin limit: time-series samples of one run (duration / sampleInterval)


def _check_duration(v: str) -> str:
    """Durations are validated at load time so a bad one is reported with its field path."""
    parse_duration(v)
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)  # "3" is no integer, as in Go


class Taint(_Strict):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Accelerator(_Strict):
    """GKE `accelerators[]` of a node pool (gcloud --accelerator type=…,count=…,gpu-driver-version=…)."""

    type: str
    count: int = Field(le=INT32_MAX, ge=1)
    # GKE gpuDriverInstallationConfig.gpuDriverVersion; DEFAULT is GKE's default since 1.30.1-gke.1156000
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#create-gpu-pool-auto-drivers).
    gpuDriverInstallation: Literal["DEFAULT", "LATEST", "INSTALLATION_DISABLED"] = "DEFAULT"
    gpuSharingConfig: dict | None = None
    gpuPartitionSize: str | None = None


# GKE's quota "Nodes per node pool zone: 1,000" (https://cloud.google.com/kubernetes-engine/quotas).
MAX_NODES_PER_POOL_ZONE = 1000
# GKE's limit "Nodes per cluster: 15,000" for Standard clusters (same page; "5,000 for GKE versions up to 1.17, 15,000
# for GKE versions 1.18 and later" in its older text; the page's note that running more than 5,000 nodes needs a
# regional cluster and a lifted cluster-size quota is documentation, not a refusal the twin models). The page's
# "Pods per cluster: 200,000" (150,000 in its older text) is not modelled. validation.nodepool.cluster_size and the
# cluster autoscaler read it as `twin.MAX_NODES_PER_CLUSTER` at call time, so a test may lower it.
MAX_NODES_PER_CLUSTER = 15_000


class Autoscaling(_Strict):
    minNodeCount: int = Field(ge=0, le=MAX_NODES_PER_POOL_ZONE)
    maxNodeCount: int = Field(ge=0, le=MAX_NODES_PER_POOL_ZONE)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        """GKE's API refuses a pool whose minimum is above its maximum (gcloud container node-pools create
        --min-nodes/--max-nodes; the cluster autoscaler's node group needs min <= max)."""
        if self.minNodeCount > self.maxNodeCount:
            raise ValueError(f"minNodeCount ({self.minNodeCount}) must be less than or equal to maxNodeCount "
                             f"({self.maxNodeCount})")
        return self


class ReservationAffinity(_Strict):
    """GKE NodePool.config.reservationAffinity (container/v1 ReservationAffinity; gcloud --reservation-affinity,
    --reservation): which Compute Engine reservations (the twin's `Reservation` kind) the pool's VMs consume
    (autoscaler/reservations.py); it also matches a ComputeClass rule's `reservations` (autoscaler/computeclass.py).
    A pool without it consumes any matching reservation (Compute Engine's default, ANY_RESERVATION)."""

    consumeReservationType: Literal["UNSPECIFIED", "NO_RESERVATION", "ANY_RESERVATION", "SPECIFIC_RESERVATION",
                                    "ANY_RESERVATION_THEN_FAIL"] = "UNSPECIFIED"
    key: str | None = None  # compute.googleapis.com/reservation-name for SPECIFIC_RESERVATION
    values: list[str] = Field(default_factory=list)


class PlacementPolicy(_Strict):
    """GKE NodePool.placementPolicy: `type`, `tpuTopology` (a TPU pool's slice shape, e.g. "4x4" or "2x2x4";
    multi-host when it spans several VMs) and `policyName` (a workload/resource policy, as Ironwood (TPU7x)
    multi-host pools use instead of --tpu-topology)."""

    type: Literal["COMPACT", "TYPE_UNSPECIFIED"] = "COMPACT"
    tpuTopology: str | None = None
    policyName: str | None = None


class SpotPreemptionAt(_Strict):
    """One scheduled preemption: at `at`, Compute Engine preempts `nodes` of the pool's Ready nodes (picked by the
    Scenario seed) or the nodes named in `nodeNames`."""

    at: str
    nodes: int | None = Field(le=INT32_MAX, default=None, ge=1)
    nodeNames: list[str] | None = None

    _durations = field_validator("at")(_check_duration)


class SpotPreemption(_Strict):
    """Twin-only: when Compute Engine preempts this Spot pool's VMs (autoscaler/spot.py). `ratePerNodeHour` draws
    each VM's preemption from an exponential distribution (seeded by the Scenario seed); `schedule` fixes them."""

    ratePerNodeHour: float = Field(default=0.0, ge=0)
    schedule: list[SpotPreemptionAt] = Field(default_factory=list)


class NodePoolSpec(_Strict):
    machineType: str
    nodeCount: int | None = Field(default=None, ge=0, le=MAX_NODES_PER_POOL_ZONE,
                                  description="nodes per zone, as in GKE")
    autoscaling: Autoscaling | None = None
    spot: bool = False
    spotPreemption: SpotPreemption | None = None  # only with spot: true (checked below)
    zones: list[str] = Field(default_factory=lambda: [DEFAULT_ZONE])
    # GPUs; a TPU machine type implies its chips (google.com/tpu), so TPU pools need no entry here
    accelerators: list[Accelerator] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    placementPolicy: PlacementPolicy | None = None
    # GKE flex-start (gcloud node-pools create --flex-start): the autoscaler obtains the VMs from Dynamic Workload
    # Scheduler's flex-start capacity (Scenario.spec.capacity entries with flexStart: true), they count against
    # preemptible quota, and the nodes carry cloud.google.com/gke-flex-start=true and gke-provisioning=flex-start
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training). Not with spot.
    flexStart: bool = False
    # gcloud node-pools create --max-run-duration (NodeConfig.maxRunDuration, "3600s"): each VM is deleted that long
    # after Compute Engine created it, and the pool shrinks by it. None: the VMs live on, except flex-start's,
    # which run at most 7 days (https://cloud.google.com/kubernetes-engine/docs/concepts/dws: "for up to seven
    # days"), so a flex-start pool without one ends its VMs at 7 days (autoscaler/nodepool.py max_run_seconds).
    maxRunDuration: str | None = None
    reservationAffinity: ReservationAffinity | None = None
    maxPodsPerNode: int = Field(default=110, ge=1, le=256)
    # Networking (workloads/network.py). gpuDirect: the GPUDirect plugin the pool runs (GKE: the pool's additional
    # GPU NICs + NCCL plugin); None = the machine's own (TCPX a3-high/edge, TCPXO a3-mega, RDMA a3-ultra/a4),
    # "none" = plain NCCL sockets. fastSocket/gvnic: gcloud --enable-fast-socket / --enable-gvnic. Checked in
    # validation/nodepool.py: Fast Socket needs gVNIC (error) and does not stack with GPUDirect (notice, ignored).
    gpuDirect: Literal["none", "tcpx", "tcpxo", "rdma"] | None = None
    fastSocket: bool = False
    gvnic: bool = True
    # Twin-only timing knobs (assumptions, not GKE facts): VM boot + kubelet registration, and the
    # GKE-managed driver installer DaemonSet finishing before the device plugin advertises GPUs.
    bootDelay: str = "90s"
    driverInstallDelay: str = "3m"

    _durations = field_validator("bootDelay", "driverInstallDelay")(_check_duration)

    @field_validator("maxRunDuration")
    @classmethod
    def _max_run(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        if parse_duration(v) <= 0:
            raise ValueError(f"maxRunDuration must be positive, got {v!r}")
        if info.data.get("flexStart") and parse_duration(v) > FLEX_START_MAX_RUN:
            raise ValueError(f"flex-start VMs run at most 7 days ({FLEX_START_MAX_RUN}s): maxRunDuration {v!r} is "
                             "longer; use 604800s or less")
        return v

    @field_validator("flexStart")
    @classmethod
    def _flex_not_spot(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("spot"):
            raise ValueError("a node pool is either Spot or flex-start (GKE refuses --flex-start with --spot): "
                             "remove one of them")
        return v

    @field_validator("spotPreemption")
    @classmethod
    def _spot_only(cls, v: SpotPreemption | None, info: ValidationInfo) -> SpotPreemption | None:
        if v is not None and not info.data.get("spot"):
            raise ValueError("spotPreemption is only valid on a Spot node pool: set spot: true, or remove it "
                             "(on-demand VMs are not preempted)")
        return v


class ClusterAutoscalerSpec(_Strict):
    """The cluster autoscaler's flags (kubernetes/autoscaler cluster-autoscaler/config/flags/flags.go defaults,
    FAQ.md "What are the parameters to CA?"). GKE runs CA with its `balanced` profile by default
    (container/v1 ClusterAutoscaling.AutoscalingProfile: BALANCED "Use default (balanced) autoscaling
    configuration"); `optimize-utilization` removes nodes sooner (the twin: scaleDownUnneededTime 1m, an
    assumption — GKE does not publish its numbers)."""

    # OSS CA's --expander default is `random`; GKE does not document which expander it runs. The twin's default
    # `least-waste` is an assumption. `priority` reads ConfigMap kube-system/cluster-autoscaler-priority-expander
    # (data.priorities: "<int>: [regex of node group]", cluster-autoscaler/expander/priority/readme.md).
    expander: Literal["least-waste", "price", "priority", "random", "most-pods"] = "least-waste"
    autoscalingProfile: Literal["balanced", "optimize-utilization"] = "balanced"
    scanInterval: str = "10s"                      # --scan-interval
    scaleDownEnabled: bool = True                  # --scale-down-enabled
    scaleDownUnneededTime: str | None = None       # --scale-down-unneeded-time 10m (profile-dependent, see above)
    scaleDownDelayAfterAdd: str = "10m"            # --scale-down-delay-after-add
    scaleDownDelayAfterFailure: str = "3m"         # --scale-down-delay-after-failure
    scaleDownUnreadyTime: str = "20m"              # --scale-down-unready-time
    scaleDownUtilizationThreshold: float = Field(default=0.5, ge=0, le=1)     # --scale-down-utilization-threshold
    scaleDownGpuUtilizationThreshold: float = Field(default=0.5, ge=0, le=1)  # --scale-down-gpu-utilization-threshold
    initialNodeGroupBackoffDuration: str = "5m"    # --initial-node-group-backoff-duration
    maxNodeGroupBackoffDuration: str = "30m"       # --max-node-group-backoff-duration
    nodeGroupBackoffResetTimeout: str = "3h"       # --node-group-backoff-reset-timeout
    # GKE's cluster-level default ComputeClass (gcloud container clusters update --enable-default-compute-class;
    # container/v1 ClusterAutoscaling.defaultComputeClassConfig.enabled): the ComputeClass named "default" then
    # governs pods that select no class and node pools without the compute-class label (autoscaler/computeclass.py).
    defaultComputeClass: bool = False

    _durations = field_validator("scanInterval", "scaleDownDelayAfterAdd", "scaleDownDelayAfterFailure",
                                 "scaleDownUnreadyTime",
                                 "initialNodeGroupBackoffDuration", "maxNodeGroupBackoffDuration",
                                 "nodeGroupBackoffResetTimeout")(_check_duration)

    @field_validator("scaleDownUnneededTime")
    @classmethod
    def _unneeded(cls, v: str | None) -> str | None:
        return None if v is None else _check_duration(v)


class ResourceLimit(_Strict):
    """container/v1 ResourceLimit (gcloud container clusters update --max-cpu --max-memory --max-accelerator):
    resourceType `cpu` (cores), `memory` (gigabytes; the twin counts GiB, as the catalog lists machines' memory)
    or an accelerator type (`nvidia-l4`, `nvidia-h100-80gb`, a TPU's `tpu-v6e-slice` ...). The cluster autoscaler
    never grows the cluster past a maximum; `minimum` is stored (GKE does not scale up to it)."""

    resourceType: str
    minimum: int = Field(default=0, ge=0)
    maximum: int = Field(ge=0)


class AutoprovisioningNodePoolDefaults(_Strict):
    """container/v1 AutoprovisioningNodePoolDefaults, the settings GKE gives every pool node auto-provisioning
    creates. Accepted with GKE's field names; none changes the run (`kubetwin validate` says so per field, see
    validation/nodepool.autoprovisioning): auto-created pools take the twin's node template."""

    oauthScopes: list[str] | None = None
    serviceAccount: str | None = None
    upgradeSettings: dict[str, Any] | None = None
    management: dict[str, Any] | None = None
    minCpuPlatform: str | None = None
    diskSizeGb: int | None = Field(default=None, ge=0)
    diskType: str | None = None
    shieldedInstanceConfig: dict[str, Any] | None = None
    bootDiskKmsKey: str | None = None
    imageType: str | None = None
    insecureKubeletReadonlyPortEnabled: bool | None = None


class ClusterAutoscaling(_Strict):
    """container/v1 Cluster.autoscaling, the cluster's node auto-provisioning (autoscaler/nap.py): with
    `enableNodeAutoprovisioning` the autoscaler creates node pools for pending pods no pool fits, within
    `resourceLimits`, in `autoprovisioningLocations` (each auto-created pool spans them all, as GKE's do; default:
    the cluster's zone). Off by default.
    https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-provisioning"""

    enableNodeAutoprovisioning: bool = False
    resourceLimits: list[ResourceLimit] = Field(default_factory=list)
    autoprovisioningLocations: list[str] = Field(default_factory=list)
    autoprovisioningNodePoolDefaults: AutoprovisioningNodePoolDefaults | None = None

    @model_validator(mode="after")
    def _cpu_memory(self) -> ClusterAutoscaling:
        """GKE refuses node auto-provisioning without the cluster's cpu and memory maxima (gcloud requires
        --max-cpu and --max-memory with --enable-autoprovisioning)."""
        kinds = {r.resourceType for r in self.resourceLimits}
        if self.enableNodeAutoprovisioning and not {"cpu", "memory"} <= kinds:
            raise ValueError("node auto-provisioning needs resourceLimits for cpu and memory (gcloud: --max-cpu "
                             "and --max-memory)")
        return self


class CapacityStep(_Strict):
    at: str
    available: int = Field(le=INT32_MAX, ge=0)

    _durations = field_validator("at")(_check_duration)


class ZoneCapacity(_Strict):
    """How many VMs of a machine type the zone can give this project at once (twin assumption: GCE publishes no
    such number; a stockout is the zone refusing a VM, ZONE_RESOURCE_POOL_EXHAUSTED). `available` (None:
    unlimited) may change over time with `schedule`; `obtainability` is the chance each VM request succeeds
    (seeded RNG). `spot` None covers both provisioning models; `flexStart` True: the entry is flex-start
    (Dynamic Workload Scheduler) capacity, False: not flex-start, None (default): both."""

    zone: str
    machineType: str
    spot: bool | None = None
    flexStart: bool | None = None
    available: int | None = Field(le=INT32_MAX, default=None, ge=0)
    schedule: list[CapacityStep] = Field(default_factory=list)
    obtainability: float = Field(default=1.0, ge=0, le=1)


def _positive_duration(v: str) -> str:
    parse_positive_duration(v)  # a UnitError is a ValueError: pydantic reports it at the field
    return v


# kube-scheduler's and kube-controller-manager's clientConnection defaults (upstream; GKE does not publish the values
# its managed control plane runs with: the twin assumes the upstream defaults).
SCHEDULER_QPS, SCHEDULER_BURST = 50.0, 100  # kubernetes pkg/scheduler/apis/config/v1/defaults.go (@00fe7a37)
CONTROLLER_MANAGER_QPS, CONTROLLER_MANAGER_BURST = 20.0, 30  # pkg/controller/apis/config/v1alpha1/defaults.go


class ClientConnection(_Strict):
    """component-base ClientConnectionConfiguration's qps and burst: the program's client-go token bucket. 0 (or
    absent) takes the program's default, as its SetDefaults does; a negative qps turns client-side rate limiting off
    (client-go builds a limiter only for QPS > 0); burst must be non-negative (component-base
    ValidateClientConnectionConfiguration)."""

    qps: float = 0.0
    burst: int = Field(default=0, ge=0, le=INT32_MAX)

    def limits(self, qps: float, burst: int) -> tuple[float, int]:
        """(qps, burst) with the program's defaults for the zero values."""
        return (self.qps or qps, self.burst or burst)


class KubeSchedulerSpec(_Strict):
    """KubeSchedulerConfiguration fields the twin reads: ``clientConnection`` (default 50 qps / 100 burst)."""

    clientConnection: ClientConnection = Field(default_factory=ClientConnection)


class KubeControllerManagerSpec(_Strict):
    """kube-controller-manager flags the twin models: ``--kube-api-qps`` / ``--kube-api-burst`` (default 20 / 30),
    each controller's own client, and ``--terminated-pod-gc-threshold``. GKE runs the control plane and does not
    publish its values: the defaults are upstream's (a twin assumption for GKE)."""

    clientConnection: ClientConnection = Field(default_factory=ClientConnection)
    # --terminated-pod-gc-threshold (int32): terminated pods kept before PodGC deletes the oldest; <= 0 turns the
    # terminated-pod collector off (kubernetes pkg/controller/podgc/config/v1alpha1/defaults.go: 12500)
    terminatedPodGCThreshold: int = Field(default=12_500, ge=-INT32_MAX - 1, le=INT32_MAX)


class JobSetControllerSpec(_Strict):
    """The JobSet controller manager's ``--feature-gates`` the twin models: ``RestartJob`` (kubernetes-sigs/jobset
    pkg/features/features.go: alpha, off by default), which lets failurePolicy rules use the RestartJob and
    RestartJobAndIgnoreMaxRestarts actions (recreate only the failed child Job); with it off the JobSet webhook
    refuses them."""

    featureGates: dict[Literal["RestartJob"], bool] = Field(default_factory=dict)


class ClusterNetworkConfig(_Strict):
    """The GKE cluster API's ``networkConfig`` fields that decide whether multi-network Pods exist: ``datapathProvider``
    (``gcloud container clusters create --enable-dataplane-v2`` sets ADVANCED_DATAPATH) and ``enableMultiNetworking``
    (``--enable-multi-networking``). GKE's "Set up multi-network support for Pods" page: multi-network support
    "requires GKE Dataplane V2". Defaults: both on, as the clusters Google's GPUDirect-RDMA and H4D guides create
    (the setting the examples' GPUDirect pods need); GKE's own API default for a new Standard cluster is neither.
    validation/multinetwork.py refuses what such a cluster refuses."""

    datapathProvider: Literal["ADVANCED_DATAPATH", "LEGACY_DATAPATH"] = "ADVANCED_DATAPATH"
    enableMultiNetworking: bool = True


class ClusterSpec(_Strict):
    """GKE cluster settings the twin reads (the cluster API's field names)."""

    networkConfig: ClusterNetworkConfig = Field(default_factory=ClusterNetworkConfig)


Report = Literal["summary", "html"]
ALL_REPORTS: tuple[Report, ...] = ("summary", "html")


class ScenarioSpec(_Strict):
    duration: str = "1d"
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    clusterName: str = "kubetwin"
    startTime: str = "2026-01-01T00:00:00Z"
    scoringStrategy: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"
    report: list[Report] = Field(default_factory=lambda: list(ALL_REPORTS))
    sampleInterval: str = "5m"
    # history.jsonl and events.jsonl: Auto writes them plain until the history reaches 64 MiB, then compresses both
    # (history.jsonl.zst, events.jsonl.zst: zstd's seekable format, `zstdcat FILE | jq`); Zstd from the start; None
    # never (sim/historyfile.py).
    historyCompression: Literal["Auto", "Zstd", "None"] = "Auto"
    # The FGD paper's GPU placement policies as the Score step for GPU pods (scheduler/gpushare.py); None keeps
    # kube-scheduler's default scoring.
    gpuPlacementPolicy: Literal["Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD"] | None = None
    # Kubernetes feature gates the twin models (kube-scheduler --feature-gates); defaults are Kubernetes 1.34's.
    featureGates: dict[Literal["DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices",
                               "DRADeviceTaints"], bool] = Field(default_factory=dict)
    # Record why each pod and each Kueue workload was (not) scheduled, per plugin and per flavor, into the run
    # folder's scheduling-trace.jsonl for `kubetwin explain pod|workload` (`kubetwin run --trace-scheduling`).
    traceScheduling: bool = False
    # Create the namespaces objects use that no Namespace object defines (for cluster dumps); without it an object
    # in a missing namespace is refused as the API server refuses it (validation/namespaces.py).
    createMissingNamespaces: bool = False
    # GKE add-ons the cluster has enabled that change which objects exist: GcpFilestoreCsiDriver installs the
    # Filestore StorageClasses standard-rwx, premium-rwx, zonal-rwx, enterprise-rwx, enterprise-multishare-rwx
    # (catalog/storage.py ADDON_STORAGE_CLASSES; Autopilot enables it by default, Standard does not).
    gkeAddons: list[Literal["GcpFilestoreCsiDriver"]] = Field(default_factory=list)
    # The cluster's networkConfig (datapathProvider, enableMultiNetworking): multi-network Pods (GPUDirect NICs, H4D's
    # Cloud RDMA) exist only with both on (validation/multinetwork.py; docs/training.md "Multi-networking").
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)

    # The API clients of kube-scheduler and kube-controller-manager (sim/apiclient.py): token buckets on the simulated
    # clock that pace their writes (binds, status patches, pod creates and deletes); the controller manager's
    # PodGC threshold.
    kubeScheduler: KubeSchedulerSpec = Field(default_factory=KubeSchedulerSpec)
    kubeControllerManager: KubeControllerManagerSpec = Field(default_factory=KubeControllerManagerSpec)
    # The JobSet controller manager's feature gates (RestartJob; docs/jobset.md)
    jobsetController: JobSetControllerSpec = Field(default_factory=JobSetControllerSpec)

    # Cluster autoscaler, the zones' VM capacity and the project's Compute Engine quotas (autoscaler/capacity.py):
    # quotas[region][metric] = limit, e.g. {us-central1: {NVIDIA_H100_GPUS: 16}}; region "global" holds
    # GPUS_ALL_REGIONS (https://cloud.google.com/compute/resource-usage#gpu_quota).
    clusterAutoscaler: ClusterAutoscalerSpec = Field(default_factory=ClusterAutoscalerSpec)
    # GKE's Cluster.autoscaling: node auto-provisioning and the cluster's resource limits (autoscaler/nap.py)
    clusterAutoscaling: ClusterAutoscaling = Field(default_factory=ClusterAutoscaling)
    capacity: list[ZoneCapacity] = Field(default_factory=list)
    quotas: dict[str, dict[str, float]] = Field(default_factory=dict)

    _durations = field_validator("duration")(_check_duration)
    _intervals = field_validator("sampleInterval")(_positive_duration)

    @model_validator(mode="after")
    def _samples(self) -> ScenarioSpec:
        """Twin limit: the metrics keep one sample per sampleInterval of the run."""
        samples = parse_duration(self.duration) / parse_duration(self.sampleInterval)
        if samples > MAX_SAMPLES:
            raise ValueError(f"duration {self.duration} / sampleInterval {self.sampleInterval} is {samples:.3g} "
                             f"samples: the twin keeps at most {MAX_SAMPLES:,} (a twin limit); raise sampleInterval")
        return self


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


# ---- RequestTrace: the requests an LLM serving scenario sends (serving/traces/arrays.py, generator.py) ----


class TraceTarget(_Strict):
    """Where the trace's requests go: an InferencePool (through its EPP) or a plain Service."""

    kind: Literal["InferencePool", "Service"]
    name: str
    namespace: str | None = None


class Lognormal(_Strict):
    """Token counts drawn lognormally; `mean` is the arithmetic mean in tokens, `sigma` the log-space deviation."""

    mean: float = Field(gt=0)
    sigma: float = Field(ge=0)


class Uniform(_Strict):
    min: int = Field(le=INT32_MAX, ge=0)
    max: int = Field(le=INT32_MAX, ge=0)


class TraceSource(_Strict):
    """A real trace to sample token counts from (path relative to the manifest's folder)."""

    format: Literal["azure-llm-2023", "mooncake", "vidur"]
    path: str


class TokenDistribution(_Strict):
    """Exactly one of `value` (fixed), `lognormal`, `uniform` or `fromTrace`; `min`/`max` clip the draws."""

    value: int | None = Field(le=INT32_MAX, default=None, ge=0)
    lognormal: Lognormal | None = None
    uniform: Uniform | None = None
    fromTrace: TraceSource | None = None
    min: int = Field(le=INT32_MAX, default=1, ge=0)
    max: int | None = Field(le=INT32_MAX, default=None, ge=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> TokenDistribution:
        given = [k for k in ("value", "lognormal", "uniform", "fromTrace") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"set exactly one of value, lognormal, uniform, fromTrace (got "
                             f"{', '.join(given) or 'none'})")
        return self


def _fixed_tokens(v: Any) -> Any:
    """A plain number of tokens means a fixed value (so errors name one shape, not each union branch)."""
    return {"value": v} if isinstance(v, int) and not isinstance(v, bool) else v


Tokens = Annotated[TokenDistribution, BeforeValidator(_fixed_tokens)]


class ArrivalProcess(_Strict):
    """How arrivals are spaced at the scheduled rate: `poisson`; `gamma` with coefficient of variation `cv`
    (cv > 1 is burstier than Poisson); `on-off`: a two-state modulated Poisson process, ON periods of mean
    `onDuration` at the scheduled rate and OFF periods of mean `offDuration` at `offRateFactor` of it
    (exponential period lengths)."""

    type: Literal["poisson", "gamma", "on-off"] = "poisson"
    cv: float = Field(default=1.0, gt=0)
    onDuration: str = "30s"
    offDuration: str = "30s"
    offRateFactor: float = Field(default=0.0, ge=0)

    _durations = field_validator("onDuration", "offDuration")(_check_duration)


class RateStep(_Strict):
    """From `at` on, the rate is `rate` requests/s (until the next step)."""

    at: str
    rate: float = Field(ge=0)

    _durations = field_validator("at")(_check_duration)


class Diurnal(_Strict):
    """A day-shaped rate: a cosine between `trough` x rate and `peak` x rate, peaking at `peakAt` (time of day
    from the trace start), repeating every `period`."""

    peakAt: str = "14h"
    peak: float = Field(default=1.0, gt=0)
    trough: float = Field(default=0.3, ge=0)
    period: str = "24h"

    _durations = field_validator("peakAt", "period")(_check_duration)


class RateSchedule(_Strict):
    """Either piecewise-constant `steps` or a `diurnal` shape multiplying `rate`."""

    steps: list[RateStep] = Field(default_factory=list)
    diurnal: Diurnal | None = None

    @model_validator(mode="after")
    def _one(self) -> RateSchedule:
        if self.diurnal is not None and self.steps:
            raise ValueError("set either steps or diurnal, not both")
        return self


class SharedPrefix(_Strict):
    """inference-perf's `shared_prefix` data (num_groups, num_prompts_per_group, system_prompt_len,
    question_len, output_len): a system prompt shared by each group, a question per prompt."""

    numGroups: int = Field(le=INT32_MAX, ge=1)
    promptsPerGroup: int = Field(le=INT32_MAX, ge=1)
    systemPromptLen: int = Field(le=INT32_MAX, ge=0)
    questionLen: int = Field(le=INT32_MAX, ge=1)
    outputLen: int = Field(le=INT32_MAX, ge=1)


class LoraChoice(_Strict):
    name: str
    weight: float = Field(default=1.0, gt=0)


class Sessions(_Strict):
    """Multi-turn conversations: `concurrent` open sessions; each arrival continues a random open session,
    whose next prompt is its whole history (earlier prompts and answers) plus a new message; a session ends
    after a geometric number of turns with mean `meanTurns`."""

    concurrent: int = Field(le=INT32_MAX, ge=1)
    meanTurns: float = Field(default=4.0, ge=1)


class TraceGenerator(_Strict):
    rate: float = Field(gt=0)
    process: ArrivalProcess = Field(default_factory=ArrivalProcess)
    duration: str | None = None  # default: the Scenario's duration
    rateSchedule: RateSchedule | None = None
    promptTokens: Tokens | None = None  # a number of tokens, or a distribution
    outputTokens: Tokens | None = None
    sharedPrefix: SharedPrefix | None = None
    loras: list[LoraChoice] = Field(default_factory=list)
    sessions: Sessions | None = None

    @field_validator("duration")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        return None if v is None else _check_duration(v)


class RequestTraceSpec(_Strict):
    format: Literal["azure-llm-2023", "mooncake", "vidur", "generator"]
    path: str | None = None  # relative to the manifest file's folder; required unless format: generator
    target: TraceTarget
    model: str
    timeScale: float = Field(default=1.0, gt=0)  # multiplies timestamps: 0.5 replays twice as fast
    limit: int | None = Field(le=INT32_MAX, default=None, ge=1)
    startOffset: str = "0s"  # skip the trace's first seconds
    loop: bool = False  # replay the trace again until the scenario ends
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)  # default: the Scenario's seed
    # InferenceObjective priority of these requests (< 0 sheddable)
    priority: int = Field(default=0, ge=-INT32_MAX - 1, le=INT32_MAX)
    generator: TraceGenerator | None = None

    _durations = field_validator("startOffset")(_check_duration)

    @model_validator(mode="after")
    def _source(self) -> RequestTraceSpec:
        if self.format == "generator" and self.generator is None:
            raise ValueError("format: generator needs a generator block (rate, and promptTokens/outputTokens or "
                             "sharedPrefix)")
        if self.format != "generator" and self.generator is not None:
            raise ValueError(f"a generator block is only used with format: generator, not {self.format}")
        if self.format != "generator" and not self.path:
            raise ValueError(f"format: {self.format} reads a file: set spec.path")
        return self


class RequestTrace(_Strict):
    apiVersion: Literal["kubetwin.io/v1alpha1"]
    kind: Literal["RequestTrace"]
    metadata: Metadata
    spec: RequestTraceSpec


# ---- Change: a write to a named object at a simulated time (kubetwin.changes; issue 36 item 2) ----

# What each shorthand acts on: kubectl cordon / uncordon / drain (Nodes), a delete the twin follows through (a Node's
# pods go by PodGC, a NodePool's VMs with it, a workload's dependents by the garbage collector), kubectl scale
# (the kinds whose controllers the twin runs; a NodePool's nodes per zone, as gcloud container clusters resize), and a
# Job's or JobSet's spec.suspend.
CHANGE_ACTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "Cordon": (("v1", "Node"),), "Uncordon": (("v1", "Node"),), "Drain": (("v1", "Node"),),
    "Delete": (("v1", "Node"), ("v1", "Pod"), (TWIN_API, "NodePool"), ("apps/v1", "Deployment"),
               ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
               ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")),
    "Scale": (("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), (TWIN_API, "NodePool")),
    "Suspend": (("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet")),
    "Resume": (("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet")),
}


class ChangeTarget(_Strict):
    """The object the change writes to, as `kubectl patch TYPE NAME -n NAMESPACE` names it."""

    apiVersion: str
    kind: str
    name: str
    namespace: str | None = None


class DrainOptions(_Strict):
    """kubectl drain's flags, with its defaults (k8s.io/kubectl/pkg/cmd/drain)."""

    ignoreDaemonSets: bool = False  # --ignore-daemonsets
    deleteEmptyDirData: bool = False  # --delete-emptydir-data
    force: bool = False  # --force: pods that declare no controller go too
    timeout: Annotated[str, BeforeValidator(_check_duration)] = "0s"  # --timeout; 0s: wait as long as it takes


class ChangeSpec(_Strict):
    at: Annotated[str, BeforeValidator(_check_duration)]  # simulated time from the run's start
    target: ChangeTarget
    patchType: Literal["strategic", "merge", "json"] = "strategic"  # kubectl patch --type (its default)
    patch: Any = None  # the patch body: a map (strategic, merge) or a list of operations (json)
    action: Literal["Cordon", "Uncordon", "Drain", "Delete", "Scale", "Suspend", "Resume"] | None = None
    replicas: int | None = Field(default=None, ge=0, le=INT32_MAX)  # Scale's --replicas
    drain: DrainOptions | None = None

    @model_validator(mode="after")
    def _one_change(self) -> ChangeSpec:
        if (self.patch is None) == (self.action is None):
            raise ValueError("set exactly one of spec.patch (with spec.patchType) or spec.action")
        if self.patch is not None:
            if self.patchType == "json" and not isinstance(self.patch, list):
                raise ValueError("patchType json takes a list of operations (RFC 6902) in spec.patch")
            if self.patchType != "json" and not isinstance(self.patch, dict):
                raise ValueError(f"patchType {self.patchType} takes a map in spec.patch")
            return self
        targets = CHANGE_ACTIONS[str(self.action)]
        if (self.target.apiVersion, self.target.kind) not in targets:
            raise ValueError(f"action {self.action} acts on " + ", ".join(f"{k} ({v})" for v, k in targets) +
                             f", not {self.target.kind} ({self.target.apiVersion})")
        if (self.action == "Scale") != (self.replicas is not None):
            raise ValueError("spec.replicas goes with action Scale, and Scale needs it")
        if self.drain is not None and self.action != "Drain":
            raise ValueError("spec.drain goes with action Drain")
        return self


class ReservationAccelerator(_Strict):
    acceleratorType: str
    acceleratorCount: int = Field(ge=1, le=INT32_MAX)


class ReservationInstanceProperties(_Strict):
    machineType: str
    guestAccelerators: list[ReservationAccelerator] = Field(default_factory=list)


class SpecificReservation(_Strict):
    count: int = Field(ge=1, le=INT32_MAX)
    instanceProperties: ReservationInstanceProperties


class ShareSettings(_Strict):
    """Compute Engine's shareSettings: LOCAL (the owner project only) or SPECIFIC_PROJECTS (`projects`: the
    consumer projects, gcloud --share-with)."""

    shareType: Literal["LOCAL", "SPECIFIC_PROJECTS"] = "LOCAL"
    projects: list[str] = Field(default_factory=list)


class ReservationSubBlock(_Strict):
    name: str
    count: int = Field(ge=1, le=INT32_MAX)


class ReservationBlock(_Strict):
    """One reservationBlocks entry of a DENSE reservation: its VMs and, optionally, its sub-blocks."""

    name: str
    count: int = Field(ge=1, le=INT32_MAX)
    subBlocks: list[ReservationSubBlock] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sub_sum(self) -> ReservationBlock:
        if self.subBlocks and sum(s.count for s in self.subBlocks) != self.count:
            raise ValueError(f"block {self.name}: its subBlocks hold {sum(s.count for s in self.subBlocks)} VMs, "
                             f"its count is {self.count}")
        return self


class ReservationSpec(_Strict):
    """A Compute Engine reservation's fields (compute/v1 Reservation: zone, specificReservation{count,
    instanceProperties}, specificReservationRequired, shareSettings, deploymentType) plus the twin's: `project`
    (the owner; the cluster's project `kubetwin` when absent), `blocks` (the layout Compute Engine reports as
    reservationBlocks / reservationSubBlocks) and `hourlyPriceUsd` (per VM, e.g. a committed use rate; default the
    machine type's on-demand price). autoscaler/reservations.py."""

    zone: str = DEFAULT_ZONE
    project: str | None = None
    specificReservation: SpecificReservation
    specificReservationRequired: bool = False
    shareSettings: ShareSettings = Field(default_factory=ShareSettings)
    deploymentType: Literal["DENSE", "DEPLOYMENT_TYPE_UNSPECIFIED"] | None = None
    blocks: list[ReservationBlock] = Field(default_factory=list)
    hourlyPriceUsd: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _block_sum(self) -> ReservationSpec:
        if self.blocks and self.deploymentType != "DENSE":
            raise ValueError("blocks go with deploymentType: DENSE (only dense reservations are made of blocks)")
        total = sum(b.count for b in self.blocks)
        if self.blocks and total != self.specificReservation.count:
            raise ValueError(f"the blocks hold {total} VMs, specificReservation.count is "
                             f"{self.specificReservation.count}")
        return self


class Reservation(_Strict):
    apiVersion: Literal["kubetwin.io/v1alpha1"]
    kind: Literal["Reservation"]
    metadata: Metadata
    spec: ReservationSpec


class Change(_Strict):
    apiVersion: Literal["kubetwin.io/v1alpha1"]
    kind: Literal["Change"]
    metadata: Metadata
    spec: ChangeSpec


TWIN_KINDS: dict[str, type[BaseModel]] = {"NodePool": NodePool, "Scenario": Scenario,
                                         "RequestTrace": RequestTrace, "Change": Change,
                                         "Reservation": Reservation}

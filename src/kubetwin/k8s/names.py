"""Well-known names: the extended resources and node labels every layer reads, spelled once.

Kubernetes' own labels are k8s.io/api core/v1 well_known_labels.go (LabelHostname, LabelTopologyZone,
LabelTopologyRegion, LabelInstanceTypeStable); the extended resources are the device plugins' (NVIDIA's
k8s-device-plugin advertises nvidia.com/gpu, and nvidia.com/mig-<profile> under the mixed MIG strategy; GKE's TPU
device plugin google.com/tpu); the cloud.google.com/ node labels are those GKE sets on a node pool's nodes
(https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, .../tpus, .../spot-vms, .../compact-placement,
.../gpus-multi, .../timesharing-gpus)."""

from __future__ import annotations

# -- extended resources (device plugins) --------------------------------------------------------------------------
GPU = "nvidia.com/gpu"
TPU = "google.com/tpu"

# -- Kubernetes' well-known node labels (k8s.io/api core/v1 well_known_labels.go) ---------------------------------
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

# -- GKE's node labels ---------------------------------------------------------------------------------------------
GKE_NODEPOOL = "cloud.google.com/gke-nodepool"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_MACHINE_FAMILY = "cloud.google.com/machine-family"
GKE_SPOT = "cloud.google.com/gke-spot"
GKE_FLEX_START = "cloud.google.com/gke-flex-start"
COMPUTE_CLASS = "cloud.google.com/compute-class"  # a pod's node selector, a class's pools' label and taint
GKE_PROVISIONING = "cloud.google.com/gke-provisioning"
# chips (GPUs) per VM on the node pools node auto-provisioning creates for TPUs (pkg/autoprovisioning/injection.go:
# spec.Labels[AcceleratorCountLabel]); pods may select it
GKE_ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
# A VM's end (max run duration): GKE's autoscaler reads them (GoogleCloudPlatform/cluster-autoscaler
# pkg/cloudprovider/gke/labels/system_labels.go MaxRunDurationLabelKey, InstanceTerminationAnnotationKey,
# NodeRecycleLeadTimeSecondsLabelKey)
GKE_MAX_RUN_DURATION = "cloud.google.com/gke-max-run-duration-seconds"
MACHINE_TERMINATION = "node.gke.io/machine-termination-datetime"  # a Node annotation, RFC 3339
GKE_RECYCLE_LEAD_TIME = "cloud.google.com/gke-node-recycle-lead-time-seconds"
# how long a flex-start pool's resize waits for capacity (labels.CapacityCheckWaitTimeSecondsLabel; a ComputeClass
# rule's capacityCheckWaitTimeSeconds)
GKE_CAPACITY_CHECK_WAIT = "cloud.google.com/gke-capacity-check-wait-time-seconds"
GKE_PLACEMENT_GROUP = "cloud.google.com/gke-placement-group"
# Where a VM sits in Compute Engine's physical topology: GKE labels the nodes of A4X, A4, A3 Ultra and A3 Mega with
# them (https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas). A block is sub-blocks
# on one non-blocking fabric, a sub-block the hosts of one rack (an A4X sub-block is one NVL72 NVLink domain)
# (https://cloud.google.com/ai-hypercomputer/docs/terminology).
GCE_TOPOLOGY_BLOCK = "cloud.google.com/gce-topology-block"
GCE_TOPOLOGY_SUBBLOCK = "cloud.google.com/gce-topology-subblock"
GCE_TOPOLOGY_HOST = "cloud.google.com/gce-topology-host"
GKE_TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
GKE_TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
GKE_GPU_PARTITION_SIZE = "cloud.google.com/gke-gpu-partition-size"
GKE_GPU_SHARING_STRATEGY = "cloud.google.com/gke-gpu-sharing-strategy"
GKE_MAX_SHARED_CLIENTS_PER_GPU = "cloud.google.com/gke-max-shared-clients-per-gpu"

# -- the twin's own annotations read by several layers ------------------------------------------------------------
# An imported object's creationTimestamp in the cluster it was dumped from (importer/convert.py writes it on Kueue
# Workloads; the store stamps every object created at t=0 with t=0): Kueue's queue order reads it, so pending
# Workloads keep the FIFO order they had (kueue/api.py).
CLUSTER_CREATION_TIMESTAMP = "kubetwin.io/cluster-creation-timestamp"

"""The openb trace as a time-driven `kubetwin run` scenario: its nodes as Node objects, its pods arriving at
their creation times and running as long as they ran in the trace.

Nodes are written as static Node objects (as KWOK fakes nodes): capacity and allocatable from the trace, GPUs as
`nvidia.com/gpu`, the GPU model as `alibabacloud.com/gpu-card-model`, no taints (the trace's nodes are Alibaba's,
not GKE's). A pod asks for `cpu`/`memory`; a whole-GPU pod for `nvidia.com/gpu`, a GPU-sharing pod through
open-gpu-share's `alibabacloud.com/gpu-milli` annotation; `gpu_spec` becomes node affinity on the model label.
It is created at `creation_time` and runs for `deletion_time - scheduled_time` (the time it ran in the trace),
so a policy that makes pods wait makes them finish later; pods without a deletion time run to the end.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubetwin.experiments.openb import TraceNode, TracePod
from kubetwin.k8s.names import GKE_NODEPOOL, GPU, HOSTNAME
from kubetwin.scheduler.gpushare import GPU_COUNT, GPU_MILLI

MODEL_LABEL = "alibabacloud.com/gpu-card-model"
MAX_PODS = "1000"  # the paper's simulator does not limit pods per node; the trace has nodes with hundreds


def _seconds(s: float) -> str:
    return f"{int(s)}s"


def node_object(n: TraceNode) -> dict:
    labels = {HOSTNAME: n.name, GKE_NODEPOOL: "openb-gpu" if n.gpus else
              "openb-cpu"}
    cap = {"cpu": f"{n.cpu_milli}m", "memory": f"{n.memory_mib}Mi", "pods": MAX_PODS}
    if n.gpus:
        labels[MODEL_LABEL] = n.model
        cap[GPU] = str(n.gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels},
            "status": {"capacity": cap, "allocatable": dict(cap),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod_object(p: TracePod, t0: float) -> dict:
    res: dict = {"requests": {"cpu": f"{p.cpu_milli}m", "memory": f"{p.memory_mib}Mi"}}
    ann = {"kubetwin.io/create-at": _seconds((p.creation_time or t0) - t0)}
    if p.deletion_time is not None:
        started = p.scheduled_time if p.scheduled_time is not None else p.creation_time or t0
        ann["kubetwin.io/duration"] = _seconds(max(1.0, p.deletion_time - started))
    if p.num_gpu and p.gpu_milli == 1000:
        res["requests"][GPU] = str(p.num_gpu)
        res["limits"] = {GPU: str(p.num_gpu)}
    elif p.num_gpu:
        ann[GPU_MILLI], ann[GPU_COUNT] = str(p.gpu_milli), str(p.num_gpu)
    spec: dict = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "openb", "resources": res}]}
    if p.gpu_spec:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": MODEL_LABEL, "operator": "In",
                                                         "values": sorted(p.gpu_spec)}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": p.name, "annotations": ann}, "spec": spec}


def to_objects(nodes: Sequence[TraceNode], pods: Sequence[TracePod], policy: str | None,
               limit: int | None = None) -> list[dict]:
    """Scenario + Nodes + Pods for the first `limit` pods by creation time (all by default)."""
    chosen = sorted(pods, key=lambda p: (p.creation_time or 0.0, p.name))[:limit]
    t0 = min((p.creation_time or 0.0 for p in chosen), default=0.0)
    end = max((p.deletion_time or p.creation_time or 0.0 for p in chosen), default=0.0) - t0
    sample = max(600.0, (end + 3600) / 500)  # about 500 samples however long the slice of the trace
    spec: dict = {"duration": _seconds(end + 3600), "sampleInterval": _seconds(sample),
                  "report": ["summary", "html"]}
    if policy:
        spec["gpuPlacementPolicy"] = policy
    scenario = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "openb-replay"},
                "spec": spec}
    return [scenario, *(node_object(n) for n in nodes), *(pod_object(p, t0) for p in chosen)]

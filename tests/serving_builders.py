"""Small builders for serving scenarios, so each test reads like its scenario:
`pool("p").router("round-robin")`, `vllm("srv", replicas=2)`, `trace("t", rate=5)`."""

from __future__ import annotations

from typing import Any

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def scenario(duration: str = "20m", seed: int = 0, sample: str = "30s") -> dict:
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
            "spec": {"duration": duration, "seed": seed, "sampleInterval": sample, "report": ["summary"]}}


def h100_pool(nodes: int, name: str = "h100", autoscale_max: int | None = None) -> dict:
    spec: dict[str, Any] = {"machineType": "a3-highgpu-1g", "nodeCount": nodes, "zones": ["us-central1-a"],
                            "accelerators": [{"type": "nvidia-h100-80gb", "count": 1}]}
    if autoscale_max is not None:
        spec["autoscaling"] = {"minNodeCount": 0, "maxNodeCount": autoscale_max}
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def vllm(name: str, replicas: int, *, args: list[str] | None = None, app: str = "srv", create_at: str | None = None,
         annotations: dict | None = None, volumes: list | None = None, mounts: list | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if create_at:
        meta["annotations"] = {"kubetwin.io/create-at": create_at}
    container: dict[str, Any] = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                                 "args": args if args is not None else ["--model", MODEL],
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod_spec["volumes"] = volumes
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}, "annotations": annotations or {}},
                                  "spec": pod_spec}}}


def inference_pool(name: str = "pool", app: str = "srv", router: str | None = None, ttl: str | None = None) -> dict:
    ann = {}
    if router:
        ann["kubetwin.io/router"] = router
    if ttl:
        ann["kubetwin.io/request-ttl"] = ttl
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": name, "namespace": "default", "annotations": ann},
            "spec": {"selector": {"matchLabels": {"app": app}}, "targetPorts": [{"number": 8000}],
                     "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": 9002}}}}


def service(name: str = "svc", app: str = "srv", router: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if router:
        meta["annotations"] = {"kubetwin.io/router": router}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8000}]}}


def trace(name: str = "t", *, target: tuple[str, str] = ("InferencePool", "pool"), rate: float = 5.0,
          duration: str = "5m", start: str = "0s", model: str = MODEL, prompt: int = 500, output: int = 50,
          shared: dict | None = None, priority: int | None = None) -> dict:
    gen: dict[str, Any] = {"rate": rate, "duration": duration, "process": {"type": "poisson"}}
    if shared:
        gen["sharedPrefix"] = shared
    else:
        gen["promptTokens"], gen["outputTokens"] = prompt, output
    spec: dict[str, Any] = {"format": "generator", "target": {"kind": target[0], "name": target[1]}, "model": model,
                            "generator": gen}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "RequestTrace",
            "metadata": {"name": name, "namespace": "default", "annotations": {"kubetwin.io/create-at": start}},
            "spec": spec}


def inference_model(name: str, model: str = MODEL, criticality: str = "Standard", pool: str = "pool") -> dict:
    return {"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferenceModel",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"modelName": model, "criticality": criticality, "poolRef": {"name": pool}}}


def a100_pool(partition: str | None = None, sharing: str | None = None, clients: int = 2) -> dict:
    """One a2-ultragpu-1g node: its A100 whole, MIG-partitioned or shared (time-slicing / MPS)."""
    acc: dict = {"type": "nvidia-a100-80gb", "count": 1}
    if partition:
        acc["gpuPartitionSize"] = partition
    if sharing:
        acc["gpuSharingConfig"] = {"gpuSharingStrategy": sharing, "maxSharedClientsPerGpu": clients}
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "a100"},
            "spec": {"machineType": "a2-ultragpu-1g", "nodeCount": 1, "zones": ["us-central1-a"],
                     "accelerators": [acc]}}

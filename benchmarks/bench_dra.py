"""DRA scheduling cost against the device plugin, measured in the same run.

The same cluster (H100 a3-highgpu-8g nodes) and the same pods (one GPU each, from a Deployment) twice:
once through the device plugin (`nvidia.com/gpu: 1`), once through DRA (NVIDIA DRA driver twin slices, a
ResourceClaimTemplate per pod, the structured allocator with CEL selectors in the DynamicResources Filter).
Prints pods/s for both and the ratio; each is the best of --repeat runs (median beside it).
Usage: python benchmarks/bench_dra.py [--nodes 200] [--pods 1500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from kubetwin.runner import run

TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _objects(nodes: int, pods: int, dra: bool) -> list[dict]:
    spec = {"machineType": "a3-highgpu-8g", "nodeCount": nodes, "bootDelay": "0s", "driverInstallDelay": "0s",
            "accelerators": [{"type": "nvidia-h100-80gb", "count": 8}]}
    if dra:
        spec["accelerators"][0]["gpuDriverInstallation"] = "INSTALLATION_DISABLED"
        spec["labels"] = {"gke-no-default-nvidia-gpu-device-plugin": "true"}
    objs: list[dict] = [
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench-dra"},
         "spec": {"duration": "10m", "report": ["summary"], "sampleInterval": "10m"}},
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "h100"}, "spec": spec}]
    container: dict = {"name": "c", "image": "x"}
    pod_spec: dict = {"containers": [container], "tolerations": TOLERATE}
    if dra:
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                     "metadata": {"name": "one-h100"}, "spec": {"spec": {"devices": {"requests": [{
                         "name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {
                             "expression": 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) '
                                           '< 0'}}]}}]}}}})
        pod_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-h100"}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    else:
        container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    objs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "w", "annotations": {"kubetwin.io/create-at": "1s"}},
                 "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "w"}},
                          "template": {"metadata": {"labels": {"app": "w"}}, "spec": pod_spec}}})
    return objs


def _time(objs: list[dict], repeat: int) -> tuple[float, float, int]:
    times, bound = [], 0
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        res = run(objects=objs)
        times.append(time.perf_counter() - t)
        bound = sum(1 for _, _, et, o in res.history if o["kind"] == "Event" and o["reason"] == "Scheduled")
    return min(times), statistics.median(times), bound


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    plugin = _time(_objects(a.nodes, a.pods, False), a.repeat)
    dra = _time(_objects(a.nodes, a.pods, True), a.repeat)
    for name, (best, median, bound) in (("device plugin", plugin), ("DRA", dra)):
        print(f"{name:13s}: {bound}/{a.pods} pods bound onto {a.nodes} nodes in {best:.2f}s best "
              f"({bound / best:,.0f} pods/s; median {median:.2f}s)")
    print(f"DRA costs {dra[0] / plugin[0]:.1f}x the device plugin's wall time for the same placements")


if __name__ == "__main__":
    main()

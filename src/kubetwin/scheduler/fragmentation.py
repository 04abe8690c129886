"""GPU fragmentation of a running cluster, as the FGD paper measures it (Weng et al., USENIX ATC'23).

The share of idle GPUs that the workload's typical pods could not use where they sit: an idle GPU on a node
without the CPU left for a typical pod, or too few idle GPUs together for a multi-GPU class, is fragmented.
Here every advertised `nvidia.com/gpu` counts as one GPU (a MIG instance or a time-shared replica included),
and the typical pods are the GPU pods created so far, classed by CPU and GPU request.

It is measured on the scheduler's cache (its NodeInfos, or the GPU placement policy's per-GPU milli), as the
paper's simulator measures it inside its scheduler; the scheduler samples it for the run (FragmentationGauge).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kubetwin.api.podresources import pod_requests
from kubetwin.api.podspec import TemplateMemo
from kubetwin.devices.gpushare import FULL, Shape, TypicalPods, frag_amount
from kubetwin.k8s.names import GPU
from kubetwin.scheduler.gpushare import GpuSharePlacement
from kubetwin.scheduler.nodeinfo import NodeInfo
from kubetwin.store.store import Obj, Store


def cluster_fragmentation(nodes: list[NodeInfo], shapes: Counter[tuple[int, int]]) -> tuple[float, float] | None:
    """(fragmented GPUs as % of all GPUs, fragmented as % of idle GPUs), or None without GPU nodes or pods.
    `shapes` counts pods by (cpu milli, GPUs)."""
    gpu_nodes = [ni for ni in nodes if ni.allocatable.get(GPU, 0) > 0]
    if not gpu_nodes or not shapes:
        return None
    typical = TypicalPods.from_counts(Counter({Shape(cpu, 0, k, FULL, frozenset()): n
                                               for (cpu, k), n in shapes.items()}), {"": 0})
    typical.access[:] = True  # whole GPUs of any model
    gpus = np.array([ni.allocatable[GPU] for ni in gpu_nodes])
    width = int(gpus.max())
    free = np.array([ni.allocatable[GPU] - ni.requested.get(GPU, 0) for ni in gpu_nodes])
    idle = np.where(np.arange(width)[None, :] < free[:, None], FULL, 0)
    cpu_left = np.array([ni.allocatable.get("cpu", 0) - ni.requested.get("cpu", 0) for ni in gpu_nodes])
    frag = float(frag_amount(cpu_left, idle, np.zeros(len(gpu_nodes), np.int64), typical).sum())
    total, idle_milli = int(gpus.sum()) * FULL, float(idle.sum())
    return 100 * frag / total, (100 * frag / idle_milli if idle_milli else 0.0)


def placement_fragmentation(gp: GpuSharePlacement) -> tuple[float, float] | None:
    """The same measure under a gpuPlacementPolicy, over the placement's per-GPU milli (the paper's exact
    setting: fractional pods, GPU models)."""
    gp.sync()
    rows = (gp.t.alive[:len(gp.gpus)] & (gp.gpus > 0)).nonzero()[0]
    if not len(rows) or not gp.seen:
        return None
    frag = float(frag_amount(gp.cpu_left[rows], gp.idle[rows], gp.model[rows], gp.typical()).sum())
    total, idle_milli = int(gp.gpus[rows].sum()) * FULL, float(gp.idle[rows].sum())
    return 100 * frag / total, (100 * frag / idle_milli if idle_milli else 0.0)


class FragmentationGauge:
    """The scheduler's fragmentation at each of the run's sample instants (a sim.outputs Sampler), and its mean
    for summary.json's gpu_fragmentation. Keeps its own count of the GPU pods created (the typical pods)."""

    def __init__(self, store: Store, nodes: Mapping[str, NodeInfo], plugins: Iterable[object] = ()) -> None:
        # with a GPU placement policy among the scheduler's plugins, fragmentation is per GPU from its bookkeeping
        self._nodes = nodes
        self._gpushare = next((p for p in plugins if isinstance(p, GpuSharePlacement)), None)
        self._shapes: Counter[tuple[int, int]] = Counter()  # GPU pods by (cpu milli, GPUs): typical pods
        self._requests_of = TemplateMemo(pod_requests)
        self._samples: list[tuple[float, float]] = []
        store.watch("Pod", self._on_pod)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        if etype == "ADDED":
            req = self._requests_of(pod)
            if req.get(GPU):
                self._shapes[(req.get("cpu", 0), req[GPU])] += 1

    def sample(self) -> dict[str, float | None]:
        gp = self._gpushare
        frag = placement_fragmentation(gp) if gp is not None else \
            cluster_fragmentation(list(self._nodes.values()), self._shapes)
        if frag:
            self._samples.append(frag)
        return {"fragmented_gpu_pct": round(frag[0], 3) if frag else None}

    def summary(self) -> dict[str, Any]:
        if not self._samples:
            return {}
        n = len(self._samples)
        return {"gpu_fragmentation": {"fragmented_gpu_pct_mean": round(sum(f for f, _ in self._samples) / n, 3),
                                      "frag_ratio_pct_mean": round(sum(r for _, r in self._samples) / n, 3),
                                      "samples": n}}

"""The FGD paper's GPU placement policies as the Score step of `kubetwin run` (Scenario.spec.gpuPlacementPolicy).

With a policy set, GPU pods are placed the way the paper's simulator places them (hkust-adsl/kubernetes-scheduler-
simulator: open-gpu-share's Filter and GPU assignment, the policy as the Score plugin over all feasible nodes):
whole-GPU pods (`nvidia.com/gpu: k`) take k fully free GPUs; fractional pods ask with open-gpu-share's annotations
(`alibabacloud.com/gpu-milli: "300"`, `alibabacloud.com/gpu-count: "1"`) and share one GPU's 1000 milli-GPUs.
Which GPUs a pod got is written to the bound pod as `kubetwin.io/gpu-index`. As in the paper's simulator, every
pod (CPU-only ones too) is placed by the policy. GPU model constraints are ordinary
node affinity (nodeSelector on `cloud.google.com/gke-accelerator` or the trace's model label). The typical pods FGD
measures against are the scenario's workload (its pods, and its Jobs' and Deployments' templates times their
counts), as the paper computes them from the whole trace; pods created by nothing in the scenario are added as
they appear.

Scores depend only on a node's state and the pod's shape, so they are cached per shape and recomputed only for
nodes whose state changed (the node table's change log, plus this plugin's own GPU bookkeeping).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from kubetwin.api.podresources import pod_requests
from kubetwin.devices.gpushare import FULL, MAX_GPUS, Shape, TypicalPods, frag_amount
from kubetwin.k8s.names import GKE_ACCELERATOR, GPU
from kubetwin.scheduler.framework import ActionType, ClusterEvent, ClusterEventWithHint, CycleState, Plugin
from kubetwin.scheduler.gpu_policies import TAGS, Scorer, tag_of
from kubetwin.scheduler.nodetable import NodeTable
from kubetwin.scheduler.preemption import pod_key
from kubetwin.store.store import Obj, Store

GPU_MILLI, GPU_COUNT = "alibabacloud.com/gpu-milli", "alibabacloud.com/gpu-count"  # open-gpu-share
GPU_INDEX = "kubetwin.io/gpu-index"  # which GPUs of the node the pod got, e.g. "0,3"
MODEL_LABELS = (GKE_ACCELERATOR, "alibabacloud.com/gpu-card-model")
REASON = "node(s) had no GPUs with enough free milli-GPU"
PLUGIN = "GpuShare"


def shape_of(pod: Obj, requests: dict[str, int]) -> Shape:
    """The pod's ask as the policies see it (num_gpu 0 for a CPU-only pod)."""
    cpu, mem = requests.get("cpu", 0), requests.get("memory", 0) // 2**20
    if requests.get(GPU):
        return Shape(cpu, mem, int(requests[GPU]), FULL, frozenset())
    ann = pod["metadata"].get("annotations") or {}
    if GPU_MILLI in ann:
        return Shape(cpu, mem, int(ann.get(GPU_COUNT, 1)), int(ann[GPU_MILLI]), frozenset())
    return Shape(cpu, mem, 0, 0, frozenset())


class GpuSharePlacement(Plugin):
    """Per-GPU milli bookkeeping over the scheduler's node table rows, and the policy's Score."""

    name = PLUGIN

    def __init__(self, table: NodeTable, policy: str, rng: random.Random, store: Store | None = None) -> None:
        self.t, self.policy, self.rng = table, policy, rng
        self.idle = np.zeros((0, MAX_GPUS), np.int64)
        self.exists = np.zeros((0, MAX_GPUS), bool)
        self.gpus = np.zeros(0, np.int64)
        self.model = np.zeros(0, np.int64)
        self.tags = np.zeros((0, len(TAGS) + 1), np.int64)
        self.model_ids: dict[str, int] = {"": 0}
        self.bound: dict[str, tuple[str, Shape, list[int]]] = {}  # pod key -> (node, shape, GPU ids)
        self.seen: Counter[Shape] = Counter()  # the GPU workload: FGD's typical pods
        self.expected: Counter[Shape] = Counter()  # pods the scenario declared (counted in `seen` up front)
        self._typical: tuple[int, TypicalPods] | None = None
        self.scorer = Scorer(policy, self, None, self.tags)  # type: ignore[arg-type]
        self.version = np.zeros(0, np.int64)  # per row, bumped whenever the node's state changes
        self._log_pos = 0  # absolute position in the node table's change log already folded into `version`
        self._frag = np.zeros(0)
        self._frag_seen = np.zeros(0, np.int64)
        self._frag_of = -1  # the typical-pods count the cached fragments were computed against
        self._scores: dict[Shape, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}
        if store is not None:
            store.watch("Pod", self._on_pod)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod leaving a node frees its GPUs (and CPU); a node added or changed may have room."""
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete)),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.Update))]

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        """A pending pod for the default scheduler appeared: count it in the workload (`created`)."""
        spec = pod["spec"]
        if (etype == "ADDED" and not spec.get("nodeName")
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and spec.get("schedulerName", "default-scheduler") == "default-scheduler"):
            self.created(shape_of(pod, pod_requests(pod)))

    def expect(self, objs: list[Obj]) -> None:
        """The scenario's GPU workload, declared before its objects are created (declared_workload)."""
        for shape, count in declared_workload(objs).items():
            self.declare(shape, count)

    def declare(self, shape: Shape, count: int) -> None:
        """A GPU pod the scenario will create `count` times (the workload FGD measures against)."""
        self.seen[shape] += count
        self.expected[shape] += count

    def created(self, shape: Shape) -> None:
        """A GPU pod appeared: count it unless the scenario declared it."""
        if self.expected[shape] > 0:
            self.expected[shape] -= 1
        else:
            self.seen[shape] += 1

    @property
    def cpu_left(self) -> np.ndarray:
        self.t.column("cpu")
        return self.t.free["cpu"]

    # -- rows -----------------------------------------------------------------------------------
    def sync(self) -> None:
        """Size the arrays to the table and reload rows whose advertised GPUs changed."""
        cap = len(self.t.alive)
        if len(self.gpus) < cap:
            def grow(a: np.ndarray) -> np.ndarray:
                out = np.zeros((cap, *a.shape[1:]), a.dtype)
                out[:len(a)] = a
                return out
            self.idle, self.exists, self.gpus = grow(self.idle), grow(self.exists), grow(self.gpus)
            self.model, self.tags = grow(self.model), grow(self.tags)
            self.version, self._frag, self._frag_seen = grow(self.version), grow(self._frag), grow(self._frag_seen)
            self._frag_seen[:] = -1
            self._scores.clear()
            self.scorer.tags = self.tags
        t = self.t
        end = t.log_base + len(t.changes)
        if self._log_pos < t.log_base:
            self.version += 1
        elif end > self._log_pos:
            np.add.at(self.version, np.array(t.changes[self._log_pos - t.log_base:], np.int64), 1)
        self._log_pos = end
        self.t.column(GPU)
        want = np.where(self.t.alive[:cap], np.minimum(self.t.alloc[GPU][:cap], MAX_GPUS), 0)
        for row in (want != self.gpus[:cap]).nonzero()[0].tolist():
            self._reload(row, int(want[row]))

    def _reload(self, row: int, gpus: int) -> None:
        ni = self.t.infos[row]
        self.version[row] += 1
        self.gpus[row] = gpus
        self.exists[row] = np.arange(MAX_GPUS) < gpus
        self.idle[row] = np.where(self.exists[row], FULL, 0)
        self.tags[row] = 0
        labels = (ni.node["metadata"].get("labels") or {}) if ni is not None else {}
        name = next((labels[k] for k in MODEL_LABELS if k in labels), "")
        self.model[row] = self.model_ids.setdefault(name, len(self.model_ids))
        if ni is None:
            return
        for node, shape, ids in self.bound.values():
            if node == ni.name:
                self._take(row, shape, ids, 1)

    def _take(self, row: int, shape: Shape, ids: list[int], sign: int) -> None:
        self.version[row] += 1
        for g in ids:
            self.idle[row, g] -= sign * shape.gpu_milli
        tag = tag_of(shape)
        if tag >= 0:
            self.tags[row, tag] += sign

    # -- extension points ------------------------------------------------------------------------
    def pre_filter(self, state: CycleState) -> None:
        """The pod's shape; the paper's simulator scores every feasible node (percentageOfNodesToScore 100)."""
        state.data[PLUGIN] = (shape_of(state.pod, state.pi.requests), -1)
        state.want = state.n

    def filter_rows(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        entry = state.data.get(PLUGIN)
        if entry is None or not len(rows):
            return rows
        fits = self.feasible(rows, entry[0])
        if not fits.all():
            state.reject(PLUGIN, REASON, int((~fits).sum()))
        if state.traced is not None:
            infos = state.table.infos
            state.traced[PLUGIN] = {ni.name: "passed" if ok else REASON for r, ok in zip(rows.tolist(), fits.tolist(),
                                    strict=True) if (ni := infos[r]) is not None}
        return rows[fits]

    def select(self, state: CycleState, rows: np.ndarray) -> int | None:
        entry = state.data.get(PLUGIN)
        if entry is None:
            return None
        row, gpu = self.pick(rows, entry[0])
        state.data[PLUGIN] = (entry[0], gpu)
        return row

    def reserve(self, state: CycleState, row: int, node: str) -> dict[str, str] | None:
        entry = state.data.get(PLUGIN)
        if entry is None:
            return None
        ids = self.bind(pod_key(state.pod), node, row, *entry)
        return {GPU_INDEX: ",".join(map(str, ids))} if ids else None

    # -- Filter / Score / Reserve ---------------------------------------------------------------
    def feasible(self, rows: np.ndarray, shape: Shape) -> np.ndarray:
        """open-gpu-share's Filter: k GPUs with the milli free (k fully free GPUs for whole-GPU pods)."""
        self.sync()
        if not shape.gpu_milli:
            return np.ones(len(rows), bool)
        need = shape.gpu_milli
        fits = ((self.idle[rows] >= need) & self.exists[rows]).sum(axis=1) >= shape.num_gpu
        return fits & (self.gpus[rows] > 0)

    def pick(self, rows: np.ndarray, shape: Shape) -> tuple[int, int]:
        """The node row the policy picks (ties: uniformly at random, as selectHost) and the GPU for a shared pod."""
        if self.policy == "Random":
            row = int(rows[self.rng.randrange(len(rows))])
            return row, -1
        score, gpu = self._scored(rows, shape)
        if self.policy == "BestFit":  # NormalizeScore over the feasible nodes, integer min-max
            hi, lo = int(score.max()), int(score.min())
            score = np.zeros_like(score) if hi == lo else (score - lo) * 100 // (hi - lo)
        top = (score == score.max()).nonzero()[0]
        i = int(top[self.rng.randrange(len(top))]) if len(top) > 1 else int(top[0])
        return int(rows[i]), int(gpu[i])

    def _scored(self, rows: np.ndarray, shape: Shape) -> tuple[np.ndarray, np.ndarray]:
        """The policy's raw scores and GPU picks for rows, recomputed only where a node changed."""
        self.sync()
        typ_id = sum(self.seen.values()) if self.policy == "FGD" else 0
        cached = self._scores.get(shape)
        n = len(self.gpus)
        if cached is None or cached[3] != typ_id:
            cached = (np.full(n, -1, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64), typ_id)
            self._scores[shape] = cached
        seen, score, gpu, _ = cached
        stale = rows[seen[rows] != self.version[rows]]
        if len(stale):
            frag = self._fragments(stale) if self.policy == "FGD" else self._frag
            score[stale], gpu[stale] = self.scorer.score(stale, shape, frag)
            seen[stale] = self.version[stale]
        return score[rows], gpu[rows]

    def _fragments(self, rows: np.ndarray) -> np.ndarray:
        """Each node's current fragment against the typical pods (cached per node version)."""
        typ = self.typical()
        self.scorer.typical = typ
        if self._frag_of != sum(self.seen.values()):
            self._frag_seen[:] = -1
            self._frag_of = sum(self.seen.values())
        stale = rows[self._frag_seen[rows] != self.version[rows]]
        if len(stale):
            self._frag[stale] = frag_amount(self.cpu_left[stale], self.idle[stale], self.model[stale], typ)
            self._frag_seen[stale] = self.version[stale]
        return self._frag

    def typical(self) -> TypicalPods:
        total = sum(self.seen.values())
        if self._typical is None or self._typical[0] != total:
            typ = TypicalPods.from_counts(self.seen, self.model_ids)
            typ.access[:] = True  # model constraints are node affinity here, already filtered
            self._typical = (total, typ)
        return self._typical[1]

    def bind(self, key: str, node: str, row: int, shape: Shape, gpu: int) -> list[int]:
        """Reserve: the GPUs the pod takes (best fit or the policy's pick for shared pods, else the lowest
        fully free ones)."""
        if not shape.gpu_milli:
            ids: list[int] = []
        elif shape.shares:
            if gpu < 0:  # Random: any GPU that fits
                fits = ((self.idle[row] >= shape.gpu_milli) & self.exists[row]).nonzero()[0]
                gpu = int(fits[self.rng.randrange(len(fits))])
            ids = [gpu]
        else:
            ids = [int(g) for g in np.nonzero((self.idle[row] >= shape.gpu_milli) & self.exists[row]
                                              & (self.idle[row] == FULL))[0][:shape.num_gpu]]
        self._take(row, shape, ids, 1)
        self.bound[key] = (node, shape, ids)
        return ids

    def forget(self, key: str) -> None:
        self.release(key)

    def release(self, key: str) -> None:
        entry = self.bound.pop(key, None)
        if entry is None:
            return
        node, shape, ids = entry
        row = self.t.row.get(node)
        if row is not None and row < len(self.gpus) and self.gpus[row]:
            self._take(row, shape, ids, -1)

    def shared_milli(self) -> dict[str, int]:
        """Milli-GPUs held per node by GPU-sharing pods (whole-GPU pods are counted as nvidia.com/gpu)."""
        out: dict[str, int] = {}
        for node, shape, ids in self.bound.values():
            if shape.shares:
                out[node] = out.get(node, 0) + shape.gpu_milli * len(ids)
        return out


def declared_workload(objs: list[Obj]) -> Counter[Shape]:
    """GPU pod shapes the scenario's objects will create: Pods, and pod templates times replicas/completions."""
    out: Counter[Shape] = Counter()
    for o in objs:
        kind, spec = o.get("kind"), o.get("spec") or {}
        if kind == "Pod":
            pod, count = o, 1
        elif kind in ("Deployment", "ReplicaSet", "Job"):
            tmpl = spec.get("template") or {}
            pod = {"metadata": tmpl.get("metadata") or {}, "spec": tmpl.get("spec") or {}}
            count = int(spec.get("replicas", 1)) if kind != "Job" else \
                int(spec.get("completions") or spec.get("parallelism") or 1)
        else:
            continue
        if count > 0:
            out[shape_of(pod, pod_requests(pod))] += count
    return out

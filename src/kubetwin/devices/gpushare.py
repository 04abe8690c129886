"""GPU-sharing nodes as Alibaba's open-gpu-share sees them, and the FGD paper's fragmentation measure.

A node has up to MAX_GPUS GPUs, each with 1000 milli-GPUs; a pod asks for `k` GPUs with `m` milli on each
(k == 1 and m < 1000 shares one GPU; whole-GPU pods take k fully free GPUs). The cluster is a set of numpy
arrays so policies score many nodes at once.

Fragmentation (Weng et al., USENIX ATC'23, section 3; hkust-adsl/kubernetes-scheduler-simulator
pkg/utils/frag.go): for a "typical pod" class t with popularity p_t, a node's idle GPU milli counts as
fragment unless t fits on the node (enough GPUs with m_t free, enough CPU, an accepted GPU model); when it
fits, only the GPUs with less than m_t free count. CPU-only classes count all idle GPU milli. The node's
fragment is the p-weighted sum over the classes; the cluster's is the sum over nodes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_GPUS = 8
FULL = 1000  # milli-GPUs in one GPU
TYPICAL_COVERAGE = 0.95  # GetTypicalPods podPopularityThreshold=95 (scripts/generate_config_and_run.py)


@dataclass(frozen=True)
class Shape:
    """What a pod asks for; pods with equal shapes are scheduled identically."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU
    models: frozenset[str]  # accepted GPU models, empty = any

    @property
    def gpu_total(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def shares(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < FULL


@dataclass
class TypicalPods:
    """The target workload: classes (cpu, m, k, models) and their popularity, as numpy columns."""

    cpu: np.ndarray
    milli: np.ndarray
    count: np.ndarray
    access: np.ndarray  # [class, model id] may the class run on that GPU model
    p: np.ndarray

    @classmethod
    def from_shapes(cls, shapes: Sequence[Shape], model_ids: dict[str, int],
                    coverage: float = TYPICAL_COVERAGE) -> TypicalPods:
        """GetTypicalPods: exact (cpu, milli, count, models) classes by popularity (ties: the larger class
        first), kept until they cover `coverage` of the pods, then renormalized. Memory is not part of a class."""
        return cls.from_counts(Counter(shapes), model_ids, coverage)

    @classmethod
    def from_counts(cls, shapes: Counter[Shape], model_ids: dict[str, int],
                    coverage: float = TYPICAL_COVERAGE) -> TypicalPods:
        """from_shapes over pod shapes already counted."""
        counts: Counter[tuple[int, int, int, str]] = Counter()
        for s, n in shapes.items():
            counts[(s.cpu_milli, s.gpu_milli, s.num_gpu, "|".join(sorted(s.models)))] += n
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        total, kept, cum = sum(counts.values()), [], 0
        for key, n in ranked:
            kept.append((key, n))
            cum += n
            if cum >= coverage * total:
                break
        access = np.zeros((len(kept), max(len(model_ids), 1)), bool)
        for i, ((_, milli, _, models), _) in enumerate(kept):
            if milli:
                wanted = set(models.split("|")) if models else None
                for name, mid in model_ids.items():
                    access[i, mid] = bool(name) and (wanted is None or name in wanted)
        arr = np.array([k for k, _ in kept], dtype=object)
        return cls(arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2].astype(np.int64), access,
                   np.array([n for _, n in kept], float) / cum)


class GpuShareCluster:
    """Nodes as arrays: CPU, memory and pod slots left, per-GPU idle milli, GPU model."""

    def __init__(self, names: Sequence[str], cpu: Sequence[int], memory: Sequence[int], gpus: Sequence[int],
                 models: Sequence[str], max_pods: int = 1001) -> None:
        n = len(names)
        self.names = list(names)
        self.model_ids: dict[str, int] = {}
        self.model = np.array([self.model_ids.setdefault(m, len(self.model_ids)) for m in models], np.int64)
        self.gpus = np.asarray(gpus, np.int64)
        if n and (self.gpus.max() > MAX_GPUS):
            raise ValueError(f"a node has more than {MAX_GPUS} GPUs")
        self.exists = np.arange(MAX_GPUS)[None, :] < self.gpus[:, None]
        self.idle = np.where(self.exists, FULL, 0).astype(np.int64)  # [node, gpu] idle milli; 0 where no GPU
        self.cpu_cap = np.asarray(cpu, np.int64)
        self.cpu_left = self.cpu_cap.copy()
        self.mem_left = np.asarray(memory, np.int64).copy()
        self.pods_left = np.full(n, max_pods, np.int64)
        self.capacity_milli = int(self.gpus.sum()) * FULL
        self.used_milli = 0

    def access(self, shape: Shape) -> np.ndarray:
        """IsNodeAccessibleToPodByType: any model for an unconstrained pod, else one of the named models."""
        if not shape.models:
            return np.ones(len(self.names), bool)
        ok = np.array([name in shape.models and bool(name) for name in self.model_ids])
        return ok[self.model]

    def feasible(self, rows: np.ndarray, shape: Shape, access: np.ndarray) -> np.ndarray:
        """Filter: NodeResourcesFit (cpu, memory, pod slots) and the open-gpu-share GPU filter."""
        if len(rows) == 1:  # most calls: the one node bound since the shape was last filtered
            return np.array([self._feasible_one(int(rows[0]), shape, access)])
        ok = (self.cpu_left[rows] >= shape.cpu_milli) & (self.mem_left[rows] >= shape.memory_mib) & \
            (self.pods_left[rows] >= 1)
        if shape.gpu_milli:
            idle = self.idle[rows]  # an absent GPU has 0 idle: never enough for gpu_milli > 0
            fits = idle.max(axis=1) >= shape.gpu_milli if shape.num_gpu == 1 else \
                np.count_nonzero(idle >= shape.gpu_milli, axis=1) >= shape.num_gpu
            ok &= fits & access[rows] & (self.gpus[rows] > 0)
        return ok

    def _feasible_one(self, r: int, shape: Shape, access: np.ndarray) -> bool:
        """feasible for one row, on Python scalars (a dozen small array operations cost more than the test)."""
        if self.cpu_left.item(r) < shape.cpu_milli or self.mem_left.item(r) < shape.memory_mib or \
                self.pods_left.item(r) < 1:
            return False
        if not shape.gpu_milli:
            return True
        gpus = self.gpus.item(r)
        if not access.item(r) or gpus <= 0:
            return False
        m = shape.gpu_milli
        return sum(1 for idle in self.idle[r, :gpus].tolist() if idle >= m) >= shape.num_gpu

    def whole_gpus(self, row: int, k: int) -> list[int]:
        """AllocateExclusiveGpuId: the lowest-index fully free GPUs."""
        return [int(g) for g in np.nonzero((self.idle[row] == FULL) & self.exists[row])[0][:k]]

    def bind(self, row: int, shape: Shape, gpu_ids: Sequence[int]) -> None:
        self.cpu_left[row] -= shape.cpu_milli
        self.mem_left[row] -= shape.memory_mib
        self.pods_left[row] -= 1
        for g in gpu_ids:
            self.idle[row, g] -= shape.gpu_milli
        self.used_milli += shape.gpu_milli * len(gpu_ids)


def frag_amount(cpu_left: np.ndarray, idle: np.ndarray, model: np.ndarray, typical: TypicalPods) -> np.ndarray:
    """Fragment milli of each given node state (rows of cpu_left / idle / model), against the typical pods."""
    total = idle.sum(axis=1).astype(float)  # [B]
    gpu_class = typical.milli > 0
    m = typical.milli[None, :, None]  # [1, T, 1]
    enough = idle[:, None, :] >= m  # [B, T, G]; absent GPUs have 0 idle, never >= m > 0
    gpu_ok = enough.sum(axis=2) >= typical.count[None, :]
    fits = gpu_ok & (cpu_left[:, None] >= typical.cpu[None, :]) & typical.access[:, model].T & gpu_class[None, :]
    low = (idle[:, None, :] * ~enough).sum(axis=2)  # idle milli on GPUs too small for the class
    per_class = np.where(fits, low, total[:, None])
    return per_class @ typical.p


class FragTable:
    """frag_amount against one fixed TypicalPods, faster and bit for bit the same.

    The same [node, class] matrix is built with fewer array operations and multiplied by the popularities with the
    same matmul, so every batch gives the same floats as frag_amount: each GPU's idle milli is binned once among the
    classes' distinct milli (np.searchsorted), the bins are counted and their idle milli summed per node (two
    bincounts, exact on integers), and "enough GPUs" / "idle on too small GPUs" per milli are the cumulative sums;
    CPU and model access are one lookup in a [model, CPU bucket, class] table. A batch of one node (most calls:
    the node a pod was just bound to, or the one node whose state changed since a shape was last scored) is
    memoized by what its fragment depends on: its GPUs' idle milli as a multiset (sorted: the counts and the exact
    integer sums above do not see the GPUs' order), its model and how many class CPU requests its free CPU covers;
    runs on one pod list may share a table and its memo. Larger batches are not memoized: BLAS sums a row
    differently depending on its place in the batch (OpenBLAS dgemv), so only the same batch gives the same floats.
    """

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        milli = typical.milli
        self._u_milli, cls_u = np.unique(milli, return_inverse=True)
        self._cls_u = cls_u.reshape(-1)
        self._count = typical.count
        self._cpu_sorted = sorted(set(typical.cpu.tolist()))
        self._cpu_steps = np.array(self._cpu_sorted, np.int64)
        # [model, CPU bucket, class]: the class may use the model's GPUs and its CPU request is among the bucket's
        # (bucket k: the node's free CPU covers the k smallest distinct class requests)
        covered = np.searchsorted(self._cpu_sorted, typical.cpu)[None, :] < \
            np.arange(len(self._cpu_sorted) + 1)[:, None]
        access = typical.access.T & (milli > 0)[None, :]  # [model, class]
        self._fits = np.ascontiguousarray(access[:, None, :] & covered[None, :, :])
        self._p = typical.p
        self._memo: dict[tuple[int, int, bytes], float] = {}

    def __call__(self, cpu_left: np.ndarray, idle: np.ndarray, model: np.ndarray) -> np.ndarray:
        if len(cpu_left) == 1:
            return np.array([self.one(cpu_left, idle, model)])
        return self._batch(cpu_left, idle, model)

    def one(self, cpu_left: np.ndarray, idle: np.ndarray, model: np.ndarray) -> float:
        """The fragment of a batch of one node (memoized)."""
        key = (model.item(0), bisect_right(self._cpu_sorted, cpu_left.item(0)), np.sort(idle[0]).tobytes())
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = float(self._batch(cpu_left, idle, model)[0])
        return hit

    def singles(self, cpu_left: np.ndarray, idle: np.ndarray, model: np.ndarray) -> np.ndarray:
        """Each node as a batch of its own (memoized): what calling the table once per node gives."""
        out = np.empty(len(cpu_left))
        memo, steps, ordered = self._memo, self._cpu_sorted, np.sort(idle, axis=1)
        for i, (m, cpu) in enumerate(zip(model.tolist(), cpu_left.tolist(), strict=True)):
            key = (m, bisect_right(steps, cpu), ordered[i].tobytes())
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = float(self._batch(cpu_left[i:i + 1], idle[i:i + 1], model[i:i + 1])[0])
            out[i] = hit
        return out

    def _batch(self, cpu_left: np.ndarray, idle: np.ndarray, model: np.ndarray) -> np.ndarray:
        b, bins = len(idle), len(self._u_milli) + 1
        # bin of a GPU: how many distinct class milli its idle milli reaches (idle >= milli)
        flat = (self._u_milli.searchsorted(idle, "right") + np.arange(0, b * bins, bins)[:, None]).ravel()
        below = np.bincount(flat, minlength=b * bins).reshape(b, bins).cumsum(axis=1)  # GPUs under each milli
        low = np.bincount(flat, idle.ravel(), b * bins).reshape(b, bins).cumsum(axis=1)  # their idle; last: all
        enough = idle.shape[1] - below[:, self._cls_u]
        fits = (enough >= self._count) & self._fits[model, self._cpu_steps.searchsorted(cpu_left, "right")]
        per_class = np.where(fits, low[:, self._cls_u], low[:, -1:])
        return per_class @ self._p

"""GPU placement Score plugins compared in the FGD paper (Weng et al., USENIX ATC'23, section 6.1).

Formulas follow the paper's simulator (hkust-adsl/kubernetes-scheduler-simulator pkg/simulator/plugin/
{random,dot_product,gpu_clustering,gpu_packing,best_fit,fgd}_score.go and open_gpu_share.go for which GPU a
shared pod takes). Each policy scores a batch of node rows for one pod shape and says which GPU a shared pod
would take there; scores depend only on the node and the shape, so callers cache them per node version.
"""

from __future__ import annotations

import numpy as np

from kubetwin.devices.gpushare import FULL, FragTable, GpuShareCluster, Shape, TypicalPods, frag_amount

MAX_NODE_SCORE = 100
MAX_SPEC_CPU, MAX_SPEC_GPU = 128_000, 8_000  # open-gpu-share utils/const.go: the largest node the vectors scale by
POLICIES = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")
TAGS = ("share-gpu", "1-gpu", "2-gpu", "4-gpu", "8-gpu")  # GpuClustering's pod kinds


def tag_of(shape: Shape) -> int:
    """GpuClustering's kind of a GPU pod; -1 for CPU-only pods."""
    if not shape.gpu_milli:
        return -1
    if shape.shares:
        return 0
    name = f"{shape.num_gpu}-gpu"
    return TAGS.index(name) if name in TAGS else len(TAGS)


_NO_GPU = np.iinfo(np.int64).max  # best_fit_gpu: above any GPU's idle milli


def best_fit_gpu(idle: np.ndarray, milli: int) -> np.ndarray:
    """allocateGpuIdBasedOnBestFit: per row, the GPU with the least idle milli that still fits (lowest index
    on ties); -1 where none fits."""
    masked = np.where(idle >= milli, idle, _NO_GPU)
    choice = masked.argmin(axis=1)
    return np.where(masked.min(axis=1) == _NO_GPU, -1, choice)


def _sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """FGD: int64(sigmoid((F_before - F_after) / 1000) * 100)."""
    return (1.0 / (1.0 + np.exp(-delta / 1000.0)) * MAX_NODE_SCORE).astype(np.int64)


class Scorer:
    """Scores for one policy; `frag` is the current fragment of every node (kept by the caller)."""

    def __init__(self, policy: str, cluster: GpuShareCluster, typical: TypicalPods, tags: np.ndarray,
                 frag_table: FragTable | None = None) -> None:
        """`frag_table`, when given, computes FGD's fragments instead of frag_amount (same floats; it must be
        built on `typical`, which then stays fixed)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; one of {', '.join(POLICIES)}")
        self.policy, self.c, self.typical, self.tags = policy, cluster, typical, tags
        self.frag_table = frag_table

    def _frag(self, cpu_left: np.ndarray, idle: np.ndarray, model: np.ndarray) -> np.ndarray:
        if self.frag_table is not None:
            return self.frag_table(cpu_left, idle, model)
        return frag_amount(cpu_left, idle, model, self.typical)

    def score(self, rows: np.ndarray, shape: Shape, frag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(raw score, GPU a shared pod would take or -1) for each row; rows must be feasible for the shape."""
        if self.policy == "FGD":  # picks its own GPU
            return self._fgd(rows, shape, frag)
        if self.policy == "Random":  # the node is drawn at random, and the GPU at bind time
            return np.zeros(len(rows), np.int64), np.full(len(rows), -1)
        c = self.c
        idle, cpu_left = c.idle[rows], c.cpu_left[rows]
        gpu = best_fit_gpu(idle, shape.gpu_milli) if shape.shares else np.full(len(rows), -1)
        free_gpu = idle.sum(axis=1)
        if self.policy == "DotProd":
            d = (cpu_left * shape.cpu_milli / MAX_SPEC_CPU ** 2 + free_gpu * shape.gpu_total / MAX_SPEC_GPU ** 2) / 2
            return (MAX_NODE_SCORE * (1 - d)).astype(np.int64), gpu
        if self.policy == "GpuClustering":
            return self._clustering(rows, shape, free_gpu), gpu
        if self.policy == "GpuPacking":
            return self._packing(rows, shape, idle, gpu), gpu
        left = 0.5 * (cpu_left - shape.cpu_milli) / MAX_SPEC_CPU + 0.5 * (free_gpu - shape.gpu_total) / MAX_SPEC_GPU
        return ((1 - left) * MAX_NODE_SCORE).astype(np.int64), gpu  # BestFit

    def _clustering(self, rows: np.ndarray, shape: Shape, free_gpu: np.ndarray) -> np.ndarray:
        tag = tag_of(shape)
        if tag < 0:
            return np.zeros(len(rows), np.int64)
        present = self.tags[rows] > 0  # [rows, tags] kinds of GPU pods already on the node
        kinds = present.sum(axis=1)
        base = 25 * (MAX_SPEC_GPU - free_gpu) // MAX_SPEC_GPU
        mine = present[:, tag] if tag < present.shape[1] else np.zeros(len(rows), bool)
        bonus = np.where(mine & (kinds == 1), 75, np.where(mine, 50, np.where(kinds == 0, 25, 0)))
        return base + bonus

    def _packing(self, rows: np.ndarray, shape: Shape, idle: np.ndarray, gpu: np.ndarray) -> np.ndarray:
        if not shape.gpu_milli:
            return np.zeros(len(rows), np.int64)
        full = ((idle == FULL) & self.c.exists[rows]).sum(axis=1)
        every_free = full == self.c.gpus[rows]
        if shape.shares:  # the one GPU best-fit picks: fully free or not
            chosen = idle[np.arange(len(rows)), gpu]
            used_free = (chosen == FULL).astype(np.int64)
            partial = np.maximum(100 - (chosen * 100 // FULL) // 10, 50)
        else:  # whole GPUs: every chosen one is fully free
            used_free = np.full(len(rows), shape.num_gpu)
            partial = np.zeros(len(rows), np.int64)
        return np.where(every_free, np.maximum(33 - full, full),
                        np.where(used_free > 0, np.maximum(50 - used_free, 33), partial))

    def _fgd(self, rows: np.ndarray, shape: Shape, frag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = self.c
        before = frag[rows]
        cpu_after = c.cpu_left[rows] - shape.cpu_milli
        model = c.model[rows]
        idle = c.idle[rows]
        if shape.shares:  # try each GPU that fits; keep the best truncated score, lowest index on ties
            gpu, at = (idle >= shape.gpu_milli).T.nonzero()  # (GPU, row) candidates, GPU by GPU
            trial = idle[at]
            trial[np.arange(len(at)), gpu] -= shape.gpu_milli
            if self.frag_table is not None and len(rows) == 1:  # one node: its candidates one by one, memoized
                after = self.frag_table.singles(cpu_after[at], trial, model[at])
            else:  # one batch per GPU index, the nodes where it fits (batches change BLAS's sums: see FragTable)
                after = np.empty(len(at))
                for seg in np.split(np.arange(len(at)), np.flatnonzero(np.diff(gpu)) + 1) if len(at) else ():
                    after[seg] = self._frag(cpu_after[at[seg]], trial[seg], model[at[seg]])
            score = _sigmoid_score(before[at] - after)
            if len(rows) == 1:  # its candidates come GPU by GPU: argmax is the lowest GPU of the best score
                k = int(score.argmax())
                return score[k:k + 1], gpu[k:k + 1]
            first = np.lexsort((gpu, -score, at))  # per row: best score, then lowest GPU
            first = first[np.flatnonzero(np.diff(at[first], prepend=-1))]
            best = np.full(len(rows), -1, np.int64)
            choice = np.full(len(rows), -1, np.int64)
            best[at[first]], choice[at[first]] = score[first], gpu[first]
            return best, choice
        trial = idle.copy()
        if shape.num_gpu:  # Sub: the lowest-index fully free GPUs (ascending idle, stable)
            free = trial == FULL
            take = free & (np.cumsum(free, axis=1) <= shape.num_gpu)
            trial -= take * shape.gpu_milli
        after = self._frag(cpu_after, trial, model)
        return _sigmoid_score(before - after), np.full(len(rows), -1)

"""`kubetwin experiment fgd`: the FGD paper's openb experiment (Weng et al., USENIX ATC'23, section 6).

Protocol, as the paper's simulator runs it (hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/core.go and
simulator.go; experiments/run_scripts/generate_run_scripts.py): GPU nodes only; pods sorted by name and shuffled
with the seed; the workload inflated by re-sampling random trace pods, appended after the shuffled ones, until
the GPU request would pass `inflate` x the cluster's GPUs; pods scheduled one at a time with no departures (a
pod that fits nowhere fails and still counts as arrived); every node is scored (percentageOfNodesToScore 100) by
the policy alone; ties go to a per-seed random ranking of the nodes (the simulator's fork of selectHost breaks
ties by node name, and names carry a random prefix). After each pod the run records arrived, allocated and
fragmented GPU milli; the rows are averaged per integer arrived-workload percentage as the paper's
merge_*_discrete.py scripts do. Randomness is numpy's, not Go's math/rand: curves match the paper's in
distribution, not draw for draw.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kubetwin.devices.gpushare import FULL, FragTable, GpuShareCluster, Shape, TypicalPods, frag_amount
from kubetwin.experiments.openb import TraceNode, TracePod
from kubetwin.scheduler.gpu_policies import TAGS, Scorer, tag_of

COLUMNS = ("policy", "seed", "arrived_gpu_pct", "allocated_gpu_pct", "fragmented_gpu_pct", "frag_ratio_pct")
DEFAULT_SEEDS = tuple(range(42, 52))  # generate_run_scripts.py: tune seeds 42..51
POD_LIST_PREFIX = "openb_pod_list_"
# The 17 pod lists of the paper's figures (experiments/run_scripts/generate_run_scripts.py FILELIST and
# experiments/plot/plot_openb_*_alloc_bar.py): the main results (Fig. 7 and 9), then each workload family.
FAMILIES: dict[str, tuple[str, ...]] = {
    "default": ("default",),  # Fig. 7, 9
    "gpushare": ("gpushare40", "gpushare60", "gpushare80", "gpushare100"),  # Fig. 11: GPU-sharing pods' share
    "multigpu": ("multigpu20", "multigpu30", "multigpu40", "multigpu50"),  # Fig. 12: multi-GPU pods' share
    "gpuspec": ("gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33"),  # Fig. 13: pods bound to a GPU model
    "nongpu": ("cpu050", "cpu100", "cpu200", "cpu250"),  # Fig. 14: CPU-only pods' share
}
PAPER_WORKLOADS = tuple(w for ws in FAMILIES.values() for w in ws)


def workload_name(path: str | Path) -> str:
    """The pod list's name as the paper's analysis files give it: openb_pod_list_default.csv -> default."""
    stem = Path(path).stem
    return stem[len(POD_LIST_PREFIX):] if stem.startswith(POD_LIST_PREFIX) else stem


def shape_of(pod: TracePod) -> Shape:
    # GetNonzeroRequests: a pod without a CPU request counts as 100m
    return Shape(pod.cpu_milli or 100, pod.memory_mib, pod.num_gpu, pod.gpu_milli, pod.gpu_spec)


def workload(pods: Sequence[TracePod], capacity_milli: int, inflate: float, rng: np.random.Generator) -> list[Shape]:
    """Shuffle, then tuneUpPods: append random re-samples until the next one would pass inflate x capacity
    (the stop test compares its per-GPU milli, as the simulator's does)."""
    by_name = sorted(pods, key=lambda p: p.name)
    order = [by_name[i] for i in rng.permutation(len(by_name))]
    total = sum(p.gpu_request_milli for p in by_name)
    target = inflate * capacity_milli
    extra: list[TracePod] = []
    asks_gpu = any(p.gpu_request_milli for p in by_name)  # else re-sampling could never reach the target
    while asks_gpu and total < target:
        clone = by_name[int(rng.integers(len(by_name)))]
        if total + clone.gpu_milli > target:
            break
        total += clone.gpu_request_milli
        extra.append(clone)
    return [shape_of(p) for p in order + extra]


def arrivals(nodes: Sequence[TraceNode], pods: Sequence[TracePod], seed: int, inflate: float) -> list[Shape]:
    """The run's pod sequence for a seed: the same for every policy."""
    capacity = sum(n.gpus for n in nodes if n.gpus > 0) * FULL
    return workload(pods, capacity, inflate, np.random.default_rng([seed, 1]))


_UNFIT = np.iinfo(np.int64).min  # the ranking key of a node the shape does not fit


def placements(nodes: Sequence[TraceNode], pods: Sequence[TracePod], inflate: float) -> float:
    """About how many pods a run places (what its time grows with): the whole list, re-sampled up to inflate x
    the cluster's GPUs."""
    demand = sum(p.gpu_request_milli for p in pods)
    capacity = sum(n.gpus for n in nodes if n.gpus > 0) * FULL
    return len(pods) * max(1.0, inflate * capacity / demand) if demand else float(len(pods))


@dataclass
class _ShapeCache:
    """Per pod shape: feasibility, ranking key and chosen GPU of every node, valid up to `seen` entries of the
    replay's bind log (-1: never filtered)."""

    seen: int
    feasible: np.ndarray
    key: np.ndarray
    gpu: np.ndarray
    access: np.ndarray


def fragment_table(nodes: Sequence[TraceNode], typical_of: Sequence[Shape]) -> FragTable:
    """The fragment table of a pod list's typical pods on these nodes: runs on the same pod list may share it
    (Replay's `table`), and with it the memo of one-node fragments."""
    return FragTable(TypicalPods.from_shapes(typical_of, _cluster(nodes).model_ids))


def _cluster(nodes: Sequence[TraceNode]) -> GpuShareCluster:
    gpu_nodes = sorted((n for n in nodes if n.gpus > 0), key=lambda n: n.name)
    return GpuShareCluster([n.name for n in gpu_nodes], [n.cpu_milli for n in gpu_nodes],
                           [n.memory_mib for n in gpu_nodes], [n.gpus for n in gpu_nodes],
                           [n.model for n in gpu_nodes])


class Replay:
    """One policy, one seed: place the pods in order and record the cluster after each.

    A pod's node is the feasible node with the highest score, ties to the lowest rank: one ranking key per node,
    score x (nodes + 1) + (nodes - rank), kept per pod shape and recomputed only for the nodes bound since the
    shape was last placed (the bind log), as scores depend only on the node and the shape."""

    def __init__(self, nodes: Sequence[TraceNode], typical_of: Sequence[Shape], policy: str, seed: int,
                 table: FragTable | None = None) -> None:
        """`table`: fragment_table(nodes, typical_of), shared with other runs on the same pod list."""
        self.cluster = c = _cluster(nodes)
        self.frag_table = table or FragTable(TypicalPods.from_shapes(typical_of, c.model_ids))
        self.typical = self.frag_table.typical
        n = len(c.names)
        self.rng = np.random.default_rng(seed)
        self.rank = self.rng.permutation(n)  # tie-break: the lowest rank wins
        self._tie = n - self.rank
        self.tags = np.zeros((n, len(TAGS) + 1), np.int64)
        self.scorer = Scorer(policy, c, self.typical, self.tags, self.frag_table)
        self.policy = policy
        self.frag = frag_amount(c.cpu_left, c.idle, c.model, self.typical)
        self.frag_total = float(self.frag.sum())
        self._caches: dict[Shape, _ShapeCache] = {}
        self._log: list[int] = []  # the node row of every bind, in order
        self._last = np.full(n, -1, np.int64)  # each node's last place in the log

    def _cache(self, shape: Shape) -> _ShapeCache:
        c = self.cluster
        cache = self._caches.get(shape)
        n = len(c.names)
        if cache is None:
            cache = self._caches[shape] = _ShapeCache(-1, np.zeros(n, bool), np.full(n, _UNFIT, np.int64),
                                                      np.full(n, -1, np.int64), c.access(shape))
        log, seen = self._log, cache.seen
        if seen == len(log):
            return cache
        # the nodes bound since, among those the shape fitted: nodes only fill up (no departures), so a node the
        # shape did not fit never fits it again
        if seen < 0:
            stale = np.arange(n)
        elif len(log) - seen <= 16:
            fitted = cache.feasible
            stale = np.array([r for r in sorted(set(log[seen:])) if fitted.item(r)], np.int64)
        else:
            stale = ((self._last >= seen) & cache.feasible).nonzero()[0]
        cache.seen = len(log)
        if not len(stale):
            return cache
        ok = c.feasible(stale, shape, cache.access)
        cache.feasible[stale] = ok
        if self.policy == "Random":  # the node is drawn among the feasible ones, and the GPU at bind time
            return cache
        cache.key[stale] = _UNFIT
        rows = stale[ok]
        if len(rows):
            score, cache.gpu[rows] = self.scorer.score(rows, shape, self.frag)
            cache.key[rows] = score * (n + 1) + self._tie[rows]
        return cache

    def place(self, shape: Shape) -> int:
        """Schedule one pod; returns the node row or -1 when no node fits.

        BestFit's NormalizeScore (integer min-max over the feasible nodes, (s - lo) x 100 // (hi - lo)) gives 100
        to exactly the nodes with the highest raw score, so its raw scores pick the same node."""
        cache = self._cache(shape)
        if self.policy == "Random":
            rows = cache.feasible.nonzero()[0]
            if not len(rows):
                return -1
            row = int(rows[0]) if len(rows) == 1 else int(rows[self.rng.integers(len(rows))])
        else:
            row = int(cache.key.argmax())
            if cache.key[row] == _UNFIT:
                return -1
        self._bind(row, shape, int(cache.gpu[row]))
        return row

    def _bind(self, row: int, shape: Shape, gpu: int) -> None:
        c = self.cluster
        if shape.shares:
            if self.policy == "Random":  # allocateGpuIdBasedOnRandomFit: any GPU that fits
                fits = (c.idle[row] >= shape.gpu_milli).nonzero()[0]
                gpu = int(fits[self.rng.integers(len(fits))])
            ids = [gpu]
        else:
            ids = c.whole_gpus(row, shape.num_gpu) if shape.num_gpu else []
        c.bind(row, shape, ids)
        self._last[row] = len(self._log)
        self._log.append(row)
        tag = tag_of(shape)
        if tag >= 0:
            self.tags[row, tag] += 1
        new = self.frag_table.one(c.cpu_left[row:row + 1], c.idle[row:row + 1], c.model[row:row + 1])
        self.frag_total += new - self.frag[row]
        self.frag[row] = new

    def run(self, shapes: Sequence[Shape]) -> np.ndarray:
        """Place every pod; one row per pod: arrived milli, allocated milli, fragment milli, idle milli."""
        out = []
        arrived = 0
        c = self.cluster
        for shape in shapes:
            arrived += shape.gpu_total  # counted before scheduling: failed pods have arrived too
            self.place(shape)
            out.append((arrived, c.used_milli, self.frag_total, c.capacity_milli - c.used_milli))
        return np.array(out, float).reshape(len(shapes), 4)


def discretize(records: np.ndarray, total_gpus: int, upto: int = 130) -> list[tuple[int, float, float, float]]:
    """merge_alloc_discrete.py / merge_frag_discrete.py: per integer arrived %, the mean over the records whose
    rounded arrived % is that value (half to even, as Python's round), else those within one point."""
    arrived = np.round(records[:, 0] / total_gpus / 10)  # milli / GPUs / 10 = percent
    out = []
    for x in range(1, upto + 1):
        sel = arrived == x
        if not sel.any():
            sel = (arrived >= x - 1) & (arrived <= x + 1)
        if not sel.any():
            continue
        r = records[sel]
        alloc = float(np.mean(np.round(r[:, 1] / total_gpus / 10, 2)))
        frag_pct = 100 * float(r[:, 2].mean()) / FULL / total_gpus
        ratio = float(np.mean(100 * r[:, 2] / np.maximum(r[:, 3], 1)))
        out.append((x, round(alloc, 2), round(frag_pct, 2), round(ratio, 2)))
    return out


def experiment(nodes: Sequence[TraceNode], pods: Sequence[TracePod], policy: str, seed: int,
               inflate: float = 1.3) -> list[dict]:
    """One run of the paper's protocol; rows in COLUMNS order."""
    return experiments(nodes, pods, [policy], seed, inflate)[0]


def experiments(nodes: Sequence[TraceNode], pods: Sequence[TracePod], policies: Sequence[str], seed: int,
                inflate: float = 1.3, table: FragTable | None = None) -> list[list[dict]]:
    """experiment() for each policy on one pod list and seed, sharing the pod sequence (the same for every
    policy) and the fragment table (`table`: fragment_table(nodes, pods' shapes), may be shared further)."""
    table = table or fragment_table(nodes, [shape_of(p) for p in pods])
    shapes = arrivals(nodes, pods, seed, inflate)
    out = []
    for policy in policies:
        replay = Replay(nodes, (), policy, seed, table)
        records = replay.run(shapes)
        gpus = replay.cluster.capacity_milli // FULL
        out.append([dict(zip(COLUMNS, (policy, seed, *row), strict=True))
                    for row in discretize(records, gpus, int(round(inflate * 100)))])
    return out


def write_csv(rows: Sequence[dict], out: Path, workloads: bool = False) -> None:
    """The study's CSV; `workloads` adds the leading `workload` column of a several-pod-list study."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=("workload", *COLUMNS) if workloads else COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(out)

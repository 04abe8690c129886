"""Plot a `kubetwin experiment fgd` CSV as the paper's figures.

One pod list (no `workload` column): Fig. 9a, allocated GPU % against arrived GPU demand %, to DST (a .png).
Several pod lists (the `workload` column of `--pods-dir ... --workload paper`): DST is a folder that gets, per
workload family of the paper (default: Fig. 7/9; gpushare: Fig. 11; multigpu: Fig. 12; gpuspec: Fig. 13; nongpu:
Fig. 14), fgd-<family>.png with allocation and fragmentation against arrived demand for each pod list, and
fgd-unallocated.png, the paper's bar charts (unallocated GPUs at 100 % arrived demand, mean and sd over seeds)
with the paper's own simulator's means (docs/fgd-paper-expected.csv, from hkust-adsl/kubernetes-scheduler-simulator
experiments/analysis/expected_results) as black ticks.

Needs matplotlib (`pip install -e '.[plot]'`).
Usage: python benchmarks/plot_fgd.py runs/fgd-study.csv docs/fgd-openb.png
       python benchmarks/plot_fgd.py runs/fgd-paper.csv docs/img [docs/fgd-paper-expected.csv]
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean, pstdev

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kubetwin.experiments.fgd import FAMILIES  # noqa: E402
from kubetwin.scheduler.gpu_policies import POLICIES  # noqa: E402

FIGURE = {"default": "Fig. 7 and 9", "gpushare": "Fig. 11", "multigpu": "Fig. 12", "gpuspec": "Fig. 13",
          "nongpu": "Fig. 14"}
Curves = dict[str, dict[str, dict[int, list[tuple[float, float]]]]]  # workload -> policy -> arrived % -> rows


def single(src: str, dst: str) -> None:
    curves: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(src) as f:
        for r in csv.DictReader(f):
            curves[r["policy"]][int(r["arrived_gpu_pct"])].append(float(r["allocated_gpu_pct"]))
    fig, (full, zoom) = plt.subplots(1, 2, figsize=(11, 4.2))
    for policy in (p for p in POLICIES if p in curves):
        xs = sorted(curves[policy])
        ys = [sum(curves[policy][x]) / len(curves[policy][x]) for x in xs]
        seeds = len(curves[policy][xs[-1]])
        for ax in (full, zoom):
            ax.plot(xs, ys, label=f"{policy} ({ys[-1]:.1f} % at {xs[-1]} %, {seeds} seeds)")
    full.plot([0, 100], [0, 100], color="grey", lw=0.6, ls=":")
    zoom.set_xlim(80, 130)
    zoom.set_ylim(80, 97)
    for ax in (full, zoom):
        ax.set_xlabel("arrived GPU demand, % of cluster GPUs")
        ax.set_ylabel("allocated GPUs, %")
        ax.grid(alpha=0.3)
    zoom.legend(loc="lower right", fontsize=8)
    fig.suptitle("openb default trace, 1,213 nodes / 6,212 GPUs, inflated to 130 % (kubetwin experiment fgd)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110, metadata={"Software": None})


def load(src: str) -> Curves:
    curves: Curves = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    with open(src) as f:
        for r in csv.DictReader(f):
            curves[r["workload"]][r["policy"]][int(r["arrived_gpu_pct"])].append(
                (float(r["allocated_gpu_pct"]), float(r["fragmented_gpu_pct"])))
    return curves


def family_figure(curves: Curves, family: str, workloads: tuple[str, ...], dst: Path) -> None:
    fig, axes = plt.subplots(2, len(workloads), figsize=(3.6 * len(workloads) + 1, 6.4), squeeze=False)
    for col, w in enumerate(workloads):
        alloc_ax, frag_ax = axes[0][col], axes[1][col]
        for policy in (p for p in POLICIES if p in curves[w]):
            xs = sorted(x for x in curves[w][policy] if x >= 50)
            alloc_ax.plot(xs, [mean(a for a, _ in curves[w][policy][x]) for x in xs], label=policy, lw=1.2)
            frag_ax.plot(xs, [mean(f for _, f in curves[w][policy][x]) for x in xs], label=policy, lw=1.2)
        alloc_ax.set_title(w, fontsize=10)
        alloc_ax.set_ylim(50, 100)
        for ax in (alloc_ax, frag_ax):
            ax.grid(alpha=0.3)
            ax.set_xlabel("arrived GPU demand, %")
        if col == 0:
            alloc_ax.set_ylabel("allocated GPUs, %")
            frag_ax.set_ylabel("fragmented GPUs, %")
    axes[0][-1].legend(loc="lower right", fontsize=7)
    seeds = max(len(v) for p in curves[workloads[0]].values() for v in p.values())
    fig.suptitle(f"{family} pod lists (the paper's {FIGURE[family]}):\nmean of {seeds} seeds, kubetwin experiment fgd",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=100, metadata={"Software": None})
    plt.close(fig)


def bars(curves: Curves, expected: dict[tuple[str, str], float], dst: Path) -> None:
    families = [f for f in FAMILIES if f != "default"]
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 3.8), sharey=True)
    width = 0.8 / len(POLICIES)
    for ax, family in zip(axes, families, strict=True):
        workloads = [w for w in FAMILIES[family] if w in curves]
        for i, policy in enumerate(POLICIES):
            if any(not curves[w][policy][100] for w in workloads):
                continue
            xs = [j + (i - (len(POLICIES) - 1) / 2) * width for j in range(len(workloads))]
            vals = [[100 - a for a, _ in curves[w][policy][100]] for w in workloads]
            ax.bar(xs, [mean(v) for v in vals], width, yerr=[pstdev(v) for v in vals], label=policy,
                   error_kw={"lw": 0.6})
            paper = [expected.get((w, policy)) for w in workloads]
            ax.scatter([x for x, p in zip(xs, paper, strict=True) if p is not None],
                       [100 - p for p in paper if p is not None], marker="_", color="black", s=60, zorder=3)
        ax.set_xticks(range(len(workloads)), workloads, fontsize=8)
        ax.set_title(f"{family} ({FIGURE[family]})", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("unallocated GPUs at 100 % arrived, %")
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("bars: kubetwin (mean, sd over seeds); black ticks: the paper's simulator (expected_results)")
    fig.tight_layout()
    fig.savefig(dst, dpi=100, metadata={"Software": None})
    plt.close(fig)


def families(src: str, dst: str, expected_csv: str | None) -> None:
    curves = load(src)
    out = Path(dst)
    out.mkdir(parents=True, exist_ok=True)
    for family, workloads in FAMILIES.items():
        present = tuple(w for w in workloads if w in curves)
        if present:
            family_figure(curves, family, present, out / f"fgd-{family}.png")
    expected: dict[tuple[str, str], float] = {}
    if expected_csv:
        with open(expected_csv) as f:
            expected = {(r["workload"], r["policy"]): float(r["allocated_gpu_pct_at_100"]) for r in csv.DictReader(f)}
    bars(curves, expected, out / "fgd-unallocated.png")


if __name__ == "__main__":
    with open(sys.argv[1]) as head:
        several = "workload" in (csv.DictReader(head).fieldnames or [])
    if several:
        families(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        single(sys.argv[1], sys.argv[2])

"""Plot a `kubetwin experiment fgd` CSV as the paper's Fig. 9a: allocated GPU % against arrived GPU demand %.

Needs matplotlib (`pip install -e '.[plot]'`).
Usage: python benchmarks/plot_fgd.py runs/fgd-study.csv docs/fgd-openb.png
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kubetwin.scheduler.gpu_policies import POLICIES  # noqa: E402


def main(src: str, dst: str) -> None:
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


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The twin's collective model (workloads/network.py) against every measured NCCL figure it can be checked on.

Prints predicted vs measured bus bandwidth and the relative error of the predicted time, per message size, for:
  1. the 2-node (16 GPU) nccl-tests rows per GKE tier in ../shared/catalog/catalog_draft.yaml nccl_model.measured_2node
     (A3 High TCPX, A3 Mega TCPXO, A4 RDMA) and the plain-TCP fallback figure;
  2. the 8 x H200 intra-node all_reduce sweep (nccl_model.intra_node_busbw_vs_size_H200_gbs);
  3. Vidur's 8 x H100 DGX all_reduce profile (../shared/profiles/vidur/network_h100_dgx/all_reduce.csv), n = 2/4/8,
     median time per power-of-two size bucket.
Several tier constants were fitted on some of these rows (network.yaml says which), so rows 1 are partly in-sample.

    python benchmarks/bench_collectives.py [--markdown benchmarks/results_collectives.md]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
from pathlib import Path

import yaml

from kubetwin.workloads import network

GIB, MIB, KIB = 1 << 30, 1 << 20, 1 << 10
MACHINE_GPU = {"a3-highgpu-8g": "nvidia-h100-80gb", "a3-megagpu-8g": "nvidia-h100-mega-80gb",
               "a4-highgpu-8g": "nvidia-b200", "a3-ultragpu-8g": "nvidia-h200-141gb"}


def shared_dir() -> Path:
    env = os.environ.get("KUBETWIN_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"


def node(name: str, machine: str, extra: dict[str, str] | None = None) -> dict:
    """A Node as autoscaler/nodepool.py labels it, in one compact placement group."""
    labels = {"node.kubernetes.io/instance-type": machine, "topology.kubernetes.io/zone": "us-central1-a",
              "cloud.google.com/gke-accelerator": MACHINE_GPU[machine],
              "cloud.google.com/gke-placement-group": "bench-placement", **(extra or {})}
    return {"metadata": {"name": name, "labels": labels}}


def size_bytes(text: str) -> int:
    for unit, mult in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * mult)
    return int(text)


def bus_factor(op: str, n: int) -> float:
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def row(label: str, op: str, size: float, n: int, meas_busbw: float, pred_s: float) -> dict:
    """Measured time from busbw (nccl-tests: busbw = factor x size / time), error of the predicted time."""
    meas_s = bus_factor(op, n) * size / (meas_busbw * 1e9)
    return {"case": label, "op": op, "size": size, "meas_busbw": meas_busbw,
            "pred_busbw": bus_factor(op, n) * size / pred_s / 1e9, "meas_us": meas_s * 1e6, "pred_us": pred_s * 1e6,
            "err": pred_s / meas_s - 1}


def fmt_size(s: float) -> str:
    for unit, mult in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if s >= mult:
            return f"{s / mult:g}{unit}"
    return f"{s:g}B"


def two_node_rows(cat: dict) -> list[dict]:
    out = []
    for r in cat["nccl_model"]["measured_2node"]:
        topo = network.topology([node("a", r["machine"]), node("b", r["machine"])], [8, 8])
        sizes = {r["size"]: r["busbw"]} | {k[6:]: v for k, v in r.items() if k.startswith("busbw_")}
        for sz, bw in sorted(sizes.items(), key=lambda kv: size_bytes(kv[0])):
            s = size_bytes(sz)
            pred = network.collective_time(r["collective"], s, topo)
            out.append(row(f"2x8 {r['machine']} ({r['tier']})", r["collective"], s, 16, bw, pred))
    fb = cat["nccl_model"]["tcpxo_vs_tcp_fallback"]
    nodes = [node(x, "a3-megagpu-8g", {network.GPUDIRECT_LABEL: "none"}) for x in "ab"]
    topo = network.topology(nodes, [8, 8])  # size not published: compared at 8 GiB, the asymptote
    out.append(row("2x8 a3-megagpu-8g plain TCP (size n/a)", "all_reduce", 8 * GIB, 16, fb["plain_tcp_busbw"],
                   network.collective_time("all_reduce", 8 * GIB, topo)))
    return out


def h200_rows(cat: dict) -> list[dict]:
    topo = network.topology([node("a", "a3-ultragpu-8g")], [8])
    return [row("8 x H200 intra-node (ml-engineering)", "all_reduce", size_bytes(k), 8, v,
                network.collective_time("all_reduce", size_bytes(k), topo))
            for k, v in cat["nccl_model"]["intra_node_busbw_vs_size_H200_gbs"].items()]


def vidur_rows(path: Path) -> list[dict]:
    """Median measured and predicted time per (n, power-of-two size bucket)."""
    buckets: dict[tuple[int, int], list[tuple[float, float]]] = {}
    with path.open() as f:
        for r in csv.DictReader(f):
            n = int(r["num_workers"])
            if int(r["devices_per_node"]) != n:
                continue
            size = float(r["size"])
            buckets.setdefault((n, int(math.log2(size))), []).append(
                (size, float(r["time_stats.all_reduce.median"]) * 1e-3))
    out = []
    for (n, _), vals in sorted(buckets.items()):
        topo = network.topology([node("a", "a3-highgpu-8g")], [n])
        meas = statistics.median(t for _, t in vals)
        pred = statistics.median(network.collective_time("all_reduce", s, topo) for s, _ in vals)
        size = statistics.median(s for s, _ in vals)
        meas_bw = bus_factor("all_reduce", n) * size / meas / 1e9
        r = row(f"Vidur H100 DGX n={n}", "all_reduce", size, n, meas_bw, pred)
        r["err"] = pred / meas - 1
        out.append(r)
    return out


def render(title: str, rows: list[dict]) -> list[str]:
    lines = [f"\n### {title}\n", "| case | op | size | measured busbw GB/s | predicted busbw GB/s | measured us | "
             "predicted us | time error |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['op']} | {fmt_size(r['size'])} | {r['meas_busbw']:.2f} | "
                     f"{r['pred_busbw']:.2f} | {r['meas_us']:.1f} | {r['pred_us']:.1f} | {r['err'] * 100:+.1f}% |")
    errs = [abs(r["err"]) for r in rows]
    lines.append(f"\nmedian |error| {statistics.median(errs) * 100:.1f}%, worst {max(errs) * 100:.1f}% "
                 f"over {len(rows)} rows")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = ap.parse_args()
    shared = shared_dir()
    cat_path = shared / "catalog" / "catalog_draft.yaml"
    if not cat_path.exists():
        print(f"no measured figures: {cat_path} missing (set KUBETWIN_SHARED)", file=sys.stderr)
        return 1
    cat = yaml.safe_load(cat_path.read_text())
    lines = ["# Collective model vs measured NCCL figures", "", "Generated by benchmarks/bench_collectives.py. "
             "Error = predicted time / measured time - 1 (measured time derived from busbw where only busbw "
             "was published)."]
    lines += render("Inter-node, 2 nodes x 8 GPUs, per GKE tier", two_node_rows(cat))
    lines += render("Intra-node 8 x H200 all_reduce (NVLink ring / NVLS)", h200_rows(cat))
    vidur = shared / "profiles" / "vidur" / "network_h100_dgx" / "all_reduce.csv"
    if vidur.exists():
        lines += render("Vidur H100 DGX all_reduce, median per power-of-two size bucket", vidur_rows(vidur))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

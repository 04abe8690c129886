"""How far the twin's GPU performance model is from Vidur's measured operator and collective profiles.

Reads ../shared/profiles/vidur (or $KUBETWIN_SHARED/profiles/vidur) and prints, per profile, operator and token
range, the twin's predicted kernel time against Vidur's median: median and worst relative error; then all_reduce and
send_recv per message-size range. Constants in serving/modelserver/perf.py and workloads/collectives.py were fitted on
the EVEN rows of each profile; the errors below are over ALL rows.

    python benchmarks/bench_calibration.py          # report
    python benchmarks/bench_calibration.py --fit    # refit operator efficiencies (even rows) and print them
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from kubetwin.serving.modelserver.modelspec import ModelSpec
from kubetwin.serving.modelserver.perf import CALIBRATIONS, OPS, GpuSpec, OpEff, PerfModel, op_cost, soft_roofline
from kubetwin.workloads import collectives

TOKEN_RANGES = ((1, 64), (65, 512), (513, 4096), (4097, 1 << 30))
SIZE_RANGES = ((0, 1 << 20), (1 << 20, 8 << 20), (8 << 20, 1 << 40))


def shared_dir() -> Path:
    env = os.environ.get("KUBETWIN_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"


# The profiled models, with Vidur's own shape columns (n_head, n_kv_head, n_embd, n_expanded_embd, vocab_size);
# Vidur's H100 Llama-2-7B rows use vocab 32768.
PROFILES = {
    "H100 Llama-2-7B": ("h100_llama2_7b/mlp.csv", "nvidia-h100-80gb", "h100"),
    "A100 Llama-3-8B": ("a100_llama3_8b/mlp.csv", "nvidia-a100-80gb", "a100"),
}


def profile_model(df: pd.DataFrame, name: str) -> ModelSpec:
    r = df.iloc[0]
    heads, embd = int(r.n_head), int(r.n_embd)
    return ModelSpec(name, 1, embd, heads, int(r.n_kv_head), embd // heads, int(r.n_expanded_embd),
                     int(r.vocab_size), 4096, "vidur profile row", gated_mlp=bool(r.use_gated_mlp))


def load(path: Path) -> pd.DataFrame:
    return pd.read_csv(path).drop_duplicates().reset_index(drop=True)


def predict(model: ModelSpec, gpu: GpuSpec, cal_key: str, op: str, n: np.ndarray, tp: np.ndarray) -> np.ndarray:
    out = np.empty(len(n))
    for t in np.unique(tp):
        sel = tp == t
        flops, nbytes = op_cost(model, op, n[sel], int(t))
        out[sel] = soft_roofline(flops, nbytes, gpu, CALIBRATIONS[cal_key].ops[op])
    return out


def _fmt_err(e: np.ndarray) -> str:
    return f"median {np.median(e) * 100:5.1f}%  worst {np.max(e) * 100:6.1f}%  (n={len(e)})"


def report_ops() -> dict[str, float]:
    base = shared_dir() / "profiles" / "vidur"
    overall: dict[str, float] = {}
    for label, (rel, acc, key) in PROFILES.items():
        df = load(base / rel)
        model, gpu = profile_model(df, label), GpuSpec.from_catalog(acc)
        n, tp = df.num_tokens.to_numpy(float), df.num_tensor_parallel_workers.to_numpy(int)
        print(f"\n== {label} ({acc}, TP {sorted(set(tp.tolist()))}); fitted on even rows, reported on all rows ==")
        errs = []
        for op in OPS:
            meas = df[f"time_stats.{op}.median"].to_numpy(float) * 1e-3
            pred = predict(model, gpu, key, op, n, tp)
            e = np.abs(pred / meas - 1)
            errs.append(e)
            cells = []
            for lo, hi in TOKEN_RANGES:
                s = (n >= lo) & (n <= hi)
                if s.any():
                    cells.append(f"{lo}-{hi if hi < 1 << 30 else 'inf'}: {np.median(e[s]) * 100:4.0f}%/"
                                 f"{np.max(e[s]) * 100:4.0f}%")
            print(f"  {op:25s} {_fmt_err(e)} | by tokens (median/worst) " + "  ".join(cells))
        allerr = np.concatenate(errs)
        overall[label] = float(np.median(allerr))
        print(f"  {'ALL OPERATORS':25s} {_fmt_err(allerr)}")
    return overall


def report_collectives() -> None:
    base = shared_dir() / "profiles" / "vidur" / "network_h100_dgx"
    ar = load(base / "all_reduce.csv")
    print("\n== H100 DGX all_reduce (Vidur, NCCL); alpha/busbw fitted on even rows, reported on all rows ==")
    link = collectives.H100_NVLINK
    for n in sorted(ar.num_workers.unique()):
        x = ar[(ar.num_workers == n) & (ar.devices_per_node == n)]
        size, meas = x["size"].to_numpy(float), x["time_stats.all_reduce.median"].to_numpy(float) * 1e-3
        pred = np.array([collectives.all_reduce_time(s, int(n), link) for s in size])
        e = np.abs(pred / meas - 1)
        cells = []
        for lo, hi in SIZE_RANGES:
            s = e[(size >= lo) & (size < hi)]
            top = hi >> 20 if hi < 1 << 40 else "inf"
            cells.append(f"{lo >> 20}-{top}MiB: {np.median(s) * 100:4.0f}%/{np.max(s) * 100:4.0f}%")
        print(f"  n={n}  {_fmt_err(e)} | " + "  ".join(cells))
    sr = load(base / "send_recv.csv")
    x = sr[sr.devices_per_node == 2]
    size, meas = x["size"].to_numpy(float), x["time_stats.send_recv.median"].to_numpy(float) * 1e-3
    pred = np.array([collectives.send_recv_time(s, link) for s in size])
    e = np.abs(pred / meas - 1)
    print(f"  send_recv intra-node  {_fmt_err(e)}")


def fit() -> None:
    """Grid search per operator and GPU minimising mean |log(pred/measured)| on even rows; prints OpEff literals."""
    base = shared_dir() / "profiles" / "vidur"
    eta_c = np.linspace(0.4, 1.0, 13)
    eta_m = np.geomspace(0.05, 1.0, 40)
    ps = np.array([1.0, 1.5, 2.0, 3.0, 5.0, 10.0])
    t0s = np.array([0.0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20]) * 1e-6
    for label, (rel, acc, _key) in PROFILES.items():
        df = load(base / rel).iloc[::2]
        model, gpu = profile_model(df, label), GpuSpec.from_catalog(acc)
        n, tp = df.num_tokens.to_numpy(float), df.num_tensor_parallel_workers.to_numpy(int)
        print(f"# {label}: fitted on {len(df)} even rows")
        for op in OPS:
            meas = df[f"time_stats.{op}.median"].to_numpy(float) * 1e-3
            flops = np.empty(len(n))
            nbytes = np.empty(len(n))
            for t in np.unique(tp):
                s = tp == t
                flops[s], nbytes[s] = op_cost(model, op, n[s], int(t))
            best = (np.inf, None)
            cs = eta_c if flops.any() else np.array([1.0])
            for ec in cs:
                c = flops / (ec * gpu.peak_flops)
                for em in eta_m:
                    m = nbytes / (em * gpu.hbm_bw)
                    hi, lo = np.maximum(c, m), np.minimum(c, m)
                    r = np.where(hi > 0, lo / np.where(hi > 0, hi, 1), 0)
                    core = hi[None, :] * (1 + r[None, :] ** ps[:, None]) ** (1 / ps[:, None])  # (p, rows)
                    pred = core[:, None, :] + t0s[None, :, None]  # (p, t0, rows)
                    loss = np.mean(np.abs(np.log(pred / meas)), axis=2)
                    i = np.unravel_index(np.argmin(loss), loss.shape)
                    if loss[i] < best[0]:
                        best = (loss[i], OpEff(round(float(ec), 3), round(float(em), 3), float(ps[i[0]]),
                                               float(t0s[i[1]] * 1e6)))
            print(f'    "{op}": {best[1]!r},  # mean |log err| {best[0]:.3f}')


def bench_call_cost() -> None:
    from kubetwin.serving.modelserver.modelspec import lookup_model

    m = PerfModel(lookup_model("llama-3-8b"), GpuSpec.from_catalog("nvidia-h100-80gb"))
    calls = 200_000
    t = time.perf_counter()
    for i in range(calls):
        m.iteration_time(1 + (i & 1023), 0.0, 40_000, 64)
    dt = (time.perf_counter() - t) / calls
    print(f"\niteration_time: {dt * 1e6:.2f} us per call ({calls} calls)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="refit operator efficiencies on even rows and print them")
    args = ap.parse_args(argv)
    if not (shared_dir() / "profiles" / "vidur").is_dir():
        print(f"skipped: no Vidur profiles under {shared_dir()} (set KUBETWIN_SHARED)")
        return 0
    if args.fit:
        fit()
        return 0
    overall = report_ops()
    report_collectives()
    print("\n== overall median relative error per profile (goal < 15%) ==")
    for k, v in overall.items():
        print(f"  {k}: {v * 100:.1f}%")
    bench_call_cost()
    return 0


if __name__ == "__main__":
    sys.exit(main())

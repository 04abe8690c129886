"""Scale to zero vs a fixed 4-replica deployment: a day of bursty chat traffic on Llama-3.1-8B-Instruct / H100.

Runs examples/serving-scale-to-zero.yaml (KEDA 0..4 replicas on the held + queued + running demand, the cluster
autoscaler growing an a3-highgpu-1g pool from 0 nodes) and its fixed twin, built here from the same objects so the
traffic, model, pool and seed are byte-for-byte the same: no ScaledObject, `replicas: 4`, a static pool of 4 nodes.
Both go through `kubetwin.runner.run` (the real KEDA, HPA, ReplicaSet, scheduler, cluster autoscaler, kubelet cold
start, gateway, EPP and vLLM engine models).

Reported per run: serving GPU-hours (model-server pods bound to a GPU) and node GPU-hours (what is billed), cost,
TTFT p50/p90/p99 over all requests, the requests that arrived while the pool had no Ready replica (they are held at
the gateway: the cold-start TTFT paid), 503s, SLO attainment (the pool's TTFT/TPOT SLO annotations), and the
replicas over the day: scale-from-zero events, time at zero replicas and at zero nodes, the time-weighted mean of
Ready replicas, and each cold start split into its phases (KEDA's poll, node boot and GPU driver, image pull, vLLM
start-up). Deterministic: the scenario's seed fixes the trace; the twin has no other randomness.

Usage: .venv/bin/python benchmarks/study_scale_to_zero.py [--duration 1d] [--out runs/s2z] [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from kubetwin.runner import RunResult, run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "serving-scale-to-zero.yaml"
FIXED_REPLICAS = 4
Obj = dict[str, Any]


def load_objects(path: Path = EXAMPLE) -> list[Obj]:
    with path.open() as f:
        return [o for o in yaml.safe_load_all(f) if o]


def fixed_variant(objs: list[Obj], replicas: int = FIXED_REPLICAS) -> list[Obj]:
    """The same scenario without the autoscalers: no ScaledObject, the Deployment at `replicas`, a static pool of
    that many nodes (the cost of always being ready for the peak)."""
    out = []
    for o in copy.deepcopy(objs):
        if o["kind"] == "ScaledObject":
            continue
        if o["kind"] == "Deployment":
            o["spec"]["replicas"] = replicas
        if o["kind"] == "NodePool":
            o["spec"].pop("autoscaling", None)
            o["spec"]["nodeCount"] = replicas
        if o["kind"] == "Scenario":
            o["metadata"]["name"] += "-fixed"
        out.append(o)
    return out


def warm_node_variant(objs: list[Obj]) -> list[Obj]:
    """Scale the pods to zero but keep one GPU node (minNodeCount 1): the cold start loses the node's boot and GPU
    driver install and the image pull (the image stays cached on the node), for one node's price all day."""
    out = copy.deepcopy(objs)
    for o in out:
        if o["kind"] == "NodePool":
            o["spec"]["autoscaling"]["minNodeCount"] = 1
        if o["kind"] == "Scenario":
            o["metadata"]["name"] += "-warm-node"
    return out


def with_duration(objs: list[Obj], duration: str | None) -> list[Obj]:
    """Shorter runs for a quick look: the Scenario's duration (the trace stops with it)."""
    if duration is None:
        return objs
    objs = copy.deepcopy(objs)
    for o in objs:
        if o["kind"] == "Scenario":
            o["spec"]["duration"] = duration
    return objs


# -- reading a run ------------------------------------------------------------------------------------
def _ready(pod: Obj) -> bool:
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and any(c.get("type") == "Ready" and c.get("status") == "True"
                                                for c in st.get("conditions") or [])


def step_function(changes: list[tuple[float, int]], until: float) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) of a piecewise-constant count from its (time, value) changes, starting at 0 at t=0; the last
    value holds until `until`."""
    t, v = [0.0], [0]
    for when, val in changes:
        if when == t[-1]:
            v[-1] = val
        elif val != v[-1]:
            t.append(when)
            v.append(val)
    t.append(until)
    return np.array(t), np.array(v)


def time_at(t: np.ndarray, v: np.ndarray, pred: Any) -> float:
    """Seconds the step function spends where pred(value) holds."""
    dt = np.diff(t)
    return float(dt[pred(v)].sum())


def ready_changes(history: list, app: str) -> list[tuple[float, int]]:
    """(time, number of Ready model-server pods) after every pod change of the Deployment's pods."""
    state: dict[str, bool] = {}
    out = []
    for t, _, etype, o in history:
        if o["kind"] != "Pod" or ((o["metadata"].get("labels") or {}).get("app") != app):
            continue
        name = o["metadata"]["name"]
        now = etype != "DELETED" and _ready(o)
        if state.get(name, False) != now:
            state[name] = now
            out.append((t, sum(state.values())))
    return out


def node_changes(history: list) -> list[tuple[float, int]]:
    alive: set[str] = set()
    out = []
    for t, _, etype, o in history:
        if o["kind"] == "Node":
            name = o["metadata"]["name"]
            before = len(alive)
            alive.discard(name) if etype == "DELETED" else alive.add(name)
            if len(alive) != before:
                out.append((t, len(alive)))
    return out


def events(history: list, reason: str, kind: str | None = None) -> list[tuple[float, Obj]]:
    """Every occurrence of an Event reason: the recorder folds repeats of the same message into one Event with a
    higher `count` (as client-go's EventCorrelator does), so each increase is one more occurrence."""
    seen: dict[str, int] = {}
    out = []
    for t, _, etype, o in history:
        if o["kind"] != "Event" or etype == "DELETED" or o.get("reason") != reason:
            continue
        if kind is not None and o["involvedObject"]["kind"] != kind:
            continue
        name, count = o["metadata"]["name"], int(o.get("count") or 1)
        if count > seen.get(name, 0):
            out.extend((t, o) for _ in range(count - seen.get(name, 0)))
            seen[name] = count
    return out


def cold_starts(r: RunResult, app: str, ready_t: np.ndarray, ready_v: np.ndarray,
                requests: pd.DataFrame) -> list[dict[str, float]]:
    """Each time the pool went from no Ready replica to one while requests were waiting, phase by phase: first held
    request → KEDA's activation → the first Ready pod bound (cluster autoscaler + node boot + GPU driver; 0 when a
    node was still there) → image pulled → Ready (vLLM process start, weight load, engine warm-up), and the first
    held request's TTFT. `scale_from_zero` is False for a gap KEDA did not cause (the Deployment wanted replicas but
    none was Ready, e.g. a scale-down that removed the Ready pods and kept one still starting)."""
    pods: dict[str, dict[str, float]] = {}
    for t, _, etype, o in r.history:
        if o["kind"] == "Pod" and (o["metadata"].get("labels") or {}).get("app") == app:
            p = pods.setdefault(o["metadata"]["name"], {"created": t})
            if o["spec"].get("nodeName") and "bound" not in p:
                p["bound"] = t
            if etype != "DELETED" and _ready(o) and "ready" not in p:
                p["ready"] = t
        elif o["kind"] == "Event" and etype == "ADDED" and o["involvedObject"]["kind"] == "Pod":
            p = pods.get(o["involvedObject"]["name"])
            if p is not None and o["reason"] in ("Pulling", "Pulled") and o["reason"].lower() not in p:
                p[o["reason"].lower()] = t
    out = []
    ups = [i for i in range(1, len(ready_v)) if ready_v[i - 1] == 0 and ready_v[i] > 0]
    activations = [t for t, _ in events(r.history, "KEDAScaleTargetActivated")]
    for i in ups:
        t_ready, t_zero = float(ready_t[i]), float(ready_t[i - 1])
        held = requests[(requests.arrival >= t_zero) & (requests.arrival < t_ready)]
        if held.empty:
            continue  # the first rollout before any traffic
        first = held.sort_values("arrival").iloc[0]
        # the pod that ended the gap: the first to turn Ready at t_ready
        pod = min((p for p in pods.values() if p.get("ready") == t_ready), key=lambda p: p["created"])
        act = [t for t in activations if t_zero <= t <= t_ready]
        start = act[0] if act else pod["created"]
        out.append({"first_arrival": float(first.arrival), "scale_from_zero": bool(act),
                    "keda_activation_s": start - float(first.arrival) if act else float("nan"),
                    "pod_age_at_gap_s": float(first.arrival) - pod["created"],
                    "node_and_schedule_s": pod["bound"] - max(start, pod["created"]),
                    "image_pull_s": pod.get("pulled", pod["bound"]) - pod.get("pulling", pod["bound"]),
                    "server_start_s": pod["ready"] - pod.get("pulled", pod["bound"]),
                    "to_ready_s": t_ready - float(first.arrival), "first_ttft_s": float(first.ttft),
                    "held_requests": len(held)})
    return out


def _pct(x: pd.Series) -> dict[str, float | None]:
    x = x.dropna()
    if x.empty:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    return {"p50": round(float(x.quantile(0.5)), 3), "p90": round(float(x.quantile(0.9)), 3),
            "p99": round(float(x.quantile(0.99)), 3), "max": round(float(x.max()), 3)}


def analyse(r: RunResult, objs: list[Obj]) -> dict[str, Any]:
    """Everything the study reports about one run."""
    until = float(r.summary["duration_seconds"])
    dep = next(o for o in objs if o["kind"] == "Deployment")
    app = dep["spec"]["selector"]["matchLabels"]["app"]
    pool = next(o for o in objs if o["kind"] == "InferencePool")
    ann = pool["metadata"].get("annotations") or {}
    from kubetwin.k8s.units import parse_duration

    slo_ttft = parse_duration(ann.get("kubetwin.io/slo-ttft", "1s"))
    slo_tpot = parse_duration(ann.get("kubetwin.io/slo-tpot", "100ms"))
    s = r.summary["serving"]["overall"]
    df = r.requests()
    rt, rv = step_function(ready_changes(r.history, app), until)
    nt, nv = step_function(node_changes(r.history), until)
    spec_changes = [(t, int(o["spec"].get("replicas", 1))) for t, _, etype, o in r.history
                    if o["kind"] == "Deployment" and etype != "DELETED"]
    st, sv = step_function(spec_changes, until)
    # requests that arrived while no replica was Ready: held at the gateway, the cold start paid
    idx = np.searchsorted(rt, df.arrival.to_numpy(), side="right") - 1
    held = df[rv[np.clip(idx, 0, len(rv) - 1)] == 0]
    warm = df.drop(held.index)
    ok = (df.status == 200) & (df.ttft.fillna(np.inf) <= slo_ttft) & (df.tpot.fillna(0.0) <= slo_tpot)
    starts = cold_starts(r, app, rt, rv, df)
    node_hours = sum(r.summary["cost"]["node_hours_by_pool"].values())
    gpus_per_node = int(next(o for o in objs if o["kind"] == "NodePool")["spec"]["accelerators"][0]["count"])
    cold = [c for c in starts if c["scale_from_zero"]]
    phases = {k: round(float(np.mean([c[k] for c in cold])), 1) if cold else None
              for k in ("keda_activation_s", "node_and_schedule_s", "image_pull_s", "server_start_s", "to_ready_s")}
    return {
        "requests": int(s["requests"]), "completed": int(s["completed"]), "failed_503": int(s["failed_503"]),
        "failed_503_ttl": int(((df.status == 503) & df.pod.isna()).sum()),
        "failed_503_in_flight": int(((df.status == 503) & df.pod.notna()).sum()),
        "serving_gpu_hours": s["gpu_hours"], "node_gpu_hours": round(node_hours * gpus_per_node, 2),
        "node_hours": round(node_hours, 2), "cost_usd": r.summary["cost"]["total_usd"],
        "usd_per_million_output_tokens": s["usd_per_million_output_tokens"],
        "ttft_s": _pct(df.ttft), "ttft_warm_s": _pct(warm.ttft), "tpot_s": _pct(df.tpot),
        "slo_attainment": s["slo_attainment"],
        "slo_attainment_warm": round(float(ok[warm.index].mean()), 4) if len(warm) else None,
        "held": {"requests": len(held), "share": round(len(held) / len(df), 4) if len(df) else 0.0,
                 "ttft_s": _pct(held.ttft), "failed_503": int((held.status == 503).sum())},
        # from spec.replicas itself: Events can be dropped by client-go's per-object spam filter
        "replicas": {"scale_from_zero": int(np.sum((sv[:-1] == 0) & (sv[1:] > 0))),
                     "scale_to_zero": int(np.sum((sv[:-1] > 0) & (sv[1:] == 0))),
                     "hpa_rescales": int(np.sum((sv[:-1] > 0) & (sv[1:] > 0))),
                     "hours_at_zero_ready": round(time_at(rt, rv, lambda v: v == 0) / 3600, 2),
                     "hours_at_zero_desired": round(time_at(st, sv, lambda v: v == 0) / 3600, 2),
                     "hours_at_zero_nodes": round(time_at(nt, nv, lambda v: v == 0) / 3600, 2),
                     "mean_ready": round(float(np.sum(np.diff(rt) * rv) / until), 2) if until else 0.0,
                     "hours_at": {str(k): round(time_at(rt, rv, lambda v, k=k: v == k) / 3600, 2)
                                  for k in range(int(rv.max()) + 1)}},
        "cold_start_phases_mean_s": phases,
        "cold_starts": starts,
        "zero_ready_gaps_without_scale_to_zero": len(starts) - len(cold),
    }


# -- printing -----------------------------------------------------------------------------------------
ROWS: list[tuple[str, Any]] = [
    ("requests", lambda a: f"{a['requests']:,}"),
    ("503 (held past TTL / in flight on a removed pod)",
     lambda a: f"{a['failed_503']:,} ({a['failed_503_ttl']} / {a['failed_503_in_flight']})"),
    ("serving GPU-hours (pods)", lambda a: f"{a['serving_gpu_hours']:.2f}"),
    ("node GPU-hours (billed)", lambda a: f"{a['node_gpu_hours']:.2f}"),
    ("cost (nodes)", lambda a: f"${a['cost_usd']:,.2f}"),
    ("USD per million output tokens", lambda a: f"${a['usd_per_million_output_tokens']:.2f}"),
    ("TTFT p50 / p90 / p99 (all)", lambda a: _trio(a["ttft_s"])),
    ("TTFT p50 / p90 / p99 (warm pool)", lambda a: _trio(a["ttft_warm_s"])),
    ("TPOT p50 / p90 / p99", lambda a: _trio(a["tpot_s"])),
    ("SLO attainment (all / warm pool)",
     lambda a: f"{a['slo_attainment']:.1%} / " + (f"{a['slo_attainment_warm']:.1%}" if a["slo_attainment_warm"]
                                                   is not None else "n/a (no request reached a warm pool)")),
    ("requests held at zero (share)", lambda a: f"{a['held']['requests']:,} ({a['held']['share']:.1%})"),
    ("held TTFT p50 / p90 / max", lambda a: _trio(a["held"]["ttft_s"], ("p50", "p90", "max"))),
    ("scale-from-zero / to-zero events",
     lambda a: f"{a['replicas']['scale_from_zero']} / {a['replicas']['scale_to_zero']}"),
    ("hours at 0 Ready replicas / 0 nodes",
     lambda a: f"{a['replicas']['hours_at_zero_ready']:.2f} / {a['replicas']['hours_at_zero_nodes']:.2f}"),
    ("no Ready replica while replicas > 0 (gaps)", lambda a: f"{a['zero_ready_gaps_without_scale_to_zero']}"),
    ("mean Ready replicas", lambda a: f"{a['replicas']['mean_ready']:.2f}"),
    ("hours at 0/1/2/3/4 Ready", lambda a: " / ".join(f"{a['replicas']['hours_at'].get(str(k), 0.0):.1f}"
                                                       for k in range(5))),
]


def _trio(p: dict, keys: tuple[str, ...] = ("p50", "p90", "p99")) -> str:
    return " / ".join("-" if p[k] is None else f"{p[k]:.3g} s" for k in keys)


def table(results: dict[str, dict]) -> str:
    """A Markdown table, one column per run."""
    names = list(results)
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, fmt in ROWS:
        lines.append(f"| {label} | " + " | ".join(fmt(results[n]) for n in names) + " |")
    return "\n".join(lines)


def phases_table(a: dict) -> str:
    rows = ["| first held request at | KEDA activation | node + schedule | image pull | vLLM start | to Ready | "
            "first TTFT | held |", "|---|---|---|---|---|---|---|---|"]
    for c in a["cold_starts"]:
        h, m = divmod(int(c["first_arrival"]) // 60, 60)
        keda = f"{c['keda_activation_s']:.0f} s" if c["scale_from_zero"] else "none (replicas > 0)"
        rows.append(f"| {h:02d}:{m:02d} | {keda} | {c['node_and_schedule_s']:.0f} s | "
                    f"{c['image_pull_s']:.0f} s | {c['server_start_s']:.0f} s | {c['to_ready_s']:.0f} s | "
                    f"{c['first_ttft_s']:.1f} s | {c['held_requests']:,} |")
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", default=None, help="override the Scenario's duration (e.g. 6h for a quick look)")
    p.add_argument("--out", type=Path, default=None, help="write both run folders under this folder")
    p.add_argument("--json", type=Path, default=None, help="write the numbers as JSON")
    a = p.parse_args()
    base = with_duration(load_objects(), a.duration)
    results: dict[str, dict] = {}
    variants = (("scale-to-zero (KEDA 0..4)", "scale-to-zero", base),
                ("pods to zero, 1 warm node", "warm-node", warm_node_variant(base)),
                ("fixed 4 replicas", "fixed", fixed_variant(base)))
    for name, folder, objs in variants:
        t0 = time.perf_counter()
        out = a.out / folder if a.out else None
        r = run(objects=objs, out=out, overwrite=True)  # a rerun of the study replaces its folders
        results[name] = analyse(r, objs)
        print(f"{name}: {time.perf_counter() - t0:.1f} s wall", flush=True)
    print()
    print(table(results))
    fixed = results["fixed 4 replicas"]
    for name, _, _ in variants[:2]:
        v = results[name]
        saved = fixed["node_gpu_hours"] - v["node_gpu_hours"]
        n_cold = len(v["cold_starts"]) - v["zero_ready_gaps_without_scale_to_zero"]
        print(f"\n{name}: GPU-hours saved {saved:.2f} of {fixed['node_gpu_hours']:.2f} billed "
              f"({saved / fixed['node_gpu_hours']:.0%}), ${fixed['cost_usd'] - v['cost_usd']:,.2f} of "
              f"${fixed['cost_usd']:,.2f}; cold-start phases, mean over {n_cold} scale-from-zero: "
              f"{v['cold_start_phases_mean_s']}\n")
        print(phases_table(v))
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

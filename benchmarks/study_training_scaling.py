"""Scaling study (issue 6 acceptance): the same training job from 8 to 256 GPUs on each GKE GPU network tier, step
time and strong-scaling efficiency, and where the network becomes the bottleneck. Written up in
docs/training-studies.md.

The job: a dense 8B model (Llama-3-8B size; 32 layers, d_model 4096), FSDP over all ranks (8B with plain DDP needs
128 GB of Adam states per GPU: it does not fit), fixed global batch 512 x 4096 tokens (2M tokens per step, so the
micro-batches per rank shrink as GPUs grow: strong scaling). `--model 70b` runs Llama-2-70B size (80 layers, d 8192)
with tensor parallel 8 inside each node and FSDP across nodes, global batch 1024 x 4096.

Tiers (each pool in a compact placement group, one zone; machines' default tier unless noted):
a2-highgpu-8g gVNIC (A100 40GB), a2-highgpu-8g gVNIC + NCCL Fast Socket, a3-highgpu-8g gVNIC only (H100 with
gpuDirect: none, the plain-TCP fallback), a3-highgpu-8g GPUDirect-TCPX, a3-megagpu-8g GPUDirect-TCPXO,
a3-ultragpu-8g RDMA (H200), a4-highgpu-8g RDMA (B200). Different GPUs have different compute, so compare
efficiency across tiers and step time within a machine family.

efficiency(N) = 8 x step(8) / (N x step(N)): 100% = the step shrinks in proportion to the GPUs added.
The model is called directly (workloads/training.step_breakdown with workloads/network.py); one case also runs end to
end through kubetwin.run (a Job on a NodePool) to show the twin's pod run time equals the model's work.
Usage: python benchmarks/study_training_scaling.py [--model 8b|70b] [--out runs/study-training-scaling]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kubetwin import catalog
from kubetwin.autoscaler.nodepool import network_labels
from kubetwin.workloads.training import Placement, StepTime, gpu_default_mfu, step_breakdown
from kubetwin.workloads.training_spec import PREFIX, TrainingSpec, parse

GPUS = (8, 16, 32, 64, 128, 256)
TIERS = [  # (label, machine type, pool spec extras)
    ("a2 gVNIC", "a2-highgpu-8g", {}),
    ("a2 gVNIC + Fast Socket", "a2-highgpu-8g", {"fastSocket": True}),
    ("a3-high TCP only", "a3-highgpu-8g", {"gpuDirect": "none"}),
    ("a3-high TCPX", "a3-highgpu-8g", {}),
    ("a3-mega TCPXO", "a3-megagpu-8g", {}),
    ("a3-ultra RDMA", "a3-ultragpu-8g", {}),
    ("a4 RDMA", "a4-highgpu-8g", {}),
]
MODELS = {
    "8b": {"params": "8B", "layers": "32", "hidden-size": "4096", "global-batch-size": "512",
           "sequence-length": "4096", "fsdp": "true", "steps": "1000"},
    "70b": {"params": "70B", "layers": "80", "hidden-size": "8192", "global-batch-size": "1024",
            "sequence-length": "4096", "fsdp": "true", "tensor-parallel": "8", "steps": "1000"},
}


def annotations(model: str) -> dict[str, str]:
    return {PREFIX + k: v for k, v in MODELS[model].items()}


def gpu_of(machine: str) -> str:
    return catalog.machine_type(machine).gpu or ""


def nodes(machine: str, n: int, extra: dict, compact: bool = True) -> list[dict]:
    """Node objects labelled as autoscaler/nodepool.py labels a pool's nodes."""
    labels = {"node.kubernetes.io/instance-type": machine, "topology.kubernetes.io/zone": "us-central1-a",
              "cloud.google.com/gke-nodepool": "p", "cloud.google.com/gke-accelerator": gpu_of(machine),
              **network_labels(extra)}
    if compact:
        labels["cloud.google.com/gke-placement-group"] = "p-placement"
    return [{"metadata": {"name": f"n{i}", "labels": labels}} for i in range(n)]


def placement(machine: str, gpus: int, extra: dict, compact: bool = True) -> Placement:
    gpu = gpu_of(machine)
    return Placement(tuple((nd, 8) for nd in nodes(machine, max(1, gpus // 8), extra, compact)),
                     float(catalog.gpu_type(gpu).bf16_tflops or 0), gpu_default_mfu(gpu))


def breakdown(spec: TrainingSpec, machine: str, gpus: int, extra: dict, compact: bool = True) -> StepTime:
    return step_breakdown(spec, placement(machine, gpus, extra, compact), advise=False)


def study(model: str) -> dict[str, list[dict]]:
    spec = parse(annotations(model))
    out: dict[str, list[dict]] = {}
    for label, machine, extra in TIERS:
        rows = []
        base = None
        for n in GPUS:
            st = breakdown(spec, machine, n, extra)
            base = base or st.step * GPUS[0]
            rows.append({"gpus": n, "step_s": st.step, "compute_s": st.compute + st.bubble,
                         "comm_s": st.exposed_comm, "comm_share": st.exposed_comm / st.step,
                         "efficiency": base / (n * st.step)})
        out[label] = rows
    return out


def end_to_end(model: str, machine: str = "a3-megagpu-8g", n_nodes: int = 8) -> dict[str, float]:
    """The twin end to end: a Job of n_nodes pods x 8 GPUs on a compact pool; its pods' run time vs the model."""
    from kubetwin.runner import run

    ann = {**annotations(model), PREFIX + "steps": "200"}
    pool = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {
        "machineType": machine, "nodeCount": n_nodes, "zones": ["us-central1-a"],
        "accelerators": [{"type": gpu_of(machine), "count": 8}], "placementPolicy": {"type": "COMPACT"}}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
           "spec": {"parallelism": n_nodes, "completions": n_nodes, "completionMode": "Indexed", "template": {
               "metadata": {"annotations": ann}, "spec": {"restartPolicy": "Never", "containers": [
                   {"name": "t", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}
    sc = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
          "spec": {"duration": "1d", "seed": 1, "report": ["summary"]}}
    # the model below assumes the machine's GPUDirect: give the pods GKE's set-up for it (workloads/gpudirect.py)
    from kubetwin.workloads import gpudirect, network

    plugin = network.capability(machine)
    objs: list[dict] = []
    if plugin in gpudirect.REQUIREMENTS:
        job["spec"]["template"], objs = gpudirect.guide_set_up(job["spec"]["template"], plugin)
    res = run(objects=[sc, pool, *objs, job])
    started, ended = {}, {}
    for t, _, et, o in res.history:
        if o["kind"] == "Pod" and et == "MODIFIED":
            ph = o["status"].get("phase")
            if ph == "Running":
                started.setdefault(o["metadata"]["name"], t)
            elif ph == "Succeeded":
                ended.setdefault(o["metadata"]["name"], t)
    twin = max(ended[p] - started[p] for p in ended)
    st = breakdown(parse(ann), machine, n_nodes * 8, {})
    return {"gpus": n_nodes * 8, "machine": machine, "twin_pod_seconds": twin, "model_work_seconds": st.work,
            "rel_error": abs(twin - st.work) / st.work}


def table(results: dict[str, list[dict]]) -> str:
    head = "| GPUs | " + " | ".join(results) + " |"
    lines = [head, "|" + "---|" * (len(results) + 1)]
    for i, n in enumerate(GPUS):
        cells = [f"{r[i]['step_s']:.2f} s / {100 * r[i]['efficiency']:.0f}% / {100 * r[i]['comm_share']:.0f}%"
                 for r in results.values()]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: dict[str, list[dict]], model: str, path: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("step time (s)", "scaling efficiency (%)"))
    for label, rows in results.items():
        x = [r["gpus"] for r in rows]
        fig.add_trace(go.Scatter(x=x, y=[r["step_s"] for r in rows], name=label, legendgroup=label), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=[100 * r["efficiency"] for r in rows], name=label, legendgroup=label,
                                 showlegend=False), 1, 2)
    fig.update_xaxes(type="log", title="GPUs", tickvals=list(GPUS))
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_layout(title=f"kubetwin: {model} training, fixed global batch, by GKE network tier",
                      template="plotly_white", height=480)
    fig.write_html(path, include_plotlyjs="cdn", div_id="scaling")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="8b")
    ap.add_argument("--out", type=Path, default=Path("runs/study-training-scaling"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = study(args.model)
    print(f"{args.model}: step time / scaling efficiency / exposed-comm share of the step\n")
    print(table(results))
    e2e = end_to_end(args.model)
    print(f"\nend to end ({e2e['gpus']} GPUs, {e2e['machine']}): twin pod run time {e2e['twin_pod_seconds']:.1f} s "
          f"vs model work {e2e['model_work_seconds']:.1f} s (rel. error {e2e['rel_error']:.2e})")
    (args.out / f"scaling-{args.model}.json").write_text(json.dumps({"results": results, "end_to_end": e2e},
                                                                   indent=1, sort_keys=True) + "\n")
    plot(results, args.model, args.out / f"scaling-{args.model}.html")
    print(f"\nwrote {args.out}/scaling-{args.model}.json and .html in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

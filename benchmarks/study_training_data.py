"""Data-loading study (issue 6 acceptance): the same training job on each storage option, its data-stall fraction
and what the stall costs in GPU time. Written up in docs/training-studies.md.

The job: the 8B FSDP job of study_training_scaling.py on 8 x a3-megagpu-8g (64 H100, TCPXO, compact), 1000 steps,
with two datasets: `text` (4 bytes per token: int32 token ids, 8 MiB per 2M-token step) and `multimodal`
(dataset-bytes-per-sample 4 MiB, e.g. pre-decoded image patches: 2 GiB per step). Each storage option is read
`streaming` (each step waits for its read) and `pipelined` (DataLoader workers prefetch behind the step);
`prestaged` copies the dataset to local SSD first.

Storage figures are workloads/storage.py's (with their sources there); the sizes are this study's choices:
Cloud Storage FUSE without / with file cache, Hyperdisk ML provisioned at 2,400 MiB/s, Parallelstore 12 TiB
(its minimum), Filestore zonal 1-10 TiB and basic-ssd, pd-balanced 1 TiB per VM. A shared file system's rate is
the whole job's; a per-VM store's rate is per node (workloads/training.py).

Cost = node-hours x the a3-megagpu-8g on-demand price (catalog machines.yaml); storage's own price is not in the
catalog and is left out. The model is called directly; one case also runs end to end through kubetwin.run (a Job
reading a Parallelstore PVC) to show the twin's pod run time equals the model's work.
Usage: python benchmarks/study_training_data.py [--out runs/study-training-data]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from study_training_scaling import annotations, placement

from kubetwin import catalog
from kubetwin.workloads import storage as sto
from kubetwin.workloads.storage import GIB, MIB, ReadPath
from kubetwin.workloads.training import job_seconds, step_breakdown
from kubetwin.workloads.training_spec import PREFIX, parse

MACHINE, NODES = "a3-megagpu-8g", 8
STORES = [
    ("GCS FUSE, no cache", ReadPath("gcsfuse", sto.GCSFUSE_MBPS * 1e6, "")),
    ("GCS FUSE + file cache", ReadPath("gcsfuse-file-cache", min(sto.GCSFUSE_MBPS * sto.GCSFUSE_CACHE_SPEEDUP,
                                                                 sto.GCSFUSE_MAX_MBPS) * 1e6, "")),
    ("Hyperdisk ML 2400 MiB/s", ReadPath("hyperdisk-ml", 2400 * MIB, "")),
    ("Parallelstore 12 TiB", ReadPath("parallelstore", sto.PARALLELSTORE_READ_GIBPS_PER_TIB * 12 * GIB, "")),
    ("Filestore zonal", ReadPath("filestore", sto.FILESTORE_READ_MIBPS["zonal"] * MIB, "")),
    ("Filestore basic-ssd", ReadPath("filestore", sto.FILESTORE_READ_MIBPS["basic-ssd"] * MIB, "")),
    ("pd-balanced 1 TiB", ReadPath("pd-balanced", min(sto.PD_BASELINE_MIBPS["pd-balanced"]
                                                      + sto.PD_MIBPS_PER_GIB["pd-balanced"] * 1024, 1200) * MIB, "")),
]
DATASETS = {"text": {"dataset-bytes-per-token": "4"}, "multimodal": {"dataset-bytes-per-sample": "4Mi"}}


def price() -> float:
    return float(catalog.hourly_price(catalog.machine_type(MACHINE), False) or 0.0)


def study() -> list[dict]:
    rows = []
    for ds, extra in DATASETS.items():
        for loading in ("streaming", "pipelined", "prestaged"):
            ann = {**annotations("8b"), **{PREFIX + k: v for k, v in extra.items()}, PREFIX + "data-path": "/data",
                   PREFIX + "data-loading": loading}
            spec = parse(ann)
            for label, rp in STORES:
                if loading == "prestaged" and label != STORES[0][0]:
                    continue  # the copy is paid once; shown for the slowest store only
                st = step_breakdown(spec, replace(placement(MACHINE, NODES * 8, {}), read=rp), advise=False)
                secs = job_seconds(st)
                rows.append({"dataset": ds, "loading": loading, "storage": label, "step_s": st.step,
                             "stall_fraction": st.data_stall / st.step, "prestage_s": st.prestage,
                             "job_hours": secs / 3600, "cost_usd": secs / 3600 * NODES * price(),
                             "stall_cost_usd": st.steps * st.data_stall / 3600 * NODES * price()})
    return rows


def end_to_end() -> dict[str, float]:
    """A Job reading a 12 TiB Parallelstore PVC, multimodal streaming, run through the twin."""
    from kubetwin.runner import run

    ann = {**annotations("8b"), PREFIX + "steps": "100", PREFIX + "dataset-bytes-per-sample": "4Mi",
           PREFIX + "data-path": "/data", PREFIX + "data-loading": "streaming"}
    objs = [{"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
             "spec": {"duration": "1d", "seed": 1, "report": ["summary"]}},
            {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {
                "machineType": MACHINE, "nodeCount": NODES, "zones": ["us-central1-a"],
                "accelerators": [{"type": "nvidia-h100-mega-80gb", "count": 8}],
                "placementPolicy": {"type": "COMPACT"}}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ps"},
             "provisioner": "parallelstore.csi.storage.gke.io"},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "ps",
                      "resources": {"requests": {"storage": "12Ti"}}}},
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
             "spec": {"parallelism": NODES, "completions": NODES, "completionMode": "Indexed", "template": {
                 "metadata": {"annotations": ann}, "spec": {"restartPolicy": "Never", "containers": [
                     {"name": "t", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}},
                      "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}}}]
    from kubetwin.workloads import gpudirect, network  # the model assumes the machine's GPUDirect: set it up

    plugin = network.capability(MACHINE)
    if plugin in gpudirect.REQUIREMENTS:
        objs[-1]["spec"]["template"], extra = gpudirect.guide_set_up(objs[-1]["spec"]["template"], plugin)
        objs[-1:-1] = extra
    res = run(objects=objs)
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    for t, _, et, o in res.history:
        if o["kind"] == "Pod" and et == "MODIFIED":
            ph = o["status"].get("phase")
            (start if ph == "Running" else end if ph == "Succeeded" else {}).setdefault(o["metadata"]["name"], t)
    twin = max(end[p] - start[p] for p in end)
    rp = ReadPath("parallelstore", sto.PARALLELSTORE_READ_GIBPS_PER_TIB * 12 * GIB, "")
    st = step_breakdown(parse(ann), replace(placement(MACHINE, NODES * 8, {}), read=rp), advise=False)
    return {"twin_pod_seconds": twin, "model_work_seconds": st.work, "stall_fraction": st.data_stall / st.step,
            "rel_error": abs(twin - st.work) / st.work}


def table(rows: list[dict]) -> str:
    out = ["| dataset | loading | storage | step (s) | stall | job (h) | cost (USD) | of which stall |",
           "|---|---|---|---|---|---|---|---|"]
    out += [f"| {r['dataset']} | {r['loading']} | {r['storage']} | {r['step_s']:.2f} | "
            f"{100 * r['stall_fraction']:.0f}% | {r['job_hours']:.2f}"
            + (f" (incl. {r['prestage_s'] / 60:.0f} min copy)" if r["prestage_s"] else "")
            + f" | {r['cost_usd']:,.0f} | {r['stall_cost_usd']:,.0f} |" for r in rows]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/study-training-data"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = study()
    print(table(rows))
    e2e = end_to_end()
    print(f"\nend to end (Parallelstore, multimodal, streaming): twin pod run time {e2e['twin_pod_seconds']:.1f} s vs "
          f"model work {e2e['model_work_seconds']:.1f} s (rel. error {e2e['rel_error']:.2e}), stall "
          f"{100 * e2e['stall_fraction']:.0f}%")
    (args.out / "data.json").write_text(json.dumps({"rows": rows, "end_to_end": e2e}, indent=1, sort_keys=True)
                                        + "\n")
    print(f"\nwrote {args.out}/data.json")


if __name__ == "__main__":
    main()

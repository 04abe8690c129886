"""`kubetwin sweep SWEEP.yaml --emit-job FILE`: the same cases as a Kubernetes Indexed Job.

One case and seed per completion index (`kubetwin sweep ... --index $JOB_COMPLETION_INDEX`: the Job controller
sets JOB_COMPLETION_INDEX in each pod, https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode),
the Sweep and its scenario files in a ConfigMap mounted read-only, each case's row written to a shared
PersistentVolumeClaim. backoffLimitPerIndex retries a failed index alone (GA in Kubernetes 1.33). Once the Job is
Complete, `kubetwin sweep SWEEP.yaml --out /results` on that volume skips every case and writes the table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.sweep.cases import Plan
from kubetwin.sweep.execute import task_count
from kubetwin.validation.sweep import DEFAULT_MAX_CASES

CONFIGMAP_LIMIT = 1024 * 1024  # the API server's limit on a ConfigMap (etcd's request size)
MOUNT, RESULTS = "/sweep", "/results"


def _files(plan: Plan, sweep_file: Path) -> tuple[Path, list[Path]]:
    """The Sweep, its scenario files and the trace files they read, and the folder above them all."""
    files = {sweep_file.resolve()} | {Path(m.file).resolve() for m in plan.base if not m.file.startswith("<")}
    for m in plan.base:
        spec = m.obj.get("spec")
        if m.kind == "RequestTrace" and isinstance(spec, dict) and isinstance(spec.get("path"), str):
            files.add((Path(m.file).resolve().parent / spec["path"]).resolve())
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    return root, sorted(files)


def _portable(plan: Plan, sweep_file: Path) -> str:
    """The Sweep as written, or, when spec.scenario names absolute paths, with them relative to the Sweep's
    folder (the ConfigMap keeps the files' layout, not their absolute places)."""
    text = sweep_file.read_text(encoding="utf-8")
    if not any(os.path.isabs(p) for p in plan.sweep.spec.scenario):
        return text
    here = sweep_file.resolve().parent
    obj = {**plan.manifest.obj, "spec": {**plan.manifest.obj["spec"], "scenario": [
        os.path.relpath((here / p).resolve(), here) for p in plan.sweep.spec.scenario]}}
    return yaml.safe_dump(obj, sort_keys=False, width=120)


def manifests(plan: Plan, sweep_file: Path, *, image: str, parallelism: int) -> list[dict[str, Any]]:
    if plan.sweep.spec.search.strategy == "bayesian":
        raise KubetwinError([Diagnostic(str(sweep_file), plan.manifest.line_of("spec.search.strategy"),
                                        plan.manifest.ref, "spec.search.strategy", "Invalid value: a Bayesian "
                                        "search picks its cases from earlier results: it cannot be an Indexed Job",
                                        "use strategy grid or random with --emit-job")])
    name = f"kubetwin-sweep-{plan.sweep.metadata.name}"[:52].rstrip("-.")
    root, files = _files(plan, sweep_file)
    data, items, size = {}, [], 0
    for i, f in enumerate(files):
        text = f.read_text(encoding="utf-8") if f != sweep_file.resolve() else _portable(plan, sweep_file)
        size += len(text.encode())
        data[f"f{i}"] = text
        items.append({"key": f"f{i}", "path": os.path.relpath(f, root)})
    if size > CONFIGMAP_LIMIT:
        raise KubetwinError([Diagnostic(str(sweep_file), 0, plan.manifest.ref, "spec.scenario",
                                        f"the Sweep's files are {size} bytes: more than a ConfigMap holds "
                                        f"({CONFIGMAP_LIMIT})", "put the scenario's files in the image and "
                                        "drop the ConfigMap, or use a smaller trace")])
    sweep_path = f"{MOUNT}/{os.path.relpath(sweep_file.resolve(), root)}"
    completions = task_count(plan)
    labels = {"app.kubernetes.io/name": "kubetwin-sweep", "app.kubernetes.io/instance": plan.sweep.metadata.name}
    script = (f"kubetwin sweep {sweep_path} --out {RESULTS} --index \"$JOB_COMPLETION_INDEX\"")
    if plan.count > DEFAULT_MAX_CASES:  # emitted with --max-cases: each index must accept the same sweep
        script += f" --max-cases {plan.count}"
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-files", "labels": labels},
         "data": data},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"{name}-results",
                                                                           "labels": labels},
         # every index writes its row here at once, so the claim is ReadWriteMany; on GKE that needs Filestore
         # (a PD refuses multi-writer filesystems): `standard-rwx`, the Filestore CSI driver's Basic HDD class,
         # whose smallest instance is 1 TiB (https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-
         # volumes/filestore-csi-driver, "Use an RWX volume"; https://cloud.google.com/filestore/docs/service-tiers)
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "standard-rwx",
                  "resources": {"requests": {"storage": "1Ti"}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
         "spec": {"completionMode": "Indexed", "completions": completions,
                  "parallelism": max(1, min(parallelism, completions)), "backoffLimitPerIndex": 1,
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "restartPolicy": "Never",
                      "containers": [{"name": "case", "image": image, "command": ["sh", "-c", script],
                                      "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                                      "volumeMounts": [{"name": "sweep", "mountPath": MOUNT, "readOnly": True},
                                                       {"name": "results", "mountPath": RESULTS}]}],
                      "volumes": [{"name": "sweep", "configMap": {"name": f"{name}-files", "items": items}},
                                  {"name": "results", "persistentVolumeClaim": {"claimName": f"{name}-results"}}],
                  }}}},
    ]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the scenario files in the ConfigMap) as literal blocks, readable as written."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s,
                                                             style="|" if "\n" in s else None))


def emit(plan: Plan, sweep_file: Path, dest: Path, *, image: str, parallelism: int) -> Path:
    objs = manifests(plan, sweep_file, image=image, parallelism=parallelism)
    collect = objs[2]["spec"]["template"]["spec"]["containers"][0]["command"][2].split(" --index")[0]
    head = (f"# kubetwin sweep {plan.sweep.metadata.name} as an Indexed Job: {objs[2]['spec']['completions']} "
            "completions, one case and seed each.\n# kubectl apply -f this file; once the Job is Complete, "
            f"`{collect}` in a pod with both volumes writes results.csv.\n")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(head + yaml.dump_all(objs, Dumper=_Dumper, sort_keys=False, width=120))
    return dest

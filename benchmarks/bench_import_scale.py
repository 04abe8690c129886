"""How long `kubetwin import` / `simulate --from` take on a large cluster's dump (issue 36 item 3: "answers in
seconds for a 1,000-node snapshot").

Writes a synthetic `kubectl get -A -o json` dump shaped like tests/data/import/gke-kubectl.json, scaled: NODES GKE
nodes (half a CPU pool, half an L4 Spot pool) and PODS pods bound to them (Jobs' pods, Running, each with its own
token volume name), in files of one kind each as the docs advise (nodes.json, pods-N.json, rest.json). Then times
`simulate` of one small Job on top (one run, --duration 10m), the first thing the process does, as the command
would; then its parts again: reading and converting (importer.sources.load) and validating.

    python benchmarks/bench_import_scale.py                      # 1,000 nodes, 8,000 pods
    python benchmarks/bench_import_scale.py --nodes 100 --pods 800 --keep /tmp/dump
    python benchmarks/bench_import_scale.py --format yaml        # the same dump as `kubectl get -o yaml`
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "import" / "gke-kubectl.json"
PODS_PER_FILE = 1500  # ~8.5 KB a pod as kubectl prints it (managedFields and all): 13 MB a file


def dump(nodes: int, pods: int) -> dict[str, list[dict[str, Any]]]:
    """The files' items: nodes cloned from the fixture's CPU and L4 Spot nodes, pods from its Job's pod."""
    items = json.loads(FIXTURE.read_text())["items"]
    by_name = {o["metadata"]["name"]: o for o in items}
    cpu = by_name["gke-ml-prod-cpu-pool-91d2c3e4-b7vn"]
    spot = by_name["gke-ml-prod-l4-spot-8e1d04c7-m3rt"]
    pod = copy.deepcopy(by_name["train-llama-0-b8xkd"])
    pod["spec"].pop("tolerations", None)
    for c in pod["spec"]["containers"]:
        c["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    pod["spec"].pop("nodeSelector", None)
    job = by_name["train-llama"]
    out_nodes, out_pods = [], []
    for i in range(nodes):
        n = copy.deepcopy(cpu if i % 2 == 0 else spot)
        name = f"{n['metadata']['name'][:-5]}{i:05d}"
        n["metadata"]["name"] = name
        n["metadata"]["uid"] = f"node-{i:08d}-0000-0000-0000-000000000000"
        n["metadata"]["labels"]["kubernetes.io/hostname"] = name
        out_nodes.append(n)
    jobs = []
    per_job = 8
    for j in range((pods + per_job - 1) // per_job):
        jb = copy.deepcopy(job)
        jb["metadata"]["name"] = f"batch-{j:05d}"
        jb["metadata"]["uid"] = f"job-{j:08d}-0000-0000-0000-000000000000"
        jb["spec"]["parallelism"] = jb["spec"]["completions"] = per_job
        jb["spec"]["template"]["spec"] = copy.deepcopy(pod["spec"])
        jb["spec"]["template"]["spec"].pop("nodeName", None)
        uid, name = jb["metadata"]["uid"], jb["metadata"]["name"]
        jb["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        jb["spec"]["template"]["metadata"]["labels"] = _job_labels(uid, name)
        jobs.append(jb)
    r = random.Random(0)
    token = json.dumps(pod)
    for i in range(pods):
        # each pod's service-account token volume has its own random suffix, as the API server names it
        suffix = "".join(r.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        p = json.loads(token.replace("kube-api-access-x7k2p", f"kube-api-access-{suffix}"))
        j = i // per_job
        p["metadata"]["name"] = f"batch-{j:05d}-{i % per_job}-x{i:05d}"
        p["metadata"]["uid"] = f"pod-{i:08d}-0000-0000-0000-000000000000"
        p["metadata"]["ownerReferences"][0].update(name=f"batch-{j:05d}", uid=jobs[j]["metadata"]["uid"])
        index = str(i % per_job)  # the Job's pods, as its controller labels them (Indexed completion)
        p["metadata"]["labels"] = {**_job_labels(jobs[j]["metadata"]["uid"], f"batch-{j:05d}"),
                                   "batch.kubernetes.io/job-completion-index": index,
                                   "job-completion-index": index}
        p["metadata"].setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = index
        p["spec"]["nodeName"] = out_nodes[i % nodes]["metadata"]["name"]
        out_pods.append(p)
    rest = [o for o in items if o["kind"] == "Namespace"] + jobs
    files = {"nodes.json": out_nodes, "rest.json": rest}
    for k in range(0, pods, PODS_PER_FILE):  # a file holds at most 16 MiB (docs/import.md "Size")
        files[f"pods-{k // PODS_PER_FILE}.json"] = out_pods[k:k + PODS_PER_FILE]
    return files


def _job_labels(uid: str, name: str) -> dict[str, str]:
    return {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
            "controller-uid": uid, "job-name": name}


def write(folder: Path, nodes: int, pods: int, fmt: str = "json") -> list[Path]:
    """The dump's files, as `kubectl get -o json` prints them (4-space indent), or `-o yaml` (block style, keys in
    the same order, long strings on one line)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, items in dump(nodes, pods).items():
        doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
        if fmt == "yaml":
            path = folder / name.replace(".json", ".yaml")
            path.write_text(yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                                      default_flow_style=False, width=1 << 20, allow_unicode=True))
        else:
            path = folder / name
            path.write_text(json.dumps(doc, indent=4))  # kubectl's order
        paths.append(path)
    return paths


def measure(paths: list[Path], incoming: Path) -> dict[str, Any]:
    """`simulate` first (cold, as the command runs it), then its parts again: reading and converting, validating
    (validate's cache of valid subschema instances emptied first, when this version has one)."""
    from kubetwin.importer import sources
    from kubetwin.simulate import simulate
    from kubetwin.validation import validate as validation

    out: dict[str, Any] = {}
    t = time.perf_counter()
    answer = simulate([incoming], list(paths), duration="10m")
    out["simulate_s"] = time.perf_counter() - t
    out["started_at_s"] = float("nan") if answer.runs[0][0].started is None else answer.runs[0][0].started
    out["node"] = ",".join(answer.runs[0][0].nodes)
    getattr(validation, "_VALID", set()).clear()
    t = time.perf_counter()
    manifests, _ = sources.load(paths)
    out["read_and_convert_s"] = time.perf_counter() - t
    t = time.perf_counter()
    errors = [d for d in validation.validate(manifests) if d.severity == "error"]
    out["validate_s"] = time.perf_counter() - t
    if errors:
        raise SystemExit("\n".join(d.render() for d in errors[:5]))
    out["objects"] = float(len(manifests))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=8000)
    ap.add_argument("--keep", type=Path, help="write the dump here and keep it")
    ap.add_argument("--format", choices=("json", "yaml"), default="json", help="the dump as -o json or -o yaml")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kubetwin-scale-") as tmp:
        folder = args.keep or Path(tmp)
        paths = write(folder, args.nodes, args.pods, args.format)
        size = sum(p.stat().st_size for p in paths)
        incoming = folder / "incoming.yaml"
        incoming.write_text(json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": "eval", "namespace": "ml"}, "spec": {"template": {"metadata": {"annotations": {
                "kubetwin.io/duration": "5m"}}, "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}]}}}}))
        result = measure(paths, incoming)
    print(json.dumps({"nodes": args.nodes, "pods": args.pods, "format": args.format,
                      "megabytes": round(size / 1e6, 1),
                      **{k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

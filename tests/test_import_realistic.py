"""A realistic GKE cluster imported from each dump format (issue 36 item 4): 33 nodes in five GKE node pools, Kueue
with admitted and pending Workloads, DRA claims allocated on the NVIDIA driver's ResourceSlices, a JobSet, 176 pods. The
dump is written by tests/data/import/make_gke_cluster.py (examples/your-cluster/cluster.json is its kubectl -o json;
the kwokctl snapshot and the simulator's export are written from the same objects into a temporary folder).

Each format imports to the same objects with the same counts; bound pods stay where they run; admitted Workloads
keep their quota (no re-suspension, no duplicate Workload); pending ones are admitted in their order as quota frees;
DRA claims keep their devices and a new claim never gets one of them; the three formats make the same decisions."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import load_script

from kubetwin.api.loader import Manifest
from kubetwin.importer import convert, kubectl, kwok, simulator
from kubetwin.importer import sources as import_sources
from kubetwin.runner import RunResult, run

ROOT = Path(__file__).parents[1]
CLUSTER = ROOT / "examples" / "your-cluster" / "cluster.json"
GENERATOR = Path(__file__).parent / "data" / "import" / "make_gke_cluster.py"
# how long the running jobs have left (the dump cannot say): sweep-lr-1 ends first, then sweep-lr-2, then finetune
REMAINING = {"job/sweep-lr-1": 1200.0, "job/sweep-lr-2": 2400.0, "job/finetune-llama-70b": 5400.0}
ADMITTED = {"job-finetune-llama-70b": "team-a", "job-sweep-lr-1": "team-b", "job-sweep-lr-2": "team-b"}
PENDING = ("job-eval-mmlu", "job-sweep-lr-3", "job-sweep-lr-4")
# new pods on the DRA pool: 4 GPUs fit on the second node only (the first has 2 left), 2 GPUs on the first, and a
# third 4-GPU pod finds no node with 4 unallocated GPUs
NEW_DRA = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: ml-dra, annotations: {kubetwin.io/duration: 2h}}
spec:
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimTemplateName: TEMPLATE}]
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: c
    image: vllm/vllm-openai:v0.11.0
    resources: {requests: {cpu: "8", memory: 64Gi}, claims: [{name: gpu}]}
"""
TWO_GPUS = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-h100, namespace: ml-dra}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 2}
"""


def generator() -> ModuleType:
    return load_script(GENERATOR)


@pytest.fixture(scope="module")
def formats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    gen = generator()
    folder = tmp_path_factory.mktemp("gke-large")
    objs = gen.ordered(gen.build())
    (folder / "gke-large-kwokctl.yaml").write_text(gen.kwokctl(objs))
    (folder / "gke-large-simulator-export.json").write_text(gen.simulator(objs))
    (folder / "gke-large-simulator-rest.json").write_text(
        gen.kubectl_list([o for o in objs if o["kind"] not in gen.SIMULATOR]))
    return {"kubectl": [CLUSTER], "kwokctl": [folder / "gke-large-kwokctl.yaml"],
            "simulator": [folder / "gke-large-simulator-export.json", folder / "gke-large-simulator-rest.json"]}


def imported(paths: list[Path], extra: list[Manifest] | None = None) -> tuple[list[Manifest], convert.Report]:
    manifests, report = import_sources.load(paths, convert.Options(remaining=dict(REMAINING)))
    assert report is not None
    return manifests + (extra or []), report


def test_the_committed_dump_is_the_generators_output() -> None:
    """examples/your-cluster/cluster.json is what the generator writes (run it again after changing it)."""
    gen = generator()
    assert CLUSTER.read_text() == gen.kubectl_list(gen.ordered(gen.build()))
    assert CLUSTER.stat().st_size < 1_000_000


def test_the_dump_is_a_gke_cluster() -> None:
    items = json.loads(CLUSTER.read_text())["items"]
    nodes = [o for o in items if o["kind"] == "Node"]
    pods = [o for o in items if o["kind"] == "Pod"]
    assert len(nodes) == 33 and len(pods) == 176
    spot = [n for n in nodes if n["metadata"]["labels"].get("cloud.google.com/gke-spot") == "true"]
    assert len(spot) == 16 and {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in spot} == {
        "us-central1-a", "us-central1-b"}
    assert all({"effect": "NoSchedule", "key": "cloud.google.com/gke-spot", "value": "true"} in n["spec"]["taints"]
               and {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"} in n["spec"]["taints"]
               for n in spot)
    a3 = next(n for n in nodes if n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == "h100-pool")
    assert a3["metadata"]["labels"]["cloud.google.com/machine-family"] == "a3"
    assert a3["status"]["capacity"]["nvidia.com/gpu"] == "8" and a3["status"]["capacity"]["cpu"] == "208"
    dra = next(n for n in nodes if n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == "h100-dra")
    assert "nvidia.com/gpu" not in dra["status"]["capacity"]  # the DRA driver, not the device plugin
    assert all(o["metadata"].get("managedFields") for o in items)


@pytest.mark.parametrize("fmt,expected", [("kubectl", {kubectl.FORMAT: 1}), ("kwokctl", {kwok.FORMAT: 1}),
                                          ("simulator", {simulator.FORMAT: 1, kubectl.FORMAT: 1})])
def test_each_format_is_read_as_what_it_is(formats: dict[str, list[Path]], fmt: str, expected: dict) -> None:
    _, report = imported(formats[fmt])
    assert report.formats == expected


def _key(m: Manifest) -> tuple[str, str, str]:
    meta = m.obj.get("metadata") or {}
    return m.kind, str(meta.get("namespace") or ""), str(meta.get("name"))


def test_each_format_imports_the_same_objects_with_the_same_counts(formats: dict[str, list[Path]]) -> None:
    results = {fmt: imported(paths) for fmt, paths in formats.items()}
    base, report = results["kubectl"]
    assert report.kept == {
        "ClusterQueue": 2, "Deployment": 5, "DeviceClass": 2, "Job": 8, "JobSet": 1, "LocalQueue": 2, "Namespace": 8,
        "Node": 33, "NodePool": 5, "Pod": 176, "ReplicaSet": 5, "ResourceClaim": 3, "ResourceClaimTemplate": 1,
        "ResourceFlavor": 1, "ResourceSlice": 2, "Scenario": 1, "StorageClass": 3, "Workload": 6}
    assert report.snapshot_time == "2026-12-01T10:00:00Z"
    lines = report.lines()
    assert "defaulted: 3 DRA ResourceClaims keep their allocation and the pods they are reserved for" in lines
    assert "defaulted: 33 static pods (mirror pods, owned by their Node: kube-proxy...) run until stopped" in lines
    assert "defaulted: 94 pods whose controller (DaemonSet) is not in the dump keep running: nothing re-creates " \
        "them" in lines
    by_key = {_key(m): m.obj for m in base}
    for fmt, (manifests, rep) in results.items():
        assert (rep.kept, sorted(rep.dropped), sorted(rep.defaulted), rep.snapshot_time) == (
            report.kept, sorted(report.dropped), sorted(report.defaulted), report.snapshot_time), fmt
        got = {_key(m): m.obj for m in manifests}
        assert got.keys() == by_key.keys(), fmt
        for k, obj in got.items():
            if k[0] != "Scenario":
                assert obj == by_key[k], (fmt, k)


def test_gke_node_pools_are_grouped_with_their_spot_and_gpu_settings() -> None:
    manifests, _ = imported([CLUSTER])
    pools = {m.obj["metadata"]["name"]: m.obj["spec"] for m in manifests if m.kind == "NodePool"}
    assert pools["l4-spot"] == {
        "machineType": "g2-standard-24", "nodeCount": 8, "zones": ["us-central1-a", "us-central1-b"], "spot": True,
        "accelerators": [{"type": "nvidia-l4", "count": 2}], "labels": {"team": "ml-serving"},
        "taints": [{"effect": "NoSchedule", "key": "cloud.google.com/gke-spot", "value": "true"}]}
    assert pools["h100-pool"]["nodeCount"] == 8 and pools["h100-pool"]["accelerators"] == [
        {"type": "nvidia-h100-80gb", "count": 8}]
    assert pools["h100-dra"]["labels"]["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    assert pools["system-pool"] == {"machineType": "n2-standard-8", "nodeCount": 1,
                                    "zones": ["us-central1-a", "us-central1-b", "us-central1-c"]}


def test_claims_keep_their_allocation_and_pods_their_generated_claims() -> None:
    dumped = {(o["kind"], o["metadata"]["name"]): o for o in json.loads(CLUSTER.read_text())["items"]}
    manifests, _ = imported([CLUSTER])
    claims = {m.obj["metadata"]["name"]: m.obj for m in manifests if m.kind == "ResourceClaim"}
    for name, claim in claims.items():
        src = dumped[("ResourceClaim", name)]["status"]
        assert claim["status"] == {"allocation": src["allocation"], "reservedFor": src["reservedFor"]}
    pods = {m.obj["metadata"]["name"]: m.obj for m in manifests if m.kind == "Pod"}
    server = next(p for n, p in pods.items() if n.startswith("llama-70b-dra-"))
    assert server["status"]["phase"] == "Pending"  # the kubelet starts it at t=0 on its node
    assert server["status"]["resourceClaimStatuses"][0]["resourceClaimName"] in claims


# -- runs -------------------------------------------------------------------------------------------------------------
def new_dra_pods() -> list[Manifest]:
    docs = [TWO_GPUS, NEW_DRA.replace("NAME", "dra-four-a").replace("TEMPLATE", "four-h100"),
            NEW_DRA.replace("NAME", "dra-two").replace("TEMPLATE", "two-h100"),
            NEW_DRA.replace("NAME", "dra-four-b").replace("TEMPLATE", "four-h100")]
    import yaml

    return [Manifest(yaml.safe_load(d), "<test>", 0) for d in docs]


def run_format(paths: list[Path]) -> RunResult:
    manifests, _ = imported(paths, new_dra_pods())
    return run(manifests=manifests, duration="2h")


@pytest.fixture(scope="module")
def runs(formats: dict[str, list[Path]]) -> dict[str, RunResult]:
    return {fmt: run_format(paths) for fmt, paths in formats.items()}


def _admitted(w: dict[str, Any]) -> bool:
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in (w.get("status") or {}).get("conditions")
               or [])


def _wl(result: RunResult, prefix: str) -> str:
    names = {v.object["metadata"]["name"] for v in result.versions("Workload", prefix=prefix)}
    assert len(names) == 1, names
    return names.pop()


def test_bound_pods_run_on_their_nodes_from_t0(runs: dict[str, RunResult]) -> None:
    result = runs["kubectl"]
    dumped = [o for o in json.loads(CLUSTER.read_text())["items"] if o["kind"] == "Pod" and o["spec"].get(
        "nodeName")]
    assert len(dumped) == 175
    for p in dumped:
        at0 = result.last("Pod", p["metadata"]["name"], namespace=p["metadata"]["namespace"], at=0.0)
        assert at0["status"]["phase"] == "Running" and at0["spec"]["nodeName"] == p["spec"]["nodeName"]
    scheduled = {e.event["involvedObject"]["name"] for e in result.recorded_events("Scheduled")}
    assert not scheduled & {p["metadata"]["name"] for p in dumped}
    # no node booted beside the dump's, none of its pods created twice
    assert len({v.object["metadata"]["name"] for v in result.versions("Node")}) == 33
    for prefix in ("llama-8b-vllm-", "kube-dns-", "llama-70b-dra-"):
        assert len({v.object["metadata"]["name"] for v in result.versions("Pod", prefix=prefix)}) == len(
            [p for p in dumped if p["metadata"]["name"].startswith(prefix)])


def test_admitted_workloads_keep_their_quota_and_jobs_are_not_suspended(runs: dict[str, RunResult]) -> None:
    result = runs["kubectl"]
    assert {v.object["metadata"]["name"].rsplit("-", 1)[0] for v in result.versions("Workload")} == {
        *ADMITTED, *PENDING}  # no Workload created twice
    assert len({v.object["metadata"]["name"] for v in result.versions("Workload")}) == 6
    for prefix, cq in ADMITTED.items():
        wl = result.last("Workload", _wl(result, prefix + "-"), at=0.0)
        assert _admitted(wl) and wl["status"]["admission"]["clusterQueue"] == cq
    for job in ("finetune-llama-70b", "sweep-lr-1", "sweep-lr-2"):
        assert not any(v.object["spec"].get("suspend") for v in result.versions("Job", job))
        assert all(p.object["status"].get("phase") != "Pending" for p in result.versions("Pod", prefix=job + "-")
                   if p.time == 0.0 and p.type != "ADDED")
    suspended = {e.event["involvedObject"]["name"] for e in result.recorded_events("Suspended")}
    assert not suspended & {"finetune-llama-70b", "sweep-lr-1", "sweep-lr-2"}


def test_pending_workloads_are_admitted_in_order_as_quota_frees(runs: dict[str, RunResult]) -> None:
    """sweep-lr-1 ends at 20 min and frees 16 GPUs of team-b's quota: sweep-lr-3 (team-b, older than sweep-lr-4) is
    admitted, not eval-mmlu, which would borrow them; sweep-lr-2 ends at 40 min: sweep-lr-4; sweep-lr-3's pods run the
    import's default hour (their template says no run time) and free team-b's quota at 80 min, before finetune ends:
    eval-mmlu borrows it."""
    result = runs["kubectl"]

    def admitted_at(prefix: str) -> float | None:
        return result.first_time("Workload", _admitted, _wl(result, prefix + "-"))

    for prefix in PENDING:
        assert not _admitted(result.last("Workload", _wl(result, prefix + "-"), at=0.0))
    done = {job: result.first_time("Job", lambda j: bool((j.get("status") or {}).get("completionTime")), job)
            for job in ("sweep-lr-1", "sweep-lr-2", "finetune-llama-70b")}
    assert done == {"sweep-lr-1": pytest.approx(1200, abs=5), "sweep-lr-2": pytest.approx(2400, abs=5),
                    "finetune-llama-70b": pytest.approx(5400, abs=5)}
    assert admitted_at("job-sweep-lr-3") == pytest.approx(done["sweep-lr-1"], abs=2)
    assert admitted_at("job-sweep-lr-4") == pytest.approx(done["sweep-lr-2"], abs=2)
    lr3 = result.first_time("Job", lambda j: bool((j.get("status") or {}).get("completionTime")), "sweep-lr-3")
    assert lr3 == pytest.approx(admitted_at("job-sweep-lr-3") + 3600, abs=5)  # pods of Jobs: the import's 1 h
    assert admitted_at("job-eval-mmlu") == pytest.approx(lr3, abs=2)
    eval_wl = result.last("Workload", _wl(result, "job-eval-mmlu-"))
    assert eval_wl["status"]["admission"]["clusterQueue"] == "team-a"


def test_dra_claims_keep_their_devices_and_new_claims_get_others(runs: dict[str, RunResult]) -> None:
    result = runs["kubectl"]
    dumped = [o for o in json.loads(CLUSTER.read_text())["items"] if o["kind"] == "ResourceClaim"]
    held: set[tuple[str, str]] = set()
    for c in dumped:
        at0 = result.last("ResourceClaim", c["metadata"]["name"], at=0.0)
        assert at0["status"]["allocation"] == c["status"]["allocation"]
        held |= {(r["pool"], r["device"]) for r in c["status"]["allocation"]["devices"]["results"]}
    assert len(held) == 10  # 4 + 4 + 2 of the 16 GPUs
    new: dict[str, set[tuple[str, str]]] = {}
    for v in result.versions("ResourceClaim"):
        owner = (v.object["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
        results = (((v.object.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
        if owner.startswith("dra-") and results:
            new[owner] = {(r["pool"], r["device"]) for r in results}
    assert set(new) == {"dra-four-a", "dra-two"}
    assert len(new["dra-four-a"]) == 4 and len(new["dra-two"]) == 2
    assert not (new["dra-four-a"] | new["dra-two"]) & held and not new["dra-four-a"] & new["dra-two"]
    # the notebook's node has 2 GPUs left, the other 4: the 4-GPU claim fits only there
    notebook = next(c for c in dumped if c["metadata"]["name"] == "alice-gpus")
    busy = notebook["status"]["allocation"]["devices"]["results"][0]["pool"]
    other = ({p for p, _ in held} - {busy}).pop()
    assert {p for p, _ in new["dra-four-a"]} == {other} and {p for p, _ in new["dra-two"]} == {busy}
    stuck = result.last("Pod", "dra-four-b")
    assert stuck["status"]["phase"] == "Pending" and not stuck["spec"].get("nodeName")


def test_the_jobset_keeps_its_jobs_and_pods_and_completes(runs: dict[str, RunResult]) -> None:
    """The JobSet's child Jobs are reconnected through their ownerReferences: none is created again, nor any pod;
    its pods run the import's hour, then the Jobs and the JobSet complete."""
    result = runs["kubectl"]
    assert {v.object["metadata"]["name"] for v in result.versions("Job", prefix="llm-eval-")} == {
        "llm-eval-shard-0", "llm-eval-shard-1"}
    assert len({v.object["metadata"]["name"] for v in result.versions("Pod", prefix="llm-eval-shard-")}) == 4
    assert all(v.time == 0.0 for v in result.versions("Pod", prefix="llm-eval-shard-") if v.type == "ADDED")
    done = result.first_time("JobSet", lambda j: any(
        c["type"] == "Completed" and c["status"] == "True" for c in (j.get("status") or {}).get("conditions") or []),
        "llm-eval")
    assert done == pytest.approx(3600.0, abs=5)


def decisions(result: RunResult) -> dict[str, tuple[str | None, float | None]]:
    """Each pod's node and the first instant it ran (pods by namespace/name, the ones the run created by their
    owner and index: their random suffixes are the run's own)."""
    out = {}
    for name in sorted({(v.object["metadata"]["namespace"], v.object["metadata"]["name"])
                        for v in result.versions("Pod")}):
        ns, pod = name
        last = result.last("Pod", pod, namespace=ns)
        out[f"{ns}/{pod}"] = (last["spec"].get("nodeName"), result.first_time(
            "Pod", lambda p: p["status"].get("phase") == "Running", pod, namespace=ns))
    return out


def test_the_three_formats_make_the_same_decisions(runs: dict[str, RunResult]) -> None:
    base = decisions(runs["kubectl"])
    assert sum(1 for _, t in base.values() if t is not None and t > 0) == 7  # 5 of jobs admitted later, 2 DRA
    for fmt in ("kwokctl", "simulator"):
        assert decisions(runs[fmt]) == base, fmt
        for prefix in (*ADMITTED, *PENDING):
            name = _wl(runs["kubectl"], prefix + "-")
            assert runs[fmt].first_time("Workload", _admitted, name) == runs["kubectl"].first_time(
                "Workload", _admitted, name)

"""Pitfall warnings: manifests the API server accepts that the platform still never runs as meant. Each is written
as a user writes the scenario, checked through `kubetwin validate` (warning text, field and fix), and, where the
twin reproduces the pitfall, run to show it does."""

from __future__ import annotations

from pathlib import Path

from autoscaling_builders import scaled_object
from conftest import condition
from serving_builders import h100_pool, inference_pool, serving_scenario, trace, vllm
from typer.testing import CliRunner

from kubetwin.api.loader import load_text
from kubetwin.cli.main import app
from kubetwin.runner import run
from kubetwin.validation.validate import validate

SCENARIO = """apiVersion: kubetwin.io/v1alpha1
kind: Scenario
metadata: {name: t}
spec: {duration: 1h, seed: 1, report: [summary]}
"""
CPU_POOL = """apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec: {machineType: e2-standard-16, nodeCount: 2, zones: [us-central1-a]}
"""
GPU_POOL = """apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: l4}
spec:
  machineType: g2-standard-8
  nodeCount: 1
  zones: [us-central1-a]
  driverInstallDelay: 0s
  accelerators: [{type: nvidia-l4, count: 1{extra}}]
"""
KUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
spec: {flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
{selector}  resourceGroups:
  - coveredResources: [{covered}]
    flavors:
    - name: default
      resources: [{quotas}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: default}
spec: {clusterQueue: team}
"""
JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: main}
spec:
  template:
    metadata: {annotations: {kubetwin.io/duration: 10m}}
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources:
          requests: {requests}
"""


def _kueue(selector: str = "  namespaceSelector: {}\n", covered: str = "cpu",
           quotas: str = '{name: cpu, nominalQuota: "8"}', flavor: str = "{}") -> str:
    return (KUEUE.replace("{selector}", selector).replace("{covered}", covered).replace("{quotas}", quotas)
            .replace("{flavor}", flavor))


def _job(requests: str = '{cpu: "1"}') -> str:
    return JOB.replace("{requests}", requests)


def _docs(*docs: str) -> str:
    return "---\n".join(docs)


def _warnings(text: str) -> list:
    return [d for d in validate(load_text(text, "s.yaml")) if d.severity == "warning"]


def _run(tmp_path: Path, text: str):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    return run([f])


# ---------------------------------------------------------------------------------------- ClusterQueue selector
def test_cluster_queue_without_namespace_selector_warns_with_the_fix() -> None:
    ws = _warnings(_docs(SCENARIO, CPU_POOL, _kueue(selector=""), _job()))
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("ClusterQueue/team", "spec.namespaceSelector")
    assert "Kueue's default is a nothing selector (no namespaces eligible)" in w.message
    assert "workload namespace doesn't match ClusterQueue selector" in w.message
    assert "namespaceSelector: {}" in w.hint
    assert not _warnings(_docs(SCENARIO, CPU_POOL, _kueue(), _job()))


def test_cluster_queue_without_namespace_selector_admits_nothing_in_the_run(tmp_path: Path) -> None:
    r = _run(tmp_path, _docs(SCENARIO, CPU_POOL, _kueue(selector=""), _job()))
    wl = r.last("Workload", prefix="job-train")
    qr = condition(wl, "QuotaReserved")
    assert qr["status"] == "False" and qr["message"] == "workload namespace doesn't match ClusterQueue selector"
    assert r.last("Job", prefix="train")["spec"]["suspend"] is True


# ------------------------------------------------------------------------------------------ uncovered resources
def test_job_requesting_a_resource_its_cluster_queue_does_not_cover() -> None:
    ws = _warnings(_docs(SCENARIO, CPU_POOL, _kueue(), _job('{cpu: "1", memory: 1Gi}')))
    assert len(ws) == 1
    w = ws[0]
    assert w.obj == "Job/default/train" and w.field == "spec.template.spec.containers[0].resources"
    assert "requests memory, which ClusterQueue team does not cover" in w.message
    assert '"resource memory unavailable in ClusterQueue"' in w.message
    assert "add memory to a resourceGroup's coveredResources of ClusterQueue team" in w.hint


def test_uncovered_resource_is_never_admitted_in_the_run(tmp_path: Path) -> None:
    r = _run(tmp_path, _docs(SCENARIO, CPU_POOL, _kueue(), _job('{cpu: "1", memory: 1Gi}')))
    qr = condition(r.last("Workload", prefix="job-train"), "QuotaReserved")
    assert qr["status"] == "False" and "resource memory unavailable in ClusterQueue" in qr["message"]


# ------------------------------------------------------------------------------------------ flavor node labels
def test_flavor_whose_node_labels_match_no_pool() -> None:
    flavor = "{nodeLabels: {cloud.google.com/gke-nodepool: h100}}"
    ws = _warnings(_docs(SCENARIO, CPU_POOL, _kueue(flavor=flavor), _job()))
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("ResourceFlavor/default", "spec.nodeLabels")
    assert "match no node of the scenario's node pools" in w.message and "stay Pending" in w.message
    assert "cloud.google.com/gke-nodepool: cpu" in w.hint
    ok = "{nodeLabels: {cloud.google.com/gke-nodepool: cpu}}"
    assert not _warnings(_docs(SCENARIO, CPU_POOL, _kueue(flavor=ok), _job()))


def test_flavor_without_a_matching_pool_leaves_admitted_pods_pending(tmp_path: Path) -> None:
    flavor = "{nodeLabels: {cloud.google.com/gke-nodepool: h100}}"
    r = _run(tmp_path, _docs(SCENARIO, CPU_POOL, _kueue(flavor=flavor), _job()))
    assert condition(r.last("Workload", prefix="job-train"), "Admitted")["status"] == "True"
    pod = r.last("Pod", prefix="train")
    assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "h100"}
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")


# ------------------------------------------------------------------------------------------------------- KEDA
SCALED = """apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: srv, namespace: default}
spec:
  scaleTargetRef: {name: srv}
  {min}maxReplicaCount: 2
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus:9090
      query: {query}
      threshold: "4"
"""


def test_scale_to_zero_on_the_pods_own_metric_never_wakes() -> None:
    so = SCALED.replace("{min}", "minReplicaCount: 0\n  ").replace("{query}", "sum(vllm:num_requests_waiting)")
    ws = _warnings(_docs(SCENARIO, so))
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("ScaledObject/default/srv", "spec.minReplicaCount")
    assert "never wakes up" in w.message and "vllm:num_requests_waiting" in w.message
    assert "inference_extension_flow_control_queue_size" in w.hint and "minReplicaCount: 1" in w.hint
    unset = SCALED.replace("{min}", "").replace("{query}", "sum(vllm:num_requests_running)")
    assert len(_warnings(_docs(SCENARIO, unset))) == 1  # KEDA's default minReplicaCount is 0
    ok = SCALED.replace("{min}", "minReplicaCount: 0\n  ").replace(
        "{query}", "'sum(inference_extension_flow_control_queue_size) + (sum(vllm:num_requests_waiting) or vector(0))'")
    assert not _warnings(_docs(SCENARIO, ok))
    one = SCALED.replace("{min}", "minReplicaCount: 1\n  ").replace("{query}", "sum(vllm:num_requests_waiting)")
    assert not _warnings(_docs(SCENARIO, one))


# ------------------------------------------------------------------------------------------------- DRA driver
DEVICE_CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.nvidia.com"'}
"""
DRA_POOL = """apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: dra}
spec:
  machineType: a3-highgpu-8g
  nodeCount: 1
  zones: [us-central1-a]
  labels: {gke-no-default-nvidia-gpu-device-plugin: "true"}
  accelerators: [{type: nvidia-h100-80gb, count: 8}]
"""


def test_device_class_for_a_driver_no_pool_runs() -> None:
    ws = _warnings(_docs(SCENARIO, GPU_POOL.replace("{extra}", ""), DEVICE_CLASS))
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("DeviceClass/gpu", "spec.selectors[0].cel.expression")
    assert "selects driver gpu.nvidia.com, which no node pool runs" in w.message
    assert "cannot allocate all claims" in w.message
    assert 'gke-no-default-nvidia-gpu-device-plugin: "true"' in w.hint
    assert not [w for w in _warnings(_docs(SCENARIO, DRA_POOL, DEVICE_CLASS)) if w.obj == "DeviceClass/gpu"]
    other = DEVICE_CLASS.replace("gpu.nvidia.com", "tpu.google.com")
    assert "tpu.google.com" in _warnings(_docs(SCENARIO, DRA_POOL, other))[0].message


# ---------------------------------------------------------------------------------------------- GPU toleration
CLAIM_POD = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu}
---
apiVersion: v1
kind: Pod
metadata:
  name: dra-pod
  namespace: default
  annotations: {kubetwin.io/duration: 10m}
spec:
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: gpu}]}
{tolerations}"""


def test_dra_gpu_pod_without_the_gpu_taint_toleration() -> None:
    text = _docs(SCENARIO, DRA_POOL, DEVICE_CLASS, CLAIM_POD.replace("{tolerations}", ""))
    ws = _warnings(text)
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("Pod/default/dra-pod", "spec.tolerations")
    assert "nvidia.com/gpu=present:NoSchedule" in w.message and "no admission adds it" in w.message
    assert w.hint == "add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"
    tol = "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
    assert not _warnings(_docs(SCENARIO, DRA_POOL, DEVICE_CLASS, CLAIM_POD.replace("{tolerations}", tol)))


def test_dra_gpu_pod_without_toleration_stays_pending_in_the_run(tmp_path: Path) -> None:
    r = _run(tmp_path, _docs(SCENARIO, DRA_POOL, DEVICE_CLASS, CLAIM_POD.replace("{tolerations}", "")))
    pod = r.last("Pod", prefix="dra-pod")
    assert pod["status"]["phase"] == "Pending"
    assert "untolerated taint {nvidia.com/gpu: present}" in condition(pod, "PodScheduled")["message"]


def test_gpu_request_gets_the_toleration_from_admission_so_no_warning() -> None:
    pod = _job('{cpu: "1"}').replace("requests: {cpu: \"1\"}", 'limits: {nvidia.com/gpu: "1"}')
    assert not _warnings(_docs(SCENARIO, GPU_POOL.replace("{extra}", ""), pod.replace(
        "  labels: {kueue.x-k8s.io/queue-name: main}\n", "")))


# ---------------------------------------------------------------------------------------------- driver install
MANUAL_POOL = GPU_POOL.replace("{extra}", ", gpuDriverInstallation: INSTALLATION_DISABLED")
GPU_POD = """apiVersion: v1
kind: Pod
metadata: {name: gpu-pod, namespace: default, annotations: {kubetwin.io/duration: 10m}}
spec:
  restartPolicy: Never
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "1"}}}]
"""


def test_manual_driver_installation_without_the_installer() -> None:
    ws = _warnings(_docs(SCENARIO, MANUAL_POOL))
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("NodePool/l4", "spec.accelerators[0].gpuDriverInstallation")
    assert "no nvidia-driver-installer DaemonSet" in w.message and "advertise no nvidia.com/gpu" in w.message
    assert "nvidia-driver-installer/cos/daemonset-preloaded.yaml" in w.hint and "DEFAULT" in w.hint


def test_manual_driver_installation_leaves_gpu_pods_pending_in_the_run(tmp_path: Path) -> None:
    r = _run(tmp_path, _docs(SCENARIO, MANUAL_POOL, GPU_POD))
    node = r.last("Node", prefix="")
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    assert r.last("Pod", prefix="gpu-pod")["status"]["phase"] == "Pending"


# ------------------------------------------------------------------------------------------------ TPU chips
TPU = """apiVersion: kubetwin.io/v1alpha1
kind: NodePool
metadata: {name: v5e}
spec:
  machineType: ct5lp-hightpu-4t
  nodeCount: 4
  zones: [us-central1-a]
  placementPolicy: {tpuTopology: 4x4}
---
apiVersion: batch/v1
kind: Job
metadata: {name: tpu-job, namespace: default}
spec:
  parallelism: 4
  completions: 4
  completionMode: Indexed
  template:
    metadata: {annotations: {kubetwin.io/duration: 10m}}
    spec:
      restartPolicy: Never
      nodeSelector: {cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice, cloud.google.com/gke-tpu-topology: 4x4}
      containers:
      - name: c
        image: jax
        resources: {limits: {google.com/tpu: "{chips}"}}
"""


def test_multi_host_tpu_pod_must_request_all_the_hosts_chips() -> None:
    ws = _warnings(_docs(SCENARIO, TPU.replace("{chips}", "1")))
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("Job/default/tpu-job", "spec.template.spec.containers")
    assert "must consume all chips of its host (4)" in w.message and "requests 1 google.com/tpu" in w.message
    assert w.hint.startswith("request google.com/tpu: 4 per pod")
    assert not _warnings(_docs(SCENARIO, TPU.replace("{chips}", "4")))
    assert not _warnings(_docs(SCENARIO, TPU.replace("{chips}", "4e0")))  # a quantity, not only digits


def test_cli_validate_counts_warnings_and_exits_zero(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(_docs(SCENARIO, CPU_POOL, _kueue(selector=""), _job()))
    res = CliRunner().invoke(app, ["validate", str(f)])
    assert res.exit_code == 0, res.output
    assert "warning: ClusterQueue/team: spec.namespaceSelector:" in res.output and "1 warnings" in res.output


INSTALLER = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-driver-installer, namespace: kube-system}
spec:
  selector: {matchLabels: {k8s-app: nvidia-driver-installer}}
  template:
    metadata: {labels: {k8s-app: nvidia-driver-installer}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: pause, image: gcr.io/google-containers/pause:2.0}]
"""


def test_manual_driver_installation_with_the_installer_gets_gpus_in_the_run(tmp_path: Path) -> None:
    """With the installer DaemonSet applied, the nodes get the driver (after driverInstallDelay) and GPUs."""
    text = _docs(SCENARIO, MANUAL_POOL, INSTALLER, GPU_POD)
    assert not _warnings(text)
    r = _run(tmp_path, text)
    assert r.last("Node", prefix="")["status"]["allocatable"].get("nvidia.com/gpu") == "1"
    assert r.last("Pod", prefix="gpu-pod")["status"]["phase"] == "Succeeded"


def test_installer_applied_later_installs_on_the_waiting_nodes(tmp_path: Path) -> None:
    late = INSTALLER.replace("namespace: kube-system}", "namespace: kube-system, annotations: "
                             "{kubetwin.io/create-at: 20m}}")
    r = _run(tmp_path, _docs(SCENARIO, MANUAL_POOL, late))
    gpu_at = [t for t, _, _, o in r.history if o["kind"] == "Node"
              and o["status"]["allocatable"].get("nvidia.com/gpu") == "1"]
    assert gpu_at and gpu_at[0] == 1200.0  # driverInstallDelay 0s after the DaemonSet appears


def test_run_prints_the_pitfall_warning_and_keeps_it_in_the_summary(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(_docs(SCENARIO, CPU_POOL, _kueue(selector=""), _job()))
    res = CliRunner().invoke(app, ["run", str(f), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "warning: ClusterQueue/team: spec.namespaceSelector:" in res.output
    import json

    notes = json.loads((tmp_path / "out" / "summary.json").read_text())["notices"]
    assert any("warning: ClusterQueue/team" in n for n in notes)


def test_scale_to_zero_on_the_pods_own_metric_never_wakes_in_the_run() -> None:
    """The same pool and trace that wake in test_serving_autoscale, with the demand read only from vLLM's series:
    validate warns, and in the run KEDA never activates (the requests arrive, no replica ever starts)."""

    from kubetwin.api.loader import Manifest

    so = (scaled_object("srv", "srv").replicas(0, 2).spec(pollingInterval=15)
          .prometheus('sum(vllm:num_requests_waiting{namespace="default"})', threshold=4, name="waiting",
                      server="http://prometheus:9090").obj())
    objs = [serving_scenario("10m").obj(), h100_pool(1).obj(), vllm("srv", 0).obj(), inference_pool().obj(), so,
            trace().rate(0.5).duration("1m").start("2m").prompt(500).output(50).obj()]
    ws = [d for d in validate([Manifest(o, "<object>", 0) for o in objs]) if d.severity == "warning"]
    assert [(d.obj, d.field) for d in ws] == [("ScaledObject/default/srv", "spec.minReplicaCount")]
    r = run(objects=objs)
    replicas = {int(o["spec"].get("replicas", 1)) for _, _, _, o in r.history if o["kind"] == "Deployment"}
    assert replicas == {0}
    assert not [o for _, _, _, o in r.history if o["kind"] == "Pod"]
    assert not [o for _, _, _, o in r.history if o["kind"] == "Event" and o["reason"] == "KEDAScaleTargetActivated"]


# ------------------------------------------------------------------------------------------ TAS topology levels
TAS_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kueue-tas-two-blocks.yaml"


def _tas_without_block_labels() -> str:
    """examples/kueue-tas-two-blocks.yaml as GKE's TAS guide would have it written: the pools without the
    gce-topology-block label GKE itself puts on A3 Mega nodes."""
    text = TAS_EXAMPLE.read_text()
    for block in ("block-a", "block-b"):
        text = text.replace(f"  labels:\n    cloud.google.com/gce-topology-block: {block}\n", "")
    assert "gce-topology-block: block" not in text
    return text


def test_topology_level_no_node_carries_warns_with_the_fix() -> None:
    ws = _warnings(_tas_without_block_labels())
    assert len(ws) == 1
    w = ws[0]
    assert (w.obj, w.field) == ("ResourceFlavor/h100-tas", "spec.topologyName")
    assert "cloud.google.com/gce-topology-block that no node of this flavor carries" in w.message
    assert "spec.labels" in w.hint and "cloud.google.com/gce-topology-block: block-a" in w.hint
    assert not _warnings(TAS_EXAMPLE.read_text())  # the example's pools carry it


def test_topology_level_no_node_carries_leaves_the_tas_job_waiting(tmp_path: Path) -> None:
    r = _run(tmp_path, _tas_without_block_labels())
    assert condition(r.last("Workload", prefix="job-spread"), "Admitted")["status"] == "True"
    qr = condition(r.last("Workload", prefix="job-compact"), "QuotaReserved")
    assert qr["status"] == "False"
    assert r.last("Job", name="compact")["spec"]["suspend"] is True

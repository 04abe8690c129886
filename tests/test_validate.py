"""Validation: the seed documents' manifests, and malformed input never reaching the user as a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubetwin.api.loader import Manifest, load_paths, load_text
from kubetwin.cli.main import app
from kubetwin.validation.validate import validate


def _seed_blocks(shared) -> list[str]:
    text = (shared / "seeds" / "002_23896c95ac16712b.txt").read_text()
    return re.findall(r"(apiVersion:.*?)(?=\n\n|\nEOF|\n# |\Z)", text, re.S)


def _diags(text: str) -> list[str]:
    return [d.render() for d in validate(load_text(text, "seed.yaml"))]


def test_seed_job_rejected_with_api_server_messages(shared) -> None:
    job = next(b for b in _seed_blocks(shared) if "kind: Job" in b)
    msgs = _diags(job)
    assert any('spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", '
               '"Never"' in m for m in msgs)
    assert any("Limit must be set for non overcommitable resources" in m for m in msgs)


def test_seed_time_slicing_configmap_flattened(shared) -> None:
    cm = next(b for b in _seed_blocks(shared) if "kind: ConfigMap" in b)
    msgs = _diags(cm)
    assert len(msgs) == 1 and "indentation of this ConfigMap was lost" in msgs[0]
    assert "data.any" in msgs[0]


def test_a_configmap_in_a_group_that_has_none_is_no_such_kind_before_decoding() -> None:
    """The flattened-ConfigMap hint is the core v1 ConfigMap's decoding check (validation/kinds/configmap.py): a
    ConfigMap written in another group is refused first as kubectl's RESTMapper refuses the kind."""
    found = validate(load_text("apiVersion: apps/v1\nkind: ConfigMap\nname: flat\n"))
    assert [(d.field, d.message, d.hint) for d in found] == [
        ("apiVersion", 'no matches for kind "ConfigMap" in version "apps/v1"', "ConfigMap is served in v1: set "
         "apiVersion: v1")]


CORRECTED_SELECTOR = ('device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu" && '
                      'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0')


def test_seed_dra_v1beta1_accepted_with_notice_and_its_selector_explained(shared) -> None:
    """The seed's DeviceClass compiles (dyn typing) but errors on every NVIDIA device at scheduling time:
    validate says so in the scheduler's words and prints the corrected expression (the one in
    ../shared/reference/seed-manifests-corrected.yaml), checked against the driver's devices."""
    dc = next(b for b in _seed_blocks(shared) if "kind: DeviceClass" in b)
    diags = validate(load_text(dc, "seed.yaml"))
    assert [d.severity for d in diags] == ["notice", "warning"]
    assert "not served by default on Kubernetes 1.34" in diags[0].message and "resource.k8s.io/v1" in diags[0].hint
    warn = diags[1]
    assert warn.field == "spec.selectors[0].cel.expression"
    assert ('"class nvidia-gpu: selector #0: CEL runtime error: no such key: quantity"' in warn.message)
    assert "publishes memory as a capacity" in warn.message
    assert warn.hint.startswith(f"write: {CORRECTED_SELECTOR}")
    assert "not nvidia-tesla-a100 (39538Mi < 40Gi)" in warn.hint
    corrected = (shared / "reference" / "seed-manifests-corrected.yaml").read_text()
    assert " ".join(CORRECTED_SELECTOR.split()) in " ".join(corrected.replace(" &&\n", " && ").split())


def test_corrected_seed_dra_accepted(shared) -> None:
    text = (shared / "reference" / "seed-manifests-corrected.yaml").read_text()
    dra = [m for m in load_text(text, "c.yaml") if m.obj["apiVersion"].startswith("resource.k8s.io")]
    assert [m.kind for m in dra] == ["DeviceClass", "ResourceClaim"]
    assert validate(dra) == []


def test_cel_compile_error_rejects_the_object() -> None:
    text = ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\nspec:\n  selectors:\n"
            "  - cel: {expression: 'device.capacity[\"gpu.nvidia.com\"].memory >= quantity(\"40Gi\")'}\n")
    [d] = validate(load_text(text, "c.yaml"))
    assert d.severity == "error" and d.line == 6 and d.field == "spec.selectors[0].cel.expression"
    assert ("compilation failed: ERROR: <input>:1:42: found no matching overload for '_>=_' applied to "
            "'(kubernetes.Quantity, kubernetes.Quantity)'") in d.message
    assert 'compareTo(quantity("40Gi")) >= 0' in d.hint


def test_corrected_seed_job_accepted(shared) -> None:
    text = (shared / "reference" / "seed-manifests-corrected.yaml").read_text()
    job = [m for m in load_text(text, "c.yaml") if m.kind in ("Job", "ConfigMap")]
    namespaces = load_paths([Path(__file__).parent / "data" / "seed-corrected-namespaces.yaml"])
    assert [d for d in validate(namespaces + job) if d.severity == "error"] == []
    # without them, its Job and ConfigMap are in namespaces that do not exist
    assert sorted(d.message for d in validate(job) if d.severity == "error") == [
        'namespaces "gpu-operator" not found', 'namespaces "nlp-team" not found']


def test_unknown_field_named_with_line(tmp_path) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n"
                 "    image: x\n    resourcez: {}\n")
    res = CliRunner().invoke(app, ["validate", str(f)])
    assert res.exit_code == 1
    assert f"{f}:9: error: Pod/p: spec.containers[0].resourcez: strict decoding error: unknown field" in res.output
    assert "Traceback" not in res.output


def test_wrong_type(tmp_path) -> None:
    f = tmp_path / "job.yaml"
    f.write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  parallelism: lots\n"
                 "  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: x}]\n")
    res = CliRunner().invoke(app, ["validate", str(f)])
    assert res.exit_code == 1 and "spec.parallelism" in res.output and ":6:" in res.output


def test_malformed_yaml(tmp_path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n")
    res = CliRunner().invoke(app, ["validate", str(f)])
    assert res.exit_code == 1 and "YAML syntax error" in res.output and "Traceback" not in res.output


def test_missing_file() -> None:
    res = CliRunner().invoke(app, ["run", "/nonexistent/x.yaml"])
    assert res.exit_code == 1 and "no such file or directory" in res.output


def test_nodepool_unknown_field_and_bad_duration(tmp_path) -> None:
    f = tmp_path / "np.yaml"
    f.write_text("apiVersion: kubetwin.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: p\nspec:\n"
                 "  machineType: e2-standard-4\n  nodeCnt: 3\n---\napiVersion: v1\nkind: Pod\nmetadata:\n"
                 "  name: q\n  annotations:\n    kubetwin.io/duration: soon\nspec:\n"
                 "  containers: [{name: c, image: x}]\n")
    res = CliRunner().invoke(app, ["run", str(f)])
    assert res.exit_code == 1
    assert 'spec.nodeCnt: strict decoding error: unknown field "spec.nodeCnt"' in res.output
    assert "invalid duration 'soon'" in res.output


def test_unknown_machine_type_is_a_clear_error(tmp_path) -> None:
    f = tmp_path / "np.yaml"
    f.write_text("apiVersion: kubetwin.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: p\nspec:\n"
                 "  machineType: a3-highgpu-9g\n  nodeCount: 1\n")
    res = CliRunner().invoke(app, ["run", str(f)])
    assert res.exit_code == 1 and "a3-highgpu-9g" in res.output and "Traceback" not in res.output


def test_seed_as_written_example_every_message() -> None:
    """examples/seed-as-written.yaml pins the seed's manifests: 8 errors and the notices, each in its words (the
    Kueue and Inference Extension kinds are checked against their CRDs, kubetwin/api/crd.py; the seed defines no
    Namespace ai, so its valid objects there are refused as the API server's NamespaceLifecycle refuses them)."""
    path = Path(__file__).resolve().parents[1] / "examples" / "seed-as-written.yaml"
    diags = validate(load_paths([path]))
    errors = [(d.line, d.obj, d.field, d.message) for d in diags if d.severity == "error"]
    assert errors == [
        (41, "ConfigMap/<unnamed>", "metadata", "Required value: metadata is empty and 'name', 'namespace', 'any', "
         "'version', 'sharing', 'timeSlicing', 'resources', 'replicas' are top-level keys: the indentation of this "
         "ConfigMap was lost"),
        (74, "InferencePool/llm-pool", "spec.selector.matchLabels.app",
         'strict decoding error: unknown field "spec.selector.matchLabels.app"'),
        (101, "ClusterQueue/gpu-cluster-queue", "spec.resourceGroups[0]",
         'Invalid value: "object": flavors must have the same number of resources as the coveredResources'),
        (122, "LocalQueue/nlp-team/team-nlp-queue", "spec.clusterQueueName",
         'strict decoding error: unknown field "spec.clusterQueueName"'),
        (135, "Job/nlp-team/llama-finetune", "spec.template.spec.restartPolicy",
         'Unsupported value: "Always": supported values: "OnFailure", "Never"'),
        (141, "Job/nlp-team/llama-finetune", "spec.template.spec.containers[0].resources.limits",
         "Required value: Limit must be set for non overcommitable resources"),
        (59, "InferenceModel/ai/llama3-8b", "metadata.namespace", 'namespaces "ai" not found'),
        (150, "ScaledObject/ai/vllm-scaler", "metadata.namespace", 'namespaces "ai" not found'),
    ]
    hints = {d.field: d.hint for d in diags if d.severity == "error"}
    assert hints["spec.clusterQueueName"].startswith("did you mean spec.clusterQueue? rename clusterQueueName")
    assert hints["spec.resourceGroups[0]"].startswith("list every covered resource under each flavor's resources")
    assert "spec.selector is a map of strings" in hints["spec.selector.matchLabels.app"]
    notices = sorted(d.obj for d in diags if d.severity == "notice" and "not simulated yet" not in d.message)
    assert notices == ["ClusterQueue/gpu-cluster-queue", "DeviceClass/nvidia-gpu", "LocalQueue/nlp-team/team-nlp-queue",
                       "ResourceClaim/gpu-claim", "ResourceFlavor/nvidia-a100", "ResourceFlavor/nvidia-h100",
                       "ScaledObject/ai/vllm-scaler"]
    # the seed's KEDA query names a metric vLLM does not export (vllm:num_requests_waiting has a colon)
    keda = next(d for d in diags if d.obj == "ScaledObject/ai/vllm-scaler" and d.severity == "notice")
    assert keda.field == "spec.triggers[0].metadata.query"
    assert "'vllm_num_requests_waiting' is not exported" in keda.message and "never scales" in keda.message
    assert keda.hint == "vLLM exports vllm:num_requests_waiting (with a colon); use sum(vllm:num_requests_waiting)"
    # valid objects of kinds the twin does not simulate (yet) get the "accepted but not simulated" notice
    from kubetwin.api.kinds import is_simulated

    stored = [("InferenceModel/ai/llama3-8b", "inference.networking.x-k8s.io/v1alpha2", "InferenceModel"),
              ("ResourceFlavor/nvidia-a100", "kueue.x-k8s.io/v1beta1", "ResourceFlavor"),
              ("ResourceFlavor/nvidia-h100", "kueue.x-k8s.io/v1beta1", "ResourceFlavor"),
              ("ScaledObject/ai/vllm-scaler", "keda.sh/v1alpha1", "ScaledObject")]
    assert [d.obj for d in diags if "not simulated yet" in d.message] == [
        obj for obj, api_version, kind in stored if not is_simulated(api_version, kind)]
    deprecated = [d.obj for d in diags if d.message == "Warning: This version is deprecated. Use v1beta2 instead."]
    assert deprecated == ["ResourceFlavor/nvidia-a100", "ResourceFlavor/nvidia-h100", "ClusterQueue/gpu-cluster-queue",
                          "LocalQueue/nlp-team/team-nlp-queue"]


def _dra_pool_yaml(extra_label: str = "", accel_extra: str = "") -> str:
    return ("apiVersion: kubetwin.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\nspec:\n"
            "  machineType: a3-highgpu-8g\n  nodeCount: 1\n"
            f"  accelerators: [{{type: nvidia-h100-80gb, count: 8{accel_extra}}}]\n"
            f"  labels: {{gke-no-default-nvidia-gpu-device-plugin: 'true'{extra_label}}}\n")


def test_dra_node_pools_reject_gpu_sharing_and_bad_mig_configs() -> None:
    assert validate(load_text(_dra_pool_yaml(), "p.yaml")) == []
    [d] = validate(load_text(_dra_pool_yaml(accel_extra=", gpuPartitionSize: 1g.10gb"), "p.yaml"))
    assert d.field == "spec.accelerators[0].gpuPartitionSize" and "does not support gpuPartitionSize" in d.message
    [d] = validate(load_text(_dra_pool_yaml(", nvidia.com/mig.config: all-3g.20gb"), "p.yaml"))
    assert d.severity == "error" and "has no MIG profile '3g.20gb'" in d.message
    [d] = validate(load_text(_dra_pool_yaml(", nvidia.com/mig.config: all-3g.40gb"), "p.yaml"))
    assert d.severity == "notice" and "excludes MIG" in d.message


def test_open_gpu_share_annotations_are_checked() -> None:
    pod = """apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    alibabacloud.com/gpu-milli: "{milli}"
    alibabacloud.com/gpu-count: "{count}"
spec:
  containers: [{{name: c, image: x}}]
"""
    assert _diags(pod.format(milli=300, count=1)) == []
    assert _diags(pod.format(milli=1000, count=4)) == []
    bad = _diags(pod.format(milli=1500, count=1))
    assert len(bad) == 1 and 'Invalid value: "1500": must be an integer from 1 to 1000' in bad[0]
    shared = _diags(pod.format(milli=500, count=2))
    assert len(shared) == 1 and "gets exactly one GPU" in shared[0]


POD_HEAD = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
"""


def _errors(text: str) -> list[tuple[str, str]]:
    return [(d.field, d.message) for d in validate(load_text(text, "x.yaml")) if d.severity == "error"]


def test_every_error_of_an_object_is_reported_not_only_the_schemas() -> None:
    """A wrong type in one field and a bad quantity in another: both (issue 35 item 10), each at its own field,
    as the API server's field.ErrorList aggregates them; the Job and a bare Pod alike."""
    job = """apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: default}
spec:
  activeDeadlineSeconds: 1hr
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources:
          requests: {memory: 32GB, cpu: "1"}
"""
    fields = [f for f, _ in _errors(job)]
    assert fields == ["spec.activeDeadlineSeconds", "spec.template.spec.containers[0].resources.requests[memory]"]
    pod = POD_HEAD + """  restartPolicy: Never
  priorityy: 5
  containers:
  - name: c
    image: busybox
    resources: {limits: {nvidia.com/gpu: 1, memory: 2Gi}, requests: {memory: 1Gii}}
"""
    errs = _errors(pod)
    assert [f for f, _ in errs] == ["spec.priorityy", "spec.containers[0].resources.requests[memory]"]
    assert 'unknown field "spec.priorityy"' in errs[0][1] and '"1Gii"' in errs[1][1]


def test_an_error_the_removal_of_a_refused_field_would_cause_is_not_reported() -> None:
    """A container whose name has the wrong type: its list is set aside for the rest of the checks (and with it the
    spec that now lacks its required containers), so neither a spurious "Required value" for them nor anything
    inside them is reported; an invalid label outside the spec still is."""
    pod = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {app: -bad-}}
spec:
  restartPolicy: Never
  containers:
  - name: [c]
    image: busybox
    resources: {requests: {memory: 1Gii}}
"""
    errs = _errors(pod)
    assert [f for f, _ in errs] == ["spec.containers[0].name", "metadata.labels"]


@pytest.mark.parametrize("kind, spec_path", [("Pod", "spec"), ("PodTemplate", "template.spec")])
def test_an_error_below_a_field_another_error_removed_is_still_reported(kind: str, spec_path: str) -> None:
    """A pod spec missing its containers (the prune takes the whole spec) with an unknown field inside it: the walk
    to the unknown field's parent went through the spec already removed (KeyError; found by the mutation fuzzer on
    a PodTemplate). Both errors are reported, no traceback."""
    inner = {"k": [{"k": 1}]}
    obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "t", "namespace": "default"}}
    if kind == "Pod":
        obj["spec"] = inner
    else:
        obj["template"] = {"spec": inner}
    found = {(d.field, d.message.split(":")[0]) for d in validate([Manifest(obj, "x.yaml", 1)])}
    assert found == {(f"{spec_path}.containers", "Required value"), (f"{spec_path}.k", "strict decoding error")}

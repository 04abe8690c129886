"""Kubeflow Trainer v2 (controllers/trainer.py, controllers/trainer_runtime.py, validation/trainer.py): a TrainJob and
its runtime become the JobSet the Trainer builds, under Kueue's TrainJob integration, timed by the training model.

Ported cases name their upstream file and case (kubeflow/trainer @8c0f5059):
pkg/runtime/framework/plugins/torch/torch_test.go, plugins/jobset/jobset_test.go,
pkg/runtime/core/trainingruntime_test.go, pkg/webhooks/trainingruntime_webhook_test.go. Upstream compares its
runtime.Info / apply configurations; the twin's builder returns the JobSet, so each case asserts the same values
on it (env compared by name: upstream's comparisons do not fix where the runtime's own variables land).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from conftest import condition, final_objects

from kubetwin.api.loader import load_text
from kubetwin.controllers import trainer_runtime as R
from kubetwin.runner import run
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parent.parent
NODE_RANK = {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": R.COMPLETION_INDEX_PATH}}}


def runtime(ml: dict | None = None, rjobs: list[dict] | None = None, kind: str = "TrainingRuntime") -> dict:
    """A runtime whose template has one `node` Job labelled as the trainer (utiltesting's runtime wrapper)."""
    return {"apiVersion": R.API_VERSION, "kind": kind, "metadata": {"name": "test-runtime", "namespace": "default"},
            "spec": {**({"mlPolicy": ml} if ml is not None else {}),
                     "template": {"spec": {"replicatedJobs": rjobs if rjobs is not None else [node_job()]}}}}


def node_job(containers: list[dict] | None = None, name: str = R.NODE, ancestor: str = R.TRAINER,
             parallelism: int | None = None, init: list[dict] | None = None) -> dict:
    pod: dict = {"containers": containers if containers is not None else [{"name": R.NODE, "image": "test:runtime"}]}
    if init:
        pod["initContainers"] = init
    job: dict = {"template": {"spec": pod}}
    if parallelism is not None:
        job["parallelism"] = parallelism
    return {"name": name, "template": {"metadata": {"labels": {R.ANCESTOR: ancestor}}, "spec": job}}


def trainjob(name: str = "test-job", trainer: dict | None = None, **spec: object) -> dict:
    body: dict = {"runtimeRef": {"name": "test-runtime", "kind": "TrainingRuntime"}, **spec}
    if trainer is not None:
        body["trainer"] = trainer
    return {"apiVersion": R.API_VERSION, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "default", "uid": "uid"}, "spec": body}


def rjob(js: dict, name: str = R.NODE) -> dict:
    return next(rj for rj in js["spec"]["replicatedJobs"] if rj["name"] == name)


def container(js: dict, job: str = R.NODE, name: str = R.NODE) -> dict:
    return next(c for c in rjob(js, job)["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def env(js: dict, job: str = R.NODE, name: str = R.NODE) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(js, job, name).get("env") or []}


TORCH = {"torch": {}}

# torch_test.go TestTorch: (case, TrainJob name, trainer, PET_NNODES, PET_NPROC_PER_NODE)
TORCH_CASES = [
    ("trainJob numNodes is respected rather than mlPolicy one", "trainJob", {"numNodes": 2}, "2", "1"),
    ("nproc_per_node=auto with CPU limit", "test-job", {"resourcesPerNode": {"requests": {"cpu": "4"}}}, "1", "4"),
    ("nproc_per_node=auto with no CPU resources", "test-job", {"resourcesPerNode": {}}, "1", "1"),
    ("nproc_per_node=auto with low CPU limit", "test-job", {"resourcesPerNode": {"requests": {"cpu": "2"}}}, "1", "2"),
    ("nproc_per_node=auto with CPU request but no limit", "test-job",
     {"resourcesPerNode": {"requests": {"cpu": "3"}}}, "1", "3"),
    ("nproc_per_node=auto with millicore CPU limit", "test-job",
     {"resourcesPerNode": {"requests": {"cpu": "2.5"}}}, "1", "3"),
    ("nproc_per_node=auto with fractional CPU limit", "test-job",
     {"resourcesPerNode": {"requests": {"cpu": "0.7"}}}, "1", "1"),
    ("nproc_per_node=auto with GPU request should remain auto", "test-job",
     {"resourcesPerNode": {"requests": {"example.com/gpu": "2"}}}, "1", "auto"),
    ("explicitly set nproc_per_node should be preserved", "test-job",
     {"numProcPerNode": 3, "resourcesPerNode": {"requests": {"cpu": "8"}}}, "1", "3"),
    ("nproc_per_node=auto with millicore CPU limit in m format", "test-job",
     {"resourcesPerNode": {"requests": {"cpu": "2500m"}}}, "1", "3"),
    ("nproc_per_node=cpu with CPU limit", "cpu-job", {"resourcesPerNode": {"requests": {"cpu": "4"}}}, "1", "4"),
    ("nproc_per_node=auto resolves to GPU count when GPU resources present", "cpu-gpu-job",
     {"resourcesPerNode": {"requests": {"cpu": "6", "example.com/gpu": "2"}}}, "1", "auto"),
    ("nproc_per_node=cpu with fractional CPU", "cpu-frac-job",
     {"resourcesPerNode": {"requests": {"cpu": "3.7"}}}, "1", "4"),
    ("multi-node multi-GPU training with complete info", "gpu-job",
     {"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "8", "memory": "16Gi", "example.com/gpu": "4"}}},
     "4", "auto"),
]


@pytest.mark.parametrize(("case", "name", "trainer", "nnodes", "nproc"), TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_torch_plugin_env(case: str, name: str, trainer: dict, nnodes: str, nproc: str) -> None:
    """torch_test.go TestTorch (each case by its name): PET_NNODES from the TrainJob's numNodes, PET_NPROC_PER_NODE
    "auto" on a GPU node else the CPU count rounded up, the master `<name>-node-0-0.<name>`:29500, the port."""
    js = R.build_jobset(trainjob(name, trainer), runtime(TORCH))
    got = env(js)
    assert got == {"PET_NNODES": nnodes, "PET_NPROC_PER_NODE": nproc, "PET_NODE_RANK": NODE_RANK["valueFrom"],
                   "PET_MASTER_ADDR": f"{name}-node-0-0.{name}", "PET_MASTER_PORT": "29500"}, case
    assert [e["name"] for e in container(js)["env"]] == list(R.TORCH_ENVS)
    assert container(js)["ports"] == [{"containerPort": 29500}]
    assert rjob(js)["template"]["spec"]["parallelism"] == int(nnodes)


def test_torch_env_injection_into_an_init_container() -> None:
    """torch_test.go "envInjection with init container": the targets get the PET_* and master variables too."""
    ml = {"torch": {"envInjection": {"targets": [{"jobName": R.NODE, "containerNames": ["preflight"]}]}}}
    rt = runtime(ml, [node_job(init=[{"name": "preflight", "image": "busybox"}])])
    js = R.build_jobset(trainjob(trainer={"numNodes": 2}), rt)
    init = rjob(js)["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert {e["name"] for e in init["env"]} == set(R.TORCH_ENVS)
    assert {e["name"]: e.get("value") for e in init["env"]}["PET_NNODES"] == "2"


def test_torch_env_injection_into_a_sidecar_and_not_into_unlisted_containers() -> None:
    """torch_test.go "envInjection with sidecar (regular container)" and "envInjection with multiple targets in
    different jobs leaves unlisted init container unchanged": a listed regular container gets the variables, an
    unlisted init container keeps its own env."""
    ml = {"torch": {"envInjection": {"targets": [{"jobName": R.NODE, "containerNames": ["sidecar"]},
                                                 {"jobName": "aux", "containerNames": ["aux-init"]}]}}}
    node = node_job([{"name": R.NODE, "image": "x"}, {"name": "sidecar", "image": "s"}],
                    init=[{"name": "unlisted", "image": "u", "env": [{"name": "KEEP", "value": "1"}]}])
    aux = node_job([{"name": "aux", "image": "a"}], name="aux", ancestor="other", init=[{"name": "aux-init",
                                                                                          "image": "i"}])
    js = R.build_jobset(trainjob(trainer={"numNodes": 3}), runtime(ml, [node, aux]))
    assert env(js, R.NODE, "sidecar")["PET_NNODES"] == "3"
    assert env(js, R.NODE, "sidecar")["PET_MASTER_ADDR"] == "test-job-node-0-0.test-job"
    init = rjob(js)["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert init["env"] == [{"name": "KEEP", "value": "1"}]
    aux_init = rjob(js, "aux")["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert {e["name"] for e in aux_init["env"]} == set(R.TORCH_ENVS)


def _denied(tj: dict, rt: dict) -> list[str]:
    text = yaml.safe_dump_all([rt, tj])
    return [d.message for d in validate(load_text(text, "t.yaml")) if d.severity == "error"]


def test_torch_validate_envinjection_target_container_does_not_exist() -> None:
    """torch_test.go TestValidate "envInjection target container does not exist"."""
    ml = {"torch": {"envInjection": {"targets": [{"jobName": R.NODE, "containerNames": ["missing"]}]}}}
    msgs = _denied(trainjob(), runtime(ml))
    assert len(msgs) == 1 and msgs[0].endswith(
        'envInjection target podSet "node" container "missing" not found in runtime template')


def test_torch_validate_reserved_environment_variable_present() -> None:
    """torch_test.go TestValidate "reserved environment variable present": spec.trainer.env refused."""
    tj = trainjob(trainer={"env": [{"name": "test", "value": "value"},
                                   {"name": "PET_NPROC_PER_NODE", "value": "value"}]})
    msgs = _denied(tj, runtime(TORCH))
    assert len(msgs) == 1
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.trainer.env' \
        in msgs[0]
    assert msgs[0].endswith("must not have reserved envs, invalid envs configured: [PET_NPROC_PER_NODE]")


def test_torch_validate_valid_environment_variable_present() -> None:
    """torch_test.go TestValidate "valid environment variable present"."""
    assert _denied(trainjob(trainer={"env": [{"name": "test", "value": "value"}]}), runtime(TORCH)) == []


def initializer_runtime(step: str, with_container: bool = True, with_mount: bool = True) -> dict:
    c: dict = {"name": step if with_container else "other", "image": "init"}
    if with_mount:
        c["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    # without its container the runtime webhook would refuse an ancestor-labelled Job: the Job is left unlabelled
    return runtime(TORCH, [node_job([c], name=step, ancestor=step if with_container else "none"), node_job()])


@pytest.mark.parametrize(("case", "rt", "key", "message"), [
    ("must have dataset initializer job when trainJob is configured with input datasetConfig",
     runtime(TORCH), "dataset", "must have dataset-initializer job when trainJob is configured with input "
     "datasetConfig"),
    ("must have model initializer job when trainJob is configured with input modelConfig",
     runtime(TORCH), "model", "must have model-initializer job when trainJob is configured with input modelConfig"),
    ("must have container with name - model initializer in the model initializer job",
     initializer_runtime(R.MODEL_INITIALIZER, with_container=False), "model",
     "must have container with name - model-initializer in the model-initializer job"),
    ("must have volumeMount with name - initializer in the dataset initializer container",
     initializer_runtime(R.DATASET_INITIALIZER, with_mount=False), "dataset",
     "must have volumeMount with name - initializer in container dataset-initializer of the dataset-initializer "
     "job"),
    ("valid dataset initializer with volumeClaimPolicies and volumeMount passes",
     initializer_runtime(R.DATASET_INITIALIZER), "dataset", None),
])
def test_jobset_validate_initializers(case: str, rt: dict, key: str, message: str | None) -> None:
    """jobset_test.go TestValidate (each case by its name)."""
    tj = trainjob(initializer={key: {"storageUri": "hf://dataset"}})
    msgs = _denied(tj, rt)
    if message is None:
        assert msgs == [], case
    else:
        assert len(msgs) == 1 and msgs[0].endswith(message), case
        assert "spec.runtimeRef: Invalid value" in msgs[0]


def _patch(job: str, pod: dict, manager: str = "test.io/manager") -> dict:
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": job, "template": {"spec": {"template": {"spec": pod}}}}]}}}}


@pytest.mark.parametrize(("case", "patch", "message"), [
    ("runtimePatches contain invalid replicated job", _patch("invalid", {"nodeSelector": {"a": "b"}}),
     "must not have replicated job that doesn't exist in the runtime job template"),
    ("runtimePatches contain invalid initContainer", _patch(R.NODE, {"initContainers": [{"name": "invalid"}]}),
     "must not have initContainer that doesn't exist in the runtime job node"),
    ("runtimePatches contain invalid container", _patch(R.NODE, {"containers": [{"name": "invalid"}]}),
     "must not have container that doesn't exist in the runtime job node"),
    ("runtimePatches contain envs for reserved container",
     _patch(R.NODE, {"containers": [{"name": R.NODE, "env": [{"name": "A", "value": "b"}]}]}),
     "must not have envs for the dataset-initializer, model-initializer, node containers"),
])
def test_jobset_validate_runtime_patches(case: str, patch: dict, message: str) -> None:
    """jobset_test.go TestValidate (each case by its name)."""
    msgs = _denied(trainjob(runtimePatches=[patch]), runtime(TORCH))
    assert len(msgs) == 1 and msgs[0].endswith(message), case


def test_jobset_numnodes_respected_rather_than_parallelism() -> None:
    """jobset_test.go TestJobSet "trainer numNodes is respected rather than parallelism when replicatedJob name is
    node": the trainer Job's parallelism and completions become numNodes; other Jobs keep their own."""
    rt = runtime({"numNodes": 1, "torch": {}}, [node_job(parallelism=1), node_job(name="aux", ancestor="other",
                                                                                  parallelism=3)])
    js = R.build_jobset(trainjob(trainer={"numNodes": 2}), rt)
    assert (rjob(js)["template"]["spec"]["parallelism"], rjob(js)["template"]["spec"]["completions"]) == (2, 2)
    assert rjob(js, "aux")["template"]["spec"]["parallelism"] == 3
    assert rjob(js)["replicas"] == 1


def test_runtime_patches_targeting_the_same_job_with_different_values() -> None:
    """trainingruntime_test.go "succeeded to build JobSet with TrainJob's RuntimePatches targeting the same job with
    different values": the later patch's nodeSelector wins; the owner reference is the TrainJob's."""
    tj = trainjob(runtimePatches=[
        _patch(R.NODE, {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}, "manager-1"),
        _patch(R.NODE, {"nodeSelector": {"node.kubernetes.io/instance-type": "p5en.48xlarge"}}, "manager-2")])
    js = R.build_jobset(tj, runtime())
    assert rjob(js)["template"]["spec"]["template"]["spec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "p5en.48xlarge"}
    assert js["metadata"]["ownerReferences"] == [{"apiVersion": R.API_VERSION, "kind": "TrainJob",
                                                  "name": "test-job", "uid": "uid", "controller": True,
                                                  "blockOwnerDeletion": True}]


def test_runtime_patches_labels_and_annotations_override() -> None:
    """trainingruntime_test.go "succeeded to build JobSet with labels and annotations overrides from the TrainJob's
    RuntimePatches": the template's metadata, then the patches', are the JobSet's."""
    rt = runtime()
    rt["spec"]["template"]["metadata"] = {"labels": {"a": "runtime", "b": "runtime"}, "annotations": {"x": "1"}}
    patch = {"manager": "test.io/m", "trainingRuntimeSpec": {"template": {"metadata": {
        "labels": {"b": "patch"}, "annotations": {"y": "2"}}}}}
    js = R.build_jobset(trainjob(runtimePatches=[patch]), rt)
    assert js["metadata"]["labels"] == {"a": "runtime", "b": "patch"}
    assert js["metadata"]["annotations"] == {"x": "1", "y": "2"}


def test_merged_resources_per_node_keep_runtime_resources() -> None:
    """trainingruntime_test.go "merged resourcesPerNode keeps runtime resources when trainjob sets gpu only"."""
    res = {"requests": {"cpu": "1", "memory": "4Gi"}}
    rt = runtime({"numNodes": 1}, [node_job([{"name": R.NODE, "image": "test:runtime", "resources": res}])])
    js = R.build_jobset(trainjob(trainer={"numNodes": 1, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}),
                        rt)
    assert container(js)["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"},
                                          "limits": {"nvidia.com/gpu": "4"}}


def test_torch_values_from_the_runtime_and_envs() -> None:
    """trainingruntime_test.go "succeeded to build JobSet with Torch values from the Runtime and envs.": the
    TrainJob's env overrides the runtime's, the runtime's numNodes (100) applies, image/command/args from the
    TrainJob."""
    ctr = {"name": R.NODE, "image": "test:runtime", "command": ["runtime"], "args": ["runtime"],
           "resources": {"requests": {"cpu": "1"}},
           "env": [{"name": "TRAIN_JOB", "value": "original"}, {"name": "RUNTIME", "value": "test:runtime"}]}
    rt = runtime({"numNodes": 100, "torch": {}}, [node_job([ctr])])
    tj = trainjob(trainer={"image": "test:trainjob", "command": ["trainjob"], "args": ["trainjob"],
                           "resourcesPerNode": {"requests": {"cpu": "1"}},
                           "env": [{"name": "TRAIN_JOB", "value": "override"},
                                   {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"}]})
    js = R.build_jobset(tj, rt)
    c = container(js)
    assert (c["image"], c["command"], c["args"]) == ("test:trainjob", ["trainjob"], ["trainjob"])
    assert env(js) == {"TRAIN_JOB": "override", "RUNTIME": "test:runtime", "TRAIN_JOB_CUSTOM": "test:trainjob",
                       "PET_NNODES": "100", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": NODE_RANK["valueFrom"],
                       "PET_MASTER_ADDR": "test-job-node-0-0.test-job", "PET_MASTER_PORT": "29500"}
    assert rjob(js)["template"]["spec"]["parallelism"] == 100


def test_dataset_and_model_initializer_from_the_trainjob() -> None:
    """trainingruntime_test.go "succeeded to build JobSet with dataset and model initializer from the TrainJob.":
    STORAGE_URI, the TrainJob's env and secret on the initializer containers, one replica each."""
    rt = runtime(TORCH, [node_job([{"name": s, "image": "init"}], name=s, ancestor=s)
                         for s in (R.DATASET_INITIALIZER, R.MODEL_INITIALIZER)] + [node_job()])
    tj = trainjob(initializer={
        "dataset": {"storageUri": "hf://trainjob-dataset", "env": [{"name": "TRAIN_JOB", "value": "value"}],
                    "secretRef": {"name": "trainjob-secret-dataset"}},
        "model": {"storageUri": "hf://trainjob-model", "secretRef": {"name": "trainjob-secret-model"}}})
    js = R.build_jobset(tj, rt)
    assert env(js, R.DATASET_INITIALIZER, R.DATASET_INITIALIZER) == {"STORAGE_URI": "hf://trainjob-dataset",
                                                                    "TRAIN_JOB": "value"}
    assert container(js, R.MODEL_INITIALIZER, R.MODEL_INITIALIZER)["envFrom"] == [
        {"secretRef": {"name": "trainjob-secret-model"}}]
    assert [rj["replicas"] for rj in js["spec"]["replicatedJobs"]] == [1, 1, 1]


def test_runtime_webhook_refuses_ancestor_replicas_and_missing_container() -> None:
    """trainingruntime_webhook_test.go: an ancestor Job with replicas 2 ("always must be 1") and a trainer Job
    without the `node` container ("must contain the required container for the ancestor: trainer")."""
    rt = runtime(TORCH, [node_job([{"name": "trainer", "image": "x"}])], kind="ClusterTrainingRuntime")
    rt["metadata"].pop("namespace")
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    msgs = [d.message for d in validate(load_text(yaml.safe_dump(rt), "rt.yaml")) if d.severity == "error"]
    assert len(msgs) == 2
    assert msgs[0].endswith("spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1")
    assert msgs[1].endswith("must contain the required container for the ancestor: trainer")


def test_trainjob_refused_when_its_runtime_is_missing_and_by_the_crd() -> None:
    """(cluster)trainingruntime.go ValidateObjects' refusal, with file:line and field path; the CRD's own rules
    (numProcPerNode >= 1, an RFC 1035 name)."""
    text = yaml.safe_dump_all([
        {"apiVersion": R.API_VERSION, "kind": "TrainJob", "metadata": {"name": "tj"},
         "spec": {"runtimeRef": {"name": "nope"}}},
        {"apiVersion": R.API_VERSION, "kind": "TrainJob", "metadata": {"name": "tj2"},
         "spec": {"runtimeRef": {"name": "nope"}, "trainer": {"numProcPerNode": 0}}}])
    out = [d for d in validate(load_text(text, "tj.yaml")) if d.severity == "error"]
    out.sort(key=lambda d: d.line)
    assert [(d.line, d.field) for d in out] == [(7, "spec.runtimeRef"), (17, "spec.trainer.numProcPerNode")]
    assert out[0].message.endswith('clustertrainingruntimes.trainer.kubeflow.org "nope" not found: specified '
                                   "clusterTrainingRuntime must be created before the TrainJob is created")
    assert "numProcPerNode must be greater than or equal to 1" in out[1].message


def test_trainjob_refused_for_an_unsupported_runtime_kind() -> None:
    """trainjob_webhook.go ValidateCreate: a runtimeRef whose kind and group name no runtime the Trainer registers
    ("unsupported runtime: <Kind>.<group>")."""
    tj = trainjob()
    tj["spec"]["runtimeRef"] = {"name": "x", "kind": "JobSetRuntime"}
    out = [d for d in validate(load_text(yaml.safe_dump(tj), "tj.yaml")) if d.severity == "error"]
    assert [(d.field, d.message.split("denied the request: ")[1]) for d in out] == [
        ("spec.runtimeRef.kind", "unsupported runtime: JobSetRuntime.trainer.kubeflow.org")]


def test_unmodelled_parts_are_notices() -> None:
    """An MPI runtime's launcher and a coscheduling PodGroup are said, not silently dropped."""
    rt = runtime({"numNodes": 1, "mpi": {}}, [node_job()])
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {}}
    notes = [d.message for d in validate(load_text(yaml.safe_dump_all([rt, trainjob()]), "t.yaml"))
             if d.severity == "notice"]
    assert any("mpi policy's launcher" in n for n in notes)
    assert any("podGroupPolicy: no PodGroup is created" in n for n in notes)
    js = R.build_jobset(trainjob(), rt)
    assert rjob(js)["template"]["spec"]["template"]["metadata"]["labels"] == {R.POD_GROUP_LABEL: "test-job"}


def test_status_from_the_jobset() -> None:
    """plugins/jobset Status: Completed -> Complete with the JobSet's reason and message, replicatedJobsStatus ->
    jobsStatus; trainjob_controller.go setSuspendedCondition: Suspended True, then False "Resumed"."""
    tj = trainjob(suspend=True)
    st = R.trainjob_status(tj, None, "t0")
    assert condition({"status": st}, "Suspended") == {"type": "Suspended", "status": "True", "reason": "Suspended",
                                                      "message": "TrainJob is suspended", "lastTransitionTime": "t0"}
    js = {"status": {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                     "message": "jobset completed successfully", "lastTransitionTime": "t2"}],
                     "replicatedJobsStatus": [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0,
                                               "active": 0, "suspended": 0}]}}
    st = R.trainjob_status({**tj, "spec": {**tj["spec"], "suspend": False}, "status": st}, js, "t1")
    assert condition({"status": st}, "Suspended")["reason"] == "Resumed"
    assert condition({"status": st}, "Complete")["message"] == "jobset completed successfully"
    assert st["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0,
                                 "suspended": 0}]


def _example(steps: str | None = None) -> list[dict]:
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "trainjob-kueue.yaml").read_text()) if d]
    return copy.deepcopy(docs)


def test_example_trainjob_under_kueue_runs_to_completion() -> None:
    """examples/trainjob-kueue.yaml: Kueue suspends the TrainJob, admits it and writes the flavor's node labels
    into its runtime patch; the Trainer's JobSet (owned by the TrainJob, no queue label of its own) runs two pods
    with the torch plugin's env on the pool; the step-time model times them from the TrainJob's annotations; the
    JobSet's completion makes the TrainJob Complete and finishes the Workload."""
    result = run(objects=_example())
    tj = final_objects(result, "TrainJob")["llama-8b-ft"]
    js = final_objects(result, "JobSet")["llama-8b-ft"]
    wl = next(iter(final_objects(result, "Workload").values()))
    patch = next(p for p in tj["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager")
    assert patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "a3-high"}
    assert js["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert "kueue.x-k8s.io/queue-name" not in (js["metadata"].get("labels") or {})
    assert wl["spec"]["podSets"][0]["count"] == 2 and wl["metadata"]["name"].startswith("trainjob-llama-8b-ft-")
    pods = [p for p in final_objects(result, "Pod").values()
            if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == "llama-8b-ft"]
    assert len(pods) == 2 and {p["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"] for p in pods} == {
        "a3-high"}
    assert {p["spec"]["nodeName"] for p in pods} == {n for n in final_objects(result, "Node")}
    penv = {e["name"]: e.get("value") for e in pods[0]["spec"]["containers"][0]["env"]}
    assert penv["PET_NNODES"] == "2" and penv["PET_MASTER_ADDR"] == "llama-8b-ft-node-0-0.llama-8b-ft"
    assert condition(tj, "Complete")["status"] == "True"
    assert condition(tj, "Suspended")["reason"] == "Resumed"
    assert condition(wl, "Finished")["reason"] == "Succeeded"
    training = result.summary["training"]["default/llama-8b-ft"] if "training" in result.summary else None
    assert training is None or training["step_s"] > 0


def _cpu_cluster() -> list[dict]:
    return [{"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
             "spec": {"duration": "2h", "seed": 1, "report": ["summary"]}},
            {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "cpu"},
             "spec": {"machineType": "n2-standard-32", "nodeCount": 2, "zones": ["us-central1-a"],
                      "bootDelay": "0s"}}]


def _cpu_runtime() -> dict:
    rt = runtime(TORCH, [node_job([{"name": R.NODE, "image": "pytorch/pytorch", "command": ["python", "t.py"]}])],
                 kind="ClusterTrainingRuntime")
    rt["metadata"] = {"name": "test-runtime"}
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {
        "annotations": {"kubetwin.io/duration": "30m"}}
    return rt


def test_active_deadline_fails_the_trainjob_and_deletes_its_jobset() -> None:
    """trainjob_controller.go reconcileDeadline: past activeDeadlineSeconds (from creation) the TrainJob is Failed,
    DeadlineExceeded, "TrainJob exceeded its active deadline", and its JobSet is deleted (its pods with it)."""
    tj = trainjob(trainer={"numNodes": 2}, activeDeadlineSeconds=600)
    tj["spec"]["runtimeRef"] = {"name": "test-runtime"}
    tj["metadata"].pop("uid")
    result = run(objects=[*_cpu_cluster(), _cpu_runtime(), tj])
    final = final_objects(result, "TrainJob")["test-job"]
    failed = condition(final, "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "TrainJob exceeded its active deadline")
    assert failed["lastTransitionTime"] == "2026-01-01T00:10:00Z"
    assert "test-job" not in final_objects(result, "JobSet")
    assert not [p for p in final_objects(result, "Pod").values()
                if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == "test-job"]


def test_suspended_trainjob_keeps_its_jobset_suspended_until_resumed() -> None:
    """A TrainJob created with suspend: true gets a suspended JobSet (no pods) and Suspended True, "TrainJob is
    suspended"; the runtime's pods run for their kubetwin.io/duration once it is not."""
    tj = trainjob(trainer={"numNodes": 2}, suspend=True)
    tj["spec"]["runtimeRef"] = {"name": "test-runtime"}
    tj["metadata"].pop("uid")
    result = run(objects=[*_cpu_cluster(), _cpu_runtime(), tj])
    final = final_objects(result, "TrainJob")["test-job"]
    assert condition(final, "Suspended")["message"] == "TrainJob is suspended"
    assert final_objects(result, "JobSet")["test-job"]["spec"]["suspend"] is True
    assert not [o for _, _, e, o in result.history if o["kind"] == "Pod"]
    tj["spec"]["suspend"] = False
    result = run(objects=[*_cpu_cluster(), _cpu_runtime(), tj])
    final = final_objects(result, "TrainJob")["test-job"]
    assert condition(final, "Complete")["status"] == "True" and not condition(final, "Suspended")
    assert final["status"]["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0,
                                              "active": 0, "suspended": 0}]


def test_kueue_preempts_a_trainjob_through_its_runtime_patch() -> None:
    """kueue jobs/trainjob Stop and RunWithPodSetsInfo: a higher-priority TrainJob preempts a running one; Kueue
    suspends the victim and empties its runtime patch, the Trainer suspends the victim's JobSet (its pods go); the
    victim is admitted again once the quota is free, with the flavor's node labels back in the patch."""
    kueue = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "cpu"},
         "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "cpu"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": 40}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace":
                                                                                   "default"},
         "spec": {"clusterQueue": "cq"}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": n},
           "value": v} for n, v in (("low", 10), ("high", 100)))]
    jobs = []
    for name, prio, at in (("low-job", "low", None), ("high-job", "high", "10m")):
        tj = trainjob(name, trainer={"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "16"}}})
        tj["spec"]["runtimeRef"] = {"name": "test-runtime"}
        tj["metadata"].pop("uid")
        tj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": prio}
        if at:
            tj["metadata"]["annotations"] = {"kubetwin.io/create-at": at}
        jobs.append(tj)
    result = run(objects=[*_cpu_cluster(), *kueue, _cpu_runtime(), *jobs])
    low = [o for _, _, e, o in result.history if o["kind"] == "TrainJob" and o["metadata"]["name"] == "low-job"]

    def patch_of(o: dict) -> list:
        p = next(p for p in o["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager")
        return p["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs") or []
    states = [(bool(o["spec"].get("suspend")), bool(patch_of(o))) for o in low]
    collapsed = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert collapsed == [(True, False), (False, True), (True, False), (False, True)]
    js = [bool(o["spec"].get("suspend")) for _, _, _, o in result.history
          if o["kind"] == "JobSet" and o["metadata"]["name"] == "low-job"]
    assert [s for i, s in enumerate(js) if i == 0 or s != js[i - 1]] == [True, False, True, False]
    assert condition(final_objects(result, "TrainJob")["low-job"], "Complete")["status"] == "True"
    assert condition(final_objects(result, "TrainJob")["high-job"], "Complete")["status"] == "True"
    evicted = [o for _, _, e, o in result.history if o["kind"] == "Workload"
               and o["metadata"]["name"].startswith("trainjob-low-job-") and condition(o, "Evicted")]
    assert evicted and condition(evicted[0], "Evicted")["reason"] == "Preempted"

"""The training operator's PyTorchJob (kubeflow.org/v1; controllers/pytorchjob.py, validation/kinds/pytorchjob.py):
master and worker pods with the operator's names, labels and env, status conditions, suspend/resume, cleanPodPolicy,
the backoff limit, under Kueue's kubeflow integration.

Ported cases name their upstream file and case (kubeflow/training-operator release-1.9 @078ec30f):
pkg/controller.v1/pytorch/pytorchjob_controller_test.go (Ginkgo `It`s), pkg/webhooks/pytorch/
pytorchjob_webhook_test.go, pkg/apis/kubeflow.org/v1/pytorch_defaults_test.go, pkg/controller.v1/pytorch/
initcontainer_test.go.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import yaml
from conftest import condition, final_objects, run_with
from k8s_builders import make_pool, make_scenario

from kubetwin.api.loader import load_text
from kubetwin.controllers import pytorchjob as P
from kubetwin.runner import run
from kubetwin.store.store import Store
from kubetwin.validation.validate import validate


def replica(replicas: int | None = 1, duration: str | None = "30m", name: str = "pytorch",
            image: str = "test-image", **extra: object) -> dict:
    tmpl: dict = {"spec": {"containers": [{"name": name, "image": image}]}}
    if duration:
        tmpl["metadata"] = {"annotations": {"kubetwin.io/duration": duration}}
    out: dict = {"template": tmpl, **extra}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def pytorchjob(name: str = "test-job", master: dict | None = None, worker: dict | None = None,
               **spec: object) -> dict:
    specs = {}
    if master is not None:
        specs["Master"] = master
    if worker is not None:
        specs["Worker"] = worker
    return {"apiVersion": P.API_VERSION, "kind": "PyTorchJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": specs, **spec}}


def cluster(duration: str = "2h") -> list[dict]:
    return [make_scenario(duration).obj(), make_pool("cpu", "n2-standard-32", 3).spec(bootDelay="0s").obj()]


def set_suspend(value: bool) -> Callable[[Store], None]:
    def do(store: Store) -> None:
        cur = store.get("PyTorchJob", "default", "test-job")
        spec = copy.deepcopy(cur["spec"])
        spec.setdefault("runPolicy", {})["suspend"] = value
        store.update({**cur, "spec": spec})
    return do


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}


def job_pods(result) -> dict[str, dict]:
    return {n: p for n, p in final_objects(result, "Pod").items() if P.JOB_NAME in p["metadata"].get("labels", {})}


def test_should_get_the_corresponding_resources_successfully() -> None:
    """pytorchjob_controller_test.go "Should get the corresponding resources successfully": `<job>-master-0` and
    `<job>-worker-i` owned by the job, the default port, MASTER_ADDR / MASTER_PORT / PET_NPROC_PER_NODE=auto;
    the master's success makes the job Succeeded."""
    result = run(objects=[*cluster(), pytorchjob(master=replica(), worker=replica(2))])
    pods = job_pods(result)
    assert sorted(pods) == ["test-job-master-0", "test-job-worker-0", "test-job-worker-1"]
    master, worker = pods["test-job-master-0"], pods["test-job-worker-1"]
    job = final_objects(result, "PyTorchJob")["test-job"]
    assert master["metadata"]["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                                      "name": "test-job", "uid": job["metadata"]["uid"],
                                                      "controller": True, "blockOwnerDeletion": True}]
    assert {"name": "pytorchjob-port", "containerPort": 23456}.items() <= \
        master["spec"]["containers"][0]["ports"][0].items()
    assert env_of(master) == {"PYTHONUNBUFFERED": "1", "MASTER_PORT": "23456", "PET_MASTER_PORT": "23456",
                              "MASTER_ADDR": "test-job-master-0", "PET_MASTER_ADDR": "test-job-master-0",
                              "WORLD_SIZE": "3", "RANK": "0", "PET_NODE_RANK": "0", "PET_NPROC_PER_NODE": "auto",
                              "PET_NNODES": "3"}
    assert (env_of(worker)["RANK"], env_of(worker)["PET_NODE_RANK"]) == ("2", "2")
    assert master["metadata"]["labels"] == {P.OPERATOR_NAME: "pytorchjob-controller", P.JOB_NAME: "test-job",
                                            P.REPLICA_TYPE: "master", P.REPLICA_INDEX: "0", P.JOB_ROLE: "master"}
    assert P.JOB_ROLE not in worker["metadata"]["labels"] and worker["metadata"]["labels"][P.REPLICA_TYPE] == \
        "worker"
    assert master["spec"]["restartPolicy"] == "OnFailure"
    assert condition(job, "Succeeded")["reason"] == "PyTorchJobSucceeded"
    assert condition(job, "Succeeded")["message"] == "PyTorchJob test-job is successfully completed."
    assert condition(job, "Running")["status"] == "False"  # filterOutCondition: Running turns False on success
    assert condition(job, "Created")["message"] == "PyTorchJob test-job is created."
    assert job["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
    assert job["status"]["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=test-job,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker")


def test_shouldnt_create_resources_if_pytorchjob_is_suspended() -> None:
    """pytorchjob_controller_test.go "Shouldn't create resources if PyTorchJob is suspended": no pods, no
    startTime, Suspended True (PyTorchJobSuspended)."""
    result = run(objects=[*cluster(), pytorchjob(master=replica(), worker=replica(2), runPolicy={"suspend": True})])
    job = final_objects(result, "PyTorchJob")["test-job"]
    assert job_pods(result) == {}
    assert "startTime" not in job["status"]
    assert condition(job, "Suspended") | {"lastTransitionTime": None, "lastUpdateTime": None} == {
        "type": "Suspended", "status": "True", "reason": "PyTorchJobSuspended",
        "message": "PyTorchJob test-job is suspended.", "lastTransitionTime": None, "lastUpdateTime": None}


def test_should_delete_resources_after_suspended_and_resume_after_unsuspended(monkeypatch) -> None:
    """pytorchjob_controller_test.go "Should delete resources after PyTorchJob is suspended; Should resume PyTorchJob
    after PyTorchJob is unsuspended": suspended at 10 m its pods go, Running turns False; resumed at 20 m new pods,
    Suspended False (PyTorchJobResumed), a new startTime."""
    result = run_with(monkeypatch, [*cluster(), pytorchjob(master=replica(duration="2h"), worker=replica(2, "2h"))],
                      [(600, set_suspend(True)), (1200, set_suspend(False))])
    created = [(t, o["metadata"]["name"]) for t, _, e, o in result.history
               if o["kind"] == "Pod" and e == "ADDED"]
    assert [n for t, n in created if t < 600] == ["test-job-master-0", "test-job-worker-0", "test-job-worker-1"]
    assert sorted(n for t, n in created if t >= 1200) == ["test-job-master-0", "test-job-worker-0",
                                                          "test-job-worker-1"]
    versions = [o for _, _, e, o in result.history if o["kind"] == "PyTorchJob"]
    suspended = next(o for o in versions if condition(o, "Suspended").get("status") == "True")
    assert condition(suspended, "Running")["status"] == "False"
    assert condition(suspended, "Running")["reason"] == "PyTorchJobSuspended"
    job = final_objects(result, "PyTorchJob")["test-job"]
    assert condition(job, "Suspended")["reason"] == "PyTorchJobResumed"
    assert condition(job, "Running")["status"] == "True"
    assert job["status"]["startTime"] == "2026-01-01T00:20:00Z"


def test_should_not_reconcile_a_job_managed_by_an_external_controller() -> None:
    """pytorchjob_controller_test.go "Should not reconcile a job while managed by external controller"."""
    result = run(objects=[*cluster(), pytorchjob(master=replica(), worker=replica(1),
                                                 runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})])
    assert job_pods(result) == {}
    assert not final_objects(result, "PyTorchJob")["test-job"].get("status")


def test_worker_init_container_waits_for_the_master() -> None:
    """initcontainer_test.go TestInitContainer: workers (not the master) get `init-pytorch` polling the master's
    name with nslookup."""
    job = P.defaults(pytorchjob(master=replica(), worker=replica(1)) | {"metadata": {"name": "test-job",
                                                                                    "uid": "u"}})
    worker = P.new_pod(job, "Worker", 0)
    assert [c["name"] for c in worker["spec"]["initContainers"]] == ["init-pytorch"]
    assert "nslookup test-job-master-0" in worker["spec"]["initContainers"][0]["command"][2]
    assert "initContainers" not in P.new_pod(job, "Master", 0)["spec"]


@pytest.mark.parametrize(("case", "elastic", "want"), [
    ("minReplicas and maxReplicas to null", {}, (1, 1)),
    ("minReplicas and maxReplicas to 1", {"minReplicas": 1, "maxReplicas": 1}, (1, 1)),
    ("minReplicas to null", {"maxReplicas": 1}, (1, 1)),
    ("maxReplicas to null", {"minReplicas": 1}, (1, 1)),
])
def test_set_elastic_policy(case: str, elastic: dict, want: tuple[int, int]) -> None:
    """pytorch_defaults_test.go TestSetElasticPolicy (each case by its name)."""
    job = P.defaults(pytorchjob(worker=replica(1), elasticPolicy=dict(elastic)))
    got = job["spec"]["elasticPolicy"]
    assert (got["minReplicas"], got["maxReplicas"]) == want, case


def test_set_default_nproc_per_node() -> None:
    """pytorch_defaults_test.go TestSetDefaultNprocPerNode: "auto" unless nprocPerNode or elasticPolicy.nProcPerNode
    is set; lower-case replica types become Master / Worker."""
    assert P.defaults(pytorchjob(worker=replica()))["spec"]["nprocPerNode"] == "auto"
    assert P.defaults(pytorchjob(worker=replica(), nprocPerNode="2"))["spec"]["nprocPerNode"] == "2"
    assert "nprocPerNode" not in P.defaults(pytorchjob(worker=replica(),
                                                      elasticPolicy={"nProcPerNode": 2}))["spec"]
    job = P.defaults({"spec": {"pytorchReplicaSpecs": {"master": replica(), "worker": replica()}}})
    assert sorted(job["spec"]["pytorchReplicaSpecs"]) == ["Master", "Worker"]


def refusals(job: dict) -> list[tuple[str, str]]:
    return [(d.field, d.message.split("denied the request: ", 1)[-1])
            for d in validate(load_text(yaml.safe_dump(job), "pt.yaml")) if d.severity == "error"]


@pytest.mark.parametrize(("case", "job", "want"), [
    ("valid PyTorchJob", pytorchjob("test", replica(), replica(2)), []),
    ("pytorchJob name does not meet DNS1035", pytorchjob("0-test", replica(), replica(2)),
     [("metadata.name", 'metadata.name: Invalid value: "0-test": should match: ' + "a DNS-1035 label must consist "
       "of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an "
       "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
       "'[a-z]([-a-z0-9]*[a-z0-9])?')")]),
    ("image is empty", pytorchjob("test", replica(image="")),
     [("spec.pytorchReplicaSpecs[Master].template.spec.containers[0].image",
       "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].image: Required value: must be required")]),
    ("pytorchJob default container name doesn't present", pytorchjob("test", replica(name="other")),
     [("spec.pytorchReplicaSpecs[Master].template.spec.containers",
       "spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: must have at least one "
       "container with name pytorch")]),
    ("the number of replicas in masterReplica is other than 1", pytorchjob("test", replica(2)),
     [("spec.pytorchReplicaSpecs[Master].replicas", "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: "
       "must be 1")]),
    ("Spec.NprocPerNode and Spec.ElasticPolicy.NProcPerNode are set",
     pytorchjob("test", worker=replica(), nprocPerNode="1", elasticPolicy={"nProcPerNode": 1}),
     [("spec.elasticPolicy.nProcPerNode", "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with "
       "spec.nprocPerNode")]),
    ("attempt to set unsupported managedBy controller name gets rejected",
     pytorchjob("test", replica(), runPolicy={"managedBy": "other-job-controller"}),
     [("spec.runPolicy.managedBy", 'spec.runPolicy.managedBy: Unsupported value: "other-job-controller": '
       'supported values: "kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"')]),
    ("attempt to configure elasticPolicy when no worker is configured",
     pytorchjob("test", replica(), elasticPolicy={}),
     [("spec.pytorchReplicaSpecs[Worker]", "spec.pytorchReplicaSpecs[Worker]: Required value: must be configured "
       "if elastic policy is used")]),
    ("attempt to configure worker with 0 replicas", pytorchjob("test", worker=replica(0), elasticPolicy={}),
     [("spec.pytorchReplicaSpecs[Worker].replicas", "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must "
       "be at least 1")]),
])
def test_webhook(case: str, job: dict, want: list[tuple[str, str]]) -> None:
    """pytorchjob_webhook_test.go TestValidateV1PyTorchJob (each case by its name), in the webhook's words."""
    assert refusals(job) == want, case


def test_failed_worker_under_never_fails_the_job_and_cleans_running_pods() -> None:
    """UpdateJobStatus: a failed replica with restartPolicy Never fails the job ("PyTorchJob x is failed because 1
    Worker replica(s) failed."); DeletePodsAndServices with cleanPodPolicy Running then deletes the running pods
    and keeps the finished ones."""
    worker = replica(1, duration=None, restartPolicy="Never")
    worker["template"]["metadata"] = {"annotations": {"kubetwin.io/fail-after": "5m"}}
    job = pytorchjob(master=replica(duration="2h", restartPolicy="Never"), worker=worker,
                     runPolicy={"cleanPodPolicy": "Running"})
    result = run(objects=[*cluster(), job])
    final = final_objects(result, "PyTorchJob")["test-job"]
    assert condition(final, "Failed")["message"] == "PyTorchJob test-job is failed because 1 Worker replica(s) failed."
    assert sorted(job_pods(result)) == ["test-job-worker-0"]  # the master was running: deleted


def test_backoff_limit_over_container_restarts() -> None:
    """core.PastBackoffLimit: restarts of running pods of an OnFailure replica reach backoffLimit -> Failed, "Job x
    has failed because it has reached the specified backoff limit", every pod deleted."""
    worker = replica(1, duration=None)
    worker["template"]["metadata"] = {"annotations": {"kubetwin.io/fail-after": "1m"}}
    result = run(objects=[*cluster(), pytorchjob(master=replica(duration="2h"), worker=worker,
                                                 runPolicy={"backoffLimit": 2})])
    final = final_objects(result, "PyTorchJob")["test-job"]
    assert condition(final, "Failed")["message"] == \
        "Job test-job has failed because it has reached the specified backoff limit"
    assert job_pods(result) == {}


def test_queued_pytorchjob_is_admitted_by_kueue() -> None:
    """kueue jobs/kubeflow: the queued job is created with runPolicy.suspend, its Workload has pod sets `master`
    (1) and `worker` (2); admission writes the flavor's node labels into both templates and unsuspends."""
    objs = [*cluster(), {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                         "metadata": {"name": "cpu"}, "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "cpu"}}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                 {"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": 90}]}]}]}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}]
    job = pytorchjob(master=replica(), worker=replica(2))
    for rs in job["spec"]["pytorchReplicaSpecs"].values():
        rs["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    result = run(objects=[*objs, job])
    wl = next(iter(final_objects(result, "Workload").values()))
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    assert condition(wl, "Finished")["reason"] == "Succeeded"
    assert all(p["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu"}
               for p in job_pods(result).values())
    first = next(o for _, _, e, o in result.history if o["kind"] == "PyTorchJob")
    assert first["spec"]["runPolicy"]["suspend"] is True


def test_training_model_times_the_master_and_workers_as_one_gang() -> None:
    """The training model reads the PyTorchJob's training.kubetwin.io annotations for its pods, keys them by
    training.kubeflow.org/job-name and ranks them by the operator's RANK: one 16-GPU world over both nodes, every rank
    finishing together."""
    objs = [make_scenario("12h").obj(),
            {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "a3"},
             "spec": {"machineType": "a3-highgpu-8g", "nodeCount": 2, "zones": ["us-central1-a"],
                      "accelerators": [{"type": "nvidia-h100-80gb", "count": 8}]}}]
    job = pytorchjob(master=replica(duration=None), worker=replica(1, duration=None))
    job["metadata"]["annotations"] = {"training.kubetwin.io/params": "8B", "training.kubetwin.io/steps": "20",
                                      "training.kubetwin.io/global-batch-size": "256",
                                      "training.kubetwin.io/sequence-length": "4096",
                                      "training.kubetwin.io/fsdp": "true"}
    for rs in job["spec"]["pytorchReplicaSpecs"].values():
        rs["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    result = run(objects=[*objs, job])
    rec = (result.training or {})["default/test-job"]
    assert rec["placement"]["world"] == 16 and len(rec["placement"]["nodes"]) == 2
    pods = job_pods(result)
    assert {p["status"]["phase"] for p in pods.values()} == {"Succeeded"}
    ends = {p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] for p in pods.values()}
    assert len(ends) == 1
    assert condition(final_objects(result, "PyTorchJob")["test-job"], "Succeeded")["status"] == "True"

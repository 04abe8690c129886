"""The API server's defaulting (api.defaults) and the Job controller's three modes — fixed completion count
(NonIndexed), Indexed and the work queue (parallelism without completions) — against kubernetes/kubernetes:
pkg/apis/*/v*/defaults.go (SetDefaults_*) and pkg/controller/job/job_controller.go (manageJob's wantActive,
the surplus-pod removal, `complete = succeeded >= completions && active == 0`, or `succeeded > 0 && active == 0`
for a work queue), with job_controller_test.go's TestControllerSyncJob cases that apply to the twin (no pod
finalizers, expectations or terminating pods: the twin's pods are gone when deleted; the back-off is in
test_job_backoff.py, and these pods finished long before the sync, as upstream's zero-time pods).
"""

from __future__ import annotations

import re

import pytest
from conftest import final_objects
from k8s_builders import make_pool, make_scenario

from kubetwin.api import defaults
from kubetwin.cli.describe import describe
from kubetwin.cli.printers import table
from kubetwin.controllers import admission
from kubetwin.controllers.job import COMPLETION_INDEX, JobController
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.runner import run
from kubetwin.sim.apiclient import ApiClient
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store

NOW = "2026-01-01T00:00:00Z"


def job_obj(parallelism: int | None, completions: int | None, indexed: bool = False, backoff: int | None = 6,
            duration: str = "10m", suspend: bool = False) -> dict:
    spec: dict = {"template": {"metadata": {"annotations": {"kubetwin.io/duration": duration}},
                               "spec": {"restartPolicy": "Never", "containers": [
                                   {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}
    for key, value in (("parallelism", parallelism), ("completions", completions), ("backoffLimit", backoff)):
        if value is not None:
            spec[key] = value
    if indexed:
        spec["completionMode"] = "Indexed"
    if suspend:
        spec["suspend"] = True
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"}, "spec": spec}


# -- defaulting -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "want"), [
    ({}, {"completions": 1, "parallelism": 1}),
    ({"parallelism": 3}, {"parallelism": 3}),  # a work queue: completions stay unset
    ({"completions": 4}, {"completions": 4, "parallelism": 1}),
    ({"completions": 4, "parallelism": 2}, {"completions": 4, "parallelism": 2}),
])
def test_job_defaults_as_set_defaults_job(given: dict, want: dict) -> None:
    spec = defaults.job_spec({"template": {}, **given})
    assert {k: spec.get(k) for k in ("completions", "parallelism")} == {"completions": None, **want}
    assert (spec["backoffLimit"], spec["completionMode"], spec["suspend"], spec["podReplacementPolicy"],
            spec["manualSelector"]) == (6, "NonIndexed", False, "TerminatingOrFailed", False)
    assert defaults.job_spec({"backoffLimitPerIndex": 1, "completionMode": "Indexed", "completions": 2})[
        "backoffLimit"] == 2**31 - 1


@pytest.mark.parametrize(("obj", "path", "want"), [
    ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"},
      "spec": {"template": {"metadata": {"labels": {"app": "a"}}}}}, ("metadata", "labels"), {"app": "a"}),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}},
     ("spec",), {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600, "strategy": {
         "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}}),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "replicas": 0, "strategy": {"type": "Recreate"}}},
     ("spec",), {"replicas": 0, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                 "strategy": {"type": "Recreate"}}),
    ({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {}}, ("spec",),
     {"replicas": 1}),
    ({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 5},
     ("preemptionPolicy",), "PreemptLowerPriority"),
    ({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
      "spec": {"maxReplicas": 3}}, ("spec",), {"maxReplicas": 3, "minReplicas": 1, "metrics": [
          {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                     "averageUtilization": 80}}}]}),
    ({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "x"},
     ("volumeBindingMode",), "Immediate"),
    ({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {}},
     ("spec", "volumeMode"), "Filesystem"),
])
def test_every_simulated_kind_is_stored_with_the_api_servers_defaults(obj: dict, path: tuple, want) -> None:
    """What the store keeps after create: the admission chain starts with api.defaults for each kind."""
    store = Store(Environment(), 0, NOW)
    store.admit(admission.api_defaults, admission.API_DEFAULTED)
    stored = store.create(obj)
    got = stored
    for key in path:
        got = got[key]
    assert got == want


# -- the Job controller, one sync at a time (TestControllerSyncJob) --------------------------------------------

LONG_AGO = "2025-12-31T00:00:00Z"  # a day before NOW


def _cluster(job: dict, pods: list[tuple[str | None, str, bool]]):
    """A store holding the Job (defaulted) and its pods: (completion index or None, phase, ready)."""
    env = Environment()
    store = Store(env, 0, NOW)
    store.admit(admission.api_defaults, admission.API_DEFAULTED)
    store.admit(admission.pod_defaults, ("Pod",))
    # one sync's decisions: a client that never waits (the pacing is tests/test_component_clients.py's)
    ctrl = JobController(store, env, EventRecorder(store), NameGenerator(0), client=ApiClient("job-controller", -1, 0))
    stored = store.create(job)
    for i, (index, phase, ready) in enumerate(pods):
        meta: dict = {"name": f"pod-{i}", "namespace": "default", "annotations": {}, "labels": {},
                      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                           "uid": stored["metadata"]["uid"], "controller": True}]}
        if index is not None:
            meta["annotations"][COMPLETION_INDEX] = index
        status: dict = {"phase": phase}
        if phase in ("Succeeded", "Failed"):  # finished long ago, as upstream's pods of zero time: no back-off left
            status["containerStatuses"] = [{"name": "c", "state": {"terminated": {
                "exitCode": int(phase == "Failed"), "finishedAt": LONG_AGO}}}]
        if ready:
            status["conditions"] = [{"type": "Ready", "status": "True"}]
        store.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                      "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": status})
    made: list[dict] = []
    gone: list[str] = []
    store.watch("Pod", lambda e, o, old: made.append(o) if e == "ADDED" else
                gone.append(o["metadata"]["name"]) if e == "DELETED" else None)
    ctrl.sync(store.get("Job", "default", "j"))
    return store.get("Job", "default", "j"), made, gone


def _pods(pending: int = 0, active: int = 0, succeeded: int = 0, failed: int = 0, ready: int = 0) -> list:
    return ([(None, "Pending", False)] * pending + [(None, "Running", i < ready) for i in range(active)]
            + [(None, "Succeeded", False)] * succeeded + [(None, "Failed", False)] * failed)


CASES = {  # name: (parallelism, completions, backoffLimit, indexed, pods, creations, deletions, active, succeeded,
    #                 failed, completed indexes, finished condition, created indexes)
    "job start": (2, 5, 6, False, _pods(), 2, 0, 2, 0, 0, None, None, None),
    "WQ job start": (2, None, 6, False, _pods(), 2, 0, 2, 0, 0, None, None, None),
    "pending pods": (2, 5, 6, False, _pods(pending=2), 0, 0, 2, 0, 0, None, None, None),
    "correct # of pods": (3, 5, 6, False, _pods(active=3, ready=2), 0, 0, 3, 0, 0, None, None, None),
    "WQ job: correct # of pods": (2, None, 6, False, _pods(active=2), 0, 0, 2, 0, 0, None, None, None),
    "too few active pods": (2, 5, 6, False, _pods(active=1, succeeded=1), 1, 0, 2, 1, 0, None, None, None),
    "too few active pods with a dynamic job": (2, None, 6, False, _pods(active=1), 1, 0, 2, 0, 0, None, None, None),
    "too many active pods": (2, 5, 6, False, _pods(active=3), 0, 1, 2, 0, 0, None, None, None),
    "failed + succeed pods: reset backoff delay": (2, 5, 6, False, _pods(active=1, succeeded=1, failed=1), 1, 0,
                                                   2, 1, 1, None, None, None),
    "new failed pod": (2, 5, 6, False, _pods(active=1, failed=1), 1, 0, 2, 0, 1, None, None, None),
    "job finish": (2, 5, 6, False, _pods(succeeded=5), 0, 0, 0, 5, 0, None, "Complete", None),
    "WQ job finishing": (2, None, 6, False, _pods(active=1, succeeded=1), 0, 0, 1, 1, 0, None, None, None),
    "WQ job all finished": (2, None, 6, False, _pods(succeeded=2), 0, 0, 0, 2, 0, None, "Complete", None),
    "WQ job all finished despite one failure": (2, None, 6, False, _pods(succeeded=1, failed=1), 0, 0, 0, 1, 1,
                                                None, "Complete", None),
    "more active pods than parallelism": (2, 5, 6, False, _pods(active=10), 0, 8, 2, 0, 0, None, None, None),
    "more active pods than remaining completions": (3, 4, 6, False, _pods(active=3, succeeded=2), 0, 1, 2, 2, 0,
                                                    None, None, None),
    "status change": (2, 5, 6, False, _pods(active=2, succeeded=2), 0, 0, 2, 2, 0, None, None, None),
    "limited pods": (100, 200, 6, False, _pods(), 100, 0, 100, 0, 0, None, None, None),  # the twin: no podLimit
    "count ready pods when job fails": (2, 3, 0, False, _pods(active=2, ready=2, failed=1), 0, 2, 0, 0, 3, None,
                                        "Failed", None),
    "indexed job start": (2, 5, 6, True, [], 2, 0, 2, 0, 0, None, None, {0, 1}),
    "indexed job completed": (2, 3, 6, True, [("0", "Succeeded", False), ("1", "Failed", False),
                                              ("1", "Succeeded", False), ("2", "Succeeded", False)],
                              0, 0, 0, 3, 1, "0-2", "Complete", None),
    "indexed job failed": (2, 3, 0, True, [("0", "Succeeded", False), ("1", "Failed", False),
                                           ("2", "Running", False)], 0, 1, 0, 1, 2, "0", "Failed", None),
    "indexed job repeated completed index": (2, 3, 6, True, [("0", "Succeeded", False), ("1", "Succeeded", False),
                                                             ("1", "Succeeded", False)], 1, 0, 1, 2, 0, "0,1",
                                             None, {2}),
    "indexed job some running and completed pods": (
        8, 20, 6, True, [("0", "Running", False), ("2", "Succeeded", False), ("3", "Pending", False),
                         ("4", "Succeeded", False), ("5", "Succeeded", False), ("7", "Succeeded", False),
                         ("8", "Succeeded", False), ("9", "Succeeded", False)],
        6, 0, 8, 6, 0, "2,4,5,7-9", None, {1, 6, 10, 11, 12, 13}),
    "indexed job some failed pods": (3, 4, 6, True, [("0", "Failed", False), ("1", "Pending", False),
                                                     ("2", "Failed", False)], 2, 0, 3, 0, 2, None, None, {0, 2}),
    "indexed job repeated indexes": (5, 5, 6, True, [("0", "Succeeded", False), ("1", "Running", False),
                                                     ("2", "Running", False), ("2", "Pending", False)],
                                     0, 1, 2, 1, 0, "0", None, None),
    "indexed job with indexes outside of range": (
        2, 5, 6, True, [("0", "Succeeded", False), ("5", "Running", False), ("6", "Succeeded", False),
                        ("7", "Pending", False), ("8", "Failed", False)], 0, 2, 0, 1, 0, "0", None, None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_job_controller_sync_as_upstreams_table(name: str) -> None:
    (par, comp, backoff, indexed, pods, creations, deletions, active, succeeded, failed, idxs, finished,
     created) = CASES[name]
    job, made, gone = _cluster(job_obj(par, comp, indexed, backoff), pods)
    st = job["status"]
    assert (len(made), len(gone)) == (creations, deletions)
    assert (st.get("active", 0), st.get("succeeded", 0), st.get("failed", 0)) == (active, succeeded, failed)
    assert st.get("completedIndexes") == idxs
    conds = {c["type"] for c in st.get("conditions") or [] if c["status"] == "True"}
    assert ({"Complete", "Failed"} & conds) == ({finished} if finished else set())
    if created is not None:
        assert {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in made} == created


def test_surplus_pods_removed_first_are_the_unscheduled_and_not_ready() -> None:
    """activePodsForRemoval sorts by controller.ActivePods: unassigned, then pending, then not ready first."""
    job, made, gone = _cluster(job_obj(1, 5), [(None, "Running", True), (None, "Pending", False),
                                               (None, "Running", False)])
    assert gone == ["pod-1", "pod-2"]


# -- whole runs, each mode ------------------------------------------------------------------------------------

def _run(job: dict, nodes: int = 1, machine: str = "e2-standard-4", until: str = "3h"):
    return run(objects=[make_scenario(until).obj(), make_pool("cpu", machine, nodes).obj(), job])


def test_a_job_with_neither_completions_nor_parallelism_runs_one_pod() -> None:
    result = _run(job_obj(None, None))
    pods = final_objects(result, "Pod")
    job = final_objects(result, "Job")["j"]
    assert len(pods) == 1 and job["status"]["succeeded"] == 1
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (1, 1)


def test_work_queue_starts_no_pod_after_a_success_and_completes_when_all_end() -> None:
    """parallelism 3, no completions, room for two pods at a time (e2-standard-4: 3.92 CPU allocatable, 1 CPU
    each ... three fit; use 2-CPU pods): the third pod waits, the first two succeed, and no replacement starts;
    the Job completes when the third has ended."""
    job = job_obj(3, None)
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1500m"
    result = _run(job)
    pods = final_objects(result, "Pod")
    done = final_objects(result, "Job")["j"]
    assert len(pods) == 3, sorted(pods)
    assert done["status"]["succeeded"] == 3 and done["status"].get("active", 0) == 0
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in done["status"]["conditions"])
    # two ran first, the third only after them: it finished ten minutes later than they did
    ends = sorted(p["status"].get("containerStatuses", [{}])[0].get("state", {}).get("terminated", {})
                  .get("finishedAt", "") for p in pods.values())
    assert ends[0] == ends[1] < ends[2]


@pytest.mark.parametrize(("par", "comp", "indexed", "pods"), [
    (2, 4, False, 4), (2, 4, True, 4), (1, None, False, 1), (None, 3, False, 3), (None, 3, True, 3)])
def test_each_mode_runs_its_pods_to_completion(par, comp, indexed, pods) -> None:
    result = _run(job_obj(par, comp, indexed), nodes=2)
    job = final_objects(result, "Job")["j"]
    assert len(final_objects(result, "Pod")) == pods and job["status"]["succeeded"] == pods
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])


def test_describe_and_get_print_parallelism_and_completions_as_kubectl() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 1, tzinfo=UTC)
    plain = defaults.apply(job_obj(None, None))
    text = describe(plain, [], now)
    assert re.search(r"\nParallelism:\s+1\nCompletions:\s+1\nCompletion Mode:\s+NonIndexed\nSuspend:\s+false\n"
                     r"Backoff Limit:\s+6\n", text)
    wq = defaults.apply(job_obj(3, None))
    assert re.search(r"\nParallelism:\s+3\nCompletions:\s+<unset>\n", describe(wq, [], now))
    # kubectl get jobs (printers.go printJob): "0/1 of 3" for a work queue of parallelism 3, "0/1" for 1
    rows = table("Job", [wq, defaults.apply({**job_obj(1, None), "metadata": {"name": "k", "namespace": "default"}}),
                         defaults.apply({**job_obj(2, 5), "metadata": {"name": "m", "namespace": "default"}})], now,
                 False)
    assert [r[2] for r in rows[1:]] == ["0/1 of 3", "0/1", "0/5"]


@pytest.mark.parametrize(("field", "value"), [
    ("backoffLimitPerIndex", 1),
    ("podFailurePolicy", {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}),
    ("successPolicy", {"rules": [{"succeededCount": 1}]}),
    ("activeDeadlineSeconds", 600),
    ("ttlSecondsAfterFinished", 60),
])
def test_job_fields_the_controller_models_give_no_notice(field, value) -> None:
    """These Job fields were notices ("not simulated") until the Job controller ran them (controllers/job.py,
    job_policy.py, ttlafterfinished.py; tests/test_job_policy.py): a Job's and a JobSet's job template's."""
    from kubetwin.api.loader import Manifest
    from kubetwin.validation.validate import validate

    job = job_obj(2, 4, indexed=field in ("backoffLimitPerIndex", "successPolicy"), backoff=None)
    job["spec"][field] = value
    assert [d for d in validate([Manifest(job, "t.yaml", 1)]) if d.field == f"spec.{field}"] == []
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js",
                                                                                    "namespace": "default"},
              "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": job["spec"]}}]}}
    assert [d for d in validate([Manifest(jobset, "t.yaml", 1)])
            if d.field.startswith("spec.replicatedJobs[0].template.spec")] == []


def test_an_hpa_without_metrics_is_defaulted_to_cpu_and_validate_says_the_twin_cannot_read_it() -> None:
    """autoscaling/v2 SetDefaults_HorizontalPodAutoscaler: no metrics is CPU at 80 %; the twin has no
    metrics-server, so the run reports FailedGetResourceMetric (before: no metric and no condition at all), and
    validate says so."""
    from kubetwin.api.loader import Manifest
    from kubetwin.validation.validate import validate

    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "web", "namespace": "default"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "maxReplicas": 3}}
    notes = [d for d in validate([Manifest(hpa, "t.yaml", 1)]) if d.severity == "notice"]
    assert len(notes) == 1 and "metrics-server" in notes[0].message and "80 %" in notes[0].message
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
               "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                   {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}}}
    r = run(objects=[make_scenario("10m").obj(), make_pool("cpu", "e2-standard-4", 1).obj(), dep, hpa])
    last = [o for _, _, _, o in r.history if o["kind"] == "HorizontalPodAutoscaler"][-1]
    assert last["spec"]["minReplicas"] == 1 and last["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    active = next(c for c in last["status"]["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")


def test_indexed_pods_get_the_completion_index_env_and_the_index_hostname() -> None:
    """The Job controller's podGenerator for an Indexed Job (pkg/controller/job/indexed_job_utils.go
    addCompletionIndexEnvVariables; job_controller.go manageJob): every container and init container gets
    JOB_COMPLETION_INDEX from the pod's completion-index label (PodIndexLabel, GA in 1.32) unless it already sets
    one, and the pod's hostname is <job>-<index> whatever the template says."""
    job = job_obj(2, 2, indexed=True)
    tmpl = job["spec"]["template"]["spec"]
    tmpl["hostname"] = "from-template"
    tmpl["initContainers"] = [{"name": "init", "image": "x", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "7"}]}]
    tmpl["containers"][0]["env"] = [{"name": "OTHER", "value": "1"}]
    pods = final_objects(_run(job, nodes=2), "Pod")
    assert len(pods) == 2
    for pod in pods.values():
        index = pod["metadata"]["labels"][COMPLETION_INDEX]
        assert pod["spec"]["hostname"] == f"j-{index}"
        main = pod["spec"]["containers"][0]["env"]
        assert main == [{"name": "OTHER", "value": "1"}, {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "apiVersion": "v1", "fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}}]
        assert pod["spec"]["initContainers"][0]["env"] == [{"name": "JOB_COMPLETION_INDEX", "value": "7"}]
    plain = final_objects(_run(job_obj(2, 2)), "Pod")
    assert all("env" not in p["spec"]["containers"][0] for p in plain.values())

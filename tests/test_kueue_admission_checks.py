"""Kueue admission checks with the ProvisioningRequest admission check controller (GKE DWS through Kueue), end to
end in `kubetwin run`: examples/kueue-dws-provisioning.yaml's timeline, retries with backoff then Rejected, a
missing AdmissionCheck making its ClusterQueue inactive, onFlavors, determinism."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from conftest import condition, is_true
from kueue_builders import make_flavor

from kubetwin.kueue.controller.provisioning import CLASS_NAME, CONSUMES, request_name, template_name
from kubetwin.runner import run as kt_run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kueue-dws-provisioning.yaml"
CHECK = "dws-prov"


def objects() -> list[dict]:
    return [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]


def find(objs: list[dict], kind: str, name: str) -> dict:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def check_state(wl: dict) -> dict:
    return next((s for s in (wl.get("status") or {}).get("admissionChecks") or [] if s["name"] == CHECK), {})


@pytest.fixture(scope="module")
def dws():
    return kt_run([EXAMPLE])


def test_example_timeline(dws):
    wl = dws.last("Workload", prefix="job-train-")
    name = wl["metadata"]["name"]
    pr_name = request_name(name, CHECK, 1)
    assert pr_name == f"{name}-{CHECK}-1"
    # t=0: quota reserved, check Pending, not admitted, ProvisioningRequest + PodTemplate created
    assert dws.first_time("Workload", lambda o: is_true(o, "QuotaReserved"), prefix=name) == 0
    at0 = [o for t, _, o in dws.versions("Workload", prefix=name) if t == 0][-1]
    assert check_state(at0)["state"] == "Pending" and not condition(at0, "Admitted")
    assert dws.first_time("ProvisioningRequest", lambda o: True, prefix=pr_name) == 0
    pr = dws.last("ProvisioningRequest", prefix=pr_name)
    assert pr["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert pr["spec"]["parameters"] == {"maxRunDurationSeconds": "21600"}
    assert pr["spec"]["podSets"] == [{"podTemplateRef": {"name": template_name(pr_name, "main")}, "count": 4}]
    assert pr["metadata"]["ownerReferences"][0]["kind"] == "Workload"
    ppt = dws.last("PodTemplate", prefix=f"ppt-{pr_name}-main")
    assert ppt["template"]["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "a3-flex"}
    # the autoscaler accepts it at its first loop; Kueue propagates the Provisioned=False message while waiting
    assert dws.first_time("ProvisioningRequest", lambda o: is_true(o, "Accepted"), prefix=pr_name) == 10
    at1h = [o for t, _, o in dws.versions("Workload", prefix=name) if t <= 3600][-1]
    assert check_state(at1h)["state"] == "Pending"
    assert check_state(at1h)["message"].startswith("Waiting for 4 a3-flex node(s) in us-central1-a all at once")
    job_at1h = [o for t, _, o in dws.versions("Job", prefix="train") if t <= 3600][-1]
    assert job_at1h["spec"]["suspend"] is True
    # 2h: capacity, Provisioned=True => check Ready => Admitted => the Job starts consuming the request
    assert dws.first_time("ProvisioningRequest", lambda o: is_true(o, "Provisioned"), prefix=pr_name) == 7200
    assert dws.first_time("Workload", lambda o: check_state(o).get("state") == "Ready", prefix=name) == 7200
    assert dws.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=name) == 7200
    ready = check_state(wl)
    assert ready["podSetUpdates"] == [{"name": "main", "annotations": {
        CONSUMES: pr_name, CLASS_NAME: "queued-provisioning.gke.io"}}]
    assert condition(wl, "Admitted")["reason"] == "Admitted"
    assert dws.first_time("Job", lambda o: o["spec"].get("suspend") is False, prefix="train") == 7200
    pods = [(t, o) for t, etype, o in dws.versions("Pod", prefix="train-") if etype == "ADDED"]
    assert len(pods) == 4 and all(t == 7200 for t, _ in pods)
    assert all(o["metadata"]["annotations"][CONSUMES] == pr_name for _, o in pods)
    assert [m for _, e in dws.recorded_events("Admitted") for m in [e["message"]]] == [
        "Admitted by ClusterQueue dws, wait time since reservation was 7200s"]
    assert [e["message"] for _, e in dws.recorded_events("AdmissionCheckUpdated")] == [
        f"Admission check {CHECK} updated state from Pending to Ready with message {ready['message']}"]
    # nodes boot at 2h01m30s, the pods run 3 h, the idle nodes go 10 min later (maxRunDuration would be 8h)
    nodes = [(t, etype) for t, etype, _ in dws.versions("Node", prefix="gke-kubetwin-a3-flex") if etype != "MODIFIED"]
    assert nodes == [(7290, "ADDED")] * 4 + [(18870, "DELETED")] * 4
    assert condition(wl, "Finished")["reason"] == "Succeeded"
    assert dws.first_time("Workload", lambda o: is_true(o, "Finished"), prefix=name) == 18270
    # the check and the queue are active; the request's booking expiry after admission changes nothing
    assert condition(dws.last("AdmissionCheck", prefix=CHECK), "Active")["reason"] == "Active"
    assert condition(dws.last("ClusterQueue", prefix="dws"), "Active") == {
        **condition(dws.last("ClusterQueue", prefix="dws"), "Active"), "status": "True", "reason": "Ready"}
    assert condition(dws.last("ProvisioningRequest", prefix=pr_name), "BookingExpired")["status"] == "True"
    assert check_state(wl)["state"] == "Ready"


def test_failed_request_retried_with_backoff_then_rejected():
    objs = objects()
    job = find(objs, "Job", "train")
    job["metadata"]["annotations"]["provreq.kueue.x-k8s.io/maxRunDurationSeconds"] = "999999999"  # GKE refuses
    r = kt_run(objects=objs)
    name = r.last("Workload", prefix="job-train-")["metadata"]["name"]
    created = [(t, o["metadata"]["name"]) for t, etype, o in r.versions("ProvisioningRequest", prefix=name)
               if etype == "ADDED"]
    # attempt n fails at the next autoscaler loop (+10 s); the workload is requeued 60·2^(n-1) s later
    assert created == [(0, f"{name}-{CHECK}-1"), (70, f"{name}-{CHECK}-2"), (200, f"{name}-{CHECK}-3"),
                       (450, f"{name}-{CHECK}-4")]
    evicted = sorted({(condition(o, "Evicted")["lastTransitionTime"], condition(o, "Evicted")["message"])
                      for _, _, o in r.versions("Workload", prefix=name)
                      if condition(o, "Evicted").get("reason") == "AdmissionCheck"})
    msg = "At least one admission check is false"
    assert evicted == [("2026-01-01T00:00:10Z", msg), ("2026-01-01T00:01:20Z", msg),
                       ("2026-01-01T00:03:30Z", msg)]
    requeue_at = sorted({o["status"]["requeueState"]["requeueAt"] for _, _, o in r.versions("Workload", prefix=name)
                         if (o.get("status") or {}).get("requeueState")})
    assert requeue_at == ["2026-01-01T00:01:10Z", "2026-01-01T00:03:20Z", "2026-01-01T00:07:30Z"]
    retry = {check_state(o)["lastTransitionTime"]: check_state(o) for _, _, o in r.versions("Workload", prefix=name)
             if check_state(o).get("state") == "Retry"}
    assert [(s["requeueAfterSeconds"], s["retryCount"]) for _, s in sorted(retry.items())] == [
        (60, 1), (120, 2), (240, 3)]
    assert min(retry.items())[1]["message"].startswith(
        "Retrying after failure: maxRunDurationSeconds must be between 1 and")
    wl = r.last("Workload", prefix=name)
    assert wl["spec"]["active"] is False
    assert condition(wl, "Evicted")["reason"] == "DeactivatedDueToAdmissionCheck"
    assert r.first_time("Workload", lambda o: o["spec"].get("active") is False, prefix=name) == 460
    assert [t for t, _ in r.recorded_events("AdmissionCheckRejected")] == [460]
    assert r.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=name) is None
    assert all(o["spec"]["suspend"] for _, etype, o in r.versions("Job", prefix="train") if etype != "DELETED")
    assert not is_true(wl, "QuotaReserved")
    assert r.last("ClusterQueue", prefix="dws")["status"]["reservingWorkloads"] == 0


def test_missing_admission_check_makes_the_cluster_queue_inactive():
    objs = [o for o in objects() if o["kind"] != "AdmissionCheck"]
    r = kt_run(objects=objs, duration="1h")
    cq = r.last("ClusterQueue", prefix="dws")
    assert condition(cq, "Active")["status"] == "False"
    assert condition(cq, "Active")["reason"] == "AdmissionCheckNotFound"
    assert condition(cq, "Active")["message"] == ("Can't admit new workloads: references missing AdmissionCheck(s): "
                                             f"[{CHECK}].")
    wl = r.last("Workload", prefix="job-train-")
    assert condition(wl, "QuotaReserved")["status"] == "False"
    assert condition(wl, "QuotaReserved")["message"] == "ClusterQueue dws is inactive"
    assert not r.versions("ProvisioningRequest")


def test_admission_check_created_later_activates_the_queue():
    objs = objects()
    ac = find(objs, "AdmissionCheck", CHECK)
    ac["metadata"]["annotations"] = {"kubetwin.io/create-at": "30m"}
    r = kt_run(objects=objs, duration="1h")
    name = r.last("Workload", prefix="job-train-")["metadata"]["name"]
    assert r.first_time("Workload", lambda o: is_true(o, "QuotaReserved"), prefix=name) == 1800
    assert r.first_time("ProvisioningRequest", lambda o: True, prefix=name) == 1800


def test_on_flavors_limits_the_check_to_one_flavor():
    objs = objects()
    cq = find(objs, "ClusterQueue", "dws")
    cq["spec"]["resourceGroups"][0]["flavors"].insert(0, {"name": "on-demand", "resources": [
        {"name": "cpu", "nominalQuota": 100}, {"name": "memory", "nominalQuota": "1000Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": 8}]})
    cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] = ["a3-flex"]
    objs.append(make_flavor("on-demand").node_labels({"cloud.google.com/gke-nodepool": "a3-od"}).obj())
    small = copy.deepcopy(find(objs, "Job", "train"))
    small["metadata"]["name"] = "small"
    small["spec"].update(parallelism=1, completions=1)
    objs.append(small)
    r = kt_run(objects=objs, duration="1h")
    small_wl, big_wl = r.last("Workload", prefix="job-small-"), r.last("Workload", prefix="job-train-")
    assert small_wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "on-demand"
    assert condition(small_wl, "Admitted")["status"] == "True" and not small_wl["status"].get("admissionChecks")
    assert big_wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "a3-flex"
    assert check_state(big_wl)["state"] == "Pending" and not condition(big_wl, "Admitted")
    assert [o["metadata"]["name"] for _, etype, o in r.versions("ProvisioningRequest") if etype == "ADDED"] == [
        f"{big_wl['metadata']['name']}-{CHECK}-1"]


def test_deterministic(dws):
    again = kt_run([EXAMPLE])
    dump = lambda r: json.dumps([(t, e, o) for t, _, e, o in r.history], sort_keys=True, default=str)  # noqa: E731
    assert dump(dws) == dump(again)


def test_no_request_needed_without_managed_resources():
    """managedResources [nvidia.com/gpu]: a CPU-only job needs no ProvisioningRequest, the check is Ready at once."""
    objs = objects()
    job = find(objs, "Job", "train")
    del job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    r = kt_run(objects=objs, duration="10m")
    wl = r.last("Workload", prefix="job-train-")
    assert check_state(wl)["state"] == "Ready"
    assert check_state(wl)["message"] == "the provisioning request is not needed"
    assert r.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix="job-train-") == 0
    assert not r.versions("ProvisioningRequest")


def test_inactive_queue_keeps_the_time_it_became_inactive_when_the_reason_changes():
    # Kueue writes a ClusterQueue's Active condition with apimeta.SetStatusCondition (clusterqueue_controller.go
    # updateCqStatusIfChanged): from "AdmissionCheckNotFound" to "AdmissionCheckInactive" it stays False since 0s.
    objs = objects()
    ac = find(objs, "AdmissionCheck", CHECK)
    ac["metadata"]["annotations"] = {"kubetwin.io/create-at": "30m"}
    ac["spec"]["parameters"]["name"] = "no-such-config"
    r = kt_run(objects=objs, duration="1h")
    seen = [(t, condition(o, "Active")) for t, etype, o in r.versions("ClusterQueue", prefix="dws")
            if etype != "DELETED" and condition(o, "Active")]
    reasons = list(dict.fromkeys(c["reason"] for _, c in seen))
    assert reasons == ["AdmissionCheckNotFound", "AdmissionCheckInactive"]
    assert {c["status"] for _, c in seen} == {"False"}
    assert {c["lastTransitionTime"] for _, c in seen} == {"2026-01-01T00:00:00Z"}
    assert next(t for t, c in seen if c["reason"] == "AdmissionCheckInactive") == 1800
    check = r.last("AdmissionCheck", prefix=CHECK)
    assert condition(check, "Active")["reason"] == "BadParametersRef"

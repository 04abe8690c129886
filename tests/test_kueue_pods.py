"""Kueue's plain Pod integration inside `kubetwin run` (kueue/controller/pods.py): the webhook's scheduling gate, one
Workload per Pod or pod group, ungating with the flavor's node selector on admission, finishing, and preemption by
deletion.
"""

from __future__ import annotations

import json

from conftest import condition, is_true
from k8s_builders import make_pool, make_scenario
from kueue_builders import make_configuration, make_cq, make_flavor, make_lq, make_workload_priority_class

from kubetwin.kueue.controller.pods import MANAGED_LABEL, SCHEDULING_GATE
from kubetwin.runner import run as kt_run


def pod(name: str, queue: str | None = "main", cpu: str = "1", duration: str = "30m", create_at: str | None = None,
        group: tuple[str, int] | None = None, labels: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default", "labels": dict(labels or {}),
                  "annotations": {"kubetwin.io/duration": duration}}
    if queue:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if create_at:
        meta["annotations"]["kubetwin.io/create-at"] = create_at
    if group:
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = group[0]
        meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = str(group[1])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}


def cpu_pool(name: str = "cpu", labels: dict | None = None) -> dict:
    """Two e2-standard-16 nodes, Ready at once (no boot delay), so a pod runs when it is admitted."""
    pool = make_pool(name, "e2-standard-16", 2).spec(bootDelay="0s")
    return (pool.spec(labels=labels) if labels else pool).obj()


def gates(p: dict) -> list[str]:
    return [g["name"] for g in p["spec"].get("schedulingGates") or []]


def pod_scheduled(p: dict) -> dict:
    return condition(p, "PodScheduled")


def admitted_at(result, prefix: str) -> float | None:
    return result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=prefix)


def ungated_at(result, name: str) -> float | None:
    return result.first_time("Pod", lambda o: SCHEDULING_GATE not in gates(o), prefix=name)


def running_at(result, name: str) -> float | None:
    return result.first_time("Pod", lambda o: (o.get("status") or {}).get("phase") == "Running", prefix=name)


def test_queued_pod_waits_gated_then_is_admitted_ungated_with_the_flavor_node_selector():
    objs = [make_scenario().obj(), cpu_pool("plain"), cpu_pool("ml", labels={"team": "ml"}),
            make_flavor("ml").node_labels({"team": "ml"}).obj(), make_cq("cq").flavor("ml", cpu="8").obj(),
            make_lq("main").cluster_queue("cq").create_at("30m").obj(), pod("train")]
    result = kt_run(objects=objs)
    created = next(o for _, etype, o in result.versions("Pod", prefix="train") if etype == "ADDED")
    assert created["metadata"]["labels"][MANAGED_LABEL] == "true" and gates(created) == [SCHEDULING_GATE]
    gated = pod_scheduled(created)
    assert (gated["status"], gated["reason"]) == ("False", "SchedulingGated")
    wl = result.last("Workload", prefix="pod-train-", at=1799)
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "Pod" and wl["metadata"]["ownerReferences"][0]["controller"]
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 1)]
    qr = condition(wl, "QuotaReserved")
    assert (qr["status"], qr["reason"], qr["message"]) == ("False", "Inadmissible", "LocalQueue main doesn't exist")
    before = result.last("Pod", prefix="train", at=1799)
    assert gates(before) == [SCHEDULING_GATE] and not before["spec"].get("nodeName")
    assert not [o for _, o in result.recorded_events("FailedScheduling") if o["involvedObject"]["name"] == "train"]

    assert admitted_at(result, "pod-train-") == ungated_at(result, "train") == running_at(result, "train") == 1800.0
    after = result.last("Pod", prefix="train", at=1800)
    assert after["spec"]["nodeSelector"] == {"team": "ml"} and "ml" in after["spec"]["nodeName"]
    assert "schedulingGates" not in after["spec"]
    assert [(o["involvedObject"]["name"], o["message"]) for _, o in result.recorded_events("Started")
            if o["involvedObject"]["kind"] == "Pod" and o["message"].startswith("Admitted")] == [
        ("train", "Admitted by clusterQueue cq")]
    # the pod runs 30m: its Workload finishes with it
    done = result.last("Workload", prefix="pod-train-")
    assert (condition(done, "Finished")["status"], condition(done, "Finished")["reason"]) == ("True", "Succeeded")
    assert result.first_time("Workload", lambda o: is_true(o, "Finished"), prefix="pod-train-") \
        == 3600.0


def test_second_pod_stays_gated_until_the_first_finishes():
    objs = [make_scenario().obj(), cpu_pool(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="1").obj(), make_lq("main").cluster_queue("cq").obj(),
            pod("a"), pod("b", create_at="1m")]
    result = kt_run(objects=objs)
    assert admitted_at(result, "pod-a-") == running_at(result, "a") == 0.0
    b = result.last("Pod", prefix="b", at=1799)
    assert gates(b) == [SCHEDULING_GATE] and pod_scheduled(b)["reason"] == "SchedulingGated"
    qr = condition(result.last("Workload", prefix="pod-b-", at=1799), "QuotaReserved")
    assert (qr["status"], qr["reason"]) == ("False", "WaitingForQuota")
    assert "insufficient unused quota for cpu in flavor default" in qr["message"]
    # Kueue's requeuer retries inadmissible workloads 1 s after the release (#9232)
    assert admitted_at(result, "pod-b-") == ungated_at(result, "b") == running_at(result, "b") == 1801.0


def test_pod_group_is_one_workload_admitted_all_or_nothing():
    group = ("trainers", 3)
    objs = [make_scenario().obj(), cpu_pool(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="3").obj(), make_lq("main").cluster_queue("cq").obj(),
            pod("t-0", group=group), pod("t-1", group=group), pod("t-2", group=group, create_at="10m")]
    result = kt_run(objects=objs)
    assert not [o for t, _, o in result.versions("Workload") if t < 600]  # not before all 3 pods exist
    compose = [o for _, o in result.recorded_events("ErrWorkloadCompose")]
    assert compose and compose[0]["message"] == "'trainers' group has fewer runnable pods than expected"
    wl = result.last("Workload", prefix="trainers")
    assert wl["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    assert sorted(r["name"] for r in wl["metadata"]["ownerReferences"]) == ["t-0", "t-1", "t-2"]
    assert not any(r.get("controller") for r in wl["metadata"]["ownerReferences"])
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [3]  # one role (same shape): one PodSet of 3
    role = result.last("Pod", prefix="t-0")["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
    assert wl["spec"]["podSets"][0]["name"] == role and len(role) == 8
    assert admitted_at(result, "trainers") == 600.0
    assert [ungated_at(result, f"t-{i}") for i in range(3)] == [600.0] * 3
    assert [running_at(result, f"t-{i}") for i in range(3)] == [600.0] * 3
    fin = condition(result.last("Workload", prefix="trainers"), "Finished")
    assert (fin["status"], fin["reason"], fin["message"]) == ("True", "Succeeded", "Pods succeeded: 3/3.")

    # quota for 2 of the 3: nothing of the group starts
    small = [o if o.get("kind") != "ClusterQueue" else make_cq("cq").flavor("default", cpu="2").obj() for o in objs]
    result = kt_run(objects=small)
    assert admitted_at(result, "trainers") is None
    assert all(gates(result.last("Pod", prefix=f"t-{i}")) == [SCHEDULING_GATE] for i in range(3))
    assert not any(running_at(result, f"t-{i}") for i in range(3))


def _priority_class(name: str, value: int) -> dict:
    return make_workload_priority_class(name).value(value).obj()


def test_preempted_plain_pod_is_deleted_and_its_workload_goes_with_it():
    cq = make_cq("cq").flavor("default", cpu="1").preemption(within="LowerPriority").obj()
    objs = [make_scenario().obj(), cpu_pool(), make_flavor("default").obj(), cq,
            make_lq("main").cluster_queue("cq").obj(), _priority_class("low", 10),
            _priority_class("high", 100), pod("low", duration="2h", labels={"kueue.x-k8s.io/priority-class": "low"}),
            pod("high", create_at="10m", labels={"kueue.x-k8s.io/priority-class": "high"})]
    result = kt_run(objects=objs)
    assert running_at(result, "low") == 0.0
    evicted = result.last("Workload", prefix="pod-low-")  # its last version, at the eviction
    assert condition(evicted, "Evicted")["reason"] == "Preempted"
    assert condition(evicted, "Preempted")["reason"] == "InClusterQueue"
    deleted = [(t, o) for t, etype, o in result.versions("Pod", prefix="low") if etype == "DELETED"]
    assert [t for t, _ in deleted] == [600.0]
    target = condition(deleted[0][1], "TerminationTarget")
    assert (target["status"], target["reason"]) == ("True", "WorkloadEvicted")
    assert [t for t, etype, _ in result.versions("Workload", prefix="pod-low-") if etype == "DELETED"] == [600.0]
    assert [o["involvedObject"]["name"] for _, o in result.recorded_events("Stopped")] == ["low"]
    assert admitted_at(result, "pod-high-") == running_at(result, "high") == 600.0
    assert not any(is_true(o, "Requeued") for _, _, o in result.versions("Workload", prefix="pod-low-"))


def test_configuration_without_the_pod_framework_leaves_pods_alone():
    objs = [make_scenario().obj(), cpu_pool(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="1").obj(), make_lq("main").cluster_queue("cq").obj(),
            make_configuration().fields(integrations={"frameworks": ["batch/job"]}).obj(), pod("a"), pod("b")]
    result = kt_run(objects=objs)
    assert running_at(result, "a") == running_at(result, "b") == 0.0
    assert not result.versions("Workload")
    assert MANAGED_LABEL not in result.last("Pod", prefix="a")["metadata"]["labels"]


def test_plain_pods_run_is_deterministic():
    group = ("g", 2)
    objs = [make_scenario().obj(), cpu_pool(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="2").obj(), make_lq("main").cluster_queue("cq").obj(),
            pod("a"), pod("b", create_at="1m"), pod("g-0", group=group, create_at="2m"),
            pod("g-1", group=group, create_at="3m")]

    def trace() -> str:
        result = kt_run(objects=[json.loads(json.dumps(o)) for o in objs])
        return json.dumps([(t, etype, o) for t, _, etype, o in result.history
                           if o["kind"] in ("Pod", "Workload", "Event")], sort_keys=True)

    assert trace() == trace()


def test_pod_group_with_an_unretriable_failed_pod_finishes_when_none_is_left_running():
    group = ("g", 2)
    bad = pod("g-bad", group=group)
    bad["metadata"]["annotations"].update({"kubetwin.io/fail-after": "5m",
                                           "kueue.x-k8s.io/retriable-in-group": "false"})
    objs = [make_scenario().obj(), cpu_pool(), make_flavor("default").obj(),
            make_cq("cq").flavor("default", cpu="2").obj(), make_lq("main").cluster_queue("cq").obj(), bad,
            pod("g-ok", group=group)]
    result = kt_run(objects=objs)
    assert result.last("Pod", prefix="g-bad")["status"]["phase"] == "Failed"
    fin = condition(result.last("Workload", prefix="g"), "Finished")
    assert (fin["status"], fin["reason"], fin["message"]) == ("True", "Succeeded", "Pods succeeded: 1/2.")
    assert result.first_time("Workload", lambda o: is_true(o, "Finished"), prefix="g") == 1800.0

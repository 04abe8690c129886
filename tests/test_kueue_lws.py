"""Kueue's LeaderWorkerSet integration: one Workload per group, the group's pods gated until it is admitted.

Cases ported from kubernetes-sigs/kueue@ff69552e (Apache-2.0) pkg/controller/jobs/leaderworkerset/
leaderworkerset_webhook_test.go (TestDefault) and leaderworkerset_reconciler_test.go (TestReconciler), named in
each docstring; the behaviour tests run whole scenarios through `kubetwin.runner.run` (the LWS controller makes the
pods, Kueue queues and admits the groups, the scheduler and kubelet run them).
"""

from __future__ import annotations

import copy
import hashlib

from conftest import condition, final_objects, is_true
from k8s_builders import make_change, make_lws, make_pool, make_scenario
from kueue_builders import make_configuration, make_cq, make_flavor, make_lq, make_workload_priority_class

from kubetwin.api.loader import load_text
from kubetwin.controllers import lws_webhook as W
from kubetwin.kueue.controller import lws as K
from kubetwin.kueue.controller.pods import MANAGED_LABEL, SCHEDULING_GATE
from kubetwin.runner import run
from kubetwin.store.store import Store
from kubetwin.validation.validate import validate

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"


def lws_obj(leader: bool = True, queue: str | None = "test-queue", **tmpl_meta: dict) -> dict:
    """A bare LWS as the webhook tests build one (testingleaderworkerset.MakeLeaderWorkerSet)."""
    obj = {"apiVersion": W.API, "kind": "LeaderWorkerSet",
           "metadata": {"name": "test-lws", "namespace": "default", "uid": "test-lws", "labels": {}},
           "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {
               "containers": [{"name": "c", "image": "pause"}]}}}}}
    if queue:
        obj["metadata"]["labels"][QUEUE] = queue
    if leader:
        obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {}
    for field, meta in tmpl_meta.items():
        obj["spec"]["leaderWorkerTemplate"][field] = {**obj["spec"]["leaderWorkerTemplate"].get(field, {}),
                                                      "metadata": meta}
    return obj


def templates(obj: dict) -> dict:
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return {k: lwt[k].get("metadata") for k in ("leaderTemplate", "workerTemplate") if k in lwt}


def defaulted(queue: str, offset: bool = True, extra: dict | None = None) -> dict:
    ann = {K.SUSPENDED_BY_PARENT: K.FRAMEWORK, K.GROUP_SERVING: "true"}
    labels = {QUEUE: queue, **(extra or {})}
    return {"labels": labels, "annotations": {**ann, **({K.POD_INDEX_OFFSET: "1"} if offset else {})}}


# -- leaderworkerset_webhook_test.go TestDefault -------------------------------------------------------------
def test_webhook_default_copies_the_queue_and_marks_both_templates():
    """TestDefault "default lq is created, job has queue label": both templates get the queue label, the
    suspending-parent and serving annotations; the worker, beside a leader template, the pod index offset."""
    out = K.webhook()(lws_obj())
    assert templates(out) == {"leaderTemplate": {k: v for k, v in defaulted("test-queue", offset=False).items()},
                              "workerTemplate": defaulted("test-queue")}


def test_webhook_default_copies_the_workload_priority_class():
    """TestDefault "LeaderWorkerSet with WorkloadPriorityClass" (the queue named on the LWS: the twin does not
    model the default LocalQueue the upstream case relies on)."""
    obj = lws_obj(queue="default")
    obj["metadata"]["labels"][PRIORITY] = "high-priority"
    out = K.webhook()(obj)
    assert templates(out) == {"leaderTemplate": defaulted("default", False, {PRIORITY: "high-priority"}),
                              "workerTemplate": defaulted("default", True, {PRIORITY: "high-priority"})}


def test_webhook_default_leaves_an_lws_without_a_queue_alone():
    """TestDefault "default lq isn't created, job doesn't have queue label"."""
    obj = lws_obj(queue=None)
    assert K.webhook()(copy.deepcopy(obj)) == obj


def test_webhook_default_worker_only_lws_has_no_offset():
    """TestDefault "worker-only LWS (no leader template), no offset annotation"."""
    out = K.webhook()(lws_obj(leader=False, queue="default"))
    assert templates(out) == {"workerTemplate": defaulted("default", offset=False)}


def test_webhook_default_top_level_queue_overrides_the_templates():
    """TestDefault "queue-name on templates overridden by top-level queue"."""
    out = K.webhook()(lws_obj(leaderTemplate={"labels": {QUEUE: "user-queue"}},
                              workerTemplate={"labels": {QUEUE: "user-queue"}}))
    assert templates(out) == {"leaderTemplate": defaulted("test-queue", offset=False),
                              "workerTemplate": defaulted("test-queue")}


def test_webhook_default_worker_queue_overridden_without_leader_template():
    """TestDefault "queue-name on worker template overridden when no leader template"."""
    out = K.webhook()(lws_obj(leader=False, workerTemplate={"labels": {QUEUE: "user-queue"}}))
    assert templates(out) == {"workerTemplate": defaulted("test-queue", offset=False)}


def test_webhook_default_podset_group_name_means_no_offset():
    """TestDefault "LWS with PodSetGroupName set, no offset annotation"."""
    out = K.webhook()(lws_obj(queue="default", workerTemplate={"annotations": {K.PODSET_GROUP_NAME: "test-group"}}))
    worker = templates(out)["workerTemplate"]
    assert worker["annotations"] == {K.PODSET_GROUP_NAME: "test-group", K.SUSPENDED_BY_PARENT: K.FRAMEWORK,
                                     K.GROUP_SERVING: "true"}


# -- leaderworkerset_reconciler_test.go TestReconciler -----------------------------------------------------
def test_workload_name_hashes_the_group_owner_name():
    """GetWorkloadName(uid, name, index): "leaderworkerset-<name>-<index>-" + 5 hex of sha1(kind, group,
    "<name>-<index>", uid), as jobframework's getHash writes them."""
    digest = hashlib.sha1(b"LeaderWorkerSet\nleaderworkerset.x-k8s.io\ntest-lws-1\ntest-lws").hexdigest()[:5]
    assert K.group_workload_name(lws_obj(), 1) == f"leaderworkerset-test-lws-1-{digest}"


def test_pod_sets_without_leader_template_is_one_main():
    """TestReconciler "should create prebuilt workload": one PodSet main of size pods (1)."""
    assert [(p["name"], p["count"]) for p in K.pod_sets(lws_obj(leader=False))] == [("main", 1)]


def test_pod_sets_with_leader_template_are_leader_and_workers():
    """TestReconciler "should create prebuilt workload with leader template": size 3 -> leader 1, worker 2; the
    LWS keys are dropped from the PodSet templates but for its name label."""
    obj = lws_obj()
    obj["spec"]["leaderWorkerTemplate"]["size"] = 3
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {"labels": {
        W.NAME: "test-lws", W.GROUP_INDEX: "0", "app": "x"}}
    sets = K.pod_sets(obj)
    assert [(p["name"], p["count"]) for p in sets] == [("leader", 1), ("worker", 2)]
    assert sets[1]["template"]["metadata"]["labels"] == {W.NAME: "test-lws", "app": "x"}


def test_surge_groups_keep_their_workloads_only_during_a_rollout():
    """TestReconciler "should delete excess workload on scale down with maxSurge configured but no active rolling
    update" (replicas 1, status 2, updated 1: one Workload wanted) and "should keep surge workloads during active
    rolling update with maxSurge" (replicas 2, status 3, updated 1: three)."""
    done = lws_obj()
    done["spec"].update(replicas=1, rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": 1}})
    done["status"] = {"replicas": 2, "updatedReplicas": 1}
    assert K.wanted_groups(done) == 1
    rolling = copy.deepcopy(done)
    rolling["spec"]["replicas"] = 2
    rolling["status"] = {"replicas": 3, "updatedReplicas": 1}
    assert K.wanted_groups(rolling) == 3


def _pod(labels: dict, annotations: dict | None = None) -> dict:
    return {"metadata": {"name": "pod1", "namespace": "default", "labels": {W.NAME: "test-lws", **labels},
                         "annotations": {K.SUSPENDED_BY_PARENT: K.FRAMEWORK, K.GROUP_SERVING: "true",
                                         **(annotations or {})}},
            "spec": {"schedulingGates": [{"name": SCHEDULING_GATE}]}}


def test_set_default_skips_managed_pods_and_pods_without_group_index():
    """TestReconciler "shouldn't set default values with managed-by-kueue label" and "shouldn't set default
    values without group index label"."""
    assert K.set_default(lws_obj(), _pod({MANAGED_LABEL: "true", W.GROUP_INDEX: "0"})) is None
    assert K.set_default(lws_obj(), _pod({})) is None


def test_set_default_leader_and_worker_pods():
    """TestReconciler "should set default values (leader+worker template, leader pod)", "(leader+worker
    template, worker pod)" (the worker known by its leader-name annotation) and "(worker template, leader pod)"."""
    wl = K.group_workload_name(lws_obj(), 0)
    leader = K.set_default(lws_obj(), _pod({W.GROUP_INDEX: "0"}))
    assert leader is not None
    assert {k: v for k, v in leader["metadata"]["labels"].items() if k.startswith("kueue")} == {
        MANAGED_LABEL: "true", QUEUE: "test-queue", "kueue.x-k8s.io/pod-group-name": wl,
        "kueue.x-k8s.io/prebuilt-workload-name": wl}
    assert leader["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "1"
    assert leader["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "leader"
    worker = K.set_default(lws_obj(), _pod({W.GROUP_INDEX: "0"}, {W.LEADER_NAME: "test-lws-0"}))
    assert worker is not None and worker["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "worker"
    main = K.set_default(lws_obj(leader=False), _pod({W.GROUP_INDEX: "0"}))
    assert main is not None and main["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "main"


# -- behaviour through kubetwin.runner.run -----------------------------------------------------------------
def scenario(cpu_quota: str = "4", lws_extra: list[dict] | None = None, groups: int = 2, **kw) -> list[dict]:
    """Four 8-cpu nodes, a ClusterQueue of `cpu_quota` cpu, and an LWS of `groups` groups x size 2 (a leader and a
    worker of 2 cpu each): 4 cpu is one group's worth."""
    cq = make_cq("cq").flavor("default", cpu=cpu_quota)
    if kw.get("preempt"):
        cq = cq.preemption(within="LowerPriority")
    lws = make_lws("vllm", cpu="2").replicas(groups).size(2).leader_template(cpu="2").label(QUEUE, "lq")
    return [make_scenario("1h").obj(), make_pool("cpu", "n2-standard-8", 4).spec(bootDelay="0s").obj(),
            make_flavor("default").obj(), cq.obj(), make_lq("lq").cluster_queue("cq").obj(), lws.obj(),
            *(lws_extra or [])]


def gates(p: dict) -> list[str]:
    return [g["name"] for g in p["spec"].get("schedulingGates") or []]


def group_pods(pods: dict[str, dict], index: int) -> list[dict]:
    return [p for n, p in sorted(pods.items()) if p["metadata"]["labels"].get(W.GROUP_INDEX) == str(index)]


def test_one_group_fits_the_quota_the_other_waits_gated():
    result = run(objects=scenario())
    wls = final_objects(result, "Workload")
    names = [K.group_workload_name(result.last("LeaderWorkerSet", "vllm"), i) for i in (0, 1)]
    assert sorted(wls) == sorted(names)
    first, second = wls[names[0]], wls[names[1]]
    assert [(p["name"], p["count"]) for p in first["spec"]["podSets"]] == [("leader", 1), ("worker", 1)]
    assert first["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    assert first["metadata"]["annotations"][K.COMPONENT_INDEX] == "0"
    assert is_true(first, "Admitted")
    pending = condition(second, "QuotaReserved")
    assert (pending["status"], pending["reason"]) == ("False", "WaitingForQuota")
    assert pending["message"].startswith("couldn't assign flavors to pod set leader: insufficient unused quota "
                                         "for cpu in flavor default")
    pods = final_objects(result, "Pod")
    assert [(p["status"]["phase"], gates(p)) for p in group_pods(pods, 0)] == [("Running", [])] * 2
    assert [(p["status"]["phase"], gates(p)) for p in group_pods(pods, 1)] == [("Pending", [SCHEDULING_GATE])] * 2
    assert all(p["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == names[1]
               for p in group_pods(pods, 1))
    created = [e["message"] for _, e in result.recorded_events("CreatedWorkload")]
    assert created == [f"Created Workload: default/{n}" for n in names]
    assert result.last("LeaderWorkerSet", "vllm")["status"]["readyReplicas"] == 1


def test_raising_the_quota_admits_the_second_group():
    change = make_change("more-quota", "10m", "kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq").patch(
        {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]}}, "merge").obj()
    result = run(objects=scenario(lws_extra=[change]))
    names = [K.group_workload_name(result.last("LeaderWorkerSet", "vllm"), i) for i in (0, 1)]
    assert result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=names[0]) == 0.0
    assert result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=names[1]) == 600.0
    pods = final_objects(result, "Pod")
    assert all(p["status"]["phase"] == "Running" and not gates(p) for p in pods.values())
    assert len(pods) == 4
    assert result.last("LeaderWorkerSet", "vllm")["status"]["readyReplicas"] == 2
    # a serving group never finishes
    assert not any(is_true(o, "Finished") for _, _, o in result.versions("Workload"))


def test_higher_priority_group_preempts_the_running_one_whose_pods_come_back_gated():
    high = make_lws("urgent", cpu="2").size(2).leader_template(cpu="2").label(QUEUE, "lq").label(
        PRIORITY, "high").annotation("kubetwin.io/create-at", "10m").obj()
    objs = scenario(groups=1, preempt=True, lws_extra=[
        make_workload_priority_class("low").value(10).obj(), make_workload_priority_class("high").value(100).obj(),
        high])
    objs[5]["metadata"]["labels"][PRIORITY] = "low"
    result = run(objects=objs)
    low_wl = K.group_workload_name(result.last("LeaderWorkerSet", "vllm"), 0)
    high_wl = K.group_workload_name(result.last("LeaderWorkerSet", "urgent"), 0)
    evicted = result.first_time("Workload", lambda o: is_true(o, "Evicted"), prefix=low_wl)
    assert evicted == 600.0
    assert condition(result.last("Workload", low_wl), "QuotaReserved")["status"] == "False"
    deleted = [(t, o) for t, etype, o in result.versions("Pod", prefix="vllm-0") if etype == "DELETED"]
    assert sorted(o["metadata"]["name"] for _, o in deleted) == ["vllm-0", "vllm-0-1"]
    assert all(t == 600.0 for t, _ in deleted)
    assert condition(next(o for _, o in deleted if o["metadata"]["name"] == "vllm-0"),
                     "TerminationTarget")["reason"] == "WorkloadEvicted"
    pods = final_objects(result, "Pod")
    assert [(p["status"]["phase"], gates(p)) for p in group_pods({n: p for n, p in pods.items()
                                                                   if n.startswith("vllm")}, 0)] == [
        ("Pending", [SCHEDULING_GATE])] * 2
    assert result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=high_wl) == 600.0
    assert all(p["status"]["phase"] == "Running" for n, p in pods.items() if n.startswith("urgent"))
    assert result.last("Workload", low_wl)["metadata"]["name"] in final_objects(result, "Workload")


def test_scaling_down_deletes_the_extra_group_workload():
    change = make_change("shrink", "10m", W.API, "LeaderWorkerSet", "vllm", "default").patch(
        {"spec": {"replicas": 1}}, "merge").obj()
    result = run(objects=scenario(cpu_quota="8", lws_extra=[change]))
    names = [K.group_workload_name(result.last("LeaderWorkerSet", "vllm"), i) for i in (0, 1)]
    gone = [t for t, etype, _ in result.versions("Workload", names[1]) if etype == "DELETED"]
    assert gone == [600.0]
    assert sorted(final_objects(result, "Workload")) == [names[0]]
    assert sorted(final_objects(result, "Pod")) == ["vllm-0", "vllm-0-1"]


def test_a_changed_queue_label_moves_the_workloads_to_the_new_queue():
    """TestReconciler "should update prebuilt workload if queue-name label is updated": the LWS names a LocalQueue
    that does not exist (its Workloads Inadmissible), then, at 5m, the right one: they move there and the group
    is admitted."""
    objs = scenario(groups=1)
    objs[5]["metadata"]["labels"][QUEUE] = "nowhere"
    change = make_change("requeue", "5m", W.API, "LeaderWorkerSet", "vllm", "default").patch(
        {"metadata": {"labels": {QUEUE: "lq"}}}, "merge").obj()
    result = run(objects=[*objs, change])
    name = K.group_workload_name(result.last("LeaderWorkerSet", "vllm"), 0)
    before = condition(result.last("Workload", name, at=299), "QuotaReserved")
    assert (before["reason"], before["message"]) == ("Inadmissible", "LocalQueue nowhere doesn't exist")
    assert result.last("Workload", name)["spec"]["queueName"] == "lq"
    assert result.first_time("Workload", lambda o: is_true(o, "Admitted"), prefix=name) == 300.0
    assert all(p["status"]["phase"] == "Running" for p in final_objects(result, "Pod").values())


def test_lws_without_queue_label_is_unchanged():
    objs = scenario()
    del objs[5]["metadata"]["labels"][QUEUE]
    result = run(objects=objs)
    assert not result.versions("Workload")
    pods = final_objects(result, "Pod")
    assert len(pods) == 4 and all(p["status"]["phase"] == "Running" for p in pods.values())
    assert not any(k.startswith("kueue") for p in pods.values() for k in {**p["metadata"]["labels"],
                                                                          **p["metadata"].get("annotations", {})})
    assert "leaderTemplate" in result.last("LeaderWorkerSet", "vllm")["spec"]["leaderWorkerTemplate"]
    assert K.SUSPENDED_BY_PARENT not in (result.last("LeaderWorkerSet", "vllm")["spec"]["leaderWorkerTemplate"][
        "workerTemplate"].get("metadata") or {}).get("annotations", {})


def test_lws_framework_without_pod_framework_leaves_plain_pods_alone():
    """ImplicitlyEnabledFrameworkNames: the LWS framework enables the pod framework for its pods only."""
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": "default", "labels": {
        QUEUE: "lq"}}, "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
            "requests": {"cpu": "1"}}}]}}
    cfg = make_configuration().fields(integrations={"frameworks": ["leaderworkerset.x-k8s.io/leaderworkerset"]})
    result = run(objects=scenario(groups=1, lws_extra=[cfg.obj(), plain]))
    assert not gates(result.last("Pod", "plain"))
    assert len(final_objects(result, "Workload")) == 1
    assert all(p["status"]["phase"] == "Running" for p in final_objects(result, "Pod").values())


def test_run_does_not_depend_on_controller_order(monkeypatch):
    forward = run(objects=scenario())
    monkeypatch.setattr(Store, "reverse_dispatch", True)
    backward = run(objects=scenario())

    def outcome(result) -> list:
        return [(t, etype, o["kind"], o["metadata"]["name"], gates(o) if o["kind"] == "Pod" else None)
                for t, _, etype, o in result.history if o["kind"] in ("Pod", "Workload")
                and etype != "MODIFIED" or (o["kind"] == "Pod" and etype == "MODIFIED" and not gates(o)
                                            and (o.get("status") or {}).get("phase") == "Pending")]

    assert sorted(outcome(forward), key=repr) == sorted(outcome(backward), key=repr)
    assert forward.summary["kueue"] == backward.summary["kueue"]


def test_validate_says_nothing_of_an_unmodelled_lws_integration():
    text = "\n---\n".join(__import__("yaml").safe_dump(o) for o in scenario())
    notes = [d.message for d in validate(load_text(text, "s.yaml"))]
    assert not any("integration is not modelled" in n for n in notes)

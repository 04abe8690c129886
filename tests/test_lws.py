"""LeaderWorkerSet: the controller's groups, pod webhook, restart and startup policies, exclusive placement, scaling,
rolling updates and status, and the LWS webhook's validation.

Cases ported from kubernetes-sigs/lws @060ab4da (Apache-2.0): test/integration/controllers/leaderworkerset_test.go
(ginkgo Entries, named in each docstring), pkg/controllers/*_test.go and pkg/webhooks/*_test.go. Every pod is
placed by the twin's scheduler and run by its kubelet (`kubetwin.runner.run`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import condition, final_objects, run_with
from k8s_builders import make_lws, make_pool, make_scenario

from kubetwin.api.loader import load_text
from kubetwin.controllers import lws_webhook as W
from kubetwin.runner import run
from kubetwin.serving.modelserver import sizing
from kubetwin.serving.modelserver.modelspec import lookup_server_model
from kubetwin.serving.modelserver.perf import GpuSpec, PerfModel
from kubetwin.serving.types import EngineArgs
from kubetwin.store.store import Store
from kubetwin.validation.validate import validate

POOL_KEY = "cloud.google.com/gke-nodepool"


def cluster(pools: int = 1, nodes: int = 4, boot: str = "0s") -> list[dict]:
    return [make_scenario("1h").obj(),
            *(make_pool(f"pool-{i}", "n2-standard-32", nodes).spec(bootDelay=boot).obj() for i in range(pools))]


def patch_lws(name: str, fn: Callable[[dict], dict]) -> Callable[[Store], None]:
    def do(store: Store) -> None:
        cur = store.get("LeaderWorkerSet", "default", name)
        store.update({**cur, "metadata": {**cur["metadata"], "generation": cur["metadata"]["generation"] + 1},
                      "spec": fn(cur["spec"])})
    return do


def uids(result, name: str) -> list[str]:
    """The uids a pod of this name had over the run, in creation order."""
    out: list[str] = []
    for _, _, etype, o in result.history:
        if o["kind"] == "Pod" and o["metadata"]["name"] == name and etype == "ADDED":
            out.append(o["metadata"]["uid"])
    return out


def created_at(result, name: str) -> float:
    return next(t for t, _, etype, o in result.history
                if o["kind"] == "Pod" and o["metadata"]["name"] == name and etype == "ADDED")


def lws_pods(result) -> dict[str, dict]:
    return {n: p for n, p in final_objects(result, "Pod").items() if W.NAME in p["metadata"].get("labels", {})}


def diags(text: str) -> list:
    return validate(load_text(text, "lws.yaml"))


def test_groups_of_a_leader_and_its_workers_with_upstream_names_labels_and_env() -> None:
    """leaderworkerset_test.go "Successfully create a leaderworkerset with 2 groups, size as 4.": pods <lws>-<i>
    and <lws>-<i>-<j>; pod_webhook.go Default's labels and pod_utils.go AddLWSVariables' env."""
    result = run(objects=[*cluster(), make_lws("lws").replicas(2).size(4).obj()])
    pods = lws_pods(result)
    assert sorted(pods) == ["lws-0", "lws-0-1", "lws-0-2", "lws-0-3", "lws-1", "lws-1-1", "lws-1-2", "lws-1-3"]
    leader, worker = pods["lws-1"], pods["lws-1-2"]
    key = hashlib.sha1(b"default/lws-1").hexdigest()
    assert {W.NAME: "lws", W.GROUP_INDEX: "1", W.WORKER_INDEX: "0", W.GROUP_KEY: key}.items() \
        <= leader["metadata"]["labels"].items()
    assert {W.NAME: "lws", W.GROUP_INDEX: "1", W.WORKER_INDEX: "2", W.GROUP_KEY: key}.items() \
        <= worker["metadata"]["labels"].items()
    assert worker["metadata"]["annotations"][W.SIZE] == "4"
    assert worker["metadata"]["annotations"][W.LEADER_NAME] == "lws-1"
    assert leader["metadata"]["labels"][W.REVISION] == worker["metadata"]["labels"][W.REVISION]
    assert worker["spec"]["containers"][0]["env"][:3] == [
        {"name": "LWS_LEADER_ADDRESS", "value": "lws-1.lws.default"}, {"name": "LWS_GROUP_SIZE", "value": "4"},
        {"name": "LWS_WORKER_INDEX", "value": "2"}]
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("lws-1-2", "lws")
    assert all(p["spec"].get("nodeName") and p["status"]["phase"] == "Running" for p in pods.values())
    assert worker["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert worker["metadata"]["ownerReferences"][0]["uid"] == leader["metadata"]["uid"]


def test_group_size_one_makes_leaders_only() -> None:
    """leaderworkerset_test.go "group size is 1": one pod per group, no workers."""
    result = run(objects=[*cluster(), make_lws("solo").replicas(3).obj()])
    assert sorted(lws_pods(result)) == ["solo-0", "solo-1", "solo-2"]
    lws = final_objects(result, "LeaderWorkerSet")["solo"]
    assert lws["status"]["readyReplicas"] == 3 and lws["status"]["replicas"] == 3


def test_zero_replicas_makes_no_pods() -> None:
    """leaderworkerset_test.go "zero replicas": no groups, and Available (0 of 0 ready)."""
    result = run(objects=[*cluster(), make_lws("none").replicas(0).size(2).obj()])
    assert lws_pods(result) == {}
    assert condition(final_objects(result, "LeaderWorkerSet")["none"], "Available")["status"] == "True"


def test_deleting_the_lws_deletes_its_groups() -> None:
    """The leader StatefulSet is owned by the LWS and each worker StatefulSet by its leader pod
    (leaderworkerset_controller.go SetupWithManager Owns; pod_controller.go setControllerReferenceWithStatefulSet):
    the garbage collector removes every group with the LeaderWorkerSet."""
    result = run(objects=[*cluster(), make_lws("g").size(3).annotation("kubetwin.io/delete-at", "10m").obj()])
    assert lws_pods(result) == {} and len(uids(result, "g-0-2")) == 1


def test_env_leads_a_containers_own_variables(monkeypatch) -> None:
    """pod_utils_test.go AddLWSVariables: the LWS variables come first and replace a container's own of the same
    name; its other variables follow."""
    obj = make_lws("env").size(2).obj()
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "LWS_GROUP_SIZE", "value": "99"}, {"name": "MINE", "value": "1"}]
    env = lws_pods(run(objects=[*cluster(), obj]))["env-0-1"]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX", "MINE"]
    assert env[1]["value"] == "2"


def test_unique_per_replica_subdomain() -> None:
    """pod_webhook.go Default (subdomainPolicy UniquePerReplica: the leader's subdomain is its own name) and
    pod_controller.go constructWorkerStatefulSetApplyConfiguration (the workers' serviceName is the leader's name);
    leaderworkerset_test.go "subdomain policy ... more than one headless service created" names one per group."""
    obj = make_lws("sd").replicas(2).size(2).obj()
    obj["spec"]["networkConfig"] = {"subdomainPolicy": "UniquePerReplica"}
    pods = lws_pods(run(objects=[*cluster(), obj]))
    assert [pods[n]["spec"]["subdomain"] for n in ("sd-0", "sd-0-1", "sd-1", "sd-1-1")] == [
        "sd-0", "sd-0", "sd-1", "sd-1"]
    assert pods["sd-1-1"]["spec"]["containers"][0]["env"][0] == {"name": "LWS_LEADER_ADDRESS",
                                                                 "value": "sd-1.sd-1.default"}


def _services(result) -> dict[str, dict]:
    return final_objects(result, "Service")


def test_shared_subdomain_makes_one_headless_service_owned_by_the_lws() -> None:
    """leaderworkerset_test.go "headless service created" / controller_utils.go CreateHeadlessServiceIfNotExists:
    subdomainPolicy Shared (the default) gives one Service named after the LWS, clusterIP None,
    publishNotReadyAddresses, selecting the LWS's pods, labelled with its name and owned by it; it goes with the
    LWS."""
    result = run(objects=[*cluster(), make_lws("hs").replicas(2).size(2).obj()])
    svc = _services(result)["hs"]
    want = {"clusterIP": "None", "selector": {W.NAME: "hs"}, "publishNotReadyAddresses": True}
    assert {k: svc["spec"][k] for k in want} == want  # the API server defaults the rest (type, sessionAffinity)
    assert svc["metadata"]["labels"] == {W.NAME: "hs"}
    assert [(r["kind"], r["name"], r["controller"]) for r in svc["metadata"]["ownerReferences"]] == [
        ("LeaderWorkerSet", "hs", True)]
    gone = run(objects=[*cluster(), make_lws("hs").size(2).annotation("kubetwin.io/delete-at", "10m").obj()])
    assert "hs" not in _services(gone)


def test_unique_per_replica_makes_a_headless_service_per_group_owned_by_its_leader() -> None:
    """pod_controller.go Reconcile (UniquePerReplica): a Service per leader pod, named after it, selecting its
    group (name and group-index labels), owned by the leader pod; none named after the LWS."""
    obj = make_lws("sd").replicas(2).size(2).obj()
    obj["spec"]["networkConfig"] = {"subdomainPolicy": "UniquePerReplica"}
    svcs = _services(run(objects=[*cluster(), obj]))
    assert sorted(svcs) == ["sd-0", "sd-1"]
    assert svcs["sd-1"]["spec"]["selector"] == {W.NAME: "sd", W.GROUP_INDEX: "1"}
    assert [(r["kind"], r["name"]) for r in svcs["sd-1"]["metadata"]["ownerReferences"]] == [("Pod", "sd-1")]


def test_scale_up_and_down_by_whole_groups(monkeypatch) -> None:
    """leaderworkerset_test.go "scale up number of groups" and "scale down number of groups": groups past the
    new replicas go whole, new ones come whole."""
    result = run_with(monkeypatch, [*cluster(), make_lws("s").replicas(2).size(2).obj()], [
        (60, patch_lws("s", lambda s: {**s, "replicas": 4})),
        (120, patch_lws("s", lambda s: {**s, "replicas": 1}))])
    assert sorted(lws_pods(result)) == ["s-0", "s-0-1"]
    added = {o["metadata"]["name"] for _, _, e, o in result.history if o["kind"] == "Pod" and e == "ADDED"}
    assert {"s-2", "s-2-1", "s-3", "s-3-1"} <= added
    assert final_objects(result, "LeaderWorkerSet")["s"]["status"]["replicas"] == 1
    assert len(uids(result, "s-0")) == 1  # group 0 untouched


def test_scale_down_to_zero_and_up_from_zero(monkeypatch) -> None:
    """leaderworkerset_test.go "scale down to 0" and "scale up from 0"."""
    result = run_with(monkeypatch, [*cluster(), make_lws("z").replicas(1).size(2).obj()], [
        (60, patch_lws("z", lambda s: {**s, "replicas": 0})),
        (120, patch_lws("z", lambda s: {**s, "replicas": 2}))])
    assert sorted(lws_pods(result)) == ["z-0", "z-0-1", "z-1", "z-1-1"]
    assert len(uids(result, "z-0")) == 2


def test_hpa_scales_groups_through_the_scale_subresource() -> None:
    """leaderworkerset_test.go "HPA is able trigger scaling up/down through scale endpoint": an HPA whose
    scaleTargetRef is the LeaderWorkerSet writes its replicas (the CRD's scale subresource: spec.replicas, the
    leaders selected by status.hpaPodSelector) and the controller adds whole groups."""
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
           "spec": {"scaleTargetRef": {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                       "name": "hp"}, "minReplicas": 3, "maxReplicas": 4}}
    result = run(objects=[*cluster(), make_lws("hp").replicas(1).size(2).obj(), hpa])
    assert sorted(lws_pods(result)) == ["hp-0", "hp-0-1", "hp-1", "hp-1-1", "hp-2", "hp-2-1"]
    rescale = [o["message"] for _, _, _, o in result.history if o["kind"] == "Event"
               and o.get("reason") == "SuccessfulRescale"]
    assert rescale and rescale[0].startswith("New size: 3; reason: Current number of replicas below Spec.MinReplicas")


def test_restart_policy_none_keeps_the_group_when_a_worker_restarts() -> None:
    """leaderworkerset_test.go "Pod restart will not recreate the pod group when restart policy is None"."""
    obj = make_lws("n").size(3).restart_policy("None").worker_annotation("kubetwin.io/fail-after", "2m").obj()
    result = run(objects=[*cluster(), obj])
    assert len(uids(result, "n-0")) == 1 and len(uids(result, "n-0-1")) == 1
    assert lws_pods(result)["n-0-1"]["status"]["containerStatuses"][0]["restartCount"] > 0


def test_default_restart_policy_recreates_the_group_on_a_worker_restart() -> None:
    """leaderworkerset_test.go "Pod restart will delete the pod group when restart policy is
    RecreateGroupOnPodRestart" (the webhook's default); pod_controller.go's RecreateGroup event."""
    obj = make_lws("r").size(3).worker_annotation("kubetwin.io/fail-after", "2m").obj()
    result = run(objects=[*cluster(), obj])
    assert final_objects(result, "LeaderWorkerSet")["r"]["spec"]["leaderWorkerTemplate"]["restartPolicy"] == \
        "RecreateGroupOnPodRestart"
    assert len(uids(result, "r-0")) > 1 and len(uids(result, "r-0-2")) > 1
    events = [o for _, _, _, o in result.history if o["kind"] == "Event" and o.get("reason") == "RecreateGroup"]
    assert events and "deleted leader pod r-0 to recreate group 0" in events[0]["message"]


def test_deleted_worker_recreates_the_group(monkeypatch) -> None:
    """pod_controller_test.go TestHandleRestartPolicyUsesCurrentWorkerOwnership "current worker statefulset owner
    triggers group recreation": a deleted worker of the current leader takes its group down and back."""
    result = run_with(monkeypatch, [*cluster(), make_lws("d").size(2).obj()],
                      [(60, lambda s: s.delete("Pod", "default", "d-0-1"))])
    assert len(uids(result, "d-0")) == 2 and len(uids(result, "d-0-1")) == 2
    assert sorted(lws_pods(result)) == ["d-0", "d-0-1"]


def test_deleted_worker_under_none_is_made_again_alone(monkeypatch) -> None:
    """leaderworkerset_test.go "Deleted worker statefulSet will be recreated" under restartPolicy None: only the
    worker comes back (its StatefulSet makes it again)."""
    result = run_with(monkeypatch, [*cluster(), make_lws("k").size(2).restart_policy("None").obj()],
                      [(60, lambda s: s.delete("Pod", "default", "k-0-1"))])
    assert len(uids(result, "k-0")) == 1 and len(uids(result, "k-0-1")) == 2


@pytest.mark.parametrize("policy", ["None", "RecreateGroupOnPodRestart"])
def test_deleted_leader_takes_its_workers_with_it(monkeypatch, policy: str) -> None:
    """leaderworkerset_test.go "leader statefulset deleted will be recreated" at the pod level, and
    pod_controller_test.go TestHandleRestartPolicyUsesCurrentWorkerOwnership "stale worker statefulset owner is
    ignored": a leader deleted by someone else is made again, its workers (owned by the old leader) are garbage
    collected and made again for the new one, under either policy."""
    result = run_with(monkeypatch, [*cluster(), make_lws("e").size(2).restart_policy(policy).obj()],
                      [(60, lambda s: s.delete("Pod", "default", "e-0"))])
    assert len(uids(result, "e-0")) == 2 and len(uids(result, "e-0-1")) == 2
    pods = lws_pods(result)
    assert pods["e-0-1"]["metadata"]["ownerReferences"][0]["uid"] == pods["e-0"]["metadata"]["uid"]


def test_recreate_after_start_waits_while_a_pod_is_pending() -> None:
    """leaderworkerset_test.go "Pod restart will not recreate the pod group when restart policy is
    RecreateGroupAfterStart, and a pod is pending": a worker that cannot be placed keeps the group."""
    obj = make_lws("a").size(3).restart_policy("RecreateGroupAfterStart").leader_template(cpu="1").obj()
    wt = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    wt["metadata"] = {"annotations": {"kubetwin.io/fail-after": "2m"}}
    wt["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "20"}}  # one n2-standard-32 node holds one worker
    result = run(objects=[*cluster(nodes=1), obj])
    pods = lws_pods(result)
    assert sum(p["status"]["phase"] == "Pending" for p in pods.values()) == 1
    assert max(cs["restartCount"] for p in pods.values() for cs in p["status"].get("containerStatuses") or []) > 0
    assert len(uids(result, "a-0")) == 1  # restarts of the running worker do not recreate a pending group


def test_recreate_after_start_recreates_once_started() -> None:
    """leaderworkerset_test.go "Pod restart will recreate the pod group when restart policy is
    RecreateGroupAfterStart, and no pod is pending"."""
    obj = make_lws("b").size(2).restart_policy("RecreateGroupAfterStart") \
        .worker_annotation("kubetwin.io/fail-after", "2m").obj()
    result = run(objects=[*cluster(), obj])
    assert len(uids(result, "b-0")) > 1


@pytest.mark.parametrize("policy", ["LeaderCreated", "LeaderReady"])
def test_startup_policy(policy: str) -> None:
    """leaderworkerset_test.go "create a leaderworkerset with spec.startupPolicy=LeaderReady" / "=LeaderCreated":
    under LeaderReady the workers are created only once the leader pod is Ready."""
    result = run(objects=[*cluster(boot="2m"), make_lws("p").size(2).startup_policy(policy).obj()])
    leader_ready = next(t for t, _, _, o in result.history if o["kind"] == "Pod" and o["metadata"]["name"] == "p-0"
                        and condition(o, "Ready").get("status") == "True")
    if policy == "LeaderCreated":
        assert created_at(result, "p-0-1") == created_at(result, "p-0") < leader_ready
    else:
        assert created_at(result, "p-0-1") >= leader_ready > created_at(result, "p-0")


def test_exclusive_topology_one_group_per_domain() -> None:
    """leaderworkerset_test.go "Leader/worker pods/Statefulset have required labels and annotations when exclusive
    placement enabled"; pod_webhook_test.go TestSetExclusiveAffinities: the leader's podAffinity to its group-key
    and podAntiAffinity to any other, the workers' nodeSelector for the leader's domain (pod_controller.go
    setNodeSelectorForWorkerPods). Two groups over two pools: each pool holds one whole group."""
    obj = make_lws("x").replicas(2).size(3).obj()
    obj["metadata"]["annotations"] = {W.EXCLUSIVE: POOL_KEY}
    result = run(objects=[*cluster(pools=2, nodes=3), obj])
    pods = lws_pods(result)
    pools = {}
    for p in pods.values():
        node = final_objects(result, "Node")[p["spec"]["nodeName"]]
        pools.setdefault(p["metadata"]["labels"][W.GROUP_INDEX], set()).add(node["metadata"]["labels"][POOL_KEY])
    assert all(len(v) == 1 for v in pools.values()) and pools["0"] != pools["1"]
    leader = pods["x-0"]
    key = leader["metadata"]["labels"][W.GROUP_KEY]
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    assert leader["spec"]["affinity"]["podAffinity"][req] == [{"labelSelector": {"matchExpressions": [
        {"key": W.GROUP_KEY, "operator": "In", "values": [key]}]}, "topologyKey": POOL_KEY}]
    assert leader["spec"]["affinity"]["podAntiAffinity"][req] == [{"labelSelector": {"matchExpressions": [
        {"key": W.GROUP_KEY, "operator": "Exists"}, {"key": W.GROUP_KEY, "operator": "NotIn", "values": [key]}]},
        "topologyKey": POOL_KEY}]
    assert pods["x-0-2"]["spec"]["nodeSelector"] == {POOL_KEY: next(iter(pools["0"]))}


def test_exclusive_topology_third_group_waits_for_a_domain() -> None:
    """The podAntiAffinity keeps a group off a domain another group holds: three groups over two pools leave the
    third leader Pending (and its workers uncreated, as the leader is not bound)."""
    obj = make_lws("y").replicas(3).size(2).obj()
    obj["metadata"]["annotations"] = {W.EXCLUSIVE: POOL_KEY}
    pods = lws_pods(run(objects=[*cluster(pools=2, nodes=3), obj]))
    pending = [n for n, p in pods.items() if p["status"]["phase"] == "Pending"]
    assert len(pending) == 1 and pending[0] in ("y-0", "y-1", "y-2")
    assert f"{pending[0]}-1" not in pods


@pytest.mark.parametrize(("size", "sub", "policy", "want"), [
    (4, 2, None, {"0": "0", "1": "0", "2": "1", "3": "1"}),  # "Even number of pods"
    (5, 2, None, {"0": "0", "1": "0", "2": "0", "3": "1", "4": "1"}),  # "Odd number of pods, first ... extra"
    (3, 1, None, {"0": "0", "1": "1", "2": "2"}),  # "SubGroupSize 1, workerIndex 1/2"
    (5, 2, "LeaderExcluded", {"1": "0", "2": "0", "3": "1", "4": "1"}),  # leader in no sub-group
])
def test_subgroup_index_labels(size, sub, policy, want) -> None:
    """pod_webhook_test.go TestGetSubGroupIndex's cases, through the webhook's labels on real pods (with
    LeaderExcluded the leader carries no sub-group)."""
    pods = lws_pods(run(objects=[*cluster(), make_lws("g").size(size).subgroup(sub, policy).obj()]))
    got = {p["metadata"]["labels"][W.WORKER_INDEX]: p["metadata"]["labels"].get(W.SUBGROUP_INDEX)
           for p in pods.values()}
    assert {k: v for k, v in got.items() if v is not None} == want
    leader = pods["g-0"]
    if policy is None:
        assert leader["metadata"]["labels"][W.SUBGROUP_KEY] == hashlib.sha1(b"g-0/0").hexdigest()
    assert pods["g-0-1"]["metadata"]["annotations"][W.SUBGROUP_SIZE] == str(sub)


def test_status_available_and_progressing_conditions_with_events() -> None:
    """leaderworkerset_test.go "Testing condition switch from progressing to available to progressing" and
    "Leaderworkerset has available state with correct event": Progressing while groups start, then Available
    (Progressing turned False), each with its event."""
    result = run(objects=[*cluster(boot="1m"), make_lws("c").replicas(2).size(2).obj()])
    lws = final_objects(result, "LeaderWorkerSet")["c"]
    assert condition(lws, "Available") | {"lastTransitionTime": ""} == {
        "type": "Available", "status": "True", "reason": "AllGroupsReady", "message": "All replicas are ready",
        "observedGeneration": 1, "lastTransitionTime": ""}
    assert condition(lws, "Progressing")["status"] == "False"
    assert lws["status"]["hpaPodSelector"] == f"{W.NAME}=c,{W.WORKER_INDEX}=0"
    assert (lws["status"]["replicas"], lws["status"]["readyReplicas"], lws["status"]["updatedReplicas"]) == (2, 2, 2)
    msgs = [o["message"] for _, _, _, o in result.history if o["kind"] == "Event"
            and o["involvedObject"]["kind"] == "LeaderWorkerSet"]
    assert "Replicas are progressing, with 0 groups ready of total 2 groups" in msgs
    assert "All replicas are ready, with 2 groups ready of total 2 groups" in msgs
    assert "Created leader statefulset c" in msgs and "Created worker statefulset for leader pod c-1" in msgs


def test_template_change_rolls_groups_highest_index_first(monkeypatch) -> None:
    """leaderworkerset_test.go "leaderTemplate changed with default strategy": maxUnavailable 1 recreates one
    group at a time from the highest index; UpdateInProgress while it runs; all updated at the end."""
    result = run_with(monkeypatch, [*cluster(), make_lws("u").replicas(3).size(2).obj()],
                      [(300, patch_lws("u", lambda s: {**s, "leaderWorkerTemplate": {
                          **s["leaderWorkerTemplate"], "workerTemplate": {"spec": {"containers": [{
                              "name": "worker", "image": "busybox:2", "resources": {"requests": {"cpu": "1"}}}]}}}}))])
    second = {n: created_at_nth(result, n, 1) for n in ("u-0", "u-1", "u-2")}
    assert second["u-2"] <= second["u-1"] <= second["u-0"]
    pods = lws_pods(result)
    assert {p["spec"]["containers"][0]["image"] for p in pods.values()} == {"busybox:2"}
    lws = final_objects(result, "LeaderWorkerSet")["u"]
    assert lws["status"]["updatedReplicas"] == 3 and condition(lws, "Available")["status"] == "True"
    seen = {c["type"] for _, _, _, o in result.history if o["kind"] == "LeaderWorkerSet"
            for c in (o.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
    assert "UpdateInProgress" in seen


def created_at_nth(result, name: str, n: int) -> float:
    return [t for t, _, etype, o in result.history
            if o["kind"] == "Pod" and o["metadata"]["name"] == name and etype == "ADDED"][n]


def test_max_surge_adds_burst_groups_for_the_update(monkeypatch) -> None:
    """leaderworkerset_test.go "rolling update with maxUnavailable zero and maxSurge set": a burst group (index
    replicas) at the new revision exists while the update runs, never fewer than replicas groups are ready once
    it started, and the burst group is gone at the end."""
    obj = make_lws("m").replicas(2).size(2).rollout(maxUnavailable=0, maxSurge=1).obj()
    result = run_with(monkeypatch, [*cluster(), obj], [(300, patch_lws("m", lambda s: {
        **s, "leaderWorkerTemplate": {**s["leaderWorkerTemplate"], "workerTemplate": {"spec": {"containers": [{
            "name": "worker", "image": "busybox:2", "resources": {"requests": {"cpu": "1"}}}]}}}}))])
    assert uids(result, "m-2") and uids(result, "m-2-1")  # the burst group came and went
    assert sorted(lws_pods(result)) == ["m-0", "m-0-1", "m-1", "m-1-1"]
    assert {p["spec"]["containers"][0]["image"] for p in lws_pods(result).values()} == {"busybox:2"}
    ready = [o["status"].get("readyReplicas", 0) for t, _, _, o in result.history
             if o["kind"] == "LeaderWorkerSet" and t >= 300 and o.get("status")]
    assert ready and min(ready) >= 2  # maxUnavailable 0: the update never drops below 2 ready groups
    assert final_objects(result, "LeaderWorkerSet")["m"]["status"]["replicas"] == 2


def test_partition_keeps_groups_below_it(monkeypatch) -> None:
    """leaderworkerset_test.go "rolling update with the partition setting": groups below partition keep the old
    revision."""
    obj = make_lws("q").replicas(3).size(2).rollout(partition=2, maxUnavailable=1).obj()
    result = run_with(monkeypatch, [*cluster(), obj], [(300, patch_lws("q", lambda s: {
        **s, "leaderWorkerTemplate": {**s["leaderWorkerTemplate"], "workerTemplate": {"spec": {"containers": [{
            "name": "worker", "image": "busybox:2", "resources": {"requests": {"cpu": "1"}}}]}}}}))])
    images = {n: p["spec"]["containers"][0]["image"] for n, p in lws_pods(result).items()}
    assert images == {"q-0": "busybox", "q-0-1": "busybox", "q-1": "busybox", "q-1-1": "busybox",
                      "q-2": "busybox:2", "q-2-1": "busybox:2"}
    assert final_objects(result, "LeaderWorkerSet")["q"]["status"]["updatedReplicas"] == 1


LWS = """apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: v{annotations}}}
spec:
  replicas: {replicas}
  {rollout}
  leaderWorkerTemplate:
    size: {size}
    {sub}
    workerTemplate:
      spec:
        containers: [{{name: c, image: x}}]
"""


def lws_text(replicas: int = 1, size: int = 2, rollout: str = "", sub: str = "", annotations: str = "") -> str:
    return LWS.format(replicas=replicas, size=size, rollout=rollout, sub=sub, annotations=annotations)


@pytest.mark.parametrize(("text", "field", "words"), [
    # leaderworkerset_webhook.go generalValidate; leaderworkerset_webhook_test.go TestIsNotMoreThan100Percent
    # "valid input - greater than 100" and TestValidateNonnegativeOrZeroField "input less than 0"
    (lws_text(rollout="rolloutStrategy: {rollingUpdateConfiguration: {maxUnavailable: 0, maxSurge: 0}}"),
     "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable", "must not be 0 when `maxSurge` is 0"),
    (lws_text(rollout="rolloutStrategy: {rollingUpdateConfiguration: {maxSurge: '101%'}}"),
     "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge", "must not be greater than 100%"),
    (lws_text(rollout="rolloutStrategy: {rollingUpdateConfiguration: {maxUnavailable: -1}}"),
     "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable", "must be greater than or equal to 0"),
    (lws_text(size=5, sub="subGroupPolicy: {subGroupSize: 3}"),
     "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize", "size or size - 1 must be divisible by subGroupSize"),
    (lws_text(size=4, sub="subGroupPolicy: {subGroupSize: 2, subGroupPolicyType: LeaderExcluded}"),
     "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize",
     "size-1 must be divisible by subGroupSize when using LeaderExcluded"),
    (lws_text(annotations=", annotations: {leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology: k}"),
     "metadata.annotations.leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
     "cannot have subgroup-exclusive-topology without subGroupSize set"),
])
def test_webhook_refusals(text, field, words) -> None:
    """leaderworkerset_webhook.go generalValidate's refusals, in its words."""
    errors = [d for d in diags(text) if d.severity == "error"]
    assert [d.field for d in errors] == [field]
    assert words in errors[0].message and "vleaderworkerset.kb.io" in errors[0].message


def test_crd_schema_refuses_an_unknown_restart_policy() -> None:
    """The CRD's enum (config/crd/bases): restartPolicy is Default, RecreateGroupOnPodRestart,
    RecreateGroupAfterStart or None."""
    text = lws_text().replace("    size: 2\n", "    size: 2\n    restartPolicy: Always\n")
    errors = [d for d in diags(text) if d.severity == "error"]
    assert errors and errors[0].field == "spec.leaderWorkerTemplate.restartPolicy"


def test_a_clean_lws_validates_and_volume_claim_templates_get_a_notice() -> None:
    """A valid LWS is accepted (simulated: no "not simulated" notice); volumeClaimTemplates say what the run does."""
    assert diags(lws_text(replicas=2, size=4)) == []
    assert diags(lws_text(rollout="rolloutStrategy: {rollingUpdateConfiguration: {maxSurge: 1}}")) == []
    notes = diags(lws_text(sub="volumeClaimTemplates: [{metadata: {name: d}, spec: {accessModes: [ReadWriteOnce], "
                               "resources: {requests: {storage: 1Gi}}}}]"))
    assert [d.severity for d in notes] == ["notice"] and "volumeClaimTemplates" in notes[0].message


# -- a vLLM server over an LWS group ---------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "lws-vllm-multihost.yaml"


def example_objects(restart: str = "RecreateGroupOnPodRestart", worker_fails: str | None = None) -> list[dict]:
    """examples/lws-vllm-multihost.yaml, with another restart policy and a worker that exits after a while."""
    objs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    lws = next(o for o in objs if o["kind"] == "LeaderWorkerSet")
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = restart
    if worker_fails:
        lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
            "annotations": {"kubetwin.io/fail-after": worker_fails}}
    return objs


def test_lws_leader_serves_over_the_groups_hosts() -> None:
    """lws docs/examples/vllm/GPU/lws.yaml's layout (TP 8 in a host, PP 2 across two): the leader's vLLM is sized
    over the group's 16 GPUs (one host's 8 could not hold Llama-3.1-405B's weights), serves every request, and
    its GPU-hours count both hosts."""
    result = run(objects=example_objects())
    s = result.summary["serving"]["overall"]
    assert s["completed"] > 2000 and s["failed_503"] == s["rejected_429"] == 0
    assert s["completed"] + s["in_flight_at_end"] == s["requests"]
    pods = lws_pods(result)
    assert sorted(pods) == ["vllm-0", "vllm-0-1"]
    assert pods["vllm-0"]["spec"]["nodeName"] != pods["vllm-0-1"]["spec"]["nodeName"]
    bound = next(t for t, _, _, o in result.history if o["kind"] == "Pod" and o["metadata"]["name"] == "vllm-0"
                 and o["spec"].get("nodeName"))
    assert s["gpu_hours"] == pytest.approx(16 * (7200 - bound) / 3600, rel=1e-3)
    # the LWS's headless Service selects the same pods but is no serving pool (no virtual IP): the pool's SLO
    # (kubetwin.io/slo-tpot 100ms) stays the run's
    assert "vllm" in final_objects(result, "Service")
    assert s["slo"] == {"ttft_seconds": 2.0, "tpot_seconds": 0.1}


def test_a_worker_exit_under_each_restart_policy() -> None:
    """leaderworkerset_test.go "Pod restart will delete the pod group when restart policy is
    RecreateGroupOnPodRestart" / "... will not recreate the pod group when restart policy is None", with traffic:
    recreating the group takes the 405B server down for a new cold start (503s), None keeps the leader serving."""
    recreate = run(objects=example_objects(worker_fails="70m"))
    none = run(objects=example_objects("None", worker_fails="70m"))
    assert len(uids(recreate, "vllm-0")) == 2 and len(uids(none, "vllm-0")) == 1
    assert recreate.summary["serving"]["overall"]["failed_503"] > 100
    assert none.summary["serving"]["overall"]["failed_503"] == 0


def test_pipeline_sends_between_hosts_cost_more_than_over_nvlink() -> None:
    """The stage-to-stage sends of a server spread over hosts run over the pool's network tier (workloads.network:
    TCPXO's per-GPU NIC share and latency), slower than the same sends over one host's NVLink."""
    spec = lookup_server_model("meta-llama/Llama-3.1-405B-Instruct", ())
    gpu = GpuSpec.from_catalog("nvidia-h100-mega-80gb")
    node = {"metadata": {"name": "n", "labels": {
        "node.kubernetes.io/instance-type": "a3-megagpu-8g",
        "cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb",
        "topology.kubernetes.io/zone": "us-central1-a"}}}
    links = sizing.host_links(EngineArgs(model="m", tensor_parallel_size=8, pipeline_parallel_size=2), node, 2, 8)
    assert links is not None and links.tier == "tcpxo" and links.interconnect("tp") is None
    local = PerfModel(spec, gpu, 8, pp=2)
    spread = PerfModel(spec, gpu, 8, pp=2, pp_link=links.interconnect("pp"))
    assert spread.iteration_time(1, 0, 1000, 1) > local.iteration_time(1, 0, 1000, 1)
    wide = sizing.host_links(EngineArgs(model="m", tensor_parallel_size=16), node, 2, 8)
    assert wide is not None and wide.interconnect("tp") is not None  # TP 16 spans both hosts


def test_only_a_groups_leader_spans_hosts() -> None:
    """sizing.group_hosts: a leader (worker-index 0) with the size annotation spans its group; a worker or a
    plain pod one host (a Deployment's vLLM with TP x PP over its GPUs is still refused as vLLM refuses it)."""
    leader = {"metadata": {"labels": {W.WORKER_INDEX: "0"}, "annotations": {W.SIZE: "2"}}}
    worker = {"metadata": {"labels": {W.WORKER_INDEX: "1"}, "annotations": {W.SIZE: "2"}}}
    assert [sizing.group_hosts(p) for p in (leader, worker, {"metadata": {}})] == [2, 1, 1]


# -- TPU: pkg/utils/accelerators/tpu.go AddTPUVariables -------------------------------------------------------

def tpu_spec() -> dict:
    return {"subdomain": "default", "containers": [{"name": "c", "image": "x",
                                                    "resources": {"limits": {"google.com/tpu": "4"}}}]}


def tpu_env(name: str, worker: str, size: int = 2, leader_tpus: bool = False, sub: tuple[str, str] | None = None):
    labels = {W.WORKER_INDEX: worker, **({W.SUBGROUP_INDEX: sub[0]} if sub else {})}
    ann = {**({W.LEADER_REQUESTS_TPUS: "true"} if leader_tpus else {}), **({W.SUBGROUP_SIZE: sub[1]} if sub else {})}
    spec = W.add_tpu_variables(name, labels, ann, tpu_spec(), size)
    return {e["name"]: e["value"] for e in spec["containers"][0]["env"]}


@pytest.mark.parametrize(("name", "worker", "leader_tpus", "sub", "want_id", "want_hosts"), [
    # tpu_test.go TestAddTPUVariables "Leader requests TPU resources, leader pod" / "..., worker pod"
    ("test-sample-0", "0", True, None, "0", "test-sample-0.default,test-sample-0-1.default"),
    ("test-sample-0-1", "1", True, None, "1", "test-sample-0.default,test-sample-0-1.default"),
    # "Leader does not request TPU resources, worker pod"
    ("test-sample-0-1", "1", False, None, "0", "test-sample-0-1.default"),
    # TestAddTPUVariablesSubGroup "Leader requests TPU resources, worker with subgroup index > 0"
    ("test-sample-1-7", "7", True, ("1", "4"), "3",
     "test-sample-1-4.default,test-sample-1-5.default,test-sample-1-6.default,test-sample-1-7.default"),
    # "Leader does not request TPU resources, worker with subgroup index > 0"
    ("test-sample-1-5", "5", False, ("1", "4"), "0",
     "test-sample-1-5.default,test-sample-1-6.default,test-sample-1-7.default,test-sample-1-8.default"),
    # "Worker 1 of group size 3 with subgroup size 1"
    ("prefill-0-1", "1", True, ("1", "1"), "0", "prefill-0-1.default"),
])
def test_tpu_variables(name, worker, leader_tpus, sub, want_id, want_hosts) -> None:
    """pkg/utils/accelerators/tpu_test.go's cases: TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, TPU_NAME and
    TPU_PROCESS_ADDRESSES at the default TPU_PROCESS_PORT 8476."""
    env = tpu_env(name, worker, leader_tpus=leader_tpus, sub=sub)
    assert env["TPU_WORKER_ID"] == want_id and env["TPU_WORKER_HOSTNAMES"] == want_hosts
    assert env["TPU_NAME"] == (name if worker == "0" else name.rsplit("-", 1)[0])
    assert env["TPU_PROCESS_ADDRESSES"] == ",".join(f"{h}:8476" for h in want_hosts.split(","))
    assert env["TPU_PROCESS_PORT"] == "8476"


def test_tpu_variables_left_alone_when_set() -> None:
    """tpu_test.go "Skip injection if TPU_WORKER_ID already exists, non-subgroup"."""
    spec = tpu_spec()
    spec["containers"][0]["env"] = [{"name": "TPU_WORKER_ID", "value": "0"}]
    out = W.add_tpu_variables("t-0-1", {W.WORKER_INDEX: "1"}, {}, spec, 2)
    assert out["containers"][0]["env"] == [{"name": "TPU_WORKER_ID", "value": "0"}]


def test_tpu_lws_over_a_multi_host_slice() -> None:
    """An LWS of 4 TPU pods (google.com/tpu: 4 each) on a v5e 4x4 slice (4 hosts): every pod placed on the slice,
    with the group's hostnames in TPU_WORKER_HOSTNAMES and its TPU_WORKER_ID (the leader asks for TPUs too: the
    leader-requests-tpus annotation on the workers)."""
    pool = make_pool("tpu", "ct5lp-hightpu-4t", 4).spec(bootDelay="0s", placementPolicy={"tpuTopology": "4x4"}).obj()
    obj = make_lws("t").size(4).obj()
    tmpl = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    tmpl["nodeSelector"] = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                            "cloud.google.com/gke-tpu-topology": "4x4"}
    tmpl["containers"][0]["resources"] = {"limits": {"google.com/tpu": "4"}}
    pods = lws_pods(run(objects=[make_scenario("1h").obj(), pool, obj]))
    assert sorted(pods) == ["t-0", "t-0-1", "t-0-2", "t-0-3"]
    assert all(p["status"]["phase"] == "Running" for p in pods.values())
    hosts = "t-0.t,t-0-1.t,t-0-2.t,t-0-3.t"
    for name, want in (("t-0", "0"), ("t-0-2", "2")):
        env = {e["name"]: e["value"] for e in pods[name]["spec"]["containers"][0]["env"]}
        assert (env["TPU_WORKER_HOSTNAMES"], env["TPU_WORKER_ID"], env["TPU_NAME"]) == (hosts, want, "t-0")
    assert pods["t-0-2"]["metadata"]["annotations"][W.LEADER_REQUESTS_TPUS] == "true"

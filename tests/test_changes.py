"""Change objects (kubetwin.changes, issue 36 item 2): kubectl patch's three patch types as the API server applies
them, and cordon / uncordon / drain / delete / scale / suspend at a simulated time, with what every controller
does about it; validate refuses first what the API server would refuse then."""

from __future__ import annotations

import pytest
from k8s_builders import make_change, make_job, make_pod, make_scenario, static_node

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import Manifest
from kubetwin.api.patch import PatchError, apply_patch, go_struct_keys, merge_patch, strategic_merge
from kubetwin.runner import run
from kubetwin.validation.validate import validate

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                                                       "finalizers": ["a"]},
       "spec": {"containers": [{"name": "main", "image": "x:1", "env": [{"name": "A", "value": "1"}]},
                               {"name": "side", "image": "y:1"}],
                "tolerations": [{"key": "k", "operator": "Exists"}]}}


# -- the patch types (api.patch) ---------------------------------------------------------------------------
def test_merge_patch_is_rfc_7386() -> None:
    """RFC 7386 appendix A's cases: null deletes, maps merge, anything else (a list) replaces."""
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert merge_patch([1, 2], {"a": "b", "c": None}) == {"a": "b"}


def test_strategic_merge_patch_merges_lists_on_their_merge_keys() -> None:
    """containers by name, env by name; a list with no strategy (tolerations) is replaced; finalizers are a set."""
    out = strategic_merge(POD, {"metadata": {"finalizers": ["b", "a"]}, "spec": {
        "containers": [{"name": "main", "image": "x:2", "env": [{"name": "B", "value": "2"}]}],
        "tolerations": [{"key": "other", "operator": "Exists"}]}}, go_struct_keys("Pod"))
    main, side = out["spec"]["containers"]
    assert main["image"] == "x:2" and main["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert side == {"name": "side", "image": "y:1"}
    assert out["spec"]["tolerations"] == [{"key": "other", "operator": "Exists"}]
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert POD["spec"]["containers"][0]["image"] == "x:1"  # the target is not changed in place


def test_strategic_directives() -> None:
    """$patch: delete on a list element and on a map, $patch: replace, $deleteFromPrimitiveList."""
    assert strategic_merge(POD, {"spec": {"$patch": "delete"}}, go_struct_keys("Pod")).get("spec") is None
    out = strategic_merge(POD, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}, go_struct_keys("Pod"))
    assert [c["name"] for c in out["spec"]["containers"]] == ["main"]
    out = strategic_merge(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, go_struct_keys("Pod"))
    assert out["metadata"]["finalizers"] == []
    out = strategic_merge(POD, {"spec": {"$patch": "replace", "containers": [{"name": "only", "image": "z"}]}},
                                "Pod")
    assert out["spec"] == {"containers": [{"name": "only", "image": "z"}]}
    with pytest.raises(PatchError, match="does not contain declared merge key: name"):
        strategic_merge(POD, {"spec": {"containers": [{"image": "no-name"}]}}, go_struct_keys("Pod"))
    with pytest.raises(PatchError, match="unknown directive"):
        strategic_merge(POD, {"spec": {"$retainKeys": ["containers"]}}, go_struct_keys("Pod"))


def test_service_ports_merge_on_port() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    out = strategic_merge(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 443}]}},
                          go_struct_keys("Service"))
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443}]


def test_json_patch_and_what_no_patch_may_change() -> None:
    out = apply_patch(POD, [{"op": "replace", "path": "/spec/containers/0/image", "value": "x:3"},
                            {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}], "json")
    assert out["spec"]["containers"][0]["image"] == "x:3" and out["metadata"]["labels"] == {"a": "b"}
    with pytest.raises(PatchError):  # a failed test operation: the API server's 422
        apply_patch(POD, [{"op": "test", "path": "/spec/containers/0/image", "value": "nope"}], "json")
    with pytest.raises(PatchError, match="metadata.name: Invalid value: 'q': field is immutable"):
        apply_patch(POD, {"metadata": {"name": "q"}}, "merge")
    with pytest.raises(PatchError, match="unknown format"):
        apply_patch({"kind": "ClusterQueue", "metadata": {"name": "c"}}, {"spec": {}}, "strategic", custom=True)


# -- at a simulated time, through the controllers ------------------------------------------------------------
def _two_nodes() -> list[dict]:
    return [static_node("n1").obj(), static_node("n2").obj()]


def _status(result, name: str) -> dict:
    return result.last("Change", name)["status"]


def test_cordon_keeps_new_pods_off_the_node_and_uncordon_lets_them_back() -> None:
    pods = [make_pod(f"p{i}").cpu("1").create_at(f"{m}m").node_selector(**{"kubernetes.io/hostname": "n1"}).obj()
            for i, m in enumerate((5, 15, 25))]
    res = run(objects=[make_scenario("40m").obj(), *_two_nodes(), *pods,
                       make_change("cordon", "10m", "v1", "Node", "n1").action("Cordon").obj(),
                       make_change("uncordon", "20m", "v1", "Node", "n1").action("Uncordon").obj()])
    bound = {p: res.first_time("Pod", lambda o: bool(o["spec"].get("nodeName")), p) for p in ("p0", "p1", "p2")}
    assert bound["p0"] == 300 and bound["p1"] == 1200 and bound["p2"] == 1500  # p1 waited for the uncordon
    assert _status(res, "cordon") == {"phase": "Applied", "lastTransitionTime": "2026-01-01T00:10:00Z",
                                      "message": "node/n1 cordoned"}


def test_drain_refuses_pods_that_declare_no_controller_in_kubectls_words() -> None:
    pod = make_pod("bare").cpu("1").node_selector(**{"kubernetes.io/hostname": "n1"}).obj()
    res = run(objects=[make_scenario("30m").obj(), *_two_nodes(), pod,
                       make_change("drain", "10m", "v1", "Node", "n1").action("Drain").obj()])
    st = _status(res, "drain")
    assert st["phase"] == "Failed"
    assert st["message"] == ('unable to drain node "n1" due to error: cannot delete Pods declare no controller '
                             "(use --force to override): default/bare")
    assert res.last("Pod", "bare")["status"]["phase"] == "Running"  # nothing evicted
    assert res.last("Node", "n1")["spec"]["unschedulable"] is True  # but the node stays cordoned, as kubectl leaves it


def test_drain_with_force_evicts_through_the_eviction_api() -> None:
    pod = make_pod("bare").cpu("1").node_selector(**{"kubernetes.io/hostname": "n1"}).obj()
    res = run(objects=[make_scenario("30m").obj(), *_two_nodes(), pod,
                       make_change("drain", "10m", "v1", "Node", "n1").action("Drain", drain={"force": True}).obj()])
    st = _status(res, "drain")
    assert st["phase"] == "Drained"
    assert st["message"] == ("node/n1 drained (Warning: deleting Pods that declare no controller: default/bare)")
    gone = [v for v in res.versions("Pod", "bare") if v.type == "DELETED"]
    assert gone and gone[0].time == 600
    cond = next(c for c in gone[0].object["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert cond["reason"] == "EvictionByEvictionAPI"


def _deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "2"}}}]}}}}


def _pdb(min_available: int) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web",
                                                                                 "namespace": "default"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}


def test_drain_waits_for_the_budget_retrying_every_five_seconds() -> None:
    """4 pods of 2 CPUs on two 4-CPU nodes, minAvailable 4: no eviction is allowed until a fifth pod runs (a third
    node at 20m, scaled up at 20m); the drain, retrying every 5 s since 10m, evicts at the first retry after."""
    objs = [make_scenario("40m").obj(), *_two_nodes(), _deployment(4), _pdb(4),
            make_change("drain", "10m", "v1", "Node", "n1").action("Drain").obj(),
            {**static_node("n3").obj(), "metadata": {**static_node("n3").obj()["metadata"],
                                                     "annotations": {"kubetwin.io/create-at": "20m"}}},
            make_change("more", "20m", "apps/v1", "Deployment", "web", "default").action("Scale", replicas=5).obj()]
    res = run(objects=objs)
    st = _status(res, "drain")
    fifth = max(res.first_time("Pod", lambda o: o["status"].get("phase") == "Running", n) or 0
                for n in {v.object["metadata"]["name"] for v in res.versions("Pod", prefix="web-")})
    drained = res.first_time("Change", lambda o: (o.get("status") or {}).get("phase") == "Drained", "drain")
    assert st["phase"] == "Drained" and drained is not None and fifth >= 1200
    # a retry on the 5-second grid from 10m, at most one retry after the fifth pod ran (one at the same instant may
    # come before the kubelet's write)
    assert fifth <= drained <= fifth + 5 and (drained - 600) % 5 == 0
    assert [e.event["reason"] for e in res.recorded_events(involved="drain")] == ["Draining", "Drained"]


def test_drain_gives_up_at_its_timeout() -> None:
    res = run(objects=[make_scenario("30m").obj(), *_two_nodes(), _deployment(4), _pdb(4),
                       make_change("drain", "10m", "v1", "Node", "n1").action(
                           "Drain", drain={"timeout": "1m"}).obj()])
    st = _status(res, "drain")
    assert st["phase"] == "Failed" and st["message"].endswith("global timeout reached: 1m0s")
    assert st["lastTransitionTime"] == "2026-01-01T00:11:00Z"  # 10m + the 1m timeout


def test_drain_refuses_daemonset_pods_unless_told_to_ignore_them() -> None:
    ds_pod = make_pod("agent").cpu("100m").node_selector(**{"kubernetes.io/hostname": "n1"}).obj()
    ds_pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                              "uid": "u1", "controller": True}]
    for ignore, phase in ((False, "Failed"), (True, "Drained")):
        res = run(objects=[make_scenario("30m").obj(), *_two_nodes(), ds_pod,
                           make_change("drain", "10m", "v1", "Node", "n1").action(
                               "Drain", drain={"ignoreDaemonSets": ignore}).obj()])
        st = _status(res, "drain")
        assert st["phase"] == phase
        if not ignore:
            assert "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/agent" in \
                st["message"]
        else:
            assert "Warning: ignoring DaemonSet-managed Pods: default/agent" in st["message"]
        assert res.last("Pod", "agent")["status"]["phase"] == "Running"  # never evicted


def test_scale_a_deployment_and_suspend_a_job() -> None:
    job = make_job("train").pods(2).cpu("1").obj()
    job["spec"]["template"]["metadata"]["annotations"]["kubetwin.io/duration"] = "2h"
    res = run(objects=[make_scenario("1h").obj(), *_two_nodes(), _deployment(1), job,
                       make_change("up", "10m", "apps/v1", "Deployment", "web", "default").action(
                           "Scale", replicas=2).obj(),
                       make_change("pause", "20m", "batch/v1", "Job", "train", "default").action("Suspend").obj(),
                       make_change("go", "30m", "batch/v1", "Job", "train", "default").action("Resume").obj()])
    assert res.last("Deployment", "web")["spec"]["replicas"] == 2
    assert len(_alive(res, "web-", 3600)) == 2
    assert _alive(res, "train-", 1500) == []  # suspended: the Job controller deleted its active pods
    assert len(_alive(res, "train-", 2100)) == 2  # resumed: two new pods


def _alive(result, prefix: str, t: float) -> list[str]:
    """The pods named prefix* that exist at time t."""
    last: dict[str, str] = {}
    for v in result.versions("Pod", prefix=prefix, until=t):
        last[v.object["metadata"]["name"]] = v.type
    return sorted(n for n, etype in last.items() if etype != "DELETED")


def test_a_patch_reaches_the_scheduler() -> None:
    """A merge patch adding a label to a node at 10m lets a pod that selects that label schedule then."""
    pod = make_pod("picky").cpu("1").node_selector(pool="gold").obj()
    res = run(objects=[make_scenario("30m").obj(), *_two_nodes(), pod,
                       make_change("label", "10m", "v1", "Node", "n2").patch(
                           {"metadata": {"labels": {"pool": "gold"}}}, "merge").obj()])
    assert res.first_time("Pod", lambda o: bool(o["spec"].get("nodeName")), "picky") == 600
    assert res.last("Pod", "picky")["spec"]["nodeName"] == "n2"


def test_a_target_that_is_gone_fails_in_the_api_servers_words() -> None:
    res = run(objects=[make_scenario("30m").obj(), *_two_nodes(),
                       make_change("kill", "10m", "v1", "Pod", "nobody", "default").action("Delete").obj()])
    assert _status(res, "kill")["message"] == 'pods "nobody" not found'
    assert _status(res, "kill")["phase"] == "Failed"


# -- validate --------------------------------------------------------------------------------------------------
def _diags(objs: list[dict]) -> list:
    return validate([Manifest(o, "s.yaml", i + 1) for i, o in enumerate(objs)])


def test_validate_refuses_what_the_api_server_would() -> None:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
          "spec": {"namespaceSelector": {}}}
    bad = [
        (make_change("c", "1m", "kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq").patch({"spec": {}}).obj(),
         "spec.patchType", "unknown format"),
        (make_change("c", "1m", "apps/v1", "Deployment", "web", "default").patch(
            [{"op": "frob", "path": "/spec"}], "json").obj(), "spec.patch[0]", "Unrecognized op"),
        (make_change("c", "1m", "apps/v1", "Deployment", "web", "default").patch(
            {"spec": {"replicas": -1}}, "merge").obj(), "spec.patch", "the patched Deployment/default/web would be "
         "invalid"),
        (make_change("c", "1m", "apps/v1", "Deployment", "web", "default").action("Cordon").obj(),
         "spec", "action Cordon acts on Node (v1), not Deployment"),
        (make_change("c", "1m", "v1", "Nodez", "n1").patch({"a": 1}, "merge").obj(), "spec.target",
         "no matches for kind"),
        (make_change("c", "1m", "apps/v1", "Deployment", "web", "default").patch({"a": 1}).action("Delete").obj(),
         "spec", "exactly one of spec.patch"),
    ]
    for change, field, words in bad:
        errors = [d for d in _diags([_deployment(1), cq, change]) if d.severity == "error"]
        assert errors and errors[0].field == field and words in errors[0].message, (field, errors)
        with pytest.raises(KubetwinError):
            run(objects=[make_scenario("5m").obj(), _deployment(1), cq, change])


def test_validate_notices_a_target_nobody_creates() -> None:
    change = make_change("c", "1m", "apps/v1", "Deployment", "ghost", "default").action("Scale", replicas=2).obj()
    notices = [d for d in _diags([change]) if d.severity == "notice"]
    assert any("Deployment default/ghost is not in the manifests" in d.message and "will find nothing" in d.message
               for d in notices)


# -- a NodePool resized (gcloud container clusters resize) -----------------------------------------------------
def _pool_run(change: dict, pods: int = 4) -> object:
    from k8s_builders import make_pool

    pool = make_pool("cpu", "n2-standard-8", 4).spec(bootDelay="0s").obj()
    deployment = _deployment(pods)
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    return run(objects=[make_scenario("1h").obj(), pool, deployment, change])


def _nodes_at(result, t: float) -> list[str]:
    last: dict[str, str] = {}
    for v in result.versions("Node", until=t):
        last[v.object["metadata"]["name"]] = v.type
    return sorted(n for n, etype in last.items() if etype != "DELETED")


def test_resizing_a_pool_down_drains_random_nodes_and_the_deployment_reschedules() -> None:
    """gcloud's resize to 2 of 4 nodes at 10m: two instances go, running pods or not, their pods deleted first;
    the Deployment's replacements find room on the two left (2 pods of 3 CPUs a node) or wait."""
    res = _pool_run(make_change("shrink", "10m", "kubetwin.io/v1alpha1", "NodePool", "cpu").action(
        "Scale", replicas=2).obj())
    assert len(_nodes_at(res, 599)) == 4 and len(_nodes_at(res, 600)) == 2
    assert _status(res, "shrink")["phase"] == "Applied"
    assert res.last("NodePool", "cpu")["spec"]["nodeCount"] == 2
    running = [p for p in _alive(res, "web-", 3600)
               if res.last("Pod", p)["status"].get("phase") == "Running"]
    assert len(running) == 4  # 4 replicas fit on the 2 nodes left
    assert all(res.last("Pod", p)["spec"]["nodeName"] in _nodes_at(res, 3600) for p in running)
    # the same run twice picks the same nodes (the random pick is seeded)
    again = _pool_run(make_change("shrink", "10m", "kubetwin.io/v1alpha1", "NodePool", "cpu").action(
        "Scale", replicas=2).obj())
    assert _nodes_at(again, 3600) == _nodes_at(res, 3600)


def test_resizing_a_pool_up_boots_new_nodes_and_pending_pods_land_there() -> None:
    res = _pool_run(make_change("grow", "10m", "kubetwin.io/v1alpha1", "NodePool", "cpu").patch(
        {"spec": {"nodeCount": 6}}, "merge").obj(), pods=12)
    assert len(_nodes_at(res, 599)) == 4 and len(_nodes_at(res, 3600)) == 6
    running = [p for p in _alive(res, "web-", 3600) if res.last("Pod", p)["status"].get("phase") == "Running"]
    assert len(running) == 12  # 8 before, 4 more on the 2 new nodes after they boot


def test_validate_refuses_a_resize_the_twin_would_not_make() -> None:
    from k8s_builders import make_pool

    auto = make_pool("auto", "n2-standard-8", 1).autoscaling(1, 5).obj()
    fixed = make_pool("cpu", "n2-standard-8", 2).obj()
    cases = [
        (make_change("c", "1m", "kubetwin.io/v1alpha1", "NodePool", "auto").action("Scale", replicas=3).obj(),
         "spec.target", "it autoscales"),
        (make_change("c", "1m", "kubetwin.io/v1alpha1", "NodePool", "cpu").patch(
            {"spec": {"nodeCount": 3, "machineType": "n2-standard-16"}}, "merge").obj(), "spec.patch",
         "changes only spec.nodeCount"),
    ]
    for change, field, words in cases:
        errors = [d for d in _diags([auto, fixed, change]) if d.severity == "error"]
        assert errors and errors[0].field == field and words in errors[0].message, (field, errors)
    ok = make_change("c", "1m", "kubetwin.io/v1alpha1", "NodePool", "cpu").patch({"spec": {"nodeCount": 3}},
                                                                                 "merge").obj()
    assert not [d for d in _diags([auto, fixed, ok]) if d.severity == "error"]


def test_a_cluster_queue_held_released_and_given_more_quota() -> None:
    """issue 36's shorthand list: "change a ClusterQueue's quota or stopPolicy" -- merge patches Kueue acts on. A
    ClusterQueue of 4 CPUs admits a 2-CPU Job at 0; held (stopPolicy Hold) at 5m, the Job created at 6m waits until
    the hold ends at 20m; a third created at 25m waits for quota until it is raised to 6 CPUs at 30m."""
    from kueue_builders import make_cq, make_flavor, make_lq

    def quota(cpus: int) -> list[dict]:
        return [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": cpus}]}]}]

    jobs = []
    for name, at in (("first", "0s"), ("second", "6m"), ("third", "25m")):
        job = make_job(name).cpu("2").queue("lq").create_at(at).obj()
        job["spec"]["template"]["metadata"]["annotations"]["kubetwin.io/duration"] = "2h"
        jobs.append(job)
    cq_change = ("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq")
    res = run(objects=[make_scenario("40m").obj(), static_node("n1").obj(), static_node("n2").obj(),
                       make_flavor("default").obj(), make_cq("cq").flavor("default", cpu=4).obj(),
                       make_lq("lq").cluster_queue("cq").obj(), *jobs,
                       make_change("hold", "5m", *cq_change).patch({"spec": {"stopPolicy": "Hold"}}, "merge").obj(),
                       make_change("go", "20m", *cq_change).patch({"spec": {"stopPolicy": "None"}}, "merge").obj(),
                       make_change("more", "30m", *cq_change).patch({"spec": {"resourceGroups": quota(6)}},
                                                                    "merge").obj()])

    def admitted(job: str) -> float | None:
        return res.first_time("Workload", lambda o: any(
            c["type"] == "Admitted" and c["status"] == "True" for c in (o.get("status") or {}).get("conditions")
            or []), prefix=f"job-{job}-")

    assert (admitted("first"), admitted("second"), admitted("third")) == (0, 1200, 1800)


def test_merge_diff_is_the_patch_merge_patch_undoes() -> None:
    """api.patch.merge_diff (a recorded Update as a patch) and merge_patch are inverse: for each pair, applying the
    diff to the old object gives the new one -- nested maps, removed keys, lists, scalars to maps and back."""
    from kubetwin.api.patch import merge_diff

    pairs = [({"a": 1, "b": {"c": 2, "d": 3}}, {"a": 1, "b": {"c": 5}}),
             ({"spec": {"taints": [{"key": "x"}]}}, {"spec": {"taints": [], "unschedulable": True}}),
             ({"a": {"b": 1}}, {"a": 2}), ({"a": 2}, {"a": {"b": 1}}), ({}, {"x": [1, 2]}), ({"x": 1}, {})]
    for old, new in pairs:
        assert merge_patch(old, merge_diff(old, new)) == new, (old, new)
    assert merge_diff({"a": 1}, {"a": 1}) == {}  # nothing changed: an empty patch (replay skips it)


def test_one_rule_for_which_pods_a_budget_covers() -> None:
    """policy/v1: an empty selector selects every pod of the budget's namespace, a missing one none, another
    namespace never; the Eviction API and the cluster autoscaler's drain read the same rule (the autoscaler's own
    copy read an empty selector as selecting nothing)."""
    from kubetwin.autoscaler.pdb import blocked_by_budget
    from kubetwin.controllers.disruption import covers
    from kubetwin.sim.env import Environment
    from kubetwin.store.store import Store

    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "a", "labels": {"app": "x"}},
           "spec": {}, "status": {"phase": "Running"}}

    def pdb(ns: str, selector) -> dict:
        spec = {"maxUnavailable": 0} | ({} if selector is None else {"selector": selector})
        return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": ns},
                "spec": spec}

    assert covers(pdb("a", {}), pod) and covers(pdb("a", {"matchLabels": {"app": "x"}}), pod)
    assert not covers(pdb("a", None), pod) and not covers(pdb("a", {"matchLabels": {"app": "y"}}), pod)
    assert not covers(pdb("b", {}), pod)
    store = Store(Environment())
    store.create({**pod, "apiVersion": "v1"})
    store.create(pdb("a", {}))
    assert blocked_by_budget(store, [store.get("Pod", "a", "p")]) == "not enough pod disruption budget to move a/p"

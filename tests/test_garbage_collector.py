"""kube-controller-manager's garbage collector (controllers/garbagecollector.py): a deleted owner's dependents go too,
level by level (a Deployment's ReplicaSets, then their pods), a dependent with another live owner keeps it; nothing
else changes (every example's run folder is byte-identical: no example deletes an owner with live dependents)."""

from __future__ import annotations

from k8s_builders import make_change, make_job, make_scenario, static_node

from kubetwin.runner import run


def _deployment() -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}}}


def _alive(result, kind: str, prefix: str, t: float) -> list[str]:
    last: dict[str, str] = {}
    for v in result.versions(kind, prefix=prefix, until=t):
        last[v.object["metadata"]["name"]] = v.type
    return sorted(n for n, etype in last.items() if etype != "DELETED")


def test_a_deleted_deployment_takes_its_replicaset_and_pods() -> None:
    dep = _deployment()
    dep["metadata"]["annotations"] = {"kubetwin.io/delete-at": "10m"}
    res = run(objects=[make_scenario("30m").obj(), static_node("n1").obj(), dep])
    assert len(_alive(res, "Pod", "web-", 599)) == 3 and len(_alive(res, "ReplicaSet", "web-", 599)) == 1
    assert _alive(res, "ReplicaSet", "web-", 600) == [] and _alive(res, "Pod", "web-", 600) == []


def test_a_change_deletes_a_job_and_its_pods() -> None:
    job = make_job("train").pods(2).cpu("1").obj()
    job["spec"]["template"]["metadata"]["annotations"]["kubetwin.io/duration"] = "2h"
    res = run(objects=[make_scenario("30m").obj(), static_node("n1").obj(), job,
                       make_change("stop", "10m", "batch/v1", "Job", "train", "default").action("Delete").obj()])
    assert len(_alive(res, "Pod", "train-", 599)) == 2 and _alive(res, "Pod", "train-", 600) == []
    assert res.last("Change", "stop")["status"]["phase"] == "Applied"


def test_a_dependent_with_another_live_owner_stays_and_loses_the_dangling_reference() -> None:
    """GC's "solid owner" rule: two owners, one deleted; the dependent stays, its reference to the gone one removed."""
    owner_a = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default",
                                                                     "uid": "uid-a"}}
    owner_b = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "default",
                                                                     "uid": "uid-b",
                                                                     "annotations": {"kubetwin.io/delete-at": "5m"}}}
    dependent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "dep", "namespace": "default", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "uid-b", "controller": True},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "uid-a"}]}}
    res = run(objects=[make_scenario("10m").obj(), owner_a, owner_b, dependent])
    assert _alive(res, "ConfigMap", "dep", 600) == ["dep"]
    refs = res.last("ConfigMap", "dep")["metadata"]["ownerReferences"]
    assert [r["name"] for r in refs] == ["a"]

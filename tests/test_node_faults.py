"""Pods bound by spec.nodeName skip the scheduler: the kubelet's admission, PodGC and the node lifecycle
controller are what stop them from running where they cannot."""

from __future__ import annotations

from conftest import final_objects
from k8s_builders import make_pod, make_scenario, static_node
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.runner import run


def test_kubelet_rejects_a_pod_that_overcommits_its_node(tmp_path) -> None:
    """pkg/kubelet/lifecycle/predicate.go: InsufficientResourceError -> reason OutOfcpu; the kubelet's rejectPod
    writes phase Failed with message "Pod was rejected: " + the error, and a Warning event."""
    res = run(objects=[make_scenario("30m").obj(), static_node("n1").cpu("4").obj(),
                       make_pod("first").cpu("3").duration("1h").create_at("0s").node_name("n1").obj(),
                       make_pod("second").cpu("2").duration("1h").create_at("1m").node_name("n1").obj()],
              out=tmp_path / "run")
    shown = CliRunner().invoke(app, ["get", "pods", "--run", str(tmp_path / "run")])
    assert shown.exit_code == 0 and "OutOfcpu" in next(line for line in shown.output.splitlines()
                                                         if line.startswith("second"))
    pods = final_objects(res, "Pod")
    assert pods["first"]["status"]["phase"] == "Running"
    st = pods["second"]["status"]
    assert st["phase"] == "Failed" and st["reason"] == "OutOfcpu"
    msg = "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
    assert st["message"] == f"Pod was rejected: {msg}"
    assert ("OutOfcpu", msg) in [(e.reason, e.message) for e in res.recorded_events(involved="second")]
    assert not any(o["status"].get("phase") == "Running" for _, _, o in res.versions("Pod", "second"))


def test_podgc_deletes_a_pod_bound_to_a_node_that_does_not_exist() -> None:
    """gcOrphaned: a pod whose node is missing is, after the 40 s quarantine, marked Failed with DisruptionTarget
    DeletionByPodGC and deleted; it never runs."""
    res = run(objects=[make_scenario("10m").obj(), static_node("n1").obj(),
                       make_pod("lost").cpu("1").duration("1h").create_at("0s").node_name("no-such-node").obj()])
    vs = res.versions("Pod", "lost")
    assert not any(o["status"].get("phase") == "Running" for _, _, o in vs)
    t, etype, last = vs[-1]
    assert etype == "DELETED" and t == 40.0
    cond = [c for c in last["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert cond and cond[0]["reason"] == "DeletionByPodGC"
    assert last["status"]["phase"] == "Failed"


def test_not_ready_node_is_tainted_and_its_pods_evicted_after_300s() -> None:
    """The node lifecycle controller taints a NotReady node not-ready:NoSchedule and NoExecute; a pod bound there
    does not run, and tolerates NoExecute for the 300 s DefaultTolerationSeconds adds, then it is evicted; a
    pod left to the scheduler is kept off the node by the NoSchedule taint."""
    res = run(objects=[make_scenario("20m").obj(), static_node("sick").ready("False").obj(),
                       make_pod("stuck").cpu("1").duration("1h").create_at("0s").node_name("sick").obj(),
                       make_pod("free").cpu("1").obj()])
    node = final_objects(res, "Node")["sick"]
    taints = {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}
    assert taints == {("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute")}
    vs = res.versions("Pod", "stuck")
    assert not any(o["status"].get("phase") == "Running" for _, _, o in vs)
    tols = vs[0][2]["spec"]["tolerations"]
    assert {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300} in tols
    t, etype, last = vs[-1]
    assert etype == "DELETED" and t == 300.0
    cond = [c for c in last["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert cond and cond[0]["reason"] == "DeletionByTaintManager"
    evicted = res.recorded_events("TaintManagerEviction", involved="stuck")
    assert [e.message for e in evicted] == ["Marking for deletion Pod default/stuck"]
    free = final_objects(res, "Pod")["free"]
    assert not free["spec"].get("nodeName")
    sched = next(c for c in free["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "untolerated taint {node.kubernetes.io/not-ready: }" in sched["message"]


def test_unknown_ready_is_unreachable_and_a_pod_that_tolerates_it_forever_stays() -> None:
    """Ready Unknown (the node stopped posting status) taints node.kubernetes.io/unreachable; a pod with its own
    NoExecute toleration without tolerationSeconds is never evicted (DefaultTolerationSeconds adds none then)."""
    keep = make_pod("keeper").cpu("1").duration("1h").create_at("0s").node_name("lost").obj()
    keep["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                    "effect": "NoExecute"}]
    res = run(objects=[make_scenario("20m").obj(), static_node("lost").ready("Unknown").obj(), keep,
                       make_pod("other").cpu("1").duration("1h").create_at("0s").node_name("lost").obj()])
    node = final_objects(res, "Node")["lost"]
    assert {(t["key"], t["effect"]) for t in node["spec"]["taints"]} == {
        ("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")}
    pods = final_objects(res, "Pod")
    assert "keeper" in pods and "other" not in pods
    assert res.versions("Pod", "other")[-1][0] == 300.0


def test_a_taint_removed_and_added_again_restarts_the_eviction_clock() -> None:
    """NotReady at 0 s (eviction due at 300 s), Ready at 100 s, NotReady again at 200 s: the taint eviction
    controller's clock restarts with the new taint (due at 500 s); the first timer must not delete the pod at 300 s."""
    from kubetwin.controllers.nodelifecycle import NodeLifecycleController
    from kubetwin.sim.env import Environment
    from kubetwin.store.events import EventRecorder
    from kubetwin.store.store import Store

    env = Environment()
    store = Store(env)
    NodeLifecycleController(store, env, EventRecorder(store))
    store.create(static_node("n1").obj())
    pod = make_pod("p").cpu("1").obj()
    pod["spec"]["nodeName"] = "n1"
    pod["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                   "effect": "NoExecute", "tolerationSeconds": 300}]
    store.create(pod)

    def ready(status: str) -> None:
        node = store.get("Node", "", "n1")
        store.update({**node, "status": {**node["status"], "conditions": [{"type": "Ready", "status": status}]}})

    env.at(1, lambda: ready("False"))
    env.at(100, lambda: ready("True"))
    env.at(200, lambda: ready("False"))
    env.run(until=450)
    assert store.get("Pod", "default", "p") is not None  # the stale 301 s timer kept its hands off
    env.run(until=600)
    assert store.get("Pod", "default", "p") is None  # evicted 300 s after the second taint

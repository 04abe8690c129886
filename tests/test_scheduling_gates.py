"""Pod scheduling readiness (KEP-3521): a pod with spec.schedulingGates is not scheduled until they are all removed.

The API server marks such a pod at create with PodScheduled=False, reason SchedulingGated (pkg/registry/core/pod
strategy.go applySchedulingGatedCondition); kube-scheduler's PreEnqueue plugin SchedulingGates keeps it out of
activeQ; the pod update that removes the last gate enqueues it.
"""

from __future__ import annotations

from k8s_builders import make_namespace, make_pool

from kubetwin.autoscaler.nodepool import NodePoolController
from kubetwin.controllers import admission
from kubetwin.controllers.kubelet import Kubelet
from kubetwin.devices.dra.allocator import Features
from kubetwin.scheduler.scheduler import GATED_MESSAGE, Scheduler
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store


class Cluster:
    def __init__(self) -> None:
        self.env = Environment()
        self.store = Store(self.env, 0)
        self.events = EventRecorder(self.store)
        for plugin in (admission.pod_defaults, admission.priority(self.store), admission.extended_resource_toleration):
            self.store.admit(plugin, ("Pod",))
        NodePoolController(self.store, self.env, "kubetwin", events=self.events)
        self.sched = Scheduler(self.store, self.events, 0, "LeastAllocated", Features.from_gates({}), None)
        Kubelet(self.store, self.env, self.events)
        self.store.create(make_namespace("default").obj())
        self.store.create(make_pool("cpu", "e2-standard-8", 1).spec(bootDelay="0s").obj())

    def pod(self, name: str, gates: list[str] | None = None) -> dict:
        spec: dict = {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
        if gates:
            spec["schedulingGates"] = [{"name": g} for g in gates]
        return self.store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                                  "spec": spec})

    def get(self, name: str) -> dict:
        return self.store.get("Pod", "default", name)

    def remove_gate(self, name: str, gate: str) -> None:
        pod = self.get(name)
        gates = [g for g in pod["spec"]["schedulingGates"] if g["name"] != gate]
        spec = {**pod["spec"], "schedulingGates": gates}
        if not gates:
            del spec["schedulingGates"]
        self.store.update({**pod, "spec": spec})


def scheduled(pod: dict) -> dict:
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def test_gated_pod_waits_until_its_last_gate_is_removed() -> None:
    c = Cluster()
    c.pod("gated", ["example.com/a", "example.com/b"])
    c.pod("free")
    c.env.run(60)
    pod = c.get("gated")
    assert not pod["spec"].get("nodeName") and pod["status"]["phase"] == "Pending"
    cond = scheduled(pod)
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "SchedulingGated", GATED_MESSAGE)
    assert c.get("free")["spec"].get("nodeName")  # a pod without gates is scheduled as before
    assert not [e for e in c.store.list("Event") if e["reason"] == "FailedScheduling"]
    attempts = c.sched.schedule_attempts

    c.remove_gate("gated", "example.com/a")  # one gate left: still not a scheduling candidate
    c.env.run(120)
    assert not c.get("gated")["spec"].get("nodeName") and scheduled(c.get("gated"))["reason"] == "SchedulingGated"
    assert c.sched.schedule_attempts == attempts

    c.remove_gate("gated", "example.com/b")
    c.env.run(180)
    pod = c.get("gated")
    assert pod["spec"]["nodeName"] and scheduled(pod)["status"] == "True"
    assert pod["status"]["phase"] == "Running"
    assert c.sched.schedule_attempts == attempts + 1


def test_gated_condition_is_set_once_at_create() -> None:
    c = Cluster()
    pod = c.pod("gated", ["example.com/a"])
    assert [x["type"] for x in pod["status"]["conditions"]] == ["PodScheduled"]
    assert "lastTransitionTime" not in pod["status"]["conditions"][0]  # the API server's condition has none
    assert "conditions" not in (c.pod("free")["status"] or {})

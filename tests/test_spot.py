"""Spot VMs on GKE: preemption (rate and schedule), graceful node shutdown, the MIG re-creating the VM, checkpoints
and lost work, cost split on-demand / Spot, and the two examples' timelines."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from k8s_builders import make_namespace, make_pod, make_pool, make_priority_class, make_scenario

from kubetwin.api.loader import Manifest
from kubetwin.autoscaler.nodepool import NodePoolController
from kubetwin.autoscaler.spot import SHUTDOWN_MESSAGE, SpotPreemptionController
from kubetwin.controllers import admission
from kubetwin.controllers.job import JobController
from kubetwin.controllers.kubelet import Kubelet, checkpoint_split
from kubetwin.controllers.nodelifecycle import NodeLifecycleController, default_toleration_seconds
from kubetwin.devices.dra.allocator import Features
from kubetwin.k8s.generatename import NameGenerator
from kubetwin.runner import run
from kubetwin.scheduler.scheduler import Scheduler
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store
from kubetwin.validation.validate import validate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SPOT_EXAMPLE, TPU_EXAMPLE = EXAMPLES / "spot-vs-on-demand.yaml", EXAMPLES / "tpu-v5e-multihost-preemption.yaml"


class Cluster:
    """runner.run()'s wiring with the clock under the test's control."""

    def __init__(self, *objs: dict, seed: int = 0) -> None:
        self.env = Environment()
        self.store = Store(self.env, seed)
        self.events = EventRecorder(self.store)
        for plugin in (admission.pod_defaults, admission.priority(self.store), admission.extended_resource_toleration,
                       default_toleration_seconds):
            self.store.admit(plugin, ("Pod",))
        self.pools = NodePoolController(self.store, self.env, "kubetwin", events=self.events)
        self.spot = SpotPreemptionController(self.store, self.env, self.events, self.pools, seed)
        Scheduler(self.store, self.events, seed, "LeastAllocated", Features.from_gates({}), None)
        JobController(self.store, self.env, self.events, NameGenerator(seed))
        self.kubelet = Kubelet(self.store, self.env, self.events)
        NodeLifecycleController(self.store, self.env, self.events)
        self.store.create(make_namespace("default").obj())
        for o in objs:
            self.store.create(o)

    def node_names(self) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.store.list("Node"))

    def pod(self, name: str) -> dict:
        return self.store.get("Pod", "default", name)

    def events_of(self, reason: str) -> list[dict]:
        return [e for e in self.store.list("Event") if e["reason"] == reason]


def spot_pool(name: str = "spot", nodes: int = 1, **policy) -> dict:
    return make_pool(name, "e2-standard-4", nodes).spec(spot=True,
                                                        **({"spotPreemption": policy} if policy else {})).obj()


def errors(*objs: dict) -> list:
    return [d for d in validate([Manifest(o, "t.yaml", 1) for o in objs]) if d.severity == "error"]


# -- validation -------------------------------------------------------------------------------------------
def test_spot_preemption_only_on_spot_pools() -> None:
    pool = make_pool("od", "e2-standard-4", 1).spec(spotPreemption={"ratePerNodeHour": 0.05}).obj()
    [err] = errors(pool)
    assert err.field == "spec.spotPreemption" and "spot: true" in err.message
    assert errors(spot_pool(ratePerNodeHour=0.05, schedule=[{"at": "3h", "nodes": 1}])) == []
    [bad] = errors(spot_pool(schedule=[{"at": "3 hours"}]))
    assert bad.field == "spec.spotPreemption.schedule[0].at"


def test_checkpoint_interval_is_validated_as_a_duration() -> None:
    pod = make_pod("p").duration("1h").annotation("kubetwin.io/checkpoint-interval", "half an hour").obj()
    [err] = errors(pod)
    assert err.field == 'metadata.annotations["kubetwin.io/checkpoint-interval"]'


# -- when -------------------------------------------------------------------------------------------------
def _rate_times(seed: int) -> list[tuple[float, str, str]]:
    res = run(objects=[make_scenario("1d").seed(seed).obj(), spot_pool(nodes=4, ratePerNodeHour=0.1)])
    return [(p["t"], p["pool"], p["node"]) for p in res.summary["spot"]["preemption_times"]]


def test_rate_based_preemptions_are_deterministic_per_seed() -> None:
    a, b, c = _rate_times(3), _rate_times(3), _rate_times(4)
    assert a == b and a != c
    assert 3 <= len(a) <= 25  # 4 VMs x 24 h x 0.1/h ~ 9.6 expected; re-created VMs draw again
    assert all(t2 >= t1 for (t1, *_), (t2, *_) in zip(a, a[1:], strict=False))


def test_schedule_preempts_the_named_node_at_its_time() -> None:
    c = Cluster(spot_pool(nodes=3))  # node names are deterministic: learn them from a first cluster
    c.env.run(100)
    victim = c.node_names()[1]
    c2 = Cluster(spot_pool(nodes=3, schedule=[{"at": "1h", "nodeNames": [victim]}, {"at": "2h", "nodes": 2}]))
    c2.env.run(3599)
    assert c2.events_of("Preempted") == []
    c2.env.run(3600)
    [ev] = c2.events_of("Preempted")
    assert ev["involvedObject"]["name"] == victim and ev["source"]["component"] == "compute-engine"
    c2.env.run(7200)
    assert c2.spot.preemptions == {"spot": 3} and len(c2.spot.timeline) == 3
    assert c2.spot.timeline[0] == (3600.0, "spot", victim)


# -- what -------------------------------------------------------------------------------------------------
def test_graceful_shutdown_caps_grace_and_writes_the_kubelets_status() -> None:
    crit = make_priority_class("system-cluster-critical").value(2000000000).obj()
    pods = [make_pod("long").cpu("100m").obj(), make_pod("short").cpu("100m").obj(),
            make_pod("sys").cpu("100m").priority_class("system-cluster-critical").obj()]
    pods[0]["spec"]["terminationGracePeriodSeconds"] = 120
    pods[1]["spec"]["terminationGracePeriodSeconds"] = 5
    c = Cluster(crit, spot_pool(), *pods)
    c.env.run(100)
    [node] = c.node_names()
    assert all(c.pod(n)["status"]["phase"] == "Running" for n in ("long", "short", "sys"))
    assert c.spot.preempt(node)
    c.env.run(100)  # the node lifecycle controller's taints, in the same instant
    n = c.store.get("Node", "", node)
    ready = next(x for x in n["status"]["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "KubeletNotReady", "node is shutting down")
    assert {("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute")} <= {
        (t["key"], t["effect"]) for t in n["spec"]["taints"]}
    assert [e["message"] for e in c.events_of("Shutdown")] == ["Shutdown manager detected shutdown event"]
    c.env.run(104)
    assert c.pod("short")["status"]["phase"] == "Running"
    c.env.run(105)  # min(5, 15)
    assert c.pod("short")["status"]["phase"] == "Failed" and c.pod("long")["status"]["phase"] == "Running"
    c.env.run(115)  # min(120, 15): GKE's cap for non-system pods
    assert c.pod("long")["status"]["phase"] == "Failed" and c.pod("sys")["status"]["phase"] == "Running"
    c.env.run(129)
    assert c.pod("sys")["status"]["phase"] == "Running"
    c.env.run(130)  # system-critical pods: the next 15 s, after the others
    st = c.pod("sys")["status"]
    assert (st["phase"], st["reason"], st["message"]) == ("Failed", "Terminated", SHUTDOWN_MESSAGE)
    dt = next(x for x in st["conditions"] if x["type"] == "DisruptionTarget")
    assert (dt["status"], dt["reason"], dt["message"]) == ("True", "TerminationByKubelet", SHUTDOWN_MESSAGE)
    assert st["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    assert c.store.get("Node", "", node) is None  # the VM stopped 30 s after the notice


def test_node_is_deleted_at_30s_and_recreated_after_boot_delay() -> None:
    c = Cluster(make_pool("spot", "e2-standard-4", 1).spec(spot=True, bootDelay="2m").obj())
    c.env.run(200)
    [node] = c.node_names()
    uid = c.store.get("Node", "", node)["metadata"]["uid"]
    assert c.spot.preempt(node) and not c.spot.preempt(node)  # once
    c.env.run(229)
    assert c.node_names() == [node]
    c.env.run(230)
    assert c.node_names() == []
    c.env.run(230 + 119)
    assert c.node_names() == []
    c.env.run(230 + 120)  # the MIG's new VM, under the same instance name
    new = c.store.get("Node", "", node)
    assert new["metadata"]["uid"] != uid
    assert next(x for x in new["status"]["conditions"] if x["type"] == "Ready")["status"] == "True"
    assert not any(t["key"] == "node.kubernetes.io/not-ready" for t in new["spec"]["taints"])
    c.pools.finish(400)
    assert c.pools.node_seconds[node] == pytest.approx((230 - 120) + (400 - 350))  # billed while it lived


# -- checkpoints ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("ran", "interval", "split"), [
    (10545, 1800, (9000, 1545)), (1799, 1800, (0, 1799)), (3600, 1800, (3600, 0)), (5000, None, (0, 5000)),
    (5000, 0, (0, 5000)), (0, 1800, (0, 0))])
def test_checkpoint_arithmetic(ran: float, interval: float | None, split: tuple[float, float]) -> None:
    assert checkpoint_split(ran, interval) == pytest.approx(split)


def _job(checkpoint: str | None) -> dict:
    ann = {"kubetwin.io/duration": "2h", **({"kubetwin.io/checkpoint-interval": checkpoint} if checkpoint else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"backoffLimit": 3, "template": {"metadata": {"annotations": ann}, "spec": {
                "restartPolicy": "Never", "containers": [{"name": "t", "image": "x", "resources": {
                    "requests": {"cpu": "1"}}}]}}}}


@pytest.mark.parametrize(("checkpoint", "finish"), [("10m", 4710 + 7200 - 4200), (None, 4710 + 7200)])
def test_replacement_pod_resumes_from_the_last_checkpoint(checkpoint: str | None, finish: float) -> None:
    # the node is up at 90 s and the pod runs from then; the notice comes at 4,590 s, the pod dies 15 s later
    # (4,515 s run: 7 checkpoints of 10 min = 4,200 s kept), the VM stops at 4,620 s and is back at 4,710 s
    c = Cluster(spot_pool(schedule=[{"at": "4590", "nodes": 1}]), _job(checkpoint))
    c.env.run(finish - 1)
    assert not c.store.get("Job", "default", "train")["status"].get("completionTime")
    c.env.run(finish)
    job = c.store.get("Job", "default", "train")
    assert job["status"].get("completionTime") and job["status"]["failed"] == 1
    rec = c.kubelet.lost_work[("default", "train")]
    assert rec["seconds"] == pytest.approx(4515 - (4200 if checkpoint else 0)) and rec["interruptions"] == 1
    assert c.kubelet.progress == {}  # done: nothing left to resume


# -- the examples -----------------------------------------------------------------------------------------
def _finish_times(history: list) -> dict[str, float]:
    return {f"{o['metadata']['namespace']}/{o['metadata']['name']}": t for t, _, et, o in history
            if o["kind"] == "Job" and et == "MODIFIED" and (o.get("status") or {}).get("completionTime")
            and not (o.get("metadata") or {}).get("deletionTimestamp")}


def test_spot_vs_on_demand_example(tmp_path: Path) -> None:
    res = run([SPOT_EXAMPLE], out=tmp_path / "spot")
    s = res.summary
    done = _finish_times(res.history)
    # on-demand: node up at 90 s, driver at 270 s, 10 h of work
    assert done["on-demand/train"] == 270 + 36000
    # spot: preempted at 3h and 7h; each time 15 s grace, 30 s to stop, 90 s boot, 3 min driver; 30 min checkpoints:
    # run 1: 270..10815 (10,545 s: 9,000 saved); run 2: 11100..25215 (14,115 s: 12,600 saved); run 3: 14,400 s left
    assert done["spot/train"] == 25500 + 14400 == 39900
    assert done["spot/train"] > done["on-demand/train"]
    assert s["spot"]["preemptions"] == {"a3-spot": 2} and [p["t"] for p in s["spot"]["preemption_times"]] == [
        3 * 3600, 7 * 3600]
    assert s["wasted_gpu_hours"] == pytest.approx((1545 + 1515) * 8 / 3600, abs=1e-3) == 6.8
    assert s["lost_work"] == {"spot/train": {"gpu_hours": 6.8, "tpu_chip_hours": 0.0, "hours": 0.85,
                                             "interruptions": 2}}
    cost = s["cost"]
    assert cost["by_pool"] == {"a3-on-demand": 1059.67, "a3-spot": 422.09}
    assert (cost["on_demand_usd"], cost["spot_usd"], cost["total_usd"]) == (1059.67, 422.09, 1481.76)
    assert cost["by_pool_provisioning"]["a3-spot"] == {"on_demand_usd": 0.0, "spot_usd": 422.09}
    assert cost["spot_usd"] < cost["on_demand_usd"]
    assert s["pods"]["by_phase"] == {"Failed": 2, "Succeeded": 2}
    again = run([SPOT_EXAMPLE], out=tmp_path / "again")
    assert (tmp_path / "spot" / "summary.json").read_bytes() == (tmp_path / "again" / "summary.json").read_bytes()
    assert again.summary == s


def test_spot_example_without_checkpoints_loses_all_work() -> None:
    objs = [o for o in yaml.safe_load_all(SPOT_EXAMPLE.read_text()) if o]
    for o in objs:
        if o["kind"] == "Job":
            o["spec"]["template"]["metadata"]["annotations"].pop("kubetwin.io/checkpoint-interval")
    res = run(objects=objs, duration="1d")
    done = _finish_times(res.history)
    # every restart begins from zero: 10,545 s and 14,115 s are lost, and the third run needs the whole 10 h
    assert done["spot/train"] == 25500 + 36000
    assert res.summary["lost_work"]["spot/train"]["gpu_hours"] == pytest.approx((10545 + 14115) * 8 / 3600,
                                                                                abs=1e-3)


def test_tpu_multihost_preemption_restarts_the_jobset_once() -> None:
    res = run([TPU_EXAMPLE])
    hist = res.history
    hosts = sorted({o["involvedObject"]["name"] for _, _, et, o in hist if o["kind"] == "Event" and et == "ADDED"
                    and o["reason"] == "Shutdown"})
    assert len(hosts) == 4  # one host preempted, the whole slice shut down
    assert res.summary["spot"]["preemptions"] == {"tpu-v5e-spot": 1}
    assert res.summary["spot"]["nodes_shut_down"] == {"tpu-v5e-spot": 4}
    terminated = [(t, o) for t, _, et, o in hist if o["kind"] == "Pod" and et == "MODIFIED"
                  and (o.get("status") or {}).get("reason") == "Terminated"]
    assert len(terminated) == 4 and {t for t, _ in terminated} == {7215.0}
    restarts = [(t, (o.get("status") or {}).get("restarts", 0)) for t, _, et, o in hist if o["kind"] == "JobSet"]
    assert min(t for t, r in restarts if r == 1) == 7215.0
    added = [(t, o["reason"]) for t, _, et, o in hist if o["kind"] == "Event" and et == "ADDED"]
    assert [t for t, r in added if r == "TPUSliceRepaired"] == [7230.0 + 90]
    starts = sorted(t for t, r in added if r == "Started")
    assert starts == [90.0] * 4 + [7320.0] * 4  # the restarted pods wait for the re-created slice
    js = next(o for _, _, et, o in reversed(hist) if o["kind"] == "JobSet")
    assert js["status"]["restarts"] == 1 and js["status"].get("terminalState") == "Completed"
    # 90..7215 ran 7,125 s: three 30 min checkpoints (5,400 s) kept, 4 h - 1.5 h = 9,000 s left after 7,320 s
    assert _finish_times(hist)["default/llm-train-slice-0"] == 7320 + 9000
    assert res.summary["wasted_tpu_chip_hours"] == pytest.approx((7125 - 5400) * 16 / 3600, abs=1e-3)

"""Scheduling decisions and kube-scheduler's FailedScheduling messages."""

from __future__ import annotations

import json

from conftest import write_yaml
from k8s_builders import make_pod, make_pool, make_priority_class, make_scenario
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.devices.dra.allocator import Features
from kubetwin.runner import run
from kubetwin.scheduler.scheduler import Scheduler, fit_error, num_feasible_nodes_to_find
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store


def test_fit_error_sorts_reasons_as_strings() -> None:
    # kube-scheduler sorts "count reason" strings, so "10 ..." sorts before "2 ...".
    msg = fit_error(12, {"Insufficient cpu": 2, "node(s) had untolerated taint {nvidia.com/gpu: present}": 10})
    assert msg == ("0/12 nodes are available: 10 node(s) had untolerated taint {nvidia.com/gpu: present}, "
                   "2 Insufficient cpu.")


def test_num_feasible_nodes_to_find_matches_kube_scheduler() -> None:
    assert num_feasible_nodes_to_find(50) == 50
    assert num_feasible_nodes_to_find(1000) == 420  # 50 - 1000/125 = 42 %
    assert num_feasible_nodes_to_find(5000) == 500  # 50 - 5000/125 = 10 %
    assert num_feasible_nodes_to_find(10000) == 500  # 5 % minimum


def test_three_nodes_pod_too_big(tmp_path) -> None:
    objs = [make_scenario("1h").obj(),
            make_pool("gpu", "g2-standard-24", 3).spec(driverInstallDelay="0s").gpus("nvidia-l4", 2).obj(),
            make_pod("big").gpus(4).obj()]
    path = write_yaml(tmp_path / "s.yaml", objs)
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["describe", "pod", "big", "--run", str(out)])
    assert res.exit_code == 0, res.output
    assert ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: "
            "3 No preemption victims found for incoming pod.") in res.output
    assert "FailedScheduling" in res.output


def test_untolerated_taint_on_cpu_pod_and_gpu_toleration_added() -> None:
    objs = [make_scenario("1h").obj(),
            make_pool("gpu", "g2-standard-8", 2).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            make_pod("cpu-only").cpu("1").obj(), make_pod("gpu-pod").gpus(1).duration("10m").obj()]
    result = run(objects=objs)
    last = {}
    for _, _, _, o in result.history:
        if o["kind"] == "Pod":
            last[o["metadata"]["name"]] = o
    assert last["gpu-pod"]["spec"]["nodeName"].startswith("gke-kubetwin-gpu-")
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in last["gpu-pod"]["spec"][
        "tolerations"]
    cond = next(c for c in last["cpu-only"]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["message"] == ("0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}. "
                               "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    assert result.summary["pods"]["by_phase"]["Succeeded"] == 1


def test_gpus_appear_only_after_driver_install() -> None:
    objs = [make_scenario("30m").obj(),
            make_pool("gpu", "g2-standard-8", 1).spec(driverInstallDelay="5m").gpus("nvidia-l4", 1).obj(),
            make_pod("p").gpus(1).obj()]
    result = run(objects=objs)
    bound = [t for t, _, _, o in result.history if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    # node boots at 90 s, the driver is ready 5 min later; the pod cannot bind before that.
    assert min(bound) >= 90 + 300


def test_priority_preemption_evicts_lower_priority_pod() -> None:
    pcs = [make_priority_class(n).value(v).obj() for n, v in (("low", 10), ("high", 1000))]
    objs = [make_scenario("1h").obj(), *pcs,
            make_pool("gpu", "g2-standard-8", 1).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            make_pod("victim").gpus(1).priority_class("low").obj(),
            make_pod("vip").gpus(1).priority_class("high").create_at("10m").obj()]
    result = run(objects=objs)
    reasons = [(o["reason"], o["involvedObject"]["name"]) for _, _, e, o in result.history
               if o["kind"] == "Event" and e == "ADDED"]
    assert ("Preempted", "victim") in reasons
    vip = [o for _, _, _, o in result.history if o["kind"] == "Pod" and o["metadata"]["name"] == "vip"][-1]
    assert vip["spec"].get("nodeName")


def test_most_allocated_packs_least_allocated_spreads() -> None:
    def nodes_used(strategy: str) -> int:
        objs = [make_scenario("1h").spec(scoringStrategy=strategy).obj(), make_pool("cpu", "e2-standard-8", 3).obj()]
        objs += [make_pod(f"p{i}").cpu("1").obj() for i in range(3)]
        r = run(objects=objs)
        return len({o["spec"]["nodeName"] for _, _, _, o in r.history if o["kind"] == "Pod" and o["spec"].get(
            "nodeName")})
    assert nodes_used("LeastAllocated") == 3
    assert nodes_used("MostAllocated") == 1


def test_same_seed_byte_identical_summary(tmp_path) -> None:
    objs = [make_scenario("3h").seed(5).obj(), make_pool("gpu", "g2-standard-24", 2).gpus("nvidia-l4", 2).obj()]
    objs += [make_pod(f"p{i}").gpus(1).duration(f"{10 + i}m").create_at(f"{i}m").obj() for i in range(8)]
    a, b = tmp_path / "a", tmp_path / "b"
    run(objects=objs, out=a)
    run(objects=objs, out=b)
    assert (a / "summary.json").read_bytes() == (b / "summary.json").read_bytes()
    assert (a / "history.jsonl").read_bytes() == (b / "history.jsonl").read_bytes()
    assert json.loads((a / "summary.json").read_text())["pods"]["by_phase"]["Succeeded"] == 8


def test_plugins_run_at_their_extension_points_in_the_profile_order() -> None:
    """Each plugin is called at the points it implements, in the profile's order (default_plugins.go:
    VolumeRestrictions, VolumeBinding, InterPodAffinity, DynamicResources; the GPU policy last) but InterPodAffinity's
    PreFilter first: DynamicResources' per-node Filter before the GPU placement policy's (which filters what
    DynamicResources kept), the policy's Score replacing the default ones, and InterPodAffinity's vector Filter
    narrowing the mask before the scan."""
    env = Environment()
    store = Store(env, 0)
    sched = Scheduler(store, EventRecorder(store), 0, "LeastAllocated", Features.from_gates({}), "FGD")
    names = {point: [p.name for p in plugins] for point, plugins in sched.points.items()}
    assert names == {"pre_filter": ["InterPodAffinity", "VolumeRestrictions", "VolumeBinding", "DynamicResources",
                                    "GpuShare"],
                     "filter_rows": ["VolumeRestrictions", "VolumeBinding", "DynamicResources", "GpuShare"],
                     "rejections": ["VolumeBinding", "InterPodAffinity"],
                     "preemptible": ["VolumeRestrictions", "VolumeBinding", "InterPodAffinity"], "select": ["GpuShare"],
                     "reserve": ["VolumeBinding", "DynamicResources", "GpuShare"],
                     "pre_bind_pre_flight": ["VolumeBinding"], "pre_bind": ["VolumeBinding"],
                     "pre_enqueue": ["DynamicResources"],
                     "assigned_pod_added": ["InterPodAffinity"],
                     "assigned_pod_deleted": ["VolumeRestrictions", "InterPodAffinity"],
                     "binding": ["InterPodAffinity"], "forget": ["VolumeBinding", "GpuShare"], "expect": ["GpuShare"]}
    plain = Scheduler(store, EventRecorder(store), 0, "LeastAllocated", Features.from_gates({}), None)
    assert [p.name for p in plain.points["select"]] == []  # the default Scores pick the node

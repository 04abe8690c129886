"""Whole-run invariants (tests/invariants.py) over every example and the bundled scenarios, with short durations,
and over the fault scenarios that used to break them."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import RUNNABLE, SHORT_DURATION, missing_shared_trace, with_namespaces
from invariants import check, check_run_dir
from k8s_builders import make_pod, make_scenario, static_node

from kubetwin.runner import run


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
def test_invariants_hold_over_the_examples(path: Path, tmp_path: Path) -> None:
    if not path.exists() or missing_shared_trace(path):
        pytest.skip(f"{path.name}: needs ../shared")
    out = tmp_path / "run"
    run(with_namespaces(path), out=out, duration=SHORT_DURATION.get(path.name))
    assert check_run_dir(out) == []


def _h(*entries: tuple) -> list:
    return [(float(t), rv, etype, obj) for t, rv, etype, obj in entries]


def _node(name: str, cpu: str = "1", ready: str = "True") -> dict:
    return {"kind": "Node", "metadata": {"name": name, "uid": f"n-{name}"}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "pods": "10"}, "conditions": [{"type": "Ready", "status": ready}]}}


def _pod(name: str, node: str | None = None, cpu: str = "1", phase: str = "Pending", uid: str | None = None) -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": uid or f"p-{name}"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                     **({"nodeName": node} if node else {})}, "status": {"phase": phase}}


def test_the_checker_catches_each_broken_invariant() -> None:
    """The checker is not vacuous: each rule flags a history that breaks it."""
    assert check(_h((0, 1, "ADDED", _node("n")), (0, 2, "ADDED", _pod("a")),
                    (1, 3, "MODIFIED", _pod("a", "n", phase="Running")))) == []
    over = check(_h((0, 1, "ADDED", _node("n")), (0, 2, "ADDED", _pod("a", "n")), (0, 3, "ADDED", _pod("b", "n"))))
    assert any("over-committed in cpu" in e for e in over)
    assert any("bound to missing node" in e for e in check(_h((0, 1, "ADDED", _pod("a")),
                                                             (1, 2, "MODIFIED", _pod("a", "gone")))))
    assert any("NotReady" in e for e in check(_h((0, 1, "ADDED", _node("n", ready="False")),
                                                 (0, 2, "ADDED", _pod("a", "n")),
                                                 (1, 3, "MODIFIED", _pod("a", "n", phase="Running")))))
    assert any("resourceVersion" in e for e in check(_h((0, 2, "ADDED", _node("n")), (0, 1, "ADDED", _node("m")))))
    assert any("after its deletion" in e for e in check(_h((0, 1, "ADDED", _node("n")), (0, 2, "DELETED", _node("n")),
                                                          (1, 3, "MODIFIED", _node("n")))))
    claim = {"kind": "ResourceClaim", "metadata": {"namespace": "default", "uid": "c"}, "status": {"allocation": {
        "devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0", "request": "r"}]}}}}
    two = check(_h((0, 1, "ADDED", {**claim, "metadata": {**claim["metadata"], "name": "x"}}),
                   (0, 2, "ADDED", {**claim, "metadata": {**claim["metadata"], "name": "y", "uid": "d"}})))
    assert any("allocated to" in e for e in two)
    cq = {"kind": "ClusterQueue", "metadata": {"name": "cq", "uid": "q"}, "spec": {"resourceGroups": [{
        "coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]},
        "status": {"flavorsReservation": [{"name": "f", "resources": [{"name": "cpu", "total": "3"}]}]}}
    assert any("over nominal" in e for e in check(_h((0, 1, "ADDED", cq))))
    job = {"kind": "Job", "metadata": {"name": "j", "namespace": "default", "uid": "j"}, "spec": {"completions": 2},
           "status": {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}}
    assert any("Succeeded pods seen" in e for e in check(_h((0, 1, "ADDED", job))))
    tainted = {**_node("n"), "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present",
                                                  "effect": "NoSchedule"}]}}
    assert any("untolerated taint nvidia.com/gpu:NoSchedule" in e for e in check(_h(
        (0, 1, "ADDED", tainted), (0, 2, "ADDED", _pod("a")), (1, 3, "MODIFIED", _pod("a", "n")))))
    owned = _pod("w", "n", phase="Running")
    owned["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "controller": True}]
    failed = {**job, "spec": {}, "status": {"active": 0, "conditions": [{"type": "Failed", "status": "True"}]}}
    assert any("finished Job j has 1 active pods" in e for e in check(_h(
        (0, 1, "ADDED", _node("n")), (0, 2, "ADDED", owned), (1, 3, "ADDED", failed))))
    short = {**job, "status": {"succeeded": 0, "conditions": [{"type": "Complete", "status": "True"}]}}
    assert any("Complete Job j reports 0 succeeded of 2" in e for e in check(_h((0, 1, "ADDED", short))))


def test_invariants_hold_over_the_node_faults(tmp_path: Path) -> None:
    """The pods that skip the scheduler (spec.nodeName) on a full, a missing and a NotReady node: before the
    kubelet's admission, PodGC and the node lifecycle controller they over-committed and ran where they could not."""

    out = tmp_path / "run"
    run(objects=[make_scenario("20m").obj(), static_node("full").cpu("4").obj(),
                 make_pod("a").cpu("3").duration("1h").create_at("0s").node_name("full").obj(),
                 make_pod("b").cpu("2").duration("1h").create_at("0s").node_name("full").obj(),
                 make_pod("c").cpu("1").duration("1h").create_at("0s").node_name("missing").obj(),
                 static_node("sick").ready("False").obj(),
                 make_pod("d").cpu("1").duration("1h").create_at("0s").node_name("sick").obj()], out=out)
    assert check_run_dir(out) == []

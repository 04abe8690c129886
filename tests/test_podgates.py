"""k8s.podgates: the one implementation of a pod's scheduling gates (utilpod HasGate / Gate / Ungate) that Kueue's
admission gate and its TAS topology gate both use."""

from __future__ import annotations

from kubetwin.k8s.podgates import gate, has_gate, ungate

ADMISSION, TOPOLOGY = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"


def test_gate_appends_once_and_leaves_the_given_spec_alone() -> None:
    spec = {"containers": []}
    one = gate(spec, ADMISSION)
    assert one["schedulingGates"] == [{"name": ADMISSION}] and "schedulingGates" not in spec
    assert gate(one, ADMISSION) == one
    both = gate(one, TOPOLOGY)
    assert both["schedulingGates"] == [{"name": ADMISSION}, {"name": TOPOLOGY}]
    assert has_gate(both, TOPOLOGY) and has_gate(both, ADMISSION) and not has_gate(spec, ADMISSION)


def test_ungate_removes_one_gate_and_drops_the_list_with_the_last() -> None:
    both = {"schedulingGates": [{"name": ADMISSION}, {"name": TOPOLOGY}], "nodeName": ""}
    left = ungate(both, TOPOLOGY)
    assert left["schedulingGates"] == [{"name": ADMISSION}] and len(both["schedulingGates"]) == 2
    assert "schedulingGates" not in ungate(left, ADMISSION)
    assert ungate({"containers": []}, ADMISSION) == {"containers": []}

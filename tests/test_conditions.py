"""status.conditions written with apimachinery's semantics: lastTransitionTime moves only when the status does.

kube-scheduler writes PodScheduled through podutil.UpdatePodCondition (pkg/api/v1/pod/util.go): a condition
whose status is unchanged keeps its lastTransitionTime even when its reason or message change.
"""

from __future__ import annotations

from k8s_builders import init_pod, make_scenario, static_node

from kubetwin.k8s.conditions import (
    find_condition,
    is_condition_false,
    is_condition_true,
    remove_condition,
    set_condition,
)
from kubetwin.runner import run


def test_unschedulable_pod_keeps_the_time_it_became_unschedulable_when_the_message_changes() -> None:
    # At 0s there is no node ("no nodes available to schedule pods"); at 5m a too-small node joins and the
    # message becomes "Insufficient cpu": still PodScheduled=False since 0s.
    small = static_node("small").cpu("2").obj()
    small["metadata"]["annotations"] = {"kubetwin.io/create-at": "5m"}
    res = run(objects=[make_scenario("10m").obj(), small, init_pod("big", "4").obj()])
    messages = []
    for t, _, p in (v for v in res.versions("Pod", "big") if v.type != "DELETED"):
        c = find_condition(p["status"].get("conditions"), "PodScheduled")
        if c is not None and (not messages or messages[-1][1] != c["message"]):
            messages.append((t, c["message"], c["lastTransitionTime"]))
    assert [m[1] for m in messages] == ["no nodes available to schedule pods",
                                        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                                        "available: 1 No preemption victims found for incoming pod."]
    assert messages[1][0] == 300.0
    assert messages[1][2] == messages[0][2] == "2026-01-01T00:00:00Z"


def test_set_condition_follows_apimachinery() -> None:
    t0 = {"type": "Ready", "status": "False", "reason": "A", "message": "a", "lastTransitionTime": "t0"}
    conds, changed = set_condition([{"type": "Other", "status": "True"}], t0)
    assert changed and conds[1] == t0
    same, changed = set_condition(conds, {**t0, "lastTransitionTime": "t1"})
    assert not changed and same == conds  # nothing but the time differs: no change
    msg, changed = set_condition(conds, {**t0, "message": "b", "lastTransitionTime": "t1"})
    assert changed and msg[1]["message"] == "b" and msg[1]["lastTransitionTime"] == "t0"
    flip, changed = set_condition(conds, {**t0, "status": "True", "lastTransitionTime": "t2"})
    assert changed and flip[1]["lastTransitionTime"] == "t2" and [c["type"] for c in flip] == ["Other", "Ready"]
    assert is_condition_true(flip, "Ready") and not is_condition_false(flip, "Ready")
    assert is_condition_false(conds, "Ready") and not is_condition_true(conds, "Missing")
    assert not is_condition_false(conds, "Missing")
    assert remove_condition(flip, "Ready") == ([{"type": "Other", "status": "True"}], True)
    assert remove_condition(flip, "Missing") == (flip, False)
    assert conds[1] is not t0 and t0["lastTransitionTime"] == "t0"  # inputs are never changed

"""The scheduling queue: QueueingHints decide which cluster events retry an unschedulable pod."""

from __future__ import annotations

from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.runner import run


def _writes(result, pod: str, reason: str) -> list[float]:
    """Times the Event `reason` about `pod` was written (created or its count bumped)."""
    return [t for t, _, e, o in result.history if o["kind"] == "Event" and e in ("ADDED", "MODIFIED")
            and o["involvedObject"]["name"] == pod and o["reason"] == reason]


def _bound_at(result, pod: str) -> float | None:
    return next((t for t, _, _, o in result.history if o["kind"] == "Pod" and o["metadata"]["name"] == pod
                 and o["spec"].get("nodeName")), None)


def test_pod_delete_retries_only_pods_that_lacked_room() -> None:
    dedicated = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    objs = [make_scenario("30m").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
            make_pool("infer", "e2-standard-8", 1).spec(taints=dedicated, labels={"team": "infer"}).obj(),
            make_pod("filler").cpu("7").annotation("kubetwin.io/delete-at", "12m").obj(),
            make_pod("filler-gone").cpu("0.5").obj(),
            make_pod("needs-room").cpu("1").create_at("10m").obj(),
            make_pod("needs-toleration").cpu("1").node_selector(team="infer").create_at("10m").obj()]
    result = run(objects=objs)
    # NodeResourcesFit's hint: a deleted pod frees room, so the pod it rejected is retried and binds at once.
    assert _writes(result, "needs-room", "FailedScheduling") == [600.0]
    assert _bound_at(result, "needs-room") == 720.0
    # TaintToleration's and NodeAffinity's hints ignore pod deletes: the next try is the 5-minute flush of
    # pods that sat unschedulable (podMaxInUnschedulablePodsDuration), not the delete at 12m.
    tries = _writes(result, "needs-toleration", "FailedScheduling")
    assert tries[0] == 600.0
    assert 900.0 <= tries[1] <= 930.0
    assert _bound_at(result, "needs-toleration") is None


def test_node_add_retries_pod_it_can_host() -> None:
    objs = [make_scenario("1h").obj(),
            make_pool("small", "g2-standard-8", 1).spec(driverInstallDelay="0s").gpus("nvidia-l4", 1).obj(),
            make_pool("big", "g2-standard-48", 1).spec(driverInstallDelay="0s").gpus("nvidia-l4", 4).obj()]
    objs[-1]["metadata"]["annotations"] = {"kubetwin.io/create-at": "20m"}
    objs.append(make_pod("wide").gpus(4).create_at("5m").obj())
    result = run(objects=objs)
    assert _writes(result, "wide", "FailedScheduling")[0] == 300.0
    node_ready = min(t for t, _, _, o in result.history if o["kind"] == "Node"
                     and o["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == "big"
                     and (o["status"].get("allocatable") or {}).get("nvidia.com/gpu") == "4")
    assert _bound_at(result, "wide") == node_ready  # moved by the node's update, before any flush


def test_pods_of_one_shape_failing_after_a_node_change_get_the_new_nodes_count() -> None:
    """Two identical GPU pods fail together, a CPU pool comes up (its nodes cannot help them, so no hint requeues
    them), and the 5-minute flush retries both: each FailedScheduling names the nodes as they are then, the second
    pod's too (the scheduler keeps the last FitError histogram per pod shape only while the nodes are unchanged)."""
    cpu = make_pool("cpu", "e2-standard-8", 1).spec(bootDelay="0s").obj()
    cpu["metadata"]["annotations"] = {"kubetwin.io/create-at": "2m"}
    objs = [make_scenario("12m").obj(),
            make_pool("gpu", "g2-standard-8", 1).spec(driverInstallDelay="0s", bootDelay="0s").gpus("nvidia-l4", 1)
            .obj(), cpu,
            make_pod("holder").gpus(1).obj(),
            make_pod("first").gpus(1).create_at("1m").obj(), make_pod("second").gpus(1).create_at("1m").obj()]
    result = run(objects=objs)
    for pod in ("first", "second"):
        messages = [o["message"] for _, _, e, o in result.history if o["kind"] == "Event"
                    and o["involvedObject"]["name"] == pod and o["reason"] == "FailedScheduling"]
        assert messages[0].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
        assert messages[-1].startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")

"""Runtime faults a valid manifest used to hit: huge Jobs, preemption against nominations, zero sample intervals."""

from __future__ import annotations

import pytest
from conftest import final_objects
from k8s_builders import make_pod, make_pool, make_priority_class, make_scenario

from kubetwin.api.errors import KubetwinError
from kubetwin.runner import run


def _job(name: str, completions: int, parallelism: int, duration: str = "1m", **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": parallelism, **spec, "template": {
                "metadata": {"annotations": {"kubetwin.io/duration": duration}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {
                    "requests": {"cpu": "100m"}}}]}}}}


@pytest.mark.parametrize("mode", ["NonIndexed", "Indexed"])
def test_job_with_a_billion_completions_creates_pods_as_it_goes(mode: str) -> None:
    """completions is an int32: 1e9 is valid, and the Job controller creates `parallelism` pods at a time
    (pkg/controller/job: manageJob) instead of building per-completion state up front."""
    objs = [make_scenario("5m").obj(), make_pool("cpu", "e2-standard-8", 1).obj(),
            _job("huge", 1_000_000_000, 3, completionMode=mode)]
    result = run(objects=objs)
    job = final_objects(result, "Job")["huge"]
    assert job["status"]["active"] == 3
    assert job["status"]["succeeded"] >= 6  # 1 min pods, 5 min run
    pods = [p for p in final_objects(result, "Pod").values() if p["status"].get("phase") in ("Pending", "Running")]
    assert len(pods) == 3
    if mode == "Indexed":
        assert job["status"]["completedIndexes"].startswith("0-")


def _pc(name: str, value: int) -> dict:
    return make_priority_class(name).value(value).obj()


def test_preemption_counts_the_nominated_pod_and_finds_victims() -> None:
    """L (1 cpu) and M (6 cpu) at priority 100 on one node; N (6 cpu, 10000) preempts M and is nominated; P (2 cpu,
    5000) then fails only because N holds the room: SelectVictimsOnNode runs the filters with nominated pods of equal
    or higher priority (RunFilterPluginsWithNominatedPods), so L is P's victim."""
    objs = [make_scenario("30m").obj(), _pc("low", 100), _pc("mid", 5000), _pc("top", 10000),
            make_pool("cpu", "e2-standard-8", 1).obj(),  # 7910m allocatable
            make_pod("l").cpu("1").priority_class("low").obj(),
            make_pod("m").cpu("6").priority_class("low").obj(),
            make_pod("n").cpu("6").priority_class("top").create_at("5m").obj(),
            make_pod("p").cpu("1500m").priority_class("mid").create_at("5m").obj()]
    result = run(objects=objs)
    preempted = sorted(o["involvedObject"]["name"] for _, _, e, o in result.history
                       if o["kind"] == "Event" and e == "ADDED" and o["reason"] == "Preempted")
    assert preempted == ["l", "m"]
    pods = final_objects(result, "Pod")
    assert pods["n"]["spec"].get("nodeName") and pods["p"]["spec"].get("nodeName")


def test_preemption_that_cannot_make_room_beside_a_nominated_pod_is_not_a_candidate() -> None:
    """P (2 cpu) fails only because N's nomination holds the room; evicting L (500m) still leaves no room beside N,
    so the node is no candidate (SelectVictimsOnNode with nominated pods) and P waits. It used to crash: the twin
    checked without N, found P fit once L was gone, reprieved L and ranked an empty victim list (DryRunPreemption
    drops such a node: "expected at least one victim pod on node")."""
    objs = [make_scenario("30m").obj(), _pc("low", 100), _pc("mid", 5000), _pc("top", 10000),
            make_pool("cpu", "e2-standard-8", 1).obj(),
            make_pod("l").cpu("500m").priority_class("low").obj(),
            make_pod("m").cpu("6").priority_class("low").obj(),
            make_pod("n").cpu("6").priority_class("top").create_at("5m").obj(),
            make_pod("p").cpu("2").priority_class("mid").create_at("5m").obj()]
    result = run(objects=objs)  # used to raise ValueError: max() arg is an empty sequence
    pods = final_objects(result, "Pod")
    assert pods["n"]["spec"].get("nodeName") and not pods["p"]["spec"].get("nodeName")
    assert pods["l"]["spec"].get("nodeName")  # not evicted for nothing


@pytest.mark.parametrize("interval", ["0s", "0"])
def test_zero_sample_interval_does_not_hang_the_python_api(interval: str) -> None:
    objs = [make_scenario("10m").spec(sampleInterval=interval).obj(), make_pool("cpu", "e2-standard-8", 1).obj()]
    with pytest.raises(KubetwinError, match="sampleInterval"):
        run(objects=objs)


@pytest.mark.parametrize("seed", [-1, 2**128])
def test_seed_out_of_range_through_the_python_api_is_an_error_not_a_crash(seed: int) -> None:
    objs = [make_scenario("10m").obj(), make_pool("cpu", "e2-standard-8", 1).obj(), make_pod("a").cpu("1").obj()]
    with pytest.raises(KubetwinError, match="spec.seed"):
        run(objects=objs, seed=seed)

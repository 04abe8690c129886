"""summary.json's figures against what happened: pending time, GPU-hours allocatable, wasted GPU-hours."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_builders import claim_pod, dra_pool, gpu_claim
from k8s_builders import make_pod, make_pool, make_scenario

from kubetwin.runner import run


def test_a_pod_deleted_before_it_was_bound_waited_until_its_deletion() -> None:
    """A pod that never fits and is deleted at 10 min waited 10 min, not until the end of the run."""
    gone = make_pod("gone").cpu("64").annotation("kubetwin.io/delete-at", "10m").obj()
    objs = [make_scenario("2h").obj(), make_pool("cpu", "e2-standard-8", 1).obj(), gone]
    res = run(objects=objs)
    pend = res.summary["pods"]["pending_seconds"]
    assert pend["max"] == 600.0 and pend["p99"] == 600.0


def test_gpu_hours_allocatable_count_gpus_from_when_they_are_advertised() -> None:
    """The node boots at 90 s and its driver advertises the GPU 5 min later: 1 GPU x (3600 - 390) s, not the
    whole sampling interval before the first sample that saw it."""
    objs = [make_scenario("1h").obj(),
            make_pool("gpu", "g2-standard-8", 1).spec(driverInstallDelay="5m").gpus("nvidia-l4", 1).obj(),
            make_pod("p").gpus(1).duration("20m").create_at("7m").obj()]
    res = run(objects=objs)
    alloc = res.summary["gpu_allocation"]["gpu"]
    assert alloc["gpu_hours_allocatable"] == pytest.approx((3600 - 390) / 3600, abs=1e-3)
    assert alloc["gpu_hours_requested"] == pytest.approx(20 / 60, abs=1e-3)


def test_dra_pod_preempted_by_spot_wastes_its_claimed_gpu_hours() -> None:
    """A pod holding 2 GPUs through a ResourceClaim on a Spot node preempted at 1 h lost its run x 2 GPUs, as a
    device-plugin pod would."""
    pool = dra_pool().spec(spot=True, spotPreemption={"schedule": [{"at": "1h", "nodes": 1}]}).obj()
    res = run(objects=[make_scenario("2h").obj(), pool, gpu_claim("two", 2).obj(),
                       claim_pod("trainer", "two").duration("3h").obj()])
    lost = res.summary["lost_work"]["default/trainer"]
    assert lost["interruptions"] == 1 and lost["hours"] > 0.5
    assert res.summary["wasted_gpu_hours"] == pytest.approx(2 * lost["hours"], abs=2e-3)


def test_wait_for_pods_ready_example_pending_figures() -> None:
    """The gang's pods are deleted at each eviction before all of them could bind: each waited until then
    (600 s at most), not until the end of the 2 h run (was 7,200 s)."""
    res = run([Path(__file__).resolve().parents[1] / "examples" / "kueue-wait-for-pods-ready.yaml"])
    pend = res.summary["pods"]["pending_seconds"]
    assert pend["max"] == 600.0 and pend["p99"] == 600.0

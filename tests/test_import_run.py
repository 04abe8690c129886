"""An imported cluster runs from its own state (issue 36 item 1): bound pods Running on their nodes at t=0, the
pending pod scheduled, no duplicate pods for a ReplicaSet or Job that has its pods, the nodes the pools' own (no
extra VM boots, their cost billed), and pods of a DaemonSet missing from the dump kept running."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetwin import catalog
from kubetwin.runner import RunResult, run

DATA = Path(__file__).parent / "data" / "import"
H100_A, H100_B = "gke-ml-prod-h100-pool-5f3c2a1b-7x2k", "gke-ml-prod-h100-pool-5f3c2a1b-q9wd"
BOUND = {"nvidia-gpu-device-plugin-small-cos-8hx2q": H100_A, "llm-server-6d9f7c8b5d-4kq7z":
         "gke-ml-prod-l4-spot-8e1d04c7-m3rt", "llm-server-6d9f7c8b5d-9tm2x": "gke-ml-prod-l4-spot-2a9b7f13-hx4c",
         "train-llama-0-b8xkd": H100_A, "train-llama-1-pz6wq": H100_B}


@pytest.fixture(scope="module", params=["gke-kubectl.yaml", "gke-kwokctl-snapshot.yaml"])
def result(request: pytest.FixtureRequest) -> RunResult:
    return run([DATA / request.param], duration="2h")


def test_bound_pods_are_running_on_their_nodes_at_t0(result: RunResult) -> None:
    for name, node in BOUND.items():
        at0 = result.last("Pod", name, at=0.0)
        assert at0["status"]["phase"] == "Running" and at0["spec"]["nodeName"] == node, name
        assert result.first_time("Pod", lambda p: p["status"].get("phase") == "Running", name) == 0.0
    # none went through the scheduler: no Scheduled event for them
    assert not [e for e in result.recorded_events("Scheduled") if e.event["involvedObject"]["name"] in BOUND]


def test_the_pending_pod_is_scheduled(result: RunResult) -> None:
    assert result.versions("Pod", "batch-prep")[0].object["status"]["phase"] == "Pending"
    running = result.last("Pod", "batch-prep")
    assert running["status"]["phase"] == "Running"
    assert running["spec"]["nodeName"] == "gke-ml-prod-cpu-pool-91d2c3e4-b7vn"  # the only node with 6 free CPUs
    assert [e.event["involvedObject"]["name"] for e in result.recorded_events("Scheduled")] == ["batch-prep"]


def test_no_duplicate_pods_for_the_replicaset_and_the_job(result: RunResult) -> None:
    names = {v.object["metadata"]["name"] for v in result.versions("Pod")}
    assert names == {*BOUND, "batch-prep"}
    assert {v.object["metadata"]["name"] for v in result.versions("ReplicaSet")} == {"llm-server-6d9f7c8b5d"}
    rs = result.last("ReplicaSet", "llm-server-6d9f7c8b5d")
    assert rs["spec"]["replicas"] == 2 and rs["status"]["readyReplicas"] == 2
    # the Job's pods run the import's default hour, then the Job completes with the pods it had
    job = result.last("Job", "train-llama")
    assert job["status"]["succeeded"] == 2
    done = result.first_time("Job", lambda j: any(
        c["type"] == "Complete" and c["status"] == "True" for c in (j.get("status") or {}).get("conditions") or []),
        "train-llama")
    assert done == pytest.approx(3600.0, abs=1.0)


def test_the_pools_own_the_imported_nodes(result: RunResult) -> None:
    assert {v.object["metadata"]["name"] for v in result.versions("Node")} == {
        *set(BOUND.values()), "gke-ml-prod-cpu-pool-91d2c3e4-b7vn"}  # no VM booted beside them
    # billed at the catalog's price as the pools' own nodes: 2 h of 2 A3 nodes, 2 Spot G2 and 1 E2 node
    cost = result.summary["cost"]
    assert cost["node_hours_by_pool"] == {"cpu-pool": 2.0, "h100-pool": 4.0, "l4-spot": 4.0}
    a3 = catalog.hourly_price(catalog.machine_type("a3-highgpu-8g"), False)
    g2 = catalog.hourly_price(catalog.machine_type("g2-standard-8"), True)
    assert a3 is not None and g2 is not None
    assert cost["by_pool"]["h100-pool"] == pytest.approx(4 * a3, abs=0.01)
    assert cost["by_pool_provisioning"]["l4-spot"] == {"on_demand_usd": 0.0,
                                                       "spot_usd": pytest.approx(4 * g2, abs=0.01)}


def test_the_daemonset_pod_keeps_running(result: RunResult) -> None:
    assert result.last("Pod", "nvidia-gpu-device-plugin-small-cos-8hx2q")["status"]["phase"] == "Running"

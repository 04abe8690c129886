"""H4D (HPC, AMD EPYC Turin, Cloud RDMA) in the catalog and on a NodePool: the machine types validate and run at
the catalog's price (GKE's autoscaler's own table) unless the pool says what it pays, and its Cloud RDMA tier is
what network.cpu_tier reports for MPI jobs."""

from __future__ import annotations

import json

import pytest
from k8s_builders import make_pod, make_scenario

from kubetwin import catalog
from kubetwin.api.loader import Manifest
from kubetwin.runner import run
from kubetwin.validation.validate import validate
from kubetwin.workloads import network

PRICE = "kubetwin.io/hourly-price-usd"


def h4d_pool(machine: str = "h4d-highmem-192", price: str | None = "8.0", nodes: int = 2) -> dict:
    meta: dict = {"name": "hpc"}
    if price is not None:
        meta["annotations"] = {PRICE: price}
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": meta,
            "spec": {"machineType": machine, "zones": ["us-central1-b"], "nodeCount": nodes}}


def errors(*objs: dict) -> list:
    return [d for d in validate([Manifest(o, "t.yaml", 1) for o in objs]) if d.severity == "error"]


@pytest.mark.parametrize("machine", ["h4d-standard-192", "h4d-highmem-192", "h4d-highmem-192-lssd"])
@pytest.mark.parametrize("spot", [False, True])
def test_an_h4d_pool_validates_and_bills_at_the_catalog_price_unless_it_gives_its_own(machine: str, spot: bool) -> None:
    assert errors(h4d_pool(machine, price=None)) == [] and errors(h4d_pool(machine)) == []
    pool = h4d_pool(machine, price=None, nodes=1)
    if spot:
        pool["spec"]["spot"] = True
    result = run(objects=[make_scenario("1h").obj(), pool])
    hourly = catalog.hourly_price(catalog.machine_type(machine), spot)
    assert hourly is not None
    billed_h = 1 - 90 / 3600  # the node bills from when it is up (as the 190-CPU test below)
    assert result.summary["cost"]["total_usd"] == pytest.approx(hourly * billed_h, abs=0.01)
    given = run(objects=[make_scenario("1h").obj(), h4d_pool(machine, price="8.0", nodes=1)])
    assert given.summary["cost"]["total_usd"] == pytest.approx(8.0 * billed_h, abs=0.01)


def test_a_pod_asking_for_190_cpus_runs_on_h4d_and_is_billed_at_the_pools_price() -> None:
    """192 vCPUs less GKE's CPU reservation leaves room for a 190-CPU MPI rank (GKE's HPC guide: keep workloads
    under 192 CPUs); 1,488 GB of memory less GKE's reservation for 1,300 GiB."""
    mt = catalog.machine_type("h4d-highmem-192")
    alloc = catalog.allocatable(mt)
    assert 190_000 <= alloc["cpu"] < 192_000
    pod = make_pod("rank-0").cpu("190").duration("1h").obj()
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1300Gi"
    result = run(objects=[make_scenario("2h").obj(), h4d_pool(nodes=1), pod])
    pods = [o for _, _, _, o in result.history if o["kind"] == "Pod"]
    assert pods[-1]["status"]["phase"] == "Succeeded"
    nodes = [o for _, _, _, o in result.history if o["kind"] == "Node"]
    assert nodes[-1]["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "h4d-highmem-192"
    total = json.loads(json.dumps(result.summary["cost"]))["total_usd"]
    assert total == pytest.approx(8.0 * (2 - 90 / 3600), abs=0.01)


def test_a_pod_larger_than_h4d_stays_pending() -> None:
    pod = make_pod("too-big").cpu("193").duration("1h").obj()
    result = run(objects=[make_scenario("1h").obj(), h4d_pool(nodes=1), pod])
    pods = [o for _, _, _, o in result.history if o["kind"] == "Pod"]
    assert pods[-1]["status"]["phase"] == "Pending"


def test_cloud_rdma_tier_for_h4d_only() -> None:
    t = network.cpu_tier("h4d-highmem-192")
    assert t is not None and t.kind == "cpu_rdma"
    assert t.node_gbs(1, 2) == pytest.approx(25.0 * 0.9)  # 200 Gbps line x the assumed efficiency
    assert network.cpu_tier("h4d-standard-192") == t
    assert network.cpu_tier("c3-standard-88") is None and network.cpu_tier("a3-ultragpu-8g") is None
    # the GPU collective model does not treat H4D as a GPU network
    assert network.capability("h4d-highmem-192") == "none"
    raw = network.data()["tiers"]["cloud_rdma"]
    assert "run-hpc-workloads" in raw["node_line_source"] and "twin assumption" in raw["latency_source"]

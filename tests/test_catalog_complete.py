"""Every machine type the twin runs has a sourced CPU, memory and price (the class), and one it cannot run is
refused at validate with the missing number named — never a node that advertises no cpu or a pool billed $0.
The cases the audit found: TPU v4 (ct4p-hightpu-4t) and Ironwood (tpu7x) hosts advertised no CPU or memory, and
Ironwood cost $0."""

from __future__ import annotations

import json

import pytest
from k8s_builders import make_pod, make_scenario
from test_tpu import diags, tpu_pool

from kubetwin import catalog
from kubetwin.runner import run

PRICE = "kubetwin.io/hourly-price-usd"


def _all() -> list[catalog.MachineType]:
    return [*catalog.machine_types(), *catalog.tpu_machine_types()]


@pytest.mark.parametrize("name", [m.name for m in _all()])
def test_every_machine_type_has_cpu_memory_and_a_price_or_is_refused(name: str) -> None:
    """A machine type with every number sourced runs; one without is a validate error naming what is missing
    (a NodePool may give the price it pays where none is published)."""
    mt = catalog.machine_type(name)
    missing = catalog.unsourced(mt)
    assert set(missing) <= {"vCPUs", "memory", "price"}
    if not missing:
        assert mt.vcpus and mt.memory_gib and catalog.hourly_price(mt, False)
        alloc = catalog.allocatable(mt)
        assert 0 < alloc["cpu"] < mt.vcpus * 1000 and 0 < alloc["memory"]
        return
    pool = tpu_pool("p", name, mt.single_host_topology) if mt.tpu else {
        "apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": "p"},
        "spec": {"machineType": name, "zones": ["us-central1-a"], "nodeCount": 1}}
    errs = [d for d in diags(pool) if d.severity == "error" and d.field == "spec.machineType"]
    said = " ".join(d.message for d in errs)
    assert errs and all(w in said for w in missing if w != "price"), said
    assert ("price" in missing) == ("no published price" in said)


@pytest.mark.parametrize("machine", ["ct4p-hightpu-4t", "tpu7x-standard-4t"])
def test_a_pod_asking_for_cpu_and_memory_fits_a_v4_and_an_ironwood_host(machine: str) -> None:
    mt = catalog.machine_type(machine)
    assert mt.vcpus and mt.memory_gib
    pool = tpu_pool("tpu", machine, mt.single_host_topology)
    if catalog.hourly_price(mt, False) is None:  # Ironwood: no published price, the pool says what it pays
        pool["metadata"]["annotations"] = {PRICE: "20.0"}
    pod = make_pod("p").cpu("8").duration("1h").obj()
    res = pod["spec"]["containers"][0]["resources"]
    res["requests"]["memory"] = "32Gi"
    res["limits"] = {"google.com/tpu": str(mt.tpu_chips)}
    assert [d for d in diags(make_scenario("2h").obj(), pool, pod) if d.severity == "error"] == []
    result = run(objects=[make_scenario("2h").obj(), pool, pod])
    pods = [o for _, _, _, o in result.history if o["kind"] == "Pod"]
    assert pods[-1]["status"]["phase"] == "Succeeded"
    assert result.summary["cost"]["total_usd"] > 0


def test_ironwood_without_a_price_is_refused_and_with_one_is_billed_at_it() -> None:
    pool = tpu_pool("ir", "tpu7x-standard-4t", "2x2x1")
    errs = [d for d in diags(pool) if d.severity == "error"]
    assert [d.field for d in errs] == ["spec.machineType"]
    assert "no published price" in errs[0].message and PRICE in errs[0].hint
    pool["metadata"]["annotations"] = {PRICE: "-1"}
    assert any(d.severity == "error" and PRICE in d.field for d in diags(pool))
    pool["metadata"]["annotations"] = {PRICE: "12.5"}
    assert [d for d in diags(pool) if d.severity == "error"] == []
    result = run(objects=[make_scenario("2h").obj(), pool])
    # billed from the node's registration, after the pool's default 90 s boot (to the cent)
    total = json.loads(json.dumps(result.summary["cost"]))["total_usd"]
    assert total == pytest.approx(12.5 * (2 - 90 / 3600), abs=0.005)

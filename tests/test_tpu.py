"""TPU node pools on GKE: catalog, topologies, slice shapes, node labels, atomic multi-host slices, validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_builders import make_namespace, make_pod, make_scenario

from kubetwin import catalog
from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import Manifest, load_paths
from kubetwin.autoscaler.nodepool import NodePoolController
from kubetwin.controllers import admission
from kubetwin.controllers.kubelet import Kubelet
from kubetwin.controllers.podgc import PODGC_MESSAGE, PODGC_REASON
from kubetwin.devices import tpu
from kubetwin.devices.dra.allocator import Features
from kubetwin.runner import run
from kubetwin.scheduler.scheduler import Scheduler
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Store
from kubetwin.validation.validate import validate

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tpu-v5e-slice.yaml"


def _zone(machine: str) -> str:
    """us-central1-a, or the first us-central1 zone the TPU generation is offered in (catalog/data/zones.yaml)."""
    offered = catalog.zones_offering(machine)[0]
    return "us-central1-a" if "us-central1-a" in offered else next(z for z in offered if z.startswith("us-"))


def tpu_pool(name: str, machine: str, topology: str | None, nodes: int | None = 1, **spec) -> dict:
    s: dict = {"machineType": machine, "zones": [_zone(machine)], **spec}
    if nodes is not None:
        s["nodeCount"] = nodes
    if topology is not None:
        s["placementPolicy"] = {"tpuTopology": topology}
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": s}


def tpu_pod(name: str, chips: int, duration: str = "1h") -> dict:
    pod = make_pod(name).cpu("1").duration(duration).obj()
    pod["spec"]["containers"][0]["resources"]["limits"] = {"google.com/tpu": str(chips)}
    return pod


def diags(*objs: dict) -> list:
    return validate([Manifest(o, "t.yaml", 1) for o in objs])


def errors(*objs: dict) -> list:
    return [d for d in diags(*objs) if d.severity == "error"]


class Cluster:
    """runner.run()'s wiring without the clock running to the end, so a test can act between instants."""

    def __init__(self, *objs: dict) -> None:
        self.env = Environment()
        self.store = Store(self.env, 0)
        self.events = EventRecorder(self.store)
        self.store.admit(admission.pod_defaults, ("Pod",))
        self.store.admit(admission.priority(self.store), ("Pod",))
        self.store.admit(admission.extended_resource_toleration, ("Pod",))
        self.pools = NodePoolController(self.store, self.env, "kubetwin", events=self.events)
        Scheduler(self.store, self.events, 0, "LeastAllocated", Features.from_gates({}), None)
        Kubelet(self.store, self.env, self.events)
        self.store.create(make_namespace("default").obj())
        for o in objs:
            self.store.create(o)

    def nodes(self, pool: str | None = None) -> list[dict]:
        return [n for n in self.store.list("Node")
                if pool is None or n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == pool]

    def pool_events(self, reason: str) -> list[dict]:
        return [e for e in self.store.list("Event") if e["reason"] == reason]


# -- topologies ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("machine", "topology"), [
    ("ct5lp-hightpu-1t", "1x1"), ("ct5lp-hightpu-4t", "2x2"), ("ct5lp-hightpu-4t", "16x16"),
    ("ct5lp-hightpu-8t", "2x4"), ("ct6e-standard-4t", "8x16"), ("ct6e-standard-8t", "2x4"),
    ("ct4p-hightpu-4t", "2x2x1"), ("ct4p-hightpu-4t", "8x4x4"), ("ct4p-hightpu-4t", "16x16x16"),
    ("ct5p-hightpu-4t", "2x4x4"), ("ct5p-hightpu-4t", "16x16x24"), ("tpu7x-standard-1t", "1x1x1"),
    ("tpu7x-standard-4t", "4x4x4"), ("tpu7x-standard-4t", "8x12x24"),
])
def test_valid_topologies(machine: str, topology: str) -> None:
    assert tpu.check_topology(machine, topology) == topology


@pytest.mark.parametrize(("machine", "topology", "listed"), [
    ("ct5lp-hightpu-4t", "3x3", "2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"),
    ("ct5lp-hightpu-4t", "32x32", "2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"),
    ("ct6e-standard-4t", "2x2x1", "2x2, 2x4, 4x4"),  # 3D shape on a 2D generation
    ("ct5lp-hightpu-8t", "4x4", "valid: 2x4"),
    ("ct5p-hightpu-4t", "4x4x2", "(A/4)(B/4)(C/4) <= 140 cubes"),  # v5p wants A <= B <= C
    ("ct5p-hightpu-4t", "4x4", "2x2x1, 2x2x2, 2x2x4, 2x4x4"),
    ("ct5p-hightpu-4t", "16x16x40", "<= 140 cubes"),  # 4*4*10 = 160 cubes
    ("ct4p-hightpu-4t", "6x4x4", "<= 64 cubes"),
    ("ct4p-hightpu-4t", "16x16x20", "in any order"),  # 80 cubes > 64
    ("tpu7x-standard-4t", "8x8x4", "<= 144 cubes"),
    ("tpu7x-standard-1t", "2x2x1", "valid: 1x1x1"),
])
def test_invalid_topologies_list_the_valid_ones(machine: str, topology: str, listed: str) -> None:
    with pytest.raises(tpu.TopologyError) as ei:
        tpu.check_topology(machine, topology)
    assert listed in str(ei.value) and topology in str(ei.value)


def test_invalid_topology_hints() -> None:
    with pytest.raises(tpu.TopologyError, match="did you mean 2x4x4"):
        tpu.check_topology("ct5p-hightpu-4t", "4x2x4")
    with pytest.raises(tpu.TopologyError, match="1x1 is a v5e slice on ct5lp-hightpu-1t"):
        tpu.check_topology("ct5lp-hightpu-4t", "1x1")
    with pytest.raises(tpu.TopologyError, match="not a TPU topology"):
        tpu.check_topology("ct5lp-hightpu-4t", "4by4")


def test_valid_topologies_per_generation() -> None:
    assert tpu.valid_topologies("tpu-v5-lite-podslice") == ["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"]
    assert tpu.valid_topologies("tpu-v6e-slice") == tpu.valid_topologies("v5e")
    assert tpu.valid_topologies("v5e", "ct5lp-hightpu-8t") == ["2x4"]
    v5p = tpu.valid_topologies("tpu-v5p-slice")
    assert v5p[:4] == ["2x2x1", "2x2x2", "2x2x4", "2x4x4"]
    assert {"4x4x4", "8x8x8", "16x16x24", "8x8x140"} <= set(v5p)  # 8x8x140: 2*2*35 = 140 cubes
    assert "8x4x4" not in v5p and "8x8x144" not in v5p and "4x4x260" not in v5p
    assert "8x4x4" in tpu.valid_topologies("tpu-v4-podslice")  # v4: any order
    assert "16x16x20" not in tpu.valid_topologies("tpu-v4-podslice")  # 80 cubes > 64
    assert tpu.valid_topologies("tpu7x")[:2] == ["1x1x1", "2x2x1"] and "4x4x144" in tpu.valid_topologies("tpu7x")
    assert all(tpu.chips(t) % 4 == 0 for t in v5p)


@pytest.mark.parametrize(("machine", "topology", "shape"), [
    ("ct5lp-hightpu-4t", "4x4", (16, 4)), ("ct6e-standard-8t", "2x4", (8, 1)), ("ct5p-hightpu-4t", "2x2x4", (16, 4)),
    ("ct6e-standard-4t", "2x4", (8, 2)), ("ct5lp-hightpu-4t", "16x16", (256, 64)), ("ct5lp-hightpu-1t", "1x1", (1, 1)),
    ("ct4p-hightpu-4t", "2x2x1", (4, 1)), ("tpu7x-standard-4t", "4x4x4", (64, 16)), ("ct5lp-hightpu-4t", None, (4, 1)),
])
def test_slice_shape(machine: str, topology: str | None, shape: tuple[int, int]) -> None:
    assert tpu.slice_shape(machine, topology) == shape
    assert tpu.is_multi_host(machine, topology) == (shape[1] > 1)


# -- catalog ------------------------------------------------------------------------------------------------
def test_tpu_catalog() -> None:
    labels = {m.name: catalog.tpu_type(m.tpu or "").gke_accelerator for m in catalog.tpu_machine_types()}
    assert labels == {"ct4p-hightpu-4t": "tpu-v4-podslice", "ct5lp-hightpu-1t": "tpu-v5-lite-podslice",
                      "ct5lp-hightpu-4t": "tpu-v5-lite-podslice", "ct5lp-hightpu-8t": "tpu-v5-lite-podslice",
                      "ct5p-hightpu-4t": "tpu-v5p-slice", "ct6e-standard-1t": "tpu-v6e-slice",
                      "ct6e-standard-4t": "tpu-v6e-slice", "ct6e-standard-8t": "tpu-v6e-slice",
                      "tpu7x-standard-1t": "tpu7x", "tpu7x-standard-4t": "tpu7x"}
    for mt in catalog.tpu_machine_types():
        assert mt.tpu_chips == int(mt.name.rsplit("-", 1)[1].removesuffix("t")) and mt.source and mt.gpu is None
        od, sp = catalog.hourly_price(mt, False), catalog.hourly_price(mt, True)
        assert (od is None) == (sp is None) == (mt.tpu == "tpu7x")  # Ironwood: no published price (refused at
        # validate unless the NodePool gives one: tests/test_catalog_complete.py)
        if od is not None and sp is not None:
            assert 0 < sp < od
    v5e = catalog.machine_type("ct5lp-hightpu-4t")
    assert (v5e.vcpus, v5e.memory_gib) == (112, 192)
    assert catalog.hourly_price(v5e, spot=False) == pytest.approx(4 * 1.20)
    assert catalog.hourly_price(catalog.machine_type("ct5p-hightpu-4t"), spot=True) == pytest.approx(4 * 0.8357)
    v4 = catalog.machine_type("ct4p-hightpu-4t")  # it advertised no cpu or memory before: nothing fitted
    assert (v4.vcpus, v4.memory_gib) == (240, 407) and catalog.unsourced(v4) == []
    assert catalog.unsourced(catalog.machine_type("tpu7x-standard-1t")) == ["vCPUs", "price"]  # refused
    alloc = catalog.allocatable(v5e)
    assert alloc["cpu"] == 112_000 - (60 + 10 + 10 + round(0.0025 * 108 * 1000))
    assert {t.name for t in catalog.tpu_types()} == {"v4", "v5e", "v5p", "v6e", "tpu7x"}
    assert "ct5lp-hightpu-4t" not in {m.name for m in catalog.machine_types()}  # GPU/CPU list unchanged
    with pytest.raises(catalog.CatalogError, match="ct5lp-hightpu-4t"):
        catalog.machine_type("ct5lp-hightpu-3t")


# -- validation ---------------------------------------------------------------------------------------------
def test_wrong_node_count_rejected_with_expected_count() -> None:
    errs = errors(tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=3))
    assert [(d.field, "is 4 nodes" in d.message, "nodeCount: 4" in d.hint) for d in errs] == [
        ("spec.nodeCount", True, True)]
    assert not errors(tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=4))
    assert not errors(tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=0))
    assert not errors(tpu_pool("v5e", "ct5lp-hightpu-4t", "2x2", nodes=3))  # 3 single-host slices


def test_invalid_topology_rejected_naming_the_field() -> None:
    [d] = errors(tpu_pool("v5p", "ct5p-hightpu-4t", "4x4x2", nodes=8))
    assert d.field == "spec.placementPolicy.tpuTopology" and "2x2x1, 2x2x2, 2x2x4, 2x4x4" in d.message
    assert "did you mean 2x4x4" in d.message and d.line == 1


def test_autoscaling_multi_host_is_zero_or_whole_slice() -> None:
    ok = tpu_pool("v6e", "ct6e-standard-4t", "4x8", nodes=None, autoscaling={"minNodeCount": 0, "maxNodeCount": 8})
    assert not errors(ok)
    bad = tpu_pool("v6e", "ct6e-standard-4t", "4x8", nodes=None, autoscaling={"minNodeCount": 2, "maxNodeCount": 16})
    assert sorted(d.field for d in errors(bad)) == ["spec.autoscaling.maxNodeCount", "spec.autoscaling.minNodeCount"]


def test_tpu_pool_field_checks() -> None:
    agree = tpu_pool("v5e", "ct5lp-hightpu-4t", "2x2", accelerators=[{"type": "tpu-v5-lite-podslice", "count": 4}])
    assert not errors(agree)
    disagree = tpu_pool("v5e", "ct5lp-hightpu-4t", "2x2", accelerators=[{"type": "nvidia-l4", "count": 1}])
    assert [d.field for d in errors(disagree)] == ["spec.accelerators[0]"]
    zones = tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=4, zones=["us-central1-a", "us-south1-a"])
    assert [d.field for d in errors(zones)] == ["spec.zones"]
    gpu = tpu_pool("g2", "g2-standard-4", "2x2", accelerators=[{"type": "nvidia-l4", "count": 1}])
    assert [d.field for d in errors(gpu)] == ["spec.placementPolicy.tpuTopology"]
    ironwood = tpu_pool("ir", "tpu7x-standard-4t", "4x4x4", nodes=16)
    assert [d.field for d in errors(ironwood)] == ["spec.machineType"]  # no published price: the pool must say
    ironwood["metadata"]["annotations"] = {"kubetwin.io/hourly-price-usd": "20"}
    notices = [d.message for d in diags(ironwood) if d.severity == "notice"]
    assert not errors(ironwood) and any("workload policy" in n for n in notices)


# -- nodes and slices ---------------------------------------------------------------------------------------
def test_tpu_nodes_labels_taint_allocatable() -> None:
    c = Cluster(tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=4, bootDelay="2m"))
    c.env.run(119)
    assert c.nodes() == []
    c.env.run(120)  # the whole slice registers at one instant
    nodes = c.nodes("v5e")
    assert len(nodes) == 4 and {n["metadata"]["creationTimestamp"] for n in nodes} == {"2026-01-01T00:02:00Z"}
    n = nodes[0]
    labels = n["metadata"]["labels"]
    assert labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v5-lite-podslice"
    assert labels["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert labels["cloud.google.com/gke-nodepool"] == "v5e"
    assert labels["node.kubernetes.io/instance-type"] == "ct5lp-hightpu-4t"
    assert labels["topology.kubernetes.io/zone"] == "us-central1-a"
    assert "cloud.google.com/gke-accelerator" not in labels  # that one is GPU pools'
    assert n["spec"]["taints"] == [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]
    assert n["status"]["capacity"]["google.com/tpu"] == n["status"]["allocatable"]["google.com/tpu"] == "4"
    assert n["status"]["allocatable"]["cpu"] == "111650m"
    assert n["metadata"]["annotations"]["kubetwin.io/hourly-price-usd"] == "4.800000"
    assert tpu.node_slice(n) == "v5e" and c.pools.slice_of(n["metadata"]["name"]) == "v5e"
    assert sorted(c.pools.slice_nodes("v5e")) == sorted(x["metadata"]["name"] for x in nodes)


def test_single_host_tpu_nodes_are_not_a_slice() -> None:
    c = Cluster(tpu_pool("v6e", "ct6e-standard-8t", None, nodes=2))
    c.env.run(100)
    nodes = c.nodes()
    assert len(nodes) == 2 and nodes[0]["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] == "2x4"
    assert nodes[0]["status"]["allocatable"]["google.com/tpu"] == "8" and "cpu" not in nodes[0]["status"]["allocatable"]
    assert tpu.node_slice(nodes[0]) is None and c.pools.slice_of(nodes[0]["metadata"]["name"]) is None


def test_losing_one_host_deletes_the_slice_and_repairs_it_whole() -> None:
    pods = [tpu_pod(f"w{i}", 4, "3h") for i in range(4)]
    c = Cluster(tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=4), *pods)
    c.env.run(600)
    before = sorted(n["metadata"]["name"] for n in c.nodes("v5e"))
    running = [p for p in c.store.list("Pod") if p["status"]["phase"] == "Running"]
    assert len(before) == 4 and len(running) == 4 and {p["spec"]["nodeName"] for p in running} == set(before)
    c.store.delete("Node", "", before[1])  # anyone (a Spot or failure injector) deletes one host
    c.env.run(600)
    assert c.nodes("v5e") == []  # the other three went with it
    [warn] = c.pool_events("RepairingTPUSlice")
    assert warn["type"] == "Warning" and warn["involvedObject"]["kind"] == "NodePool"
    assert before[1] in warn["message"] and "other 3 nodes" in warn["message"]
    assert len(c.pool_events("RemovingNode")) == 4
    c.env.run(600 + 40)  # PodGC's quarantine: the pods on the lost nodes fail
    assert c.store.list("Pod") == []  # bare pods: marked Failed, then force-deleted, as PodGC does
    c.env.run(600 + 89)
    assert c.nodes("v5e") == []
    c.env.run(600 + 90)  # bootDelay later the whole slice is back, under the same names
    assert sorted(n["metadata"]["name"] for n in c.nodes("v5e")) == before
    [ok] = c.pool_events("TPUSliceRepaired")
    assert ok["type"] == "Normal" and "4 nodes" in ok["message"]
    c.pools.finish(700)
    assert sum(c.pools.node_seconds.values()) == pytest.approx(4 * (600 - 90) + 4 * (700 - 690))


def test_job_pods_on_a_lost_slice_fail_as_podgc_fails_them() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
           "spec": {"parallelism": 4, "completions": 4, "backoffLimit": 10, "template": {
               "metadata": {"annotations": {"kubetwin.io/duration": "3h"}},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "w", "image": "x", "resources": {
                   "requests": {"cpu": "1"}, "limits": {"google.com/tpu": "4"}}}]}}}}
    from kubetwin.controllers.job import JobController
    from kubetwin.k8s.generatename import NameGenerator

    c = Cluster(tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=4))
    JobController(c.store, c.env, c.events, NameGenerator(0))
    c.store.create(job)
    c.env.run(600)
    victim = c.pools.slice_nodes("v5e")[0]
    c.pools.fail_slice("v5e", victim, cause="was preempted")
    c.env.run(600 + 90)
    failed = [p for p in c.store.list("Pod") if p["status"]["phase"] == "Failed"]
    assert len(failed) == 4
    cond = [x for x in failed[0]["status"]["conditions"] if x["type"] == "DisruptionTarget"]
    assert cond and cond[0]["reason"] == PODGC_REASON and cond[0]["message"] == PODGC_MESSAGE
    assert "was preempted" in c.pool_events("RepairingTPUSlice")[0]["message"]
    c.env.run(600 + 90 + 60)  # the Job replaces them on the repaired slice
    running = [p for p in c.store.list("Pod") if p["status"]["phase"] == "Running"]
    assert len(running) == 4 and {p["spec"]["nodeName"] for p in running} == set(c.pools.slice_nodes("v5e"))


def test_slice_scales_zero_to_whole() -> None:
    c = Cluster(tpu_pool("v6e", "ct6e-standard-4t", "4x8", nodes=None,
                         autoscaling={"minNodeCount": 0, "maxNodeCount": 8}))
    c.env.run(300)
    assert c.nodes() == []
    c.pools.provision_slice("v6e")
    c.env.run(300 + 90)
    assert len(c.nodes("v6e")) == 8
    c.pools.delete_slice("v6e")
    c.env.run(300 + 90 + 600)
    assert c.nodes() == [] and not c.pool_events("RepairingTPUSlice")  # scaled down, not repaired


def test_deleting_the_pool_deletes_its_slice() -> None:
    c = Cluster(tpu_pool("v5p", "ct5p-hightpu-4t", "2x2x4", nodes=4))
    c.env.run(100)
    assert len(c.nodes()) == 4
    c.store.delete("NodePool", "", "v5p")
    c.env.run(1000)
    assert c.nodes() == [] and not c.pool_events("RepairingTPUSlice")


# -- pods and cost ------------------------------------------------------------------------------------------
def test_tpu_pod_lands_on_tpu_node_with_toleration() -> None:
    result = run(objects=[make_scenario("1h").obj(), tpu_pool("v5e", "ct5lp-hightpu-4t", "2x2"),
                          tpu_pod("p", 4, "10m")])
    pods = [o for _, _, e, o in result.history if o["kind"] == "Pod"]
    last = pods[-1]
    assert last["status"]["phase"] == "Succeeded"
    assert last["spec"]["nodeName"].startswith("gke-kubetwin-v5e-")
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in last["spec"]["tolerations"]


def test_tpu_pod_too_big_for_one_vm_stays_pending() -> None:
    result = run(objects=[make_scenario("30m").obj(), tpu_pool("v5e", "ct5lp-hightpu-4t", "2x2"), tpu_pod("p", 8)])
    assert result.summary["pods"]["never_scheduled"] == 1


def test_example_scenario_cost(tmp_path: Path) -> None:
    manifests = load_paths([EXAMPLE])
    assert not [d for d in validate(manifests) if d.severity == "error"]
    result = run([EXAMPLE], out=tmp_path / "run")
    cost = result.summary["cost"]
    hours = 4 - 90 / 3600  # four VMs from the boot delay to the end
    assert cost["node_hours_by_pool"]["tpu-v5e-4x4"] == pytest.approx(4 * hours, abs=1e-3)
    assert cost["by_pool"]["tpu-v5e-4x4"] == pytest.approx(round(4 * hours * 4 * 1.20, 2), abs=0.01)
    assert result.summary["pods"]["by_phase"] == {"Succeeded": 4}


def test_run_rejects_bad_tpu_pool() -> None:
    with pytest.raises(KubetwinError, match="spec.nodeCount"):
        run(objects=[make_scenario("1h").obj(), tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=2)])


def test_fast_repair_still_fails_the_old_pods_first() -> None:
    """A boot delay under PodGC's 40 s: the slice's old pods fail before the same-named nodes return."""
    pods = [tpu_pod(f"w{i}", 4, "3h") for i in range(4)]
    c = Cluster(tpu_pool("v5e", "ct5lp-hightpu-4t", "4x4", nodes=4, bootDelay="10s"), *pods)
    c.env.run(60)
    c.store.delete("Node", "", c.pools.slice_nodes("v5e")[2])
    c.env.run(70)
    assert len(c.nodes("v5e")) == 4 and c.store.list("Pod") == []
    for i in range(5):  # the repaired VMs have all their chips free: four fit, the fifth waits
        c.store.create(tpu_pod(f"again{i}", 4))
    c.env.run(200)
    phases = sorted(p["status"]["phase"] for p in c.store.list("Pod"))
    assert phases == ["Pending", "Running", "Running", "Running", "Running"]

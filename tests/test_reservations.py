"""Compute Engine reservations consumed by node pools (autoscaler/reservations.py): which reservation a pool's VM
may consume, the reservation's room before the zone's capacity, SPECIFIC pools refused in Compute Engine's words,
GKE's reservation and topology labels on the nodes, the bill (reserved VMs at the reservation's price, idle
reserved VMs billed, per capacity type, per pool and per ComputeClass rule), validate's checks, and the example.

Ported cases, cited by upstream file and case name (GoogleCloudPlatform/cluster-autoscaler @7d250507):
- pkg/cloudprovider/gke/gke_cloud_provider_impl_test.go TestIsReservationCompatible (COMPATIBLE_CASES);
- pkg/reservations/matcher_test.go TestMatchReservationShapeWithReservationAffinity (AFFINITY_CASES),
  TestMatchingUnusedReservations (UNUSED_CASES), TestMatchSpecificReservationShape (SHAPE_CASES: the cases
  without min CPU platform and local SSDs, which the twin does not model).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_builders import make_pod, make_scenario

from kubetwin.autoscaler import reservations as rsv
from kubetwin.runner import run
from kubetwin.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "reservation-blocks.yaml"


def reservation(name: str = "res", machine: str = "g2-standard-8", zone: str = "us-central1-a", count: int = 2,
                required: bool = False, in_use: int = 0, **spec) -> dict:
    obj = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Reservation", "metadata": {"name": name},
           "spec": {"zone": zone, "specificReservationRequired": required,
                    "specificReservation": {"count": count, "instanceProperties": {"machineType": machine}},
                    **spec}}
    return obj


def pool(name: str = "np", machine: str = "g2-standard-8", affinity: dict | None = None, hi: int = 4,
         zones: tuple[str, ...] = ("us-central1-a",), **spec) -> dict:
    s: dict = {"machineType": machine, "autoscaling": {"minNodeCount": 0, "maxNodeCount": hi}, "zones": list(zones),
               **spec}
    if affinity is not None:
        s["reservationAffinity"] = affinity
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": s}


def specific(path: str) -> dict:
    return {"consumeReservationType": "SPECIFIC_RESERVATION", "key": rsv.NAME_KEY, "values": [path]}


ANY = {"consumeReservationType": "ANY_RESERVATION"}
NONE = {"consumeReservationType": "NO_RESERVATION"}


# -- matcher_test.go TestMatchReservationShapeWithReservationAffinity ------------------------------------------
# (case name, reservation requires specific targeting, pool's affinity (None: no reservationAffinity), expected).
# Upstream's sixth case, named "... nodepool with Specific Reservation required", builds the pool with
# ReservationAffinityNone; it is ported as written.
AFFINITY_CASES = [
    ("Reservation and nodepool with Specific Reservation required - Matching", True, specific("res"), True),
    ("Reservation and nodepool with Specific Reservation required but with different name - No matching", True,
     specific("abc-reservation"), False),
    ("Reservation with Specific Reservation required and nodepool without reservation affinity - No matching", True,
     None, False),
    ("Reservation with Specific Reservation required and nodepool with no reservation required - No matching", True,
     NONE, False),
    ("Reservation with Specific Reservation required and nodepool with Any Reservation required - No matching", True,
     ANY, False),
    ("Reservation without Specific Reservation required and nodepool with Specific Reservation required - No "
     "matching", False, NONE, False),
    ("Reservation without Specific Reservation required and nodepool with no Reservation required - No matching",
     False, NONE, False),
    ("Reservation without Specific Reservation required and nodepool with Any Reservation required - Matching",
     False, ANY, True),
]


@pytest.mark.parametrize(("name", "required", "affinity", "expected"), AFFINITY_CASES, ids=[c[0] for c in
                                                                                          AFFINITY_CASES])
def test_affinity_matches_reservation(name: str, required: bool, affinity: dict | None, expected: bool) -> None:
    res = reservation(machine="machine-type-1", zone="zone-1", required=required)
    spec = pool(machine="machine-type-1", affinity=affinity)["spec"]
    got = rsv.compatible(res, rsv.affinity(spec)) and not rsv.shape_mismatches(res, spec, "zone-1")
    assert got is expected


# -- gke_cloud_provider_impl_test.go TestIsReservationCompatible --------------------------------------------------
# (case name, pool's affinity type (None: no reservationAffinity), affinity value, reservation requires specific
# targeting, expected). A shared path's reservation is built in that project and shared with the cluster's (the
# twin also checks the project; upstream compares the name alone). Upstream's fourth case, named "Any-then-fail",
# uses ANY_RESERVATION; it is ported as written.
COMPATIBLE_CASES = [
    ("No specific reservation required, Any affinity", rsv.ANY, "", False, True),
    ("No specific reservation required, Any-then-fail affinity", rsv.ANY_THEN_FAIL, "", False, True),
    ("Specific reservation required, Any affinity", rsv.ANY, "", True, False),
    ("Specific reservation required, Any-then-fail affinity", rsv.ANY, "", True, False),
    ("Specific reservation required, Specific affinity matching name", rsv.SPECIFIC, "res-1", True, True),
    ("Specific reservation required, Specific affinity mismatch name", rsv.SPECIFIC, "res-2", True, False),
    ("Specific reservation required, Specific affinity matching shared reservation path", rsv.SPECIFIC,
     "projects/shared-project/reservations/res-1", True, True),
    ("Specific reservation required, Specific affinity matching reservation block path", rsv.SPECIFIC,
     "projects/shared-project/reservations/res-1/reservationBlocks/block-1", True, True),
    ("Specific reservation required, Specific affinity matching reservation sub-block path", rsv.SPECIFIC,
     "projects/shared-project/reservations/res-1/reservationBlocks/block-1/reservationSubBlocks/sub-block-1", True,
     True),
    ("Specific reservation required, Specific affinity matching local reservation block path", rsv.SPECIFIC,
     "res-1/reservationBlocks/block-1", True, True),
    ("Specific reservation required, Specific affinity with substring collision", rsv.SPECIFIC,
     "projects/shared-project/reservations/res-1-other/reservationBlocks/block-res-1/reservationSubBlocks/"
     "sub-block-1", True, False),
    ("Nil affinity, Specific reservation required", None, "", True, False),
    ("Nil affinity, Specific reservation not required", None, "", False, True),
]


@pytest.mark.parametrize(("name", "kind", "value", "required", "expected"), COMPATIBLE_CASES,
                         ids=[c[0] for c in COMPATIBLE_CASES])
def test_is_reservation_compatible(name: str, kind: str | None, value: str, required: bool, expected: bool) -> None:
    shared = value.startswith("projects/shared-project/")
    res = reservation("res-1", required=required, **({"project": "shared-project", "shareSettings": {
        "shareType": "SPECIFIC_PROJECTS", "projects": ["kubetwin"]}} if shared else {}))
    aff = None if kind is None else {"consumeReservationType": kind, "values": [value]}
    assert rsv.compatible(res, rsv.affinity(pool(affinity=aff)["spec"])) is expected


def test_specific_targets_only_required_named_reservations_and_not_spot_or_flex() -> None:
    """A SPECIFIC pool with a non-required reservation of that name does not match (Compute Engine: "can not be
    targeted as specificReservationRequired is not set"); Spot and flex-start VMs consume no reservation."""
    assert not rsv.compatible(reservation(required=False), rsv.affinity(pool(affinity=specific("res"))["spec"]))
    assert rsv.affinity(pool(affinity=ANY, spot=True)["spec"]).type == rsv.NONE
    assert rsv.affinity(pool(affinity=ANY, flexStart=True)["spec"]).type == rsv.NONE
    assert rsv.affinity(pool()["spec"]).type == rsv.ANY  # no reservationAffinity: Compute Engine's default
    t = rsv.parse_path("projects/p2/reservations/r/reservationBlocks/b1/reservationSubBlocks/s1")
    assert (t.project, t.name, t.block, t.subblock) == ("p2", "r", "b1", "s1")


# -- matcher_test.go TestMatchingUnusedReservations --------------------------------------------------------------
# (case name, reservations as (machine type, count, in use), expected matching unused count)
UNUSED_CASES = [
    ("No reservations - No matching", [], 0),
    ("Reservation already in use - No matching", [("g2-standard-8", 1, 1)], 0),
    ("6 similar reservations with 3 in use - 3 matches", [("g2-standard-8", 6, 3)], 3),
    ("2 different reservations - 1 match", [("g2-standard-8", 1, 0), ("n2-standard-8", 1, 0)], 1),
]


@pytest.mark.parametrize(("name", "given", "expected"), UNUSED_CASES, ids=[c[0] for c in UNUSED_CASES])
def test_matching_unused_reservations(name: str, given: list, expected: int) -> None:
    from kubetwin.sim.env import Environment
    from kubetwin.store.store import Store

    store = Store(Environment(), 0, "2026-01-01T00:00:00Z")
    for i, (machine, count, _) in enumerate(given):
        store.create(reservation(f"r{i}", machine=machine, count=count))
    book = rsv.Reservations(store)
    p = pool(machine="g2-standard-8")
    for i, (_, _, in_use) in enumerate(given):
        for k in range(in_use):
            assert book.claim(p, "us-central1-a", f"used-{i}-{k}", 0.0) is not None
    assert book.room(p, "us-central1-a") == expected


# -- matcher_test.go TestMatchSpecificReservationShape (reasons in GKE's words) --------------------------------
SHAPE_CASES = [
    ("MatchingSpec", {}, {}, []),
    ("DifferentZone_NotMatching", {"zone": "us-central1-b"}, {}, [
        "zones mismatch, requested us-central1-a, reservation at us-central1-b"]),
    ("DifferentMachineType_NotMatching", {}, {"machineType": "a2-highgpu-1g"}, [
        "machine type mismatch, requested a2-highgpu-1g, reservation has a2-highgpu-2g"]),
    ("DifferentAcceleratorType_NotMatching", {"gpu": ("nvidia-l4", 2)}, {}, [
        "accelerator mismatch, requested 2 chips of nvidia-tesla-a100, but it's missing from reservation",
        "accelerator mismatch, reservation has 2 chips of nvidia-l4, but it's not requested"]),
    ("DifferentAcceleratorCount_NotMatching", {"gpu": ("nvidia-tesla-a100", 1)}, {}, [
        "accelerator mismatch, requested 2 chips of nvidia-tesla-a100, reservation has 1 chips of "
        "nvidia-tesla-a100"]),
    ("MultipleMismatches_NotMatching", {"zone": "us-central1-b", "gpu": ("nvidia-tesla-a100", 1)}, {}, [
        "zones mismatch, requested us-central1-a, reservation at us-central1-b",
        "accelerator mismatch, requested 2 chips of nvidia-tesla-a100, reservation has 1 chips of "
        "nvidia-tesla-a100"]),
]


@pytest.mark.parametrize(("name", "res_change", "pool_change", "reasons"), SHAPE_CASES, ids=[c[0] for c in
                                                                                             SHAPE_CASES])
def test_match_specific_reservation_shape(name: str, res_change: dict, pool_change: dict, reasons: list) -> None:
    gpu = res_change.pop("gpu", ("nvidia-tesla-a100", 2))
    res = reservation(machine="a2-highgpu-2g", **{k: v for k, v in res_change.items()})
    res["spec"]["specificReservation"]["instanceProperties"]["guestAccelerators"] = [
        {"acceleratorType": gpu[0], "acceleratorCount": gpu[1]}]
    spec = {"machineType": "a2-highgpu-2g", "accelerators": [{"type": "nvidia-tesla-a100", "count": 2}],
            **pool_change}
    assert rsv.shape_mismatches(res, spec, "us-central1-a") == reasons


# -- layout: blocks, sub-blocks and hosts -----------------------------------------------------------------------
def test_dense_layout_declared_blocks_and_a4x_default_subblocks() -> None:
    declared = reservation("d", machine="a3-ultragpu-8g", count=4, deploymentType="DENSE", blocks=[
        {"name": "b1", "count": 3, "subBlocks": [{"name": "s1", "count": 2}, {"name": "s2", "count": 1}]},
        {"name": "b2", "count": 1}])
    assert [(s.block, s.subblock, s.host) for s in rsv.layout(declared)] == [
        ("b1", "s1", "s1-host-1"), ("b1", "s1", "s1-host-2"), ("b1", "s2", "s2-host-1"),
        ("b2", "b2-sub-1", "b2-sub-1-host-1")]
    a4x = reservation("x", machine="a4x-highgpu-4g", count=40, deploymentType="DENSE")
    subs = [s.subblock for s in rsv.layout(a4x)]
    assert [subs.count(f"x-block-1-sub-{k}") for k in (1, 2, 3)] == [18, 18, 4]  # one NVL72 domain: 18 VMs
    assert {s.block for s in rsv.layout(reservation(count=3))} == {None}  # not dense: no place


# -- runs ----------------------------------------------------------------------------------------------------------
def l4_pod(name: str) -> dict:
    return make_pod(name).gpus(1).cpu("2").duration("1h").obj()


def gpu_pool(name: str, affinity: dict | None, hi: int = 4, **spec) -> dict:
    return pool(name, affinity=affinity, hi=hi, accelerators=[{"type": "nvidia-l4", "count": 1}], **spec)


def events_of(result, name: str, reason: str) -> list[str]:
    return [o["message"] for _, _, _, o in result.history if o["kind"] == "Event"
            and o["involvedObject"]["name"] == name and o["reason"] == reason]


def test_specific_pool_uses_reservation_despite_stockout_then_fails_in_compute_engine_words() -> None:
    """The zone has no g2 capacity at all, yet the 2 reserved VMs come (a reservation is capacity held); the third
    pod's VM fails RESERVATION_CAPACITY_EXCEEDED and the pod gets GKE's "Reservation capacity exceeded". The nodes
    carry GKE's reservation labels; the run bills both reserved VMs at the reservation's price and no idle ones."""
    scenario = make_scenario("2h").spec(capacity=[{"zone": "us-central1-a", "machineType": "g2-standard-8",
                                                   "available": 0}]).obj()
    r = run(objects=[scenario, reservation(required=True, hourlyPriceUsd=0.5),
                     gpu_pool("np", specific("res")), *[l4_pod(f"p{i}") for i in range(3)]])
    ups = r.summary["cluster_autoscaler"]["scale_ups"]
    assert (ups[0]["to"] - ups[0]["from"], ups[0]["granted"]) == (3, 2)
    assert ups[0]["error"] == ("RESERVATION_CAPACITY_EXCEEDED: Specified reservation res does not have available "
                               "resources for the request.")
    assert any("Reservation capacity exceeded" in m for m in events_of(r, "p0", "FailedScaleUp")
               + events_of(r, "p1", "FailedScaleUp") + events_of(r, "p2", "FailedScaleUp"))
    nodes = {o["metadata"]["name"]: o for _, _, _, o in r.history if o["kind"] == "Node"}
    assert len(nodes) == 2
    for n in nodes.values():
        labels = n["metadata"]["labels"]
        assert (labels[rsv.NAME_LABEL], labels[rsv.PROJECT_LABEL]) == ("res", "kubetwin")
        assert rsv.GCE_TOPOLOGY_BLOCK not in labels  # not a dense reservation
    cost = r.summary["cost"]
    res = cost["reservations"]["res"]
    assert res["in_use_peak"] == 2 and res["hourly_price_usd"] == 0.5
    assert cost["by_capacity_type"]["on-demand"] == 0.0
    assert cost["by_capacity_type"]["reserved"] == res["used_usd"] > 0
    # idle: the two reserved VMs before they booted and after they were scaled down
    assert cost["idle_reserved_usd"] == res["idle_usd"] == pytest.approx(
        round((2 * 2 - res["vm_hours_used"]) * 0.5, 2), abs=0.01)
    assert cost["total_usd"] == pytest.approx(cost["by_pool"]["np"] + cost["idle_reserved_usd"], abs=0.01)


def test_any_pool_fills_reservation_then_on_demand_and_idle_is_billed() -> None:
    """An ANY_RESERVATION pool (and one without reservationAffinity) takes the non-required reservation's room
    first, then on-demand VMs; the reservation's 2 unused VMs are billed for the whole run."""
    r = run(objects=[make_scenario("2h").obj(), reservation(count=4), gpu_pool("np", ANY, hi=8),
                     *[l4_pod(f"p{i}") for i in range(6)]])
    cost = r.summary["cost"]
    assert cost["reservations"]["res"]["in_use_peak"] == 4
    assert cost["by_capacity_type"]["reserved"] > 0 and cost["by_capacity_type"]["on-demand"] > 0
    kinds = {o["metadata"]["name"]: rsv.CONSUMED_LABEL in o["metadata"]["labels"] for _, _, _, o in r.history
             if o["kind"] == "Node"}
    assert sorted(kinds.values()) == [False, False, True, True, True, True]
    r2 = run(objects=[make_scenario("2h").obj(), reservation(count=4, required=True), gpu_pool("np", None),
                      *[l4_pod(f"p{i}") for i in range(2)]])
    assert r2.summary["cost"]["reservations"]["res"]["in_use_peak"] == 0  # required: only SPECIFIC consumes it
    assert r2.summary["cost"]["idle_reserved_usd"] == pytest.approx(4 * 2 * 0.85, rel=0.2)


def test_shared_reservation_needs_sharing_and_its_idle_vms_bill_the_owner() -> None:
    """Another project's reservation is consumed only when shared with the cluster's project (SPECIFIC_PROJECTS);
    its idle VMs are billed to its owner, not added to the cluster's total."""
    aff = specific("projects/team-b/reservations/res")
    unshared = reservation(required=True, project="team-b")
    r = run(objects=[make_scenario("1h").obj(), unshared, gpu_pool("np", aff), l4_pod("p0")])
    assert r.summary["cost"]["reservations"]["res"]["in_use_peak"] == 0
    assert not [o for _, _, _, o in r.history if o["kind"] == "Node"]
    shared = reservation(required=True, project="team-b", shareSettings={"shareType": "SPECIFIC_PROJECTS",
                                                                         "projects": ["kubetwin"]})
    r = run(objects=[make_scenario("1h").obj(), shared, gpu_pool("np", aff), l4_pod("p0")])
    cost = r.summary["cost"]
    assert cost["reservations"]["res"]["in_use_peak"] == 1 and cost["reservations"]["res"]["billed_to"] == "team-b"
    assert cost["idle_reserved_usd"] == 0.0 and cost["reservations"]["res"]["idle_usd"] > 0
    node = next(o for _, _, _, o in r.history if o["kind"] == "Node")
    assert node["metadata"]["labels"][rsv.PROJECT_LABEL] == "team-b"


def test_computeclass_rule_reports_capacity_types() -> None:
    """A ComputeClass whose first rule is a Specific reservation falls back to on-demand when the reservation is
    full; the per-rule report says which capacity each rule ran on."""
    klass = "cloud.google.com/compute-class"
    taint = [{"key": klass, "value": "c", "effect": "NoSchedule"}]
    objs = [make_scenario("2h").obj(), reservation(required=True, count=1),
            gpu_pool("a-res", specific("res"), labels={klass: "c"}, taints=taint),
            gpu_pool("b-od", NONE, labels={klass: "c"}, taints=taint),
            {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "c"}, "spec": {
                "priorities": [{"reservations": {"affinity": "Specific", "specific": [{"name": "res"}]}},
                               {"reservations": {"affinity": "None"}}]}}]
    for i in range(3):
        p = l4_pod(f"p{i}")
        p["spec"]["nodeSelector"] = {klass: "c"}
        objs.append(p)
    rules = run(objects=objs).summary["compute_classes"]["c"]["rules"]
    assert list(rules["priorities[0]"]["by_capacity_type"]) == ["reserved"]
    assert list(rules["priorities[1]"]["by_capacity_type"]) == ["on-demand"]
    assert rules["priorities[0]"]["nodes"] == 1 and rules["priorities[1]"]["nodes"] == 2


def test_fixed_pool_past_specific_reservation_gets_no_more_vms() -> None:
    """A fixed-size pool of 3 on a SPECIFIC reservation of 2: Compute Engine creates 2 VMs and refuses the third
    (an event on the NodePool in its words); an ANY pool gets its third VM on-demand."""
    fixed = gpu_pool("np", specific("res"))
    del fixed["spec"]["autoscaling"]
    fixed["spec"]["nodeCount"] = 3
    r = run(objects=[make_scenario("10m").obj(), reservation(required=True), fixed])
    assert len({o["metadata"]["name"] for _, _, _, o in r.history if o["kind"] == "Node"}) == 2
    assert [m.split(": ", 1)[1] for m in events_of(r, "np", "FailedToCreateInstance")] == [
        "RESERVATION_CAPACITY_EXCEEDED: Specified reservation res does not have available resources for the "
        "request."]
    fixed["spec"]["reservationAffinity"] = ANY
    r = run(objects=[make_scenario("10m").obj(), reservation(), fixed])
    assert len({o["metadata"]["name"] for _, _, _, o in r.history if o["kind"] == "Node"}) == 3
    assert r.summary["cost"]["reservations"]["res"]["in_use_peak"] == 2


def test_autoscaled_pool_on_dense_reservation_scales_up_for_a_block_selector() -> None:
    """The autoscaler's template node of a pool on a dense reservation carries the next VM's block, so a pod that
    selects that block (as Kueue's ungater writes it) triggers the scale-up and runs there."""
    res = reservation("d", machine="a3-ultragpu-8g", zone="us-central1-b", count=2, required=True,
                      deploymentType="DENSE", blocks=[{"name": "blk-1", "count": 2}])
    np = pool("a3u", machine="a3-ultragpu-8g", affinity=specific("d"), zones=("us-central1-b",),
              accelerators=[{"type": "nvidia-h200-141gb", "count": 8}])
    pod = make_pod("p").gpus(8).cpu("8").duration("30m").obj()
    pod["spec"]["nodeSelector"] = {rsv.GCE_TOPOLOGY_BLOCK: "blk-1"}
    r = run(objects=[make_scenario("1h").obj(), res, np, pod])
    bound = [o for _, _, _, o in r.history if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    assert bound
    node = next(o for _, _, _, o in r.history if o["kind"] == "Node")
    labels = node["metadata"]["labels"]
    assert (labels[rsv.GCE_TOPOLOGY_BLOCK], labels[rsv.GCE_TOPOLOGY_SUBBLOCK]) == ("blk-1", "blk-1-sub-1")
    assert rsv.BLOCKS_LABEL not in labels  # the pool targets the reservation, not one of its blocks


def test_no_reservation_no_new_cost_keys() -> None:
    """Without Reservation objects summary.json's cost is as before (existing run folders stay the same)."""
    r = run(objects=[make_scenario("1h").obj(), gpu_pool("np", None), l4_pod("p0")])
    assert not {"by_capacity_type", "reservations", "idle_reserved_usd"} & set(r.summary["cost"])


# -- validate ------------------------------------------------------------------------------------------------------
def messages(objs: list[dict]) -> list[tuple[str, str]]:
    import yaml

    from kubetwin.api.loader import load_text

    text = yaml.safe_dump_all([make_scenario("1h").obj(), *objs])
    return [(d.severity, d.message) for d in validate(load_text(text, "s.yaml"))]


def test_validate_reservation_and_targets() -> None:
    bad_blocks = reservation(machine="a3-ultragpu-8g", zone="us-central1-b", count=4, deploymentType="DENSE",
                             blocks=[{"name": "b1", "count": 3}])
    out = messages([bad_blocks])
    assert any(s == "error" and "the blocks hold 3 VMs, specificReservation.count is 4" in m for s, m in out)
    out = messages([reservation(machine="a3-ultragpu-8g", zone="us-central1-a")])
    assert any(s == "error" and "does not offer machine type a3-ultragpu-8g" in m for s, m in out)
    out = messages([reservation(required=False), gpu_pool("np", specific("res"))])
    assert any(s == "warning" and "can not be targeted as specificReservationRequired is not set" in m
               for s, m in out)
    out = messages([gpu_pool("np", specific("nope"))])
    assert any(s == "warning" and "Could not find the given reservation with the following name: nope" in m
               for s, m in out)
    out = messages([reservation(required=True, machine="n2-standard-8"), gpu_pool("np", specific("res"))])
    assert any(s == "warning" and "machine type mismatch, requested g2-standard-8, reservation has n2-standard-8"
               in m for s, m in out)


# -- the example ---------------------------------------------------------------------------------------------------
def test_example_answers(tmp_path: Path) -> None:
    """docs/reservations.md's numbers: 12 nodes in the reservation's first 12 slots, the 64-GPU Job in block-a,
    the 32-GPU Job in sub-block b-1, 4 idle reserved VMs billed."""
    r = run([EXAMPLE])
    cost = r.summary["cost"]
    assert cost["reservations"]["a3u-dense"]["in_use_peak"] == 12
    assert cost["idle_reserved_usd"] == 4190.51 and cost["by_capacity_type"]["reserved"] == 12467.41
    assert cost["total_usd"] == 16657.92
    nodes = {o["metadata"]["name"]: o["metadata"]["labels"] for _, _, _, o in r.history if o["kind"] == "Node"}
    pods = [o for _, _, _, o in r.history if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    where: dict[str, set] = {}
    for p in pods:
        job = p["metadata"]["labels"].get("job-name") or p["metadata"]["name"].rsplit("-", 2)[0]
        labels = nodes[p["spec"]["nodeName"]]
        where.setdefault(job, set()).add((labels[rsv.GCE_TOPOLOGY_BLOCK], labels[rsv.GCE_TOPOLOGY_SUBBLOCK]))
    assert {b for b, _ in where["one-block"]} == {"block-a"}
    assert where["one-subblock"] == {("block-b", "b-1")}
    from kubetwin.report.headline import cluster_rows

    assert ("cost reserved / idle reserved / Spot / flex-start / on-demand",
            "$12,467.41 / $4,190.51 / $0.00 / $0.00 / $0.00") in cluster_rows(r.summary)


def test_adopted_nodes_bill_as_their_labels_say() -> None:
    """A dump's nodes keep the capacity their VMs came from: the Spot nodes of an imported pool bill as Spot, the
    on-demand ones as on-demand (they were all on-demand); a Reservation elsewhere only makes the split reported."""
    from kubetwin.autoscaler.nodepool import node_capacity_type, pool_capacity_type
    from kubetwin.importer import sources as import_sources

    manifests, _ = import_sources.load([Path(__file__).parent / "data" / "import" / "gke-kubectl.yaml"])
    objects = [m.obj for m in manifests] + [reservation(machine="n2-standard-4", count=1)]
    cost = run(objects=objects).summary["cost"]
    by_type = cost["by_capacity_type"]
    assert by_type["spot"] == pytest.approx(cost["by_pool"]["l4-spot"], abs=0.01) and by_type["spot"] > 0
    assert by_type["on-demand"] == pytest.approx(cost["by_pool"]["h100-pool"] + cost["by_pool"]["cpu-pool"], abs=0.02)
    assert by_type["reserved"] == 0.0
    # the rule, each label GKE writes
    assert [node_capacity_type(lb) for lb in (
        {"cloud.google.com/gke-spot": "true"}, {"cloud.google.com/gke-provisioning": "spot"},
        {"cloud.google.com/gke-flex-start": "true"}, {"cloud.google.com/gke-provisioning": "flex-start"},
        {rsv.NAME_LABEL: "res"}, {rsv.CONSUMED_LABEL: "res"}, {"cloud.google.com/gke-provisioning": "standard"},
        {})] == ["spot", "spot", "flex-start", "flex-start", "reserved", "reserved", None, None]
    assert [pool_capacity_type(s) for s in ({"spot": True}, {"flexStart": True}, {})] == [
        "spot", "flex-start", "on-demand"]

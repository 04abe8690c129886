"""GKE ComputeClass in the cluster autoscaler twin (autoscaler/computeclass.py): which pools a rule matches, the
order in which scale-up tries the rules, fallback on stockout, whenUnsatisfiable, active migration, the class's
autoscalingPolicy, GKE's admission for classes, and the per-rule report.

Ported cases, cited by upstream file and case name:
- GoogleCloudPlatform/cluster-autoscaler @7d250507 pkg/computeclass/rules/reservations_test.go
  TestReservationsRuleMatchesNodeGroup (RESERVATION_CASES);
- the same repository's crd/ccc/ccc.go GroupedRules and organizer.go organizeByRules behaviour, in
  test_grouped_rules_by_priority_score and test_scale_up_anyway_uses_unmatched_pool_last.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_builders import make_pod, make_scenario

from kubetwin.autoscaler import computeclass as cc
from kubetwin.runner import run

ROOT = Path(__file__).resolve().parents[1]
CLASS = "cloud.google.com/compute-class"


def pool(name: str, machine: str = "g2-standard-8", zones: tuple[str, ...] = ("us-central1-a",), klass: str = "c",
         hi: int = 4, gpu: str | None = "nvidia-l4", **spec) -> dict:
    s: dict = {"machineType": machine, "autoscaling": {"minNodeCount": 0, "maxNodeCount": hi}, "zones": list(zones),
               **spec}
    if gpu:
        s["accelerators"] = [{"type": gpu, "count": 1}]
    if klass:
        s["labels"] = {CLASS: klass, **s.get("labels", {})}
        s["taints"] = [{"key": CLASS, "value": klass, "effect": "NoSchedule"}]
    return {"apiVersion": "kubetwin.io/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": s}


def compute_class(priorities: list[dict], name: str = "c", **spec) -> dict:
    return {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": name},
            "spec": {"priorities": priorities, **spec}}


def class_pod(name: str, klass: str = "c", duration: str = "2h") -> dict:
    pod = make_pod(name).gpus(1).cpu("2").duration(duration).obj()
    pod["spec"]["nodeSelector"] = {CLASS: klass}
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                           "uid": "u-rs", "controller": True}]
    return pod


def deployment(name: str, replicas: int, klass: str = "c") -> dict:
    """A Deployment of one-L4 pods selecting the class (its ReplicaSet re-creates pods a drain evicts)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": {CLASS: klass}, "containers": [{"name": "c", "image": "i", "resources": {
                    "requests": {"cpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def groups_grown(result) -> list[tuple[float, str, int, int]]:
    return [(u["t"], u["group"].split("/")[0], u["to"] - u["from"], u["granted"])
            for u in result.summary["cluster_autoscaler"]["scale_ups"]]


# -- rule matching ---------------------------------------------------------------------------------------------
def _pool_obj(**spec) -> dict:
    return {"metadata": {"name": "np"}, "spec": {"machineType": "n2-standard-8", "zones": ["us-central1-a"], **spec}}


LOCAL = {"consumeReservationType": "SPECIFIC_RESERVATION", "key": cc.RESERVATION_NAME_KEY, "values": ["reservation"]}
LOCAL_BLOCK = {**LOCAL, "values": ["reservation/reservationBlocks/res-block"]}
LOCAL_SUB = {**LOCAL, "values": ["reservation/reservationBlocks/res-block/reservationSubBlocks/res-sub-block"]}
SHARED = {**LOCAL, "values": ["projects/other-project/reservations/reservation"]}
SHARED_BLOCK = {**LOCAL, "values": ["projects/other-project/reservations/reservation/reservationBlocks/res-block"]}
ANY = {"consumeReservationType": "ANY_RESERVATION"}
R_LOCAL = {"affinity": "Specific", "specific": [{"name": "reservation"}]}
R_LOCAL_BLOCK = {"affinity": "Specific", "specific": [{"name": "reservation",
                                                        "reservationBlock": {"name": "res-block"}}]}
R_LOCAL_SUB = {"affinity": "Specific", "specific": [{"name": "reservation", "reservationBlock": {
    "name": "res-block", "reservationSubBlock": {"name": "res-sub-block"}}}]}
R_SHARED = {"affinity": "Specific", "specific": [{"name": "reservation", "project": "other-project"}]}
R_SHARED_BLOCK = {"affinity": "Specific", "specific": [{"name": "reservation", "project": "other-project",
                                                         "reservationBlock": {"name": "res-block"}}]}
R_ANY = {"affinity": "AnyBestEffort"}


def _zones(rule: dict, zones: list[str]) -> dict:
    return {"affinity": "Specific", "specific": [{**rule["specific"][0], "zones": zones}]}


# reservations_test.go TestReservationsRuleMatchesNodeGroup: (case name, rule's reservations or None, pool's
# reservationAffinity, pool zones, expected)
RESERVATION_CASES = [
    ("rule with specific local reservation, matching", R_LOCAL, LOCAL, None, True),
    ("rule with specific local reservation with block, matching", R_LOCAL_BLOCK, LOCAL_BLOCK, None, True),
    ("rule with specific local reservation with block and sub-block, matching", R_LOCAL_SUB, LOCAL_SUB, None, True),
    ("rule with specific shared reservation, matching", R_SHARED, SHARED, None, True),
    ("rule with specific shared reservation with block, matching", R_SHARED_BLOCK, SHARED_BLOCK, None, True),
    ("rule with any reservation, matching", R_ANY, ANY, None, True),
    ("rule with specific local reservation, mig with any reservation, not matching", R_LOCAL, ANY, None, False),
    ("rule with specific local reservation with block, mig with any reservation, not matching", R_LOCAL_BLOCK, ANY,
     None, False),
    ("rule with specific shared reservation, mig with any reservation, not matching", R_SHARED, ANY, None, False),
    ("rule with specific local reservation, mig with shared reservation, not matching", R_LOCAL, SHARED, None,
     False),
    ("rule with specific local reservation with block, mig with shared reservation, not matching", R_LOCAL_BLOCK,
     SHARED_BLOCK, None, False),
    ("rule with specific shared reservation, mig with local reservation, not matching", R_SHARED, LOCAL, None,
     False),
    ("rule with specific local reservation and specified zones, matching", _zones(R_LOCAL, ["us-central1-a"]), LOCAL,
     ["us-central1-a"], True),
    ("rule with specific local reservation and zones in different order, matching",
     _zones(R_LOCAL, ["us-central1-b", "us-central1-a"]), LOCAL, ["us-central1-a", "us-central1-b"], True),
    ("rule with specific local reservation and different zone, not matching", _zones(R_LOCAL, ["us-central1-b"]),
     LOCAL, ["us-central1-a"], False),
    ("rule with specific local reservation and superset of nodepool zones, matching",
     _zones(R_LOCAL, ["us-central1-a", "us-central1-b"]), LOCAL, ["us-central1-a"], True),
    ("rule with specific local reservation and subset of nodepool zones, not matching",
     _zones(R_LOCAL, ["us-central1-a"]), LOCAL, ["us-central1-a", "us-central1-b"], False),
    ("rule with specific local reservation, no zone preference, but mig has locations, matching", R_LOCAL, LOCAL,
     ["us-central1-a"], True),
    ("rule with any reservation, mig with local reservation, not matching", R_ANY, LOCAL, None, False),
    ("rule with any reservation, mig with shared reservation, not matching", R_ANY, SHARED, None, False),
    ("rule without reservation, mig with specific reservation, matching", None, LOCAL, None, True),
    ("rule without reservation, mig with specific shared reservation, matching", None, SHARED, None, True),
    ("rule without reservation, mig with any reservation, matching", None, ANY, None, True),
    ("rule with specific local reservation (block + sub-block), mig with (block only), not matching", R_LOCAL_SUB,
     LOCAL_BLOCK, None, False),
    ("rule with specific local reservation (block only), mig with (block + sub-block), not matching", R_LOCAL_BLOCK,
     LOCAL_SUB, None, False),
]


@pytest.mark.parametrize(("name", "rule", "affinity", "zones", "expected"), RESERVATION_CASES,
                         ids=[c[0] for c in RESERVATION_CASES])
def test_reservations_rule_matches_pool(name: str, rule: dict | None, affinity: dict, zones: list | None,
                                        expected: bool) -> None:
    spec: dict = {"reservationAffinity": affinity}
    if zones:
        spec["zones"] = zones
    priority = {"machineFamily": "n2"} if rule is None else {"reservations": rule}
    assert cc.rule_matches(priority, _pool_obj(**spec)) is expected


def test_machine_spec_gpu_flex_rules() -> None:
    """rules/machine_spec.go, gpu.go, flex_start.go: family, type, spot only when set, minCores/minMemoryGb against
    the machine type, GPU type/count (a g2 carries its L4), and a rule without flexStart matching a flex pool."""
    g2 = {"metadata": {"name": "g"}, "spec": {"machineType": "g2-standard-8", "zones": ["us-central1-a"]}}
    flex = {"metadata": {"name": "f"}, "spec": {**g2["spec"], "flexStart": True}}
    spot = {"metadata": {"name": "s"}, "spec": {**g2["spec"], "spot": True}}
    assert cc.rule_matches({"machineFamily": "g2"}, g2)
    assert not cc.rule_matches({"machineFamily": "n4"}, g2)
    assert cc.rule_matches({"machineType": "g2-standard-8"}, g2)
    assert cc.rule_matches({"machineFamily": "g2"}, spot)  # spot unset: any
    assert not cc.rule_matches({"spot": False}, spot)
    assert cc.rule_matches({"minCores": 8, "minMemoryGb": 32}, g2)
    assert not cc.rule_matches({"minCores": 9}, g2)
    assert cc.rule_matches({"gpu": {"type": "nvidia-l4", "count": 1}}, g2)
    assert not cc.rule_matches({"gpu": {"type": "nvidia-l4", "count": 2}}, g2)
    assert not cc.rule_matches({"gpu": {"type": "nvidia-l4", "driverVersion": "latest"}}, g2)
    assert cc.rule_matches({"machineFamily": "g2"}, flex)  # flex_start.go: a disabled/absent rule matches
    assert cc.rule_matches({"flexStart": {"enabled": True}}, flex)
    assert not cc.rule_matches({"flexStart": {"enabled": True}}, g2)
    assert not cc.rule_matches({"machineFamily": "g2", "maxRunDurationSeconds": 3600}, g2)
    assert cc.rule_matches({"nodepools": ["g"]}, g2) and not cc.rule_matches({"nodepools": ["x"]}, g2)
    assert cc.rule_matches({"location": {"zones": ["us-central1-a", "us-central1-b"]}}, g2)
    assert not cc.rule_matches({"location": {"zones": ["us-central1-b"]}}, g2)


def test_grouped_rules_by_priority_score() -> None:
    """ccc.go GroupedRules: index order without priorityScore; by score, highest first, ties together."""
    assert cc.grouped_rules([{"spot": True}, {"spot": False}]) == [[0], [1]]
    prios = [{"spot": True, "priorityScore": 10}, {"spot": False, "priorityScore": 50},
             {"machineFamily": "n4", "priorityScore": 10}]
    assert cc.grouped_rules(prios) == [[1], [0, 2]]
    # priorityDefaults fill location, not a nodepools-only priority (applyDefaultsToPriority)
    klass = compute_class([{"spot": True}, {"nodepools": ["a"]}], priorityDefaults={
        "location": {"zones": ["us-central1-a"]}})
    assert cc.priorities(klass) == [{"spot": True, "location": {"zones": ["us-central1-a"]}}, {"nodepools": ["a"]}]


# -- scale-up order and fallback ----------------------------------------------------------------------------------
def test_highest_priority_rule_first_then_fallback_on_stockout() -> None:
    """Rule 1 (Spot) out of stock: its resize fails (FailedScaleUp, backoff), the next loop takes rule 2; the
    cheaper least-waste choice of a lower rule never wins over a higher rule that can take the pods."""
    scenario = make_scenario("1h").spec(capacity=[{"zone": "us-central1-a", "machineType": "g2-standard-8",
                                                   "spot": True, "available": 1}]).obj()
    objs = [scenario, compute_class([{"machineFamily": "g2", "spot": True}, {"machineFamily": "g2", "spot": False}]),
            pool("a-ondemand"), pool("b-spot", spot=True), *[class_pod(f"p{i}") for i in range(3)]]
    r = run(objects=objs)
    # (least-waste alone ties the two and takes the first by name, a-ondemand)
    assert groups_grown(r) == [(10.0, "b-spot", 3, 1), (20.0, "a-ondemand", 2, 2)]
    rules = r.summary["compute_classes"]["c"]["rules"]
    assert rules["priorities[0]"]["pools"] == ["b-spot"] and rules["priorities[0]"]["nodes"] == 1
    assert rules["priorities[1]"]["pods_started"] == 2 and rules["priorities[0]"]["pods_started"] == 1
    assert rules["priorities[0]"]["cost_usd"] < rules["priorities[1]"]["cost_usd"]


def test_do_not_scale_up_leaves_pods_pending_scale_up_anyway_uses_unmatched_pool() -> None:
    """organizer.go organizeByRules: the class's pools outside its rules are dropped under DoNotScaleUp (the CRD's
    default) and form a last bucket under ScaleUpAnyway."""
    pods = [class_pod("p0")]
    unmatched = pool("n2-pool", machine="n2-standard-8", gpu=None)
    rules = [{"machineFamily": "g2"}]
    gpu_less = make_pod("p0").cpu("2").duration("1h").obj()
    gpu_less["spec"]["nodeSelector"] = {CLASS: "c"}
    gpu_less["metadata"]["ownerReferences"] = pods[0]["metadata"]["ownerReferences"]
    r = run(objects=[make_scenario("30m").obj(), compute_class(rules), unmatched, gpu_less])
    assert groups_grown(r) == []
    assert r.summary["pods"]["by_phase"].get("Pending") == 1
    r = run(objects=[make_scenario("30m").obj(), compute_class(rules, whenUnsatisfiable="ScaleUpAnyway"), unmatched,
                     gpu_less])
    assert groups_grown(r) == [(10.0, "n2-pool", 1, 1)]
    assert r.summary["compute_classes"]["c"]["rules"]["unmatched"]["pods_started"] == 1


def test_scale_up_anyway_uses_unmatched_pool_last() -> None:
    """With a rule's pool that can take the pods, ScaleUpAnyway's leftover pool is not used, though least-waste
    alone would pick it (g2-standard-4 wastes less than g2-standard-8 for a 2-CPU, 1-GPU pod)."""
    objs = [make_scenario("30m").obj(),
            compute_class([{"machineType": "g2-standard-8"}], whenUnsatisfiable="ScaleUpAnyway"),
            pool("a-g2-small", machine="g2-standard-4"), pool("z-g2"), class_pod("p0")]
    r = run(objects=objs)
    assert groups_grown(r) == [(10.0, "z-g2", 1, 1)]


def test_admission_tolerates_class_taint_and_namespace_default() -> None:
    """GKE tolerates a class's taint for pods selecting it; a Namespace's default class gives its pods the
    selector (the non-DaemonSet variant skips DaemonSet pods)."""
    store_pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "team"}, "spec": {"containers": []}}

    class FakeStore:
        def __init__(self, labels: dict) -> None:
            self.labels = labels

        def get(self, kind: str, ns: str, name: str) -> dict:
            return {"metadata": {"name": name, "labels": self.labels}}

    out = cc.admit_pod(FakeStore({cc.NS_DEFAULT: "gold"}))(store_pod)  # type: ignore[arg-type]
    assert out["spec"]["nodeSelector"] == {CLASS: "gold"}
    assert out["spec"]["tolerations"] == [{"key": CLASS, "operator": "Equal", "value": "gold",
                                           "effect": "NoSchedule"}]
    ds_pod = {**store_pod, "metadata": {**store_pod["metadata"], "ownerReferences": [{"kind": "DaemonSet"}]}}
    assert cc.admit_pod(FakeStore({cc.NS_DEFAULT_NON_DS: "gold"}))(ds_pod) is ds_pod  # type: ignore[arg-type]
    assert cc.admit_pod(FakeStore({}))(store_pod) is store_pod  # type: ignore[arg-type]


def test_active_migration_moves_pods_back_to_spot() -> None:
    """optimizeRulePriority: Spot capacity returns at 1h; the on-demand node's pod is moved (new Spot node first,
    then the drain) and the on-demand pool empties; without the flag nothing moves."""
    cap = [{"zone": "us-central1-a", "machineType": "g2-standard-8", "spot": True, "available": 0,
            "schedule": [{"at": "1h", "available": 4}]}]
    rules = [{"machineFamily": "g2", "spot": True}, {"machineFamily": "g2", "spot": False}]

    def objs(migrate: bool) -> list[dict]:
        extra = {"activeMigration": {"optimizeRulePriority": True}} if migrate else {}
        return [make_scenario("3h").spec(capacity=cap).obj(), compute_class(rules, **extra), pool("a-spot", spot=True),
                pool("b-ondemand"), deployment("web", 1)]

    r = run(objects=objs(True))
    moved = r.summary["compute_classes"]["c"]["migrations"]
    assert len(moved) == 1 and moved[0]["node"].startswith("gke-kubetwin-b-ondemand-")
    assert moved[0]["to"][0].startswith("gke-kubetwin-a-spot-") and 3600 < moved[0]["t"] < 3600 + 900
    downs = r.summary["cluster_autoscaler"]["scale_downs"]
    assert [d.get("migration") for d in downs] == [True]
    bound = [o for _, _, e, o in r.history if o["kind"] == "Pod" and e == "MODIFIED" and o["spec"].get("nodeName")]
    assert bound[-1]["spec"]["nodeName"].startswith("gke-kubetwin-a-spot-")
    assert r.summary["compute_classes"]["c"]["rules"]["priorities[0]"]["pods_started"] == 1
    r2 = run(objects=objs(False))
    assert r2.summary["compute_classes"]["c"]["migrations"] == []
    assert not r2.summary["cluster_autoscaler"]["scale_downs"]


def test_autoscaling_policy_consolidation_delay() -> None:
    """autoscalingPolicy.consolidationDelayMinutes replaces the 10 min unneeded time for the class's nodes."""
    def removed_at(policy: dict) -> float:
        r = run(objects=[make_scenario("2h").obj(), compute_class([{"machineFamily": "g2"}], **policy), pool("g"),
                         class_pod("p0", duration="20m")])
        return r.summary["cluster_autoscaler"]["scale_downs"][0]["t"]
    base = removed_at({})
    fast = removed_at({"autoscalingPolicy": {"consolidationDelayMinutes": 1}})
    assert base - fast == pytest.approx(540, abs=20)


def test_example_answers() -> None:
    """examples/computeclass-fallback.yaml: the numbers docs/computeclass.md gives."""
    r = run([ROOT / "examples" / "computeclass-fallback.yaml"])
    rules = r.summary["compute_classes"]["l4-fallback"]["rules"]
    assert {k: (v["pools"], v["nodes"], v["pods_started"]) for k, v in rules.items()} == {
        "priorities[0]": (["l4-spot"], 10, 10), "priorities[1]": (["l4-ondemand-b"], 4, 4),
        "priorities[2]": (["l4-flex"], 6, 6), "priorities[3]": (["l4-ondemand-c"], 2, 2)}
    assert [v["cost_usd"] for v in rules.values()] == [39.09, 42.01, 27.66, 7.22]
    # the last 2 pods of 12h waited out flex-start's 15 min resize request before on-demand took them
    assert (rules["priorities[3]"]["wait_s_mean"], rules["priorities[3]"]["wait_s_max"]) == (1180.0, 1180.0)
    assert r.summary["cost"]["total_usd"] == 115.97
    assert len(r.summary["compute_classes"]["l4-fallback"]["migrations"]) == 8
    flex = next(o for _, _, e, o in r.history if o["kind"] == "Node" and e == "ADDED"
                and o["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == "l4-flex")
    labels = flex["metadata"]["labels"]
    assert (labels["cloud.google.com/gke-flex-start"], labels["cloud.google.com/gke-provisioning"]) == (
        "true", "flex-start")
    assert {"key": CLASS, "value": "l4-fallback", "effect": "NoSchedule"} in flex["spec"]["taints"]


def test_reservation_example_answers() -> None:
    """examples/computeclass-reservation-fallback.yaml (issue 37's acceptance example): Spot, then a specific
    reservation, then flex-start, then on-demand; what ran on each kind of capacity per rule, and the reservation's
    idle VM-hours billed (docs/computeclass.md)."""
    r = run([ROOT / "examples" / "computeclass-reservation-fallback.yaml"])
    rules = r.summary["compute_classes"]["l4-fallback"]["rules"]
    assert {k: (v["pools"], list(v["by_capacity_type"]), v["pods_started"]) for k, v in rules.items()} == {
        "priorities[0]": (["l4-spot"], ["spot"], 10), "priorities[1]": (["l4-reserved"], ["reserved"], 4),
        "priorities[2]": (["l4-flex"], ["flex-start"], 6), "priorities[3]": (["l4-ondemand-c"], ["on-demand"], 2)}
    cost = r.summary["cost"]
    assert cost["by_capacity_type"] == {"flex-start": 27.66, "idle-reserved": 39.94, "on-demand": 7.22,
                                        "reserved": 42.01, "spot": 39.09}
    assert cost["total_usd"] == 155.91
    res = cost["reservations"]["l4-reserved"]
    assert res["vm_hours_used"] + res["vm_hours_idle"] == pytest.approx(4 * 24, abs=0.01)
    assert res["in_use_peak"] == 4 and res["in_use_at_end"] == 0  # migrated up to Spot at 18h: idle, still billed


def last(result, kind: str, name: str) -> dict:
    """The object's last version in the run's history."""
    return [o for _, _, _, o in result.history if o["kind"] == kind and o["metadata"]["name"] == name][-1]


def test_class_health_status_conditions() -> None:
    """The autoscaler writes the class's status.conditions as GKE's validator does: Health True "Crd is healthy.",
    or False "Crd is not healthy." with one condition per misconfiguration kind (conditions_constants.go)."""
    untainted = pool("g")
    del untainted["spec"]["taints"]
    r = run(objects=[make_scenario("1m").obj(), compute_class([{"machineFamily": "g2"}]), untainted])
    klass = last(r, "ComputeClass", "c")
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in klass["status"]["conditions"]] == [
        ("Health", "False", "Health", "Crd is not healthy."),
        ("NodepoolMisconfigured", "True", "TaintMissing", "Crd taint is missing for the nodepool g.")]
    r = run(objects=[make_scenario("1m").obj(), compute_class([{"machineFamily": "g2"}]), pool("g")])
    assert [(c["type"], c["status"], c["message"]) for c in last(r, "ComputeClass", "c")["status"][
        "conditions"]] == [("Health", "True", "Crd is healthy.")]
    found = cc.misconfigurations(compute_class([{"machineFamily": "n4"}, {"nodepools": ["nope"]}]), [pool("g")])
    assert [(f.type, f.reason) for f in found] == [
        ("NodepoolMisconfigured", "NodepoolWillNeverScaleUp"),
        ("CrdMisconfigured", "NapDisabledAndNoMatchingNodegroups"), ("CrdMisconfigured", "NodePoolNotExist")]


def test_cluster_default_class_governs_unlabelled_pools() -> None:
    """clusterAutoscaler.defaultComputeClass (gcloud --enable-default-compute-class): the class named "default"
    orders the pools without the label (lister/ccc.go GetDefaultCrd), for pods that select no class; off, the
    same class changes nothing."""
    scenario = make_scenario("30m").spec(clusterAutoscaler={"defaultComputeClass": True}).obj()
    pods = [make_pod(f"p{i}").gpus(1).cpu("2").duration("10m").obj() for i in range(2)]
    default = compute_class([{"machineFamily": "g2", "spot": True}], name="default")
    objs = [default, pool("a-ondemand", klass=""), pool("b-spot", klass="", spot=True), *pods]
    r = run(objects=[scenario, *objs])
    assert [g for _, g, _, _ in groups_grown(r)] == ["b-spot"]
    r = run(objects=[make_scenario("30m").obj(), *objs])
    assert [g for _, g, _, _ in groups_grown(r)] == ["a-ondemand"]  # least-waste tie, then the pool name


def test_quota_fallback_and_flex_start_counts_preemptible_quota() -> None:
    """Out of quota falls back as a stockout does; flex-start VMs count against the preemptible quota, so with
    PREEMPTIBLE_NVIDIA_L4_GPUS: 1 taken by the Spot node the flex-start rule is refused too (QUOTA_EXCEEDED) and
    on-demand takes the rest."""
    scenario = make_scenario("1h").spec(quotas={"us-central1": {"PREEMPTIBLE_NVIDIA_L4_GPUS": 1}}).obj()
    rules = [{"machineFamily": "g2", "spot": True}, {"flexStart": {"enabled": True}}, {"machineFamily": "g2"}]
    objs = [scenario, compute_class(rules), pool("a-spot", spot=True), pool("b-flex", flexStart=True),
            pool("c-ondemand"), *[class_pod(f"p{i}") for i in range(3)]]
    r = run(objects=objs)
    assert groups_grown(r) == [(10.0, "a-spot", 3, 1), (20.0, "b-flex", 2, 0), (30.0, "c-ondemand", 2, 2)]
    errors = [u["error"] for u in r.summary["cluster_autoscaler"]["scale_ups"] if u["error"]]
    assert errors == ["QUOTA_EXCEEDED: Quota 'PREEMPTIBLE_NVIDIA_L4_GPUS' exceeded.  Limit: 1.0 in region "
                      "us-central1."] * 2
    flex_nodes = [o for _, _, e, o in r.history if o["kind"] == "Node" and e == "ADDED"
                  and o["metadata"]["labels"].get("cloud.google.com/gke-flex-start") == "true"]
    assert flex_nodes == []

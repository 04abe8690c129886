"""InterPodAffinity Filter: required podAffinity/podAntiAffinity, symmetry, the first pod of a group, hints."""

from __future__ import annotations

from k8s_builders import make_namespace, make_node, make_scenario

from kubetwin.runner import run
from kubetwin.scheduler import interpodaffinity as IPA

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name: str, zone: str) -> dict:
    return make_node(name).label(ZONE, zone).capacity({"cpu": "8", "memory": "32Gi", "pods": "110"}).obj()


def term(key: str = ZONE, ns: dict | None = None, **labels: str) -> dict:
    t = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {**t, "namespaceSelector": ns} if ns is not None else t


def pod(name: str, labels: dict | None = None, affinity: list | None = None, anti: list | None = None,
        node_name: str | None = None, at: str = "0s", ns: str = "default") -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    aff = {}
    if affinity:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if aff:
        spec["affinity"] = aff
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {},
                                                           "annotations": {"kubetwin.io/create-at": at}}, "spec": spec}


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b")]


def placed(objects: list[dict], duration: str = "10m") -> dict[str, dict]:
    out: dict[str, dict] = {}
    for _, _, _, o in run(objects=[make_scenario(duration).obj(), *NODES, *objects]).history:
        if o["kind"] == "Pod":
            out[o["metadata"]["name"]] = o
    return out


def zone_of(p: dict) -> str | None:
    return {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in NODES}.get(p["spec"].get("nodeName"))


def message(p: dict) -> str:
    return next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")["message"]


def test_affinity_follows_the_matching_pod_into_its_zone() -> None:
    pods = placed([pod("db", {"app": "db"}, node_name="b2"),
                   *(pod(f"web{i}", {"app": "web"}, affinity=[term(app="db")], at="1s") for i in range(3))])
    assert [zone_of(pods[f"web{i}"]) for i in range(3)] == ["b", "b", "b"]


def test_affinity_without_a_match_is_unresolvable() -> None:
    pods = placed([pod("web", {"app": "web"}, affinity=[term(app="db")])])
    assert message(pods["web"]) == ("0/4 nodes are available: 4 node(s) didn't match pod affinity rules. preemption: "
                                    "0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


def test_first_pod_of_a_self_affine_group_goes_anywhere_and_the_rest_follow() -> None:
    group = [pod(f"g{i}", {"grp": "x"}, affinity=[term(grp="x")], at=f"{i}s") for i in range(4)]
    pods = placed(group)
    zones = {zone_of(pods[f"g{i}"]) for i in range(4)}
    assert len(zones) == 1 and None not in zones


def test_anti_affinity_keeps_out_of_zones_with_matching_pods() -> None:
    pods = placed([pod("db", {"app": "db"}, node_name="a1"), pod("web", anti=[term(app="db")], at="1s")])
    assert zone_of(pods["web"]) == "b"
    pods = placed([pod("db1", {"app": "db"}, node_name="a1"), pod("db2", {"app": "db"}, node_name="b1"),
                   pod("web", anti=[term(app="db")], at="1s")])
    assert message(pods["web"]) == ("0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules. "
                                    "preemption: 0/4 nodes are available: 4 No preemption victims found for incoming "
                                    "pod.")


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    guard = pod("guard", {"app": "guard"}, anti=[term(app="web")], node_name="a2")
    pods = placed([guard, pod("web", {"app": "web"}, at="1s")])
    assert zone_of(pods["web"]) == "b"  # web has no terms of its own; guard's term keeps it out of zone a
    guard2 = pod("guard2", {"app": "guard"}, anti=[term(app="web")], node_name="b1")
    pods = placed([guard, guard2, pod("web", {"app": "web"}, at="1s")])
    assert message(pods["web"]).startswith("0/4 nodes are available: 4 node(s) didn't satisfy existing pods "
                                           "anti-affinity rules.")


def test_hostname_anti_affinity_spreads_one_per_node() -> None:
    pods = placed([pod(f"r{i}", {"app": "r"}, anti=[term(HOST, app="r")], at=f"{i}s") for i in range(5)])
    nodes = [pods[f"r{i}"]["spec"].get("nodeName") for i in range(5)]
    assert len({n for n in nodes if n}) == 4 and nodes.count(None) == 1
    assert "4 node(s) didn't match pod anti-affinity rules" in message(pods["r4"])


def test_namespaces_default_to_the_pods_own_and_an_empty_selector_means_all() -> None:
    other = pod("db", {"app": "db"}, node_name="a1", ns="other")
    ns = make_namespace("other").obj()
    pods = placed([ns, other, pod("web", anti=[term(app="db")], at="1s")])
    assert zone_of(pods["web"]) is not None  # the db in "other" does not count for a default-namespace term
    pods = placed([ns, other, pod("web", anti=[term(ns={}, app="db")], at="1s")])
    assert zone_of(pods["web"]) == "b"


def test_a_pod_landing_requeues_the_pod_waiting_for_it() -> None:
    pods = placed([pod("web", {"app": "web"}, affinity=[term(app="db")]), pod("db", {"app": "db"}, at="2m")])
    assert zone_of(pods["web"]) == zone_of(pods["db"]) is not None


def test_a_pod_leaving_requeues_the_pod_it_kept_out() -> None:
    db = pod("db", {"app": "db"}, node_name="a1")
    db2 = pod("db2", {"app": "db"}, node_name="b1")
    db2["metadata"]["annotations"]["kubetwin.io/delete-at"] = "3m"
    result = run(objects=[make_scenario("10m").obj(), *NODES, db, db2, pod("web", anti=[term(app="db")], at="1s")])
    bound = [t for t, _, _, o in result.history if o["kind"] == "Pod" and o["metadata"]["name"] == "web"
             and o["spec"].get("nodeName")]
    assert bound and bound[0] == 180.0


def test_term_matching_rules() -> None:
    p = pod("x", {"app": "web"})
    (t,) = IPA.required_terms(pod("y", anti=[term(app="web")]), "podAntiAffinity")
    assert t.namespaces == frozenset({"default"}) and t.matches(p, lambda ns: {})
    nil = IPA.Term(frozenset({"default"}), None, None, ZONE)
    assert not nil.matches(p, lambda ns: {})  # a nil labelSelector selects nothing
    labelled = IPA.Term(frozenset(), {"matchLabels": {"team": "a"}}, {}, ZONE)
    assert labelled.matches(p, lambda ns: {"team": "a"}) and not labelled.matches(p, lambda ns: {"team": "b"})

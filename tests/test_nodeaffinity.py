"""k8s.nodeaffinity: the one node selector rule, with component-helpers' nodeaffinity cases (Gt/Lt on integers,
NotIn on a missing key, empty terms, matchFields on the node name), and the three places that use it agreeing."""

from __future__ import annotations

import pytest

from kubetwin.controllers.volumes import node_affinity_ok
from kubetwin.k8s import nodeaffinity
from kubetwin.k8s.labels import requirement_matches
from kubetwin.scheduler.plugins import node_selector_term_matches

LABELS = {"zone": "us-central1-a", "gpus": "8", "pool": "a3"}


@pytest.mark.parametrize(("op", "values", "want"), [
    ("In", ["us-central1-a", "x"], True), ("In", ["x"], False),
    ("NotIn", ["x"], True), ("NotIn", ["us-central1-a"], False),
    ("Exists", [], True), ("DoesNotExist", [], False),
])
def test_requirements_on_a_present_key(op: str, values: list[str], want: bool) -> None:
    assert requirement_matches({"key": "zone", "operator": op, "values": values}, LABELS) is want


@pytest.mark.parametrize(("op", "want"), [("In", False), ("NotIn", True), ("Exists", False),
                                          ("DoesNotExist", True), ("Gt", False), ("Lt", False)])
def test_requirements_on_a_missing_key(op: str, want: bool) -> None:
    assert requirement_matches({"key": "absent", "operator": op, "values": ["1"]}, LABELS) is want


@pytest.mark.parametrize(("op", "value", "want"), [("Gt", "7", True), ("Gt", "8", False), ("Lt", "9", True),
                                                   ("Lt", "8", False), ("Gt", "seven", False)])
def test_gt_and_lt_compare_integers(op: str, value: str, want: bool) -> None:
    assert requirement_matches({"key": "gpus", "operator": op, "values": [value]}, LABELS) is want
    assert requirement_matches({"key": "pool", "operator": op, "values": ["1"]}, LABELS) is False


def test_terms_and_fields() -> None:
    assert nodeaffinity.term_matches({}, LABELS) is False  # an empty term matches no objects
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert nodeaffinity.term_matches(by_name, LABELS, "n1") and not nodeaffinity.term_matches(by_name, LABELS, "n2")
    assert nodeaffinity.terms_match([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]},
                                     {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}],
                                    LABELS)


@pytest.mark.parametrize("op", ["Gt", "Lt"])
def test_the_scheduler_and_the_pv_controller_agree(op: str) -> None:
    """A PV's node affinity with Gt/Lt used to match nothing in the PV controller while the scheduler evaluated it."""
    term = {"matchExpressions": [{"key": "gpus", "operator": op, "values": ["4"]}]}
    node = {"metadata": {"name": "n1", "labels": LABELS}}
    pv = {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}}}
    assert node_affinity_ok(pv, LABELS) is node_selector_term_matches(term, node) is (op == "Gt")


ZONE_A = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-central1-a"]}]}
ZONE_B = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-central1-b"]}]}


@pytest.mark.parametrize(("node_selector", "terms", "want"), [
    ({}, None, True),                              # no nodeSelector, no required affinity: every node
    ({"pool": "a3"}, None, True),                  # nodeSelector alone
    ({"pool": "a2"}, None, False),
    ({"pool": "a3", "zone": "x"}, None, False),    # every pair must be present
    ({}, [ZONE_B, ZONE_A], True),                  # terms are ORed
    ({}, [ZONE_B], False),
    ({}, [], False),                               # required affinity with no terms matches nothing
    ({"pool": "a3"}, [ZONE_A], True),              # nodeSelector AND affinity
    ({"pool": "a2"}, [ZONE_A], False),
    ({"pool": "a3"}, [ZONE_B], False),
])
def test_required_node_affinity_is_the_selector_and_the_terms(node_selector: dict, terms: list | None,
                                                               want: bool) -> None:
    """component-helpers' GetRequiredNodeAffinity(pod).Match(node): the pod's nodeSelector map and its
    requiredDuringSchedulingIgnoredDuringExecution terms, both; the scheduler's NodeAffinity filter says the same."""
    from kubetwin.scheduler.nodeinfo import NodeInfo
    from kubetwin.scheduler.plugins import SUCCESS, PodInfo, node_affinity

    assert nodeaffinity.required_matches(node_selector, terms, LABELS, "n1") is want
    node = {"metadata": {"name": "n1", "labels": LABELS}, "status": {"allocatable": {}}}
    pi = PodInfo(pod={}, requests={}, tolerations=[], node_selector=node_selector, required_terms=terms,
                 preferred_terms=[], priority=0)
    assert (node_affinity(pi, NodeInfo.from_node(node))[0] == SUCCESS) is want

"""k8s.taints: v1.Toleration.ToleratesTaint as the one rule (k8s.io/api core/v1 toleration_test.go cases), and the
scheduler and Kueue's flavor assigner reading it (they had two copies that differed on an unknown operator)."""

from __future__ import annotations

import pytest

from kubetwin.k8s.taints import tolerates, toleration_tolerates

TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize(("toleration", "want"), [
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),  # empty effect: every effect
    ({"operator": "Exists"}, True),  # empty key with Exists: every taint
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "value": "present"}, True),  # operator defaults to Equal
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "other"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"operator": "Equal", "value": "present"}, False),  # the API server refuses an empty key with Equal
    ({"key": "nvidia.com/gpu", "operator": "Gt", "value": "present"}, False),  # an unknown operator
])
def test_toleration_tolerates_taint(toleration: dict, want: bool) -> None:
    assert toleration_tolerates(toleration, TAINT) is want
    assert tolerates([{"key": "x", "operator": "Exists"}, toleration], TAINT) is want


def test_the_flavor_assigner_reads_the_same_rule() -> None:
    """A ResourceFlavor's taint and a pod set's toleration with an unknown operator: the flavor assigner used to
    compare values and admit, the scheduler would never place the pod."""
    from kubetwin.kueue import flavorassigner

    flavor = type("F", (), {"name": "f", "node_taints": [TAINT], "tolerations": [], "node_labels": {}})()
    ps = type("PS", (), {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Gt", "value": "present"}],
                         "node_selector": [], "required_affinity_terms": None})()
    why = flavorassigner.flavor_matches_pod_set(flavor, ps)
    assert why == "untolerated taint nvidia.com/gpu=present:NoSchedule in flavor f"

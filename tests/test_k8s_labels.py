"""kubetwin.k8s.labels against k8s.io/apimachinery's own selector tests (kubernetes/apimachinery@eed236ce):
pkg/labels/selector_test.go TestSelectorMatches, TestSetMatches and TestRequirementSelectorMatching, and
pkg/apis/meta/v1/helpers_test.go's LabelSelectorAsSelector nil/empty cases. Their selector strings are written here
as the metav1.LabelSelector each one means (x=y is matchLabels or In [y]; x!=y is NotIn [y]; x is Exists; !x is
DoesNotExist). The Gt/Lt cases are node-selector operators (k8s.nodeaffinity), not LabelSelector ones."""

from __future__ import annotations

import pytest

from kubetwin.k8s.labels import matches, selects, set_matches


def _ml(**kv: str) -> dict:
    return {"matchLabels": kv}


def _ex(*exprs: tuple) -> dict:
    return {"matchExpressions": [{"key": k, "operator": op, **({"values": list(v)} if v is not None else {})}
                                 for k, op, v in exprs]}


LABELSET = {"foo": "bar", "baz": "blah"}

# TestSelectorMatches: expectMatch / expectNoMatch, selector string -> LabelSelector.
SELECTOR_MATCHES = [
    ({}, {"x": "y"}, True),                                                       # ""
    (_ml(x="y"), {"x": "y"}, True),                                               # x=y
    (_ml(x="y", z="w"), {"x": "y", "z": "w"}, True),                              # x=y,z=w
    (_ex(("x", "NotIn", ["y"]), ("z", "NotIn", ["w"])), {"x": "z", "z": "a"}, True),  # x!=y,z!=w
    (_ml(notin="in"), {"notin": "in"}, True),                                     # notin=in
    (_ex(("x", "Exists", None)), {"x": "z"}, True),                               # x
    (_ex(("x", "DoesNotExist", None)), {"y": "z"}, True),                         # !x
    (_ml(x="z"), {}, False),                                                      # x=z
    (_ml(x="y"), {"x": "z"}, False),                                              # x=y
    (_ml(x="y", z="w"), {"x": "w", "z": "w"}, False),                             # x=y,z=w
    (_ex(("x", "NotIn", ["y"]), ("z", "NotIn", ["w"])), {"x": "z", "z": "w"}, False),  # x!=y,z!=w
    (_ex(("x", "Exists", None)), {"y": "z"}, False),                              # x
    (_ex(("x", "DoesNotExist", None)), {"x": "z"}, False),                        # !x
    (_ml(foo="bar"), LABELSET, True),
    (_ml(baz="blah"), LABELSET, True),
    (_ml(foo="bar", baz="blah"), LABELSET, True),
    (_ml(foo="blah"), LABELSET, False),
    (_ml(baz="bar"), LABELSET, False),
    (_ml(foo="bar", foobar="bar", baz="blah"), LABELSET, False),
    # x=y as an In requirement, matchLabels and matchExpressions ANDed (LabelSelectorAsSelector)
    (_ex(("x", "In", ["y"])), {"x": "y"}, True),
    ({**_ml(foo="bar"), **_ex(("baz", "In", ["other"]))}, LABELSET, False),
    ({**_ml(foo="bar"), **_ex(("baz", "In", ["other", "blah"]))}, LABELSET, True),
]

# TestRequirementSelectorMatching (the In / NotIn / Exists / DoesNotExist rows).
REQUIREMENT_MATCHING = [
    (_ex(("x", "In", ["foo"]), ("y", "NotIn", ["alpha"])), {"x": "foo", "y": "baz"}, True),
    (_ex(("x", "In", ["foo"]), ("y", "In", ["alpha"])), {"x": "foo", "y": "baz"}, False),
    (_ex(("x", "NotIn", [""]), ("y", "Exists", None)), {"y": ""}, True),
    (_ex(("x", "DoesNotExist", None), ("y", "Exists", None)), {"y": ""}, True),
    (_ex(("x", "NotIn", [""]), ("y", "DoesNotExist", None)), {"y": ""}, False),
    (_ex(("x", "In", [""])), {"y": "baz"}, False),
]


@pytest.mark.parametrize(("selector", "labels", "want"), SELECTOR_MATCHES + REQUIREMENT_MATCHING)
def test_label_selector_matches_as_apimachinery(selector: dict, labels: dict, want: bool) -> None:
    assert matches(selector, labels) is want
    assert selects(selector, labels) is want


@pytest.mark.parametrize("selector", [{}, {"foo": "bar"}, {"baz": "blah"}, {"foo": "bar", "baz": "blah"}])
def test_set_matches_as_selector_from_set(selector: dict) -> None:
    """TestSetMatches: SelectorFromSet of a subset of the labels matches them."""
    assert set_matches(selector, LABELSET)


def test_set_matches_needs_every_pair() -> None:
    assert not set_matches({"foo": "bar", "foobar": "bar"}, LABELSET)
    assert not set_matches({"foo": "blah"}, LABELSET)
    assert not set_matches({"foo": "bar"}, None)


def test_nil_selects_nothing_empty_selects_everything() -> None:
    """LabelSelectorAsSelector: nil is labels.Nothing(), an empty selector labels.Everything(); a list without a
    selector (matches) selects everything."""
    assert not selects(None, {"x": "y"})
    assert selects({}, {"x": "y"}) and selects({"matchLabels": {}, "matchExpressions": []}, {})
    assert matches(None, {"x": "y"}) and matches({}, None)

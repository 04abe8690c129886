"""Label selectors as k8s.io/apimachinery evaluates them (kubernetes/apimachinery@eed236ce): the one copy every
reader uses -- the store's list and watches, `kubetwin get -l`, PodDisruptionBudgets, the HPA, InterPodAffinity,
Kueue's namespaceSelector, the serving pools.

A metav1.LabelSelector is the AND of its requirements (pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector):
each `matchLabels` pair an Equals requirement, each `matchExpressions` entry one of In, NotIn, Exists, DoesNotExist,
evaluated as pkg/labels/selector.go's Requirement.Matches: In needs the key present with a listed value; NotIn
holds when the key is absent or its value is not listed; Exists / DoesNotExist test presence only. The API server
refuses other operators and In/NotIn without values (validation), so they never reach a reader; here an unknown
operator adds no requirement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# metav1.LabelSelectorOperator: the operators LabelSelectorAsSelector accepts.
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` satisfy the LabelSelector; no selector (None) or an empty one selects everything, as a list
    without a selector does."""
    if not selector:
        return True
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        if expr["operator"] in _SELECTOR_OPERATORS and not requirement_matches(expr, labels):
            return False
    return True


def requirement_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """pkg/labels/selector.go Requirement.Matches: one requirement (a LabelSelector's matchExpressions entry, a
    NodeSelectorRequirement) against labels. In: the key present with one of the values; NotIn: absent, or present
    with none of them; Exists / DoesNotExist: presence; Gt / Lt (node selectors only): present, both sides
    integers, compared as integers (a non-integer never matches); any other operator matches nothing."""
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            a, b = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """A selector field as LabelSelectorAsSelector reads it: a nil selector is labels.Nothing() (selects nothing),
    an empty one labels.Everything() -- Kueue's namespaceSelector, a pod affinity term's labelSelector and
    namespaceSelector."""
    return selector is not None and matches(selector, labels)


def set_matches(selector: Mapping[str, str], labels: Mapping[str, str] | None) -> bool:
    """labels.SelectorFromSet(selector).Matches(labels): every pair present with its value (a pod's nodeSelector,
    a Service's selector); an empty set selects everything."""
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())

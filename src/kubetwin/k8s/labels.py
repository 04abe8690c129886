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
        k, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(k) not in values:
            return False
        if op == "NotIn" and k in labels and labels[k] in values:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


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

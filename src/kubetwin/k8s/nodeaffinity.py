"""Node selector requirements and terms: the one copy of the rule (k8s.io/component-helpers/scheduling/corev1/
nodeaffinity, with apimachinery's labels.Requirement semantics) that the scheduler's NodeAffinity, Kueue's flavor
assigner and the PV controller's volume node affinity all use.

- Each requirement is apimachinery's labels.Requirement.Matches (`k8s.labels.requirement_matches`), Gt / Lt
  included.
- A term is the AND of its matchExpressions and matchFields (only `metadata.name`); an empty term matches nothing;
  a list of terms is their OR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubetwin.k8s.labels import requirement_matches, set_matches


def term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str | None = None) -> bool:
    """One NodeSelectorTerm: all its matchExpressions on the labels and its matchFields on the node's name (a term
    with matchFields never matches when `name` is None); an empty term matches no node."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(requirement_matches(e, labels) for e in exprs):
        return False
    return not fields or (name is not None and all(requirement_matches(f, {"metadata.name": name}) for f in fields))


def terms_match(terms: Iterable[Mapping[str, Any]], labels: Mapping[str, str], name: str | None = None) -> bool:
    """A NodeSelector's nodeSelectorTerms: any of them."""
    return any(term_matches(t, labels, name) for t in terms)


def required_matches(node_selector: Mapping[str, str], required_terms: Iterable[Mapping[str, Any]] | None,
                     labels: Mapping[str, str], name: str | None = None) -> bool:
    """A pod's required node affinity as RequiredNodeAffinity.Match evaluates it: its nodeSelector map (every pair
    present) AND, when requiredDuringSchedulingIgnoredDuringExecution is set (`required_terms` not None), any of its
    terms."""
    if not set_matches(node_selector, labels):
        return False
    return required_terms is None or terms_match(required_terms, labels, name)

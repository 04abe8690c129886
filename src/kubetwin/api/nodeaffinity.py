"""Node selector requirements and terms: the one copy of the rule (k8s.io/component-helpers/scheduling/corev1/
nodeaffinity, with apimachinery's labels.Requirement semantics) that the scheduler's NodeAffinity, Kueue's flavor
assigner and the PV controller's volume node affinity all use.

- In: the key is present with one of the values; NotIn: absent, or present with none of them; Exists /
  DoesNotExist: presence; Gt / Lt: present, both sides integers, compared as integers (a non-integer never matches).
- A term is the AND of its matchExpressions and matchFields (only `metadata.name`); an empty term matches nothing;
  a list of terms is their OR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def requirement_matches(expr: Mapping, labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement against a node's labels."""
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


def term_matches(term: Mapping, labels: Mapping[str, str], name: str | None = None) -> bool:
    """One NodeSelectorTerm: all its matchExpressions on the labels and its matchFields on the node's name (a term
    with matchFields never matches when `name` is None); an empty term matches no node."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(requirement_matches(e, labels) for e in exprs):
        return False
    return not fields or (name is not None and all(requirement_matches(f, {"metadata.name": name}) for f in fields))


def terms_match(terms: Iterable[Mapping], labels: Mapping[str, str], name: str | None = None) -> bool:
    """A NodeSelector's nodeSelectorTerms: any of them."""
    return any(term_matches(t, labels, name) for t in terms)

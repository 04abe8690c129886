"""kube-scheduler's InterPodAffinity Filter for required podAffinity and podAntiAffinity terms.

Follows kubernetes pkg/scheduler/framework/plugins/interpodaffinity/filtering.go: PreFilter counts, per
(topologyKey, value), the existing pods that match all of the incoming pod's affinity terms, that match
one of its anti-affinity terms, and whose own anti-affinity terms match the incoming pod (symmetry); Filter
then rejects a node whose topology value has no affinity match (UnschedulableAndUnresolvable, unless no pod
matches anywhere and the pod matches its own terms: the first pod of a group), has an anti-affinity match,
or is where an existing pod's anti-affinity points at the incoming pod. The Filter runs over the node table
as numpy masks, one label column per topology key.

The cache is informer-style and lazy: nothing is indexed until the first pod with such terms is seen (the
plugin's PreFilter returns Skip for every other pod, so they pay nothing); then the bound pods are indexed by
label and kept current from the scheduler's pod events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from kubetwin.k8s.labels import selects
from kubetwin.scheduler.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    Plugin,
    Queue,
    QueueingHint,
    QueueSkip,
)
from kubetwin.scheduler.plugins import PodInfo
from kubetwin.store.store import Obj, Store

NAME = "InterPodAffinity"
ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
_REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def namespace_labels(store: Store) -> Callable[[str], dict]:
    """A namespace's labels by name, for the namespaceSelector of affinity terms: the scheduler's and the cluster
    autoscaler's simulation read them the same way."""
    return lambda ns: ((store.get("Namespace", "", ns) or {}).get("metadata") or {}).get("labels") or {}


@dataclass(frozen=True, slots=True)
class Term:
    """An AffinityTerm as the framework builds it: namespaces (the pod's own when neither namespaces nor a
    namespaceSelector is given), the namespaceSelector ({} = all, None = none), the label selector."""

    namespaces: frozenset[str]
    ns_selector: dict | None
    selector: dict | None
    topology_key: str

    def matches(self, pod: Obj, ns_labels: Callable[[str], dict]) -> bool:
        meta = pod["metadata"]
        ns = meta.get("namespace") or "default"
        if ns not in self.namespaces and not selects(self.ns_selector, ns_labels(ns)):
            return False
        return selects(self.selector, meta.get("labels"))  # a nil labelSelector selects nothing


def required_terms(pod: Obj, kind: str) -> tuple[Term, ...]:
    """The pod's required podAffinity ("podAffinity") or podAntiAffinity terms."""
    raw = (((pod["spec"].get("affinity") or {}).get(kind) or {}).get(_REQ)) or ()
    own = pod["metadata"].get("namespace") or "default"
    out = []
    for t in raw:
        names, sel = frozenset(t.get("namespaces") or ()), t.get("namespaceSelector")
        if not names and sel is None:
            names = frozenset({own})
        out.append(Term(names, sel, t.get("labelSelector"), t.get("topologyKey", "")))
    return tuple(out)


def has_terms(pod: Obj) -> bool:
    aff = pod["spec"].get("affinity")
    return bool(aff) and bool(((aff.get("podAffinity") or {}).get(_REQ)) or
                              ((aff.get("podAntiAffinity") or {}).get(_REQ)))


@dataclass(slots=True)
class Verdict:
    """Filter results over the node table's rows; the fail masks follow the plugin's check order."""

    ok: np.ndarray
    affinity: np.ndarray
    anti: np.ndarray
    existing: np.ndarray

    def reasons(self, rows: np.ndarray) -> dict[str, int]:
        out = {}
        for reason, mask in ((ERR_AFFINITY, self.affinity), (ERR_ANTI, self.anti), (ERR_EXISTING, self.existing)):
            c = int(mask[rows].sum()) if len(rows) else 0
            if c:
                out[reason] = c
        return out


    def by_node(self, infos: list) -> dict[str, str]:
        """Each live row's verdict by node name, "passed" or the reason (tracing: scheduler/trace.py)."""
        out = {}
        for r, ni in enumerate(infos):
            if ni is not None:
                out[ni.name] = next((reason for reason, mask in ((ERR_AFFINITY, self.affinity), (ERR_ANTI, self.anti),
                                     (ERR_EXISTING, self.existing)) if mask[r]), "passed")
        return out


class InterPodAffinity(Plugin):
    """The plugin with its cache of bound pods: by key, by label and by label key, plus those with anti-affinity."""

    name = NAME

    def __init__(self, nodes: dict, ns_labels: Callable[[str], dict]) -> None:
        self.nodes, self.ns_labels = nodes, ns_labels  # the scheduler's NodeInfos by name
        self.active = False
        self.pods: dict[str, tuple[Obj, str]] = {}
        self.by_label: dict[tuple[str, str], set[str]] = {}
        self.by_key: dict[str, set[str]] = {}
        self.anti: dict[str, tuple[Term, ...]] = {}
        self._cols: dict[str, tuple[int, int, np.ndarray, dict[str, int]]] = {}

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """interpodaffinity plugin.go EventsToRegister: a pod added to or deleted from a node (with the hints below),
        a node added or changed (its labels are the topology)."""
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.Add), self._after_pod_added),
                ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete), self._after_pod_deleted),
                ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.Update))]

    # -- the scheduler cache's assigned pods -------------------------------------------------------
    def assigned_pod_added(self, key: str, pod: Obj, node: str, bound: bool) -> bool:
        """A pod landed on a node (`bound`: the scheduler's own Binding, which may replace the assumed copy): index
        it once the cache is on (the first pod with terms switches it on); True when its Pod/Add hint is asked."""
        if (key in self.pods and not bound) or not (self.active or has_terms(pod)):
            return False
        self.add(key, pod, node)
        return True

    def assigned_pod_deleted(self, key: str, pod: Obj, node: str | None) -> bool:
        if not self.active or key not in self.pods:
            return False
        self.remove(key)
        return True

    def binding(self, key: str, pod: Obj, node: str) -> None:
        """The cache's assumed pod counts while its Binding waits for the API client's token."""
        if key not in self.pods and (self.active or has_terms(pod)):
            self.add(key, pod, node)

    # -- cache ----------------------------------------------------------------------------------
    def wants(self, pod: Obj) -> bool:
        """PreFilter's Skip: nothing to check without terms of its own and without existing anti-affinity."""
        if has_terms(pod):
            if not self.active:
                self._activate()
            return True
        return bool(self.anti)

    def _activate(self) -> None:
        self.active = True
        for name in sorted(self.nodes):
            for key, pod in self.nodes[name].pods.items():
                self.add(key, pod, name)

    def add(self, key: str, pod: Obj, node: str) -> None:
        if not self.active:
            self._activate()
        if key in self.pods:
            return
        self.pods[key] = (pod, node)
        for k, v in (pod["metadata"].get("labels") or {}).items():
            self.by_label.setdefault((k, v), set()).add(key)
            self.by_key.setdefault(k, set()).add(key)
        anti = required_terms(pod, "podAntiAffinity")
        if anti:
            self.anti[key] = anti

    def remove(self, key: str) -> None:
        entry = self.pods.pop(key, None) if self.active else None
        if entry is None:
            return
        for k, v in (entry[0]["metadata"].get("labels") or {}).items():
            self.by_label[(k, v)].discard(key)
            self.by_key[k].discard(key)
        self.anti.pop(key, None)

    def _candidates(self, sel: dict | None) -> Iterable[str]:
        """The indexed pods that can match `sel`: the smallest set an equality or Exists requirement allows."""
        if sel is None:
            return ()
        best: set[str] | None = None
        for k, v in (sel.get("matchLabels") or {}).items():
            s = self.by_label.get((k, v), set())
            best = s if best is None or len(s) < len(best) else best
        for e in sel.get("matchExpressions") or ():
            if e["operator"] == "In":
                s = set().union(*(self.by_label.get((e["key"], v), set()) for v in e.get("values") or ()))
            elif e["operator"] == "Exists":
                s = self.by_key.get(e["key"], set())
            else:
                continue
            best = s if best is None or len(s) < len(best) else best
        return self.pods.keys() if best is None else best

    def _value(self, node: str, key: str) -> str | None:
        ni = self.nodes.get(node)
        return None if ni is None else (ni.node["metadata"].get("labels") or {}).get(key)

    # -- PreFilter + Filter ---------------------------------------------------------------------
    def pre_filter(self, state: CycleState) -> None:
        """PreFilter and Filter at once: a row mask like NodeResourcesFit's, applied before the scan."""
        if not self.wants(state.pod):
            return
        verdict = self.filter(state.pod, state.table.infos, state.table.gen, len(state.mask))
        if verdict is None:
            return
        state.mask &= verdict.ok
        state.shape = (*state.shape, self.signature(state.pod))
        state.data[NAME] = verdict
        if state.traced is not None:
            state.traced[NAME] = verdict.by_node(state.table.infos)

    def rejections(self, state: CycleState, rows: np.ndarray) -> tuple[dict[str, int], int]:
        """Reasons over the rows that passed the filters before it; ERR_AFFINITY is UnschedulableAndUnresolvable."""
        verdict = state.data.get(NAME)
        if not isinstance(verdict, Verdict):
            return {}, 0
        reasons = verdict.reasons(rows)
        return reasons, reasons.get(ERR_AFFINITY, 0)

    def preemptible(self, state: CycleState, rows: np.ndarray) -> np.ndarray:
        """The twin does not evict for (anti-)affinity: only rows this Filter passed."""
        verdict = state.data.get(NAME)
        return rows[verdict.ok[rows]] if isinstance(verdict, Verdict) and len(rows) else rows

    def filter(self, pod: Obj, infos: list, gen: int, n: int) -> Verdict | None:
        """Verdicts for `n` rows of the node table (`infos` the live part, `gen` its node generation);
        None when nothing constrains the pod (no terms of its own, no existing anti-affinity against it)."""
        aff, anti = required_terms(pod, "podAffinity"), required_terms(pod, "podAntiAffinity")
        existing: dict[tuple[str, str], int] = {}
        for key, terms in self.anti.items():  # existing pods' anti-affinity against the incoming pod
            node = self.pods[key][1]
            for t in terms:
                v = self._value(node, t.topology_key)
                if v is not None and t.matches(pod, self.ns_labels):
                    existing[(t.topology_key, v)] = existing.get((t.topology_key, v), 0) + 1
        if not aff and not anti and not existing:
            return None
        aff_counts: dict[tuple[str, str], int] = {}
        if aff:
            for key in list(self._candidates(aff[0].selector)):
                other, node = self.pods[key]
                if all(t.matches(other, self.ns_labels) for t in aff):
                    for t in aff:
                        v = self._value(node, t.topology_key)
                        if v is not None:
                            aff_counts[(t.topology_key, v)] = aff_counts.get((t.topology_key, v), 0) + 1
        anti_counts: dict[tuple[str, str], int] = {}
        for t in anti:
            for key in self._candidates(t.selector):
                other, node = self.pods[key]
                v = self._value(node, t.topology_key)
                if v is not None and t.matches(other, self.ns_labels):
                    anti_counts[(t.topology_key, v)] = anti_counts.get((t.topology_key, v), 0) + 1
        aff_ok = np.ones(n, bool)
        if aff:
            first = not aff_counts and all(t.matches(pod, self.ns_labels) for t in aff)
            exist = np.ones(n, bool)
            for t in aff:
                col, ids = self._column(t.topology_key, infos, gen, n)
                aff_ok &= col >= 0
                exist &= np.isin(col, [i for (k, v), c in aff_counts.items() if k == t.topology_key and c > 0
                                       for i in (ids.get(v),) if i is not None])
            if not first:
                aff_ok &= exist
        anti_fail = np.zeros(n, bool)
        for t in anti:
            col, ids = self._column(t.topology_key, infos, gen, n)
            bad = [ids[v] for (k, v), c in anti_counts.items() if k == t.topology_key and c > 0 and v in ids]
            if bad:
                anti_fail |= np.isin(col, bad)
        exist_fail = np.zeros(n, bool)
        for (k, v), c in existing.items():
            col, ids = self._column(k, infos, gen, n)
            if c > 0 and v in ids:
                exist_fail |= col == ids[v]
        affinity = ~aff_ok
        anti_fail &= aff_ok
        exist_fail &= aff_ok & ~anti_fail
        return Verdict(~(affinity | anti_fail | exist_fail), affinity, anti_fail, exist_fail)

    def _column(self, key: str, infos: list, gen: int, n: int) -> tuple[np.ndarray, dict[str, int]]:
        """The node label `key` per row as value ids (-1: no such label), rebuilt when nodes change."""
        cached = self._cols.get(key)
        if cached is not None and cached[0] == gen and cached[1] == n:
            return cached[2], cached[3]
        ids: dict[str, int] = {}
        col = np.full(n, -1, np.int64)
        for r, ni in enumerate(infos):
            v = None if ni is None else (ni.node["metadata"].get("labels") or {}).get(key)
            if v is not None:
                col[r] = ids.setdefault(v, len(ids))
        self._cols[key] = (gen, n, col, ids)
        return col, ids

    # -- QueueingHints (isSchedulableAfterPodChange) ---------------------------------------------
    def hint_added(self, pending: Obj, added: Obj) -> bool:
        """A pod landed on a node: it may satisfy the pending pod's affinity."""
        return any(t.matches(added, self.ns_labels) for t in required_terms(pending, "podAffinity"))

    def _after_pod_added(self, pi: PodInfo, old: object, new: object) -> QueueingHint:
        return Queue if isinstance(new, dict) and self.hint_added(pi.pod, new) else QueueSkip

    def _after_pod_deleted(self, pi: PodInfo, old: object, new: object) -> QueueingHint:
        return Queue if isinstance(old, dict) and self.hint_deleted(pi.pod, old) else QueueSkip

    def signature(self, pod: Obj) -> str:
        """What hints must tell apart between pods of one scheduling shape: their terms, labels, namespace."""
        meta = pod["metadata"]
        return repr((pod["spec"].get("affinity"), meta.get("labels"), meta.get("namespace")))

    def hint_deleted(self, pending: Obj, gone: Obj) -> bool:
        """A pod left: it may have been what the pending pod's anti-affinity, or its own, kept apart."""
        return (any(t.matches(gone, self.ns_labels) for t in required_terms(pending, "podAntiAffinity"))
                or any(t.matches(pending, self.ns_labels) for t in required_terms(gone, "podAntiAffinity")))

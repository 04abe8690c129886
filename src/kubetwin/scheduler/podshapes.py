"""A pod's PreFilter state, cached per pod shape: its requests and score cache keyed by what it requests, its
node-only filter verdicts keyed by exactly the pod fields the profile's node-only plugins declare they read
(plugins.Profile.shape_paths; bounded, oldest dropped)."""

from __future__ import annotations

from kubetwin.api.podresources import pod_requests, requests_key
from kubetwin.api.podspec import SameInputs, TemplateMemo
from kubetwin.scheduler import plugins as P
from kubetwin.scheduler.nodetable import NodeTable, ScoreCache, StaticVerdicts
from kubetwin.scheduler.preemption import priority_of
from kubetwin.store.store import Obj

_CACHE_LIMIT = 512  # distinct pod shapes whose verdicts are kept


def _resources_sig_of(pod: Obj) -> str:
    return repr(tuple(requests_key(pod["spec"])))


_resources_sig = TemplateMemo(_resources_sig_of)  # what the pod requests, as a key: one per template


def _field(pod: Obj, path: P.PodPath) -> object:
    """The value at `path` in the pod, None where a key on the way is missing."""
    v: object = pod
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return v


def _values_repr(*values: object) -> str:
    return repr(list(values))


_shape_repr = SameInputs(_values_repr)  # the pods of a template share these values (admission keeps them shared)


def shape_key(pod: Obj, paths: tuple[P.PodPath, ...]) -> str:
    """The node-only shape: the values the node-only plugins read, nothing else."""
    return _shape_repr(*[_field(pod, path) for path in paths])


def _bounded(cache: dict, key: object, value: object) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.pop(next(iter(cache)))
    cache[key] = value


class PodShapes:
    """The scheduler's per-shape caches over one node table."""

    def __init__(self, table: NodeTable, profile: P.Profile = P.DEFAULT):
        self.table, self.profile = table, profile
        self.static: dict[str, StaticVerdicts] = {}  # node-only sig -> verdicts per node row
        self.requests: dict[str, tuple[dict[str, int], ScoreCache]] = {}  # resources repr -> requests

    def pod_info(self, pod: Obj) -> tuple[P.PodInfo, StaticVerdicts, ScoreCache, tuple]:
        """The pod's PreFilter state, its node-only verdicts, its score cache and its shape (hints group by it)."""
        spec = pod["spec"]
        aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
        tols, sel = spec.get("tolerations") or [], spec.get("nodeSelector") or {}
        terms = req.get("nodeSelectorTerms") if req else None
        preferred = aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        res_sig = _resources_sig(pod)
        cached = self.requests.get(res_sig)
        if cached is None:
            cached = (pod_requests(pod), ScoreCache())
            _bounded(self.requests, res_sig, cached)
        requests, scores = cached
        pi = P.PodInfo(pod, requests, tols, sel, terms, preferred, priority_of(pod))
        sig = shape_key(pod, self.profile.shape_paths)
        static = self.static.get(sig)
        if static is None:
            static = StaticVerdicts()
            _bounded(self.static, sig, static)
        return pi, self.table.static(pi, static, self.profile), scores, (sig, res_sig)

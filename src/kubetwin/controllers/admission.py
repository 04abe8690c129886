"""Mutating admission the API server (and GKE) applies to pods on create."""

from __future__ import annotations

from kubetwin.api import crd, defaults, kinds
from kubetwin.api.podspec import TemplateMemo
from kubetwin.store.store import Obj, Store

EXTENDED_PREFIXES = ("nvidia.com/", "google.com/tpu")


def extended_resource_toleration(obj: Obj) -> Obj:
    """ExtendedResourceToleration (enabled on GKE): pods requesting nvidia.com/gpu tolerate the GPU taint."""
    if obj.get("kind") != "Pod":
        return obj
    spec = obj["spec"]
    names = _extended_names(obj)
    if not names:
        return obj
    tols = list(spec.get("tolerations") or [])
    for name in names:
        tol = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if tol not in tols:
            tols.append(tol)
    return {**obj, "spec": {**spec, "tolerations": tols}}


def _names_of(pod: Obj) -> tuple[str, ...]:
    """Sorted extended resource names the pod's containers ask for."""
    spec = pod["spec"]
    names: set[str] = set()
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        names |= {k for k in {**(res.get("requests") or {}), **(res.get("limits") or {})}
                  if k.startswith(EXTENDED_PREFIXES)}
    return tuple(sorted(names))


_extended_names = TemplateMemo(_names_of)


def pod_defaults(obj: Obj) -> Obj:
    """The API server's defaults of a Pod (api.defaults.pod: SetDefaults_Pod, SetDefaults_PodSpec, the containers',
    probes' and volumes' defaults), registered for Pods alone so other kinds skip it."""
    return defaults.pod(obj) if obj.get("kind") == "Pod" else obj


def priority(store: Store):
    """The Priority admission plugin: resolve priorityClassName into spec.priority and preemptionPolicy.

    Without a class name the pod gets the globalDefault class, the lowest-valued one if several claim it
    (plugin/pkg/admission/priority getDefaultPriorityClass); the default is looked up once per change of
    the PriorityClasses, as the plugin reads them from an informer."""
    default: list[Obj | None] = []

    def invalidate(etype: str, obj: Obj, old: Obj | None) -> None:
        default.clear()

    def plugin(obj: Obj) -> Obj:
        if obj.get("kind") != "Pod":
            return obj
        spec = obj["spec"]
        pc_name = spec.get("priorityClassName")
        if pc_name:
            pc = store.get("PriorityClass", "", pc_name)
        else:
            if not default:
                defaults = [p for p in store.list("PriorityClass") if p.get("globalDefault")]
                default.append(min(defaults, key=lambda p: int(p.get("value", 0)), default=None))
            pc = default[0]
        value = int(pc.get("value", 0)) if pc else 0
        policy = (pc or {}).get("preemptionPolicy", "PreemptLowerPriority")
        return {**obj, "spec": {**spec, "priority": value, "preemptionPolicy": policy}}

    store.watch("PriorityClass", invalidate)
    return plugin


def default_namespace(obj: Obj) -> Obj:
    """A manifest's object scoped as `kubectl apply` and the API server scope it: a namespaced object without a
    namespace lands in "default" (kubectl fills the context's); a cluster-scoped one is stored without the namespace
    it was given, and nothing is created already deleting (apiserver's rest.BeforeCreate clears
    deletionTimestamp and deletionGracePeriodSeconds, and sets a cluster-scoped object's namespace to none)."""
    meta = obj.get("metadata") or {}
    if kinds.is_cluster_scoped(str(obj.get("kind"))):
        if "namespace" in meta or "deletionTimestamp" in meta or "deletionGracePeriodSeconds" in meta:
            meta = {k: v for k, v in meta.items()
                    if k not in ("namespace", "deletionTimestamp", "deletionGracePeriodSeconds")}
            return {**obj, "metadata": meta}
        return obj
    if meta.get("namespace") and "deletionTimestamp" not in meta and "deletionGracePeriodSeconds" not in meta:
        return obj
    meta = {k: v for k, v in meta.items() if k not in ("deletionTimestamp", "deletionGracePeriodSeconds")}
    return {**obj, "metadata": {**meta, "namespace": meta.get("namespace") or "default"}}


def crd_defaults(obj: Obj) -> Obj:
    """Structural defaulting of custom resources (apiextensions-apiserver): the CRD schema's defaults are stored,
    so controllers and `kubetwin get` see them (a ClusterQueue's queueingStrategy: BestEffortFIFO)."""
    return crd.apply_defaults(obj) if crd.version_of(obj) is not None else obj


API_DEFAULTED = tuple(k for k in defaults.DEFAULTERS if k != "Pod")  # Pods: pod_defaults, registered apart


def api_defaults(obj: Obj) -> Obj:
    """The API server's SetDefaults_* for the built-in kinds (api.defaults), before any admission plugin runs."""
    return defaults.apply(obj)

"""Mutating admission the API server (and GKE) applies to pods on create."""

from __future__ import annotations

from kubetwin.api import crd, defaults, kinds
from kubetwin.api.podspec import SameInputs, TemplateMemo
from kubetwin.k8s.names import TPU
from kubetwin.store.store import Obj, Store

EXTENDED_PREFIXES = ("nvidia.com/", TPU)


def extended_resource_toleration(obj: Obj) -> Obj:
    """ExtendedResourceToleration (enabled on GKE): pods requesting nvidia.com/gpu tolerate the GPU taint."""
    if obj.get("kind") != "Pod":
        return obj
    spec = obj["spec"]
    names = _extended_names(obj)
    if not names:
        return obj
    return {**obj, "spec": {**spec, "tolerations": _with_extended_tolerations(spec.get("tolerations"), names)}}


def _extended_tolerations(given: list[dict] | None, names: tuple[str, ...]) -> list[dict]:
    tols = list(given or [])
    for name in names:
        tol = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if tol not in tols:
            tols.append(tol)
    return tols


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
# once per (tolerations list, names): a template's pods share both, and then share the list this makes
_with_extended_tolerations = SameInputs(_extended_tolerations)


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


COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
TPU_ENV = ("TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES")


def gke_tpu_worker_env(store: Store):
    """GKE's TPU mutating webhook: a pod of a Job created with completionMode Indexed, a subdomain, parallelism > 1
    and containers requesting google.com/tpu gets TPU_WORKER_ID (its completion index) and TPU_WORKER_HOSTNAMES
    (every worker's `<job>-<index>.<subdomain>`, the DNS names the headless Service gives the Indexed Job's pods,
    in index order) on those containers, the two variables libtpu and jax.distributed read to form a multi-host
    slice (cloud.google.com/kubernetes-engine/docs/how-to/tpus, "Run your workload on TPU slice nodes": "GKE
    automatically injects these environment variables by using a mutating webhook when a Job is created with the
    completionMode: Indexed, subdomain, parallelism > 1, and requesting google.com/tpu properties"; a JobSet's
    Jobs are such Jobs). A variable the container already sets is left as it is."""

    def plugin(obj: Obj) -> Obj:
        if obj.get("kind") != "Pod":
            return obj
        spec, meta = obj["spec"], obj["metadata"]
        subdomain, index = spec.get("subdomain"), (meta.get("annotations") or {}).get(COMPLETION_INDEX)
        if not subdomain or index is None or TPU not in _extended_names(obj):
            return obj
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller") and r.get("kind") == "Job"),
                     None)
        job = store.get("Job", meta.get("namespace") or "default", owner["name"]) if owner else None
        jspec = (job or {}).get("spec") or {}
        try:
            parallelism = int(jspec.get("parallelism", 1))
        except (TypeError, ValueError):
            return obj
        if jspec.get("completionMode") != "Indexed" or parallelism <= 1:
            return obj
        name = job["metadata"]["name"] if job else ""
        values = {"TPU_WORKER_ID": str(index),
                  "TPU_WORKER_HOSTNAMES": ",".join(f"{name}-{i}.{subdomain}" for i in range(parallelism))}
        containers = []
        for c in spec.get("containers") or []:
            res = c.get("resources") or {}
            if TPU in {**(res.get("requests") or {}), **(res.get("limits") or {})}:
                env = list(c.get("env") or [])
                have = {e.get("name") for e in env}
                env += [{"name": k, "value": values[k]} for k in TPU_ENV if k not in have]
                c = {**c, "env": env}
            containers.append(c)
        return {**obj, "spec": {**spec, "containers": containers}}

    return plugin

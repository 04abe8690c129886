"""Namespaces: an object in a namespace that does not exist is refused as the API server refuses it.

The API server's NamespaceLifecycle admission plugin answers a create in a missing namespace with NotFound,
`namespaces "ml" not found` (k8s.io/apiserver plugin/pkg/admission/namespace/lifecycle; kubectl apply prints
`Error from server (NotFound): error when creating "f.yaml": namespaces "ml" not found`). A namespace exists when
the manifests hold its Namespace object (in any order: the twin creates Namespaces first, as `kubectl apply -f` of a
folder that holds them succeeds on its second pass), when every cluster has it, or when an add-on the scenario
installs creates it. `Scenario.spec.createMissingNamespaces: true` creates the others (for cluster dumps), with a
notice. validate refuses, and so does run (and the Python API and sweep cases, which go through validate); the
runner asks `implicit` which Namespace objects to create before the manifests' objects.
"""

from __future__ import annotations

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.twin import TWIN_API

# Created by kube-apiserver's system-namespaces controller in every cluster (kubernetes
# pkg/controlplane/controller/systemnamespaces: metav1.NamespaceSystem, NamespacePublic, NamespaceNodeLease; default
# by the "default" service controller).
SYSTEM = ("default", "kube-system", "kube-public", "kube-node-lease")
# GKE's Managed Service for Prometheus: managed collection is on by default for GKE 1.27 and later and creates
# gmp-system (its collectors) and gmp-public (its OperatorConfig)
# (https://cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed).
GKE = ("gmp-public", "gmp-system")
# Namespaces an add-on's install manifests create, by the API group prefix that says the scenario installs it (the
# twin installs Kueue when the scenario has Kueue objects: runner.wire): kubernetes-sigs/kueue config/default
# (namespace kueue-system), kedacore/keda config/default (namespace keda).
ADDONS = {"kueue-system": ("kueue.x-k8s.io/", "config.kueue.x-k8s.io/"), "keda": ("keda.sh/",)}
# runner.seed_objects creates these two in every run (the others only when an object uses them)
ALWAYS_CREATED = ("default", "kube-system")
OPTION = "createMissingNamespaces"


def namespace_of(obj: dict) -> str | None:
    """The namespace an object is created in (`default` when it names none, as kubectl fills the context's); None
    for cluster-scoped kinds and kinds the twin does not know."""
    kind = str(obj.get("kind") or "")
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    # a kind the registry does not hold: a built-in one (core, a dotless group or *.k8s.io, which validate's
    # schemas checked) is namespaced unless kinds lists it cluster-scoped; a custom kind without a CRD here has a
    # scope the twin does not know
    custom = "." in group and (not group.endswith(".k8s.io") or group in kinds.UNSHIPPED_KINDS)
    if (not kinds.REGISTRY.by_kind(kind) and custom) or kinds.is_cluster_scoped(kind):
        return None
    meta = obj.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return str(ns) if ns else "default"


CREATE_AT = "kubetwin.io/create-at"  # when the run creates an object (validation/annotations.py registers it)
DELETE_AT = "kubetwin.io/delete-at"  # when it deletes it


def _created_at(obj: dict, key: str = CREATE_AT) -> tuple[float, str]:
    """When the run creates (or with key=DELETE_AT deletes) the object (seconds, as written); (0, "") without the
    annotation."""
    from kubetwin.k8s.units import UnitError, parse_duration

    meta = obj.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    raw = ann.get(key) if isinstance(ann, dict) else None
    try:
        return (parse_duration(str(raw)), str(raw)) if raw is not None else (0.0, "")
    except UnitError:
        return 0.0, ""  # the annotation's own check reports it


def _existing(manifests: list[Manifest]) -> set[str]:
    found = set(SYSTEM) | set(GKE)
    for m in manifests:
        meta = m.obj.get("metadata")
        if m.kind == "Namespace" and isinstance(meta, dict) and meta.get("name"):
            found.add(str(meta["name"]))
    for ns, prefixes in ADDONS.items():
        if any(str(m.obj.get("apiVersion") or "").startswith(prefixes) for m in manifests):
            found.add(ns)
    return found


def create_missing(manifests: list[Manifest]) -> bool:
    """Whether the Scenario asks the twin to create the namespaces no object defines."""
    for m in manifests:
        spec = m.obj.get("spec")
        if m.kind == "Scenario" and m.obj.get("apiVersion") == TWIN_API and isinstance(spec, dict):
            return spec.get(OPTION) is True
    return False


def _missing(manifests: list[Manifest]) -> dict[str, list[Manifest]]:
    existing = _existing(manifests)
    out: dict[str, list[Manifest]] = {}
    for m in manifests:
        ns = namespace_of(m.obj)
        if ns is not None and ns not in existing:
            out.setdefault(ns, []).append(m)
    return out


def _too_early(manifests: list[Manifest]) -> list[Diagnostic]:
    """Objects the run creates before their Namespace object (kubetwin.io/create-at) or once it is deleted
    (kubetwin.io/delete-at): refused at that moment."""
    created = {str(m.obj["metadata"]["name"]): (_created_at(m.obj), _created_at(m.obj, DELETE_AT)) for m in manifests
               if m.kind == "Namespace" and isinstance(m.obj.get("metadata"), dict)}
    out = []
    for m in manifests:
        ns = namespace_of(m.obj)
        if ns is None or ns not in created:
            continue
        ((ns_at, ns_raw), (gone_at, gone_raw)), (at, raw) = created[ns], _created_at(m.obj)
        if at < ns_at:
            out.append(Diagnostic(m.file, m.line_of("metadata.namespace"), m.ref, "metadata.namespace",
                                  f'namespaces "{ns}" not found',
                                  f"the Namespace {ns} is created at {ns_raw} (kubetwin.io/create-at) and this object "
                                  f"at {raw or '0s'}: create it at or after its Namespace"))
        elif gone_raw and at >= gone_at:
            out.append(Diagnostic(m.file, m.line_of("metadata.namespace"), m.ref, "metadata.namespace",
                                  f'namespaces "{ns}" not found',
                                  f"the Namespace {ns} is deleted at {gone_raw} (kubetwin.io/delete-at) and this "
                                  f"object created at {raw or '0s'}: create it before, or delete the Namespace later"))
    return out


def diagnostics(manifests: list[Manifest]) -> list[Diagnostic]:
    """An error per object in a namespace that does not exist (or not yet, when the run creates the object), or
    one notice when the Scenario creates the missing ones."""
    early, missing = _too_early(manifests), _missing(manifests)
    if not missing:
        return early
    if create_missing(manifests):
        scenario = next(m for m in manifests if m.kind == "Scenario")
        return early + [Diagnostic(scenario.file, scenario.line_of(f"spec.{OPTION}"), scenario.ref, f"spec.{OPTION}",
                                   f"the twin creates the missing namespaces {', '.join(sorted(missing))} (no "
                                   "Namespace object defines them; the API server would refuse their objects)", "",
                                   "notice")]
    return early + [Diagnostic(m.file, m.line_of("metadata.namespace"), m.ref, "metadata.namespace",
                               f'namespaces "{ns}" not found',
                               f"add the Namespace as its own document (apiVersion: v1, kind: Namespace, metadata: "
                               f"{{name: {ns}}}), or set spec.{OPTION}: true in the Scenario to create every missing "
                               "namespace")
                    for ns, ms in missing.items() for m in ms]


def implicit(manifests: list[Manifest]) -> list[str]:
    """The Namespace objects a run creates beyond `ALWAYS_CREATED` and the manifests' own: the cluster's and
    add-ons' namespaces its objects use, and with createMissingNamespaces every other one they use (sorted)."""
    defined = {str((m.obj.get("metadata") or {}).get("name")) for m in manifests if m.kind == "Namespace"}
    used = {ns for m in manifests if (ns := namespace_of(m.obj)) is not None}
    wanted = used if create_missing(manifests) else used & _existing(manifests)  # the defined ones go below
    return sorted(wanted - defined - set(ALWAYS_CREATED))

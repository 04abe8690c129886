"""Custom resources checked against the real CRDs (Kueue, JobSet, ProvisioningRequest, Inference Extension) as an
API server with those CRDs installed checks a `kubectl apply` (create, strict field validation).

The order is the API server's: the version must be served (else `no matches for kind`); decoding prunes unknown
fields, which strict field validation turns into the only errors of the request; then structural defaulting,
the schema (kube-openapi), list types, and the x-kubernetes-validations rules, which are skipped with the API
server's note when the schema already found a blocking error. A deprecated version adds the CRD's warning.

Public: `handles(api_version, kind)`, `check(obj) -> list[FieldError]` (what the API server would say about
one object dict), `apply_defaults(obj) -> obj` (a new dict with the CRD's defaults, for controllers),
`diagnostics(m)` (the same as Diagnostics with file:line and fixes), `served_versions(group, kind)`.
CRD files live in kubetwin/api/crds/ (sources and licences in its README.md); each is parsed on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetwin.api import crd_cel, crd_schema, kinds
from kubetwin.api.crd_schema import FieldError
from kubetwin.api.errors import Diagnostic
from kubetwin.api.jobset_defaults import jobset_defaults
from kubetwin.api.lws_defaults import lws_defaults

INCOMPLETE = ('Invalid value: "null": some validation rules were not checked because the object was invalid; '
              "correct the existing errors to complete validation")
# Plain-words fixes for the Kueue rules users hit most (kueue.x-k8s.io_clusterqueues.yaml); others quote the rule.
RULE_HINTS = {
    "flavors must have the same number of resources as the coveredResources":
        "list every covered resource under each flavor's resources, in the coveredResources order (use "
        "nominalQuota: 0 for a resource a flavor does not offer)",
    "borrowingLimit must be nil when cohort is empty":
        "put the ClusterQueue in a cohort (v1beta1 spec.cohort, v1beta2 spec.cohortName) or remove borrowingLimit",
    "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never":
        "set preemption.borrowWithinCohort.policy: Never, or reclaimWithinCohort: LowerPriority or Any",
    "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor":
        "remove flavorFungibility.preference, or set whenCanBorrow and whenCanPreempt to TryNextFlavor",
}


@dataclass(frozen=True)
class Version:
    """One served version of a CRD: its schema (root metadata as ObjectMeta) and what the API server does with it."""

    group: str
    kind: str
    name: str
    schema: dict
    deprecated: bool
    warning: str
    status_subresource: bool
    crd: dict = field(compare=False, repr=False)  # the CustomResourceDefinition


_VERSIONS: dict[tuple[str, str], tuple[dict, dict[str, Version]]] = {}


def versions(group: str, kind: str) -> dict[str, Version]:
    """The served versions of one CRD kind (from the kind registry's CRD), parsed on first use."""
    info = kinds.REGISTRY.get(group, kind) if kinds.REGISTRY.is_custom(group, kind) else None
    if info is None or info.crd is None:
        return {}
    cached = _VERSIONS.get((group, kind))
    if cached is not None and cached[0] is info.crd:
        return cached[1]
    out = {}
    for v in info.crd["spec"]["versions"]:
        if not v.get("served", True):
            continue
        schema = dict(v["schema"]["openAPIV3Schema"])
        # apiVersion, kind and metadata are implicitly part of every structural schema's root (apiextensions
        # "Specifying a structural schema"), whether or not the CRD lists them
        schema["properties"] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                **schema.get("properties", {}), "metadata": crd_schema.OBJECT_META}
        warning = v.get("deprecationWarning") or f"{group}/{v['name']} {kind} is deprecated"
        out[v["name"]] = Version(group, kind, v["name"], schema, bool(v.get("deprecated")), warning,
                                 "status" in (v.get("subresources") or {}), info.crd)
    _VERSIONS[(group, kind)] = (info.crd, out)
    return out


def handles(api_version: str, kind: str) -> bool:
    """Whether kind belongs to one of the shipped CRDs (any version; parses nothing)."""
    group, sep, _ = api_version.partition("/")
    return bool(sep) and kinds.REGISTRY.is_custom(group, kind)


def served_versions(group: str, kind: str) -> list[str]:
    return list(versions(group, kind))


def version_of(obj: dict) -> Version | None:
    group, _, ver = str(obj.get("apiVersion") or "").partition("/")
    return versions(group, str(obj.get("kind") or "")).get(ver)


def apply_defaults(obj: dict) -> dict:
    """A new dict: obj with its CRD's schema defaults filled in as the API server's structural defaulting does
    (non-nullable nulls dropped). Objects of other kinds come back as an unchanged copy."""
    out = crd_schema.copy_json(obj)
    v = version_of(obj) if isinstance(obj, dict) else None
    if v is not None:
        crd_schema.default(out, v.schema)
    return out


def check(obj: dict) -> list[FieldError]:
    """Everything the API server would report when creating obj (an object dict of a CRD kind)."""
    group, _, ver = str(obj.get("apiVersion") or "").partition("/")
    kind = str(obj.get("kind") or "")
    served = versions(group, kind)
    v = served.get(ver)
    if v is None:
        names = ", ".join(f"{group}/{n}" + (" (deprecated)" if s.deprecated else "") for n, s in served.items())
        return [FieldError("apiVersion", f'no matches for kind "{kind}" in version "{group}/{ver}"',
                           f"use a served version: {names}", "version")]
    unknown = crd_schema.unknown_fields(obj, v.schema)
    if unknown:
        return [_other_versions(e, v) for e in unknown]
    work = apply_defaults(_mutating_webhooks(obj))
    if v.status_subresource:
        work.pop("status", None)  # the status subresource: status is reset on create
    errors = crd_schema.validate(work, v.schema)
    if crd_cel.has_rules(v.schema):
        if any(e.blocking for e in errors):
            errors.append(FieldError("", INCOMPLETE, "fix the errors above; the CRD's CEL rules run after them",
                                     "incomplete"))
        else:
            errors += [_rule_hint(e) for e in crd_cel.check(work, v.schema)]
    return errors


def _mutating_webhooks(obj: dict) -> dict:
    """The projects' mutating webhooks, which the API server runs before schema and CEL validation: JobSet's
    defaulting names failurePolicy rules, sets Indexed completion, ... (jobset pkg/webhooks/jobset_webhook.go);
    LeaderWorkerSet's its rollout and restart policy (lws pkg/webhooks/leaderworkerset_webhook.go)."""
    webhook = {("JobSet", "jobset.x-k8s.io/"): jobset_defaults,
               ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/"): lws_defaults}
    for (kind, prefix), default in webhook.items():
        if obj.get("kind") == kind and str(obj.get("apiVersion", "")).startswith(prefix):
            try:
                return default(obj)
            except (AttributeError, TypeError, ValueError):  # a malformed spec: the schema check reports it
                return obj
    return obj


def _rule_hint(e: FieldError) -> FieldError:
    for msg, hint in RULE_HINTS.items():
        if msg in e.message:
            return FieldError(e.path, e.message, f"{hint} (the CRD requires: {e.hint.split(': ', 1)[-1]})",
                              e.code, e.loc)
    return e


def _field_exists(schema: dict, loc: tuple) -> bool:
    for part in loc:
        if isinstance(part, int):
            schema = schema.get("items") or {}
            continue
        props = schema.get("properties") or {}
        if part in props:
            schema = props[part]
        elif isinstance(schema.get("additionalProperties"), dict):
            schema = schema["additionalProperties"]
        else:
            return False
    return True


def _other_versions(e: FieldError, v: Version) -> FieldError:
    """An unknown field that another served version (or the kind's other API group) has: say where it belongs
    (v1beta1 spec.cohort is v1beta2 spec.cohortName; InferencePool matchLabels is inference.networking.k8s.io/v1)."""
    for group in [v.group] + [g for g in kinds.REGISTRY.groups_of(v.kind) if g != v.group]:
        for name, other in versions(group, v.kind).items():
            if (group, name) != (v.group, v.name) and _field_exists(other.schema, e.loc):
                note = f"{e.path} is a field of {group}/{name} {v.kind}, not of {v.group}/{v.name}"
                return FieldError(e.path, e.message, f"{note}: {e.hint}", e.code, e.loc)
    return e


def diagnostics(m: Any, object_meta: Callable[[Any], list[Diagnostic]] | None = None) -> list[Diagnostic]:
    """check() for one loaded Manifest, as Diagnostics (file:line, object, field, API server message, fix).

    object_meta: the caller's ObjectMeta checks (name), run unless decoding already failed."""
    v = version_of(m.obj)
    out = []
    if v is not None and v.deprecated:
        out.append(Diagnostic(m.file, m.line, m.ref, "apiVersion", f"Warning: {v.warning}",
                              f"use {v.group}/{_storage(v)}", "notice"))
    try:
        errors = check(m.obj)
    except Exception as exc:  # noqa: BLE001 - never a traceback for a manifest; say what could not be checked
        errors = [FieldError("", f"kubetwin could not check this object against its CRD: {exc!r}", "", "internal")]
    decoded = not any(e.code in ("version", "unknown") for e in errors)
    if decoded and object_meta is not None and isinstance(m.obj.get("metadata") or {}, dict):
        out += object_meta(m)
    for e in errors:
        severity = "notice" if e.code in ("incomplete", "internal") else "error"
        out.append(Diagnostic(m.file, m.line_of(e.path) if e.path else m.line, m.ref, e.path, e.message, e.hint,
                              severity))
    return out


def _storage(v: Version) -> str:
    for s in v.crd["spec"]["versions"]:
        if s.get("storage"):
            return str(s["name"])
    return v.name

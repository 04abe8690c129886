"""Check manifests against the real API shapes (Kubernetes OpenAPI schemas) and the API server's rules.

Schemas: the strict JSON schemas shipped by kubernetes-validate for Kubernetes 1.34 (the GKE release that
made DRA GA). Beyond the schema, the checks the API server's validation does that the schema cannot
express are written in the API server's own words (k8s.io/kubernetes pkg/apis/core/validation).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from importlib import resources
from typing import Any

import jsonschema
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError
from referencing import Registry, Resource

try:  # the fast path's validator (below); without it the Python validator alone gives the same answers
    import jsonschema_rs
except ImportError:  # pragma: no cover - a dependency; an install without it still validates
    jsonschema_rs = None  # type: ignore[assignment]

from kubetwin.api import crd_schema, fields, kinds, limits, twin_errors
from kubetwin.api.errors import Diagnostic
from kubetwin.api.limits import shown
from kubetwin.api.loader import Manifest
from kubetwin.api.sweep import Sweep
from kubetwin.api.twin import TWIN_API, TWIN_KINDS
from kubetwin.k8s.units import parse_quantity
from kubetwin.validation import accelerators, multinetwork, namespaces, objectmeta, pitfalls
from kubetwin.validation import annotations as twin_annotations  # the module, not __future__'s feature
from kubetwin.validation import changes as changes_validate
from kubetwin.validation import computeclass as computeclass_validate
from kubetwin.validation import dra as dra_validate
from kubetwin.validation import kinds as kind_checks
from kubetwin.validation import nodepool as nodepool_validate
from kubetwin.validation import serving as serving_validate
from kubetwin.validation import trainer as trainer_validate
from kubetwin.validation import volume as volume_validate

K8S_VERSION = "1.34.0"

# Kinds kubetwin knows (they appear in the platform documents) but does not simulate yet: accepted, stored,
# and reported with a notice so nothing is silently ignored.
KNOWN_GROUPS = {
    "resource.k8s.io": "Dynamic Resource Allocation",
    "kueue.x-k8s.io": "Kueue",
    "jobset.x-k8s.io": "JobSet",
    "inference.networking.x-k8s.io": "Gateway API Inference Extension",
    "inference.networking.k8s.io": "Gateway API Inference Extension",
    "keda.sh": "KEDA",
    "autoscaling.x-k8s.io": "ProvisioningRequest",
    "gateway.networking.k8s.io": "Gateway API",
    "datalayer.gke.io": "GKE Volume Populator",
    "networking.gke.io": "GKE networking",
    "cloud.google.com": "GKE",
    "leaderworkerset.x-k8s.io": "LeaderWorkerSet",
    "trainer.kubeflow.org": "Kubeflow Trainer",
    "kubeflow.org": "Kubeflow training operator",
    "monitoring.coreos.com": "Prometheus Operator",
    "monitoring.googleapis.com": "Google Cloud Managed Service for Prometheus",
}
NON_OVERCOMMITABLE_PREFIXES = ("nvidia.com/", "google.com/", "amd.com/")


@functools.cache
def _schema_dir() -> Any:
    return resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", f"v{K8S_VERSION}-local-strict")


@functools.cache
def _definitions() -> dict[str, Any]:
    """kubernetes-validate's _definitions.json (1.5 MB), parsed once for the Python validator's registry,
    jsonschema-rs's and the built-in kinds' table; read only (the fast schemas are copies, _ranges_for_formats)."""
    return dict(json.loads(_schema_dir().joinpath("_definitions.json").read_text()))


@functools.cache
def _registry() -> Registry:
    return Resource.from_contents(_definitions()) @ Registry()


_GROUP_VERSION = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_FORMATS = jsonschema.FormatChecker(formats=())
for _fmt in ("int32", "int64"):
    _FORMATS.checks(_fmt)(lambda v, f=_fmt: limits.int_format_problem(v, f) is None)


def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    """The strict schema of a built-in kind; None for a kind it does not have (or a name no kind has: a group
    is a DNS subdomain of at most 253 characters, a kind an identifier)."""
    if len(api_version) > 300 or len(kind) > 253 or not _GROUP_VERSION.match(api_version) or not _KIND.match(kind):
        return None
    # only the exact (group, kind) of a built-in resource: kubectl's RESTMapper matches kinds case-sensitively
    # (`kind: Cronjob` is no CronJob) and a custom group is no built-in one (`batch.example.com/v1` is no batch/v1)
    if kind not in _builtin_kinds().get(api_version.rpartition("/")[0], {}):
        return None
    return _cached_validator(api_version, kind)


def _schema_file(api_version: str, kind: str) -> Any:
    """kubernetes-validate's file of a kind's strict schema (pod-v1.json, deployment-apps-v1.json...)."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return _schema_dir().joinpath(f"{kind.lower()}-{group_version}.json")


@functools.cache
def _cached_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    f = _schema_file(api_version, kind)
    if not f.is_file():
        return None
    schema = json.loads(f.read_text())
    return _Validator(schema, registry=Resource.from_contents(schema) @ _registry(), format_checker=_FORMATS)


# The same strict schemas compiled by jsonschema-rs (Rust), asked first: an object it finds valid is valid for the
# Python validator too and skips it (~200x faster on a cluster dump's pods: issue 36's "answers in seconds for a
# 1,000-node snapshot"); one it refuses, or cannot take, goes the Python path, so every message, path and line is
# what that path says. For the two to agree exactly the Rust copy checks only what the Python one does: no formats
# but int32/int64 (`_FORMATS`), written as the minimum/maximum of the range limits.int_format_problem enforces
# (a JSON Schema format applies to strings only, these to integers), and it is given only plain JSON values
# (`_plain_json`): a tuple is an array to jsonschema-rs but not to jsonschema. tests/test_validate_precheck.py runs
# both over the examples, the import fixtures and refused objects.
_INT_RANGES = {"int32": limits.INT32, "int64": limits.INT64}
_SUBSCHEMA_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "contains", "propertyNames", "unevaluatedItems",
               "unevaluatedProperties", "if", "then", "else")
_SUBSCHEMA_LISTS = ("oneOf", "anyOf", "allOf", "prefixItems")


def _ranges_for_formats(schema: Any) -> Any:
    """A copy of a schema with each int32/int64 `format` written as the range it allows (keywords only: a
    property may be named `format`)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            out[key] = {name: _ranges_for_formats(sub) for name, sub in schema[key].items()}
    for key in _SUBSCHEMAS:
        if key in schema:
            out[key] = _ranges_for_formats(schema[key])
    for key in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            out[key] = [_ranges_for_formats(sub) for sub in schema[key]]
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _INT_RANGES:
        del out["format"]
        out["minimum"], out["maximum"] = _INT_RANGES[fmt]
    return out


def _int_formats_left(value: Any) -> bool:
    """Whether an int32/int64 `format` is still anywhere in a converted schema (under a keyword _ranges_for_formats
    does not walk): jsonschema-rs would not enforce it, so that schema is left to the Python validator."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if isinstance(v.get("format"), str) and v["format"] in _INT_RANGES:
                return True
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


@functools.cache
def _rs_registry() -> Any:
    if jsonschema_rs is None:
        return None
    defs = _ranges_for_formats(_definitions())
    return None if _int_formats_left(defs) else jsonschema_rs.Registry([(defs["$id"], defs)])


@functools.cache
def _rs_validator(api_version: str, kind: str) -> Any:
    """jsonschema-rs over the kind's strict schema (as _cached_validator reads it); None where it is not
    installed or does not take the schema: the Python path then answers alone."""
    f = _schema_file(api_version, kind)
    registry = _rs_registry()
    if registry is None or not f.is_file():
        return None
    schema = _ranges_for_formats(json.loads(f.read_text()))
    if _int_formats_left(schema):
        return None
    try:
        return jsonschema_rs.Draft202012Validator(schema, registry=registry, validate_formats=False)
    except Exception:  # noqa: BLE001 - a schema it cannot compile: the Python validator alone, as without it
        return None


_JSON_SCALARS = (str, int, float, bool, type(None))


def _plain_json(obj: Any) -> bool:
    """Whether a value holds only dicts, lists, strings, numbers, booleans and null (exact types)."""
    stack = [obj]
    pop, extend = stack.pop, stack.extend
    while stack:
        value = pop()
        t = type(value)
        if t is dict:
            extend(value.values())
        elif t is list:
            extend(value)
        elif t not in _JSON_SCALARS:
            return False
    return True


def schema_precheck(api_version: str, kind: str, obj: Any) -> bool:
    """True when jsonschema-rs finds the object valid against its kind's strict schema (the Python validator
    would find no error); False when it finds it invalid, cannot check it, or is not installed."""
    validator = _rs_validator(api_version, kind)
    if validator is None or not _plain_json(obj):
        return False
    try:
        return bool(validator.is_valid(obj))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - a value it cannot take (a key not a string...) or a Rust panic: the
        return False  # Python path answers


# Subschemas an instance was found valid against: (base URI, $ref, the instance as JSON). A cluster's dump repeats
# the same containers, volumes, tolerations, resources... thousands of times: each is checked against its
# definition once (the jsonschema walk through $refs is most of validate's time: ~9 ms a pod before, issue 36's
# "answers in seconds for a 1,000-node snapshot"). Only valid outcomes are kept: an invalid instance is walked
# again and reports its errors with their paths as before. Bounded: cleared past _VALID_MAX entries.
_VALID: set[tuple[str, str, str]] = set()
_VALID_MAX = 200_000


def _cached_ref(validator: Any, ref: str, instance: Any, schema: Any) -> Any:
    base = getattr(getattr(validator, "_resolver", None), "_base_uri", None)
    if base is None or not isinstance(instance, (dict, list)) or not _plain_json(instance):
        # a tuple dumps as a JSON array but is not one to jsonschema: only plain JSON values share a cache key
        yield from validator._validate_reference(ref=ref, instance=instance)
        return
    key = (str(base), ref, json.dumps(instance, separators=(",", ":")))
    if key in _VALID:
        return
    errors = list(validator._validate_reference(ref=ref, instance=instance))
    if errors:
        yield from errors
        return
    if len(_VALID) >= _VALID_MAX:
        _VALID.clear()
    _VALID.add(key)


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"$ref": _cached_ref})


@functools.cache
def _builtin_kinds() -> dict[str, dict[str, frozenset[str]]]:
    """group -> kind -> served versions of the built-in API (the schemas' x-kubernetes-group-version-kind, less
    apimachinery's meta kinds and the *List kinds, which are no resources)."""
    found: dict[str, dict[str, set[str]]] = {}
    for name, schema in _definitions()["$defs"].items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            if not name.startswith("io.k8s.apimachinery") and not gvk["kind"].endswith("List"):
                found.setdefault(gvk["group"], {}).setdefault(gvk["kind"], set()).add(gvk["version"])
    return {g: {k: frozenset(v) for k, v in ks.items()} for g, ks in found.items()}


def _no_such_kind(m: Manifest, api_version: str, kind: str, group: str) -> Diagnostic | None:
    """A kind a known API group does not have, or a built-in kind in a version its group does not serve: refused
    as kubectl's RESTMapper refuses it (`no matches for kind "ClusterQueu" in version "kueue.x-k8s.io/v1beta1"`),
    with the closest kind of the group (difflib). None for any other (group, kind): a group the twin does not
    know keeps its own answer."""
    builtin = _builtin_kinds().get(group)
    if (builtin is None and group not in KNOWN_GROUPS) or not _GROUP_VERSION.match(api_version):
        return None
    names = sorted({*(builtin or {}), *kinds.REGISTRY.kinds_in_group(group), *kinds.UNSHIPPED_KINDS.get(group, ())})
    message = f'no matches for kind "{shown(kind)}" in version "{shown(api_version)}"'
    if kind not in names:
        elsewhere = _groups_serving(kind)
        if elsewhere:
            return Diagnostic(m.file, m.line_of("apiVersion"), m.ref, "apiVersion", message,
                              f"{kind} is served in " + " and ".join(elsewhere) + ": set apiVersion: " + elsewhere[0])
        close = crd_schema.closest_field(kind, names)
        listed = f"the kinds of {group or 'the core group'} are: {', '.join(names)}"
        return Diagnostic(m.file, m.line_of("kind"), m.ref, "kind", message,
                          f"did you mean {close}? ({listed})" if close else listed)
    served = (builtin or {}).get(kind)
    version = api_version.rpartition("/")[2]
    if served is None and kind in kinds.UNSHIPPED_KINDS.get(group, ()) and group in kinds.UNSHIPPED_VERSIONS:
        served = frozenset(kinds.UNSHIPPED_VERSIONS[group])
    if served is not None and version not in served and not kinds.REGISTRY.is_custom(group, kind):
        return Diagnostic(m.file, m.line_of("apiVersion"), m.ref, "apiVersion", message,
                          "use a served version: " + ", ".join(f"{group}/{v}" if group else v
                                                              for v in sorted(served, reverse=True)))
    return None


def unknown_custom_kind(api_version: str) -> bool:
    """Whether an object's apiVersion is a CRD group the twin knows nothing of (validate's notice): the run does
    not create it, since the store keys objects by kind and `example.com/v1` `Job` is no batch/v1 Job."""
    group = str(api_version).rpartition("/")[0]
    return (_custom_group(str(api_version)) and group not in _builtin_kinds() and group not in KNOWN_GROUPS
            and group != kinds.TWIN_GROUP and not kinds.REGISTRY.kinds_in_group(group))


def _groups_serving(kind: str) -> list[str]:
    """The preferred group/version of each API group that has this kind (built-in, then the twin's registry)."""
    out = []
    for g, ks in sorted(_builtin_kinds().items()):
        if kind in ks:
            best = max(ks[kind], key=kinds.version_key)
            out.append(f"{g}/{best}" if g else best)
    for info in kinds.REGISTRY.by_kind(kind):
        gv = f"{info.group}/{info.versions[0]}" if info.group else info.versions[0]
        if gv not in out and info.group not in _builtin_kinds():
            out.append(gv)
    return out


def _custom_group(api_version: str) -> bool:
    """Whether apiVersion names a group a CustomResourceDefinition could define: well formed, and its group has a
    dot (apiextensions' CRD validation: "should be a domain with at least one dot"); built-in groups are handled
    before this is asked."""
    group, sep, _ = api_version.rpartition("/")
    return bool(sep) and "." in group and len(api_version) <= 300 and bool(_GROUP_VERSION.match(api_version))


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _schema_diagnostic(m: Manifest, err: jsonschema.ValidationError) -> Diagnostic:
    path = _path(err.absolute_path)
    if err.validator == "additionalProperties":
        extra = _unknown_fields(err)
        field = f"{path}.{extra[0]}" if path and extra else (extra[0] if extra else path)
        names = sorted((err.schema.get("properties") or {}) if isinstance(err.schema, dict) else {})
        close = crd_schema.closest_field(extra[0], names) if extra else None
        hint = (f"did you mean {close}? rename {extra[0]} to {close}, or remove it" if close else
                "remove it, or check its spelling and indentation against the API reference")
        return Diagnostic(m.file, m.line_of(field), m.ref, field,
                          f'strict decoding error: unknown field "{field}"', hint)
    if err.validator == "required":
        missing = re.findall(r"'([^']+)'", err.message)
        field = f"{path}.{missing[0]}" if path and missing else (missing[0] if missing else path)
        return Diagnostic(m.file, m.line_of(path), m.ref, field, "Required value", f"set {field}")
    if err.validator == "format" and err.validator_value in ("int32", "int64"):
        return Diagnostic(m.file, m.line_of(path), m.ref, path,
                          f"Invalid value: {shown(err.instance)}: "
                          f"{limits.int_format_problem(err.instance, err.validator_value)}",
                          "use a value between {} and {}".format(
                              *(limits.INT32 if err.validator_value == "int32" else limits.INT64)))
    if err.validator in ("type", "format", "enum"):
        return Diagnostic(m.file, m.line_of(path), m.ref, path,
                          f"Invalid value: {json.dumps(err.instance, default=str)[:60]}: {shown(err.message, 200)}",
                          "")
    return Diagnostic(m.file, m.line_of(path), m.ref, path, shown(err.message, 200), "")


_TWIN_KINDS: dict[str, type[BaseModel]] = {**TWIN_KINDS, "Sweep": Sweep}  # kubetwin sweep's input (api/sweep.py)


def _validate_twin(m: Manifest) -> list[Diagnostic]:
    """The kind's pydantic model (api.twin), then, when the model accepts it, the kind's own checks."""
    model = _TWIN_KINDS.get(m.kind)
    if model is None:
        close = crd_schema.closest_field(m.kind, sorted(_TWIN_KINDS))
        return [Diagnostic(m.file, m.line, m.ref, "kind",
                           f'no matches for kind "{m.kind}" in version "{TWIN_API}"',
                           (f"did you mean {close}? " if close else "")
                           + f"kubetwin.io/v1alpha1 kinds are: {', '.join(sorted(_TWIN_KINDS))}")]
    try:
        model.model_validate(m.obj)
    except PydanticError as exc:
        out = []
        for e in exc.errors():
            field = _path(e["loc"])
            msg, fix = twin_errors.translate(model, e, field)
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, msg, fix))
        return out
    return _kind_checks(m, kind_checks.REGISTRY.of(TWIN_API, m.kind), [])


def _containers(obj: dict) -> tuple[str, dict] | None:
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return "spec", spec
    if kind in ("Job", "Deployment", "ReplicaSet"):
        return "spec.template.spec", ((spec.get("template") or {}).get("spec") or {})
    if kind == "PodTemplate":  # ValidatePodTemplate: the same pod spec rules (ProvisioningRequests read them)
        tmpl = obj.get("template")
        return "template.spec", ((tmpl.get("spec") if isinstance(tmpl, dict) else None) or {})
    return None


def _semantic(m: Manifest) -> list[Diagnostic]:
    """API-server validation the OpenAPI schema does not carry."""
    out = objectmeta.diagnostics(m) + fields.null_items(m) + _gpu_share(m) + fields.diagnostics(m)
    found = _containers(m.obj)
    if found:
        prefix, pod_spec = found
        out += _pod_spec(m, prefix, pod_spec)
    return out


def _field_errors(m: Manifest, entry: kind_checks.KindChecks) -> list[Diagnostic]:
    """The API server's field validation of a built-in kind on an object its schema accepts: every check runs and
    their errors are aggregated, as field.ErrorList is."""
    out = _semantic(m) + dra_validate.diagnostics(m)
    for check in entry.checks:
        out += check(m)
    return out


_PRUNE_ROUNDS = 4  # twin choice: a field removed may leave its parent missing a required field; give up after this


def _rest_of_object(m: Manifest, validator: Any, errors: list[jsonschema.ValidationError],
                    entry: kind_checks.KindChecks) -> list[Diagnostic]:
    """The field errors of the rest of an object the schema refused (a wrong type in one field, a bad quantity in
    another: both are reported, not only the first). The refused fields are removed from a copy (a list element
    takes its whole list, whose indices would shift; a required field missing takes its parent) until the schema
    accepts the copy, then `_field_errors` runs on it; errors on or above a removed field are dropped, being about
    the removal. Nothing when the whole object would go."""
    obj: Any = m.obj
    removed: list[str] = []
    for _ in range(_PRUNE_ROUNDS):
        obj = copy.deepcopy(obj)
        for err in errors:
            for path in _refused_fields(err):
                while path and isinstance(path[-1], int):
                    path = path[:-1]
                if not path:
                    return []
                parent = obj
                for part in path[:-1]:  # a field an earlier error of this round removed takes its children with it
                    if isinstance(parent, dict):
                        parent = parent.get(part)
                    elif isinstance(parent, list) and isinstance(part, int) and 0 <= part < len(parent):
                        parent = parent[part]
                    else:
                        parent = None
                if isinstance(parent, dict):
                    parent.pop(path[-1], None)
                removed.append(_path(path))
        errors = list(validator.iter_errors(obj))
        if not errors:
            break
    else:
        return []
    rest = dataclasses.replace(m, obj=obj)

    def about_removed(field: str) -> bool:
        return any(field == r or field.startswith((r + ".", r + "[")) or r.startswith((field + ".", field + "["))
                   for r in removed)

    return [d for d in _field_errors(rest, entry) if d.severity == "error" and not about_removed(d.field)]


def _refused_fields(err: jsonschema.ValidationError) -> list[list[Any]]:
    """The paths a schema error refuses: the unknown keys of an additionalProperties error, the object missing a
    required field, else the field itself."""
    path = list(err.absolute_path)
    if err.validator == "additionalProperties":
        return [path + [extra] for extra in _unknown_fields(err)]
    return [path]


def _unknown_fields(err: jsonschema.ValidationError) -> list[str]:
    """The keys an additionalProperties error names ("Additional properties are not allowed ('a', 'b' were
    unexpected)")."""
    return re.findall(r"'([^']+)'", err.message.split("(")[-1])


def _gpu_share(m: Manifest) -> list[Diagnostic]:
    """open-gpu-share's annotations (scheduler.gpushare reads them): milli in 1..1000, count >= 1, one GPU if shared."""
    from kubetwin.scheduler.gpushare import GPU_COUNT, GPU_MILLI

    out = []
    for prefix, anns, _ in twin_annotations.annotation_sets(m.obj):
        values: dict[str, int] = {}
        for key, lo, hi in ((GPU_MILLI, 1, 1000), (GPU_COUNT, 1, 8)):
            if key not in anns:
                continue
            raw = str(anns[key])
            ok = raw.isdigit() and lo <= int(raw) <= hi
            if ok:
                values[key] = int(raw)
            else:
                out.append(Diagnostic(m.file, m.line_of(f"{prefix}.annotations.{key}"), m.ref,
                                      f'{prefix}.annotations["{key}"]',
                                      f'Invalid value: "{raw}": must be an integer from {lo} to {hi}',
                                      "gpu-milli is thousandths of one GPU (300 = 30%); gpu-count is the number "
                                      "of GPUs"))
        if values.get(GPU_MILLI, 1000) < 1000 and values.get(GPU_COUNT, 1) > 1:
            out.append(Diagnostic(m.file, m.line_of(f"{prefix}.annotations.{GPU_COUNT}"), m.ref,
                                  f'{prefix}.annotations["{GPU_COUNT}"]',
                                  f"Invalid value: \"{values[GPU_COUNT]}\": a pod that shares a GPU "
                                  f"(gpu-milli {values[GPU_MILLI]} < 1000) gets exactly one GPU",
                                  'set gpu-count: "1", or gpu-milli: "1000" for whole GPUs'))
    return out


def _pod_spec(m: Manifest, prefix: str, spec: dict) -> list[Diagnostic]:
    if not spec.get("containers"):  # validateContainers: a pod (template) without containers
        return [Diagnostic(m.file, m.line_of(prefix), m.ref, f"{prefix}.containers", "Required value",
                           f"add {prefix}.containers: [{{name: main, image: ...}}]")]
    out: list[Diagnostic] = []
    if m.kind == "Job":
        policy = spec.get("restartPolicy", "Always")
        if policy not in ("OnFailure", "Never"):
            out.append(Diagnostic(m.file, m.line_of(f"{prefix}.restartPolicy") if "restartPolicy" in spec
                                  else m.line_of(prefix), m.ref, f"{prefix}.restartPolicy",
                                  f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
                                  f"set {prefix}.restartPolicy: Never (or OnFailure)"))
    problems = fields.containers(m, prefix, spec)
    if problems:
        return out + problems
    for i, c in enumerate(spec.get("containers") or []):
        res = (c or {}).get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        base = f"{prefix}.containers[{i}].resources"
        for rname, value in requests.items():
            if rname.startswith(NON_OVERCOMMITABLE_PREFIXES) and "/" in rname:
                if rname not in limits:
                    out.append(Diagnostic(m.file, m.line_of(f"{base}.requests.{rname}"), m.ref, f"{base}.limits",
                                          "Required value: Limit must be set for non overcommitable resources",
                                          f'add limits: {{{rname}: "{value}"}} (extended resources are requested '
                                          "through limits; requests default to them)"))
                elif parse_quantity(limits[rname]) != parse_quantity(value):
                    out.append(Diagnostic(m.file, m.line_of(f"{base}.requests.{rname}"), m.ref,
                                          f"{base}.requests[{rname}]",
                                          f"Invalid value: {value}: must be equal to {rname} limit of "
                                          f"{limits[rname]}", "make requests and limits equal"))
    return out


def with_overrides(manifests: list[Manifest], duration: str | None = None, seed: int | None = None,
                   trace_scheduling: bool = False) -> list[Manifest]:
    """The manifests with `kubetwin run --duration/--seed/--trace-scheduling` written into the Scenario (a new one
    when there is none), so the flags are validated like the fields they replace; diagnostics name the flags."""
    spec: dict[str, object] = {k: v for k, v in (("duration", duration), ("seed", seed)) if v is not None}
    if trace_scheduling:
        spec["traceScheduling"] = True
    if not spec:
        return manifests
    flags = {f"spec.{k}": "--trace-scheduling" if k == "traceScheduling" else f"--{k} {v}" for k, v in spec.items()}
    found = next((i for i, m in enumerate(manifests) if m.kind == "Scenario" and m.obj.get("apiVersion") == TWIN_API
                  and isinstance(m.obj.get("spec") or {}, dict)), None)
    if found is None:
        return [*manifests, Manifest({"apiVersion": TWIN_API, "kind": "Scenario", "metadata": {"name": "command-line"},
                                      "spec": spec}, " ".join(flags.values()), 0, flags=flags)]
    m = manifests[found]
    obj = {**m.obj, "spec": {**(m.obj.get("spec") or {}), **spec}}
    return [*manifests[:found], Manifest(obj, m.file, m.line, m.lines, {**m.flags, **flags}), *manifests[found + 1:]]


def _named_by_flag(m: Manifest, d: Diagnostic) -> Diagnostic:
    """A finding about a field a flag set names the flag, not the file line the flag replaced."""
    flag = m.flags.get(d.field)
    return dataclasses.replace(d, file=flag, line=0) if flag is not None else d


def validate(manifests: list[Manifest]) -> list[Diagnostic]:
    """All diagnostics for the manifests, errors and notices, in file order."""
    out: list[Diagnostic] = []
    from kubetwin.workloads import training_spec  # training.kubetwin.io/* annotations (workloads/training.py)

    clean = []  # objects without errors, for the checks across objects
    pools = accelerators.pool_node_labels(manifests)  # the devices a training pod gets (devices/container.py)
    for m in manifests:
        found = validate_one(m)
        if m.kind in ("Pod", "Job", "JobSet", "TrainJob", "PyTorchJob") and \
                not any(d.severity == "error" for d in found):
            found += training_spec.diagnostics(m, pools)
        if m.flags:
            found = [_named_by_flag(m, d) for d in found]
        out += found
        if not any(d.severity == "error" for d in found):
            clean.append(m)
    out += namespaces.diagnostics(clean)  # objects in a namespace that does not exist (NamespaceLifecycle)
    out += nodepool_validate.cluster_size(clean)  # GKE's nodes per cluster (api.twin.MAX_NODES_PER_CLUSTER)
    out += nodepool_validate.autoprovisioning(clean)  # GKE's NAP pool defaults: accepted, not modelled
    out += serving_validate.scenario(clean)
    out += accelerators.check(clean)  # the workload x device-kind support matrix (docs/devices.md)
    out += accelerators.shared_gpu_requests(clean)  # more than one shared GPU per container
    out += accelerators.mig_resource_requests(clean)  # nvidia.com/mig-<profile> where GKE has nvidia.com/gpu
    out += serving_validate.request_budget(manifests)
    from kubetwin.kueue import config as kueue_config  # the ConfigMap and a bare Configuration both given

    out += kueue_config.scenario_diagnostics(clean)
    out += kind_checks.jobset.restart_job_gate(clean)  # RestartJob actions need the JobSet manager's feature gate
    out += volume_validate.addon_classes(clean)  # a claim naming a class only a GKE add-on installs
    out += multinetwork.diagnostics(clean)  # Network objects and pod interfaces need Dataplane V2 + multi-networking
    out += changes_validate.diagnostics(clean, validate_one)  # Change objects against their targets
    out += computeclass_validate.diagnostics(clean)  # GKE ComputeClasses, their pools and the pods selecting them
    out += trainer_validate.scenario(clean)  # TrainJobs against their runtimes (the Trainer's webhook)
    return out + pitfalls.diagnostics(clean)  # cross-object platform pitfalls (validation/pitfalls.py)


def validate_one(m: Manifest) -> list[Diagnostic]:
    """One object's diagnostics; its twin annotations are checked once the object itself is valid."""
    out = _validate_one(m)
    if not any(d.severity == "error" for d in out) and isinstance(m.obj.get("metadata"), dict):
        out += twin_annotations.diagnostics(m)
    return out


def _kind_checks(m: Manifest, entry: kind_checks.KindChecks, out: list[Diagnostic]) -> list[Diagnostic]:
    """A CRD or twin kind's own checks after its schema, each while nothing so far is an error: a validating
    webhook never sees an object the schema refused."""
    for check in entry.checks:
        if any(d.severity == "error" for d in out):
            break
        out = out + check(m)
    return out


def _validate_one(m: Manifest) -> list[Diagnostic]:
    """The generic path (schemas, API-server rules, the "not simulated" notices) with the kind's entry of
    validation.kinds called at its places."""
    for key in ("apiVersion", "kind"):
        value = m.obj.get(key)
        if value is not None and not isinstance(value, str):
            return [Diagnostic(m.file, m.line_of(key), m.ref, key, f"json: cannot unmarshal "
                               f"{type(value).__name__.replace('dict', 'object').replace('list', 'array')} into Go "
                               f"struct field TypeMeta.{key} of type string", f"write {key} as a string")]
    api_version, kind = str(m.obj.get("apiVersion") or ""), m.kind
    if not api_version or not kind:
        missing = "apiVersion" if not api_version else "kind"
        return [Diagnostic(m.file, m.line, m.ref, missing, f"Object 'Kind' is missing or '{missing}' is not set",
                           "every object needs apiVersion and kind, e.g. apiVersion: v1, kind: Pod")]
    if api_version == TWIN_API:
        errors = _validate_twin(m)
        return errors + [d for d in objectmeta.diagnostics(m) if not any(e.field == d.field for e in errors)]
    entry = kind_checks.REGISTRY.of(api_version, kind)  # the kind's own checks (validation/kinds/)
    if entry.first is not None:
        own = entry.first(m)
        if own is not None:
            return own
    group = api_version.split("/")[0] if "/" in api_version else ""
    validator = _validator(api_version, kind)
    if validator is None:
        no_kind = _no_such_kind(m, api_version, kind, group)
        if no_kind is not None:
            return [no_kind]
    from kubetwin.api import crd  # CRD kinds: the real CRDs' schemas and CEL rules (api/crd.py)

    if validator is None and crd.handles(api_version, kind):
        out = crd.diagnostics(m, object_meta=objectmeta.diagnostics)
        if not any(d.severity == "error" for d in out):
            out += fields.diagnostics(m)
        out = _kind_checks(m, entry, out)
        if not out and entry.when_clean is not None:  # what the run does with a clean custom resource
            out = entry.when_clean(m)
        if not any(d.severity == "error" for d in out) and not kinds.is_simulated(api_version, kind):
            out.append(Diagnostic(m.file, m.line, m.ref, "", f"{KNOWN_GROUPS.get(group, group)} kind {kind} "
                                  f"({api_version}) is accepted but not simulated yet: it is stored and has no "
                                  "effect on the run", "", "notice"))
        return out
    if validator is None:
        if group in KNOWN_GROUPS and _KIND.match(kind) and len(kind) <= 253:
            named = objectmeta.diagnostics(m)  # stored, so it needs what every object has
            if named:
                return named
            return [Diagnostic(m.file, m.line, m.ref, "", f"{KNOWN_GROUPS[group]} kind {kind} ({api_version}) is "
                               "accepted but not simulated yet: it is stored and has no effect on the run", "",
                               "notice")]
        if _custom_group(api_version) and _KIND.match(kind) and len(kind) <= 253:
            # a group that may be a CRD the cluster has and the twin does not know (issue 31 item 5: unknown kinds
            # in unknown groups stay notices)
            named = objectmeta.diagnostics(m)
            if named:
                return named
            return [Diagnostic(m.file, m.line, m.ref, "", f"kind {kind} ({api_version}) is not known to the twin "
                               "(no CRD of its group ships with it): the run does not create it, so it has no "
                               "effect on the run", "", "notice")]
        return [Diagnostic(m.file, m.line, m.ref, "apiVersion",
                           f'no matches for kind "{shown(kind)}" in version "{shown(api_version)}"',
                           "check apiVersion/kind against `kubectl api-resources` for Kubernetes 1.34")]
    schema_errors = [] if schema_precheck(api_version, kind, m.obj) else sorted(
        validator.iter_errors(m.obj), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    out = [_schema_diagnostic(m, e) for e in schema_errors]
    if not out:
        out = _field_errors(m, entry)
        out += serving_validate.model_servers(m)
    else:
        out += _rest_of_object(m, validator, schema_errors, entry)
    if not out and entry.when_clean is not None:
        clean = entry.when_clean(m)
        if clean:
            return clean
    if not out and not kinds.is_simulated(api_version, kind):
        note = KNOWN_GROUPS.get(group, "Kubernetes")
        out = [Diagnostic(m.file, m.line, m.ref, "", f"{kind} ({api_version}, {note}) is accepted but not "
                          "simulated yet: it is stored and has no effect on the run", "", "notice")]
    if not schema_errors:
        out += volume_validate.storage(m)  # what the twin's storage controllers do not model
    return out


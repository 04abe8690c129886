"""The API server's field rules the OpenAPI schemas do not carry, in its own words.

Sources: k8s.io/apimachinery pkg/util/validation (IsDNS1123Label, "must be no more than 63 characters"),
pkg/api/validation (ValidateNonnegativeField: IsNegativeErrorMsg "must be greater than or equal to 0"),
k8s.io/kubernetes pkg/apis/core/validation/validation.go (ValidateObjectMeta's namespace, validateContainerCommon's
DNS-1123 label container names, ValidateResourceRequirements / ValidateResourceQuantityValue: negative quantities,
"must be an integer" for integer (extended) resources, "must be less than or equal to cpu limit of 2"),
pkg/apis/apps/validation and pkg/apis/batch/validation (replicas, parallelism, completions, backoffLimit).
A kind's own rules (a ClusterQueue's quotas, a JobSet's pod templates) are in its module of validation.kinds.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from kubetwin.api import jobset_defaults
from kubetwin.api.errors import Diagnostic
from kubetwin.api.limits import INT64, shown
from kubetwin.api.loader import Manifest
from kubetwin.api.podresources import resource_value
from kubetwin.k8s import validation as k8s_validation
from kubetwin.k8s.units import UnitError, parse_quantity

DNS1123_LABEL_MAX = k8s_validation.DNS1123_LABEL_MAX
NEGATIVE_MSG = "must be greater than or equal to 0"
NOT_INTEGER_MSG = "must be an integer"
# Twin limit: the scheduler and the node table count resources in int64 (cpu in milli-units, as kube-scheduler's
# Resource.MilliCPU; the rest in whole units), so a larger quantity cannot be represented.
MAX_INT64 = INT64[1]
# Pods one object may ask for: GKE's "Pods per cluster" limit, 200,000 (https://cloud.google.com/kubernetes-engine/
# quotas); the twin refuses one object whose pods alone pass it (a twin limit: every pod is simulated).
MAX_PODS = 200_000
# An Indexed Job's parallelism: batch validation's maxParallelismForIndexedJob (pkg/apis/batch/validation).
MAX_INDEXED_PARALLELISM = 100_000
# Integer fields that must not be negative, per kind (the API server's ValidateNonnegativeField).
NONNEGATIVE = {
    "Deployment": ("spec.replicas", "spec.minReadySeconds", "spec.revisionHistoryLimit",
                   "spec.progressDeadlineSeconds"),
    "ReplicaSet": ("spec.replicas", "spec.minReadySeconds"),
    "Job": ("spec.parallelism", "spec.completions", "spec.backoffLimit", "spec.ttlSecondsAfterFinished"),
}


def label_problems(value: str) -> list[str]:
    """IsDNS1123Label's messages (k8s.validation)."""
    return k8s_validation.is_dns1123_label(value)


def label_diagnostics(m: Manifest, field: str, value: object) -> list[Diagnostic]:
    fix = re.sub(r"[^a-z0-9-]+", "-", str(value).lower()).strip("-")[:DNS1123_LABEL_MAX].strip("-") or "my-name"
    return [Diagnostic(m.file, m.line_of(field), m.ref, field, f'Invalid value: "{shown(value)}": {msg}',
                       f"rename it, e.g. {fix}") for msg in label_problems(str(value))]


def namespace(m: Manifest) -> list[Diagnostic]:
    """metadata.namespace must be a DNS-1123 label (ValidateObjectMeta -> ValidateNamespaceName)."""
    meta = m.obj.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    if ns is None or ns == "":
        return []
    return label_diagnostics(m, "metadata.namespace", ns)


def get_path(obj: Any, path: str) -> Any:
    """The value at a dotted path of dicts; None where a step is missing or not a dict."""
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def quantity_problem(rname: str, value: object) -> str | None:
    """ValidateResourceQuantityValue's message for a requests/limits value, or None."""
    try:
        q = parse_quantity(value)
    except UnitError as exc:
        return str(exc)
    if q < 0:
        return NEGATIVE_MSG
    if is_extended(rname) and q != q.to_integral_value():
        return NOT_INTEGER_MSG
    if resource_value(rname, value) > MAX_INT64:  # what the scheduler's int64 columns hold: cpu in milli-units
        limit = Decimal(MAX_INT64) / (1000 if rname == "cpu" else 1)
        return f"must be no more than {limit} (a twin limit: the scheduler counts resources in int64" + (
            " milli-units)" if rname == "cpu" else ")")
    return None


def is_extended(rname: str) -> bool:
    """IsExtendedResourceName: a name with a domain other than kubernetes.io (nvidia.com/gpu, google.com/tpu)."""
    return "/" in rname and "kubernetes.io/" not in rname and not rname.startswith("requests.")


def resources(m: Manifest, base: str, res: dict) -> list[Diagnostic]:
    """A container's requests and limits (base: ...containers[i].resources)."""
    out: list[Diagnostic] = []
    requests, limits = res.get("requests"), res.get("limits")
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    for part, values in (("limits", limits), ("requests", requests)):
        for rname in sorted(values):
            problem = quantity_problem(rname, values[rname])
            if problem:
                field = f"{base}.{part}[{rname}]"
                out.append(Diagnostic(m.file, m.line_of(f"{base}.{part}.{rname}"), m.ref, field,
                                      f'Invalid value: "{shown(values[rname])}": {problem}',
                                      "write a whole number" if problem == NOT_INTEGER_MSG else
                                      "write a quantity such as 2, 500m or 16Gi"))
    if out:
        return out
    for rname in sorted(requests):
        if rname in limits and not is_extended(rname) and parse_quantity(requests[rname]) > parse_quantity(
                limits[rname]):
            out.append(Diagnostic(m.file, m.line_of(f"{base}.requests.{rname}"), m.ref, f"{base}.requests[{rname}]",
                                  f'Invalid value: "{requests[rname]}": must be less than or equal to {rname} '
                                  f"limit of {limits[rname]}", "lower the request or raise the limit"))
    return out


def containers(m: Manifest, prefix: str, spec: dict) -> list[Diagnostic]:
    """Container names (DNS-1123 labels, unique) and resources of a pod spec."""
    out: list[Diagnostic] = []
    seen: set[str] = set()
    for group in ("initContainers", "containers"):
        items = spec.get(group)
        for i, c in enumerate(items if isinstance(items, list) else []):
            if not isinstance(c, dict):
                continue
            path = f"{prefix}.{group}[{i}]"
            name = c.get("name")
            if isinstance(name, str) and name:
                out += label_diagnostics(m, f"{path}.name", name)
                if name in seen:
                    out.append(Diagnostic(m.file, m.line_of(f"{path}.name"), m.ref, f"{path}.name",
                                          f'Duplicate value: "{shown(name)}"', "give each container its own name"))
                seen.add(name)
            res = c.get("resources")
            if isinstance(res, dict):
                out += resources(m, f"{path}.resources", res)
    return out


def _nonnegative(m: Manifest) -> list[Diagnostic]:
    out = []
    for path in NONNEGATIVE.get(m.kind, ()):
        value = get_path(m.obj, path)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            out.append(Diagnostic(m.file, m.line_of(path), m.ref, path, f"Invalid value: {value}: {NEGATIVE_MSG}",
                                  f"set {path} to 0 or more"))
    return out or pod_counts(m, m.obj, "")


def pod_counts(m: Manifest, obj: dict, prefix: str, times: int = 1) -> list[Diagnostic]:
    """replicas / parallelism past the pods one object may hold at once (see MAX_PODS), and an Indexed Job's
    parallelism past batch validation's limit. Completions are not bounded here: the Job controller creates pods
    as it goes (at most parallelism at a time), so completions up to int32 are valid and run."""
    out = []
    mode = get_path(obj, "spec.completionMode") or (jobset_defaults.COMPLETION_MODE if prefix.startswith(
        "spec.replicatedJobs") else None)
    indexed = mode == "Indexed"
    if indexed and get_path(obj, "spec.completions") is None:
        # batch validation's validateJobSpec; a JobSet's webhook defaults its Jobs' completionMode to Indexed
        path = f"{prefix}spec.completions"
        out.append(Diagnostic(m.file, m.line_of(f"{prefix}spec"), m.ref, path,
                              "Required value: when completion mode is Indexed",
                              "set completions (usually equal to parallelism)" + (
                                  "; a JobSet's Jobs are Indexed unless completionMode says otherwise"
                                  if prefix else "")))
    for key in ("spec.replicas", "spec.parallelism"):
        value = get_path(obj, key)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        path = f"{prefix}{key}"
        if key == "spec.parallelism" and indexed and value > MAX_INDEXED_PARALLELISM:
            out.append(Diagnostic(m.file, m.line_of(path), m.ref, path, f"Invalid value: {value}: must be less "
                                  f"than or equal to {MAX_INDEXED_PARALLELISM} when completion mode is Indexed",
                                  f"set {key.split('.')[-1]} to at most {MAX_INDEXED_PARALLELISM}"))
        elif value * times > MAX_PODS:
            out.append(Diagnostic(m.file, m.line_of(path), m.ref, path, f"Invalid value: {value}: "
                                  f"{value * times:,} pods from one object are more than a GKE cluster holds "
                                  f"({MAX_PODS:,} pods per cluster; the twin simulates each pod)",
                                  "lower it, or split the work over several objects"))
    return out


def _crd_nulls(m: Manifest) -> list[Diagnostic]:
    """A null the API server's structural defaulting drops (and defaults) for a CRD kind: the twin's controllers
    read the object as written, so validate asks for the line to go (a twin limitation, said as such)."""
    from kubetwin.api import crd

    defaulted = crd.apply_defaults(m.obj)
    out: list[Diagnostic] = []
    stack: list[tuple[Any, Any, str]] = [(m.obj, defaulted, "")]
    while stack:
        value, other, path = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                sub = f"{path}.{k}" if path else str(k)
                there = other.get(k, ...) if isinstance(other, dict) else ...
                if v is None and there is not None:
                    out.append(Diagnostic(m.file, m.line_of(sub), m.ref, sub, "Invalid value: null: the API server "
                                          "drops this null and defaults the field; the twin reads objects as written",
                                          f"remove {k}, or write its value"))
                else:
                    stack.append((v, there, sub))
        elif isinstance(value, list) and isinstance(other, list) and len(other) == len(value):
            stack.extend((v, o, f"{path}[{i}]") for i, (v, o) in enumerate(zip(value, other, strict=True)))
    return sorted(out, key=lambda d: d.line)


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """The kind's field rules beyond the schema."""
    from kubetwin.api import crd

    nulls = _crd_nulls(m) if crd.handles(str(m.obj.get("apiVersion") or ""), m.kind) else []
    return nulls or _nonnegative(m)


def null_items(m: Manifest) -> list[Diagnostic]:
    """A `-` with nothing after it: the API server decodes a null list item into an empty object, which then
    lacks its required fields (volumes[0].name: Required value); the twin's controllers cannot read it."""
    out: list[Diagnostic] = []
    stack: list[tuple[Any, str]] = [(m.obj, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if item is None:
                    out.append(Diagnostic(m.file, m.line_of(f"{path}[{i}]"), m.ref, f"{path}[{i}]",
                                          "Required value: an empty list item", "remove the empty `-` entry"))
                else:
                    stack.append((item, f"{path}[{i}]"))
    return sorted(out, key=lambda d: d.line)

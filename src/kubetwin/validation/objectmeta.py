"""ValidateObjectMeta's name, namespace, label and annotation rules, which every stored object meets whatever its
kind (k8s.io/apimachinery pkg/api/validation/objectmeta.go; the name a DNS-1123 subdomain, NameIsDNSSubdomain;
labels ValidateLabels and annotations ValidateAnnotations, `k8s.validation`), and a built-in pod template's labels
and annotations (ValidatePodTemplateSpec checks its ObjectMeta under the template's own path: spec.template.labels).

One copy for validate's generic path and for the kinds of validation.kinds that check an object themselves.
"""

from __future__ import annotations

import json
import re

from kubetwin.api import fields, kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.limits import shown
from kubetwin.api.loader import Manifest
from kubetwin.k8s import validation as k8s_validation

DNS1123_SUBDOMAIN = re.compile(f"^{k8s_validation.DNS1123_SUBDOMAIN_FMT}$")
BUILT_IN_APIS = ("v1", "apps/v1", "batch/v1")  # whose pod templates the API server validates as ObjectMeta


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """metadata.name: required, and a DNS-1123 subdomain; metadata.namespace a DNS-1123 label
    (ValidateObjectMeta)."""
    out: list[Diagnostic] = []
    meta = m.obj.get("metadata")
    meta = {} if meta is None else meta
    if not isinstance(meta, dict):
        return [Diagnostic(m.file, m.line_of("metadata"), m.ref, "metadata",
                           f"Invalid value: {shown(json.dumps(meta, default=str))}: metadata must be an object "
                           "(name, namespace, labels, annotations)", "write metadata: {name: my-name}")]
    name = meta.get("name") or meta.get("generateName")
    fix = re.sub(r"[^a-z0-9.-]+", "-", str(name).lower()).strip("-.")[:253] or "my-name"
    if not name:
        out.append(Diagnostic(m.file, m.line, m.ref, "metadata.name",
                              "Required value: name or generateName is required", "add metadata.name"))
    elif len(str(name)) > 253:
        out.append(Diagnostic(m.file, m.line_of("metadata.name"), m.ref, "metadata.name",
                              f'Invalid value: "{shown(name)}": must be no more than 253 characters',
                              "rename it, e.g. " + fix))
    elif not DNS1123_SUBDOMAIN.match(str(name)):
        out.append(Diagnostic(m.file, m.line_of("metadata.name"), m.ref, "metadata.name",
                              f'Invalid value: "{shown(name)}": a lowercase RFC 1123 subdomain must consist of lower '
                              "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                              "character", "rename it, e.g. " + fix))
    out += fields.namespace(m)
    out += labels_and_annotations(m, "metadata", meta)
    if str(m.obj.get("apiVersion") or "") in BUILT_IN_APIS:  # the kind registry knows where the templates are
        for ref in kinds.REGISTRY.pod_templates(m.obj):
            if ref.path:  # a Pod's own metadata is the object's, checked above
                out += labels_and_annotations(m, ref.path, ref.metadata, ref.at("metadata"))
    return out


def labels_and_annotations(m: Manifest, path: str, meta: dict, written: str | None = None) -> list[Diagnostic]:
    """ValidateLabels and ValidateAnnotations of one ObjectMeta: errors at `path`.labels / .annotations (the API
    server's paths), lines from `written` (where the metadata is in the file; `path` itself by default)."""
    written = written or path
    out = []
    for key, check in (("labels", k8s_validation.label_errors), ("annotations", k8s_validation.annotation_errors)):
        values = meta.get(key)
        if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in values.items()):
            continue  # the schema's type errors say it
        for about, bad, msg in check(values):
            line = m.line_of(f"{written}.{key}.{about}") if about is not None else m.line_of(f"{written}.{key}")
            shown_value = "" if about is None else f'Invalid value: "{shown(bad)}": '
            out.append(Diagnostic(m.file, line, m.ref, f"{path}.{key}", shown_value + msg,
                                  f"fix the {key[:-1]} in {written}.{key}"))
    return out

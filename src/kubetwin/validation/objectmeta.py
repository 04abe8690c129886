"""ValidateObjectMeta's name and namespace rules, which every stored object meets whatever its kind
(k8s.io/apimachinery pkg/api/validation/objectmeta.go; the name a DNS-1123 subdomain, NameIsDNSSubdomain).

One copy for validate's generic path and for the kinds of validation.kinds that check an object themselves.
"""

from __future__ import annotations

import json
import re

from kubetwin.api import fields
from kubetwin.api.errors import Diagnostic
from kubetwin.api.limits import shown
from kubetwin.api.loader import Manifest

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


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
    return out + fields.namespace(m)

"""What Kueue's job webhook refuses in a queued Job's or JobSet's pod-template TAS annotations
(pkg/controller/jobframework/tas_validation.go ValidateTASPodSetRequest, in its words: kueue.tas.request), and a
notice for what the twin's TAS does not model yet (multi-layer slice constraints)."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.kueue.tas import request

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_NOT_MODELLED = {
    "kueue.x-k8s.io/podset-slice-required-topology-constraints": "the slice topology and size annotations are "
                                                                 "read, the additional layers are not",
}


def _templates(m: Manifest) -> list[tuple[str, dict]]:
    spec = m.obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if m.kind == "Job":
        tmpl = spec.get("template")
        return [("spec.template.metadata", tmpl)] if isinstance(tmpl, dict) else []
    out = []
    for i, rj in enumerate(spec.get("replicatedJobs") or []):
        tmpl = ((rj or {}).get("template") or {}).get("spec", {}).get("template") if isinstance(rj, dict) else None
        if isinstance(tmpl, dict):
            out.append((f"spec.replicatedJobs[{i}].template.spec.template.metadata", tmpl))
    return out


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """Errors for a queued job's TAS annotations that Kueue's webhook refuses; notices for those not modelled."""
    labels = (m.obj.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, dict) or QUEUE_LABEL not in labels:
        return []
    out: list[Diagnostic] = []
    for path, tmpl in _templates(m):
        annotations = (tmpl.get("metadata") or {}).get("annotations") or {}
        if not isinstance(annotations, dict):
            continue
        for field, message in request.validation_errors(annotations, path):
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field, message,
                                  "keep one of required / preferred / unconstrained, and a slice size with a "
                                  "slice topology (docs/kueue-tas.md)"))
        for key, what in _NOT_MODELLED.items():
            if key in annotations:
                field = f"{path}.annotations[{key}]"
                out.append(Diagnostic(m.file, m.line_of(f"{path}.annotations"), m.ref, field,
                                      f"{key} is accepted but not modelled: {what}", "", "notice"))
    return out

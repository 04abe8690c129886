"""JobSet: its replicated Jobs' pod templates as the Jobs' pods get them from the API server, then the Job
policies of each template (validation.jobs), once the CRD's schema and CEL rules pass."""

from __future__ import annotations

from kubetwin.api import fields
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation import jobs, kueue_tas
from kubetwin.validation.kinds.base import KindChecks


def pod_templates(m: Manifest) -> list[Diagnostic]:
    """The pod templates of a JobSet's replicated Jobs: container names and resources, as the Job's pods get
    them from the API server."""
    out: list[Diagnostic] = []
    rjs = fields.get_path(m.obj, "spec.replicatedJobs")
    for i, rj in enumerate(rjs if isinstance(rjs, list) else []):
        replicas = fields.get_path(rj, "replicas") if isinstance(rj, dict) else None
        replicas = replicas if isinstance(replicas, int) and replicas > 0 else 1
        if isinstance(rj, dict) and isinstance(rj.get("template"), dict):
            out += fields.pod_counts(m, rj["template"], f"spec.replicatedJobs[{i}].template.", replicas)
        spec = fields.get_path(rj, "template.spec.template.spec")
        if isinstance(spec, dict):
            out += fields.containers(m, f"spec.replicatedJobs[{i}].template.spec.template.spec", spec)
    return out


CHECKS = KindChecks("jobset.x-k8s.io", "JobSet", checks=(pod_templates, jobs.diagnostics, kueue_tas.diagnostics))

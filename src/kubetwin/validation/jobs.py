"""Job fields the twin's Job controller (controllers/job.py) does not model: a notice each, naming what the run
does instead, on a Job and on each JobSet job template (a JobSet's child Jobs run on the same controller).

Why: a Job's `activeDeadlineSeconds` or `podFailurePolicy` changes when a real Job ends; a run that silently
ignores it answers a different question. The words follow the batch/v1 API reference for each field."""

from __future__ import annotations

from typing import Any

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest

# field -> what the twin's run does instead
IGNORED: dict[str, str] = {
    "backoffLimitPerIndex": "the twin does not count failures per index (backoffLimitPerIndex, maxFailedIndexes): "
                            "failed pods count against backoffLimit for the whole Job (MaxInt32 by default when "
                            "backoffLimitPerIndex is set, so a failing index is retried without end)",
    "maxFailedIndexes": "the twin does not count failed indexes: the Job fails only by backoffLimit",
    "podFailurePolicy": "the twin ignores podFailurePolicy: every failed pod counts against backoffLimit (no FailJob, "
                        "Ignore or FailIndex action)",
    "successPolicy": "the twin ignores successPolicy: the Job completes when its completions have succeeded",
    "activeDeadlineSeconds": "the twin does not enforce activeDeadlineSeconds: the Job is never failed with "
                             "DeadlineExceeded, its pods run until they end",
    "ttlSecondsAfterFinished": "the twin does not run the TTL-after-finished controller: a finished Job and its pods "
                               "stay until the end of the run",
}


def _notices(m: Manifest, spec: Any, prefix: str) -> list[Diagnostic]:
    if not isinstance(spec, dict):
        return []
    return [Diagnostic(m.file, m.line_of(f"{prefix}.{field}"), m.ref, f"{prefix}.{field}",
                       f"{field} is not simulated: {IGNORED[field]}",
                       f"remove {field}, or read the run knowing this", "notice")
            for field in IGNORED if spec.get(field) is not None]


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """Notices for a Job's, or each JobSet job template's, fields the Job controller does not model."""
    spec = m.obj.get("spec")
    if m.kind == "Job":
        return _notices(m, spec, "spec")
    if m.kind == "JobSet" and isinstance(spec, dict):
        out: list[Diagnostic] = []
        for i, rj in enumerate(spec.get("replicatedJobs") or []):
            tmpl = (rj or {}).get("template") if isinstance(rj, dict) else None
            out += _notices(m, (tmpl or {}).get("spec") if isinstance(tmpl, dict) else None,
                            f"spec.replicatedJobs[{i}].template.spec")
        return out
    return []

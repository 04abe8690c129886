"""Job: the API server's batch validation of its failure and success policies (validation.jobs)."""

from __future__ import annotations

from kubetwin.validation import jobs, kueue_tas
from kubetwin.validation.kinds.base import KindChecks

CHECKS = KindChecks("batch", "Job", checks=(jobs.diagnostics, kueue_tas.diagnostics))

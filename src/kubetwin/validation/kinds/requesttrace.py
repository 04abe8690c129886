"""The twin's RequestTrace: the trace file it names (validation.serving)."""

from __future__ import annotations

from kubetwin.api.kinds import TWIN_GROUP
from kubetwin.validation import serving
from kubetwin.validation.kinds.base import KindChecks

CHECKS = KindChecks(TWIN_GROUP, "RequestTrace", checks=(serving.request_trace_file,))

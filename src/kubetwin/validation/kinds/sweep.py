"""The twin's Sweep (`kubetwin sweep`'s input): its base manifests and each case's patches (validation.sweep)."""

from __future__ import annotations

from kubetwin.api.kinds import TWIN_GROUP
from kubetwin.validation import sweep
from kubetwin.validation.kinds.base import KindChecks

CHECKS = KindChecks(TWIN_GROUP, "Sweep", checks=(sweep.diagnostics,))

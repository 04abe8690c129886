"""The twin's NodePool: the catalog, zones, TPU, DRA, MIG and network checks (validation.nodepool)."""

from __future__ import annotations

from kubetwin.api.kinds import TWIN_GROUP
from kubetwin.validation import nodepool
from kubetwin.validation.kinds.base import KindChecks

CHECKS = KindChecks(TWIN_GROUP, "NodePool", checks=(nodepool.diagnostics,))

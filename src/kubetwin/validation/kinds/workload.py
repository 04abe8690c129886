"""Kueue's Workload written in a manifest (no CRD shipped, api/crds/README.md): its name, then queued as Kueue
queues a bare Workload (kueue.controller.perfrunner)."""

from __future__ import annotations

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation import objectmeta
from kubetwin.validation.kinds.base import KindChecks


def bare_workload(m: Manifest) -> list[Diagnostic] | None:
    """A served version (api.kinds.WORKLOAD); another version gets the generic answer."""
    version = str(m.obj.get("apiVersion") or "").partition("/")[2]
    if version not in kinds.WORKLOAD.versions:
        return None
    from kubetwin.kueue.controller import perfrunner  # imported only when a Workload is validated

    return objectmeta.diagnostics(m) or perfrunner.diagnostics(m)


CHECKS = KindChecks(kinds.WORKLOAD.group, kinds.WORKLOAD.kind, first=bare_workload)

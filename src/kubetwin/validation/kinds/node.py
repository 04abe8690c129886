"""Node: the GKE annotation a Node's VM end is read from (flex-start and --max-run-duration VMs)."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.k8s.names import MACHINE_TERMINATION
from kubetwin.k8s.units import parse_time
from kubetwin.validation.kinds.base import KindChecks


def termination(m: Manifest) -> list[Diagnostic]:
    """node.gke.io/machine-termination-datetime must be an RFC 3339 time: GKE's autoscaler logs one it cannot parse
    and skips the node (defrag/plugins/recycling), and the twin then neither ends the VM nor recycles it."""
    value = ((m.obj.get("metadata") or {}).get("annotations") or {}).get(MACHINE_TERMINATION)
    if value is None or parse_time(value) is not None:
        return []
    field = f"metadata.annotations[{MACHINE_TERMINATION}]"
    return [Diagnostic(m.file, m.line_of("metadata.annotations"), m.ref, field,
                       f"Invalid value: {value!r}: not an RFC 3339 time, so the node's VM is never ended at its max "
                       "run duration nor recycled before it (GKE's autoscaler skips such a node too)",
                       "write it as GKE does, e.g. 2026-01-08T12:00:00Z", "warning")]


CHECKS = KindChecks("", "Node", checks=(termination,))

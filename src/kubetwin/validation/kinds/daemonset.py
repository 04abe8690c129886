"""DaemonSet: GKE's NCCL plugin installers, read as installed rather than run."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation.kinds.base import KindChecks


def nccl_plugin(m: Manifest) -> list[Diagnostic]:
    """One of the GPUDirect prerequisites (workloads.gpudirect): a notice that says how the run reads it."""
    from kubetwin.workloads import gpudirect

    plugin = gpudirect.installs(m.obj)
    if not plugin:
        return []
    return [Diagnostic(m.file, m.line, m.ref, "", f"DaemonSet ({m.obj.get('apiVersion') or ''}) installs the "
                       f"{plugin} NCCL plugin: the twin reads it as installed on every node (one of the GPUDirect "
                       "prerequisites) and runs no pods for it", "", "notice")]


CHECKS = KindChecks("apps", "DaemonSet", when_clean=nccl_plugin)

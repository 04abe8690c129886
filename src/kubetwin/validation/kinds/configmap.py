"""ConfigMap: one whose indentation was lost (decoding), and Kueue's manager configuration held in one."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation.kinds.base import KindChecks

_FIELDS = ("apiVersion", "kind", "metadata", "data", "binaryData", "immutable")


def flattened(m: Manifest) -> list[Diagnostic] | None:
    """The seed's device-plugin ConfigMap lost its indentation: metadata/data fields ended up top-level."""
    stray = [k for k in m.obj if k not in _FIELDS]
    if not stray or m.obj.get("metadata"):
        return None
    return [Diagnostic(m.file, m.line, m.ref, "metadata",
                       f"Required value: metadata is empty and {', '.join(repr(s) for s in stray)} are top-level "
                       "keys: the indentation of this ConfigMap was lost",
                       "indent name/namespace under metadata:, and the device-plugin config under data.any: |- "
                       "(version: v1 / sharing: / timeSlicing: / resources: - name: nvidia.com/gpu, replicas: 4)")]


def kueue_manager_config(m: Manifest) -> list[Diagnostic]:
    """kueue-system/kueue-manager-config: the Configuration file it holds (kueue.config)."""
    from kubetwin.kueue import config as kueue_config  # imported only when a ConfigMap is validated

    return kueue_config.configmap_diagnostics(m)


CHECKS = KindChecks("", "ConfigMap", first=flattened, checks=(kueue_manager_config,))

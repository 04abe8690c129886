"""Kueue's manager Configuration (config.kueue.x-k8s.io), a file the manager reads rather than a stored object:
checked as Kueue's config loader checks it (kueue.config)."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation.kinds.base import KindChecks


def manager_config(m: Manifest) -> list[Diagnostic] | None:
    """The versions Kueue decodes; another version gets the generic answer."""
    from kubetwin.kueue import config as kueue_config  # imported only when a Configuration is validated

    return kueue_config.diagnostics(m) if m.obj.get("apiVersion") in kueue_config.API_VERSIONS else None


CHECKS = KindChecks("config.kueue.x-k8s.io", "Configuration", first=manager_config)

"""GKE Volume Populator's GCPDataSource (datalayer.gke.io/v1): checked by the twin itself, no CRD shipped."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.validation import objectmeta, volume
from kubetwin.validation.kinds.base import KindChecks

API_VERSION = "datalayer.gke.io/v1"


def data_source(m: Manifest) -> list[Diagnostic] | None:
    """Its fields (validation.volume), then its name; another version gets the generic answer."""
    if m.obj.get("apiVersion") != API_VERSION:
        return None
    return volume.gcp_data_source(m) + objectmeta.diagnostics(m)


CHECKS = KindChecks("datalayer.gke.io", "GCPDataSource", first=data_source)

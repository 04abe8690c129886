"""Volume checks: GKE Volume Populator's GCPDataSource (datalayer.gke.io/v1), which has no CRD file here."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.units import UnitError, parse_quantity


def gcp_data_source(m: Manifest) -> list[Diagnostic]:
    """GCPDataSource has no CRD file here: check the fields GKE's CRD reference lists (spec.cloudStorage.uri, a gs://
    URI, and serviceAccountName; https://cloud.google.com/kubernetes-engine/docs/reference/crds/gcpdatasource) and
    the twin's `kubetwin.io/data-size` annotation, the data the populator copies (the twin cannot list the bucket)."""
    out: list[Diagnostic] = []
    spec = m.obj.get("spec") or {}
    extra = sorted(set(spec) - {"cloudStorage"}) + [f"cloudStorage.{k}" for k in sorted(set(
        spec.get("cloudStorage") or {}) - {"uri", "serviceAccountName"})]
    for f in extra:
        out.append(Diagnostic(m.file, m.line_of(f"spec.{f}"), m.ref, f"spec.{f}",
                              f'strict decoding error: unknown field "spec.{f}"', "fields: cloudStorage.uri, "
                              "cloudStorage.serviceAccountName"))
    uri = str((spec.get("cloudStorage") or {}).get("uri") or "")
    if not uri.startswith("gs://"):
        out.append(Diagnostic(m.file, m.line_of("spec.cloudStorage.uri"), m.ref, "spec.cloudStorage.uri",
                              f"Invalid value: {uri!r}: must be a gs:// URI", "e.g. gs://my-bucket/my-data/"))
    size = ((m.obj.get("metadata") or {}).get("annotations") or {}).get("kubetwin.io/data-size")
    if size is None:
        out.append(Diagnostic(m.file, m.line, m.ref, "metadata.annotations[kubetwin.io/data-size]",
                              "the twin cannot list the bucket: without kubetwin.io/data-size the transfer copies 0 "
                              "bytes and the claim binds at once", "add kubetwin.io/data-size: 2Ti", "notice"))
    else:
        try:
            parse_quantity(str(size))
        except UnitError as exc:
            out.append(Diagnostic(m.file, m.line, m.ref, "metadata.annotations[kubetwin.io/data-size]",
                                  f"Invalid value: {size!r}: {exc}", "a quantity, e.g. 2Ti or 500Gi"))
    return out

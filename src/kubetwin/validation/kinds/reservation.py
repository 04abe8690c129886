"""The twin's Reservation (a Compute Engine reservation, autoscaler/reservations.py): its machine type must exist
and be offered in its zone, its GPUs must be the machine type's, and a DENSE layout only for the machine types
Compute Engine deploys densely."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
from kubetwin.api.kinds import TWIN_GROUP
from kubetwin.api.loader import Manifest
from kubetwin.validation.kinds.base import KindChecks


def diagnostics(m: Manifest) -> list[Diagnostic]:
    """Compute Engine refuses a reservation of a machine type the zone does not offer, or with GPUs the machine
    type does not come with (its instanceProperties describe a VM it could create)."""
    from kubetwin import catalog
    from kubetwin.autoscaler import reservations

    spec = m.obj["spec"]
    props = spec["specificReservation"]["instanceProperties"]
    field = "spec.specificReservation.instanceProperties.machineType"
    try:
        mt = catalog.machine_type(props["machineType"])
    except catalog.CatalogError as exc:
        return [Diagnostic(m.file, m.line_of(field), m.ref, field, str(exc),
                           "use a machine type from the catalog (kubetwin.catalog.machine_types())")]
    out = []
    zone = spec.get("zone") or "us-central1-a"
    offered = catalog.zones_offering(mt.name)
    if offered is not None and zone not in offered[0]:
        out.append(Diagnostic(m.file, m.line_of("spec.zone"), m.ref, "spec.zone", f'Invalid value: "{zone}": zone '
                              f"{zone} does not offer machine type {mt.name} (source: {offered[1]})",
                              f"use a zone that offers {mt.name}: {', '.join(offered[0])}"))
    given = reservations.gpus_of(mt.name, list(props.get("guestAccelerators") or []), "acceleratorType",
                                 "acceleratorCount")
    own = reservations.gpus_of(mt.name, [], "", "")
    if props.get("guestAccelerators") and own and given != own:
        f = "spec.specificReservation.instanceProperties.guestAccelerators"
        out.append(Diagnostic(m.file, m.line_of(f), m.ref, f, f"Invalid value: {given}: machine type {mt.name} comes "
                              f"with {own}", "list the machine type's own GPUs, or none"))
    if spec.get("deploymentType") == "DENSE" and mt.name not in reservations.DENSE_FAMILIES:
        dense = ", ".join(reservations.DENSE_FAMILIES)
        out.append(Diagnostic(m.file, m.line_of("spec.deploymentType"), m.ref, "spec.deploymentType",
                              f"deploymentType DENSE: the twin lays out blocks only for {dense}; {mt.name}'s VMs "
                              "get no topology labels",
                              "remove deploymentType, or reserve one of those machine types", "notice"))
    return out


CHECKS = KindChecks(TWIN_GROUP, "Reservation", checks=(diagnostics,))

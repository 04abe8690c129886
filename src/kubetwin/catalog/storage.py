"""Storage facts controllers below the runtime models need: Hyperdisk ML's provisioned throughput (the GKE Volume
Populator fills a Hyperdisk ML volume at that rate; workloads.storage reads through it)."""

from __future__ import annotations

from kubetwin.api.units import parse_quantity
from kubetwin.catalog import MIB

# Hyperdisk ML: throughput is provisioned per volume, 400 MiB/s minimum, shared by every reader attached read-only
# (https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-ml via catalog_draft.yaml storage.hyperdisk_ml).
HDML_MIN_MIBPS = 400


def hdml_mibps(params: dict) -> float:
    """A Hyperdisk ML StorageClass's provisioned throughput (MiB/s), at least HDML_MIN_MIBPS."""
    tput = params.get("provisioned-throughput-on-create")
    return max(float(parse_quantity(str(tput))) / MIB if tput else HDML_MIN_MIBPS, HDML_MIN_MIBPS)

"""Kueue's ClusterQueue: what its validating webhook refuses beyond the CRD's schema and CEL rules
(kubernetes-sigs/kueue@3aab69f6d7398cf2732cdba87e0b273c782126a5 pkg/webhooks/clusterqueue_webhook.go:
ValidateCreate -> ValidateClusterQueue -> validateResourceGroups -> validateFlavorQuotas ->
validateResourceQuantity, apimachinery's IsNegativeErrorMsg)."""

from __future__ import annotations

from kubetwin.api import fields
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.k8s.units import UnitError, parse_quantity
from kubetwin.validation.kinds.base import KindChecks


def quotas(m: Manifest) -> list[Diagnostic]:
    """nominalQuota / borrowingLimit / lendingLimit must not be negative (validateResourceQuantity)."""
    out = []
    groups = fields.get_path(m.obj, "spec.resourceGroups")
    for g, group in enumerate(groups if isinstance(groups, list) else []):
        flavors = group.get("flavors") if isinstance(group, dict) else None
        for f, flavor in enumerate(flavors if isinstance(flavors, list) else []):
            items = flavor.get("resources") if isinstance(flavor, dict) else None
            for r, res in enumerate(items if isinstance(items, list) else []):
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    value = res.get(key) if isinstance(res, dict) else None
                    if value is None:
                        continue
                    try:
                        negative = parse_quantity(value) < 0
                    except UnitError:
                        continue  # the CRD's quantity pattern reports it
                    if negative:
                        path = f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}].{key}"
                        out.append(Diagnostic(m.file, m.line_of(path), m.ref, path,
                                              f'Invalid value: "{value}": {fields.NEGATIVE_MSG}',
                                              f"set {key} to 0 or more"))
    return out


CHECKS = KindChecks("kueue.x-k8s.io", "ClusterQueue", checks=(quotas,))

"""Owner references as k8s.io/apimachinery's pkg/apis/meta/v1/controller_ref.go builds and reads them
(kubernetes/apimachinery@eed236ce): every controller that creates objects owns them this way, and every reader that
asks "whose is this?" asks the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def owner_ref(owner: Mapping[str, Any]) -> dict[str, Any]:
    """NewControllerRef: the ownerReference a controller sets on what it creates (controller and
    blockOwnerDeletion true)."""
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def controller_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """GetControllerOf: the (kind, name) of the ownerReference with controller true, None when there is none."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref["kind"], ref["name"]
    return None

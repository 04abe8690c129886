"""A pod's scheduling gates (spec.schedulingGates), as Kubernetes' component-helpers and Kueue's utilpod handle them:
one implementation for every controller that gates or ungates pods (Kueue's admission gate, its TAS topology gate).
Specs are dicts; each function returns a new spec and leaves the one it was given as it was."""

from __future__ import annotations

from typing import Any

__all__ = ["gate", "has_gate", "ungate"]

Spec = dict[str, Any]


def has_gate(spec: Spec, name: str) -> bool:
    """utilpod.HasGate."""
    return any(g.get("name") == name for g in spec.get("schedulingGates") or ())


def gate(spec: Spec, name: str) -> Spec:
    """utilpod.Gate: the gate appended unless it is there already."""
    if has_gate(spec, name):
        return spec
    return {**spec, "schedulingGates": [*(spec.get("schedulingGates") or []), {"name": name}]}


def ungate(spec: Spec, name: str) -> Spec:
    """utilpod.Ungate: the gate removed, and schedulingGates dropped when it was the last (the API server prints
    none rather than an empty list)."""
    out = dict(spec)
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != name]
    if gates:
        out["schedulingGates"] = gates
    else:
        out.pop("schedulingGates", None)
    return out

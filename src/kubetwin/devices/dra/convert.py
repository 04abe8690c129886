"""resource.k8s.io v1beta1 / v1beta2 to v1, as the API server converts to its storage version, plus v1
defaulting (allocationMode ExactCount, count 1).

v1beta1 keeps a request's fields on the request (`requests[].deviceClassName/count/...`) where v1 nests them
under `exactly`, and wraps each device's data in `basic:`; v1beta2 already has the v1 shape
(k8s.io/api resource/v1beta1, v1beta2, v1 types.go).
"""

from __future__ import annotations

import copy

from kubetwin.store.store import Obj

GROUP = "resource.k8s.io"
V1 = f"{GROUP}/v1"
LEGACY = (f"{GROUP}/v1beta1", f"{GROUP}/v1beta2")
KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
                 "capacity")


def _request_v1beta1(req: dict) -> dict:
    if "exactly" in req:
        return req
    out = {"name": req["name"]}
    if req.get("firstAvailable"):
        out["firstAvailable"] = req["firstAvailable"]
        return out
    out["exactly"] = {f: req[f] for f in _EXACT_FIELDS if f in req}
    return out


def _default_exact(exact: dict) -> None:
    exact.setdefault("allocationMode", "ExactCount")
    if exact["allocationMode"] == "ExactCount":
        exact.setdefault("count", 1)


def _claim_spec(spec: dict, v1beta1: bool) -> None:
    devices = spec.get("devices") or {}
    reqs = devices.get("requests") or []
    if v1beta1:
        reqs = [_request_v1beta1(r) for r in reqs]
    for r in reqs:
        if "exactly" in r:
            _default_exact(r["exactly"])
        for sub in r.get("firstAvailable") or []:
            _default_exact(sub)
    if devices:
        devices["requests"] = reqs


def to_v1(obj: Obj) -> Obj:
    """The v1 form of a DRA object (other objects are returned unchanged)."""
    if obj.get("kind") not in KINDS or not str(obj.get("apiVersion", "")).startswith(GROUP + "/"):
        return obj
    v1beta1 = obj["apiVersion"] == f"{GROUP}/v1beta1"
    if obj["apiVersion"] == V1 and obj["kind"] in ("DeviceClass", "ResourceSlice"):
        return obj  # nothing to convert or default
    out = copy.deepcopy(obj)
    out["apiVersion"] = V1
    spec = out.get("spec") or {}
    if obj["kind"] == "ResourceClaim":
        _claim_spec(spec, v1beta1)
    elif obj["kind"] == "ResourceClaimTemplate":
        _claim_spec(spec.get("spec") or {}, v1beta1)
    elif obj["kind"] == "ResourceSlice" and v1beta1:
        spec["devices"] = [{"name": d["name"], **(d.get("basic") or {})} if "basic" in d else d
                           for d in spec.get("devices") or []]
    return out

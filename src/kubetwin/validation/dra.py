"""What the API server and the scheduler would say about DRA objects, said before the run.

- resource.k8s.io/v1beta1 and v1beta2 are not served by default on Kubernetes 1.34; the twin accepts them as a
  cluster with --runtime-config would and stores them as v1.
- CEL selectors are compiled as the API server does at create time (a compile error rejects the object).
- A DeviceClass selector that compiles but fails at run time on every device the NVIDIA DRA driver publishes
  (the seed's `device.attributes["memory"].quantity >= "40Gi"`) is reported with the runtime error the
  scheduler would hit and an expression that does what its author meant, checked against the same devices.
"""

from __future__ import annotations

import re

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.cel import CelError, DeviceView, compile_selector
from kubetwin.devices.dra import convert, nvidia
from kubetwin.k8s.units import parse_quantity

_COMPARE = re.compile(r'device\.(attributes|capacity)\[\s*"([^"]+)"\s*\](?:\.([A-Za-z_]\w*))?(?:\.quantity)?'
                      r'\s*(>=|>|<=|<|==|!=)\s*(?:quantity\()?"([^"]+)"\)?')
_DRIVER = re.compile(r'device\.driver\s*==\s*["\']([^"\']+)["\']')


def diagnostics(m: Manifest) -> list[Diagnostic]:
    api, kind = str(m.obj.get("apiVersion", "")), m.kind
    if kind not in convert.KINDS:
        return []
    out: list[Diagnostic] = []
    if api in convert.LEGACY:
        out.append(Diagnostic(m.file, m.line_of("apiVersion"), m.ref, "apiVersion",
                              f"{api} {kind} is not served by default on Kubernetes 1.34 (it needs "
                              f"--runtime-config={api}=true); the twin stores it as resource.k8s.io/v1, as the API "
                              "server does", "use resource.k8s.io/v1" + _shape_hint(m), "notice"))
    for field, expr in _selectors(m):
        try:
            compile_selector(expr)
        except CelError as exc:
            out.append(Diagnostic(m.file, m.line_of(field), m.ref, field,
                                  f"Invalid value: {expr!r}: {exc.message}", _cel_hint(expr)))
            continue
        if kind == "DeviceClass":
            out += _never_matches(m, field, expr)
    return out


def _shape_hint(m: Manifest) -> str:
    if m.kind in ("ResourceClaim", "ResourceClaimTemplate") and m.obj.get("apiVersion", "").endswith("v1beta1"):
        return ", and move each request's deviceClassName/count/selectors/allocationMode/adminAccess under " \
               "requests[].exactly (v1 shape)"
    return ""


def _selectors(m: Manifest) -> list[tuple[str, str]]:
    spec = m.obj.get("spec") or {}
    base = "spec"
    if m.kind == "ResourceClaimTemplate":
        spec, base = spec.get("spec") or {}, "spec.spec"
    out = []
    if m.kind == "ResourceSlice":  # spec.devices is the published devices' list: no selectors
        return []
    if m.kind == "DeviceClass":
        for i, sel in enumerate(spec.get("selectors") or []):
            out.append((f"spec.selectors[{i}].cel.expression", (sel.get("cel") or {}).get("expression", "")))
        return [(f, e) for f, e in out if e]
    for i, req in enumerate(((spec.get("devices") or {}).get("requests")) or []):
        holders = [("exactly", req.get("exactly"))] if "exactly" in req else [("", req)]
        holders += [(f"firstAvailable[{j}]", sub) for j, sub in enumerate(req.get("firstAvailable") or [])]
        for prefix, holder in holders:
            for k, sel in enumerate((holder or {}).get("selectors") or []):
                path = f"{base}.devices.requests[{i}]" + (f".{prefix}" if prefix else "")
                out.append((f"{path}.selectors[{k}].cel.expression", (sel.get("cel") or {}).get("expression", "")))
    return [(f, e) for f, e in out if e]


def _cel_hint(expr: str) -> str:
    fixed = corrected(expr)
    if fixed != expr:
        return f"write: {fixed}"
    return "device.capacity values are Quantities: compare with .compareTo(quantity(\"40Gi\")) >= 0"


def catalog_devices() -> list[tuple[str, DeviceView]]:
    """One device of each GPU model the NVIDIA DRA driver twin can publish."""
    out = []
    for accel in nvidia.catalog()["gpus"]:
        for dev in nvidia.devices("validate", accel, 1):
            out.append((accel, DeviceView.of(nvidia.DRIVER, dev)))
    return out


def _evaluate(expr: str) -> tuple[list[str], list[str], set[str]]:
    """(models matched, models where it errors, the runtime errors) over the catalog's devices."""
    sel = compile_selector(expr)
    matched, failed, errors = [], [], set()
    for accel, view in catalog_devices():
        try:
            if sel.matches(view):
                matched.append(accel)
        except CelError as exc:
            failed.append(accel)
            errors.add(exc.message)
    return matched, failed, errors


def _never_matches(m: Manifest, field: str, expr: str) -> list[Diagnostic]:
    matched, failed, errors = _evaluate(expr)
    if matched or not failed:
        return []
    name = m.obj.get("metadata", {}).get("name", "")
    index = re.search(r"selectors\[(\d+)\]", field)
    err = sorted(errors)[0]
    why = _why(expr)
    msg = (f"compiles, but fails on every device the NVIDIA DRA driver ({nvidia.DRIVER}) publishes: scheduling a "
           f"claim of this class fails with \"class {name}: selector #{index.group(1) if index else 0}: CEL runtime "
           f"error: {err}\"" + (f" ({why})" if why else ""))
    fixed = corrected(expr)
    hint = ""
    if fixed != expr:
        ok, bad, _ = _evaluate(fixed)
        if not bad:
            hint = f"write: {fixed}   (matches {', '.join(ok) or 'no catalog GPU'}" + _excluded(fixed, ok) + ")"
    return [Diagnostic(m.file, m.line_of(field), m.ref, field, msg, hint, "warning")]


def _why(expr: str) -> str:
    reasons = []
    for kind, key, ident, _, _ in _COMPARE.findall(expr):
        name = ident if "." in key and ident else key
        if "." not in key:
            reasons.append(f'device.{kind}["{key}"] looks up the domain "{key}", which no driver publishes (an '
                           "empty map); attributes and capacities are grouped by driver domain, e.g. "
                           f'device.{kind}["{nvidia.DRIVER}"]')
        if kind == "attributes" and name in _capacities():
            reasons.append(f"the driver publishes {name} as a capacity (device.capacity), not an attribute")
    if ".quantity" in expr:
        reasons.append("a device value has no .quantity field")
    if re.search(r'(>=|<=|>|<)\s*"', expr):
        reasons.append('capacities are Quantities: compare with .compareTo(quantity("40Gi")), not with >= on a '
                       "string")
    return "; ".join(dict.fromkeys(reasons))


def _capacities() -> set[str]:
    caps: set[str] = set()
    for _, view in catalog_devices():
        for ids in view.capacity.values():
            caps.update(ids)
    return caps


def corrected(expr: str) -> str:
    """Rewrite comparisons of capacities into Quantity comparisons in the driver's domain."""
    drv = _DRIVER.search(expr)
    driver = drv.group(1) if drv else nvidia.DRIVER
    caps = _capacities()

    def fix(mt: re.Match) -> str:
        kind, key, ident, op, value = mt.groups()
        name = ident if "." in key and ident else key
        if name not in caps:
            return mt.group(0)
        return f'device.capacity["{driver}"].{name}.compareTo(quantity("{value}")) {op} 0'

    out = _COMPARE.sub(fix, expr)
    if out != expr and driver == nvidia.DRIVER and ".type" not in out and drv:
        # The driver publishes MIG devices too, and they have memory as well: name the full-GPU type.
        out = out.replace(drv.group(0), f'{drv.group(0)} && device.attributes["{driver}"].type == "gpu"', 1)
    return out


def _excluded(expr: str, matched: list[str]) -> str:
    """Name the models a memory threshold misses by under 5 %: NVML reports less than the nominal size."""
    m = re.search(r'memory\.compareTo\(quantity\("([^"]+)"\)\)\s*>', expr)
    if not m:
        return ""
    want = float(parse_quantity(m.group(1))) / 2**20
    near = [(a, g["memory_mib"]) for a, g in nvidia.catalog()["gpus"].items()
            if a not in matched and 0.95 * want <= g["memory_mib"] < want]
    if not near:
        return ""
    return "; not " + ", ".join(f"{a} ({mib}Mi < {m.group(1)})" for a, mib in near) + \
        ": GPUs report slightly less than their nominal memory"

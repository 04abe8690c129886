"""Change objects checked against what they will write to (kubetwin.changes; issue 36 item 2).

What the API server would refuse at the Change's time, validate refuses first: a target kind the cluster does not
serve, a strategic merge patch of a custom resource (415), a JSON patch operation that is not RFC 6902's, and,
when the target is one of the manifests, a patch that does not apply to it or makes it invalid (the patched object
is validated as the object itself is). A target that is not among the manifests and that no controller of the twin
creates gets a notice: at its time the Change will find nothing and fail.
"""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.api import kinds
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest
from kubetwin.api.patch import UNSUPPORTED_STRATEGIC, PatchError, apply_patch

__all__ = ["diagnostics"]

_OPS = {"add": ("path", "value"), "remove": ("path",), "replace": ("path", "value"), "move": ("from", "path"),
        "copy": ("from", "path"), "test": ("path", "value")}
# Kinds whose objects the twin's controllers make during a run (a Change may name one that is not in the manifests).
_MADE_BY_THE_RUN = frozenset({"Node", "Pod", "Event", "ReplicaSet", "Workload", "Job", "ResourceClaim",
                              "ResourceSlice", "PersistentVolume", "ProvisioningRequest"})


def diagnostics(clean: list[Manifest], validate_one: Callable[[Manifest], list[Diagnostic]]) -> list[Diagnostic]:
    """Each Change against its target (`clean`: the objects without errors of their own; `validate_one`: the
    checks an object gets, for the patched target)."""
    objects = {(m.kind, _ns(m.obj.get("kind"), (m.obj.get("metadata") or {}).get("namespace")),
                (m.obj.get("metadata") or {}).get("name")): m for m in clean}
    out: list[Diagnostic] = []
    for m in clean:
        if m.kind == "Change" and str(m.obj.get("apiVersion")) == "kubetwin.io/v1alpha1":
            out += _change(m, objects, validate_one)
    return out


def _ns(kind: object, namespace: object) -> str:
    if kinds.REGISTRY.is_cluster_scoped(str(kind)):
        return ""
    return str(namespace or "default")


def _change(m: Manifest, objects: dict[tuple[str, str, object], Manifest],
            validate_one: Callable[[Manifest], list[Diagnostic]]) -> list[Diagnostic]:
    spec = m.obj["spec"]
    t = spec["target"]
    info = kinds.REGISTRY.of(t["apiVersion"], t["kind"])
    if info is None:
        return [Diagnostic(m.file, m.line_of("spec.target"), m.ref, "spec.target",
                           f'no matches for kind "{t["kind"]}" in version "{t["apiVersion"]}"',
                           "check apiVersion/kind against `kubectl api-resources`")]
    patch_type = spec.get("patchType", "strategic")
    if spec.get("patch") is not None:
        group = t["apiVersion"].rpartition("/")[0]
        if patch_type == "strategic" and kinds.REGISTRY.is_custom(group, t["kind"]):
            return [Diagnostic(m.file, m.line_of("spec.patchType"), m.ref, "spec.patchType",
                               UNSUPPORTED_STRATEGIC,
                               f"{t['kind']} is a custom resource: strategic merge patch needs a Go struct; use "
                               "patchType: merge (or json)")]
        if patch_type == "json":
            for i, op in enumerate(spec["patch"]):
                bad = _bad_op(op)
                if bad:
                    return [Diagnostic(m.file, m.line_of(f"spec.patch[{i}]"), m.ref, f"spec.patch[{i}]", bad,
                                       "an operation is {op: add|remove|replace|move|copy|test, path: /a/b, ...}")]
    target = objects.get((t["kind"], _ns(t["kind"], t.get("namespace")), t["name"]))
    if target is None:
        if t["kind"] in _MADE_BY_THE_RUN:
            return []
        return [Diagnostic(m.file, m.line_of("spec.target"), m.ref, "spec.target",
                           f"{t['kind']} {t.get('namespace') + '/' if t.get('namespace') else ''}{t['name']} is not "
                           f"in the manifests and the twin creates no {t['kind']}: at {spec['at']} the change will "
                           "find nothing and fail", "", "notice")]
    if t["kind"] == "NodePool":
        pool = _resizable(m, target)
        if pool:
            return pool
    if spec.get("patch") is None:
        return []
    try:
        patched = apply_patch(target.obj, spec["patch"], patch_type,
                              custom=kinds.REGISTRY.is_custom(t["apiVersion"].rpartition("/")[0], t["kind"]))
    except PatchError as e:
        return [Diagnostic(m.file, m.line_of("spec.patch"), m.ref, "spec.patch", str(e),
                           f"the patch must apply to {target.ref} ({target.file}:{target.line})")]
    if t["kind"] == "NodePool" and _without_count(patched) != _without_count(target.obj):
        return [Diagnostic(m.file, m.line_of("spec.patch"), m.ref, "spec.patch", f"the twin changes only "
                           f"spec.nodeCount of a running NodePool (a resize); the rest of this patch of {target.ref} "
                           "would be ignored", "patch spec.nodeCount alone, or give the pool its final spec")]
    found = [d for d in validate_one(Manifest(patched, target.file, target.line)) if d.severity == "error"]
    return [Diagnostic(m.file, m.line_of("spec.patch"), m.ref, "spec.patch",
                       f"the patched {target.ref} would be invalid: {d.field}: {d.message}", d.hint) for d in found]


def _bad_op(op: object) -> str | None:
    """What is wrong with one RFC 6902 operation, or None."""
    if not isinstance(op, dict) or op.get("op") not in _OPS:
        return f"Unrecognized op {op.get('op') if isinstance(op, dict) else op!r}: RFC 6902 has " + \
            ", ".join(_OPS)
    missing = [k for k in _OPS[str(op["op"])] if k not in op]
    if missing:
        return f"operation {op['op']!r} needs {', '.join(repr(k) for k in missing)}"
    for k in ("path", "from"):
        if k in op and (not isinstance(op[k], str) or (op[k] and not op[k].startswith("/"))):
            return f"{k} {op[k]!r} is not a JSON pointer (RFC 6901: empty, or starting with /)"
    return None


def _without_count(pool: dict) -> dict:
    return {**pool, "spec": {k: v for k, v in (pool.get("spec") or {}).items() if k != "nodeCount"}}


def _resizable(m: Manifest, target: Manifest) -> list[Diagnostic]:
    """A NodePool the twin can resize: no autoscaling (the cluster autoscaler owns its size) and not a multi-host
    TPU slice (it resizes by whole slices)."""
    from kubetwin import catalog
    from kubetwin.devices import tpu

    pool = target.obj.get("spec") or {}
    topology = tpu.pool_topology(pool)
    slice_pool = topology is not None and tpu.is_multi_host(catalog.machine_type(pool["machineType"]).name, topology)
    why = ("it autoscales: the cluster autoscaler owns its size" if pool.get("autoscaling") else
           "it is a multi-host TPU slice: it resizes by whole slices" if slice_pool else "")
    if not why:
        return []
    return [Diagnostic(m.file, m.line_of("spec.target"), m.ref, "spec.target", f"the twin does not resize "
                       f"{target.ref}: {why}", "change a pool without autoscaling, or its min/max in its manifest")]

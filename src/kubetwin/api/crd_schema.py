"""Structural-schema checks of custom resources, in the order and words of an API server handling a create.

Why a walker of our own rather than jsonschema: a CRD's openAPIV3Schema is a *structural* schema with Kubernetes
extensions (x-kubernetes-int-or-string, -list-type, -preserve-unknown-fields) and the API server reports its
findings as field errors with kube-openapi's texts, which users then search for. Sources:
- unknown fields: k8s.io/apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go (strict field
  validation turns each pruned path into `unknown field "<path>"`);
- defaults: pkg/apiserver/schema/defaulting/algorithm.go (`Default`) and prunenulls.go (non-nullable nulls);
- schema errors: pkg/apiserver/validation/validation.go (`kubeOpenAPIResultToFieldErrors`) over
  k8s.io/kube-openapi pkg/validation/errors/schema.go (message formats) and validate/type.go;
- list types: pkg/apiserver/schema/listtype/validation.go.
Paths are written as kube-openapi writes them: `spec.resourceGroups[0].flavors[1]`, map keys joined with a dot.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubetwin.api.limits import int_format_problem
from kubetwin.k8s.units import RFC3339

# metav1.ObjectMeta as a structural schema: CRD schemas leave the root `metadata` as a bare object because the
# API server decodes it into ObjectMeta itself (unknown metadata fields are strict errors there too).
_STR: dict = {"type": "string"}
_STRMAP: dict = {"type": "object", "additionalProperties": _STR}
_ANY_OBJ: dict = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
OBJECT_META: dict = {"type": "object", "properties": {
    "name": _STR, "generateName": _STR, "namespace": _STR, "selfLink": _STR, "uid": _STR, "resourceVersion": _STR,
    "generation": {"type": "integer"}, "creationTimestamp": _STR, "deletionTimestamp": _STR,
    "deletionGracePeriodSeconds": {"type": "integer"}, "labels": _STRMAP, "annotations": _STRMAP,
    "ownerReferences": {"type": "array", "items": _ANY_OBJ}, "finalizers": {"type": "array", "items": _STR},
    "managedFields": {"type": "array", "items": _ANY_OBJ}}}
# hasBlockingErr (apiextensions-apiserver pkg/registry/customresource/strategy.go): these stop CEL validation.
BLOCKING = frozenset({"type", "enum", "required", "too-long", "too-many"})
_DNS1123 = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_QUANTITY_PREFIX = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"  # resource.Quantity's pattern in CRDs


@dataclass(frozen=True)
class FieldError:
    """One finding: the field path, the API server's text after "<path>: ", a fix, and its class (`code`)."""

    path: str
    message: str
    hint: str = ""
    code: str = ""  # unknown, type, enum, required, too-long, too-many, invalid, duplicate, cel, ...
    loc: tuple = ()  # path segments (str keys, int indexes) for looking the field up in other versions

    @property
    def blocking(self) -> bool:
        return self.code in BLOCKING


def child(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def go_value(v: Any) -> str:
    """A bad value as field.Error.ErrorBody prints it (%q for strings, %v for scalars, %#v otherwise)."""
    if v is None:
        return '"null"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    return _go_sharp(v)


def _go_sharp(v: Any) -> str:
    if isinstance(v, dict):
        return "map[string]interface {}{" + ", ".join(f"{json.dumps(str(k))}:{_go_sharp(v[k])}"
                                                     for k in sorted(v, key=str)) + "}"
    if isinstance(v, list):
        return "[]interface {}{" + ", ".join(_go_sharp(x) for x in v) + "}"
    return "<nil>" if v is None else go_value(v)


def go_float(x: float) -> str:
    """Go's %v of a float64: shortest digits, exponent form below 1e-4 and from 1e+06 (strconv 'g', -1)."""
    if x != x or x in (float("inf"), float("-inf")):
        return "NaN" if x != x else ("+Inf" if x > 0 else "-Inf")
    if x == 0:
        return "0"
    sign, digits, exp = Decimal(repr(float(x))).normalize().as_tuple()
    ds = "".join(map(str, digits))
    e10 = len(ds) + int(exp) - 1
    neg = "-" if sign else ""
    if e10 < -4 or e10 >= 6:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    return neg + format(Decimal(repr(abs(float(x)))).normalize(), "f")


def json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null" if v is None else type(v).__name__


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def closest_field(key: str, names: list[str]) -> str | None:
    """The real field an unknown key most likely meant: the same name in another case, else difflib's closest
    (cutoff 0.6); None when nothing is close. Used for CRDs, core kinds and twin kinds alike."""
    lower = {n.lower(): n for n in names}
    if key.lower() in lower:
        return lower[key.lower()]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return close[0] if close else None


def _fields_hint(key: str, schema: dict, parent: str, map_of: str) -> str:
    """The closest real field name (difflib), or the fields allowed here, or the shape the parent must have."""
    props = schema.get("properties") or {}
    if not props and schema.get("type") not in (None, "object"):
        if map_of:
            return (f"{map_of} is a map of {schema['type']}s: write its entries directly under it "
                    f"({map_of}: {{key: value}}), not nested maps")
        article = "an" if schema["type"][0] in "aeiou" else "a"
        return (f"{parent} must be {article} {schema['type']}, not a map: check its shape and indentation for this "
                "apiVersion")
    names = sorted(props)
    close = closest_field(key, names)
    if close:
        return f"did you mean {child(parent, close)}? rename {key} to {close}, or remove it"
    if not names:
        return f"remove it: {parent or 'this object'} takes no fields"
    shown = ", ".join(names[:15]) + (", ..." if len(names) > 15 else "")
    return f"remove it, or check its spelling and indentation; fields of {parent or 'the object'}: {shown}"


def unknown_fields(value: Any, schema: dict, path: str = "", loc: tuple = (), out: list | None = None,
                   map_of: str = "") -> list:
    """Fields the API server would prune, i.e. strict field validation's `unknown field` errors (map_of: the
    path of the map whose additionalProperties schema this is)."""
    out = [] if out is None else out
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        keep = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or addl is True
        for k, v in value.items():
            sub = props.get(k)
            p = child(path, k)
            if sub is not None:
                unknown_fields(v, sub, p, (*loc, k), out)
            elif isinstance(addl, dict):
                unknown_fields(v, addl, p, (*loc, k), out, path)
            elif not keep:
                out.append(FieldError(p, f'strict decoding error: unknown field "{p}"',
                                      _fields_hint(str(k), schema, path, map_of), "unknown", (*loc, k)))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            unknown_fields(v, schema["items"], f"{path}[{i}]", (*loc, i), out)
    return out


def copy_json(v: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars), faster than copy.deepcopy."""
    if isinstance(v, dict):
        return {k: copy_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [copy_json(x) for x in v]
    return v


def default(value: Any, schema: dict) -> None:
    """Structural defaulting in place: defaults for absent (or non-nullable null) fields, then other non-nullable
    nulls dropped (PruneNonNullableNullsWithoutDefaults); defaults are themselves defaulted below."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        for k, sub in props.items():
            if "default" in sub and (value.get(k) is None and not (k in value and sub.get("nullable"))):
                value[k] = copy_json(sub["default"])
        for k in list(value):
            sub = props.get(k) or (addl if isinstance(addl, dict) else None)
            if sub is None:
                continue
            if value[k] is None and not sub.get("nullable"):
                del value[k]
            else:
                default(value[k], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        for i, v in enumerate(value):
            if v is None and not items.get("nullable") and "default" in items:
                value[i] = copy_json(items["default"])
            default(value[i], items)


def _type_hint(path: str, allowed: tuple, schema: dict) -> str:
    if allowed == ("integer", "string"):
        return (f'write {path} as an integer or a quoted quantity such as "0.5", "500m" or "2048Gi"'
                if schema.get("pattern")
                else f"write {path} as an integer or a string")
    article = "an" if allowed[0][0] in "aeiou" else "a"
    return f"write {path} as {article} {allowed[0]}" + (" (quote it)" if allowed[0] == "string" else "")


def validate(value: Any, schema: dict, path: str = "", out: list | None = None) -> list[FieldError]:
    """kube-openapi's schema validation of one (defaulted) value, as field errors."""
    out = [] if out is None else out
    ios = schema.get("x-kubernetes-int-or-string")
    t = schema.get("type")
    allowed: tuple = ("integer", "string") if ios else ((t,) if t else ())
    jt = json_type(value)
    if value is None:
        if allowed and not schema.get("nullable"):
            out.append(FieldError(path, f'Invalid value: "null": {path} in body must be of type {",".join(allowed)}: '
                                  '"null"', f"set {path} or remove it", "type"))
        return out
    int_like = jt == "number" and "integer" in allowed and float(value).is_integer()
    if allowed and jt not in allowed and not int_like and not (jt == "integer" and "number" in allowed):
        out.append(FieldError(path, f'Invalid value: "{jt}": {path} in body must be of type {",".join(allowed)}: '
                              f'"{jt}"', _type_hint(path, allowed, schema), "type"))
        return out
    enum = schema.get("enum")
    if enum is not None and not any(value == e and json_type(e) == jt for e in enum):
        vals = ", ".join(json.dumps(e if isinstance(e, str) else json.dumps(e)) for e in enum)
        out.append(FieldError(path, f"Unsupported value: {go_value(value)}: supported values: {vals}",
                              "use one of: " + ", ".join(str(e) for e in enum), "enum"))
    if jt == "string":
        _string(value, schema, path, out)
    elif jt in ("integer", "number"):
        _number(value, schema, path, out)
    elif jt == "array":
        _array(value, schema, path, out)
    elif jt == "object":
        _object(value, schema, path, out)
    return out


def _string(value: str, schema: dict, path: str, out: list) -> None:
    n = len(value)
    if "maxLength" in schema and n > schema["maxLength"]:
        out.append(FieldError(path, f"Too long: may not be more than {schema['maxLength']} bytes",
                              f"shorten it to at most {schema['maxLength']} characters", "too-long"))
    if "minLength" in schema and n < schema["minLength"]:
        out.append(FieldError(path, f"Invalid value: {go_value(value)}: {path} in body should be at least "
                              f"{schema['minLength']} chars long", f"set a value of at least {schema['minLength']} "
                              "characters", "invalid"))
    pattern = str(schema.get("pattern") or "")
    rx = _regex(pattern) if pattern else None
    if rx is not None and not rx.search(value):
        hint = ("use a lowercase RFC 1123 name: a-z, 0-9, '-' and '.', starting and ending with a-z or 0-9"
                if pattern == _DNS1123 else "write a Kubernetes quantity such as 16, 500m or 2048Gi"
                if pattern.startswith(_QUANTITY_PREFIX) else f"make it match {pattern}")
        out.append(FieldError(path, f"Invalid value: {go_value(value)}: {path} in body should match '{pattern}'",
                              hint, "invalid"))
    if schema.get("format") == "date-time" and not RFC3339.match(value):
        out.append(FieldError(path, f"Invalid value: {go_value(value)}: {path} in body must be of type date-time: "
                              f"{go_value(value)}", "write an RFC 3339 time such as 2026-01-02T15:04:05Z", "invalid"))


def _number(value: float, schema: dict, path: str, out: list) -> None:
    fmt = schema.get("format")
    if fmt in ("int32", "int64") and float(value).is_integer():
        problem = int_format_problem(int(value), fmt, go_value(value))
        if problem:
            out.append(FieldError(path, f"Invalid value: {go_value(value)}: {problem}",
                                  f"use a value that fits an {fmt}", "invalid"))
            return
    for key, excl, op, words, ok in (
            ("minimum", "exclusiveMinimum", ">", "greater than", lambda v, b, x: v > b or (not x and v == b)),
            ("maximum", "exclusiveMaximum", "<", "less than", lambda v, b, x: v < b or (not x and v == b))):
        if key not in schema:
            continue
        bound, exclusive = schema[key], bool(schema.get(excl))
        if not ok(value, bound, exclusive):
            rel = words if exclusive else f"{words} or equal to"
            plain = int(bound) if float(bound).is_integer() else bound
            out.append(FieldError(path, f"Invalid value: {go_value(value)}: {path} in body should be {rel} "
                                  f"{go_float(float(bound))}", f"use a value {op}{'' if exclusive else '='} {plain}",
                                  "invalid"))


def _array(value: list, schema: dict, path: str, out: list) -> None:
    n = len(value)
    if "maxItems" in schema and n > schema["maxItems"]:
        out.append(FieldError(path, f"Too many: {n}: must have at most {schema['maxItems']} items",
                              f"list at most {schema['maxItems']} items", "too-many"))
    if "minItems" in schema and n < schema["minItems"]:
        out.append(FieldError(path, f"Invalid value: {n}: {path} in body should have at least {schema['minItems']} "
                              "items", f"list at least {schema['minItems']} item(s)", "invalid"))
    items = schema.get("items")
    if isinstance(items, dict):
        for i, v in enumerate(value):
            validate(v, items, f"{path}[{i}]", out)
    _list_type(value, schema, path, out)


def _list_type(value: list, schema: dict, path: str, out: list) -> None:
    """x-kubernetes-list-type set (unique items) and map (unique x-kubernetes-list-map-keys)."""
    kind = schema.get("x-kubernetes-list-type")
    if kind not in ("set", "map"):
        return
    keys = schema.get("x-kubernetes-list-map-keys") or []
    seen: set[str] = set()
    for i, item in enumerate(value):
        if kind == "map":
            if not isinstance(item, dict):
                continue
            ident: Any = {k: item.get(k) for k in keys}
        else:
            ident = item
        token = json.dumps(ident, sort_keys=True, default=str)
        if token in seen:
            what = " and ".join(keys) if kind == "map" else "value"
            out.append(FieldError(f"{path}[{i}]", f"Duplicate value: {go_value(ident)}",
                                  f"remove the duplicate: each item of {path} needs a unique {what}", "duplicate"))
        seen.add(token)


def _object(value: dict, schema: dict, path: str, out: list) -> None:
    n = len(value)
    if "maxProperties" in schema and n > schema["maxProperties"]:
        out.append(FieldError(path, f"Too many: {n}: must have at most {schema['maxProperties']} items",
                              f"keep at most {schema['maxProperties']} entries", "too-many"))
    if "minProperties" in schema and n < schema["minProperties"]:
        out.append(FieldError(path, f"Invalid value: {n}: {path} in body should have at least "
                              f"{schema['minProperties']} properties", f"set at least {schema['minProperties']} "
                              "entries", "invalid"))
    for name in schema.get("required") or ():
        if name not in value:
            p = child(path, name)
            out.append(FieldError(p, "Required value", f"set {p}", "required"))
    props = schema.get("properties") or {}
    addl = schema.get("additionalProperties")
    for k, v in value.items():
        sub = props.get(k) or (addl if isinstance(addl, dict) else None)
        if sub is not None:
            validate(v, sub, child(path, k), out)

"""The twin kinds' validation errors in the API server's words, not pydantic's: "Unsupported value" with the
supported values, "must be greater than or equal to 0", "Required value", the shape an object field must have
("spec.target must be {kind: InferencePool|Service, name: NAME}"), and the closest real field name for an unknown
one, as the CRD checks give (api/crd_schema.py)."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel

from kubetwin.api.crd_schema import closest_field
from kubetwin.api.limits import shown


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, list, dict and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models(arg)
    return out


def model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model that holds the value at `loc` (list indices and dict keys skipped), or None."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        info = current.model_fields.get(str(part)) if isinstance(part, str) else None
        if info is None:
            continue  # a list index or dict key: stay on the element's model
        found = _models(info.annotation)
        current = found[0] if found else None
    return current


def _value_shape(annotation: Any, name: str) -> str:
    if typing.get_origin(annotation) is Literal:
        return "|".join(str(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _value_shape(args[0], name) if args else name.upper()
    return name.upper()


def shape(model: type[BaseModel]) -> str:
    """{kind: InferencePool|Service, name: NAME} (required fields; the optional ones after)."""
    required = [f"{n}: {_value_shape(f.annotation, n)}" for n, f in model.model_fields.items() if f.is_required()]
    optional = [n for n, f in model.model_fields.items() if not f.is_required()]
    text = "{" + ", ".join(required) + "}"
    return text + (f" (optional: {', '.join(optional)})" if optional else "")


def translate(model: type[BaseModel], e: Mapping[str, Any], field: str) -> tuple[str, str]:
    """(message, fix) for one pydantic error at `field`."""
    kind, ctx, value = e["type"], e.get("ctx") or {}, e.get("input")
    shown_value = shown(json.dumps(value, default=str))
    if kind == "extra_forbidden":
        parent = model_at(model, e["loc"][:-1])
        names = list(parent.model_fields) if parent else []
        key = str(e["loc"][-1])
        close = closest_field(key, names)
        fix = (f"did you mean {close}? rename {key} to {close}, or remove it" if close else
               f"remove it; the fields here are {', '.join(names)}" if names else "remove it")
        return f'strict decoding error: unknown field "{field}"', fix
    if kind == "missing":
        return "Required value", f"set {field}"
    if kind == "literal_error":
        expected = [x.strip().strip("'") for x in str(ctx.get("expected", "")).replace(" or ", ", ").split(",")]
        return (f"Unsupported value: {shown_value}: supported values: " + ", ".join(f'"{x}"' for x in expected),
                f"use one of {', '.join(expected)}")
    bounds = {"greater_than_equal": ("ge", "greater than or equal to"), "greater_than": ("gt", "greater than"),
              "less_than_equal": ("le", "less than or equal to"), "less_than": ("lt", "less than")}
    if kind in bounds:
        key, words = bounds[kind]
        return f"Invalid value: {shown_value}: must be {words} {ctx.get(key)}", ""
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        target = model_at(model, e["loc"])
        if target is not None:
            return f"Invalid value: {shown_value}: {field} must be {shape(target)}", f"write {field}: {shape(target)}"
        return f"Invalid value: {shown_value}: must be an object", ""
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"Invalid value: {shown_value}: must be an integer", "write a whole number"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"Invalid value: {shown_value}: must be a number", ""
    if kind in ("string_type",):
        return f"Invalid value: {shown_value}: must be a string", "quote it"
    if kind in ("bool_type", "bool_parsing"):
        return f"Invalid value: {shown_value}: must be true or false", ""
    if kind in ("list_type",):
        return f"Invalid value: {shown_value}: must be a list", ""
    return shown(str(e["msg"]).removeprefix("Value error, "), 300), ""

"""x-kubernetes-validations rules of CRDs, evaluated on cel-cpp as the API server evaluates them on create.

Source: k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel/validation.go (`validateExpressions`,
`ruleMessageOrDefault`, `ruleErrorString`, `fieldErrorForReason`). `self` is the node's value; it is declared dyn
(the API server declares the schema's type, but its checker already accepted every rule when the CRD was
created, so the runtime values and results are the same). JSON integers are Python ints, hence CEL ints.
Transition rules (those that read `oldSelf`) only run on update and are skipped. A messageExpression that fails,
or yields an empty or multi-line string, falls back to the rule's message. Each expression compiles once.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from cel_expr_python import cel

from kubetwin.api.crd_schema import FieldError, child
from kubetwin.cel import library
from kubetwin.cel.dra import CelError, cpp_message

T = cel.Type
_OLD_SELF = re.compile(r"\boldSelf\b")
# field.ErrorType strings for the rule's `reason` (apiextensions v1 FieldValueErrorReason).
REASONS = {"FieldValueInvalid": "Invalid value", "FieldValueForbidden": "Forbidden",
           "FieldValueRequired": "Required value", "FieldValueDuplicate": "Duplicate value"}
_HAS_RULES: dict[int, tuple[dict, bool]] = {}


@functools.cache
def _env() -> Any:
    return cel.NewEnv(library.pool(), variables={"self": T.DYN}, functions=library.functions(),
                      extensions=library.extensions())


@functools.lru_cache(maxsize=4096)
def compile_rule(expression: str) -> Any:
    """The compiled program for one rule or messageExpression; CelError("compile", ...) if cel-cpp rejects it."""
    try:
        return _env().compile(expression)
    except RuntimeError as exc:
        raise CelError("compile", "compilation failed: " + cpp_message(exc)) from None


def _run(expression: str, value: Any) -> tuple[str, Any]:
    """("ok", result) or ("error", message): never raises (a value cel-cpp cannot take is a runtime error)."""
    try:
        res = compile_rule(expression).eval(data={"self": value})
        if res.type() == T.ERROR:
            return "error", cpp_message(res.value())
        return "ok", res.value()
    except CelError as exc:
        return "error", exc.message
    except Exception as exc:  # noqa: BLE001 - a bad manifest value must become a diagnostic, not a traceback
        return "error", cpp_message(exc)


def has_rules(schema: dict) -> bool:
    """Whether any node at or below schema carries x-kubernetes-validations (cached; lets walks skip subtrees)."""
    hit = _HAS_RULES.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    subs = list((schema.get("properties") or {}).values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            subs.append(schema[key])
    found = bool(schema.get("x-kubernetes-validations")) | any([has_rules(s) for s in subs])
    _HAS_RULES[id(schema)] = (schema, found)
    return found


def check(value: Any, schema: dict, path: str = "", out: list | None = None) -> list[FieldError]:
    """Evaluate every rule at every node of value that has one, in document order."""
    out = [] if out is None else out
    if value is None or not has_rules(schema):
        return out
    for rule in schema.get("x-kubernetes-validations") or ():
        _evaluate(rule, value, str(schema.get("type", "")), path, out)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k) or (addl if isinstance(addl, dict) else None)
            if sub is not None:
                check(v, sub, child(path, k), out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            check(v, schema["items"], f"{path}[{i}]", out)
    return out


def rule_error_string(rule: dict) -> str:
    return str(rule.get("message") or "").strip() or str(rule.get("rule", "")).strip()


def message_or_default(rule: dict) -> str:
    msg = str(rule.get("message") or "").strip()
    return msg or f"failed rule: {rule_error_string(rule)}"


def _field_path(path: str, field_path: str) -> str:
    """Append a rule's fieldPath (`.a.b`, `.a['b.c']`) to the node's path."""
    parts = re.findall(r"\.([A-Za-z0-9_$-]+)|\['([^']*)'\]|\[(\d+)\]", field_path or "")
    for name, key, index in parts:
        path = f"{path}[{index}]" if index else child(path, name or key)
    return path


def _evaluate(rule: dict, value: Any, sts_type: str, path: str, out: list) -> None:
    expression = str(rule.get("rule", ""))
    if _OLD_SELF.search(expression):
        return
    hint = f"the CRD requires: {expression.strip()}"
    try:
        compile_rule(expression)
    except CelError as exc:
        out.append(FieldError(path, f"kubetwin could not compile the CRD's rule {expression!r} ({exc.message}): "
                              "not checked", "", "internal"))
        return
    status, result = _run(expression, value)
    if status == "error":
        if result.startswith("no such overload"):
            text = (f"'{result}': call arguments did not match a supported operator, function or macro signature "
                    f"for rule: {rule_error_string(rule)}")
        else:
            text = f"{result} evaluating rule: {rule_error_string(rule)}"
        out.append(FieldError(path, f'Invalid value: "{sts_type}": {text}', hint, "cel"))
        return
    if result is True:
        return
    if result is not False:
        out.append(FieldError(path, f'Invalid value: "{sts_type}": rule did not evaluate to bool', hint, "cel"))
        return
    message = message_or_default(rule)
    if rule.get("messageExpression"):
        m_status, m_value = _run(str(rule["messageExpression"]), value)
        if m_status == "ok" and isinstance(m_value, str) and m_value.strip() and "\n" not in m_value:
            message = m_value
    where = _field_path(path, str(rule.get("fieldPath") or ""))
    reason = REASONS.get(str(rule.get("reason") or "FieldValueInvalid"), "Invalid value")
    if reason == "Invalid value":
        text = f'Invalid value: "{sts_type}": {message}'
    elif reason == "Duplicate value":
        text = f'Duplicate value: "{sts_type}"'
    else:
        text = f"{reason}: {message}"
    out.append(FieldError(where, text, hint, "cel"))

"""The DRA selector environment (k8s.io/dynamic-resource-allocation/cel compile.go) on cel-cpp.

`device.driver` is a string, `device.attributes[domain][id]` a dyn (int, bool, string or Semver) and
`device.capacity[domain][id]` a Quantity. Looking up a domain the device does not have yields an empty map,
as compile.go's mapper does, so the error surfaces one step later as `no such key: <id>`; cel-cpp has no
such map, so every string literal of the expression that is not a domain of the device is added as an empty
domain before evaluation (a `"x" in device.attributes` test on such a literal is the one place this differs).
Expressions compile once (cached by text); a device's CEL view is built once and reused.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

from kubetwin.cel import library
from kubetwin.k8s.units import UnitError, parse_quantity

T = cel.Type
# resourceapi.CELSelectorExpressionMaxLength (k8s.io/api resource/v1 types.go)
MAX_EXPRESSION_LENGTH = 10 * 1024
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')
_STATUS = re.compile(r"^[A-Z_]+: ")


class CelError(Exception):
    """A compile error (caught by the API server at create time) or a runtime error (caught in scheduling)."""

    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message
        super().__init__(message)


@functools.cache
def _env() -> Any:
    dyn_domains = T.Map(T.STRING, T.Map(T.STRING, T.DYN))
    cap_domains = T.Map(T.STRING, T.Map(T.STRING, library.QUANTITY))
    return cel.NewEnv(library.pool(), variables={
        "device.driver": T.STRING, "device.attributes": dyn_domains, "device.capacity": cap_domains,
    }, functions=library.functions(), extensions=library.extensions())


def cpp_message(exc_or_text: object) -> str:
    """cel-cpp's status text without its status code wrapper, i.e. cel-go's message."""
    text = str(exc_or_text)
    text = re.sub(r" \[[A-Z_]+\]$", "", _STATUS.sub("", text, count=1))
    m = re.match(r'^Key not found in map : "(.*)"$', text)
    if m:
        return f"no such key: {m.group(1)}"
    if text.startswith("No matching overloads found"):
        return "no such overload"
    return text


@dataclass
class Selector:
    """One compiled selector expression."""

    expression: str
    program: Any
    literals: frozenset[str]

    def matches(self, device: DeviceView) -> bool:
        """Evaluate on one device; a runtime error raises CelError("runtime", ...) as cel-go's would."""
        data = device.activation(self.literals)
        result = self.program.eval(data=data)
        rtype = result.type()
        if rtype == T.BOOL:
            return bool(result.value())
        if rtype == T.ERROR:
            raise CelError("runtime", cpp_message(result.value()))
        raise CelError("runtime", f"CEL result of type {rtype.name()} could not be converted to bool")


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """Compile and type-check; errors read as the API server's `compilation failed: ERROR: <input>:l:c: ...`."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelError("compile", f"must be no more than {MAX_EXPRESSION_LENGTH} bytes")
    try:
        program = _env().compile(expression)
    except RuntimeError as exc:
        raise CelError("compile", "compilation failed: " + cpp_message(exc)) from None
    rtype = program.return_type()
    if rtype not in (T.BOOL, T.DYN):
        raise CelError("compile", f"must evaluate to bool or the unknown type, not {rtype.name().lower()}")
    literals = frozenset(a or b for a, b in _LITERAL.findall(expression))
    return Selector(expression, program, literals)


def attribute_value(attr: dict) -> Any:
    """DeviceAttribute {int|bool|string|version} to its CEL value (getAttributeValue)."""
    if "int" in attr:
        return int(attr["int"])
    if "bool" in attr:
        return bool(attr["bool"])
    if "string" in attr:
        return str(attr["string"])
    if "version" in attr:
        return library.make_semver(str(attr["version"]))
    raise CelError("runtime", "unsupported attribute value")


def split_name(name: str, driver: str) -> tuple[str, str]:
    """parseQualifiedName: names without a domain are in the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


@dataclass
class DeviceView:
    """A device as CEL sees it: built once per device, padded per expression with the empty domains it names."""

    driver: str
    attributes: dict[str, dict[str, Any]]
    capacity: dict[str, dict[str, Any]]
    _padded: dict[frozenset[str], dict] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, driver: str, device: dict) -> DeviceView:
        attrs: dict[str, dict[str, Any]] = {}
        for name, attr in (device.get("attributes") or {}).items():
            domain, ident = split_name(name, driver)
            attrs.setdefault(domain, {})[ident] = attribute_value(attr or {})
        caps: dict[str, dict[str, Any]] = {}
        for name, cap in (device.get("capacity") or {}).items():
            domain, ident = split_name(name, driver)
            try:
                value = parse_quantity((cap or {}).get("value", 0))
            except UnitError as exc:
                raise CelError("runtime", f"capacity {name}: {exc}") from None
            caps.setdefault(domain, {})[ident] = library.make_quantity(value)
        return cls(driver, attrs, caps)

    def activation(self, literals: frozenset[str]) -> dict:
        data = self._padded.get(literals)
        if data is None:
            attrs, caps = dict(self.attributes), dict(self.capacity)
            for lit in literals:
                attrs.setdefault(lit, {})
                caps.setdefault(lit, {})
            data = {"device.driver": self.driver, "device.attributes": attrs, "device.capacity": caps}
            self._padded[literals] = data
        return data

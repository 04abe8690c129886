"""The Kubernetes CEL libraries DRA selectors and CRD rules use, on Google's cel-cpp (cel-expr-python).

Quantity and Semver are opaque types in Kubernetes (k8s.io/apiserver/pkg/cel/library quantity.go and
semverlib.go). cel-expr-python cannot carry Python objects as opaque values, so each is a one-field protobuf
message (`kubernetes.Quantity`, `kubernetes.Semver`): the checker then sees a distinct named type exactly as
cel-go does, so `q >= quantity("1")` and `q >= "40Gi"` fail to compile with cel-go's
`found no matching overload for '_>=_' applied to '(kubernetes.Quantity, ...)'`. The field holds a canonical
form, so message equality is value equality (`quantity("1") == quantity("1000m")`, as Quantity.Equal).
Functions: quantity/isQuantity, sign, isInteger, asInteger, asApproximateFloat, add, sub, compareTo,
isGreaterThan, isLessThan; semver/isSemver, major, minor, patch, compareTo, isGreaterThan, isLessThan; the
lists library (isSorted, sum, min, max; its list indexOf/lastIndexOf are left out because cel-cpp cannot add
overloads to the strings extension's indexOf); the URLs library's isURL; plus cel-go's strings, optional and
bindings extensions that the Kubernetes base environment enables.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kubetwin.k8s.units import UnitError, parse_quantity

T = cel.Type
_MAX_INT = 2**63 - 1


@functools.cache
def pool() -> descriptor_pool.DescriptorPool:
    """A private descriptor pool holding the two opaque Kubernetes types."""
    fdp = descriptor_pb2.FileDescriptorProto(name="kubetwin/cel/kubernetes.proto", package="kubernetes",
                                             syntax="proto3")
    for name in ("Quantity", "Semver"):
        msg = fdp.message_type.add(name=name)
        msg.field.add(name="canonical", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    p = descriptor_pool.DescriptorPool()
    p.Add(fdp)
    return p


@functools.cache
def _message(name: str) -> Any:
    return message_factory.GetMessageClass(pool().FindMessageTypeByName(f"kubernetes.{name}"))


QUANTITY, SEMVER = T("kubernetes.Quantity"), T("kubernetes.Semver")


# -- Quantity ---------------------------------------------------------------------------------------------
def _qvalue(q: Any) -> Decimal:
    return Decimal(q.canonical)


def make_quantity(value: Decimal) -> Any:
    return _message("Quantity")(canonical=str(value.normalize()) if value else "0")


@functools.lru_cache(maxsize=4096)
def quantity(text: str) -> Any:
    """quantity("40Gi"); a bad string is a runtime error in the API server's words."""
    try:
        return make_quantity(parse_quantity(text))
    except UnitError as exc:
        raise ValueError(str(exc)) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except UnitError:
        return False
    return True


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _as_integer(q: Any) -> int:
    v = _qvalue(q)
    if v != v.to_integral_value() or abs(v) > _MAX_INT:
        raise ValueError("cannot convert value to integer")
    return int(v)


# -- Semver (blang/semver strict parsing, as semverlib.go) ------------------------------------------------
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")


def _parse_semver(text: str, normalize: bool = False) -> tuple[int, int, int, str]:
    s = text
    if normalize:  # semver(s, true): drop a leading v, pad missing minor/patch, strip leading zeros
        s = s[1:] if s.startswith("v") else s
        core, sep, rest = re.split(r"([-+])", s, maxsplit=1) + ["", ""] if re.search(r"[-+]", s) else [s, "", ""]
        parts = core.split(".")
        if len(parts) < 3 and all(p.isdigit() for p in parts):
            parts += ["0"] * (3 - len(parts))
        s = ".".join(str(int(p)) if p.isdigit() else p for p in parts) + sep + rest
    m = _SEMVER.match(s)
    if not m:
        raise ValueError(f"No Major.Minor.Patch elements found: {text}" if "." not in text
                         else f"Invalid character(s) found in version: {text}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""


def make_semver(text: str, normalize: bool = False) -> Any:
    major, minor, patch, pre = _parse_semver(text, normalize)
    return _message("Semver")(canonical=f"{major}.{minor}.{patch}" + (f"-{pre}" if pre else ""))


def _semver_key(v: Any) -> tuple:
    major, minor, patch, pre = _parse_semver(v.canonical)
    if not pre:  # a release sorts after all its pre-releases
        return (major, minor, patch, 1, ())
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (major, minor, patch, 0, ids)


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _parse_semver(text, normalize)
    except ValueError:
        return False
    return True


def _key(v: Any) -> Any:
    """Comparison key of a Quantity or a Semver message."""
    return _qvalue(v) if v.DESCRIPTOR.name == "Quantity" else _semver_key(v)


# -- declarations -----------------------------------------------------------------------------------------
def _ov(oid: str, ret: Any, params: list, fn: Callable, member: bool = False) -> Any:
    return cel.Overload(oid, ret, params, is_member=member, impl=fn)


def functions() -> list[Any]:
    """FunctionDecls for the Kubernetes quantity, semver and lists libraries."""
    Q, S, L, A = QUANTITY, SEMVER, T.List(T.DYN), T.DYN
    decls = {
        "quantity": [_ov("string_to_quantity", Q, [T.STRING], quantity)],
        "isQuantity": [_ov("is_quantity_string", T.BOOL, [T.STRING], _is_quantity)],
        "sign": [_ov("quantity_sign", T.INT, [Q], lambda q: _cmp(_qvalue(q), 0), True)],
        "isInteger": [_ov("quantity_is_integer", T.BOOL, [Q],
                          lambda q: _qvalue(q) == _qvalue(q).to_integral_value() and abs(_qvalue(q)) <= _MAX_INT,
                          True)],
        "asInteger": [_ov("quantity_get_integer", T.INT, [Q], _as_integer, True)],
        "asApproximateFloat": [_ov("quantity_get_float", T.DOUBLE, [Q], lambda q: float(_qvalue(q)), True)],
        "add": [_ov("quantity_add", Q, [Q, Q], lambda a, b: make_quantity(_qvalue(a) + _qvalue(b)), True),
                _ov("quantity_add_int", Q, [Q, T.INT], lambda a, b: make_quantity(_qvalue(a) + b), True)],
        "sub": [_ov("quantity_sub", Q, [Q, Q], lambda a, b: make_quantity(_qvalue(a) - _qvalue(b)), True),
                _ov("quantity_sub_int", Q, [Q, T.INT], lambda a, b: make_quantity(_qvalue(a) - b), True)],
        # cel-cpp's runtime keys implementations by argument kind, and both types are messages: one
        # implementation per function serves both overloads and dispatches on the message type.
        "compareTo": [_ov("quantity_compare_to", T.INT, [Q, Q], lambda a, b: _cmp(_key(a), _key(b)), True),
                      cel.Overload("semver_compare_to", T.INT, [S, S], is_member=True)],
        "isGreaterThan": [_ov("quantity_is_greater_than", T.BOOL, [Q, Q], lambda a, b: _key(a) > _key(b), True),
                          cel.Overload("semver_is_greater_than", T.BOOL, [S, S], is_member=True)],
        "isLessThan": [_ov("quantity_is_less_than", T.BOOL, [Q, Q], lambda a, b: _key(a) < _key(b), True),
                       cel.Overload("semver_is_less_than", T.BOOL, [S, S], is_member=True)],
        "semver": [_ov("string_to_semver", S, [T.STRING], make_semver),
                   _ov("string_bool_to_semver", S, [T.STRING, T.BOOL], make_semver)],
        "isSemver": [_ov("is_semver_string", T.BOOL, [T.STRING], _is_semver),
                     _ov("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL], _is_semver)],
        "major": [_ov("semver_major", T.INT, [S], lambda v: _parse_semver(v.canonical)[0], True)],
        "minor": [_ov("semver_minor", T.INT, [S], lambda v: _parse_semver(v.canonical)[1], True)],
        "patch": [_ov("semver_patch", T.INT, [S], lambda v: _parse_semver(v.canonical)[2], True)],
        # k8s.io/apiserver/pkg/cel/library/lists.go
        "isSorted": [_ov("list_is_sorted", T.BOOL, [L], _is_sorted, True)],
        "sum": [_ov("list_sum", A, [L], sum, True)],  # one overload: cel-cpp keys implementations by kind
        "min": [_ov("list_min", A, [L], _min_max(min), True)],
        "max": [_ov("list_max", A, [L], _min_max(max), True)],
        # k8s.io/apiserver/pkg/cel/library/urls.go (GMP's proxyUrl rules)
        "isURL": [_ov("is_url_string", T.BOOL, [T.STRING], is_url)],
    }
    return [cel.FunctionDecl(name, ovs) for name, ovs in decls.items()]


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def is_url(text: str) -> bool:
    """isURL: whether Go's url.ParseRequestURI accepts the string -- no control characters, and either an absolute
    path or a scheme ("http:", "https:" ...) whose authority, when "//" follows, has a valid port (digits after the
    last colon outside an IPv6 literal's brackets) and balanced brackets."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return False
    if text.startswith("/"):
        return True
    m = _SCHEME.match(text)
    if m is None:
        return False
    rest = text[m.end():]
    if not rest.startswith("//"):
        return True
    authority = re.split(r"[/?]", rest[2:], maxsplit=1)[0]
    host = authority.rsplit("@", 1)[-1]
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return False
        port = host[end + 1:]
        return port == "" or (port.startswith(":") and (port == ":" or port[1:].isdigit()))
    if "]" in host or "[" in host:
        return False
    _, colon, port = host.rpartition(":")
    return not colon or port == "" or port.isdigit()


def _is_sorted(xs: Any) -> bool:
    items = list(xs)
    return all(a <= b for a, b in zip(items, items[1:], strict=False))


def _min_max(pick: Callable) -> Callable:
    def fn(xs: Any) -> Any:
        if not len(xs):
            raise ValueError("min called on empty list" if pick is min else "max called on empty list")
        return pick(xs)
    return fn


def extensions() -> list[Any]:
    """cel-go extensions in the Kubernetes base environment that cel-cpp also ships."""
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

    return [ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings()]

"""kubectl's JSONPath templates (`-o jsonpath=`, custom-columns, --sort-by, CRD printer columns) over jsonpath-ng.

The path evaluation is jsonpath-ng's (its `ext` dialect has the filters kubectl has); this module adds only what
kubectl's template language puts around it, as client-go util/jsonpath does (kubernetes/client-go@32ce75a7
util/jsonpath/parser.go, jsonpath.go; https://kubernetes.io/docs/reference/kubectl/jsonpath/):
text outside `{}` printed as is; `{"\\n"}` quoted literals; `{range EXPR}...{end}`; `$` and `@` for the current
object; `\\.` to keep a dot inside a field name; several results of one action joined by one space; maps and lists
printed as compact JSON with sorted keys, strings raw; missing keys print nothing (kubectl's
--allow-missing-template-keys=true default). Parse errors carry client-go's words ("unclosed action",
"unrecognized character in action: U+0021 '!'").
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JSONPathError", "Template", "go_json", "go_sprint", "go_text", "relaxed", "first"]


class JSONPathError(ValueError):
    """A template that client-go's parser or executor rejects; the message is client-go's."""


def _go_rune(r: str) -> str:
    """Go's %#U: U+0021 '!'."""
    return f"U+{ord(r):04X} '{r}'"


@dataclass
class _Text:
    text: str


@dataclass
class _Path:
    expr: str  # jsonpath-ng expression, "$" for the current object


@dataclass
class _Range:
    path: _Path
    body: list[Any] = field(default_factory=list)


_TERMINATORS = set(" .[]{}()=!<>,\t\n\r")


def _field_name(text: str, i: int) -> tuple[str, int]:
    """A field name from position i: up to a terminator, `\\x` keeps x (client-go's parseField/advance)."""
    out: list[str] = []
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if c in _TERMINATORS:
            break
        out.append(c)
        i += 1
    return "".join(out), i


def _quote(name: str) -> str:
    if '"' in name:
        return "'" + name + "'"
    return '"' + name + '"'


_FILTER_PATH = re.compile(r"@((?:\.(?:\\.|[^\s.=!<>()\[\]\\])+)+)")


def _filter(body: str) -> str:
    """A filter's body with its @.a.b paths quoted for jsonpath-ng (field names may hold '-' or '/')."""

    def one(m: re.Match[str]) -> str:
        names = re.findall(r"\.((?:\\.|[^.\\])+)", m.group(1))
        return "@" + "".join("." + _quote(n.replace("\\", "")) for n in names)

    return _FILTER_PATH.sub(one, body)


def _translate(action: str) -> str:
    """One action's path (kubectl syntax) as a jsonpath-ng expression rooted at the current object."""
    out = ["$"]
    i = 0
    while i < len(action):
        c = action[i]
        if c in " $@":  # the current object (client-go consumes them)
            i += 1
            continue
        if action.startswith("..", i):
            name, i = _field_name(action, i + 2)
            if name:  # a bare `..` leaves the current object (client-go's "{..}" test prints its input)
                out.append(".." + ("*" if name == "*" else _quote(name)))
        elif c == ".":
            name, i = _field_name(action, i + 1)
            if name == "*":
                out.append(".*")
            elif name:
                out.append("." + _quote(name))
        elif action.startswith("[?(", i):
            end = action.find(")]", i)
            if end < 0:
                raise JSONPathError("unterminated filter")
            out.append("[?(" + _filter(action[i + 3:end]) + ")]")
            i = end + 2
        elif c == "[":
            end = i + 1
            quote = ""
            while end < len(action) and (quote or action[end] != "]"):
                if action[end] in "'\"":
                    quote = "" if quote == action[end] else (quote or action[end])
                end += 1
            if end >= len(action):
                raise JSONPathError("unterminated array")
            inner = action[i + 1:end].strip()
            keys = [k.strip() for k in inner.split(",")]
            if inner and all(len(k) >= 2 and k[0] == k[-1] and k[0] in "'\"" for k in keys):
                out.append("[" + ",".join(_quote(k[1:-1]) for k in keys) + "]")
            elif inner == "*" or re.fullmatch(r"-?\d*(:-?\d*){0,2}|-?\d+(\s*,\s*-?\d+)*", inner):
                if not inner:
                    raise JSONPathError("invalid array index ")
                out.append("[" + inner.replace(" ", "") + "]")
            else:
                raise JSONPathError(f"invalid array index {inner}")
            i = end + 1
        else:
            raise JSONPathError(f"unrecognized character in action: {_go_rune(c)}")
    return "".join(out)


def _split_actions(text: str) -> list[tuple[str, str]]:
    """The template as ("text", s) and ("action", s) pieces; quotes inside an action may hold '}'."""
    pieces: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        start = text.find("{", i)
        if start < 0:
            pieces.append(("text", text[i:]))
            break
        if start > i:
            pieces.append(("text", text[i:start]))
        j, quote = start + 1, ""
        while j < len(text):
            c = text[j]
            if quote:
                if c == "\\":
                    j += 1
                elif c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == "}":
                break
            elif c == "\n":
                raise JSONPathError("unclosed action")
            j += 1
        if quote:
            raise JSONPathError("unterminated quoted string")
        if j >= len(text):  # client-go reads the action first: an open [ or [?( is reported before the brace
            rest = text[start + 1:].strip()
            if rest and rest[0] not in "'\"" and not rest.startswith(("range", "end")):
                _translate(rest)
            raise JSONPathError("unclosed action")
        pieces.append(("action", text[start + 1:j]))
        i = j + 1
    return pieces


def _unquote(lit: str) -> str:
    """A quoted literal as Go's strconv.Unquote reads it (\\n, \\t, \\", unicode escapes)."""
    body = lit[1:-1]
    if lit[0] == "'":
        body = body.replace('"', '\\"')
    try:
        return json.loads('"' + body + '"', strict=False)
    except json.JSONDecodeError as exc:
        raise JSONPathError(f"unquote string {lit} error invalid syntax") from exc


def _parse(text: str) -> list[Any]:
    root: list[Any] = []
    stack: list[list[Any]] = [root]
    for kind, piece in _split_actions(text):
        if kind == "text":
            stack[-1].append(_Text(piece))
            continue
        action = piece.strip()
        if len(action) >= 2 and action[0] == action[-1] and action[0] in "'\"":
            stack[-1].append(_Text(_unquote(action)))
        elif action == "end":
            if len(stack) == 1:
                raise JSONPathError("not in range, nothing to end")
            stack.pop()
        elif action.startswith("range ") or action == "range":
            node = _Range(_Path(_translate(action[5:])))
            stack[-1].append(node)
            stack.append(node.body)
        else:
            stack[-1].append(_Path(_translate(action)))
    return root


@functools.lru_cache(maxsize=512)
def _compiled(expr: str) -> Any:
    from jsonpath_ng.ext import parse

    return parse(expr)


def _find(expr: str, obj: Any) -> list[Any]:
    if expr == "$":
        return [] if obj is None else [obj]
    if obj is None:
        return []
    return [m.value for m in _compiled(expr).find(obj)]


def _go_numbers(value: Any) -> Any:
    """Whole floats as ints: Go's encoding/json writes float64 1.0 as 1."""
    if isinstance(value, float) and value == int(value) and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def go_json(value: Any, indent: int | None = None) -> str:
    """encoding/json's output: sorted keys, <, > and & escaped, whole floats without a fraction; compact or
    MarshalIndent with `indent` spaces."""
    sep = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(_go_numbers(value), sort_keys=True, separators=sep, indent=indent, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _go_number(v: float) -> str:
    if v == int(v) and abs(v) < 1e21:
        return str(int(v))
    return repr(v)


def go_text(value: Any) -> str:
    """One result as client-go's PrintResults writes it: strings raw, maps and lists as JSON, null for nil."""
    if isinstance(value, (dict, list)):
        return go_json(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_number(value)
    return str(value)


def go_sprint(value: Any) -> str:
    """fmt.Sprint of a decoded JSON value (custom-columns cells): map[k:v], [a b], true, 1.5."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    return go_text(value)


class Template:
    """A parsed kubectl JSONPath template: `results(obj)` gives each action's values, `render(obj)` the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._nodes = _parse(text)

    def results(self, obj: Any) -> list[list[Any]]:
        """Each action's list of values, range bodies expanded per item (client-go FindResults)."""
        out: list[list[Any]] = []
        self._walk(self._nodes, obj, out)
        return out

    def _walk(self, nodes: list[Any], obj: Any, out: list[list[Any]]) -> None:
        for n in nodes:
            if isinstance(n, _Text):
                out.append([n.text])
            elif isinstance(n, _Path):
                out.append(_find(n.expr, obj))
            else:
                for item in _find(n.path.expr, obj):
                    self._walk(n.body, item, out)

    def render(self, obj: Any, as_json: bool = False) -> str:
        """What `-o jsonpath=` (or jsonpath-as-json) prints for obj: no newline is added."""
        parts = []
        for values in self.results(obj):
            if as_json:
                parts.append(go_json(values, indent=4) + "\n")
            else:
                parts.append(" ".join(go_text(v) for v in values))
        return "".join(parts)


_RELAXED = re.compile(r"^\{\.?([^{}]+)\}$|^\.?([^{}]+)$")


def relaxed(expr: str) -> str:
    """kubectl's RelaxedJSONPathExpression (pkg/cmd/get/customcolumn.go): a.b, .a.b, {a.b} and {.a.b} all mean
    {.a.b}; used by custom-columns and --sort-by."""
    if not expr:
        return expr
    m = _RELAXED.match(expr)
    if m is None:
        raise JSONPathError("unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' "
                            "or '{.name1.name2}'")
    return "{." + (m.group(1) or m.group(2)) + "}"


@functools.lru_cache(maxsize=512)
def _template(text: str) -> Template:
    return Template(text)


def first(obj: Any, path: str) -> Any:
    """The first value of a path (`.a.b`, with or without braces) in obj, None when missing (printer columns,
    --sort-by)."""
    for values in _template(relaxed(path)).results(obj):
        if values:
            return values[0]
    return None

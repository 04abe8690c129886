"""A JSON document (a `kubectl get -o json` dump, one object) read by the C json decoder, its field lines found
only when something asks for one (issue 36 item 3: "answers in seconds for a 1,000-node snapshot").

The YAML path (loader._documents) composes every node in Python to know each field's line: ~20 s for a 4 MB dump.
Here each List item is decoded on its own (json.JSONDecoder.raw_decode, which says where it ends), so its line and
size are known, and its field lines (`Manifest.lines`) are a LazyLines: the item's text composed by the YAML path
the first time a message needs a line. Everything the YAML path refuses or reads otherwise falls back to it
(returns None): NaN or infinite numbers, duplicate keys (sigs.k8s.io/yaml's strict decoding rejects them, with the
line the YAML path names), nesting past limits.MAX_DEPTH, anything not a JSON object at the top, and a snapshot of
object lists (the kube-scheduler-simulator's export). Values are what the YAML path gives: whole floats as
integers (YAMLToJSON), strings as strings.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from kubetwin.api import limits

__all__ = ["LazyLines", "documents"]

_WS = re.compile(r"[ \t\n\r]*")


def _skip(text: str, i: int) -> int:
    """The index past the whitespace at i."""
    m = _WS.match(text, i)
    return m.end() if m is not None else i


class _NotFast(Exception):
    """The text is not for this path: the YAML path reads it (and says what is wrong)."""


def _float(text: str) -> float | int:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFast
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def _constant(_: str) -> Any:
    raise _NotFast  # NaN, Infinity: not JSON an API server takes


# Without an object_pairs_hook the C decoder builds the dicts itself (~2x faster than a hook per object), and a key
# written twice keeps its last value silently: duplicates are found by counting, the keys in the text (each string
# token, a key when a colon follows it) against the keys of the decoded objects.
_DECODER = json.JSONDecoder(parse_float=_float, parse_constant=_constant)
_STRING_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"[ \t\n\r]*(:)?')


def _keys_in(text: str) -> int:
    """How many keys the JSON text writes (it has been decoded: every string token is whole)."""
    return _STRING_TOKEN.findall(text).count(":")


def _shape(value: Any) -> tuple[int, int]:
    """(keys of all the objects, nesting depth: objects and arrays one level each) of a decoded value."""
    keys = depth = 0
    level = [value] if type(value) is dict or type(value) is list else []
    while level:
        depth += 1
        below: list[Any] = []
        add = below.append
        for container in level:
            values: Any = container
            if type(container) is dict:
                keys += len(container)
                values = container.values()
            for v in values:
                if type(v) is dict or type(v) is list:
                    add(v)
        level = below
    return keys, depth


class LazyLines(dict[str, int]):
    """Field path -> line, computed on first use by `fill` (the YAML path over the item's text)."""

    def __init__(self, fill: Callable[[], dict[str, int]]) -> None:
        super().__init__()
        self._fill: Callable[[], dict[str, int]] | None = fill

    def _load(self) -> None:
        if self._fill is not None:
            fill, self._fill = self._fill, None
            super().update(fill())

    def __getitem__(self, key: str) -> int:
        self._load()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._load()
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._load()
        return super().get(key, default)

    def __iter__(self) -> Iterator[str]:
        self._load()
        return super().__iter__()

    def __len__(self) -> int:
        self._load()
        return super().__len__()

    def keys(self) -> Any:
        self._load()
        return super().keys()

    def items(self) -> Any:
        self._load()
        return super().items()

    def values(self) -> Any:
        self._load()
        return super().values()

    def __eq__(self, other: object) -> bool:
        self._load()
        return super().__eq__(other)

    __hash__ = None

    def __repr__(self) -> str:
        self._load()
        return super().__repr__()

    def copy(self) -> dict[str, int]:
        self._load()
        return dict(super().items())

    def __reduce__(self) -> Any:  # pickled and copied as the plain dict it stands for
        return (dict, (self.copy(),))

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, int]:
        return self.copy()


def _field_lines(field_lines: Callable[[str], dict[str, int]], text: str, start: int, end: int, line: int
                 ) -> Callable[[], dict[str, int]]:
    """The item's field lines, by the YAML path over its text (JSON is YAML), counted from the item's line."""

    def fill() -> dict[str, int]:
        return {k: v + line - 1 for k, v in field_lines(text[start:end]).items()}

    return fill


def documents(text: str, field_lines: Callable[[str], dict[str, int]]
              ) -> list[tuple[int, dict[str, Any], dict[str, int]]] | None:
    """(line, object, field lines) per object of a JSON document, a List's items one by one; None: the YAML path
    reads it (and says what is wrong, where). `field_lines`: the YAML path's lines of one document's text."""
    i = _skip(text, 0)
    if not text.startswith("{", i):
        return None
    try:
        top, spans = _top(text, i)
    except (_NotFast, ValueError, RecursionError):
        return None
    keys, depth = _shape(top)
    if depth > limits.MAX_DEPTH or keys != _keys_in(text):
        return None  # nested past the limit, or a key written twice in one object: the YAML path names its line
    return _documents(text, top, spans, field_lines)


def _top(text: str, i: int) -> tuple[dict[str, Any], list[tuple[int, int]]]:
    """The top-level object, its `items` decoded element by element with their spans."""
    top: dict[str, Any] = {}
    spans: list[tuple[int, int]] = []
    i = _skip(text, i + 1)
    if text.startswith("}", i):
        i += 1
    else:
        while True:
            key, i = _DECODER.raw_decode(text, i)
            if not isinstance(key, str) or key in top:
                raise _NotFast
            i = _skip(text, i)
            if not text.startswith(":", i):
                raise _NotFast
            i = _skip(text, i + 1)
            if key == "items" and text.startswith("[", i):
                items: list[Any] = []
                i = _skip(text, i + 1)
                if text.startswith("]", i):
                    i += 1
                else:
                    while True:
                        value, end = _DECODER.raw_decode(text, i)
                        items.append(value)
                        spans.append((i, end))
                        i = _skip(text, end)
                        if text.startswith(",", i):
                            i = _skip(text, i + 1)
                        elif text.startswith("]", i):
                            i += 1
                            break
                        else:
                            raise _NotFast
                top[key] = items
            else:
                top[key], i = _DECODER.raw_decode(text, i)
            i = _skip(text, i)
            if text.startswith(",", i):
                i = _skip(text, i + 1)
            elif text.startswith("}", i):
                i += 1
                break
            else:
                raise _NotFast
    if _skip(text, i) != len(text):
        raise _NotFast  # more after the object (several JSON documents): the YAML path
    return top, spans


def _documents(text: str, top: dict[str, Any], spans: list[tuple[int, int]],
               field_lines: Callable[[str], dict[str, int]]) -> list[tuple[int, dict[str, Any], dict[str, int]]] | None:
    """(line, object, field lines) of the top-level object, or of each List item."""
    if limits.is_list(top) and not isinstance(top.get("items"), list):
        return None  # a List with no items (or not a list of them): the YAML path reads it as kubectl does
    if not limits.is_list(top):
        if limits.list_items(top) is not None:  # the simulator's export: the YAML path's line per list element
            return None
        a = _skip(text, 0)
        line = text.count("\n", 0, a) + 1
        if len(text) - a > limits.MAX_OBJECT_BYTES // 6 and limits.object_too_large(top, "", 0) is not None:
            return None  # the YAML path sizes it and says so
        return [(line, top, LazyLines(_field_lines(field_lines, text, a, len(text), line)))]
    out: list[tuple[int, dict[str, Any], dict[str, int]]] = []
    line, at = 1, 0
    # an item's stored JSON (compact, non-ASCII escaped as \uXXXX: up to 6 characters for 1) is what etcd limits
    sizable = limits.MAX_OBJECT_BYTES if text.isascii() else limits.MAX_OBJECT_BYTES // 6
    for item, (a, b) in zip(top["items"], spans, strict=True):
        if not isinstance(item, dict) or b - a > sizable and limits.object_too_large(item, "", 0) is not None:
            return None  # the YAML path's messages (an item not an object, over etcd's or the request's limit)
        line += text.count("\n", at, a)
        at = a
        out.append((line, item, LazyLines(_field_lines(field_lines, text, a, b, line))))
    return out

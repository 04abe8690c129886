"""JSON patch (RFC 6902) and strategic merge patch on plain object dicts, for `kubetwin sweep`'s axes.

JSON patch follows RFC 6902 (add, remove, replace, move, copy, test; "-" appends; JSON pointers per RFC 6901).
The strategic merge patch follows kubectl's (k8s.io/apimachinery/pkg/util/strategicpatch): maps merge key by key,
`null` deletes a key, `$patch: replace` / `$patch: delete` on a map, and lists of objects that carry a `name`
merge item by item on that name, as the API's patchMergeKey "name" does for containers, env, volumes, Kueue's
flavors and resources; other lists are replaced whole (the default for lists without a merge key).

`field_pointer` turns the twin's field paths (`spec.resourceGroups[0].flavors[name=a3].resources[0].nominalQuota`)
into JSON pointers against an object, resolving `[name=X]` to the item's index.
"""

from __future__ import annotations

import copy
import re
from typing import Any


class PatchError(ValueError):
    """A patch that does not apply: the message names the pointer and why, as kubectl's errors do."""


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def split_pointer(pointer: str) -> list[str]:
    """RFC 6901: "" is the whole document; otherwise "/"-separated, "~1" is "/" and "~0" is "~"."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'invalid JSON pointer "{pointer}": it must start with "/"')
    return [_unescape(t) for t in pointer[1:].split("/")]


def _index(container: list, token: str, pointer: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not re.fullmatch(r"0|[1-9][0-9]*", token):
        raise PatchError(f'"{pointer}": "{token}" is not an array index')
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError(f'"{pointer}": index {i} is out of range (the array has {len(container)} items)')
    return i


def _walk(doc: Any, tokens: list[str], pointer: str) -> Any:
    """The node the tokens lead to from doc (RFC 6901 evaluation); PatchError naming the pointer where one of
    them does not exist. The one walk `get_pointer` and every operation's parent lookup share."""
    node = doc
    for t in tokens:
        if isinstance(node, dict):
            if t not in node:
                raise PatchError(f'"{pointer}": no field "{t}"')
            node = node[t]
        elif isinstance(node, list):
            node = node[_index(node, t, pointer, False)]
        else:
            raise PatchError(f'"{pointer}": "{t}" is below a value that is not an object or array')
    return node


def _parent(doc: Any, pointer: str) -> tuple[Any, str]:
    tokens = split_pointer(pointer)
    if not tokens:
        raise PatchError('the root "" cannot be the target of this operation')
    return _walk(doc, tokens[:-1], pointer), tokens[-1]


def get_pointer(doc: Any, pointer: str) -> Any:
    """The value at a JSON pointer; PatchError when it does not exist."""
    return _walk(doc, split_pointer(pointer), pointer)


def _add(doc: Any, pointer: str, value: Any) -> Any:
    if pointer == "":
        return value
    parent, last = _parent(doc, pointer)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, pointer, True), value)
    else:
        raise PatchError(f'"{pointer}": the parent is not an object or array')
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    parent, last = _parent(doc, pointer)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f'"{pointer}": no field "{last}" to remove')
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, pointer, False))
    raise PatchError(f'"{pointer}": the parent is not an object or array')


def json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply RFC 6902 operations to a deep copy of `doc`; all or nothing (PatchError names the failing op)."""
    doc = copy.deepcopy(doc)
    for n, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"operation {n}: every operation needs op and path")
        kind, path = op["op"], str(op["path"])
        try:
            if kind in ("add", "replace", "test") and "value" not in op:
                raise PatchError(f'"{path}": {kind} needs a value')
            if kind == "add":
                doc = _add(doc, path, copy.deepcopy(op["value"]))
            elif kind == "remove":
                doc, _ = _remove(doc, path)
            elif kind == "replace":
                if path == "":
                    doc = copy.deepcopy(op["value"])
                else:
                    get_pointer(doc, path)  # replace needs the target to exist (RFC 6902 4.3)
                    parent, last = _parent(doc, path)  # in place: the field keeps its position
                    parent[last if isinstance(parent, dict) else _index(parent, last, path, False)] = \
                        copy.deepcopy(op["value"])
            elif kind in ("move", "copy"):
                src = str(op.get("from", ""))
                if kind == "move" and (path + "/").startswith(src + "/") and path != src:
                    raise PatchError(f'"{path}": cannot move "{src}" into one of its own children')
                value = copy.deepcopy(get_pointer(doc, src))
                if kind == "move":
                    doc, _ = _remove(doc, src)
                doc = _add(doc, path, value)
            elif kind == "test":
                if get_pointer(doc, path) != op["value"]:
                    raise PatchError(f'"{path}": test failed: the value is {get_pointer(doc, path)!r}, '
                                     f'not {op["value"]!r}')
            else:
                raise PatchError(f'unknown op "{kind}": use add, remove, replace, move, copy or test')
        except PatchError as exc:
            raise PatchError(f"operation {n} ({kind}): {exc}") from None
    return doc


MERGE_KEY = "name"  # the patchMergeKey of the lists the sweep's axes patch (containers, flavors, resources, ...)


def _named_list(items: list) -> bool:
    return bool(items) and all(isinstance(i, dict) and MERGE_KEY in i for i in items)


def strategic_merge(doc: Any, patch: Any) -> Any:
    """kubectl's strategic merge patch of `patch` onto a deep copy of `doc` (module docstring)."""
    if isinstance(patch, dict) and isinstance(doc, dict):
        directive = patch.get("$patch")
        if directive == "replace":
            return copy.deepcopy({k: v for k, v in patch.items() if k != "$patch"})
        if directive == "delete":
            return None
        out = copy.deepcopy(doc)
        for k, v in patch.items():
            if k == "$patch":
                continue
            if v is None:
                out.pop(k, None)
            elif k in out:
                merged = strategic_merge(out[k], v)
                if merged is None:
                    out.pop(k)
                else:
                    out[k] = merged
            else:
                out[k] = copy.deepcopy(_strip(v))
        return out
    if isinstance(patch, list) and isinstance(doc, list) and _named_list(doc) and all(
            isinstance(i, dict) and MERGE_KEY in i for i in patch):
        out_list = copy.deepcopy(doc)
        for item in patch:
            at = next((i for i, d in enumerate(out_list) if d[MERGE_KEY] == item[MERGE_KEY]), None)
            if item.get("$patch") == "delete":
                if at is not None:
                    out_list.pop(at)
            elif at is None:
                out_list.append(copy.deepcopy(_strip(item)))
            else:
                out_list[at] = strategic_merge(out_list[at], item)
        return out_list
    return copy.deepcopy(_strip(patch))


def _strip(v: Any) -> Any:
    """A patch value placed where nothing was: its directives and nulls dropped, as the server stores it."""
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k != "$patch" and x is not None}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


_STEP = re.compile(r"\.?([^.\[\]\"]+)|\[(\d+)\]|\[([A-Za-z_]+)=([^\]]*)\]|\[\"([^\"]+)\"\]")


def field_pointer(obj: Any, path: str, *, must_exist: bool = False) -> str:
    """The JSON pointer of a field path (`spec.a[0].b[name=x].c`, or a pointer already, `/spec/a/0`) in `obj`;
    `[key=value]` picks the list item whose `key` is `value`, `["a.b/c"]` is a key with dots or slashes.
    PatchError when a step does not resolve (the last step may be absent unless `must_exist`)."""
    if path.startswith("/") or path == "":
        if must_exist:
            get_pointer(obj, path)
        return path
    tokens: list[str] = []
    node: Any = obj
    pos = 0
    steps = list(_STEP.finditer(path))
    if not steps or "".join(m.group(0) for m in steps) != path:
        raise PatchError(f'"{path}" is not a field path (write spec.field, spec.list[0], spec.list[name=x] or '
                         'metadata.annotations["a.b/c"])')
    for n, m in enumerate(steps):
        last = n == len(steps) - 1
        key, idx, sel_key, sel_val, quoted = m.groups()
        key = quoted if quoted is not None else key
        if key is not None:
            if not isinstance(node, dict) or (key not in node and (must_exist or not last)):
                raise PatchError(f'{path}: no field "{key}" at {path[:pos] or "the object"}')
            tokens.append(key)
            node = node.get(key)
        elif idx is not None:
            i = int(idx)
            if not isinstance(node, list) or i >= len(node):
                raise PatchError(f"{path}: no item [{i}] at {path[:pos]}")
            tokens.append(str(i))
            node = node[i]
        else:
            found = [i for i, item in enumerate(node or []) if isinstance(item, dict)
                     and str(item.get(sel_key)) == sel_val] if isinstance(node, list) else []
            if not found:
                raise PatchError(f"{path}: no item with {sel_key}={sel_val} at {path[:pos]}")
            tokens.append(str(found[0]))
            node = node[found[0]]
        pos = m.end()
    return "/" + "/".join(_escape(t) for t in tokens)

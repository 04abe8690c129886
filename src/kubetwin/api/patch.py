"""kubectl patch's three types on plain object dicts: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic
merge patch, for `kubetwin sweep`'s axes and the twin's Change objects (kubetwin.changes).

JSON patch follows RFC 6902 (add, remove, replace, move, copy, test; "-" appends; JSON pointers per RFC 6901).
The strategic merge patch follows kubectl's (k8s.io/apimachinery/pkg/util/strategicpatch): maps merge key by key,
`null` deletes a key, `$patch: replace` / `$patch: delete` on a map, and a list merges item by item on its merge
key: the sweep's policy (`by_name`) merges lists of objects that carry a `name` on it, as the API's patchMergeKey
"name" does for containers, env, volumes, and as the sweep does for Kueue's flavors and resources; the API server's
(`go_struct_keys`, a Change's) reads the built-in kinds' patchMergeKey per field (MERGE_KEYS); other lists are
replaced whole (the default for lists without a merge key).

`field_pointer` turns the twin's field paths (`spec.resourceGroups[0].flavors[name=a3].resources[0].nominalQuota`)
into JSON pointers against an object, resolving `[name=X]` to the item's index.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
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
SET = ""  # a merge policy's answer for a list of scalars merged as a set (metadata.finalizers)
# A merge policy: (field name, the list in the object, the list in the patch) -> the merge key its items merge on,
# SET, or None (the list is replaced whole).
MergePolicy = Callable[[str, list, list], "str | None"]

# patchStrategy:"merge" lists of the built-in kinds and their patchMergeKey (k8s.io/api core/v1 and apps/v1
# types.go): the API server's strategic merge patch reads them from the Go structs; a list not here is replaced.
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "imagePullSecrets": "name", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name", "schedulingGates": "name", "env": "name", "ports": "containerPort",
    "volumeMounts": "mountPath", "volumeDevices": "devicePath", "conditions": "type", "addresses": "type",
    "ownerReferences": "uid", "finalizers": SET,
}


def _named_list(items: list) -> bool:
    return bool(items) and all(isinstance(i, dict) and MERGE_KEY in i for i in items)


def by_name(field: str, doc: list, patch: list) -> str | None:
    """The sweep's policy: lists whose items all carry a `name` merge on it (its axes patch CRDs' lists too,
    Kueue's flavors and resources, which have no Go struct to read a strategy from); other lists are replaced."""
    return MERGE_KEY if _named_list(doc) and all(isinstance(i, dict) and MERGE_KEY in i for i in patch) else None


def go_struct_keys(kind: str) -> MergePolicy:
    """The API server's policy for a built-in kind: MERGE_KEYS by field name (a Service's ports merge on `port`)."""
    def policy(field: str, doc: list, patch: list) -> str | None:
        if field == "ports" and kind == "Service":
            return "port"
        return MERGE_KEYS.get(field)
    return policy


def strategic_merge(doc: Any, patch: Any, policy: MergePolicy = by_name, field: str = "") -> Any:
    """kubectl's strategic merge patch of `patch` onto a deep copy of `doc` (k8s.io/apimachinery/pkg/util/
    strategicpatch): maps merge key by key, `null` deletes, `$patch: replace | delete | merge` on a map or a list
    item, `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`; a list merges item by item on the key
    `policy` names for its field (`by_name`: the sweep's; `go_struct_keys(kind)`: the API server's), else it is
    replaced. None when the patch deletes `doc` itself (`$patch: delete` on a map)."""
    if isinstance(patch, dict) and isinstance(doc, dict):
        directive = patch.get("$patch")
        if directive == "replace":
            return copy.deepcopy(_strip({k: v for k, v in patch.items() if k != "$patch"}))
        if directive == "delete":
            return None
        if directive not in (None, "merge"):
            raise PatchError(f'{field or "the patch"}: $patch: unknown patch type "{directive}"')
        out = copy.deepcopy(doc)
        orders: dict[str, list] = {}
        for k, v in patch.items():
            if k == "$patch":
                continue
            if k.startswith("$deleteFromPrimitiveList/"):
                name = k.split("/", 1)[1]
                out[name] = [x for x in out.get(name) or [] if x not in (v if isinstance(v, list) else [])]
                continue
            if k.startswith("$setElementOrder/"):
                orders[k.split("/", 1)[1]] = v if isinstance(v, list) else []
                continue
            if k.startswith("$"):
                raise PatchError(f'{field + "." if field else ""}{k}: unknown directive')
            if v is None:
                out.pop(k, None)
            elif k in out:
                merged = strategic_merge(out[k], v, policy, k)
                if merged is None:
                    out.pop(k)
                else:
                    out[k] = merged
            elif isinstance(v, list) and policy(k, [], v) not in (None, SET):
                out[k] = _merge_items([], v, str(policy(k, [], v)), policy, k)
            else:
                out[k] = copy.deepcopy(_strip(v))
        for name, order in orders.items():  # the order the client saw; items it did not list keep theirs, after
            out[name] = _ordered(out.get(name) or [], order, policy(name, out.get(name) or [], order))
        return out
    if isinstance(patch, list) and isinstance(doc, list):
        key = policy(field, doc, patch)
        if key == SET:
            return [*copy.deepcopy(doc), *(copy.deepcopy(x) for x in patch if x not in doc)]
        if key is not None:
            return _merge_items(doc, patch, key, policy, field)
    return copy.deepcopy(_strip(patch))


def _merge_items(doc: list, patch: list, key: str, policy: MergePolicy, field: str) -> list:
    """A list merged item by item on `key`: a patch item replaces, deletes ($patch: delete) or merges into the
    item with its key; one with a new key is appended; `$patch: replace` as an item replaces the whole list."""
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(_strip(i)) for i in patch if not (isinstance(i, dict) and set(i) == {"$patch"})]
    out_list = copy.deepcopy(doc)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"{field}: map: {item!r} does not contain declared merge key: {key}")
        at = next((i for i, d in enumerate(out_list) if isinstance(d, dict) and d.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                out_list.pop(at)
        elif at is None:
            out_list.append(copy.deepcopy(_strip(item)))
        else:
            out_list[at] = strategic_merge(out_list[at], item, policy, field)
    return out_list


def _ordered(items: list, order: list, key: str | None) -> list:
    def ident(e: Any) -> Any:
        return e.get(key) if key and isinstance(e, dict) else e

    rank = {w: i for i, w in enumerate(ident(o) for o in order) if isinstance(w, (str, int, float))}
    return sorted(items, key=lambda e: rank.get(ident(e), len(rank)))


def _strip(v: Any) -> Any:
    """A patch value placed where nothing was: its directives and nulls dropped, as the server stores it."""
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k != "$patch" and x is not None}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386 MergePatch): maps merge key by key, `null` deletes a key, anything else (lists
    included) replaces. A new value; neither argument is changed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def merge_diff(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: changed keys, removed ones as null."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    out = {k: None for k in old if k not in new}
    for k, v in new.items():
        if k not in old:
            out[k] = v
        elif old[k] != v:
            out[k] = merge_diff(old[k], v)
    return out


PATCH_TYPES = ("strategic", "merge", "json")  # kubectl patch --type (default strategic)
UNSUPPORTED_STRATEGIC = ("the body of the request was in an unknown format - accepted media types include: "
                         "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")


def apply_patch(obj: dict[str, Any], patch: Any, patch_type: str, custom: bool = False) -> dict[str, Any]:
    """`kubectl patch --type patch_type` as the API server applies it: `strategic` with the built-in kinds' merge
    keys (go_struct_keys; refused for a custom resource, `custom`, which has no Go struct: 415), `merge` (RFC
    7386), `json` (RFC 6902). The patch may not change what names the object (apiVersion, kind, metadata.name and
    namespace): the API server answers 422."""
    if patch_type == "json":
        if not isinstance(patch, list):
            raise PatchError("a json patch is a list of operations (RFC 6902)")
        out = json_patch(obj, patch)
    elif patch_type == "merge":
        out = merge_patch(obj, patch)
    elif patch_type == "strategic":
        if custom:
            raise PatchError(UNSUPPORTED_STRATEGIC)
        out = strategic_merge(obj, patch, go_struct_keys(str(obj.get("kind", ""))))
    else:
        raise PatchError(f"--type must be one of {list(PATCH_TYPES)}, not {patch_type!r}")
    if not isinstance(out, dict):
        raise PatchError("the patch made the object something other than an object")
    meta, new = obj.get("metadata") or {}, out.get("metadata") or {}
    for name, before, after in (("apiVersion", obj.get("apiVersion"), out.get("apiVersion")),
                                ("kind", obj.get("kind"), out.get("kind")),
                                ("metadata.name", meta.get("name"), new.get("name")),
                                ("metadata.namespace", meta.get("namespace"), new.get("namespace"))):
        if before != after:
            raise PatchError(f"{name}: Invalid value: {after!r}: field is immutable")
    return out


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

"""Read YAML manifests (files, folders, multi-document files, kubectl List dumps) keeping line numbers.

PyYAML on libyaml: values from its loader, each field's line from its composed node tree (a pass over the same
stream). Scalars follow YAML 1.1 as go-yaml does for kubectl (`yes` is a boolean), timestamps stay strings,
and duplicate keys are an error as in sigs.k8s.io/yaml's strict decoding. A JSON document takes api/jsonfast.py;
a stream of plain documents (a `kubectl get -o yaml` dump) takes `_fast_yaml`: the same values built in one walk
over the composed nodes, the lines composed again only when a message asks for one.

Hostile input is bounded the way the API server bounds it (api/limits.py): a document over the request body limit
is refused before it is composed, alias expansion is capped by go-yaml's own heuristic, and nesting by a depth cap,
so no input takes more than bounded memory and time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubetwin.api import jsonfast, limits
from kubetwin.api.errors import Diagnostic, KubetwinError


@dataclass
class Manifest:
    """One object as written by the user, plus where each field came from."""

    obj: dict[str, Any]
    file: str
    line: int
    lines: dict[str, int] = field(default_factory=dict)  # field path -> line
    flags: dict[str, str] = field(default_factory=dict)  # field path -> the command-line flag that set it
    # field path -> line of the `|` of a literal block scalar: its text's line k is the file's line blocks[path] + k
    # (a YAML document held in a ConfigMap key keeps its own file:line this way, kueue/config.py)
    blocks: dict[str, int] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind") or "")

    @property
    def ref(self) -> str:
        meta = self.obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = limits.shown(meta.get("name") or "<unnamed>", 100)
        ns = limits.shown(meta.get("namespace"), 100) if meta.get("namespace") else None
        kind = limits.shown(self.kind, 100) or "<no kind>"
        return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"

    def line_of(self, path: str) -> int:
        """Line of the closest enclosing field that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return self.line


_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """libyaml's parser with YAML 1.1 scalars as go-yaml (kubectl) reads them, except that timestamps stay
    strings (Kubernetes fields such as creationTimestamp are strings)."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in _Base.yaml_implicit_resolvers.items()}


class _FastLoader(_Loader):
    """_Loader with the tag of a plain scalar remembered by its text: libyaml's composer asks Python's resolver for
    each one (its regular expressions, in order: 12 % of reading a large dump), and a dump repeats the same keys
    and values thousands of times. The same tags: with no path resolvers (none is added), a plain scalar's tag is
    a function of its text alone (BaseResolver.resolve)."""

    _tags: dict[str, str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0] and not self.yaml_path_resolvers:
            tag = self._tags.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if len(self._tags) >= 100_000:
                    self._tags.clear()
                self._tags[value] = tag
            return tag
        return super().resolve(kind, value, implicit)


def _lines(node: yaml.Node, path: str, lines: dict[str, int], dups: list[tuple[int, str]],
           blocks: dict[str, int] | None = None) -> None:
    """Record the 1-based line of every field path below a composed node (and of literal block scalars' `|`);
    note duplicate keys."""
    if isinstance(node, yaml.ScalarNode) and node.style == "|" and blocks is not None:
        blocks[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                dups.append((key.start_mark.line + 1, name))
            seen.add(name)
            sub = f"{path}.{name}" if path else name
            lines[sub] = key.start_mark.line + 1
            _lines(value, sub, lines, dups, blocks)
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            sub = f"{path}[{i}]"
            lines[sub] = value.start_mark.line + 1
            _lines(value, sub, lines, dups, blocks)


def _plain(value: Any) -> Any:
    """Mapping keys as strings (YAML allows `1: x`; Kubernetes objects have string keys), and values as JSON has
    them, as sigs.k8s.io/yaml's YAMLToJSON leaves them: whole floats as integers (Go's encoding/json writes
    float64 2.0 as `2`), explicit `!!binary` as its text, `!!timestamp` as a string, `!!set` as a mapping to nulls."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return {str(k): None for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)  # YAMLToJSON writes float64 2.0 as JSON 2, which the API server decodes as an integer
    if value is None or isinstance(value, (str, int, float)):
        return value
    return str(value)  # datetime/date from an explicit !!timestamp


def _files(paths: list[str | Path]) -> list[Path]:
    out: list[Path] = []
    missing: list[Diagnostic] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(f for f in path.rglob("*") if f.suffix in (".yaml", ".yml", ".json") and f.is_file()))
        elif path.is_file():
            out.append(path)
        else:
            flag_value = str(p).lower() in ("true", "false", "yes", "no", "1", "0")
            missing.append(Diagnostic(str(path), 0, "-", "", "no such file or directory",
                                      f"flags such as --overwrite take no value: drop '{p}' (write --overwrite "
                                      "alone)" if flag_value else "pass existing YAML files or folders of them"))
    if missing:
        raise KubetwinError(missing)
    return out


def expand_paths(paths: list[str | Path]) -> list[Path]:
    """The files below the paths, in load_paths' order (folders: their .yaml, .yml and .json files, sorted);
    KubetwinError for a path that does not exist."""
    return _files(paths)


def _documents(text: str, file: str) -> Iterator[tuple[yaml.Node, Any]]:
    """(composed node, value) per document, one document at a time so only one composed tree is held (each is
    bounded before it is constructed); YAML errors as diagnostics with the parser's position."""
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            problem = limits.document_problem(node, file)
            if problem:
                raise KubetwinError([problem])
            try:
                value = loader.construct_document(node)
            except (ValueError, TypeError, OverflowError) as exc:  # an explicit tag the value does not fit
                raise KubetwinError([Diagnostic(file, node.start_mark.line + 1, "-", "",
                                                f"yaml: cannot decode a value as the type its tag names: "
                                                f"{limits.shown(exc, 120)}",
                                                "remove the explicit tag (!!int, !!float, ...) or fix the value")]
                                     ) from None
            yield node, value
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem_text = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        raise KubetwinError([Diagnostic(file, line, "-", "", f"YAML syntax error: {problem_text}{context}",
                                        "check indentation and quoting around this line")]) from None
    except yaml.YAMLError as exc:
        raise KubetwinError([Diagnostic(file, 0, "-", "", f"YAML error: {exc}", "")]) from None
    finally:
        loader.dispose()


def _per_item(lines: dict[str, int]) -> dict[int, dict[str, int]]:
    """`items[i].path -> line` as {i: {path: line}}."""
    out: dict[int, dict[str, int]] = {}
    for key, line in lines.items():
        if key.startswith("items["):
            close = key.find("].", 6)
            if close > 0 and key[6:close].isdigit():
                out.setdefault(int(key[6:close]), {})[key[close + 2:]] = line
    return out


def field_lines(text: str) -> dict[str, int]:
    """Every field path's line in one YAML (or JSON) document's text (jsonfast.LazyLines asks, for one item)."""
    lines: dict[str, int] = {}
    for node, _ in _documents(text, "<item>"):
        _lines(node, "", lines, [])
        break
    return lines


class _NotFast(Exception):
    """A document for load_text's general path (it says what is wrong, or reads what the fast path does not)."""


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_SCALARS = {"tag:yaml.org,2002:null": _Loader.construct_yaml_null,  # SafeConstructor's own, as the general path's
            "tag:yaml.org,2002:bool": _Loader.construct_yaml_bool, "tag:yaml.org,2002:int": _Loader.construct_yaml_int,
            "tag:yaml.org,2002:float": _Loader.construct_yaml_float}


def _value(loader: _Loader, node: yaml.Node, depth: int, seen: set[int] | None) -> Any:
    """A composed node's value as load_text's general path gives it (PyYAML's SafeConstructor, then `_plain`), for
    the documents a kubectl dump holds: mappings with string keys, sequences, and strings, numbers, booleans and
    nulls. Anything else raises _NotFast: a key written twice, a key not a string (`1:`, `<<:` merge keys), other
    tags (!!binary, !!set...), an alias (`seen`: the ids of the nodes met so far, when the text has an `&`), a
    NaN or infinity, nesting at limits.MAX_DEPTH (as limits.document_problem counts it)."""
    if seen is not None:
        if id(node) in seen:
            raise _NotFast
        seen.add(id(node))
    tag = node.tag
    if tag == _STR and isinstance(node, yaml.ScalarNode):
        return node.value
    if isinstance(node, yaml.ScalarNode):
        construct = _SCALARS.get(tag)
        if construct is None:
            raise _NotFast
        try:
            value = construct(loader, node)
        except Exception:  # noqa: BLE001 - an explicit tag its value does not fit (`!!int abc`): the general path
            raise _NotFast from None
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise _NotFast
            if value.is_integer() and abs(value) < 2**63:
                return int(value)
        return value
    if node.value and depth >= limits.MAX_DEPTH:
        raise _NotFast
    if tag == _MAP and isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key, sub in node.value:
            if key.tag != _STR or not isinstance(key, yaml.ScalarNode) or key.value in out:
                raise _NotFast
            if seen is not None:
                if id(key) in seen:
                    raise _NotFast
                seen.add(id(key))
            out[key.value] = _value(loader, sub, depth + 1, seen)
        return out
    if tag == _SEQ and isinstance(node, yaml.SequenceNode):
        return [_value(loader, sub, depth + 1, seen) for sub in node.value]
    raise _NotFast


class _FileLines:
    """Each document's field lines and literal blocks, from the text composed again the first time one is asked
    for (a message's file:line): the fast path keeps no node tree."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.docs: list[tuple[dict[str, int], dict[str, int]]] | None = None
        self.items: dict[int, tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]] = {}

    def document(self, k: int) -> tuple[dict[str, int], dict[str, int]]:
        if self.docs is None:
            self.docs = []
            loader = _Loader(self.text)
            try:
                while loader.check_node():
                    node = loader.get_node()
                    if node is None:
                        continue
                    lines: dict[str, int] = {}
                    blocks: dict[str, int] = {}
                    _lines(node, "", lines, [], blocks)
                    self.docs.append((lines, blocks))
            finally:
                loader.dispose()
        return self.docs[k]

    def lazy(self, k: int, i: int | None, which: int) -> jsonfast.LazyLines:
        """Document k's (item i's, of a List) field lines (which=0) or literal blocks (1), found when asked."""
        if i is None:
            return jsonfast.LazyLines(lambda: self.document(k)[which])
        return jsonfast.LazyLines(lambda: self.item(k, i)[which])

    def item(self, k: int, i: int) -> tuple[dict[str, int], dict[str, int]]:
        if k not in self.items:
            lines, blocks = self.document(k)
            self.items[k] = (_per_item(lines), _per_item(blocks))
        item_lines, item_blocks = self.items[k]
        return item_lines.get(i, {}), item_blocks.get(i, {})


# An object's stored JSON is at most ~10 characters per character of its YAML text (an astral character, written
# as two \\u escapes, as the key of an implicit null in a flow mapping: `{😀, ...}`); text 16 times under etcd's limit
# holds no object over it, so its objects are not encoded to be measured.
_SMALL_TEXT = limits.MAX_OBJECT_BYTES // 16


def _may_be_too_large(node: yaml.Node, obj: dict[str, Any], parts: list[Any] | None) -> bool:
    """Whether an object load_text measures (the document, or each List item: limits.list_items) has text over
    _SMALL_TEXT; a snapshot of object lists is always measured."""
    if parts is None:
        return node.end_mark.index - node.start_mark.index > _SMALL_TEXT
    if str(obj.get("kind", "")).endswith("List"):
        items = next(v for key, v in node.value if key.value == "items")
        return any(item.end_mark.index - item.start_mark.index > _SMALL_TEXT for item in items.value)
    return True


def _fast_yaml(text: str, file: str) -> list[Manifest] | None:
    """The manifests of a YAML stream whose documents `_value` takes, the same as the general path gives, their
    field lines found only when a message asks for one (a LazyLines, as a JSON dump's; issue 36: a `-o yaml`
    dump of a 1,000-node cluster read ~2x faster). None: the general path reads it (and reports what is wrong)."""
    out: list[Manifest] = []
    found = _FileLines(text)
    loader = _FastLoader(text)
    anchors = "&" in text  # once for the file, not per document (a scan of the whole text)
    k = -1
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            k += 1
            if limits.part_too_large(node):
                return None
            obj = _value(loader, node, 1, set() if anchors else None)
            if obj is None:
                continue
            if not isinstance(obj, dict):
                return None
            parts = limits.list_items(obj)
            if len(text) > _SMALL_TEXT and _may_be_too_large(node, obj, parts) and any(
                    limits.object_too_large(o, file, 0) for o in (parts if parts is not None else [obj])):
                return None
            start = node.start_mark.line + 1
            if limits.is_list(obj):
                items = obj.get("items") or []
                item_nodes = next((v.value for key, v in node.value if key.value == "items"), None)
                if not isinstance(items, list) or not isinstance(item_nodes, list) \
                        or not all(isinstance(item, dict) for item in items):
                    return None
                for i, (item, item_node) in enumerate(zip(items, item_nodes, strict=True)):
                    out.append(Manifest(item, file, item_node.start_mark.line + 1, found.lazy(k, i, 0),
                                        blocks=found.lazy(k, i, 1)))
            else:
                out.append(Manifest(obj, file, start, found.lazy(k, None, 0), blocks=found.lazy(k, None, 1)))
    except (_NotFast, yaml.YAMLError, RecursionError):
        return None
    finally:
        loader.dispose()
    return out


def load_text(text: str, file: str = "<string>") -> list[Manifest]:
    """Parse one YAML stream; raises KubetwinError with the YAML parser's position on syntax errors. A JSON
    document takes the C decoder, its field lines found when asked (api/jsonfast.py); whatever that path does not
    take comes here."""
    too_big = limits.stream_too_large(text, file)
    if too_big:
        raise KubetwinError([too_big])
    fast = jsonfast.documents(text, lambda item: field_lines(item)) if text.lstrip()[:1] == "{" else None
    if fast is not None:
        return [Manifest(obj, file, line, lines) for line, obj, lines in fast]
    fast_yaml = _fast_yaml(text, file)
    if fast_yaml is not None:
        return fast_yaml
    out: list[Manifest] = []
    errors: list[Diagnostic] = []
    for node, doc in _documents(text, file):
        if doc is None:
            continue
        start = node.start_mark.line + 1
        if not isinstance(doc, dict):
            errors.append(Diagnostic(file, start, "-", "", f"a manifest must be a mapping, got {type(doc).__name__}",
                                     "each YAML document must be one Kubernetes object (apiVersion, kind, metadata…)"))
            continue
        lines: dict[str, int] = {}
        blocks: dict[str, int] = {}
        dups: list[tuple[int, str]] = []
        _lines(node, "", lines, dups, blocks)
        for line, key in dups:  # sigs.k8s.io/yaml (strict) rejects them; PyYAML would keep the last silently
            errors.append(Diagnostic(file, line, "-", key, f'yaml: unmarshal errors: line {line}: key "{key}" '
                                     "already set in map", "remove one of the two entries"))
        obj = _plain(doc)
        parts = limits.list_items(obj)  # a List's items (or a snapshot's objects) are stored one by one
        unsupported = limits.json_problem(obj, file, start) or next(
            (d for d in (limits.object_too_large(o, file, start) for o in (parts if parts is not None else [obj]))
             if d), None)
        if unsupported:
            errors.append(unsupported)
            continue
        if limits.is_list(obj):
            # each item's field lines, in one pass over the document's (a dump holds thousands of items)
            item_lines, item_blocks = _per_item(lines), _per_item(blocks)
            for i, item in enumerate(obj.get("items") or []):
                if not isinstance(item, dict):
                    errors.append(Diagnostic(file, lines.get(f"items[{i}]", start), "List", f"items[{i}]",
                                             "list items must be objects", ""))
                    continue
                out.append(Manifest(item, file, lines.get(f"items[{i}]", start), item_lines.get(i, {}),
                                    blocks=item_blocks.get(i, {})))
        else:
            out.append(Manifest(obj, file, start, lines, blocks=blocks))
    if errors:
        raise KubetwinError(errors)
    return out


def load_paths(paths: list[str | Path]) -> list[Manifest]:
    """Load every manifest below the given paths, in a stable order; no manifest at all is an error, as
    `kubectl apply -f` of an empty file says."""
    manifests: list[Manifest] = []
    errors: list[Diagnostic] = []
    files = _files(paths)
    for f in files:
        try:
            if f.stat().st_size > limits.MAX_FILE_BYTES:
                errors.append(limits.file_too_large(str(f), f.stat().st_size))
                continue
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(Diagnostic(str(f), 0, "-", "", f"cannot read file: {exc}", ""))
            continue
        try:
            manifests.extend(load_text(text, str(f)))
        except KubetwinError as exc:
            errors.extend(exc.diagnostics)
    if not errors and not manifests:
        errors.append(no_objects(paths, bool(files)))
    if errors:
        raise KubetwinError(errors)
    return manifests


def no_objects(paths: Sequence[str | Path], found_files: bool) -> Diagnostic:
    """kubectl apply's answer to paths that hold no object (`found_files`: some .yaml/.yml/.json file was there)."""
    where = ", ".join(str(p) for p in paths) or "<no paths>"
    return Diagnostic(where, 0, "-", "", "no objects passed to apply" if found_files else
                      "no objects passed to apply: no .yaml, .yml or .json files found",
                      "pass files that hold at least one manifest (apiVersion, kind, metadata...)")

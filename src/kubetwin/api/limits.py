"""Bounds on what one input may cost, taken from the API server and its YAML decoder.

- The request body: the API server reads at most `MaxRequestBodyBytes` = 3 MiB of one request
  (k8s.io/apiserver pkg/server/config.go, `MaxRequestBodyBytes: int64(3 * 1024 * 1024)`; larger bodies get
  "Request entity too large: limit is 3145728", apiserver pkg/endpoints/handlers/rest.go limitedReadBody).
  `kubectl apply -f` sends each document of a file as its own request, so the limit is per document.
- The stored object: etcd refuses a request over its `--max-request-bytes` default 1.5 MiB
  (go.etcd.io/etcd server/embed/config.go DefaultMaxRequestBytes = 1.5 * 1024 * 1024) with
  "etcdserver: request is too large".
- Alias expansion: sigs.k8s.io/yaml decodes with go-yaml v2, whose decoder counts every node it decodes and those
  reached through an alias, and fails with "document contains excessive aliasing" when more than 100 aliased nodes
  make up more than `allowedAliasRatio` of over 1000 decoded ones (gopkg.in/yaml.v2@v2.4.0 decode.go:313-357; the
  fix for CVE-2019-11253, kubernetes/kubernetes#83253).
- Nesting: go-yaml stops at "exceeded max depth of 10000" and libyaml at 1000 levels; the twin's checks walk
  objects recursively in Python, so it stops at `MAX_DEPTH` (a twin limit, far above any real manifest).
- A file: `MAX_FILE_BYTES` (a twin limit: files are read whole; kubectl streams them).
- Integers: a field of OpenAPI format int32 / int64 decodes into Go's int32 / int64 (`INT32`, `INT64`), and a
  number outside that range fails JSON decoding (`int_format_problem`; the built-in schemas, the CRD schemas and
  the field rules all ask it).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

from kubetwin.api.errors import Diagnostic

MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024  # apiserver MaxRequestBodyBytes
MAX_OBJECT_BYTES = 3 * 1024 * 1024 // 2  # etcd DefaultMaxRequestBytes (1.5 MiB)
MAX_FILE_BYTES = 16 * 1024 * 1024  # twin limit
MAX_DEPTH = 100  # twin limit (Python recursion); go-yaml: 10000, libyaml: 1000
# The ranges of OpenAPI's int32 / int64 formats: Go's int32 and int64, which the API server decodes into.
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000  # go-yaml alias_ratio_range_low / _high


def allowed_alias_ratio(decode_count: int) -> float:
    """go-yaml v2's allowedAliasRatio: 99 % of small documents may come from aliases, scaling to 10 % at 4M."""
    if decode_count <= _ALIAS_RATIO_LOW:
        return 0.99
    if decode_count >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decode_count - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def document_problem(node: yaml.Node, file: str) -> Diagnostic | None:
    """A composed document over the request body limit, nested past MAX_DEPTH, or whose aliases expand past
    go-yaml's heuristic. The walk follows go-yaml's decode order (depth first, in document order): the first
    visit of a node is its anchor, later visits are aliases (PyYAML's composer shares the node)."""
    line = node.start_mark.line + 1
    for part in _list_items(node) or [node]:  # kubectl sends a List's items one request each
        size = part.end_mark.index - part.start_mark.index
        if size > MAX_REQUEST_BODY_BYTES:
            return Diagnostic(file, part.start_mark.line + 1, "-", "",
                              f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}",
                              "split the document: the API server reads at most 3 MiB per object")
    decoded = aliased = 0
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(node, 1, False)]
    while stack:
        current, depth, under_alias = stack.pop()
        under_alias = under_alias or id(current) in seen
        seen.add(id(current))
        decoded += 1
        aliased += under_alias
        if aliased > 100 and decoded > 1000 and aliased / decoded > allowed_alias_ratio(decoded):
            return Diagnostic(file, line, "-", "", "yaml: document contains excessive aliasing",
                              "write the values out instead of expanding anchors (&) through aliases (*) again "
                              "and again")
        children = _children(current)
        if children and depth >= MAX_DEPTH:
            return Diagnostic(file, current.start_mark.line + 1, "-", "",
                              f"yaml: exceeded max depth of {MAX_DEPTH} (a twin limit; go-yaml stops at 10000)",
                              "flatten the document: no Kubernetes object nests this deep")
        stack.extend((c, depth + 1, under_alias) for c in reversed(children))
    return None


def part_too_large(node: yaml.Node) -> bool:
    """Whether the document, or one of a List's items, is over the request body limit (document_problem's first
    check, alone: loader's fast path checks the rest as it walks)."""
    return any(part.end_mark.index - part.start_mark.index > MAX_REQUEST_BODY_BYTES
               for part in _list_items(node) or [node])


def _list_items(node: yaml.Node) -> list[yaml.Node] | None:
    """The items of a `kind: ...List` document (a kubectl dump), which kubectl apply sends as one request each
    (its resource builder flattens a List: k8s.io/cli-runtime pkg/resource, FlattenListVisitor); None otherwise."""
    if not isinstance(node, yaml.MappingNode):
        return None
    fields = {str(k.value): v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
    kind, items = fields.get("kind"), fields.get("items")
    if isinstance(kind, yaml.ScalarNode) and str(kind.value).endswith("List") and isinstance(items, yaml.SequenceNode):
        return list(items.value)
    if kind is None and "apiVersion" not in fields and fields and all(  # a snapshot of object lists (importer/)
            isinstance(v, yaml.SequenceNode) or isinstance(v, yaml.ScalarNode) and v.value in ("", "null")
            or k == "schedulerConfig" for k, v in fields.items()):
        return [item for v in fields.values() if isinstance(v, yaml.SequenceNode) for item in v.value]
    return None


# A kubectl List's text: `items:` at the top level (kubectl sorts apiVersion before it), or JSON's "items" key;
# kube-scheduler-simulator's export: a JSON object of object lists (pods, nodes, ...), read as kubectl reads a List.
_LIST_TEXT = re.compile(r'^items:|^\s*\{\s*"apiVersion"\s*:\s*"v1"\s*,\s*"items"\s*:'
                        r'|^\s*\{\s*"(pods|nodes|pvs|pvcs|storageClasses|priorityClasses|namespaces)"\s*:', re.M)


def stream_too_large(text: str, file: str) -> Diagnostic | None:
    """Before parsing: one document (text between `---` lines) over the request body limit. A kubectl List is
    not one request: its items are checked one by one once composed (document_problem), within the file limit."""
    if len(text) <= MAX_REQUEST_BODY_BYTES:
        return None
    bounds = [0, *_document_starts(text), len(text)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b - a > MAX_REQUEST_BODY_BYTES and not _LIST_TEXT.search(text, a, min(b, a + 4096)):
            return Diagnostic(file, text.count("\n", 0, a) + 1, "-", "",
                              f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}",
                              "split the document: the API server reads at most 3 MiB per object")
    return None


def _document_starts(text: str) -> list[int]:
    """Where each `---` that starts a line is (re's `^---` in MULTILINE mode), found by str.find: a regex tries
    every position of a 13 MB dump (~50 ms), find skips to the newlines (~8 ms)."""
    starts = [0] if text.startswith("---") else []
    i = text.find("\n---")
    while i >= 0:
        starts.append(i + 1)
        i = text.find("\n---", i + 1)
    return starts


def file_too_large(file: str, size: int) -> Diagnostic:
    return Diagnostic(file, 0, "-", "", f"file is {size} bytes: kubetwin reads files of at most {MAX_FILE_BYTES} "
                      "bytes (a twin limit)", "split the manifests over several files in a folder")


def json_problem(obj: Any, file: str, line: int) -> Diagnostic | None:
    """A value JSON cannot carry (`.nan`, `.inf`): sigs.k8s.io/yaml's YAMLToJSON fails on it."""
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            return Diagnostic(file, line, "-", path, f"error converting YAML to JSON: json: unsupported value: "
                              f"{'NaN' if math.isnan(value) else ('+Inf' if value > 0 else '-Inf')}",
                              "write a finite number")
    return None


def object_too_large(obj: Any, file: str, line: int) -> Diagnostic | None:
    """The object as stored (JSON) over etcd's request limit."""
    size = len(json.dumps(obj, separators=(",", ":"), default=str))
    if size > MAX_OBJECT_BYTES:
        return Diagnostic(file, line, "-", "", f"etcdserver: request is too large ({size} bytes; etcd takes "
                          f"at most {MAX_OBJECT_BYTES})", "make the object smaller: etcd stores at most 1.5 MiB")
    return None


def is_list(obj: dict[str, Any]) -> bool:
    """Whether a document is a `kind: List` (or a `...List` with items) whose items are the objects, as kubectl reads
    it: `kind: List` with no items is a list of none ("no objects passed to apply")."""
    return obj.get("kind") == "List" or (str(obj.get("kind", "")).endswith("List") and "items" in obj)


def list_items(obj: Any) -> list[Any] | None:
    """The objects of a decoded `kind: ...List` (or of a snapshot of object lists, _list_items), each stored on its
    own; None for any other document."""
    if not isinstance(obj, dict):
        return None
    if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
        return list(obj["items"])
    if "kind" not in obj and "apiVersion" not in obj and obj and all(
            isinstance(v, list) or v is None or k == "schedulerConfig" for k, v in obj.items()):
        return [o for v in obj.values() if isinstance(v, list) for o in v]
    return None


def shown(value: Any, limit: int = 80) -> str:
    """A value for a message, cut so a huge one does not flood the output."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def int_format_problem(value: object, fmt: str, written: object = None) -> str | None:
    """An integer out of its OpenAPI format's range: the API server's JSON decoding into an int32/int64 field
    fails ("cannot unmarshal number 3000000000 into Go struct field ... of type int32")."""
    lo, hi = INT32 if fmt == "int32" else INT64
    if isinstance(value, float) and value.is_integer():
        value, written = int(value), value if written is None else written
    if isinstance(value, int) and not isinstance(value, bool) and not lo <= value <= hi:
        return f"json: cannot unmarshal number {shown(value if written is None else written)} into Go struct field " \
               f"of type {fmt}"
    return None

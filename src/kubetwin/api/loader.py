"""Read YAML manifests (files, folders, multi-document files, kubectl List dumps) keeping line numbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from kubetwin.api.errors import Diagnostic, KubetwinError


@dataclass
class Manifest:
    """One object as written by the user, plus where each field came from."""

    obj: dict[str, Any]
    file: str
    line: int
    lines: dict[str, int] = field(default_factory=dict)  # field path -> line

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind") or "")

    @property
    def ref(self) -> str:
        meta = self.obj.get("metadata") if isinstance(self.obj.get("metadata"), dict) else {}
        name = meta.get("name") or "<unnamed>"
        ns = meta.get("namespace")
        return f"{self.kind or '<no kind>'}/{ns}/{name}" if ns else f"{self.kind or '<no kind>'}/{name}"

    def line_of(self, path: str) -> int:
        """Line of the closest enclosing field that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return self.line


def _plain(node: Any, path: str, lines: dict[str, int]) -> Any:
    """Convert ruamel nodes to plain dict/list, recording 1-based line numbers per field path."""
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key, value in node.items():
            sub = f"{path}.{key}" if path else str(key)
            try:
                lines[sub] = node.lc.key(key)[0] + 1
            except (KeyError, TypeError, AttributeError):
                pass
            out[str(key)] = _plain(value, sub, lines)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, value in enumerate(node):
            sub = f"{path}[{i}]"
            try:
                lines[sub] = node.lc.item(i)[0] + 1
            except (KeyError, TypeError, AttributeError):
                pass
            items.append(_plain(value, sub, lines))
        return items
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


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
            missing.append(Diagnostic(str(path), 0, "-", "", "no such file or directory",
                                      "pass existing YAML files or folders of them"))
    if missing:
        raise KubetwinError(missing)
    return out


def load_text(text: str, file: str = "<string>") -> list[Manifest]:
    """Parse one YAML stream; raises KubetwinError with the YAML parser's position on syntax errors."""
    yaml = YAML(typ="rt")
    try:
        docs = list(yaml.load_all(text))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        raise KubetwinError([Diagnostic(file, line, "-", "", f"YAML syntax error: {problem}{context}",
                                        "check indentation and quoting around this line")]) from None
    except YAMLError as exc:
        raise KubetwinError([Diagnostic(file, 0, "-", "", f"YAML error: {exc}", "")]) from None
    out: list[Manifest] = []
    errors: list[Diagnostic] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, CommentedMap):
            line = doc.lc.line + 1 if hasattr(doc, "lc") else 0
            errors.append(Diagnostic(file, line, "-", "", f"a manifest must be a mapping, got {type(doc).__name__}",
                                     "each YAML document must be one Kubernetes object (apiVersion, kind, metadata…)"))
            continue
        lines: dict[str, int] = {}
        obj = _plain(doc, "", lines)
        start = doc.lc.line + 1
        if obj.get("kind") == "List" or (str(obj.get("kind", "")).endswith("List") and "items" in obj):
            for i, item in enumerate(obj.get("items") or []):
                if not isinstance(item, dict):
                    errors.append(Diagnostic(file, lines.get(f"items[{i}]", start), "List", f"items[{i}]",
                                             "list items must be objects", ""))
                    continue
                prefix = f"items[{i}]."
                sub = {k[len(prefix):]: v for k, v in lines.items() if k.startswith(prefix)}
                out.append(Manifest(item, file, lines.get(f"items[{i}]", start), sub))
        else:
            out.append(Manifest(obj, file, start, lines))
    if errors:
        raise KubetwinError(errors)
    return out


def load_paths(paths: list[str | Path]) -> list[Manifest]:
    """Load every manifest below the given paths, in a stable order."""
    manifests: list[Manifest] = []
    errors: list[Diagnostic] = []
    for f in _files(paths):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(Diagnostic(str(f), 0, "-", "", f"cannot read file: {exc}", ""))
            continue
        try:
            manifests.extend(load_text(text, str(f)))
        except KubetwinError as exc:
            errors.extend(exc.diagnostics)
    if errors:
        raise KubetwinError(errors)
    return manifests

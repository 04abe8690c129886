"""No module of kubetwin imports another module's private names or reaches them through the module (issue 33):
a name with a leading underscore is its module's own, so a change to it is a change to one file. The import graph's
rules (layers, no cycles) are import-linter contracts in pyproject.toml; this is the part import-linter cannot see."""

from __future__ import annotations

import ast
from pathlib import Path

import kubetwin

SRC = Path(kubetwin.__file__).parent


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = ["kubetwin", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = (path, ast.parse(path.read_text(), str(path)))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def cross_module_private_uses(modules: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """`from other import _x` and `other._x` where `other` is another kubetwin module (imported by any form)."""
    bad = []
    for name, (path, tree) in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                if not base.startswith("kubetwin"):
                    continue
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
                    elif _private(a.name) and base != name:
                        bad.append(f"{name}:{node.lineno} from {base} import {a.name}")
            elif isinstance(node, ast.Import):
                aliases.update({a.asname or a.name: a.name for a in node.names if a.name.startswith("kubetwin")})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and aliases.get(node.value.id, name) != name):
                bad.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return sorted(bad)


def test_no_module_uses_another_modules_private_names() -> None:
    assert cross_module_private_uses(_modules()) == []


def test_the_check_finds_both_forms(tmp_path: Path) -> None:
    """The rule bites: a module importing a sibling's private function, or calling it through the module."""
    a = ast.parse("def _helper(): ...\n")
    b = ast.parse("from kubetwin.x.a import _helper\nfrom kubetwin.x import a\nfrom . import a as aa\n"
                  "a._helper()\naa._helper()\n")
    mods = {"kubetwin.x.a": (tmp_path / "a.py", a), "kubetwin.x.b": (tmp_path / "b.py", b)}
    assert cross_module_private_uses(mods) == [
        "kubetwin.x.b:1 from kubetwin.x.a import _helper", "kubetwin.x.b:4 a._helper", "kubetwin.x.b:5 aa._helper"]

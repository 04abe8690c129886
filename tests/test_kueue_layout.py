"""Kueue's package layout as upstream lays it out (issue 18): modules talk through public names only and touch
private attributes only on themselves, preemption is upstream's package, collaborators are not mixins. The import
graph rules (no cycles, independent strategies, a pure core) are import-linter contracts in pyproject.toml."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import kubetwin.kueue

KUEUE = Path(kubetwin.kueue.__file__).parent
PACKAGE = "kubetwin.kueue"
ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(KUEUE.rglob("*.py")):
        parts = list(path.relative_to(KUEUE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([PACKAGE, *parts])] = ast.parse(path.read_text(), str(path))
    return out


def _imports(name: str, tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import in the module, wherever it sits (function-level and
    TYPE_CHECKING imports count: they are dependencies too)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def test_no_module_imports_another_modules_private_names() -> None:
    bad = [f"{name}: from {mod} import {n}" for name, tree in _modules().items()
           for mod, names in _imports(name, tree) for n in names if n.startswith("_") and not n.startswith("__")]
    assert bad == []


def test_private_attributes_are_touched_only_through_self() -> None:
    """`x._name` only on self, cls, or an instance a classmethod just built with cls(): a collaborator reaching
    into another object's internals (ctrl._write_status, host._workload) fails this, whatever it defines itself."""
    bad = []
    for name, tree in _modules().items():
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]:
            own = {"self", "cls"} | {t.id for a in ast.walk(fn) if isinstance(a, ast.Assign)
                                     and isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Name)
                                     and a.value.func.id == "cls" for t in a.targets if isinstance(t, ast.Name)}
            for n in ast.walk(fn):
                if (isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
                        and not (isinstance(n.value, ast.Name) and n.value.id in own)):
                    bad.append(f"{name}:{n.lineno} {ast.unparse(n)}")
    assert sorted(set(bad)) == []


def _contract(name_prefix: str) -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"].startswith(name_prefix))


def test_import_linter_contracts_cover_every_kueue_core_module() -> None:
    """`lint-imports` (in `make test`) checks the import graph: no cycles among each Kueue package's modules,
    classical and fair-sharing preemption independent, the pure core (quota, snapshot, flavor assigner, preemption,
    queue, cycle) reaching neither `kueue.controller`, the clock nor the event recorder. Its source list is written
    out, so a new core module must be added there: every module outside the controllers is listed but metrics,
    the one store-side module (a Prometheus registry on the clock)."""
    core = set(_contract("kueue: the pure admission core")["source_modules"])
    top = {".".join(name.split(".")[:3]) for name in _modules()} - {PACKAGE}
    assert top - core == {f"{PACKAGE}.controller", f"{PACKAGE}.metrics"}
    assert core <= top
    assert _contract("kueue preemption:")["modules"] == [f"{PACKAGE}.preemption.classical",
                                                         f"{PACKAGE}.preemption.fairsharing"]


def test_preemption_is_a_package_with_common_classical_and_fairsharing() -> None:
    """Upstream's pkg/scheduler/preemption/{preemption.go, common/, classical/, fairsharing/}: both strategies use
    common's helpers (that they do not import each other is an import-linter contract)."""
    modules = _modules()
    pre = f"{PACKAGE}.preemption"
    assert {f"{pre}.common", f"{pre}.classical", f"{pre}.fairsharing"} <= set(modules)
    deps = {name: {m for m, _ in _imports(name, modules[name])} for name in (f"{pre}.classical", f"{pre}.fairsharing")}
    assert f"{pre}.common" in deps[f"{pre}.classical"] & deps[f"{pre}.fairsharing"]


def test_the_admission_core_never_imports_the_store_class() -> None:
    """The pure core is plain data in, decisions out: it may use kubetwin.store.store's helpers (matches, Obj) but
    not its Store (a name-level rule import-linter cannot state; the module-level ones are contracts)."""
    bad = [f"{name}: {mod} {names}" for name, tree in _modules().items()
           if not name.startswith(f"{PACKAGE}.controller")
           for mod, names in _imports(name, tree) if mod == "kubetwin.store.store" and "Store" in names]
    assert bad == []


def test_collaborators_not_mixins() -> None:
    """waitForPodsReady and the admission checks are objects the manager holds, each with the interface it needs
    from the manager spelled out (a Protocol), not mixins sharing the manager's fields."""
    from kubetwin.kueue.controller.core import KueueController

    mixins = [f"{name}.{n.name}" for name, tree in _modules().items() for n in ast.walk(tree)
              if isinstance(n, ast.ClassDef) and n.name.endswith("Mixin")]
    assert mixins == []
    assert KueueController.__bases__ == (object,)

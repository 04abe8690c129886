"""Kueue's package layout as upstream lays it out (issue 18): modules talk through public names only, the imports
among the Kueue modules form no cycle, and the pure admission core reaches neither the store nor the controllers."""

from __future__ import annotations

import ast
from pathlib import Path

import kubetwin.kueue

KUEUE = Path(kubetwin.kueue.__file__).parent
PACKAGE = "kubetwin.kueue"


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


def test_kueue_modules_import_each_other_without_cycles() -> None:
    modules = _modules()

    def targets(mod: str, names: list[str]) -> set[str]:
        """`from kubetwin.kueue import api` imports the submodule, not the package's __init__."""
        subs = {f"{mod}.{n}" for n in names if f"{mod}.{n}" in modules}
        return subs or ({mod} if mod in modules else set())

    graph = {name: sorted({t for m, names in _imports(name, tree) for t in targets(m, names)} - {name})
             for name, tree in modules.items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                cycles.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_preemption_is_a_package_with_common_classical_and_fairsharing() -> None:
    """Upstream's pkg/scheduler/preemption/{preemption.go, common/, classical/, fairsharing/}: the strategies
    share common's helpers and do not import each other."""
    modules = _modules()
    pre = f"{PACKAGE}.preemption"
    assert {f"{pre}.common", f"{pre}.classical", f"{pre}.fairsharing"} <= set(modules)
    deps = {name: {m for m, _ in _imports(name, modules[name])} for name in (f"{pre}.classical", f"{pre}.fairsharing")}
    assert f"{pre}.fairsharing" not in deps[f"{pre}.classical"]
    assert f"{pre}.classical" not in deps[f"{pre}.fairsharing"]
    assert f"{pre}.common" in deps[f"{pre}.classical"] & deps[f"{pre}.fairsharing"]


def test_the_admission_core_never_reaches_the_store_side() -> None:
    """The pure core (quota, snapshot, flavor assigner, preemption, queue, cycle) is plain data in, decisions out:
    it imports neither the store's Store, the clock, the event recorder, nor `kueue.controller`."""
    store_side = ("kubetwin.kueue.controller", "kubetwin.sim.env", "kubetwin.store.events")
    bad = []
    for name, tree in _modules().items():
        if name.startswith(f"{PACKAGE}.controller"):
            continue
        for mod, names in _imports(name, tree):
            if mod.startswith(store_side) or (mod == "kubetwin.store.store" and "Store" in names):
                bad.append(f"{name}: {mod} {names}")
    assert sorted(bad) == [f"{PACKAGE}.metrics: kubetwin.sim.env ['Environment']"]


def test_collaborators_not_mixins() -> None:
    """waitForPodsReady and the admission checks are objects the manager holds, each with the interface it needs
    from the manager spelled out (a Protocol), not mixins sharing the manager's fields."""
    from kubetwin.kueue.controller.core import KueueController

    mixins = [f"{name}.{n.name}" for name, tree in _modules().items() for n in ast.walk(tree)
              if isinstance(n, ast.ClassDef) and n.name.endswith("Mixin")]
    assert mixins == []
    assert KueueController.__bases__ == (object,)

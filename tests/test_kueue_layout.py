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
    store_side = ("kubetwin.kueue.controller", "kubetwin.sim", "kubetwin.store.events")
    bad = []
    for name, tree in _modules().items():
        if name.startswith(f"{PACKAGE}.controller"):
            continue
        for mod, names in _imports(name, tree):
            if mod.startswith(store_side) or (mod == "kubetwin.store.store" and "Store" in names):
                bad.append(f"{name}: {mod} {names}")
    assert sorted(bad) == [f"{PACKAGE}.metrics: kubetwin.sim.env ['Environment']"]

"""Fixtures and history queries shared by the tests (the builders are in k8s_builders.py and *_builders.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml

# The suite runs the pure Python, the reference the compiled modules are checked against (tests/test_native.py):
# tests monkeypatch functions and classes that compiled code would bind early. Before kubetwin is first imported.
os.environ.setdefault("KUBETWIN_NATIVE", "0")

import kubetwin.runner as run_mod  # noqa: E402
from kubetwin.k8s.conditions import conditions_of, find_condition, is_condition_true
from kubetwin.runner import run
from kubetwin.store.store import Store

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
# Every scenario the repo runs: the examples (seed-as-written.yaml is the platform's seed with its mistakes, which
# validate rejects: its corrected form in ../shared runs instead), the bundled demos, the corrected seed.
RUNNABLE = [*(p for p in sorted((ROOT / "examples").glob("*.yaml")) if p.name != "seed-as-written.yaml"),
            *sorted(p for p in (ROOT / "src" / "kubetwin" / "scenarios").iterdir() if p.is_dir()),
            SHARED / "reference" / "seed-manifests-corrected.yaml"]
CORRECTED_SEED_NAMESPACES = ROOT / "tests" / "data" / "seed-corrected-namespaces.yaml"


def with_namespaces(path: Path) -> list[Path]:
    """The files to run for a RUNNABLE entry: the corrected seed uses namespaces it does not define (the API server
    would refuse its objects), so their Namespace objects go beside it."""
    return [CORRECTED_SEED_NAMESPACES, path] if path.name == "seed-manifests-corrected.yaml" else [path]


# long ones cut short for whole-run checks (each prefix still has its Pending pods and its invariants)
SHORT_DURATION = {"serving-llama3-epp.yaml": "10m", "serving-llmd-shared-prefix.yaml": "10m",
                  "serving-mooncake-routing.yaml": "10m", "serving-scale-to-zero.yaml": "20m",
                  "keda-podmonitoring.yaml": "20m",
                  "training-llama-8b-a3.yaml": "2h", "demo": "4h", "gpu-sharing": "2h", "dra": "2h"}


def need_live_extra(*modules: str) -> None:
    """Skip the calling test module, with the reason, when the live extra's packages are not installed (a
    `pip install kubetwin` without `[live]`): at the top of the module, before it imports them."""
    for name in modules:
        pytest.importorskip(name, reason=f"needs {name} from the live extra: pip install 'kubetwin[live]'")


# The tiers `make test-fast` leaves out, by module: servers on loopback, a browser, the documentation's commands.
_MODULE_MARKS = {"test_report_browser": "browser", "test_docs_commands": "docs", "test_explain_doc": "docs"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if item.module is not None else ""
        mark = "live" if module.startswith("test_live_") else _MODULE_MARKS.get(module)
        if mark is not None:
            item.add_marker(mark)


def write_yaml(path: Path, objs: list[dict]) -> Path:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED


def final_objects(result, kind: str) -> dict[str, dict]:
    """The objects of `kind` as they stand when the run ends (deleted ones gone), by name."""
    out: dict[str, dict] = {}
    for _, _, etype, o in result.history:
        if o["kind"] == kind:
            if etype == "DELETED":
                out.pop(o["metadata"]["name"], None)
            else:
                out[o["metadata"]["name"]] = o
    return out


def pod_versions(result) -> dict[str, list[dict]]:
    """Every version of every pod of a run, by name, in order, each with its time `t` and watch event `type`."""
    out: dict[str, list[dict]] = {}
    for t, _, et, o in result.history:
        if o["kind"] == "Pod":
            out.setdefault(o["metadata"]["name"], []).append({"t": t, "type": et, **o})
    return out


def first_phase(versions: list[dict], phase: str) -> float | None:
    """When a pod's versions (pod_versions) first show `phase`, or None."""
    return next((v["t"] for v in versions if (v.get("status") or {}).get("phase") == phase), None)


def missing_shared_trace(path: Path) -> str | None:
    """A RequestTrace file (under ../shared) that this checkout does not have: tests that need it skip."""
    if path.is_dir():
        return None
    for doc in yaml.safe_load_all(path.read_text()):
        if (doc or {}).get("kind") == "RequestTrace" and (doc.get("spec") or {}).get("path"):
            if not (path.parent / doc["spec"]["path"]).exists():
                return doc["spec"]["path"]
    return None


def condition(obj: dict, ctype: str) -> dict:
    """The object's status condition of that type ({} when it has none): apimachinery's FindStatusCondition."""
    return find_condition(conditions_of(obj), ctype) or {}


def is_true(obj: dict, ctype: str) -> bool:
    """Whether the object's condition of that type is True: apimachinery's IsStatusConditionTrue."""
    return is_condition_true(conditions_of(obj), ctype)


def run_with(monkeypatch, objects: list[dict], actions: list[tuple[float, Callable[[Store], None]]], **kw):
    """kubetwin.run with store writes at given times (what kubectl, Kueue or the HPA would do mid-run): the actions
    are armed when the run schedules its first object."""
    orig = run_mod._schedule_object
    armed: list[bool] = []

    def spy(store, env, obj) -> None:
        if not armed:
            armed.append(True)
            for t, fn in actions:
                env.at(t, lambda fn=fn: fn(store))
        orig(store, env, obj)
    monkeypatch.setattr(run_mod, "_schedule_object", spy)
    return run(objects=objects, **kw)


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """A script outside the package (benchmarks/*.py, a data generator) imported as a module, registered in
    sys.modules under its name first so its dataclasses can look their module up."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module

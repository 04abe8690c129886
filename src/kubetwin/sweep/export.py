"""`kubetwin sweep ... --export DIR`: the chosen case's configuration as manifests (one file per scenario file,
same names) and diff.patch, a unified diff against the base scenario, both valid input to `kubetwin validate`
and `kubetwin run`."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import yaml

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.loader import Manifest
from kubetwin.sweep.cases import Case, Plan


def _dump(objs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False, default_flow_style=False, width=120) if objs else ""


def _relocated(m: Manifest, target: Path) -> dict[str, Any]:
    """A RequestTrace's relative spec.path still names its file from the exported file's folder."""
    obj = m.obj
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    if m.kind == "RequestTrace" and spec and isinstance(spec.get("path"), str) and not os.path.isabs(spec["path"]):
        trace = (Path(m.file).resolve().parent / spec["path"]).resolve()
        obj = {**obj, "spec": {**spec, "path": os.path.relpath(trace, target.parent.resolve())}}
    return obj


def export_case(plan: Plan, case: Case, dest: Path) -> list[Path]:
    """Write the case's manifests and diff.patch into `dest` (a new or empty folder)."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise KubetwinError([Diagnostic(str(dest), 0, "kubetwin sweep", "--export", "Invalid value: the folder "
                                        "exists and is not empty", "choose a new folder for --export")])
    patched = plan.manifests(case)
    files: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for base, new in zip(plan.base, patched, strict=True):
        rel = os.path.relpath(Path(base.file).resolve(), plan.base_dir)
        target = dest / rel
        pair = files.setdefault(rel, ([], []))
        pair[0].append(_relocated(base, target))
        pair[1].append(_relocated(new, target))
    values = ", ".join(f"{k}={v}" for k, v in plan.values(case).items())
    header = f"# kubetwin sweep {plan.sweep.metadata.name}, case {case.id}: {values}\n"
    written: list[Path] = []
    diff: list[str] = []
    for rel, (before, after) in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(header + _dump(after))
        written.append(target)
        diff += difflib.unified_diff(_dump(before).splitlines(keepends=True), _dump(after).splitlines(keepends=True),
                                     f"a/{rel}", f"b/{rel}")
    (dest / "diff.patch").write_text("".join(diff))
    return [*written, dest / "diff.patch"]

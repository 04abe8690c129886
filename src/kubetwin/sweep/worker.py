"""One case and seed through the runner, in whatever process runs it (this one, a pool worker, a Ray worker).

A Task carries the patched scenario itself (the manifests, with their files relative to the scenario's folder), so
a worker needs no access to the Sweep's files: a Ray worker on another machine gets the folder (trace files and
all) as its working directory (backends.py) and resolves the files there.
"""

from __future__ import annotations

import copy
import os
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubetwin.api.errors import KubetwinError
from kubetwin.api.loader import Manifest
from kubetwin.api.sweep import Sweep


@dataclass(frozen=True)
class Task:
    case: str
    index: int
    seed: int
    values: dict[str, Any]
    manifests: tuple[Manifest, ...]  # files relative to base_dir
    base_dir: str
    sweep: Sweep
    out: str | None  # the run folder to keep, None to keep none
    error: str = ""  # the case could not be built (a patch that does not apply): reported, not run

    @property
    def key(self) -> str:
        return f"{self.case}-s{self.seed}"


def row_head(task: Task) -> dict[str, Any]:
    return {"case": task.case, "seed": task.seed, **task.values}


def failed(task: Task, error: str) -> dict[str, Any]:
    """A row for a case that did not run: its metrics empty, the error in words."""
    metrics = [m if isinstance(m, str) else m.name for m in task.sweep.spec.metrics]
    return {**row_head(task), **dict.fromkeys(metrics), "error": error}


def _located(task: Task) -> list[Manifest]:
    root = task.base_dir if Path(task.base_dir).is_dir() else os.getcwd()  # Ray's working_dir on a remote node
    return [replace(m, obj=copy.deepcopy(m.obj), file=m.file if m.file.startswith("<") or os.path.isabs(m.file)
                    else os.path.join(root, m.file)) for m in task.manifests]


def run_task(task: Task) -> dict[str, Any]:
    """The case's results row; a failure becomes a row with its error (it never stops the other cases)."""
    from kubetwin.runner import run
    from kubetwin.sweep.metrics import collect

    if task.error:
        return failed(task, task.error)
    try:
        result = run(manifests=_located(task), seed=task.seed, out=task.out, overwrite=task.out is not None)
        return {**row_head(task), **collect(task.sweep, result), "error": ""}
    except KubetwinError as exc:
        return failed(task, "; ".join(d.render().replace("\n", " ") for d in exc.diagnostics))
    except Exception as exc:  # a bug in the twin: the case fails with its cause, the sweep goes on
        last = traceback.extract_tb(exc.__traceback__)[-1:]
        where = f" at {Path(last[0].filename).name}:{last[0].lineno}" if last else ""
        return failed(task, f"{type(exc).__name__}: {exc}{where}")

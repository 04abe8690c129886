"""The simulator's hot modules compiled to C by mypyc, used only when built from exactly this source tree (issue 32).

mypyc (the mypy project's compiler, as black and mypy itself ship) turns the typed Python of the store, the clock,
the scheduler's and kubelet's per-pod paths and the history writer into C extension modules: the same code, the same
decisions and bytes (tests/test_native.py runs examples both ways and compares every file of their run folders),
about a third less CPU in the run's process (x0.67-0.70 on a 10,000-pod run, measured). `make install` and
`make test` build them (`python -m kubetwin.native build`) into `lib/` here (not tracked); `install()`, called first
thing by `import kubetwin`, puts them in front of the .py files only when the build's fingerprint matches the
package's sources as they are now: edit any module and the pure Python runs until the next build, never a stale
binary. `KUBETWIN_NATIVE=0` turns them off (the test suite runs the pure Python, whose functions it may
monkeypatch). No compiler, no mypy, another Python: the pure Python runs.

What compiling changes, and so what the modules' code must respect: a value is held as its annotation says. A
`float` variable, attribute, parameter or return that is an int at run time becomes a float (`0` -> `0.0`): a number
that goes to the run folder keeps the type it has in pure Python only through `Any` or a union (nodepool's `_usd`).
A class declares every attribute it sets, takes no weak reference and no monkeypatched method.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["ENV", "GROUP", "LIB", "MANIFEST", "MODULES", "abi", "active", "fingerprint", "install", "refusal",
           "status"]

ENV = "KUBETWIN_NATIVE"  # "0": never load the compiled modules
PACKAGE = Path(__file__).resolve().parent.parent  # src/kubetwin
LIB = Path(__file__).resolve().parent / "lib"
MANIFEST = "manifest.json"
GROUP = "kubetwin_native"  # mypyc's shared library: kubetwin_native__mypyc

# What runs per object version: the store and its Events, the clock and API clients, the scheduler's queue-to-bind
# path, the kubelet, the ReplicaSet / Job / PodGC / node lifecycle controllers and the history writer (the
# py-spy profile of a 10,000-pod run and of a churn day; issue 32). Each compiles under mypy's checks.
MODULES: tuple[str, ...] = (
    "kubetwin.api.defaults",
    "kubetwin.api.podresources",
    "kubetwin.api.podspec",
    "kubetwin.autoscaler.nodepool",
    "kubetwin.controllers.admission",
    "kubetwin.controllers.attachdetach",
    "kubetwin.controllers.common",
    "kubetwin.controllers.garbagecollector",
    "kubetwin.controllers.job",
    "kubetwin.controllers.job_backoff",
    "kubetwin.controllers.jobset_webhook",
    "kubetwin.controllers.kubelet",
    "kubetwin.controllers.kubelet_admission",
    "kubetwin.controllers.kubelet_status",
    "kubetwin.controllers.lws_webhook",
    "kubetwin.controllers.nodelifecycle",
    "kubetwin.controllers.podgc",
    "kubetwin.controllers.replicaset",
    "kubetwin.controllers.ttlafterfinished",
    "kubetwin.controllers.volumes",
    "kubetwin.devices.dra.dranet",
    "kubetwin.devices.dra.nvidia",
    "kubetwin.devices.gpuruntime",
    "kubetwin.devices.sharing",
    "kubetwin.k8s.conditions",
    "kubetwin.k8s.generatename",
    "kubetwin.k8s.ownerrefs",
    "kubetwin.k8s.workqueue",
    "kubetwin.report.historylog",
    "kubetwin.report.jobtimes",
    "kubetwin.report.metrics",
    "kubetwin.scheduler.fragmentation",
    "kubetwin.scheduler.nodeinfo",
    "kubetwin.scheduler.nodetable",
    "kubetwin.scheduler.plugins",
    "kubetwin.scheduler.podshapes",
    "kubetwin.scheduler.preemption",
    "kubetwin.scheduler.queue",
    "kubetwin.scheduler.scheduler",
    "kubetwin.scheduler.schedulinggates",
    "kubetwin.sim.apiclient",
    "kubetwin.sim.env",
    "kubetwin.store.events",
    "kubetwin.store.eventttl",
    "kubetwin.store.store",
)

_active = False


def _sources() -> list[tuple[str, os.DirEntry[str]]]:
    """Every module of the package but this build's output, as (path in the package, directory entry): mypyc
    compiles against their types and constants. os.scandir: its entries carry their stat, ~10x pathlib.rglob."""
    out: list[tuple[str, os.DirEntry[str]]] = []
    todo = [("", str(PACKAGE))]
    while todo:
        rel, folder = todo.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__" and entry.path != str(LIB):
                        todo.append((rel + entry.name + "/", entry.path))
                elif entry.name.endswith(".py"):
                    out.append((rel + entry.name, entry))
    out.sort(key=lambda item: item[0])
    return out


def fingerprint(content: bool = False) -> str:
    """The package's sources as they are: paths, sizes and modification times (cheap, checked on every import), or
    their contents (checked only when the times differ: a fresh clone or checkout of the same tree)."""
    digest = hashlib.sha256()
    for rel, entry in _sources():
        digest.update(rel.encode() + b"\0")
        if content:
            with open(entry.path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
        else:
            st = entry.stat()
            digest.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def abi() -> str:
    """The interpreter and extension ABI a build is for."""
    return f"{sys.implementation.cache_tag}-{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def status() -> str:
    """Why the compiled modules are or are not in use (`python -m kubetwin.native status`, the benchmarks' `code:`
    line)."""
    if _active:
        return "native (mypyc): " + ", ".join(m.rsplit(".", 1)[1] for m in MODULES)
    return "pure Python: " + refusal()


def refusal(honor_env: bool = True) -> str:
    """Why the compiled modules would not be used ("" when they would): turned off, not built, or stale."""
    if honor_env and os.environ.get(ENV) == "0":
        return f"{ENV}=0"
    try:
        manifest = json.loads((LIB / MANIFEST).read_text())
    except (OSError, ValueError):
        return "not built (python -m kubetwin.native build)"
    if manifest.get("abi") != abi() or tuple(manifest.get("modules", ())) != MODULES:
        return "built for another Python or module list"
    if manifest.get("stat") != fingerprint() and manifest.get("content") != fingerprint(content=True):
        return "sources changed since the build"
    return ""


class _Finder(importlib.abc.MetaPathFinder):
    """Serves the compiled modules (and mypyc's shared library) from LIB ahead of the path's .py files."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, file, loader=importlib.machinery.ExtensionFileLoader(fullname, str(file)))


def install() -> bool:
    """Use the compiled modules if they were built from these sources for this Python; True when they are."""
    global _active
    if _active:
        return True
    if refusal():
        return False
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    files = {name: LIB.joinpath(*name.split(".")[:-1], name.rsplit(".", 1)[1] + suffix) for name in MODULES}
    files[f"{GROUP}__mypyc"] = LIB / f"{GROUP}__mypyc{suffix}"
    if not all(f.is_file() for f in files.values()) or any(m in sys.modules for m in MODULES):
        return False
    sys.meta_path.insert(0, _Finder(files))
    _active = True
    return True


def active() -> bool:
    """Whether this process runs the compiled modules."""
    return _active

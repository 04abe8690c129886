"""Read SOURCE... and tell each file's format from its content: a kube-scheduler-simulator export (one JSON object of
object lists), a kwokctl snapshot (documents without resourceVersion), a kubectl dump (a List or documents as the
API server returned them), or plain manifests a user wrote. Manifests pass through untouched, so a scenario's run
is what it was; dumps go through `convert`, once, together (owners, nodes and pods meet across files)."""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kubetwin.api import kinds, limits
from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.api.loader import Manifest, expand_paths, load_text, no_objects
from kubetwin.importer import convert, kubectl, kwok, replay, simulator
from kubetwin.sim.gcpause import no_cyclic_gc

MANIFESTS = "manifests"
RECORDER = "kube-scheduler-simulator recorder"


@dataclass
class Source:
    """One file: its format and its objects (a snapshot's lists already turned into objects); a kwokctl recording's
    ResourcePatch documents, and whether its times were relative to the recording's start (replay.py)."""

    file: str
    format: str
    manifests: list[Manifest]
    patches: list[Manifest] = field(default_factory=list)
    relative: bool = False
    start: str | None = None  # a recording's start (the simulator recorder's first record), t=0


def _json_problem(text: str, file: str) -> Diagnostic | None:
    """A JSON file that does not parse: where, in JSON's words (a dump cut short ends inside an object)."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        # an error on the file's last line: the text stops inside an object or a string
        cut = exc.lineno >= text.rstrip().count("\n") + 1
        return Diagnostic(file, exc.lineno, "-", "", f"not valid JSON: {exc.msg} (column {exc.colno})" + (
            ": the file ends inside an object, it was cut short" if cut else ""),
            "dump or export the cluster again and check the command finished")
    return None


def read_file(path: Path) -> Source:
    """One file's objects and format; KubetwinError with file:line for what cannot be read."""
    file = str(path)
    try:
        if path.stat().st_size > limits.MAX_FILE_BYTES:
            raise KubetwinError([limits.file_too_large(file, path.stat().st_size)])
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KubetwinError([Diagnostic(file, 0, "-", "", f"cannot read file: {exc}", "")]) from None
    if simulator.is_recorder(text):
        try:
            state, patches, start = simulator.recorder(text, file)
        except simulator.RecorderError as exc:
            raise KubetwinError([Diagnostic(file, exc.line, "-", "", f"kube-scheduler-simulator recorder lines: "
                                            f"{exc}", "record again with the simulator's recorder")]) from None
        return Source(file, RECORDER, state, patches, start=start)
    relative = replay.TIME_OFFSET.search(text) is not None  # kwokctl snapshot export: times from its start
    if relative:
        text = replay.revert_times(text)
    try:
        manifests = load_text(text, file)
    except KubetwinError as exc:
        better = _json_problem(text, file)
        raise KubetwinError([better] if better is not None else exc.diagnostics) from None
    if len(manifests) == 1 and simulator.is_snapshot(manifests[0].obj):
        objs, problems, _ = simulator.read(manifests[0])
        if problems:
            raise KubetwinError(problems)
        return Source(file, simulator.FORMAT, objs)
    problems = [d for d in (kubectl.truncated_list(m) for m in manifests) if d is not None]
    if problems:
        raise KubetwinError(problems)
    manifests, patches = kwok.recordings(manifests)
    if patches:
        return Source(file, kwok.FORMAT, manifests, patches, relative)
    dumped = [m for m in manifests if kubectl.is_dump_object(m.obj)]
    if not dumped:
        return Source(file, MANIFESTS, manifests)
    if len(dumped) != len(manifests):  # hand-written objects beside dumped ones: each is read as what it is
        return Source(file, kubectl.FORMAT, manifests)
    return Source(file, kwok.FORMAT if kwok.is_snapshot(manifests) and not _is_list(text) else kubectl.FORMAT,
                  manifests)


def _is_list(text: str) -> bool:
    """kubectl prints several objects as one List (its `items:`), kwokctl as separate documents."""
    head = text.lstrip()[:4096]
    return head.startswith("{") or "\nitems:" in head or head.startswith("items:")


def read(paths: Sequence[str | Path]) -> list[Source]:
    """Every file below the paths (folders: their .yaml, .yml and .json files), each with its format; every
    problem of every file at once."""
    sources: list[Source] = []
    errors: list[Diagnostic] = []
    for f in expand_paths(list(paths)):
        try:
            sources.append(read_file(f))
        except KubetwinError as exc:
            errors.extend(exc.diagnostics)
    if not errors and not any(s.manifests for s in sources):
        errors.append(no_objects(list(paths), bool(sources)))
    if errors:
        raise KubetwinError(errors)
    return sources


def is_import(sources: list[Source]) -> bool:
    return any(s.format != MANIFESTS for s in sources)


def load(paths: Sequence[str | Path], options: convert.Options | None = None
         ) -> tuple[list[Manifest], convert.Report | None]:
    """The manifests `run` and `validate` take: the files' own when none is a dump (unchanged, no report), else
    the dumps' objects converted (and the files of plain manifests after them) with the import's report.
    The cyclic GC is paused throughout: a dump's objects are acyclic dicts and lists, and each collection would
    rescan all those decoded so far (a third of reading a 1,000-node dump, measured; sim/gcpause.py). Where it is
    on, it collects once first: a run made before in the same process (kubetwin simulate's, a test's) may have
    left cycles that would otherwise stay through the whole read (+170 MB at 1,000 nodes, measured; ~20 ms)."""
    if gc.isenabled():
        gc.collect()
    with no_cyclic_gc():
        return _load(paths, options)


def _load(paths: Sequence[str | Path], options: convert.Options | None
          ) -> tuple[list[Manifest], convert.Report | None]:
    sources = read(paths)
    if not is_import(sources):
        return [m for s in sources for m in s.manifests], None
    dumps: list[Manifest] = []
    own: list[Manifest] = []
    for s in sources:
        for m in s.manifests:
            (dumps if s.format != MANIFESTS and (s.format == RECORDER or kubectl.is_dump_object(m.obj))
             else own).append(m)
    patches = [p for s in sources for p in s.patches]
    start = next((s.start for s in sources if s.start), None) or (
        replay.RECORDING_START if any(s.relative for s in sources) else None)
    if start and (options is None or options.snapshot_time is None):
        options = dataclasses.replace(options or convert.Options(), snapshot_time=start)
    manifests, report = convert.convert(dumps, own, options)
    for s in sources:
        if s.format != MANIFESTS:
            report.formats[s.format] += 1
    if patches:
        manifests = _replayed(manifests, patches, report)
    return manifests, report


def _replayed(manifests: list[Manifest], patches: list[Manifest], report: convert.Report) -> list[Manifest]:
    """The converted state with a recording's changes on its timeline (replay.py): deletions as delete-at on their
    objects, objects created later and the Change objects after the rest."""
    by_key = {(m.kind, "" if kinds.REGISTRY.is_cluster_scoped(m.kind) else str(
        (m.obj.get("metadata") or {}).get("namespace") or "default"), str((m.obj.get("metadata") or {}).get("name"))):
        m for m in manifests}
    done = replay.replay(patches, set(by_key))
    for key, seconds in done.deletes.items():
        m = by_key.get(key)
        if m is not None:
            m.obj["metadata"].setdefault("annotations", {})[convert.DELETE_AT] = f"{seconds:g}s"
    for m in done.creates + done.changes:
        report.kept[m.kind] += 1
    report.replay = done.lines()
    return manifests + done.creates + done.changes

"""kube-scheduler-simulator's snapshot, `GET /api/v1/export`: one JSON object whose keys are lists of typed objects,
`ResourcesForSnap` in kubernetes-sigs/kube-scheduler-simulator simulator/snapshot/snapshot.go (Apache-2.0; read for
the format only, at e61a4fc):

    pods []corev1.Pod, nodes []corev1.Node, pvs []corev1.PersistentVolume, pvcs []corev1.PersistentVolumeClaim,
    storageClasses []storagev1.StorageClass, priorityClasses []schedulingv1.PriorityClass,
    schedulerConfig *configv1.KubeSchedulerConfiguration, namespaces []corev1.Namespace

The lists come from client-go's typed List calls, whose items carry no apiVersion/kind (TypeMeta is empty and
omitted), so each item's kind comes from its key. System priority classes are left out by the simulator
(isSystemPriorityClass). The recorder's JSON lines ({"time", "event", "resource"}, simulator/recorder/recorder.go)
are a stream of changes: `recorder` turns them into the state at their start and a timeline (importer/replay.py)."""

from __future__ import annotations

import json
from typing import Any

from kubetwin.api import patch
from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest

FORMAT = "kube-scheduler-simulator"
KINDS = {"pods": ("v1", "Pod"), "nodes": ("v1", "Node"), "pvs": ("v1", "PersistentVolume"),
         "pvcs": ("v1", "PersistentVolumeClaim"), "storageClasses": ("storage.k8s.io/v1", "StorageClass"),
         "priorityClasses": ("scheduling.k8s.io/v1", "PriorityClass"), "namespaces": ("v1", "Namespace")}
SCHEDULER_CONFIG = "schedulerConfig"


def is_snapshot(obj: dict[str, Any]) -> bool:
    """The export's shape: no kind or apiVersion, only ResourcesForSnap's keys, some of its object lists."""
    keys = set(obj)
    return ("kind" not in obj and "apiVersion" not in obj and bool(keys) and keys <= {*KINDS, SCHEDULER_CONFIG}
            and any(k in obj for k in KINDS))


def read(m: Manifest) -> tuple[list[Manifest], list[Diagnostic], int]:
    """The snapshot's objects as manifests (kind from their key, each with its own file:line), problems, and
    whether it held a scheduler configuration (1) that the import leaves out."""
    out: list[Manifest] = []
    problems: list[Diagnostic] = []
    for key, (api_version, kind) in KINDS.items():
        items = m.obj.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            problems.append(Diagnostic(m.file, m.line_of(key), "-", key, f"must be a list of {kind} objects, got "
                                       f"{type(items).__name__}", "export the snapshot again"))
            continue
        for i, item in enumerate(items):
            path = f"{key}[{i}]"
            if not isinstance(item, dict):
                problems.append(Diagnostic(m.file, m.line_of(path), "-", path, f"must be a {kind} object", ""))
                continue
            prefix = path + "."
            lines = {k[len(prefix):]: v for k, v in m.lines.items() if k.startswith(prefix)}
            out.append(Manifest({"apiVersion": api_version, "kind": kind, **item}, m.file, m.line_of(path), lines))
    return out, problems, int(m.obj.get(SCHEDULER_CONFIG) is not None)


def is_recorder(text: str) -> bool:
    """The simulator's recorder output: one JSON object per line with time, event and resource."""
    start = len(text) - len(text.lstrip())  # the first line with text, without splitting a large file's lines
    end = text.find("\n", start)
    first = text[start:end if end >= 0 else len(text)]
    try:
        obj = json.loads(first)
    except ValueError:
        return False
    return isinstance(obj, dict) and {"time", "event", "resource"} <= set(obj)


# Twin choice: the recorder's informers list every object first (an Add each) and its file is flushed every
# --flush-interval (5 s by default, recorder.go defaultPollInterval): Adds within this long of the first record are
# the cluster's state at the recording's start, t=0; later records are its timeline.
INITIAL_SYNC_S = 5.0


def recorder(text: str, file: str) -> tuple[list[Manifest], list[Manifest], str]:
    """The recorder's lines (simulator/recorder/recorder.go `Record`: time, event Add|Update|Delete, resource; a
    delete carries apiVersion, kind, name and namespace only) as the state at its start (the initial sync's objects),
    the rest as kwokctl-shaped ResourcePatch documents (importer/replay.py replays them: an Update as a merge patch of
    what changed), and the start's time (t=0). KubetwinError-style problems are raised by the caller's parse."""
    from datetime import datetime

    from kubetwin.api import kinds

    records = []
    times = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            t = datetime.fromisoformat(str(rec["time"]).replace("Z", "+00:00"))
        except (ValueError, KeyError, TypeError) as exc:
            raise RecorderError(n, f"not a recorder line ({exc})") from None
        res = rec.get("resource")
        if rec.get("event") not in ("Add", "Update", "Delete") or not isinstance(res, dict) or not res.get(
                "apiVersion") or not res.get("kind") or not (res.get("metadata") or {}).get("name"):
            raise RecorderError(n, "a record is {time, event: Add|Update|Delete, resource} and its resource has "
                                "apiVersion, kind and metadata.name")
        records.append((n, rec))
        times.append(t)
    start = min(times)
    state: list[Manifest] = []
    patches: list[Manifest] = []
    last: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (n, rec), t in zip(records, times, strict=True):
        obj = rec.get("resource") or {}
        meta = obj.get("metadata") or {}
        key = (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
        since = (t - start).total_seconds()
        if rec.get("event") == "Add" and since <= INITIAL_SYNC_S:
            state.append(Manifest(obj, file, n))
            last[key] = obj
            continue
        info = kinds.REGISTRY.of(str(obj.get("apiVersion", "")), key[0])
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        doc: dict[str, Any] = {"apiVersion": "action.kwok.x-k8s.io/v1alpha1", "kind": "ResourcePatch",
                               "resource": {"group": group, "version": version,
                                            "resource": info.plural if info is not None else key[0].lower() + "s"},
                               "target": {"name": key[2], **({"namespace": key[1]} if key[1] else {})},
                               "durationNanosecond": int(since * 1e9)}
        if rec.get("event") == "Add":
            doc.update(method="create", template=obj)
            last[key] = obj
        elif rec.get("event") == "Update":
            doc.update(method="patch", template=patch.merge_diff(last.get(key) or {}, obj), patchType="merge")
            last[key] = obj
        else:
            doc.update(method="delete")
            last.pop(key, None)
        patches.append(Manifest(doc, file, n))
    return state, patches, start.strftime("%Y-%m-%dT%H:%M:%SZ")


class RecorderError(ValueError):
    """A recorder line that is not one (its line number and why)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line



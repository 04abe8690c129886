"""kube-scheduler-simulator's snapshot, `GET /api/v1/export`: one JSON object whose keys are lists of typed objects,
`ResourcesForSnap` in kubernetes-sigs/kube-scheduler-simulator simulator/snapshot/snapshot.go (Apache-2.0; read for
the format only, at e61a4fc):

    pods []corev1.Pod, nodes []corev1.Node, pvs []corev1.PersistentVolume, pvcs []corev1.PersistentVolumeClaim,
    storageClasses []storagev1.StorageClass, priorityClasses []schedulingv1.PriorityClass,
    schedulerConfig *configv1.KubeSchedulerConfiguration, namespaces []corev1.Namespace

The lists come from client-go's typed List calls, whose items carry no apiVersion/kind (TypeMeta is empty and
omitted), so each item's kind comes from its key. System priority classes are left out by the simulator
(isSystemPriorityClass). The recorder's JSON lines ({"time", "event", "resource"}, simulator/recorder/recorder.go)
are a stream of changes: issue 36 item 2, refused here with a message saying so."""

from __future__ import annotations

import json
from typing import Any

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


def recorder_lines(text: str, file: str) -> Diagnostic | None:
    """The simulator's recorder output (one JSON object per line: time, event, resource): refused, naming why."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        obj = json.loads(first)
    except ValueError:
        return None
    if not (isinstance(obj, dict) and {"time", "event", "resource"} <= set(obj)):
        return None
    return Diagnostic(file, 1, "-", "", "kube-scheduler-simulator recorder lines (time, event, resource) are a "
                      "stream of changes: replaying them needs a timeline of changes (issue 36 item 2), which the "
                      "twin does not have yet", "import a snapshot instead: the simulator's GET /api/v1/export, or "
                      "kubectl get ... -A -o yaml")

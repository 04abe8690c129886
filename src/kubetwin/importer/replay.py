"""A kwokctl recording replayed as the twin's timeline (issue 36 item 2): `kwokctl snapshot export --record` writes the
cluster's objects, then one `ResourcePatch` (action.kwok.x-k8s.io/v1alpha1) per change its watches saw, until
Ctrl-C (kubernetes-sigs/kwok@172defa pkg/kwokctl/recording/api.go, pkg/kwokctl/snapshot/save.go `Record`):

- `create`: `template` is the object as first seen; `patch`: a two-way strategic merge patch from the version
  before to this one (strategicpatch.CreateTwoWayMergePatchUsingLookupPatchMeta); `delete`: no template;
- `durationNanosecond`: the time since the recording started; `resource` {group, version, resource (plural)};
  `target` {name, namespace};
- every RFC 3339 time of the file, objects included, written as `$(time-offset-nanosecond N)` from that start
  (recording/time.go `ReplaceTimeToRelative`; `kwokctl snapshot restore` reverts them against its own now).

The twin replays what a user or an operator did and lets its own controllers do the rest, since replaying their
writes too would fight them: creates become objects with kubetwin.io/create-at, deletes kubetwin.io/delete-at on
their object, patches `Change` objects (kubetwin.changes) with the patch's `spec` and labels and annotations
(strategic for built-in kinds, a merge patch for custom resources, as the recorder computes it). Skipped, and
counted: what the twin's controllers write themselves -- objects with a controller (a ReplicaSet's or a Job's pods,
a Deployment's ReplicaSets, Kueue's Workloads), every pod's status and binding (the kubelet's and the scheduler's),
Events, Leases and endpoints, status-only patches (a node's heartbeats), nodes coming and going (the twin's node
pools, autoscaler and Spot model decide; a node's cordon or taints, a patch, are replayed). The recording's start
is t=0: its times are read against RECORDING_START, which becomes the snapshot's time."""

from __future__ import annotations

import copy
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kubetwin.api import kinds
from kubetwin.api.loader import Manifest
from kubetwin.importer.convert import DELETE_AT, DROPPED_META, LAST_APPLIED, TWIN_GROUP

__all__ = ["RECORDING_START", "TIME_OFFSET", "Replay", "replay", "revert_times"]

TIME_OFFSET = re.compile(r"\$\(time-offset-nanosecond (-?\d+)\)")
# Twin choice: a recording's relative times are read against this instant (the twin's default Scenario startTime);
# it is t=0 of the run, and `--snapshot-time` may say otherwise.
RECORDING_START = "2026-01-01T00:00:00Z"
CREATE_AT = "kubetwin.io/create-at"
# Kinds whose objects the twin writes itself (or has no use for): their recorded writes are skipped.
SKIPPED_KINDS = frozenset({"Event", "Lease", "Endpoints", "EndpointSlice", "ControllerRevision"})


def revert_times(text: str, start: str = RECORDING_START) -> str:
    """kwok's RevertTimeFromRelative: each `$(time-offset-nanosecond N)` as the RFC 3339 time N ns after `start`
    (microseconds, as metav1.RFC3339Micro)."""
    base = datetime.fromisoformat(start.replace("Z", "+00:00"))

    def absolute(m: re.Match[str]) -> str:
        t = base + timedelta(microseconds=int(m.group(1)) // 1000)
        return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return TIME_OFFSET.sub(absolute, text)


@dataclass
class Replay:
    """What a recording became: objects created later, Change objects, deletions per object, what was skipped."""

    creates: list[Manifest] = field(default_factory=list)
    changes: list[Manifest] = field(default_factory=list)
    deletes: dict[tuple[str, str, str], float] = field(default_factory=dict)  # (kind, namespace, name) -> seconds
    skipped: Counter[str] = field(default_factory=Counter)  # why -> patches

    def lines(self) -> list[str]:
        out = []
        if self.creates or self.changes or self.deletes:
            out.append(f"replayed: {len(self.creates)} created later ({CREATE_AT}), {len(self.changes)} changes "
                       f"(Change), {len(self.deletes)} deleted later ({DELETE_AT}) from a kwokctl recording")
        out += [f"skipped: {n} recorded writes: {why}" for why, n in sorted(self.skipped.items())]
        return out


def _seconds(duration_ns: object) -> float:
    return max(0.0, int(duration_ns) / 1e9) if isinstance(duration_ns, (int, float)) else 0.0


def _at(seconds: float) -> str:
    return f"{seconds:g}s"


def _kind_of(resource: dict[str, Any]) -> tuple[str, str] | None:
    """(apiVersion, kind) of a ResourcePatch's group/version/resource, None for a resource the twin does not know."""
    group, version, plural = resource.get("group") or "", resource.get("version") or "", resource.get("resource")
    info = kinds.REGISTRY.resolve(f"{plural}.{group}" if group else str(plural))
    if info is None or info.group != group:
        return None
    return (f"{group}/{version}" if group else str(version)), info.kind


def _controlled(obj: dict[str, Any]) -> bool:
    return any(ref.get("controller") for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a user would write it: the server's fields and its status left to the run."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    for k in DROPPED_META:
        meta.pop(k, None)
    (meta.get("annotations") or {}).pop(LAST_APPLIED, None)
    return obj


def _user_patch(patch: dict[str, Any]) -> dict[str, Any]:
    """The part of a recorded patch a user or an operator wrote: spec, labels and annotations."""
    out: dict[str, Any] = {}
    if "spec" in patch:
        out["spec"] = patch["spec"]
    meta = {k: v for k, v in (patch.get("metadata") or {}).items() if k in ("labels", "annotations")}
    if meta:
        out["metadata"] = meta
    return out


def replay(patches: list[Manifest], known: set[tuple[str, str, str]]) -> Replay:
    """The ResourcePatch documents (in the recording's order) as a Replay; `known`: (kind, namespace, name) of the
    snapshot's objects, which a delete may name too."""
    out = Replay()
    created: dict[tuple[str, str, str], dict[str, Any]] = {}  # user objects created by the recording
    n = 0
    for m in patches:
        p = m.obj
        kind = _kind_of(p.get("resource") or {})
        target = p.get("target") or {}
        method, at = p.get("method"), _seconds(p.get("durationNanosecond"))
        if kind is None:
            out.skipped["of resources the twin does not know"] += 1
            continue
        api_version, k = kind
        ns = "" if kinds.REGISTRY.is_cluster_scoped(k) else str(target.get("namespace") or "default")
        key = (k, ns, str(target.get("name")))
        template = p.get("template")
        if k in SKIPPED_KINDS:
            out.skipped[f"{k} objects the run writes itself"] += 1
        elif k == "Node" and method != "patch":
            out.skipped["nodes coming and going (the twin's NodePools, autoscaler and Spot model decide)"] += 1
        elif method == "create" and isinstance(template, dict):
            if _controlled(template):
                out.skipped["objects their controllers create (the twin's controllers make them)"] += 1
                continue
            obj = _clean({"apiVersion": api_version, "kind": k, **template})
            if k == "Pod":
                obj.get("spec", {}).pop("nodeName", None)  # the twin's scheduler binds it
            obj["metadata"].setdefault("annotations", {})[CREATE_AT] = _at(at)
            created[key] = obj
            out.creates.append(Manifest(obj, m.file, m.line))
        elif method == "delete":
            if key in created or key in known:
                out.deletes.setdefault(key, at)
                if key in created:
                    created[key]["metadata"]["annotations"][DELETE_AT] = _at(at)
            else:
                out.skipped["deletes of objects their controllers made or the recording never showed"] += 1
        elif method == "patch" and isinstance(template, dict):
            if k == "Pod":
                out.skipped["pods' status and bindings (the kubelet's and the scheduler's)"] += 1
                continue
            body = _user_patch(template)
            if not body:
                out.skipped["status-only patches (heartbeats, controllers' status)"] += 1
                continue
            if key not in created and key not in known:
                out.skipped["patches of objects their controllers made"] += 1
                continue
            n += 1
            group = api_version.rpartition("/")[0]
            change = {"apiVersion": TWIN_GROUP, "kind": "Change", "metadata": {"name": f"recorded-{n:05d}"},
                      "spec": {"at": _at(at), "target": {"apiVersion": api_version, "kind": k, "name": key[2],
                                                         **({"namespace": ns} if ns else {})},
                               "patchType": p.get("patchType") or (
                                   "merge" if kinds.REGISTRY.is_custom(group, k) else "strategic"),
                               "patch": body}}
            out.changes.append(Manifest(change, m.file, m.line))
        else:
            out.skipped["documents without a method the recorder writes (create, patch, delete)"] += 1
    return out

"""`kubectl drain NODE`: what it refuses, what it skips, and the evictions it retries (k8s.io/kubectl/pkg/drain).

kubectl cordons the node, then sorts its pods through its filters (drain/filters.go), in order: DaemonSet pods
(skipped with --ignore-daemonsets, a warning; refused without), mirror pods (skipped), pods with an emptyDir
(deleted with --delete-emptydir-data, a warning; refused without), pods that declare no controller (deleted with
--force, a warning; refused without); a Succeeded or Failed pod is always deletable. Any refusal ends the drain
before a pod is evicted (the node stays cordoned), in kubectl's words ("cannot delete <filter message>: ns/pod,
..."). Every other pod is evicted at once (one goroutine a pod); a 429 from a PodDisruptionBudget is retried every
5 seconds (drain.go: "will retry after 5s") until --timeout (0: no limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetwin.k8s.ownerrefs import controller_of
from kubetwin.store.store import Obj

__all__ = ["DAEMONSET_FATAL", "DAEMONSET_WARNING", "LOCAL_STORAGE_FATAL", "LOCAL_STORAGE_WARNING", "MIRROR_ANNOTATION",
           "RETRY_S", "UNMANAGED_FATAL", "UNMANAGED_WARNING", "Sorted", "sort_pods"]

# kubectl drain/filters.go
DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "Pods declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # a static pod's mirror: the API server cannot delete it
RETRY_S = 5.0  # drain.go evictPods: a refused eviction is tried again after 5 s


@dataclass
class Sorted:
    """A node's pods through kubectl's filters: those to evict, and the warnings and errors, filter by filter."""

    evict: list[Obj] = field(default_factory=list)
    warnings: dict[str, list[str]] = field(default_factory=dict)  # message -> ns/name
    errors: dict[str, list[str]] = field(default_factory=dict)

    def error_text(self) -> str:
        """kubectl's aggregate: one "cannot delete ..." per filter, several in brackets."""
        parts = [f"cannot delete {m}: {', '.join(pods)}" for m, pods in self.errors.items()]
        return parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"

    def warning_text(self) -> str:
        return "; ".join(f"Warning: {m}: {', '.join(pods)}" for m, pods in self.warnings.items())


def _terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def sort_pods(pods: list[Obj], ignore_daemonsets: bool, delete_emptydir_data: bool, force: bool) -> Sorted:
    """The node's pods (in the order listed) through kubectl drain's filters."""
    out = Sorted()
    for pod in pods:
        meta = pod["metadata"]
        ref = f"{meta.get('namespace') or 'default'}/{meta['name']}"
        owner = controller_of(pod)
        if owner is not None and owner[0] == "DaemonSet":
            if ignore_daemonsets:
                out.warnings.setdefault(DAEMONSET_WARNING, []).append(ref)
            else:
                out.errors.setdefault(DAEMONSET_FATAL, []).append(ref)
            continue
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            continue
        if not _terminated(pod) and any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or []):
            if not delete_emptydir_data:
                out.errors.setdefault(LOCAL_STORAGE_FATAL, []).append(ref)
                continue
            out.warnings.setdefault(LOCAL_STORAGE_WARNING, []).append(ref)
        if owner is None and not _terminated(pod):
            if not force:
                out.errors.setdefault(UNMANAGED_FATAL, []).append(ref)
                continue
            out.warnings.setdefault(UNMANAGED_WARNING, []).append(ref)
        out.evict.append(pod)
    return out

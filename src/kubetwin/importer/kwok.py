"""KWOK's `kwokctl snapshot save --format k8s`: multi-document YAML, one object per document as the dynamic client
lists it (apiVersion and kind set, managedFields and status kept), each with its resourceVersion cleared and `---`
between documents (kubernetes-sigs/kwok pkg/kwokctl/snapshot/save.go `Saver.Save`, pkg/utils/yaml/encoder.go;
Apache-2.0, read for the format only, at 172defa).

kwokctl's recordings (`kwokctl snapshot export --record`) add `ResourcePatch` documents (action.kwok.x-k8s.io/v1alpha1:
resource, target, durationNanosecond, method, template; pkg/apis/action/v1alpha1): changes over time, replayed by
importer/replay.py."""

from __future__ import annotations

from kubetwin.api.loader import Manifest

FORMAT = "kwokctl"
ACTION_GROUP = "action.kwok.x-k8s.io"


def is_snapshot(manifests: list[Manifest]) -> bool:
    """A file of separate documents (not a List) whose objects were listed by the API server but carry no
    resourceVersion: kwokctl clears it on every object it saves."""
    objs = [m.obj for m in manifests]
    meta: list[dict[str, object]]
    meta = [o["metadata"] if isinstance(o.get("metadata"), dict) else {} for o in objs]
    return bool(objs) and all(m.get("creationTimestamp") and "resourceVersion" not in m for m in meta)


def recordings(manifests: list[Manifest]) -> tuple[list[Manifest], list[Manifest]]:
    """The file's objects and its ResourcePatch documents, apart (importer/replay.py replays the latter)."""
    patches = [m for m in manifests if str(m.obj.get("apiVersion", "")).startswith(ACTION_GROUP + "/")]
    return [m for m in manifests if m not in patches], patches

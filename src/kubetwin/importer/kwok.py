"""KWOK's `kwokctl snapshot save --format k8s`: multi-document YAML, one object per document as the dynamic client
lists it (apiVersion and kind set, managedFields and status kept), each with its resourceVersion cleared and `---`
between documents (kubernetes-sigs/kwok pkg/kwokctl/snapshot/save.go `Saver.Save`, pkg/utils/yaml/encoder.go;
Apache-2.0, read for the format only, at 172defa).

kwokctl's recordings (`kwokctl snapshot record`) add `ResourcePatch` documents (action.kwok.x-k8s.io/v1alpha1:
resource, target, durationNanosecond, method, template; pkg/apis/action/v1alpha1): changes over time, which need
issue 36 item 2's timeline; refused with a message saying so."""

from __future__ import annotations

from kubetwin.api.errors import Diagnostic
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


def recordings(manifests: list[Manifest]) -> list[Diagnostic]:
    """kwokctl's ResourcePatch documents, each refused (one line per file with their count)."""
    patches = [m for m in manifests if str(m.obj.get("apiVersion", "")).startswith(ACTION_GROUP + "/")]
    if not patches:
        return []
    first = patches[0]
    return [Diagnostic(first.file, first.line, first.ref, "", f"{len(patches)} kwokctl recording document(s) "
                       f"({first.kind or 'ResourcePatch'}, {ACTION_GROUP}): replaying recorded changes needs a "
                       "timeline of changes (issue 36 item 2), which the twin does not have yet",
                       "import the state alone: kwokctl snapshot save --format k8s, or kubectl get ... -A -o yaml")]

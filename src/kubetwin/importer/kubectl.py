"""`kubectl get <kinds> -A -o yaml|json`: a `v1 List` of objects as the API server returns them (metadata with uid,
resourceVersion, creationTimestamp, managedFields; status), or plain multi-document YAML of such objects, one file
or several. The loader already unwraps a List (api/loader.py); this module recognises a dump's objects and a List
that was cut short.

kubectl prints a List's `kind: List` and `metadata` after its items (printers sort keys: apiVersion, items, kind,
metadata), so a file truncated anywhere inside the items has `apiVersion: v1` and `items:` but no kind."""

from __future__ import annotations

from typing import Any

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest

FORMAT = "kubectl"
# Set by the API server on every object it returns; a hand-written manifest has none of them.
SERVER_SET = ("creationTimestamp", "resourceVersion", "managedFields")


def is_dump_object(obj: dict[str, Any]) -> bool:
    """An object as the API server returned it (what `kubectl get -o yaml` and the snapshot tools print)."""
    meta = obj.get("metadata")
    return isinstance(meta, dict) and any(meta.get(k) is not None for k in SERVER_SET)


def truncated_list(m: Manifest) -> Diagnostic | None:
    """A kubectl List whose end is missing: items but no `kind: List`, which kubectl prints after them."""
    obj = m.obj
    if "kind" in obj or not isinstance(obj.get("items"), list):
        return None
    n = len(obj["items"])
    last = f", the last at line {m.line_of(f'items[{n - 1}]')}" if n else ""
    return Diagnostic(m.file, m.line, "List", "kind",
                      f"a kubectl List without its closing `kind: List` ({n} items read{last}): kubectl prints kind "
                      "and metadata after the items, so the file was cut short",
                      "dump the cluster again (kubectl get ... -A -o yaml > FILE) and check the command finished")

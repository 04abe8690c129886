"""The namespace controller: a deleted Namespace takes every object in it along.

kube-controller-manager's namespace controller (kubernetes pkg/controller/namespace/deletion,
namespaced_resources_deleter.go) deletes all content of a namespace being deleted -- every namespaced resource
discovery lists -- before the Namespace itself goes. The twin deletes the Namespace at once (its
`kubetwin.io/delete-at`) and its objects in the same instant after it (twin assumption: no Terminating phase and no
grace period, as the twin's other deletions); validate refuses objects created in it afterwards
(validation.namespaces), as NamespaceLifecycle refuses them.
"""

from __future__ import annotations

from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store


class NamespaceController:
    """Deletes a deleted namespace's objects: their owners first, Pods last, so no controller sees its pods go
    while it still lives and creates new ones."""

    def __init__(self, store: Store, env: Environment) -> None:
        self.store, self.env = store, env
        store.watch("Namespace", self._on_namespace)

    def _on_namespace(self, etype: str, ns: Obj, old: Obj | None) -> None:
        if etype == "DELETED":
            name = ns["metadata"]["name"]
            self.env.after(0, lambda: self.purge(name))

    def purge(self, namespace: str) -> None:
        """Delete every object in the namespace, kind by kind (Pods last), in name order."""
        kinds = [k for k in self.store.kinds() if k not in ("Pod", "Namespace")] + ["Pod"]
        for kind in kinds:
            for obj in sorted(self.store.list(kind, namespace), key=lambda o: o["metadata"]["name"]):
                self.store.delete(kind, namespace, obj["metadata"]["name"])

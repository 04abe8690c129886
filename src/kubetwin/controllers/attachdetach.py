"""The attach/detach controller, and the kubelet's wait for a pod's volumes before its containers start.

kube-controller-manager's attach/detach controller (pkg/controller/volume/attachdetach) attaches each volume a
scheduled pod uses to the pod's node, for volumes whose driver needs attaching (catalog.storage.ATTACHABLE_DRIVERS:
Compute Engine disks through the PD CSI driver; Filestore, Parallelstore, Lustre and Cloud Storage FUSE are mounted
over the network and never attached). A volume may be attached to several nodes only when its PersistentVolume's
access modes include ReadWriteMany or ReadOnlyMany, or name none (pkg/volume/util IsMultiAttachAllowed); a volume
attached elsewhere is not attached to a second node, and each pod scheduled there gets, once per volume and node
(reconciler.go reportMultiAttachError), Warning FailedAttachVolume `Multi-Attach error for volume "pvc-..." Volume
is already used by pod(s) a, b` (the pods on the other nodes in the pod's namespace; `and N pod(s) in different
namespaces` or `Volume is already used by N pod(s) in different namespaces` for the others). ReadWriteOnce lets
any number of pods on one node share the volume. When no unfinished pod on a node uses the volume any more, it is
detached (twin: at once; the real kubelet unmounts and the controller detaches in seconds) and a node waiting for
it gets it. A successful attach is Normal SuccessfulAttachVolume `AttachVolume.Attach succeeded for volume "pv"`.

The kubelet (pkg/kubelet/volumemanager WaitForAttachAndMount) starts no container until every claim the pod uses is
Bound and its volume attached: the pod stays Pending, its containers waiting in ContainerCreating, and after
podAttachAndMountTimeout (2m3s) it records Warning FailedMount `Unable to attach or mount volumes: unmounted
volumes=[...], unattached volumes=[...], failed to process volumes=[...]: context deadline exceeded` (once: the real
kubelet repeats it at every sync). The decision is asked by the kubelet when it starts a pod and after each change
(an attach, a detach, a claim bound), in the order pods were bound, so it does not depend on which controller
hears of a pod first.
"""

from __future__ import annotations

from collections.abc import Callable

from kubetwin.catalog.storage import ATTACHABLE_DRIVERS
from kubetwin.controllers.volumes import claim_volumes
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPONENT = "attachdetach-controller"
MOUNT_TIMEOUT = 123.0  # volumemanager podAttachAndMountTimeout: 2*time.Minute + 3*time.Second
MULTI_ATTACH_MODES = ("ReadWriteMany", "ReadOnlyMany")


def _ns(obj: Obj) -> str:
    return obj["metadata"].get("namespace") or "default"


def _finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def attachable(pv: Obj) -> bool:
    """Whether the attach/detach controller attaches this volume (its CSI driver requires attaching)."""
    spec = pv.get("spec") or {}
    if spec.get("gcePersistentDisk") is not None:
        return True
    return str((spec.get("csi") or {}).get("driver") or "") in ATTACHABLE_DRIVERS


def multi_attach_allowed(pv: Obj) -> bool:
    """IsMultiAttachAllowed for a PersistentVolume: ReadWriteMany or ReadOnlyMany among its modes, or none given."""
    modes = (pv.get("spec") or {}).get("accessModes") or []
    return not modes or any(m in MULTI_ATTACH_MODES for m in modes)


class AttachDetachController:
    """Attachments per volume, and the volume gate the kubelet asks before it starts a pod's containers."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self.attached: dict[str, list[str]] = {}  # PersistentVolume name -> nodes it is attached to
        self._reported: set[tuple[str, str]] = set()  # (volume, node) whose Multi-Attach error was reported
        self.listeners: list[Callable[[], None]] = []  # the kubelet's retry of pods waiting for volumes
        self._notify_queued = False
        store.watch("Pod", self._on_pod)
        store.watch("PersistentVolumeClaim", self._on_claim)

    # -- what the kubelet asks ------------------------------------------------------------------
    def ready(self, pod: Obj) -> bool:
        """Whether every volume the pod uses is bound and attached to its node; attaches what can be."""
        return not self.waiting(pod)

    def waiting(self, pod: Obj) -> dict[str, list[str]]:
        """The pod's volumes that are not ready: {"unattached": [...], "unprocessed": [...]} by pod volume name
        (empty: ready). Attaches each bound volume that can be attached to the pod's node now."""
        node, ns = pod["spec"].get("nodeName") or "", _ns(pod)
        out: dict[str, list[str]] = {}
        for vol, claim in claim_volumes(pod):
            pvc = self.store.get("PersistentVolumeClaim", ns, claim)
            pv_name = ((pvc or {}).get("spec") or {}).get("volumeName")
            pv = self.store.get("PersistentVolume", "", pv_name) if pv_name else None
            if pvc is None or (pvc.get("status") or {}).get("phase") != "Bound" or pv is None:
                out.setdefault("unprocessed", []).append(vol)
            elif attachable(pv) and not self._attach(pv, node, pod):
                out.setdefault("unattached", []).append(vol)
        return out

    def _attach(self, pv: Obj, node: str, pod: Obj) -> bool:
        name = pv["metadata"]["name"]
        nodes = self.attached.setdefault(name, [])
        if node in nodes:
            return True
        others = [n for n in nodes if n != node]
        if others and not multi_attach_allowed(pv):
            if (name, node) not in self._reported:
                self._reported.add((name, node))
                self._report_multi_attach(name, node, others)
            return False
        nodes.append(node)
        self._reported = {(v, n) for v, n in self._reported if v != name or n != node}
        for p in self._users(name, [node]):
            self.events.event(p, "Normal", "SuccessfulAttachVolume",
                              f'AttachVolume.Attach succeeded for volume "{name}"', COMPONENT)
        return True

    def _report_multi_attach(self, name: str, node: str, others: list[str]) -> None:
        """reportMultiAttachError: each pod scheduled to `node` that wants the volume hears which pods hold it."""
        holders = self._users(name, others)
        prefix = f'Multi-Attach error for volume "{name}"'
        for pod in self._users(name, [node]):
            local = [p["metadata"]["name"] for p in holders if _ns(p) == _ns(pod)]
            foreign = len(holders) - len(local)
            if not holders:
                msg = "Volume is already exclusively attached to one node and can't be attached to another"
            elif local:
                msg = f"Volume is already used by pod(s) {', '.join(local)}"
                if foreign:
                    msg += f" and {foreign} pod(s) in different namespaces"
            else:
                msg = f"Volume is already used by {foreign} pod(s) in different namespaces"
            self.events.event(pod, "Warning", "FailedAttachVolume", f"{prefix} {msg}", COMPONENT)

    def _users(self, pv_name: str, nodes: list[str]) -> list[Obj]:
        """Unfinished pods on `nodes` whose claims are bound to the volume, by namespace and name."""
        out = []
        for pod in self.store.list("Pod"):
            if pod["spec"].get("nodeName") not in nodes or _finished(pod):
                continue
            for _, claim in claim_volumes(pod):
                pvc = self.store.get("PersistentVolumeClaim", _ns(pod), claim)
                if pvc is not None and (pvc.get("spec") or {}).get("volumeName") == pv_name:
                    out.append(pod)
                    break
        return sorted(out, key=lambda p: (_ns(p), p["metadata"]["name"]))

    # -- detach and retries ---------------------------------------------------------------------
    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        node = pod["spec"].get("nodeName")
        if not node or not claim_volumes(pod):
            return
        # once, when the pod stops using its volumes: it finishes, or it is deleted unfinished (every later write of
        # a finished pod released nothing more, and each release scans the pods)
        was_finished = old is not None and _finished(old)
        if (etype == "DELETED" and not _finished(pod)) or (etype != "DELETED" and _finished(pod) and not was_finished):
            self.env.after(0, lambda: self._release(pod, node))

    def _on_claim(self, etype: str, pvc: Obj, old: Obj | None) -> None:
        if etype != "DELETED" and (pvc.get("status") or {}).get("phase") == "Bound" and (
                old is None or (old.get("status") or {}).get("phase") != "Bound"):
            self._notify()

    def _release(self, pod: Obj, node: str) -> None:
        """Detach the pod's volumes from its node once no unfinished pod there uses them."""
        changed = False
        for _, claim in claim_volumes(pod):
            pvc = self.store.get("PersistentVolumeClaim", _ns(pod), claim)
            name = ((pvc or {}).get("spec") or {}).get("volumeName")
            nodes = self.attached.get(name or "")
            if name and nodes and node in nodes and not self._users(name, [node]):
                nodes.remove(node)
                changed = True
        if changed:
            self._notify()

    def _notify(self) -> None:
        if not self._notify_queued:
            self._notify_queued = True
            self.env.after(0, self._run_listeners)

    def _run_listeners(self) -> None:
        self._notify_queued = False
        for listener in self.listeners:
            listener()

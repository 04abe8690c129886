"""The ResourceClaim controller (pkg/controller/resourceclaim): claims from templates, and release.

For each pod claim naming a ResourceClaimTemplate it creates `<pod>-<claim>-<5 random>` owned by the pod
(annotation resource.kubernetes.io/pod-claim-name) and records it in pod.status.resourceClaimStatuses. When
a pod is done or gone it drops the pod from each claim's reservedFor; a claim nobody reserves any more is
deallocated (status.allocation cleared), and claims generated for a pod are deleted with it.
"""

from __future__ import annotations

from kubetwin.k8s.generatename import NameGenerator
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.store.store import Obj, Store

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"  # resourceapi.Finalizer, added with an allocation


def claim_name(pod: Obj, pod_claim: dict) -> str | None:
    """resourceclaim.Name: the claim a pod claim refers to, None while a generated one does not exist yet."""
    if pod_claim.get("resourceClaimName"):
        return pod_claim["resourceClaimName"]
    for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("name") == pod_claim["name"]:
            return st.get("resourceClaimName")
    return None


class ResourceClaimController:
    """The pod handler only queues the pod's key; syncPod-style work runs from the queue (controller.go
    enqueuePod / syncPod), so the claims do not depend on which controllers saw the pod event first."""

    def __init__(self, store: Store, names: NameGenerator) -> None:
        self.store, self.names = store, names
        self._work = WorkQueue(store.env, self._sync)
        self._gone: dict[tuple[str, str], Obj] = {}  # deleted pods with claims, until their key is processed
        store.watch("Pod", self._on_pod)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        if not pod["spec"].get("resourceClaims"):
            return
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if etype == "DELETED":
            self._gone[key] = pod
        elif etype == "ADDED":
            self._gone.pop(key, None)  # a pod of the same name again
        self._work.add(key)

    def _sync(self, key: tuple[str, str]) -> None:
        """Claims of a live pod are created; those of a done or deleted pod are released."""
        pod = self.store.get("Pod", *key)
        gone = self._gone.pop(key, None)
        if gone is not None and (pod is None or pod["metadata"]["uid"] != gone["metadata"]["uid"]):
            self._release(gone, deleted=True)
        if pod is None or not pod["spec"].get("resourceClaims"):
            return
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            self._release(pod, deleted=False)
        else:
            self._generate(pod, pod["spec"]["resourceClaims"])

    def _generate(self, pod: Obj, claims: list[dict]) -> None:
        ns, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        known = {s["name"] for s in statuses}
        for pc in claims:
            tmpl_name = pc.get("resourceClaimTemplateName")
            if not tmpl_name or pc["name"] in known:
                continue
            tmpl = self.store.get("ResourceClaimTemplate", ns, tmpl_name)
            if tmpl is None:
                continue  # the scheduler reports the missing template; the pod waits
            tspec = tmpl.get("spec") or {}
            meta = tspec.get("metadata") or {}
            name = self.names.generate(self.store, "ResourceClaim", ns, f"{pod_name}-{pc['name']}")
            self.store.create({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": ns, "labels": dict(meta.get("labels") or {}),
                             "annotations": {**(meta.get("annotations") or {}), POD_CLAIM_NAME: pc["name"]},
                             "ownerReferences": [owner_ref(pod)]},
                "spec": tspec.get("spec") or {}})
            statuses.append({"name": pc["name"], "resourceClaimName": name})
        if len(statuses) != len(known):
            self.store.patch("Pod", ns, pod_name,
                             lambda p: {**p, "status": {**p.get("status", {}), "resourceClaimStatuses": statuses}})

    def _release(self, pod: Obj, deleted: bool) -> None:
        ns, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
        for pc in pod["spec"]["resourceClaims"]:
            name = claim_name(pod, pc)
            claim = self.store.get("ResourceClaim", ns, name) if name else None
            if claim is None:
                continue
            status = dict(claim.get("status") or {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            generated = any(r.get("uid") == uid for r in claim["metadata"].get("ownerReferences") or [])
            if generated and not reserved:
                self.store.delete("ResourceClaim", ns, name)
                continue
            if reserved == (status.get("reservedFor") or []):
                continue
            status["reservedFor"] = reserved
            meta = claim["metadata"]
            if not reserved:
                status.pop("reservedFor")
                status.pop("allocation", None)  # deallocate: nobody uses the devices any more
                meta = {**meta, "finalizers": [f for f in meta.get("finalizers") or [] if f != FINALIZER]}
                if not meta["finalizers"]:
                    meta.pop("finalizers")
            self.store.update({**claim, "metadata": meta, "status": status})

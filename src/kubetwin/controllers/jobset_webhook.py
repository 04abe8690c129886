"""The JobSet webhooks (kubernetes-sigs/jobset pkg/webhooks): JobSet defaulting, and the pod webhook that runs
exclusive placement (pod_webhook.go Default + ValidateCreate), as admission steps of the twin's API server.

Keys and names from api/jobset/v1alpha2/jobset_types.go and pkg/constants/constants.go.
"""

from __future__ import annotations

import hashlib

from kubetwin.controllers.job import COMPLETION_INDEX, AdmissionDenied
from kubetwin.store.store import Obj, Store

API = "jobset.x-k8s.io/v1alpha2"
JOBSET_NAME, JOBSET_UID = "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/jobset-uid"
RJOB_NAME, RJOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-name", "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS, JOB_INDEX = "jobset.sigs.k8s.io/global-replicas", "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX, JOB_KEY = "jobset.sigs.k8s.io/job-global-index", "jobset.sigs.k8s.io/job-key"
RESTARTS_KEY, PRIORITY_KEY = "jobset.sigs.k8s.io/restart-attempt", "jobset.sigs.k8s.io/priority"
EXCLUSIVE_KEY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
JOB_RESTARTS_KEY = "jobset.sigs.k8s.io/job-restart-attempt"  # JobRestartAttemptKey (with the RestartJob gate)
GROUP_NAME, GROUP_REPLICAS = "jobset.sigs.k8s.io/group-name", "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
COORDINATOR_KEY = "jobset.sigs.k8s.io/coordinator"  # <pod hostname>.<subdomain> of spec.coordinator's pod


def job_key(ns: str, job_name: str) -> str:
    """jobHashKey: the SHA1 of "<namespace>/<job>" (40 hex characters fit a label value; SHA256 would not)."""
    return hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest()


def priority_label(priority: int) -> str:
    """priorityLabelValue: negative priorities as "n<abs>", so the label value stays valid."""
    return f"n{-priority}" if priority < 0 else str(priority)


class PodWebhook:
    """mpod.kb.io + vpod.kb.io: the priority label; for exclusive placement the leader's (anti-)affinity, and
    followers refused until the leader is bound, then pinned to its topology domain."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, pod: Obj) -> Obj:
        """Default then ValidateCreate for pods of JobSets: the priority label, and exclusive placement."""
        meta = pod["metadata"]
        ann = meta.get("annotations") or {}
        if JOBSET_NAME not in ann or NODE_SELECTOR_STRATEGY in ann:
            return pod
        spec = pod["spec"]
        labels = dict(meta.get("labels") or {})
        if spec.get("priority") is not None:
            labels[PRIORITY_KEY] = priority_label(int(spec["priority"]))
        pod = {**pod, "metadata": {**meta, "labels": labels}}
        topo = ann.get(EXCLUSIVE_KEY)
        if topo is None:
            return pod
        if ann.get(COMPLETION_INDEX) == "0":
            return {**pod, "spec": {**spec, "affinity": _exclusive_affinity(spec.get("affinity"), labels, topo)}}
        leader, why = self._leader(pod)
        if leader is not None and leader["spec"].get("nodeName"):
            node = self.store.get("Node", "", leader["spec"]["nodeName"])
            value = ((node or {}).get("metadata", {}).get("labels") or {}).get(topo)
            if value is None:
                raise AdmissionDenied(f'admission webhook "mpod.kb.io" denied the request: node does not have '
                                      f"topology label: {topo}")
            spec = {**spec, "nodeSelector": {**(spec.get("nodeSelector") or {}), topo: value}}
            pod = {**pod, "spec": spec}
        if topo not in (spec.get("nodeSelector") or {}):
            raise AdmissionDenied('admission webhook "vpod.kb.io" denied the request: follower pod node selector for '
                                  f"topology domain not found. missing selector: {topo}")
        if why:
            raise AdmissionDenied(f'admission webhook "vpod.kb.io" denied the request: {why}')
        if leader is None or not leader["spec"].get("nodeName"):
            raise AdmissionDenied('admission webhook "vpod.kb.io" denied the request: leader pod not yet scheduled, '
                                  "not creating follower pod. this is an expected, transient error")
        return pod

    def _leader(self, pod: Obj) -> tuple[Obj | None, str]:
        """leaderPodForFollower: the one live pod of index 0 of the same Job (same owner uid)."""
        meta = pod["metadata"]
        labels, ns = meta["labels"], meta.get("namespace") or "default"
        leader_name = f"{labels[JOBSET_NAME]}-{labels[RJOB_NAME]}-{labels[JOB_INDEX]}-0"
        ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if ref is None:
            return None, "follower pod has no owner reference"
        live = [p for p in self.store.owned("Pod", ns, "Job", ref["name"])
                if (p["metadata"].get("annotations") or {}).get(COMPLETION_INDEX) == "0"
                and p["status"].get("phase") not in ("Succeeded", "Failed")]
        if len(live) != 1:
            return None, (f"expected 1 leader pod ({leader_name}), but got {len(live)}. this is an expected, "
                          "transient error")
        leader_ref = next(r for r in live[0]["metadata"]["ownerReferences"] if r.get("controller"))
        if leader_ref["uid"] != ref["uid"]:
            return None, f"follower pod owner UID ({ref['uid']}) != leader pod owner UID ({leader_ref['uid']})"
        return live[0], ""


def _exclusive_affinity(affinity: dict | None, labels: dict, topo: str) -> dict:
    """setExclusiveAffinities: same job-key together, any other job-key of the same priority kept out."""
    aff = dict(affinity or {})
    key = labels.get(JOB_KEY, "")
    pa, anti = dict(aff.get("podAffinity") or {}), dict(aff.get("podAntiAffinity") or {})
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pa[req] = [*(pa.get(req) or []), {"labelSelector": {"matchExpressions": [
        {"key": JOB_KEY, "operator": "In", "values": [key]}]}, "topologyKey": topo, "namespaceSelector": {}}]
    anti[req] = [*(anti.get(req) or []), {"labelSelector": {"matchExpressions": [
        {"key": JOB_KEY, "operator": "Exists"}, {"key": JOB_KEY, "operator": "NotIn", "values": [key]},
        {"key": PRIORITY_KEY, "operator": "In", "values": [labels.get(PRIORITY_KEY, "")]}]},
        "topologyKey": topo, "namespaceSelector": {}}]
    return {**aff, "podAffinity": pa, "podAntiAffinity": anti}

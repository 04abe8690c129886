"""The LeaderWorkerSet pod webhook (kubernetes-sigs/lws pkg/webhooks/pod_webhook.go Default) as an admission step
of the twin's API server: the group and worker indexes, the group key, sub-groups, exclusive placement's
(anti-)affinity on the leader, and the LWS_* environment (pkg/utils/pod/pod_utils.go AddLWSVariables).

Keys and names from api/leaderworkerset/v1/leaderworkerset_types.go.
"""

from __future__ import annotations

import hashlib

from kubetwin.store.store import Obj

API = "leaderworkerset.x-k8s.io/v1"
NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"
SIZE = "leaderworkerset.sigs.k8s.io/size"
REPLICAS = "leaderworkerset.sigs.k8s.io/replicas"
LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
SUBGROUP_INDEX = "leaderworkerset.sigs.k8s.io/subgroup-index"
SUBGROUP_SIZE = "leaderworkerset.sigs.k8s.io/subgroup-size"
SUBGROUP_KEY = "leaderworkerset.sigs.k8s.io/subgroup-key"
SUBGROUP_POLICY = "leaderworkerset.sigs.k8s.io/subgroup-policy-type"
SUBDOMAIN_POLICY = "leaderworkerset.sigs.k8s.io/subdomainPolicy"
RECREATE_AFTER_START = "leaderworkerset.sigs.k8s.io/experimental-recreate-group-after-start"
ENV_LEADER_ADDRESS, ENV_GROUP_SIZE, ENV_WORKER_INDEX = "LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"
_REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def group_key(first: str, second: str) -> str:
    """genGroupUniqueKey: the SHA1 of "<first>/<second>" ("<namespace>/<leader pod>" for a group,
    "<leader pod>/<subgroup index>" for a sub-group)."""
    return hashlib.sha1(f"{first}/{second}".encode()).hexdigest()


def ordinal(name: str) -> int:
    """GetParentNameAndOrdinal's ordinal: the number after the last '-', -1 when there is none."""
    _, _, tail = name.rpartition("-")
    return int(tail) if tail.isdigit() else -1


def subgroup_index(size: int, subgroup_size: int, worker_index: int) -> int:
    """getSubGroupIndex: when only size-1 divides by subGroupSize the leader is the extra pod of sub-group 0."""
    if (size - 1) % subgroup_size == 0 and size % subgroup_size != 0:
        return (worker_index - 1) // subgroup_size
    return worker_index // subgroup_size


def exclusive_affinity(affinity: dict | None, label: str, key: str, topo: str) -> dict:
    """SetExclusiveAffinities: a required podAffinity to pods of the same key and a required podAntiAffinity to
    pods of any other key, over the topology key (once: a pod that has both terms for this key is left alone)."""
    aff = dict(affinity or {})
    pa, anti = dict(aff.get("podAffinity") or {}), dict(aff.get("podAntiAffinity") or {})
    if (any(t.get("topologyKey") == topo for t in pa.get(_REQ) or [])
            and any(t.get("topologyKey") == topo for t in anti.get(_REQ) or [])):
        return aff
    pa[_REQ] = [*(pa.get(_REQ) or []), {"labelSelector": {"matchExpressions": [
        {"key": label, "operator": "In", "values": [key]}]}, "topologyKey": topo}]
    anti[_REQ] = [*(anti.get(_REQ) or []), {"labelSelector": {"matchExpressions": [
        {"key": label, "operator": "Exists"}, {"key": label, "operator": "NotIn", "values": [key]}]},
        "topologyKey": topo}]
    return {**aff, "podAffinity": pa, "podAntiAffinity": anti}


def pod_webhook(pod: Obj) -> Obj:
    """mpod.kb.io's Default for a pod carrying the LWS name label; other pods pass untouched."""
    meta = pod["metadata"]
    labels = dict(meta.get("labels") or {})
    if NAME not in labels:
        return pod
    ann = meta.get("annotations") or {}
    size = int(ann[SIZE])
    name, ns = meta["name"], meta.get("namespace") or "default"
    spec = dict(pod["spec"])
    sub_size = ann.get(SUBGROUP_SIZE)
    if labels.get(WORKER_INDEX) == "0":  # the leader
        labels.setdefault(GROUP_INDEX, str(ordinal(name)))
        if ann.get(SUBDOMAIN_POLICY) == "UniquePerReplica":
            spec["subdomain"] = name
        key = labels.setdefault(GROUP_KEY, group_key(ns, name))
        if EXCLUSIVE in ann:
            spec["affinity"] = exclusive_affinity(spec.get("affinity"), GROUP_KEY, key, ann[EXCLUSIVE])
        if sub_size is not None and not labels.get(SUBGROUP_INDEX) and ann.get(SUBGROUP_POLICY) != "LeaderExcluded":
            labels[SUBGROUP_INDEX] = "0"  # the leader is always in sub-group 0
            labels[SUBGROUP_KEY] = group_key(name, "0")
            if SUBGROUP_EXCLUSIVE in ann:
                spec["affinity"] = exclusive_affinity(spec.get("affinity"), SUBGROUP_KEY, labels[SUBGROUP_KEY],
                                                      ann[SUBGROUP_EXCLUSIVE])
    else:
        worker = ordinal(name)
        labels[WORKER_INDEX] = str(worker)
        if sub_size is not None and not labels.get(SUBGROUP_INDEX):
            idx = str(subgroup_index(size, int(sub_size), worker))
            labels[SUBGROUP_INDEX] = idx
            labels[SUBGROUP_KEY] = group_key(ann.get(LEADER_NAME, ""), idx)
            if SUBGROUP_EXCLUSIVE in ann:
                spec["affinity"] = exclusive_affinity(spec.get("affinity"), SUBGROUP_KEY, labels[SUBGROUP_KEY],
                                                      ann[SUBGROUP_EXCLUSIVE])
    env = [{"name": ENV_LEADER_ADDRESS,
            "value": f"{labels[NAME]}-{labels[GROUP_INDEX]}.{spec.get('subdomain', '')}.{ns}"},
           {"name": ENV_GROUP_SIZE, "value": str(size)}, {"name": ENV_WORKER_INDEX, "value": labels[WORKER_INDEX]}]
    for field in ("containers", "initContainers"):
        if spec.get(field):
            spec[field] = [_with_env(c, env) for c in spec[field]]
    return {**pod, "metadata": {**meta, "labels": labels}, "spec": spec}


def _with_env(container: dict, env: list[dict]) -> dict:
    """addEnvVarsIfNotExists: the LWS variables first, then the container's own of other names."""
    names = {e["name"] for e in env}
    return {**container, "env": [*env, *(e for e in container.get("env") or [] if e.get("name") not in names)]}

"""The LeaderWorkerSet pod webhook (kubernetes-sigs/lws pkg/webhooks/pod_webhook.go Default) as an admission step
of the twin's API server: the group and worker indexes, the group key, sub-groups, exclusive placement's
(anti-)affinity on the leader, and the LWS_* environment (pkg/utils/pod/pod_utils.go AddLWSVariables).

Keys and names from api/leaderworkerset/v1/leaderworkerset_types.go.
"""

from __future__ import annotations

import hashlib

from kubetwin.k8s.units import UnitError, parse_quantity
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
# pkg/utils/accelerators/tpu.go
TPU, LEADER_REQUESTS_TPUS = "google.com/tpu", "leaderworkerset.sigs.k8s.io/leader-requests-tpus"
TPU_WORKER_HOSTNAMES, TPU_WORKER_ID, TPU_NAME = "TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID", "TPU_NAME"
TPU_PROCESS_ADDRESSES, TPU_PROCESS_PORT, TPU_DEFAULT_PORT = "TPU_PROCESS_ADDRESSES", "TPU_PROCESS_PORT", 8476
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
    if tpu_containers(spec):  # AddTPUVariables, before the LWS variables go in front
        spec = add_tpu_variables(name, labels, ann, spec, size)
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


def _tpus(container: dict) -> int:
    """numTPUsRequested: google.com/tpu from limits, else requests."""
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        value = (res.get(part) or {}).get(TPU)
        if value is not None:
            try:
                return int(parse_quantity(value))
            except (UnitError, ValueError):
                return 0
    return 0


def tpu_containers(spec: dict) -> list[tuple[str, int]]:
    """getContainersRequestingTPUs: (field, index) of the containers, then init containers, asking for TPUs."""
    return [(f, i) for f in ("containers", "initContainers") for i, c in enumerate(spec.get(f) or [])
            if _tpus(c)]


def add_tpu_variables(name: str, labels: dict, ann: dict, spec: dict, size: int) -> dict:
    """AddTPUVariables: TPU_WORKER_HOSTNAMES, TPU_WORKER_ID, TPU_NAME, TPU_PROCESS_ADDRESSES and TPU_PROCESS_PORT
    on every container asking for TPUs (a sub-group's slice when the LWS has subGroupSize), unless its first such
    container already sets TPU_WORKER_HOSTNAMES or TPU_WORKER_ID."""
    spec = {**spec, **{f: [dict(c) for c in spec.get(f) or []] for f in ("containers", "initContainers")
                       if spec.get(f)}}
    where = tpu_containers(spec)
    first = spec[where[0][0]][where[0][1]]
    if any(e.get("name") in (TPU_WORKER_HOSTNAMES, TPU_WORKER_ID) for e in first.get("env") or []):
        return spec
    sub = spec.get("subdomain", "")
    leader_tpus = ann.get(LEADER_REQUESTS_TPUS) == "true"
    is_leader = labels.get(WORKER_INDEX) == "0"
    leader = name if is_leader else name.rpartition("-")[0]
    if SUBGROUP_SIZE in ann:
        return _tpu_subgroup(spec, where[0], name, leader, labels, ann, sub, leader_tpus, is_leader)
    index = 0 if is_leader else ordinal(name) - (0 if leader_tpus else 1)
    ports = [_env(spec[f][i], TPU_PROCESS_PORT) or str(TPU_DEFAULT_PORT + k) for k, (f, i) in enumerate(where)]
    hosts: list[str] = []
    if leader_tpus or is_leader:
        hosts += [f"{leader}.{sub}"] * len(where)
    for j in range(1, size):
        hosts += [f"{leader}-{j}.{sub}"] * len(where)
    addresses = [f"{h}:{ports[k % len(where)]}" for k, h in enumerate(hosts)]
    for k, (f, i) in enumerate(where):
        c = spec[f][i]
        add = [{"name": TPU_WORKER_HOSTNAMES, "value": ",".join(hosts)},
               {"name": TPU_WORKER_ID, "value": str(index * len(where) + k)}, {"name": TPU_NAME, "value": leader},
               {"name": TPU_PROCESS_ADDRESSES, "value": ",".join(addresses)}]
        if _env(c, TPU_PROCESS_PORT) is None:
            add.append({"name": TPU_PROCESS_PORT, "value": ports[k]})
        spec[f][i] = {**c, "env": [*(c.get("env") or []), *add]}
    return spec


def _tpu_subgroup(spec: dict, where: tuple[str, int], name: str, leader: str, labels: dict, ann: dict, sub: str,
                  leader_tpus: bool, is_leader: bool) -> dict:
    """addTPUVariablesSubGroup: the hosts of the pod's own sub-group, on its first container asking for TPUs."""
    size, group, worker = int(ann[SUBGROUP_SIZE]), int(labels[SUBGROUP_INDEX]), int(labels[WORKER_INDEX])
    tpu_id = worker % size
    if worker != 0 and not leader_tpus:
        tpu_id, group = (worker - 1) % size, (worker - 1) // size
    c = spec[where[0]][where[1]]
    port = _env(c, TPU_PROCESS_PORT) or str(TPU_DEFAULT_PORT)
    start, end = size * group + 1, size * (group + 1)
    hosts: list[str] = []
    if is_leader:
        hosts.append(f"{name}.{sub}")
        end -= 1
    elif leader_tpus and group == 0:
        end -= 1
        hosts.append(f"{leader}.{sub}")
    elif leader_tpus:
        start, end = start - 1, end - 1
    hosts += [f"{leader}-{j}.{sub}" for j in range(start, end + 1)]
    add = [{"name": TPU_WORKER_HOSTNAMES, "value": ",".join(hosts)}, {"name": TPU_WORKER_ID, "value": str(tpu_id)},
           {"name": TPU_NAME, "value": leader},
           {"name": TPU_PROCESS_ADDRESSES, "value": ",".join(f"{h}:{port}" for h in hosts)}]
    if _env(c, TPU_PROCESS_PORT) is None:
        add.append({"name": TPU_PROCESS_PORT, "value": port})
    spec[where[0]][where[1]] = {**c, "env": [*(c.get("env") or []), *add]}
    return spec


def _env(container: dict, name: str) -> str | None:
    """GetEnvVarValueIfInContainer."""
    return next((str(e.get("value", "")) for e in container.get("env") or [] if e.get("name") == name), None)

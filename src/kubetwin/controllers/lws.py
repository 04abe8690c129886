"""LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1) as kubernetes-sigs/lws runs it; pod webhook:
lws_webhook.py, defaulting: api/lws_defaults.py.

Followed files (kubernetes-sigs/lws @060ab4da): pkg/controllers/leaderworkerset_controller.go (the leader
StatefulSet, status and conditions, rolling-update partition), pkg/controllers/pod_controller.go (the worker
StatefulSet per leader, startupPolicy LeaderReady, exclusive placement's nodeSelector, restart policies),
pkg/webhooks/pod_webhook.go, api/leaderworkerset/v1/leaderworkerset_types.go.

Upstream a LeaderWorkerSet owns a leader StatefulSet (pods <lws>-<i>, one per group) and each leader pod owns a
worker StatefulSet (pods <lws>-<i>-<j>, j = 1..size-1, parallel pod management). The twin does not run the
StatefulSet controller, so this controller makes the pods those StatefulSets would make, with their names,
hostname and subdomain (the headless Service's name), labels and annotations: a leader pod is owned by the
LeaderWorkerSet and a worker by its leader pod (owner kind Pod, which upstream's workerPodBelongsToLeader accepts),
so deleting a leader deletes its workers as the garbage collector does upstream. The headless Services are created
as upstream's CreateHeadlessServiceIfNotExists makes them (pkg/utils/controller/controller_utils.go): one named
after the LWS for subdomainPolicy Shared (the LWS controller), one per group named after its leader for
UniquePerReplica (the pod controller, owned by the leader pod); the twin resolves no DNS, so they are objects to
list and inspect. Writes go straight to the store: the manager's client
defaults to 500 qps / 500 burst (api/config/v1alpha1/defaults.go), far above what a group's few pods need.

Rolling update: a changed leaderWorkerTemplate (or networkConfig) is a new revision; groups at or above
`partition` whose leader carries an older template-revision-hash are recreated at the new one, highest index first,
while fewer than maxUnavailable + maxSurge groups (at least 1, as the leader StatefulSet's maxUnavailable) are not
ready; maxSurge adds burst groups (indexes replicas..replicas+maxSurge-1, new revision) for the update's duration.
Upstream's finer partition arithmetic (rollingUpdatePartition over continuously ready replicas, surge reclaimed
group by group) is reduced to that rule.
"""

from __future__ import annotations

import hashlib
import json
import math

from kubetwin.api.lws_defaults import lws_defaults
from kubetwin.controllers import lws_webhook as W
from kubetwin.controllers.common import pod_from_template, ready_since
from kubetwin.k8s.conditions import set_condition
from kubetwin.k8s.ownerrefs import owner_ref
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.sim.env import Environment
from kubetwin.store.events import EventRecorder
from kubetwin.store.store import Obj, Store

COMPONENT = "leaderworkerset"
# pkg/controllers/leaderworkerset_controller.go makeCondition: type -> (reason, message)
CONDITIONS = {"Available": ("AllGroupsReady", "All replicas are ready"),
              "Progressing": ("GroupsProgressing", "Replicas are progressing"),
              "UpdateInProgress": ("GroupsUpdating", "Rolling Upgrade is in progress")}
# exclusiveConditionTypes: a True one of a pair turns the other False
_EXCLUSIVE = {frozenset(("Available", "Progressing")), frozenset(("Available", "UpdateInProgress"))}
RECREATE_POLICIES = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")


def revision_hash(spec: dict) -> str:
    """The template-revision-hash: what a change of triggers a rolling update (the leaderWorkerTemplate and the
    networkConfig; upstream hashes the ControllerRevision's patch of the same fields)."""
    data = {"leaderWorkerTemplate": spec.get("leaderWorkerTemplate"), "networkConfig": spec.get("networkConfig")}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]


def scaled(value: int | str | None, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is, "N%" of total rounded down (maxUnavailable) or up
    (maxSurge)."""
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value or 0)


def _running_ready(pod: Obj) -> bool:
    """PodRunningAndReady."""
    return pod["status"].get("phase") == "Running" and ready_since(pod) is not None


def _restarted(pod: Obj) -> bool:
    """ContainerRestarted: a container or init container of a Pending or Running pod restarted."""
    st = pod["status"]
    return st.get("phase") in ("Pending", "Running") and any(
        cs.get("restartCount", 0) > 0 for cs in (st.get("initContainerStatuses") or [])
        + (st.get("containerStatuses") or []))


def _terminal(pod: Obj) -> bool:
    return pod["status"].get("phase") in ("Succeeded", "Failed")


class LeaderWorkerSetController:
    """Reconciles LeaderWorkerSets into groups of one leader and size-1 workers; registers the defaulting and
    pod webhooks."""

    def __init__(self, store: Store, env: Environment, events: EventRecorder) -> None:
        self.store, self.env, self.events = store, env, events
        self._work = WorkQueue(env, self._process)
        self._templates: dict[str, dict] = {}  # revision hash -> spec (the ControllerRevisions)
        self._group_rev: dict[tuple[str, str, int], str] = {}  # (ns, lws, group) -> revision its leader had
        self._gone: dict[tuple[str, str], list[Obj]] = {}  # pods deleted by others, per LWS, since its last sync
        self._ours: set[str] = set()  # uids of pods this controller deleted
        self._announced: set[str] = set()  # uids of LWSs / leaders whose "statefulset" creation was announced
        store.admit(lws_defaults, ("LeaderWorkerSet",))
        store.admit(W.pod_webhook, ("Pod",))
        store.watch("LeaderWorkerSet", self._on_lws)
        store.watch("Pod", self._on_pod, owner_kind="LeaderWorkerSet")
        store.watch("Pod", self._on_pod, owner_kind="Pod")

    # -- watches ---------------------------------------------------------------------------------
    def _on_lws(self, etype: str, lws: Obj, old: Obj | None) -> None:
        self._work.add((lws["metadata"].get("namespace") or "default", lws["metadata"]["name"]))

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        name = (meta.get("labels") or {}).get(W.NAME)
        if name is None:
            return
        key = (meta.get("namespace") or "default", name)
        if etype == "DELETED":
            if meta.get("uid") in self._ours:
                self._ours.discard(meta["uid"])
            else:
                self._gone.setdefault(key, []).append(pod)  # its own cache: a pod someone else deleted
        self._work.add(key)

    # -- reconcile -------------------------------------------------------------------------------
    def _process(self, key: tuple[str, str]) -> None:
        ns, name = key
        gone = self._gone.pop(key, [])
        lws = self.store.get("LeaderWorkerSet", ns, name)
        leaders = {W.ordinal(p["metadata"]["name"]): p for p in self.store.owned("Pod", ns, "LeaderWorkerSet", name)}
        if lws is None:  # the garbage collector removes a deleted LWS's groups
            for pod in gone:
                if pod["metadata"]["labels"].get(W.WORKER_INDEX) == "0":
                    self._delete_workers_of(pod)
            for leader in leaders.values():
                self._delete_group(leader)
            return
        self.sync(lws, leaders, gone)

    def sync(self, lws: Obj, leaders: dict[int, Obj], gone: list[Obj]) -> None:
        meta, spec = lws["metadata"], lws["spec"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        rev = revision_hash(spec)
        self._templates.setdefault(rev, spec)
        if meta["uid"] not in self._announced:
            self._announced.add(meta["uid"])
            self.events.event(lws, "Normal", "GroupsProgressing", f"Created leader statefulset {name}", COMPONENT)
        if (spec.get("networkConfig") or {}).get("subdomainPolicy", "Shared") == "Shared":
            self._headless_service(lws, name, {W.NAME: name}, lws)  # reconcileHeadlessServices
        for pod in gone:  # a leader someone else deleted: the garbage collector takes its worker StatefulSet's pods
            if pod["metadata"]["labels"].get(W.WORKER_INDEX) == "0":
                self._delete_workers_of(pod)
        workers = {i: self._workers(leader) for i, leader in leaders.items()}
        self._restarts(lws, leaders, workers, gone)
        target = self._target(lws, rev, leaders, workers)
        for i in sorted(leaders, reverse=True):  # scale down: the groups past replicas (and any surge) go
            if i >= target:
                self._delete_group(leaders.pop(i))
                workers.pop(i)
        self._rolling_update(lws, rev, leaders, workers, target)
        partition = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get("partition", 0)
        for i in range(target):
            if i not in leaders:
                remembered = self._group_rev.get((ns, name, i))
                leader_rev = rev if i >= partition or remembered not in self._templates else remembered
                leaders[i] = self._create_leader(lws, i, leader_rev or rev)
                workers[i] = []
        for i, leader in sorted(leaders.items()):
            self._create_workers(lws, leader, workers[i])
        self._status(lws, rev, leaders)

    def _workers(self, leader: Obj) -> list[Obj]:
        """The worker pods of this leader (its uid: a worker of a leader deleted and re-made is not its)."""
        meta = leader["metadata"]
        return [p for p in self.store.owned("Pod", meta.get("namespace") or "default", "Pod", meta["name"])
                if any(r.get("uid") == meta["uid"] for r in p["metadata"].get("ownerReferences") or [])]

    def _restarts(self, lws: Obj, leaders: dict[int, Obj], workers: dict[int, list[Obj]], gone: list[Obj]) -> None:
        """pod_controller.go handleRestartPolicy: under RecreateGroupOnPodRestart a restarted, failed or deleted
        pod of a group deletes its leader (and so the group), which the leader StatefulSet makes again;
        RecreateGroupAfterStart (or the experimental annotation) waits while a pod of the group is Pending or
        missing. Under None a failed pod alone is made again, as its StatefulSet does; a failed or deleted leader
        still takes its workers with it (they belong to its worker StatefulSet)."""
        spec = lws["spec"]["leaderWorkerTemplate"]
        policy = spec.get("restartPolicy", "RecreateGroupOnPodRestart")
        after_start = policy == "RecreateGroupAfterStart" or W.RECREATE_AFTER_START in (
            lws["metadata"].get("annotations") or {})
        deleted: dict[str, list[Obj]] = {}  # leader uid -> its deleted workers
        for pod in gone:
            for ref in pod["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Pod":
                    deleted.setdefault(ref.get("uid", ""), []).append(pod)
        for i, leader in sorted(leaders.items()):
            group = [leader, *workers[i]]
            failed = [p for p in group if _terminal(p)]
            why = [p for p in group if _restarted(p)] + failed + deleted.get(leader["metadata"]["uid"], [])
            if not why:
                continue
            size = int(leader["metadata"]["annotations"][W.SIZE])
            pending = len(group) != size or any(p["status"].get("phase") == "Pending" for p in group)
            if policy in RECREATE_POLICIES and not (after_start and pending):
                self.events.event(lws, "Normal", "RecreateGroup", f"Worker pod {why[0]['metadata']['name']} failed, "
                                  f"deleted leader pod {leader['metadata']['name']} to recreate group {i}", COMPONENT)
                self._delete_group(leader)
                del leaders[i]
                continue
            for pod in failed:  # the StatefulSet deletes a failed pod and makes it again
                if pod is leader:
                    self._delete_group(leader)
                    del leaders[i]
                    break
                self._delete(pod)
                workers[i].remove(pod)

    def _target(self, lws: Obj, rev: str, leaders: dict[int, Obj], workers: dict[int, list[Obj]]) -> int:
        """How many groups the leader StatefulSet holds: replicas, plus maxSurge burst groups (indexes from
        replicas up, at the new revision) from the moment a group is found on an older revision until the update
        is done -- partition 0 and every group below replicas updated and ready (rollingUpdateParameters; the
        burst groups stay while a partition holds the update back, as the API's maxSurge doc says)."""
        spec = lws["spec"]
        replicas = spec.get("replicas", 1)
        cfg = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
        surge = min(scaled(cfg.get("maxSurge", 0), replicas, True), replicas)
        if surge == 0:
            return replicas
        stale = any(leader["metadata"]["labels"].get(W.REVISION) != rev for leader in leaders.values())
        if not stale and not any(i >= replicas for i in leaders):
            return replicas  # no rollout
        done = cfg.get("partition", 0) == 0 and all(
            i in leaders and leaders[i]["metadata"]["labels"].get(W.REVISION) == rev
            and self._group_ready(leaders[i], workers[i]) for i in range(replicas))
        return replicas if done else replicas + surge

    def _rolling_update(self, lws: Obj, rev: str, leaders: dict[int, Obj], workers: dict[int, list[Obj]],
                        target: int) -> None:
        """The leader StatefulSet's RollingUpdate over its `target` groups: those at or above partition on an
        older revision are recreated, highest index first, while fewer than max(maxUnavailable + maxSurge, 1) of
        them are not ready (constructLeaderStatefulSetApplyConfiguration's maxUnavailable)."""
        spec = lws["spec"]
        replicas = spec.get("replicas", 1)
        cfg = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
        allowed = max(scaled(cfg.get("maxUnavailable", 1), replicas, False)
                      + min(scaled(cfg.get("maxSurge", 0), replicas, True), replicas), 1)
        ready = {i for i, leader in leaders.items() if self._group_ready(leader, workers[i])}
        unavailable = target - len(ready & set(range(target)))
        for i in sorted(leaders, reverse=True):
            leader = leaders[i]
            if i < cfg.get("partition", 0) or leader["metadata"]["labels"].get(W.REVISION) == rev:
                continue
            if i in ready:
                if unavailable >= allowed:
                    break
                unavailable += 1
            self._delete_group(leader)
            del leaders[i]

    # -- pods ------------------------------------------------------------------------------------
    def _create_leader(self, lws: Obj, i: int, rev: str) -> Obj:
        """constructLeaderStatefulSetApplyConfiguration's pod template, as the StatefulSet makes pod <lws>-<i>."""
        meta = lws["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        spec = self._templates[rev]
        lwt = spec["leaderWorkerTemplate"]
        tmpl = lwt.get("leaderTemplate") or lwt["workerTemplate"]
        pod_name = f"{name}-{i}"
        pod = pod_from_template(tmpl, pod_name, ns, lws, {W.WORKER_INDEX: "0", W.NAME: name, W.REVISION: rev})
        ann = {**pod["metadata"]["annotations"], **self._annotations(lws, spec)}
        if (spec.get("networkConfig") or {}).get("subdomainPolicy") == "UniquePerReplica":
            ann[W.SUBDOMAIN_POLICY] = "UniquePerReplica"
        pod["metadata"]["annotations"] = ann
        pod["spec"] = {**pod["spec"], "hostname": pod_name, "subdomain": name}
        self._group_rev[(ns, name, i)] = rev
        return self.store.create(pod)

    def _create_workers(self, lws: Obj, leader: Obj, have: list[Obj]) -> None:
        """pod_controller.go Reconcile: the worker StatefulSet of a leader (size-1 pods, ordinals from 1), made
        once the leader is Ready under LeaderReady and once it is bound under exclusive placement, whose
        workers then get a nodeSelector for the leader's topology domain."""
        lmeta = leader["metadata"]
        if _terminal(leader) or lmeta["labels"].get(W.REVISION) not in self._templates:
            return
        spec = self._templates[lmeta["labels"][W.REVISION]]
        if (lws["spec"].get("networkConfig") or {}).get("subdomainPolicy") == "UniquePerReplica":
            self._headless_service(lws, lmeta["name"], {W.NAME: lws["metadata"]["name"],
                                                        W.GROUP_INDEX: lmeta["labels"][W.GROUP_INDEX]}, leader)
        size = spec["leaderWorkerTemplate"].get("size", 1)
        if size == 1 or len(have) >= size - 1:
            return
        if lws["spec"].get("startupPolicy") == "LeaderReady" and ready_since(leader) is None:
            return
        ns = lmeta.get("namespace") or "default"
        node_selector: dict[str, str] = {}
        topo = (lws["metadata"].get("annotations") or {}).get(W.EXCLUSIVE)
        if topo is not None:
            if not leader["spec"].get("nodeName"):
                return
            node = self.store.get("Node", "", leader["spec"]["nodeName"])
            value = ((node or {}).get("metadata", {}).get("labels") or {}).get(topo)
            if value is None:
                return  # topologyValueFromPod: "node does not have topology label"
            node_selector = {topo: value}
        if lmeta["uid"] not in self._announced:
            self._announced.add(lmeta["uid"])
            self.events.event(lws, "Normal", "GroupsProgressing",
                              f"Created worker statefulset for leader pod {lmeta['name']}", COMPONENT)
        names = {p["metadata"]["name"] for p in have}
        shared = (spec.get("networkConfig") or {}).get("subdomainPolicy", "Shared") == "Shared"
        labels = {W.GROUP_INDEX: lmeta["labels"][W.GROUP_INDEX], W.NAME: lws["metadata"]["name"],
                  W.GROUP_KEY: lmeta["labels"][W.GROUP_KEY], W.REVISION: lmeta["labels"][W.REVISION]}
        ann = {**self._annotations(lws, spec), W.LEADER_NAME: lmeta["name"]}
        if W.tpu_containers(leader["spec"]):  # AddTPUAnnotations
            ann[W.LEADER_REQUESTS_TPUS] = "true"
        for j in range(1, size):
            pod_name = f"{lmeta['name']}-{j}"
            if pod_name in names or self.store.get("Pod", ns, pod_name) is not None:
                continue  # another leader's worker of that name is still there: made once it is gone
            pod = pod_from_template(spec["leaderWorkerTemplate"]["workerTemplate"], pod_name, ns, leader, labels)
            pod["metadata"]["annotations"] = {**pod["metadata"]["annotations"], **ann}
            pspec = {**pod["spec"], "hostname": pod_name,
                     "subdomain": lws["metadata"]["name"] if shared else lmeta["name"]}
            if node_selector:
                pspec["nodeSelector"] = {**(pspec.get("nodeSelector") or {}), **node_selector}
            pod["spec"] = pspec
            self.store.create(pod)

    def _headless_service(self, lws: Obj, name: str, selector: dict[str, str], owner: Obj) -> None:
        """CreateHeadlessServiceIfNotExists: clusterIP None, publishNotReadyAddresses, labelled with the LWS's name,
        controlled by `owner`; one that exists (whoever made it) is left as it is."""
        ns = lws["metadata"].get("namespace") or "default"
        if self.store.get("Service", ns, name) is not None:
            return
        self.store.create({"apiVersion": "v1", "kind": "Service",
                           "metadata": {"name": name, "namespace": ns, "labels": {W.NAME: lws["metadata"]["name"]},
                                        "ownerReferences": [owner_ref(owner)]},
                           "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True}})

    @staticmethod
    def _annotations(lws: Obj, spec: dict) -> dict[str, str]:
        """The annotations both pod templates carry: size, exclusive topology, sub-group policy."""
        lws_ann = lws["metadata"].get("annotations") or {}
        lwt = spec["leaderWorkerTemplate"]
        out = {W.SIZE: str(lwt.get("size", 1))}
        if lws_ann.get(W.EXCLUSIVE):
            out[W.EXCLUSIVE] = lws_ann[W.EXCLUSIVE]
        sub = lwt.get("subGroupPolicy")
        if sub is not None:
            out[W.SUBGROUP_POLICY] = sub.get("subGroupPolicyType", "LeaderWorker")
            out[W.SUBGROUP_SIZE] = str(sub.get("subGroupSize"))
            if lws_ann.get(W.SUBGROUP_EXCLUSIVE):
                out[W.SUBGROUP_EXCLUSIVE] = lws_ann[W.SUBGROUP_EXCLUSIVE]
        return out

    def _delete_group(self, leader: Obj) -> None:
        """Delete a leader and its workers (foreground propagation: the workers first)."""
        self._delete_workers_of(leader)
        self._delete(leader)

    def _delete_workers_of(self, leader: Obj) -> None:
        for w in self._workers(leader):
            self._delete(w)

    def _delete(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self._ours.add(meta["uid"])
        self.store.delete("Pod", meta.get("namespace") or "default", meta["name"])

    # -- status ----------------------------------------------------------------------------------
    def _group_ready(self, leader: Obj, workers: list[Obj]) -> bool:
        """A group is ready when its leader is running and Ready and its worker StatefulSet is ready."""
        size = int(leader["metadata"]["annotations"][W.SIZE])
        return (_running_ready(leader) and len(workers) == size - 1
                and all(_running_ready(w) for w in workers))

    def _status(self, lws: Obj, rev: str, leaders: dict[int, Obj]) -> None:
        """updateStatus + updateConditions: replicas, readyReplicas, updatedReplicas, hpaPodSelector and one of
        Available / Progressing / UpdateInProgress."""
        meta, spec = lws["metadata"], lws["spec"]
        replicas = spec.get("replicas", 1)
        partition = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get("partition", 0)
        ready = updated = ready_below = current = updated_current = updated_ready = 0
        for i, leader in leaders.items():
            workers = self._workers(leader)
            is_ready = self._group_ready(leader, workers)
            is_updated = all(p["metadata"]["labels"].get(W.REVISION) == rev for p in (leader, *workers))
            ready += is_ready
            updated += is_updated
            if i < replicas:
                ready_below += is_ready
                if i >= partition:
                    current += 1
                    updated_current += is_updated
                    updated_ready += is_ready and is_updated
        gen = meta.get("generation", 1)
        if updated_current < current:
            types = ["UpdateInProgress", "Progressing"]
        elif ready_below == replicas and updated_ready == current:
            types = ["Available"]
        else:
            types = ["Progressing"]
        status = dict(lws.get("status") or {})
        conds = [dict(c) for c in status.get("conditions") or []]
        now = self.store.timestamp(self.env.now)
        changed = False
        for t in types:
            reason, message = CONDITIONS[t]
            for c in conds:  # exclusiveConditionTypes: the other of the pair turns False
                if frozenset((c["type"], t)) in _EXCLUSIVE and c.get("status") == "True":
                    c.update(status="False", lastTransitionTime=now, observedGeneration=gen)
                    changed = True
            conds, did = set_condition(conds, {"type": t, "status": "True", "observedGeneration": gen,
                                               "lastTransitionTime": now, "reason": reason, "message": message})
            changed = changed or did
        for c in conds:
            if c.get("observedGeneration") != gen:
                c["observedGeneration"] = gen
                changed = True
        if changed:
            reason, message = CONDITIONS[types[0]]
            self.events.event(lws, "Normal", reason, f"{message}, with {ready} groups ready of total {replicas} "
                              "groups", COMPONENT)
        new = {"conditions": conds, "replicas": len(leaders), "readyReplicas": ready, "updatedReplicas": updated,
               "hpaPodSelector": f"{W.NAME}={meta['name']},{W.WORKER_INDEX}=0", "observedGeneration": gen}
        new = {k: v for k, v in new.items() if v}  # omitempty
        if new != status:
            cur = self.store.current("LeaderWorkerSet", meta.get("namespace") or "default", meta["name"],
                                     meta["uid"])
            if cur is not None:
                self.store.update({**cur, "status": new})

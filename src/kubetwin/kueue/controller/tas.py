"""Kueue's topology ungater (pkg/controller/tas/topology_ungater.go): the pods of a PodSet admitted with a
topologyAssignment start with the ``kueue.x-k8s.io/topology`` scheduling gate; once they exist the ungater gives
each gated pod a domain of the assignment that still has room (pods already ungated counting against theirs) and
lifts the gate, adding the domain's level labels to the pod's nodeSelector, so kube-scheduler places it inside
that domain. Pods whose rank the PodSet's topologyRequest can read (``podIndexLabel``, ``subGroupIndexLabel`` over
``subGroupCount``; a group's larger pod set ranked after the smaller) take the domain of their rank
(readRanksIfAvailable: ranks fill the assignment's domains in order); otherwise pods go in name order
(assignGatedPodsToDomainsGreedy). Not modelled: node replacement.
"""

from __future__ import annotations

from kubetwin.k8s import podgates
from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.kueue.controller.jobframework import PODSET_LABEL, WORKLOAD_ANNOTATION
from kubetwin.kueue.tas.assignment import Assignment, assignment_from_api
from kubetwin.kueue.tas.request import TOPOLOGY_GATE, TopologyRequest, from_api
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"  # kueue.PodIndexOffsetAnnotation


def has_gate(pod: Obj) -> bool:
    return podgates.has_gate(pod.get("spec") or {}, TOPOLOGY_GATE)


def pods_for_pod_set(pods: list[Obj], workload: str, pod_set: str) -> list[Obj]:
    """The pods of one PodSet of ``workload`` that still count: the workload annotation and PodSet label
    match, and the pod is not terminated -- a Failed or Succeeded pod is replaced, so its domain is free again
    (podsForPodSet)."""
    return [p for p in pods
            if (p["metadata"].get("annotations") or {}).get(WORKLOAD_ANNOTATION) == workload
            and (p["metadata"].get("labels") or {}).get(PODSET_LABEL) == pod_set
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


def _uint_label(pod: Obj, key: str, bound: int) -> int | None:
    """utilpod.ReadUIntFromLabelBelowBound: the label as an unsigned integer below ``bound``, else None."""
    value = (pod["metadata"].get("labels") or {}).get(key)
    if value is None or not str(value).isdigit() or int(value) >= bound:
        return None
    return int(value)


def _ranks(pods: list[Obj], request: TopologyRequest, count: int, offset: int, max_rank: int
           ) -> dict[int, Obj] | None:
    """Each pod's rank from the integration's index labels, or None when any pod lacks one or two collide
    (readRanksForLabels): the pod index less the group offset, plus the Job index times the pods per Job."""
    if request.pod_index_label is None:
        return None
    job_size = count
    if request.sub_group_index_label is not None:
        if not request.sub_group_count or request.sub_group_count <= 0:
            return None
        job_size = count // request.sub_group_count
    out: dict[int, Obj] = {}
    for pod in pods:
        index = _uint_label(pod, request.pod_index_label, max_rank)
        if index is None:
            return None
        rank = index - offset
        if request.sub_group_index_label is not None:
            assert request.sub_group_count is not None
            job = _uint_label(pod, request.sub_group_index_label, request.sub_group_count)
            if job is None or index >= job_size:
                return None
            rank = index + job * job_size - offset
        if rank >= count or rank < 0 or rank in out:
            return None
        out[rank] = pod
    return out


def assign_gated_pods(assignment: Assignment, pods: list[Obj], request: TopologyRequest | None = None,
                      count: int | None = None, offset: int = 0, max_rank: int | None = None
                      ) -> list[tuple[Obj, dict[str, str]]]:
    """(gated pod, node selector to add) for the ``pods`` of one PodSet under ``assignment``: by rank when every
    pod has one and the ungated ones sit where their ranks say (readRanksIfAvailable), else greedily in name
    order, ungated pods counting against their domains (assignGatedPodsToDomainsGreedy)."""
    levels = assignment.levels
    by_rank = [values for values, n in assignment.domains for _ in range(n)]
    total = count if count is not None else len(by_rank)
    ranks = None if request is None else _ranks(pods, request, total, offset,
                                                max_rank if max_rank is not None else total)
    if ranks is not None and all(rank < len(by_rank) for rank in ranks) and all(
            has_gate(pod) or tuple(((pod.get("spec") or {}).get("nodeSelector") or {}).get(level, "")
                                   for level in levels) == by_rank[rank] for rank, pod in ranks.items()):
        return [(pod, dict(zip(levels, by_rank[rank], strict=True)))
                for rank, pod in sorted(ranks.items()) if has_gate(pod)]
    gated = sorted((p for p in pods if has_gate(p)), key=lambda p: p["metadata"]["name"])
    ungated: dict[tuple[str, ...], int] = {}
    for pod in pods:
        if not has_gate(pod):
            sel = (pod.get("spec") or {}).get("nodeSelector") or {}
            key = tuple(sel.get(level, "") for level in levels)
            ungated[key] = ungated.get(key, 0) + 1
    out: list[tuple[Obj, dict[str, str]]] = []
    for values, n in assignment.domains:
        room = max(n - ungated.get(values, 0), 0)
        take = min(room, len(gated) - len(out))
        for pod in gated[len(out):len(out) + take]:
            out.append((pod, dict(zip(levels, values, strict=True))))
    return out


class TopologyUngater:
    """Reconciles a Workload admitted by TAS whenever one of its gated pods appears (one work-queue key per
    Workload, as upstream's ungater queues the pod's workload)."""

    def __init__(self, store: Store, env: Environment) -> None:
        self.store, self.env = store, env
        self.queue = WorkQueue(env, self.reconcile)
        store.watch("Pod", self._on_pod)
        store.watch("Workload", self._on_workload)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        if etype == "DELETED" or not has_gate(pod):
            return
        wl = (pod["metadata"].get("annotations") or {}).get(WORKLOAD_ANNOTATION)
        if wl:
            self.queue.add((pod["metadata"]["namespace"], wl))

    def _on_workload(self, etype: str, wl: Obj, old: Obj | None) -> None:
        if etype == "DELETED":
            return
        psas = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        if any(psa.get("topologyAssignment") for psa in psas):
            self.queue.add((wl["metadata"]["namespace"], wl["metadata"]["name"]))

    def reconcile(self, key: tuple[str, str]) -> None:
        ns, name = key
        wl = self.store.get("Workload", ns, name)
        if wl is None:
            return
        conds = (wl.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conds):
            return  # workload.IsAdmittedByTAS: admitted, with a topology assignment
        requests = {ps["name"]: from_api(ps.get("topologyRequest")) for ps in wl["spec"].get("podSets") or []}
        psas = wl["status"]["admission"].get("podSetAssignments") or []
        counts = {psa["name"]: int(psa.get("count") or 0) for psa in psas}
        # a group's smaller pod set ranks first, the larger after it (Reconcile's rankOffsets / maxRank)
        groups: dict[str, list[str]] = {}
        for i, psa in enumerate(psas):
            tr = requests.get(psa["name"])
            groups.setdefault(tr.group_name if tr is not None and tr.group_name else f"#{i}", []).append(psa["name"])
        offsets: dict[str, int] = {}
        max_rank: dict[str, int] = {}
        for members in groups.values():
            if len(members) > 1:
                if counts[members[0]] > counts[members[1]]:
                    small, large = members[1], members[0]
                else:
                    small, large = members[0], members[1]
                offsets[small], max_rank[small] = 0, counts[small]
                offsets[large], max_rank[large] = counts[small], counts[large] + counts[small]
            else:
                offsets[members[0]], max_rank[members[0]] = 0, counts[members[0]]
        pods = self.store.list("Pod", ns)
        for psa in psas:
            if not psa.get("topologyAssignment"):
                continue
            mine = pods_for_pod_set(pods, name, psa["name"])
            offset, bound = offsets[psa["name"]], max_rank[psa["name"]]
            extra = ((mine[0]["metadata"].get("annotations") or {}).get(POD_INDEX_OFFSET) if mine else None)
            if extra is not None and str(extra).isdigit():
                offset, bound = offset + int(extra), bound + int(extra)
            for pod, selector in assign_gated_pods(assignment_from_api(psa["topologyAssignment"]), mine,
                                                   requests.get(psa["name"]), counts[psa["name"]], offset, bound):
                self.store.update(_ungate(pod, selector))


def _ungate(pod: Obj, selector: dict[str, str]) -> Obj:
    """utilpod.Ungate plus the domain's labels merged into spec.nodeSelector."""
    spec = podgates.ungate(pod["spec"], TOPOLOGY_GATE)
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **selector}
    return {**pod, "spec": spec}

"""Kueue's topology ungater (pkg/controller/tas/topology_ungater.go): the pods of a PodSet admitted with a
topologyAssignment start with the ``kueue.x-k8s.io/topology`` scheduling gate; once they exist the ungater gives
each gated pod a domain of the assignment that still has room (pods already ungated counting against theirs) and
lifts the gate, adding the domain's level labels to the pod's nodeSelector, so kube-scheduler places it inside
that domain. Pods whose rank is known (a Job's completion index, a JobSet's job index) take the domain of their
rank (readRanksIfAvailable: ranks fill the assignment's domains in order); otherwise pods go in name order
(assignGatedPodsToDomainsGreedy). Not modelled: pod-set groups' rank offsets, node replacement.
"""

from __future__ import annotations

from kubetwin.k8s.workqueue import WorkQueue
from kubetwin.kueue.controller.jobframework import PODSET_LABEL, WORKLOAD_ANNOTATION
from kubetwin.kueue.tas.assignment import Assignment, assignment_from_api
from kubetwin.kueue.tas.request import TOPOLOGY_GATE
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # the Job controller's pod label
JOB_INDEX = "jobset.sigs.k8s.io/job-index"  # JobSet's per-Job label


def has_gate(pod: Obj) -> bool:
    return any(g.get("name") == TOPOLOGY_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def _ranks(pods: list[Obj], count: int) -> dict[int, Obj] | None:
    """Each pod's rank (JobSet: job index x pods per Job + completion index; Job: completion index), or None
    when a pod has none or two pods share one (readRanksForLabels)."""
    out: dict[int, Obj] = {}
    per_job = 0
    indexed = []
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if COMPLETION_INDEX not in labels:
            return None
        ci, ji = int(labels[COMPLETION_INDEX]), int(labels.get(JOB_INDEX, 0))
        indexed.append((pod, ci, ji))
        per_job = max(per_job, ci + 1)
    for pod, ci, ji in indexed:
        rank = ji * per_job + ci
        if rank in out or rank >= count:
            return None
        out[rank] = pod
    return out


def pods_for_pod_set(pods: list[Obj], workload: str, pod_set: str) -> list[Obj]:
    """The pods of one PodSet of ``workload`` that still count: the workload annotation and PodSet label
    match, and the pod is not terminated -- a Failed or Succeeded pod is replaced, so its domain is free again
    (podsForPodSet)."""
    return [p for p in pods
            if (p["metadata"].get("annotations") or {}).get(WORKLOAD_ANNOTATION) == workload
            and (p["metadata"].get("labels") or {}).get(PODSET_LABEL) == pod_set
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


def assign_gated_pods(assignment: Assignment, pods: list[Obj]) -> list[tuple[Obj, dict[str, str]]]:
    """(gated pod, node selector to add) for the gated ``pods`` of one PodSet under ``assignment``."""
    levels = assignment.levels
    gated = [p for p in pods if has_gate(p)]
    total = sum(c for _, c in assignment.domains)
    ranks = _ranks(pods, total)
    if ranks is not None:
        by_rank = [values for values, count in assignment.domains for _ in range(count)]
        return [(pod, dict(zip(levels, by_rank[rank], strict=True)))
                for rank, pod in sorted(ranks.items()) if has_gate(pod)]
    ungated: dict[tuple[str, ...], int] = {}
    for pod in pods:
        if not has_gate(pod):
            sel = (pod.get("spec") or {}).get("nodeSelector") or {}
            key = tuple(sel.get(level, "") for level in levels)
            ungated[key] = ungated.get(key, 0) + 1
    gated.sort(key=lambda p: p["metadata"]["name"])
    out: list[tuple[Obj, dict[str, str]]] = []
    for values, count in assignment.domains:
        room = max(count - ungated.get(values, 0), 0)
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
        pods = self.store.list("Pod", ns)
        for psa in wl["status"]["admission"].get("podSetAssignments") or []:
            if not psa.get("topologyAssignment"):
                continue
            mine = pods_for_pod_set(pods, name, psa["name"])
            for pod, selector in assign_gated_pods(assignment_from_api(psa["topologyAssignment"]), mine):
                self.store.update(_ungate(pod, selector))


def _ungate(pod: Obj, selector: dict[str, str]) -> Obj:
    """utilpod.Ungate plus the domain's labels merged into spec.nodeSelector."""
    spec = dict(pod["spec"])
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != TOPOLOGY_GATE]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **selector}
    return {**pod, "spec": spec}

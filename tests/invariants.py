"""Whole-run invariants, checked over a run folder's history.jsonl (every object version the store wrote).

`check(history)` replays the history and returns the broken invariants as readable lines (empty: all hold):

- resourceVersions strictly increase, and no object is written after it was deleted (same kind, name and uid);
- at the end of every instant, no node has more requested by its live bound pods than it allocates, in any
  resource it advertises (the kubelet's admission and the scheduler's NodeResourcesFit);
- a pod is bound by the scheduler only to a Node that exists, is Ready and whose NoSchedule/NoExecute taints the
  pod tolerates; no pod starts Running on a missing or NotReady node;
- no DRA device is allocated to two ResourceClaims at once (admin access excepted);
- no ClusterQueue's reservation of a flavor's resource exceeds nominal + borrowingLimit (when a limit is set);
- Job counts agree with its pods: never more succeeded than completions nor than Succeeded pods seen, a finished
  Job has no active pods left and reports active 0, a Complete one reached its completions (unless its
  successPolicy completed it).

Only the store's history is read, so the checker holds any run, from the examples to a user's scenario.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kubetwin.api.podresources import pod_requests, resource_value
from kubetwin.controllers.nodelifecycle import node_is_ready
from kubetwin.k8s.taints import tolerates

Obj = dict[str, Any]
Entry = tuple[float, int, str, Obj]


def read_history(run_dir: Path) -> Iterator[Entry]:
    with (run_dir / "history.jsonl").open() as f:
        for line in f:
            rec = json.loads(line)
            yield rec["t"], rec["rv"], rec["type"], rec["object"]


def _key(o: Obj) -> tuple[str, str, str]:
    """(kind, namespace, name)."""
    meta = o["metadata"]
    return o["kind"], meta.get("namespace") or "", meta["name"]


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class Checker:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.live: dict[str, dict[tuple[str, str], Obj]] = {}  # kind -> (namespace, name) -> object
        self.dirty: set[str] = set()  # kinds written in the current instant
        self.deleted_uids: set[str] = set()
        self.last_rv = -1
        self.succeeded_seen: dict[tuple[str, str], set[str]] = {}  # (ns, job) -> Succeeded pod uids/indexes
        self.requests: dict[str, dict[str, int]] = {}  # pod uid -> pod_requests

    def fail(self, t: float, msg: str) -> None:
        if len(self.errors) < 50:
            self.errors.append(f"t={t:g}: {msg}")

    # -- per write ----------------------------------------------------------------------------------
    def write(self, t: float, rv: int, etype: str, o: Obj) -> None:
        if rv <= self.last_rv:
            self.fail(t, f"resourceVersion {rv} after {self.last_rv} ({o['kind']} {o['metadata']['name']})")
        self.last_rv = rv
        kind, ns, name = _key(o)
        uid = o["metadata"].get("uid")
        if uid and uid in self.deleted_uids:
            self.fail(t, f"{etype} of {kind} {ns}/{name} uid {uid} after its deletion")
        objs = self.live.setdefault(kind, {})
        old = objs.get((ns, name))
        self.dirty.add(kind)
        if etype == "DELETED":
            objs.pop((ns, name), None)
            if uid:
                self.deleted_uids.add(uid)
        else:
            objs[(ns, name)] = o
        if o["kind"] == "Pod" and etype != "DELETED":
            self._pod(t, o, old)

    def _pod(self, t: float, pod: Obj, old: Obj | None) -> None:
        node_name = pod["spec"].get("nodeName")
        node = self.node(node_name)
        was_bound = old is not None and (old.get("spec") or {}).get("nodeName")
        if node_name and old is not None and not was_bound:  # the scheduler's bind
            if node is None:
                self.fail(t, f"pod {pod['metadata']['name']} bound to missing node {node_name}")
            else:
                if not node_is_ready(node):
                    self.fail(t, f"pod {pod['metadata']['name']} bound to NotReady node {node_name}")
                tols = pod["spec"].get("tolerations") or []
                for taint in (node.get("spec") or {}).get("taints") or []:
                    if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tols, taint):
                        self.fail(t, f"pod {pod['metadata']['name']} bound to {node_name} with untolerated "
                                     f"taint {taint['key']}:{taint['effect']}")
        running = (pod.get("status") or {}).get("phase") == "Running"
        was_running = old is not None and (old.get("status") or {}).get("phase") == "Running"
        if running and not was_running and (node is None or not node_is_ready(node)):
            self.fail(t, f"pod {pod['metadata']['name']} started on {'missing' if node is None else 'NotReady'} "
                         f"node {node_name}")
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            owner = next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
            if owner and owner["kind"] == "Job":
                idx = (pod["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index")
                self.succeeded_seen.setdefault((pod["metadata"].get("namespace") or "", owner["name"]), set()).add(
                    f"i{idx}" if idx is not None else pod["metadata"]["uid"])

    # -- per instant ---------------------------------------------------------------------------------
    def instant(self, t: float) -> None:
        """The state at the end of an instant (between two of them nothing changes)."""
        if self.dirty & {"Pod", "Node"}:
            self._nodes(t)
        if "ResourceClaim" in self.dirty:
            self._claims(t)
        if "ClusterQueue" in self.dirty:
            self._cluster_queues(t)
        self.dirty.clear()

    def node(self, name: str | None) -> Obj | None:
        return self.live.get("Node", {}).get(("", name or ""))

    def _of(self, kind: str) -> Iterable[Obj]:
        return self.live.get(kind, {}).values()

    def _nodes(self, t: float) -> None:
        used: dict[str, dict[str, int]] = {}
        for pod in self._of("Pod"):
            node = pod["spec"].get("nodeName")
            if node and not _terminal(pod):
                acc = used.setdefault(node, {"pods": 0})
                acc["pods"] += 1
                uid = pod["metadata"].get("uid") or ""
                req = self.requests.get(uid)
                if req is None:  # a pod's requests do not change (no in-place resize in the twin): parse once
                    req = self.requests[uid] = pod_requests(pod)
                for r, v in req.items():
                    acc[r] = acc.get(r, 0) + v
        for name, req in sorted(used.items()):
            node = self.node(name)
            if node is None:
                continue  # PodGC's quarantine: checked by the bind and start rules
            alloc = {k: resource_value(k, v) for k, v in ((node.get("status") or {}).get("allocatable")
                                                          or {}).items()}
            for r, v in sorted(req.items()):
                if r in alloc and v > alloc[r]:
                    self.fail(t, f"node {name} over-committed in {r}: {v} requested of {alloc[r]}")

    def _claims(self, t: float) -> None:
        owner: dict[tuple[str, str, str], str] = {}
        for c in self._of("ResourceClaim"):
            alloc = (c.get("status") or {}).get("allocation") or {}
            for r in (alloc.get("devices") or {}).get("results") or []:
                if r.get("adminAccess"):
                    continue
                dev = (r["driver"], r["pool"], r["device"])
                name = f"{c['metadata'].get('namespace')}/{c['metadata']['name']}"
                if dev in owner and owner[dev] != name:
                    self.fail(t, f"device {'/'.join(dev)} allocated to {owner[dev]} and {name}")
                owner[dev] = name

    def _cluster_queues(self, t: float) -> None:
        for cq in self._of("ClusterQueue"):
            limits = {}
            for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
                for fq in rg.get("flavors") or []:
                    for r in fq.get("resources") or []:
                        if "borrowingLimit" in r or not (cq.get("spec") or {}).get("cohort"):
                            limits[(fq["name"], r["name"])] = sum(resource_value(r["name"], r.get(k, 0))
                                                                  for k in ("nominalQuota", "borrowingLimit"))
            for fu in (cq.get("status") or {}).get("flavorsReservation") or []:
                for r in fu.get("resources") or []:
                    limit = limits.get((fu["name"], r["name"]))
                    if limit is not None and resource_value(r["name"], r.get("total", 0)) > limit:
                        self.fail(t, f"ClusterQueue {cq['metadata']['name']} reserves {r['total']} {r['name']} of "
                                     f"flavor {fu['name']}, over nominal + borrowingLimit")

    # -- at the end ------------------------------------------------------------------------------------
    def finish(self) -> None:
        for job in list(self._of("Job")):
            ns, name = job["metadata"].get("namespace") or "", job["metadata"]["name"]
            st, spec = job.get("status") or {}, job.get("spec") or {}
            succeeded = st.get("succeeded", 0)
            seen = len(self.succeeded_seen.get((ns, name), ()))
            if succeeded > seen:
                self.fail(-1, f"Job {name} reports {succeeded} succeeded, {seen} Succeeded pods seen")
            if spec.get("completions") is not None and succeeded > spec["completions"]:
                self.fail(-1, f"Job {name} reports {succeeded} succeeded of {spec['completions']} completions")
            conds = {c["type"] for c in st.get("conditions") or [] if c.get("status") == "True"}
            if conds & {"Complete", "Failed"}:
                active = [p for p in self._of("Pod") if not _terminal(p) and any(
                    r.get("controller") and r["kind"] == "Job" and r["name"] == name
                    for r in p["metadata"].get("ownerReferences") or []) and (p["metadata"].get("namespace") or "")
                    == ns]
                if active or st.get("active", 0):
                    self.fail(-1, f"finished Job {name} has {len(active)} active pods, reports {st.get('active')}")
            by_policy = any(c["type"] == "Complete" and c.get("reason") == "SuccessPolicy"
                            for c in st.get("conditions") or [])  # a successPolicy completes it earlier
            if ("Complete" in conds and spec.get("completions") is not None and succeeded != spec["completions"]
                    and not by_policy):
                self.fail(-1, f"Complete Job {name} reports {succeeded} succeeded of {spec['completions']}")


def check(history: Iterable[Entry]) -> list[str]:
    """The broken invariants of one run's history (see the module docstring)."""
    c = Checker()
    now: float | None = None
    for t, rv, etype, obj in history:
        if now is not None and t != now:
            c.instant(now)
        now = t
        c.write(t, rv, etype, obj)
    if now is not None:
        c.instant(now)
    c.finish()
    return c.errors


def check_run_dir(run_dir: Path) -> list[str]:
    return check(read_history(run_dir))

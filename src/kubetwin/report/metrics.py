"""Utilization, pending time and cost, collected from the store's events as the run goes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubetwin.api.podresources import pod_requests, resource_value
from kubetwin.api.podspec import TemplateMemo
from kubetwin.autoscaler.nodepool import pool_of_node
from kubetwin.controllers.kubelet import DURATION
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.k8s.names import GPU
from kubetwin.k8s.units import parse_duration
from kubetwin.report.jobtimes import DONE, JobTimes
from kubetwin.scheduler.gpushare import GPU_INDEX, shape_of
from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Sampler
from kubetwin.sim.stats import percentile
from kubetwin.store.store import Obj, Store


class Metrics:
    """The run's own measurements, from the store's watch events (as kube-state-metrics reads the API server):
    pods' waits and phases, GPUs requested and allocatable per node pool over time, Jobs' lifetimes, GPU sharing
    outcomes; plus, at each sample instant, the gauges of the samplers (the scheduler's fragmentation)."""

    def __init__(self, store: Store, env: Environment, interval: float, samplers: Sequence[Sampler] = ()) -> None:
        self.store, self.env, self.samplers = store, env, list(samplers)
        self.interval = interval
        self.created: dict[str, float] = {}
        self.scheduled: dict[str, float] = {}
        self.deleted: dict[str, float] = {}  # pods deleted before they were bound: their wait ends there
        self.phase: dict[str, str] = {}  # these three by pod uid
        self.names: dict[str, str] = {}  # uid -> ns/name
        self.series: dict[str, Any] = {"t": [], "pending_pods": [], "gpu_allocation_pct": {}, "nodes": []}
        self._gpu_area: dict[str, list[float]] = {}  # pool -> [requested gpu-seconds, allocatable gpu-seconds]
        self._gpu_now: tuple[int, dict[str, tuple[float, int]]] | None = None
        # Per live node: [GPUs requested by its bound, non-terminal pods, milli-GPUs of its GPU-sharing pods,
        # GPUs allocatable]; its pool by label.
        self._node_gpus: dict[str, list[int]] = {}
        self._pool_of: dict[str, str] = {}  # node -> pool, kept after the node is gone (its pods' outcomes)
        # _node_gpus summed per pool as it changes, so an instant that binds or ends a pod costs O(1), not a pass
        # over every node: pool -> [live nodes, GPUs requested, GPUs allocatable]; and the nodes with milli-GPUs
        # counted, by their place in _node_gpus (their shares are added in that order, as floats)
        self._pool_sums: dict[str, list[int]] = {}
        self._milli_nodes: dict[str, int] = {}
        self._node_place: dict[str, int] = {}
        self._places = 0
        self._counted: dict[str, tuple[str, int, int]] = {}  # pod uid -> (node, GPUs, milli-GPUs) counted there
        self._gpu_held: dict[str, tuple[float, int]] = {}  # GPUs per pool since _last_t, until the next change
        self._last_t = 0.0
        self._settle_armed = False
        self._started: dict[str, float] = {}  # pod uid -> when it started running
        self._sharing: dict[str, dict[str, Any]] = {}  # pool -> GPU pods' slowdowns and OOM failures
        self._requests_of = TemplateMemo(pod_requests)
        self.jobs = JobTimes()  # Jobs' and JobSets' lifetimes (summary.json `jobs`)
        store.watch("Pod", self._on_pod)
        store.watch("Node", self._on_node)
        for kind in DONE:
            store.watch(kind, lambda etype, obj, old: self.jobs.add(self.env.now, etype, obj))
        for kind in ("ResourceSlice", "ResourceClaim"):  # DRA GPUs come and go with these
            store.watch(kind, self._gpus_changed)
        env.at(0, self._sample)

    def _gpus_changed(self, *_: Any) -> None:
        """GPU-hours are areas under step functions: close the current step when the clock is about to move past
        an instant where GPUs changed (queued after that instant's other work), so a GPU counts from when it was
        advertised or requested, not from the sample before."""
        if not self._settle_armed:
            self._settle_armed = True
            self.env.after(0, self._settle)

    def _settle(self) -> None:
        self._settle_armed = False
        self._accumulate()

    def _on_node(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self._drop_node(name)
            self._gpus_changed()
            return
        alloc = resource_value(GPU, (node.get("status", {}).get("allocatable") or {}).get(GPU, 0))
        if etype == "ADDED" or name not in self._node_gpus:
            place = self._node_place.get(name) if name in self._node_gpus else None  # (a dict keeps its place)
            self._drop_node(name)
            self._node_gpus[name] = [0, 0, alloc]
            if place is None:
                self._places += 1
                place = self._places
            self._node_place[name] = place
            pool = self._pool_of[name] = pool_of_node(node)
            sums = self._pool_sums.setdefault(pool, [0, 0, 0])
            sums[0] += 1
            sums[2] += alloc
            self._gpus_changed()
        elif old is None or (old.get("status") or {}).get("allocatable") != node["status"].get("allocatable"):
            entry = self._node_gpus[name]
            self._pool_sums[self._pool_of[name]][2] += alloc - entry[2]
            entry[2] = alloc
            self._gpus_changed()

    def _drop_node(self, name: str) -> None:
        entry = self._node_gpus.pop(name, None)
        if entry is not None:
            sums = self._pool_sums[self._pool_of[name]]
            sums[0] -= 1
            sums[1] -= entry[0]
            sums[2] -= entry[2]
            self._milli_nodes.pop(name, None)

    def _add_gpus(self, node: str, gpus: int, milli: int) -> None:
        """A bound pod's GPUs (milli-GPUs for a shared one) start (positive) or stop counting on its node."""
        entry = self._node_gpus[node]
        entry[0] += gpus
        entry[1] += milli
        self._pool_sums[self._pool_of[node]][1] += gpus
        if entry[1]:
            self._milli_nodes[node] = self._node_place[node]
        else:
            self._milli_nodes.pop(node, None)

    def _count_gpus(self, key: str, pod: Obj, node: str | None, gone: bool) -> None:
        """A pod's GPUs count on its node from when it is bound until it ends or is deleted (`gone`), as the
        scheduler's cache counts them (its informer drops terminal pods); GPU-sharing pods count their milli-GPUs
        on the GPUs the placement policy gave them (kubetwin.io/gpu-index)."""
        if gone:
            entry = self._counted.pop(key, None)
            if entry is not None and entry[0] in self._node_gpus:
                self._add_gpus(entry[0], -entry[1], -entry[2])
            return
        if node and key not in self._counted and node in self._node_gpus:
            req = self._requests_of(pod)
            gpus, milli = req.get(GPU, 0), 0
            ann = pod["metadata"].get("annotations") or {}
            if GPU_INDEX in ann and (shape := shape_of(pod, req)).shares:
                milli = shape.gpu_milli * len(ann[GPU_INDEX].split(","))
            self._counted[key] = (node, gpus, milli)
            self._add_gpus(node, gpus, milli)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        key = meta["uid"]
        if etype == "ADDED":
            self.created[key] = self.env.now
            self.names[key] = f"{meta.get('namespace')}/{meta['name']}"
        node = pod["spec"].get("nodeName")
        phase = pod.get("status", {}).get("phase", "Pending")
        self._count_gpus(key, pod, node, etype == "DELETED" or phase in ("Succeeded", "Failed"))
        if node:
            if etype != "MODIFIED" or not (old or {}).get("spec", {}).get("nodeName") or pod["status"].get(
                    "phase") != (old or {}).get("status", {}).get("phase"):
                self._gpus_changed()  # bound, finished or gone: what the scheduler counts as requested changed
            if key not in self.scheduled:
                self.scheduled[key] = self.env.now
        if etype != "DELETED":
            if phase != self.phase.get(key) and phase != "Pending":
                self._transition(key, pod, phase)
            self.phase[key] = phase
        elif self.phase.get(key) in ("Pending", "Running"):
            self.phase[key] = "Deleted"  # preempted or removed before it finished
            if key not in self.scheduled:
                self.deleted[key] = self.env.now

    def _transition(self, key: str, pod: Obj, phase: str) -> None:
        """GPU sharing outcomes per pool: how much slower GPU pods ran than their duration, and GPU OOMs."""
        if phase == "Running":
            self._started[key] = self.env.now
            return
        pool = self._pool_of.get(pod["spec"].get("nodeName") or "")
        if pool is None or not self._requests_of(pod).get(GPU):
            return
        stats = self._sharing.setdefault(pool, {"slowdowns": [], "oom": 0})
        if phase == "Succeeded" and DURATION in (pod["metadata"].get("annotations") or {}):
            declared = parse_duration(pod["metadata"]["annotations"][DURATION])
            if declared > 0 and key in self._started:
                stats["slowdowns"].append((self.env.now - self._started[key]) / declared)
        elif phase == "Failed":
            term = [(cs.get("state") or {}).get("terminated") or {} for cs in pod["status"].get("containerStatuses")
                    or []]
            if any("out of memory" in t.get("message", "") for t in term):
                stats["oom"] += 1

    def _gpu_by_pool(self) -> dict[str, tuple[float, int]]:
        """[requested, allocatable] GPUs per pool now, DRA GPU devices included (memoized until the store
        changes); every pool with a live node or a NodePool object has an entry."""
        if self._gpu_now is not None and self._gpu_now[0] == self.store.rv:
            return self._gpu_now[1]
        out: dict[str, list[float]] = {pool: [req, alloc] for pool, (nodes, req, alloc) in self._pool_sums.items()
                                       if nodes}
        for name in sorted(self._milli_nodes, key=self._milli_nodes.__getitem__):
            out[self._pool_of[name]][0] += self._node_gpus[name][1] / 1000
        for name, (used, total) in nvidia_dra.gpu_devices_by_node(self.store).items():
            pool = self._pool_of.get(name)
            if pool is not None:
                acc = out.setdefault(pool, [0, 0])
                acc[0] += used
                acc[1] += total
        for pool_obj in self.store.list("NodePool"):
            out.setdefault(pool_obj["metadata"]["name"], [0, 0])
        result = {k: (v[0], int(v[1])) for k, v in out.items()}
        self._gpu_now = (self.store.rv, result)
        return result

    def _sample(self) -> None:
        self._accumulate()
        now = self.env.now
        self.series["t"].append(now)
        pending = sum(1 for k, p in self.phase.items() if p == "Pending" and k not in self.scheduled)
        self.series["pending_pods"].append(pending)
        for sampler in self.samplers:
            for series, value in sampler.sample().items():
                self.series.setdefault(series, []).append(value)
        self.series["nodes"].append(len(self._node_gpus))
        n = len(self.series["t"])
        for pool, (req, alloc) in sorted(self._gpu_by_pool().items()):
            vals = self.series["gpu_allocation_pct"].setdefault(pool, [])
            vals.extend([0.0] * (n - 1 - len(vals)))
            vals.append(round(100.0 * req / alloc, 3) if alloc else 0.0)
        self.env.after(self.interval, self._sample)

    def _accumulate(self) -> None:
        """Add the GPUs held since the last step to the areas, then hold what there is now. Called when an instant
        with a GPU change settles, at each sample and at the end; between two calls nothing changed GPUs."""
        dt = self.env.now - self._last_t
        if dt > 0:
            for pool, (req, alloc) in self._gpu_held.items():
                area = self._gpu_area.setdefault(pool, [0.0, 0.0])
                area[0] += req * dt
                area[1] += alloc * dt
        self._gpu_held = self._gpu_by_pool()
        for pool in self._gpu_held:
            self._gpu_area.setdefault(pool, [0.0, 0.0])
        self._last_t = self.env.now

    def finish(self, until: float) -> tuple[dict[str, Any], dict[str, Any], list[dict]]:
        """The summary, the sampled series and one row per pod."""
        self._accumulate()
        by_phase: dict[str, int] = {}
        for p in self.phase.values():
            by_phase[p] = by_phase.get(p, 0) + 1
        waits = [self.scheduled.get(k, self.deleted.get(k, until)) - t for k, t in self.created.items()]
        gpu = {pool: {"mean_pct": round(100 * a[0] / a[1], 3) if a[1] else 0.0,
                      "gpu_hours_requested": round(a[0] / 3600, 3), "gpu_hours_allocatable": round(a[1] / 3600, 3)}
               for pool, a in sorted(self._gpu_area.items())}
        pods_rows = [{"pod": self.names[k], "created": t, "scheduled": self.scheduled.get(k),
                      "phase": self.phase.get(k)} for k, t in self.created.items()]
        summary = {
            "duration_seconds": until,
            "pods": {"total": len(self.created), "by_phase": dict(sorted(by_phase.items())),
                     "never_scheduled": sum(1 for k in self.created if k not in self.scheduled),
                     "pending_seconds": {"p50": percentile(waits, 50), "p99": percentile(waits, 99),
                                         "max": max(waits, default=0.0)}},
            "gpu_allocation": gpu,
        }
        jobs = self.jobs.summary()
        if jobs is not None:
            summary["jobs"] = jobs
        if self._sharing:
            summary["gpu_sharing"] = {pool: {
                "gpu_pods_finished": len(v["slowdowns"]), "gpu_oom_failures": v["oom"],
                "slowdown_mean": round(sum(v["slowdowns"]) / len(v["slowdowns"]), 3) if v["slowdowns"] else None,
                "slowdown_max": round(max(v["slowdowns"]), 3) if v["slowdowns"] else None}
                for pool, v in sorted(self._sharing.items())}
        return summary, self.series, pods_rows

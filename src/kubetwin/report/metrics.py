"""Utilization, pending time and cost, collected from the store's events as the run goes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from kubetwin.api.conditions import conditions_of, is_condition_true
from kubetwin.api.podresources import pod_requests
from kubetwin.api.podspec import TemplateMemo
from kubetwin.api.units import parse_duration
from kubetwin.controllers.common import controller_of
from kubetwin.controllers.kubelet import DURATION
from kubetwin.devices.dra import nvidia as nvidia_dra
from kubetwin.report.fragmentation import cluster_fragmentation, placement_fragmentation
from kubetwin.sim.env import Environment
from kubetwin.sim.stats import percentile
from kubetwin.store.store import Obj, Store

GPU = "nvidia.com/gpu"


class Metrics:
    def __init__(self, store: Store, env: Environment, scheduler: Any, pools: Any, interval: float) -> None:
        self.store, self.env, self.scheduler, self.pools = store, env, scheduler, pools
        self._node_price: dict[str, tuple[float, bool]] = {}  # node name -> (USD/hour, Spot), as it registered
        self.interval = interval
        self.created: dict[str, float] = {}
        self.scheduled: dict[str, float] = {}
        self.deleted: dict[str, float] = {}  # pods deleted before they were bound: their wait ends there
        self.phase: dict[str, str] = {}  # these three by pod uid
        self.names: dict[str, str] = {}  # uid -> ns/name
        self.series: dict[str, Any] = {"t": [], "pending_pods": [], "gpu_allocation_pct": {}, "nodes": [],
                                       "fragmented_gpu_pct": []}
        self._gpu_area: dict[str, list[float]] = {}  # pool -> [requested gpu-seconds, allocatable gpu-seconds]
        self._gpu_now: tuple[int, dict[str, tuple[int, int]]] | None = None
        self._row_pool = np.zeros(0, np.int64)  # node table row -> index into _pool_names (-1: no pool known)
        self._pool_ids: dict[str, int] = {}
        self._pool_names: list[str] = []
        self._gpu_held: dict[str, tuple[int, int]] = {}  # GPUs per pool since _last_t, until the next change
        self._last_t = 0.0
        self._settle_armed = False
        self._jobs_seen: dict[tuple[str, str], dict[str, float | None]] = {}  # (ns, job) -> created/start/end
        self._started: dict[str, float] = {}  # pod uid -> when it started running
        self._sharing: dict[str, dict[str, Any]] = {}  # pool -> GPU pods' slowdowns and OOM failures
        self._gpu_shapes: Counter[tuple[int, int]] = Counter()  # GPU pods by (cpu milli, GPUs): typical pods
        self._requests_of = TemplateMemo(pod_requests)
        self._frag: list[tuple[float, float]] = []
        store.watch("Pod", self._on_pod)
        store.watch("Job", self._on_job)
        store.watch("Node", self._on_node)
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
        """Remember each node's price as it registered: a node deleted before the end (a preempted Spot VM, a
        scaled-down one) still cost what it cost while it lived."""
        if etype != "MODIFIED" or (old or {}).get("status", {}).get("allocatable") != node["status"].get(
                "allocatable"):
            self._gpus_changed()
        if etype == "ADDED":
            meta = node["metadata"]
            price = float((meta.get("annotations") or {}).get("kubetwin.io/hourly-price-usd", 0) or 0)
            self._node_price[meta["name"]] = (price, (meta.get("labels") or {}).get("cloud.google.com/gke-spot")
                                              == "true")

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        key = meta["uid"]
        if etype == "ADDED":
            self.created[key] = self.env.now
            self.names[key] = f"{meta.get('namespace')}/{meta['name']}"
            req = self._requests_of(pod)
            if req.get(GPU):
                self._gpu_shapes[(req.get("cpu", 0), req[GPU])] += 1
        if pod["spec"].get("nodeName") and (etype != "MODIFIED" or not (old or {}).get("spec", {}).get(
                "nodeName") or pod["status"].get("phase") != (old or {}).get("status", {}).get("phase")):
            self._gpus_changed()  # bound, finished or gone: what the scheduler counts as requested changed
        if pod["spec"].get("nodeName") and key not in self.scheduled:
            self.scheduled[key] = self.env.now
            owner = controller_of(pod)
            job = self._jobs_seen.get((pod["metadata"].get("namespace") or "", owner[1])) if owner and \
                owner[0] == "Job" else None
            if job is not None and job["start"] is None:
                job["start"] = self.env.now
        if etype != "DELETED":
            phase = pod.get("status", {}).get("phase", "Pending")
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
        pool = self.pools.pool_of.get(pod["spec"].get("nodeName") or "")
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

    def _on_job(self, etype: str, job: Obj, old: Obj | None) -> None:
        key = (job["metadata"].get("namespace") or "", job["metadata"]["name"])
        if etype == "ADDED":
            self._jobs_seen[key] = {"created": self.env.now, "start": None, "end": None}
        elif etype == "MODIFIED" and (job.get("status") or {}).get("completionTime") and key in self._jobs_seen:
            self._jobs_seen[key]["end"] = self._jobs_seen[key]["end"] or self.env.now

    def _gpu_by_pool(self) -> dict[str, tuple[int, int]]:
        """[requested, allocatable] GPUs per pool now (memoized until the store changes)."""
        if self._gpu_now is not None and self._gpu_now[0] == self.store.rv:
            return self._gpu_now[1]
        out: dict[str, list[int]] = {}
        table = self.scheduler.table  # the scheduler cache's numpy columns: one bincount per pool, not a node loop
        if GPU in table.alloc:
            ids = self._row_pools(table)
            live = table.alive[:len(ids)] & (ids >= 0)
            n = len(self._pool_names)
            req = np.bincount(ids[live], weights=table.used[GPU][:len(ids)][live], minlength=n)
            alloc = np.bincount(ids[live], weights=table.alloc[GPU][:len(ids)][live], minlength=n)
            for i in np.flatnonzero(np.bincount(ids[live], minlength=n)):
                out[self._pool_names[i]] = [int(req[i]), int(alloc[i])]
        else:
            for name in self.scheduler.nodes:
                pool = self.pools.pool_of.get(name)
                if pool is not None:
                    out.setdefault(pool, [0, 0])
        shared = self.scheduler.gpushare.shared_milli() if self.scheduler.gpushare is not None else {}
        for name, milli in shared.items():  # GPU-sharing pods under a gpuPlacementPolicy
            pool = self.pools.pool_of.get(name)
            if pool is not None:
                out.setdefault(pool, [0, 0])[0] += milli / 1000
        for name, (used, total) in nvidia_dra.gpu_devices_by_node(self.store).items():
            pool = self.pools.pool_of.get(name)
            if pool is not None:
                acc = out.setdefault(pool, [0, 0])
                acc[0] += used
                acc[1] += total
        for pool in self.store.list("NodePool"):
            out.setdefault(pool["metadata"]["name"], [0, 0])
        result = {k: (v[0], v[1]) for k, v in out.items()}
        self._gpu_now = (self.store.rv, result)
        return result

    def _row_pools(self, table: Any) -> np.ndarray:
        """The node pool (an index into _pool_names, -1 while unknown) of each row of the scheduler's node table;
        rows are never reused, so only new rows and rows whose node had no pool yet are looked up."""
        ids = self._row_pool
        if len(ids) < len(table.infos):
            ids = self._row_pool = np.concatenate((ids, np.full(len(table.infos) - len(ids), -1, np.int64)))
        for i in np.flatnonzero(ids < 0):
            ni = table.infos[i]
            pool = self.pools.pool_of.get(ni.name) if ni is not None else None
            if pool is not None:
                ids[i] = self._pool_ids.setdefault(pool, len(self._pool_ids))
                if ids[i] == len(self._pool_names):
                    self._pool_names.append(pool)
        return ids

    def _sample(self) -> None:
        self._accumulate()
        now = self.env.now
        self.series["t"].append(now)
        pending = sum(1 for k, p in self.phase.items() if p == "Pending" and k not in self.scheduled)
        self.series["pending_pods"].append(pending)
        gp = self.scheduler.gpushare
        frag = placement_fragmentation(gp) if gp is not None else \
            cluster_fragmentation(list(self.scheduler.nodes.values()), self._gpu_shapes)
        self.series["fragmented_gpu_pct"].append(round(frag[0], 3) if frag else None)
        if frag:
            self._frag.append(frag)
        self.series["nodes"].append(len(self.scheduler.nodes))
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

    def finish(self, until: float) -> tuple[dict[str, Any], dict[str, Any], list[dict], list[dict]]:
        """The summary, the sampled series, one row per Job and one row per pod."""
        self._accumulate()
        by_phase: dict[str, int] = {}
        for p in self.phase.values():
            by_phase[p] = by_phase.get(p, 0) + 1
        waits = [self.scheduled.get(k, self.deleted.get(k, until)) - t for k, t in self.created.items()]
        cost_by_pool: dict[str, float] = {}
        node_hours: dict[str, float] = {}
        split: dict[str, list[float]] = {}  # pool -> [on-demand USD, Spot USD]
        for node, secs in sorted(self.pools.node_seconds.items()):
            pool = self.pools.pool_of[node]
            price, spot = self._node_price.get(node, (0.0, False))
            cost_by_pool[pool] = cost_by_pool.get(pool, 0.0) + price * secs / 3600
            node_hours[pool] = node_hours.get(pool, 0.0) + secs / 3600
            split.setdefault(pool, [0.0, 0.0])[1 if spot else 0] += price * secs / 3600
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
            "cost": {"currency": "USD", "total_usd": round(sum(cost_by_pool.values()), 2),
                     "by_pool": {k: round(v, 2) for k, v in sorted(cost_by_pool.items())},
                     "node_hours_by_pool": {k: round(v, 3) for k, v in sorted(node_hours.items())},
                     "on_demand_usd": round(sum(v[0] for v in split.values()), 2),
                     "spot_usd": round(sum(v[1] for v in split.values()), 2),
                     "by_pool_provisioning": {k: {"on_demand_usd": round(v[0], 2), "spot_usd": round(v[1], 2)}
                                              for k, v in sorted(split.items())}},
            "scheduler": {"attempts": self.scheduler.schedule_attempts},
        }
        if self._frag:
            summary["gpu_fragmentation"] = {
                "fragmented_gpu_pct_mean": round(sum(f for f, _ in self._frag) / len(self._frag), 3),
                "frag_ratio_pct_mean": round(sum(r for _, r in self._frag) / len(self._frag), 3),
                "samples": len(self._frag)}
        if self._sharing:
            summary["gpu_sharing"] = {pool: {
                "gpu_pods_finished": len(v["slowdowns"]), "gpu_oom_failures": v["oom"],
                "slowdown_mean": round(sum(v["slowdowns"]) / len(v["slowdowns"]), 3) if v["slowdowns"] else None,
                "slowdown_max": round(max(v["slowdowns"]), 3) if v["slowdowns"] else None}
                for pool, v in sorted(self._sharing.items())}
        return summary, self.series, self._jobs(), pods_rows

    def _jobs(self) -> list[dict]:
        out = []
        for (ns, name), seen in sorted(self._jobs_seen.items()):
            job = self.store.get("Job", ns, name)
            conds = conditions_of(job or {})
            status = next((t for t in ("Complete", "Failed") if is_condition_true(conds, t)), None) or (
                "Running" if seen["start"] is not None else "Pending")
            out.append({"name": name, "namespace": ns, **seen, "status": status})
        return out

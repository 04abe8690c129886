"""Utilization, pending time and cost, collected from the store's events as the run goes."""

from __future__ import annotations

from typing import Any

from kubetwin.api.units import parse_duration
from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

GPU = "nvidia.com/gpu"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (deterministic, no interpolation)."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return float(s[k])


class Metrics:
    def __init__(self, store: Store, env: Environment, scheduler: Any, pools: Any, interval: float) -> None:
        self.store, self.env, self.scheduler, self.pools = store, env, scheduler, pools
        self.interval = interval
        self.created: dict[str, float] = {}
        self.scheduled: dict[str, float] = {}
        self.phase: dict[str, str] = {}
        self.series: dict[str, Any] = {"t": [], "pending_pods": [], "gpu_allocation_pct": {}, "nodes": []}
        self._gpu_area: dict[str, list[float]] = {}  # pool -> [requested gpu-seconds, allocatable gpu-seconds]
        self._last_t = 0.0
        store.watch("Pod", self._on_pod)
        env.at(0, self._sample)

    def _on_pod(self, etype: str, pod: Obj, old: Obj | None) -> None:
        key = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}/{pod['metadata'].get('uid')}"
        if etype == "ADDED":
            self.created[key] = self.env.now
        if pod["spec"].get("nodeName") and key not in self.scheduled:
            self.scheduled[key] = self.env.now
        self.phase[key] = "Deleted" if etype == "DELETED" and self.phase.get(key) in ("Pending", "Running") \
            else pod.get("status", {}).get("phase", "Pending") if etype != "DELETED" else self.phase.get(key, "Pending")

    def _gpu_by_pool(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for name, ni in self.scheduler.nodes.items():
            pool = self.pools.pool_of.get(name)
            if pool is None:
                continue
            acc = out.setdefault(pool, [0, 0])
            acc[0] += ni.requested.get(GPU, 0)
            acc[1] += ni.allocatable.get(GPU, 0)
        for pool in self.store.list("NodePool"):
            out.setdefault(pool["metadata"]["name"], [0, 0])
        return {k: (v[0], v[1]) for k, v in out.items()}

    def _sample(self) -> None:
        self._accumulate()
        now = self.env.now
        self.series["t"].append(now)
        pending = sum(1 for k, p in self.phase.items() if p == "Pending" and k not in self.scheduled)
        self.series["pending_pods"].append(pending)
        self.series["nodes"].append(len(self.scheduler.nodes))
        n = len(self.series["t"])
        for pool, (req, alloc) in sorted(self._gpu_by_pool().items()):
            vals = self.series["gpu_allocation_pct"].setdefault(pool, [])
            vals.extend([0.0] * (n - 1 - len(vals)))
            vals.append(round(100.0 * req / alloc, 3) if alloc else 0.0)
        self.env.after(self.interval, self._sample)

    def _accumulate(self) -> None:
        dt = self.env.now - self._last_t
        if dt > 0:
            for pool, (req, alloc) in self._gpu_by_pool().items():
                area = self._gpu_area.setdefault(pool, [0.0, 0.0])
                area[0] += req * dt
                area[1] += alloc * dt
        self._last_t = self.env.now

    def finish(self, until: float) -> tuple[dict[str, Any], dict[str, Any], list[dict]]:
        self._accumulate()
        by_phase: dict[str, int] = {}
        for p in self.phase.values():
            by_phase[p] = by_phase.get(p, 0) + 1
        waits = [self.scheduled.get(k, until) - t for k, t in self.created.items()]
        cost_by_pool: dict[str, float] = {}
        node_hours: dict[str, float] = {}
        for node, secs in sorted(self.pools.node_seconds.items()):
            pool = self.pools.pool_of[node]
            n = self.store.get("Node", "", node)
            price = float(n["metadata"]["annotations"]["kubetwin.io/hourly-price-usd"]) if n else 0.0
            cost_by_pool[pool] = cost_by_pool.get(pool, 0.0) + price * secs / 3600
            node_hours[pool] = node_hours.get(pool, 0.0) + secs / 3600
        gpu = {pool: {"mean_pct": round(100 * a[0] / a[1], 3) if a[1] else 0.0,
                      "gpu_hours_requested": round(a[0] / 3600, 3), "gpu_hours_allocatable": round(a[1] / 3600, 3)}
               for pool, a in sorted(self._gpu_area.items())}
        pods_rows = [{"pod": k.rsplit("/", 1)[0], "created": t, "scheduled": self.scheduled.get(k),
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
                     "node_hours_by_pool": {k: round(v, 3) for k, v in sorted(node_hours.items())}},
            "scheduler": {"attempts": self.scheduler.schedule_attempts},
            "_pods": pods_rows,
        }
        return summary, self.series, self._jobs(until)

    def _jobs(self, until: float) -> list[dict]:
        out = []
        for job in sorted(self.store.list("Job"), key=lambda j: (j["metadata"]["namespace"], j["metadata"]["name"])):
            st = job.get("status") or {}
            created = self._secs(job["metadata"]["creationTimestamp"])
            first = [self.scheduled[k] for k in self.scheduled
                     if k.startswith(f"{job['metadata']['namespace']}/{job['metadata']['name']}-")]
            conds = {c["type"] for c in st.get("conditions") or [] if c["status"] == "True"}
            status = "Complete" if "Complete" in conds else "Failed" if "Failed" in conds else \
                "Running" if first else "Pending"
            out.append({"name": job["metadata"]["name"], "namespace": job["metadata"]["namespace"],
                        "created": created, "start": min(first) if first else None,
                        "end": self._secs(st["completionTime"]) if st.get("completionTime") else None,
                        "status": status})
        return out

    def _secs(self, ts: str) -> float:
        from datetime import datetime

        a = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        b = datetime.fromisoformat(self.store.start_time.replace("Z", "+00:00"))
        return (a - b).total_seconds()


__all__ = ["Metrics", "percentile", "parse_duration"]

"""Kueue's Prometheus metrics for a run, under their real names (kubernetes-sigs/kueue pkg/metrics/metrics.go).

A per-run prometheus_client registry (never the global one), so two runs in one process do not mix; written by the
one exposition writer (prometheus/exposition.py) in client_golang's format, deterministic. Times are simulated seconds.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram, disable_created_metrics
from prometheus_client import Counter as PromCounter

from kubetwin.prometheus import exposition
from kubetwin.sim.env import Environment
from kubetwin.sim.stats import percentile

disable_created_metrics()  # the *_created series carry wall-clock time: a run's output must be deterministic
# generateExponentialBuckets(14) in pkg/metrics/metrics.go: 1, then 2.5 doubling 13 times (up to 10,240 s).
WAIT_BUCKETS = (1.0, *(2.5 * 2**i for i in range(13)))


class KueueMetrics:
    """kueue_* series plus the per-ClusterQueue numbers summary.json reports."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.registry = CollectorRegistry()
        r = self.registry
        self.pending_workloads = Gauge("kueue_pending_workloads", "The number of pending workloads, per "
                                       "'cluster_queue' and 'status'", ["cluster_queue", "status"], registry=r)
        self.reserving = Gauge("kueue_reserving_active_workloads", "The number of Workloads that are reserving "
                               "quota, per 'cluster_queue'", ["cluster_queue"], registry=r)
        self.admitted_total = PromCounter("kueue_admitted_workloads", "The total number of admitted workloads per "
                                          "'cluster_queue'", ["cluster_queue"], registry=r)
        self.quota_reserved_total = PromCounter("kueue_quota_reserved_workloads", "The total number of quota "
                                                "reserved workloads per 'cluster_queue'", ["cluster_queue"],
                                                registry=r)
        self.wait = Histogram("kueue_admission_wait_time_seconds", "The time between a workload was created or "
                              "requeued until admission, per 'cluster_queue'", ["cluster_queue"],
                              buckets=WAIT_BUCKETS, registry=r)
        self.evicted_total = PromCounter("kueue_evicted_workloads", "The number of evicted workloads per "
                                         "'cluster_queue'", ["cluster_queue", "reason"], registry=r)
        self.preempted_total = PromCounter("kueue_preempted_workloads", "The number of preempted workloads per "
                                           "'preempting_cluster_queue'", ["preempting_cluster_queue", "reason"],
                                           registry=r)
        self._queued_since: dict[str, float] = {}
        self._waits: dict[str, list[float]] = {}
        self._counts: dict[str, Counter[str]] = {}
        self._pending_now: dict[str, tuple[int, int]] = {}

    def _count(self, cq: str, what: str) -> None:
        self._counts.setdefault(cq, Counter())[what] += 1

    def created(self, key: str, t: float) -> None:
        self._queued_since[key] = t

    def admitted(self, key: str, cq: str, t: float) -> None:
        wait = max(0.0, t - self._queued_since.get(key, t))
        self.admitted_total.labels(cq).inc()
        self.quota_reserved_total.labels(cq).inc()
        self.wait.labels(cq).observe(wait)
        self._waits.setdefault(cq, []).append(wait)
        self._count(cq, "admitted")

    def preempted(self, key: str, cq: str, preempting_cq: str, reason: str) -> None:
        self.evicted_total.labels(cq, "Preempted").inc()
        self.preempted_total.labels(preempting_cq, reason).inc()
        self._count(cq, "evicted")
        self._count(cq, "evicted_by_reason/Preempted")
        self._count(preempting_cq, f"preempted_by_reason/{reason}")

    def evicted(self, key: str, cq: str, reason: str) -> None:
        """An eviction the workload controller issues (PodsReadyTimeout, Deactivated)."""
        self.evicted_total.labels(cq, reason).inc()
        self._count(cq, "evicted")
        self._count(cq, f"evicted_by_reason/{reason}")

    def requeued(self, key: str, t: float) -> None:
        self._queued_since[key] = t

    def finished(self, key: str, succeeded: bool, cq: str | None) -> None:
        self._queued_since.pop(key, None)
        if cq:
            self._count(cq, "finished" if succeeded else "failed")

    def forget(self, key: str) -> None:
        self._queued_since.pop(key, None)

    def sample(self, pending: dict[str, tuple[int, int]], reserving: dict[str, int]) -> None:
        """Gauges after each burst of cycles: (active, inadmissible) pending and reserving workloads per CQ.
        In ClusterQueue name order: a series first set here is exposed in creation order, so metrics.prom must not
        depend on the order of the caller's (set-built) mapping."""
        for cq, (active, inadmissible) in sorted(pending.items()):
            self.pending_workloads.labels(cq, "active").set(active)
            self.pending_workloads.labels(cq, "inadmissible").set(inadmissible)
            self.reserving.labels(cq).set(reserving.get(cq, 0))
        self._pending_now.update(pending)

    def summary(self) -> dict[str, Any]:
        """Per ClusterQueue: workloads admitted / evicted / finished, preemptions issued by reason, admission wait."""
        out: dict[str, Any] = {}
        for cq in sorted(set(self._counts) | set(self._pending_now)):
            counts = self._counts.get(cq, Counter())
            waits = self._waits.get(cq, [])
            active, inadmissible = self._pending_now.get(cq, (0, 0))
            out[cq] = {
                "admitted": counts["admitted"], "evicted": counts["evicted"], "finished": counts["finished"],
                "failed": counts["failed"],
                "preemptions_issued": {k.split("/", 1)[1]: v for k, v in sorted(counts.items())
                                       if k.startswith("preempted_by_reason/")},
                "evicted_by_reason": {k.split("/", 1)[1]: v for k, v in sorted(counts.items())
                                      if k.startswith("evicted_by_reason/")},
                "pending_at_end": {"active": active, "inadmissible": inadmissible},
                "admission_wait_s": {"p50": percentile(waits, 50), "p99": percentile(waits, 99),
                                     "max": max(waits, default=0.0)},
            }
        return out

    def exposition(self) -> str:
        """The registry in Prometheus text format, as kueue-controller-manager's /metrics shows it (a Go program:
        client_golang's layout and number format)."""
        return exposition.registry_text(self.registry)

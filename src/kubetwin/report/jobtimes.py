"""Jobs' and JobSets' lifetimes as `kubectl get jobs` shows them: from the object's creation to its Complete
(JobSet: Completed) condition turning True, or to Failed; Jobs a JobSet owns count in their JobSet. One
implementation for the run summary (report.metrics feeds it from its watch) and the sweep's job metrics (fed from
a run's history)."""

from __future__ import annotations

from typing import Any

from kubetwin.sim.stats import percentile

DONE = {"Job": "Complete", "JobSet": "Completed"}  # the condition type that finishes each kind successfully
Key = tuple[str, str, str]


class JobTimes:
    """Fed every version of Jobs and JobSets (`add`), in the order they were written."""

    def __init__(self) -> None:
        self.created: dict[Key, float] = {}
        self.done: dict[Key, float] = {}  # completed
        self.failed: dict[Key, float] = {}

    def add(self, t: float, etype: str, obj: dict[str, Any]) -> None:
        kind = obj["kind"]
        if kind not in DONE or etype == "DELETED":
            return
        meta = obj["metadata"]
        if kind == "Job" and any(r.get("kind") == "JobSet" for r in meta.get("ownerReferences") or ()):
            return
        key = (kind, meta.get("namespace", ""), meta["name"])
        self.created.setdefault(key, t)
        if key in self.done or key in self.failed:
            return
        for c in (obj.get("status") or {}).get("conditions") or ():
            if c.get("status") == "True":
                if c.get("type") == DONE[kind]:
                    self.done[key] = t
                    return
                if c.get("type") == "Failed":
                    self.failed[key] = t
                    return

    def completion_seconds(self) -> list[float]:
        """Creation to completion of each completed Job or JobSet, by (kind, namespace, name)."""
        return [self.done[k] - self.created[k] for k in sorted(self.done)]

    def last_completed(self) -> float | None:
        """When the last one completed, None while any has not (failed ones included): the makespan."""
        if len(self.done) != len(self.created):
            return None
        return max(self.done.values()) if self.done else 0.0

    def summary(self) -> dict[str, Any] | None:
        """summary.json's `jobs`: counts, completion time percentiles, the makespan; None without Jobs."""
        if not self.created:
            return None
        jct = self.completion_seconds()
        return {"total": len(self.created), "completed": len(self.done), "failed": len(self.failed),
                "unfinished": len(self.created) - len(self.done) - len(self.failed),
                "completion_seconds": {"p50": percentile(jct, 50) if jct else None,
                                       "p99": percentile(jct, 99) if jct else None,
                                       "max": max(jct) if jct else None},
                "makespan_seconds": self.last_completed()}

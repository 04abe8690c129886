"""Kueue's scheduler performance suite as a twin scenario: its generator's objects, its recorder's numbers.

Ported from kubernetes-sigs/kueue@ff69552e test/performance/scheduler (Apache-2.0):

- ``to_objects`` is runner/generator/generator.go ``Generate``: one ResourceFlavor ``rf``; per cohort set ``count``
  cohorts ``<className>-<i>``; per queue set ``count`` ClusterQueues ``<className>-<setIdx>-<i>-<cohort>`` (cpu
  nominalQuota / borrowingLimit on ``rf``, the preemption policies, BestEffortFIFO, namespaceSelector {},
  flavorFungibility MayStopSearch / TryNextFlavor as pkg/util/testing MakeClusterQueue sets them), a Namespace and a
  LocalQueue of the same name; per workload set, Workloads ``<className>-<setIdx>-<si>-<i>`` (one pod set ``main``,
  ``podCount`` pods (default 1) of one container requesting ``request`` cpu, ``spec.priority``, the run-time and
  class labels) created one ``creationIntervalMs`` apart -- the generator sleeps that long before each create, all
  sets and queues concurrently, so the k-th Workload of a set is created at k x interval (``kubetwin.io/create-at``;
  the API round trips between creates are left out).
- Kueue itself is minimalkueue (minimalkueue/main.go): the core controllers and the scheduler with a client of QPS
  50 / Burst 100 (``MINIMALKUEUE_CLIENT``: the scenario's Configuration gives it as ``clientConnection``).
  minimalkueue sets only QPS/Burst, so controller-runtime gives it one bucket per API type where cmd/kueue (the
  twin's Kueue) shares one; the twin paces only Kueue's Workload writes, which share one bucket in both.
- The runner's Workload reconciler is `kueue.controller.perfrunner` (Finished after the run time).
- ``record`` is runner/recorder/recorder.go's summary over the run's history: per Workload class the average time
  to admission, the last admission counting, measured both ways the recorder has measured it: since kueue#13313
  (94f89ec95d, 2026-08-03) ``lastTransitionTime`` of Admitted minus ``creationTimestamp`` (whole milliseconds of
  second-precision stamps; ``admission_ms``), and before it -- when every number in ``PUBLISHED`` was measured
  (0cdb8fda4b's recorder, April 2024, to fab9b7ce70's, May 2026) -- the time the runner's informer saw the
  Admitted update minus the time it saw the Workload's first event, both ``time.Now()`` (``admission_observed_ms``:
  in the twin the times the versions were stored, the runner's watch having no latency), which also counts the
  admission patch's wait for a token of minimalkueue's client; per ClusterQueue class the usage:
  the cpu ``flavorsUsage`` of each ClusterQueue status version held until the next one, summed, over the class's
  nominal quota times the time from its first to its last ClusterQueue event (checker/checker_test.go).

Kueue's published numbers (``PUBLISHED``) are the configs' rangespec.yaml averages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubetwin.k8s.units import to_milli
from kubetwin.kueue import api as kueue_api
from kubetwin.kueue.controller.perfrunner import CLASS_LABEL, RUNNING_TIME_LABEL

CLEANUP_LABEL = "kueue.x-k8s.io/performance-scheduler-cleanup"
FLAVOR = "rf"  # defaultResourceFlavorName
MINIMALKUEUE_CLIENT = {"qps": 50, "burst": 100}  # minimalkueue/main.go: kubeConfig.QPS / Burst
KUEUE_API = "kueue.x-k8s.io/v1beta2"

# Kueue's own averages for each shipped config (configs/<name>/rangespec.yaml comments): per Workload class the
# average time to admission in ms, the ClusterQueue class usage in %, the wall time of minimalkueue in ms.
PUBLISHED: dict[str, dict[str, Any]] = {
    # baseline, 5 CI trials (rangespec.yaml): with SchedulingEquivalenceHashing (beta, on since fab9b7ce70,
    # 2026-05-13) large averages 16501 ms (+-13 %) and the usage 55.9 %; medium 76768 ms (+-2 %), small 215468 ms
    # (+-2 %), wall 351116 ms (+-0.9 %) were measured before and kept.
    "baseline": {"admission_ms": {"large": 16501, "medium": 76768, "small": 215468}, "usage_pct": {"cq": 55.9},
                 "wall_ms": 351116},
    # without the gate: rangespec.yaml before fab9b7ce70, i.e. the 5 trials of April 2024 behind every baseline
    # number (the suite's first rangespec, e9915ae169 / 0cdb8fda4b): large 6666 ms (+-14 %), usage 58.7 % -- Kueue
    # of then, whose scheduler differs from the one the twin ports (docs/kueue.md).
    "baseline/SchedulingEquivalenceHashing=false": {
        "admission_ms": {"large": 6666, "medium": 76768, "small": 215468}, "usage_pct": {"cq": 58.7},
        "wall_ms": 351116},
    # large-scale as calibrated (1,000 ClusterQueues, 50,000 Workloads; 19 periodic runs, #11422 / #11871).
    "large-scale": {"admission_ms": {"large": 105604, "medium": 256413, "small": 700379},
                    "usage_pct": {"cq": 38.64}, "wall_ms": 1179411},
}


SHIPPED = Path(__file__).parent / "data" / "kueue_perf"  # Kueue's generator configs, copied (README.md there)


def resolve(config: str | Path, feature_gates: dict[str, bool] | None = None) -> tuple[Path, str | None]:
    """A config path, or the name of a shipped one (baseline, large-scale, large-scale-2000); with the key of
    Kueue's published numbers for it under these feature gates (None when Kueue publishes none)."""
    path = Path(config)
    if not path.exists() and (SHIPPED / f"{config}.yaml").exists():
        path = SHIPPED / f"{config}.yaml"
    name = path.stem if path.parent == SHIPPED else None
    if name is not None and (feature_gates or {}).get("SchedulingEquivalenceHashing") is False:
        name += "/SchedulingEquivalenceHashing=false"
    return path, name if name in PUBLISHED else None


def load_config(path: str | Path) -> dict:
    """A generator config file (generator.go ``LoadConfig``: at least one cohort set)."""
    cfg = yaml.safe_load(Path(path).read_text()) or {}
    if not cfg.get("cohorts"):
        raise ValueError(f"{path}: config must contain at least one cohort")
    if cfg.get("topology"):
        raise ValueError(f"{path}: topology-aware scheduling configs are not modelled by the twin")
    return cfg


def to_objects(cfg: dict, *, duration: str = "2h", name: str = "kueue-perf",
               feature_gates: dict[str, bool] | None = None) -> list[dict]:
    """The objects Generate creates, as twin manifests (a Scenario and the Kueue Configuration first, with
    ``feature_gates`` as its featureGates)."""
    flavor = (cfg.get("resourceFlavor") or {}).get("name") or FLAVOR
    kueue_cfg: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                 "clientConnection": dict(MINIMALKUEUE_CLIENT)}
    if feature_gates:
        kueue_cfg["featureGates"] = dict(feature_gates)
    objs: list[dict] = [
        {"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": name},
         "spec": {"duration": duration}},
        kueue_cfg,
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
         "metadata": {"name": flavor, "labels": {CLEANUP_LABEL: "true"}}}]
    workloads: list[tuple[float, dict]] = []
    for cset in cfg["cohorts"]:
        for ci in range(int(cset.get("count", 0))):
            cohort = f"{cset['className']}-{ci}"
            for qsi, qset in enumerate(cset.get("queuesSets") or []):
                for qi in range(int(qset.get("count", 0))):
                    cq = f"{qset['className']}-{qsi}-{qi}-{cohort}"
                    objs += _queue(cq, cohort, flavor, qset)
                    for wsi, wset in enumerate(qset.get("workloadsSets") or []):
                        workloads += _workloads(cq, wsi, wset)
    workloads.sort(key=lambda tw: tw[0])  # stable: generation order at equal times
    return objs + [w for _, w in workloads]


def _queue(cq: str, cohort: str, flavor: str, qset: dict) -> list[dict]:
    resource = {"name": "cpu", "nominalQuota": str(qset.get("nominalQuota", 0))}
    if qset.get("borrowingLimit") is not None:
        resource["borrowingLimit"] = str(qset["borrowingLimit"])
    preemption = {k: qset[k] for k in ("reclaimWithinCohort", "withinClusterQueue") if qset.get(k)}
    return [
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
         "metadata": {"name": cq, "labels": {CLASS_LABEL: qset["className"], CLEANUP_LABEL: "true"}},
         "spec": {"cohortName": cohort, "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                  "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
                  "resourceGroups": [{"coveredResources": ["cpu"],
                                      "flavors": [{"name": flavor, "resources": [resource]}]}],
                  "preemption": preemption}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cq, "labels": {CLEANUP_LABEL: "true"}}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": cq, "namespace": cq},
         "spec": {"clusterQueue": cq}}]


def _workloads(ns: str, wsi: int, wset: dict) -> list[tuple[float, dict]]:
    delay = int(wset.get("creationIntervalMs", 0)) / 1000.0
    out: list[tuple[float, dict]] = []
    t = 0.0
    for si in range(int(wset.get("count", 0))):
        for i, wlt in enumerate(wset.get("workloads") or []):
            t += delay
            at = round(t, 6)
            out.append((at, {
                "apiVersion": KUEUE_API, "kind": "Workload",
                "metadata": {"name": f"{wlt['className']}-{wsi}-{si}-{i}", "namespace": ns,
                             "labels": {RUNNING_TIME_LABEL: str(int(wlt.get("runtimeMs", 0))),
                                        CLASS_LABEL: wlt["className"]},
                             "annotations": {"kubetwin.io/create-at": f"{at:g}s"}},
                "spec": {"queueName": ns, "priority": int(wlt.get("priority", 0)), "podSets": [{
                    "name": "main", "count": int(wlt.get("podCount") or 1),
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{
                        "name": "c", "resources": {"requests": {"cpu": str(wlt.get("request", 0))}}}]}}}]}}))
    return out


# ---------------------------------------------------------------------------------------------------- the recorder


def _ms(timestamp: str) -> int:
    return int(kueue_api.parse_time(timestamp) * 1000)


@dataclass
class _CQ:
    cls: str
    quota: int  # mCPU
    first: float
    last: float
    usage: int = 0  # mCPU at the last event
    used: float = 0.0  # mCPU * ms


@dataclass
class Summary:
    """recorder.go's Summary: per Workload class count and average time to admission, per ClusterQueue class
    usage; plus when the last Workload finished (the simulated drain)."""

    admission_ms: dict[str, int] = field(default_factory=dict)  # the Admitted stamps (since kueue#13313)
    admission_observed_ms: dict[str, int] = field(default_factory=dict)  # the times seen (Kueue's published numbers)
    counts: dict[str, int] = field(default_factory=dict)
    evictions: dict[str, int] = field(default_factory=dict)
    usage_pct: dict[str, float] = field(default_factory=dict)
    drained_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"averageTimeToAdmissionMs": self.admission_ms,
                "averageTimeToAdmissionObservedMs": self.admission_observed_ms, "workloads": self.counts,
                "evictions": self.evictions, "usagePct": self.usage_pct, "drainedS": self.drained_s}


def record(history: Iterable[tuple[float, int, str, dict]]) -> Summary:
    """The recorder's summary from a run's history (``RunResult.history``)."""
    cqs: dict[str, _CQ] = {}
    admitted: dict[str, bool] = {}
    to_admit: dict[str, tuple[str, int]] = {}  # key -> (class, ms)
    first_seen: dict[str, float] = {}  # key -> when the recorder saw its first event
    observed: dict[str, int] = {}  # key -> ms from the first event seen to the Admitted update seen
    evicted: dict[str, bool] = {}
    evictions: dict[str, int] = {}
    drained = 0.0
    for t, _, etype, o in history:
        kind = o.get("kind")
        if kind == "ClusterQueue" and etype != "DELETED":
            _cq_event(cqs, o, t)
        elif kind == "Workload" and etype != "DELETED":
            labels = o["metadata"].get("labels") or {}
            if CLASS_LABEL not in labels:
                continue
            key = f"{o['metadata']['namespace']}/{o['metadata']['name']}"
            conds = {c["type"]: c for c in (o.get("status") or {}).get("conditions") or []}
            adm = conds.get("Admitted", {}).get("status") == "True"
            first = first_seen.setdefault(key, t)
            if adm and not admitted.get(key):
                observed[key] = round((t - first) * 1e6) // 1000  # Go's Duration.Milliseconds(), of µs here
                created = _ms(o["metadata"]["creationTimestamp"])
                at = _ms(conds["Admitted"]["lastTransitionTime"])
                to_admit[key] = (labels[CLASS_LABEL], at - created if at >= created else 0)
            admitted[key] = adm
            ev = conds.get("Evicted", {}).get("status") == "True"
            if ev and not evicted.get(key):
                evictions[labels[CLASS_LABEL]] = evictions.get(labels[CLASS_LABEL], 0) + 1
            evicted[key] = ev
            if conds.get("Finished", {}).get("status") == "True":
                drained = max(drained, t)
            to_admit.setdefault(key, (labels[CLASS_LABEL], 0))
    out = Summary(drained_s=drained)
    totals: dict[str, int] = {}
    seen: dict[str, int] = {}
    for key, (cls, ms) in to_admit.items():
        out.counts[cls] = out.counts.get(cls, 0) + 1
        totals[cls] = totals.get(cls, 0) + ms
        seen[cls] = seen.get(cls, 0) + observed.get(key, 0)
    out.admission_ms = {c: totals[c] // out.counts[c] for c in sorted(totals)}  # Go's int64 division
    out.admission_observed_ms = {c: seen[c] // out.counts[c] for c in sorted(seen)}
    out.evictions = dict(sorted(evictions.items()))
    groups: dict[str, list[_CQ]] = {}
    for cq in cqs.values():
        groups.setdefault(cq.cls, []).append(cq)
    for cls, members in sorted(groups.items()):
        elapsed = (max(c.last for c in members) - min(c.first for c in members)) * 1000
        quota = sum(c.quota for c in members)
        if elapsed > 0 and quota > 0:
            out.usage_pct[cls] = round(sum(c.used for c in members) * 100 / (quota * elapsed), 2)
    return out


def _cq_event(cqs: dict[str, _CQ], o: dict, t: float) -> None:
    name = o["metadata"]["name"]
    status = o.get("status") or {}
    usage = 0
    fus = status.get("flavorsUsage") or []
    if fus and fus[0].get("resources"):
        usage = to_milli(fus[0]["resources"][0].get("total", "0"))
    state = cqs.get(name)
    if state is None:
        groups = (o.get("spec") or {}).get("resourceGroups") or []
        quota = 0
        if groups and groups[0].get("flavors") and groups[0]["flavors"][0].get("resources"):
            quota = to_milli(groups[0]["flavors"][0]["resources"][0].get("nominalQuota", "0"))
        cqs[name] = _CQ(cls=(o["metadata"].get("labels") or {}).get(CLASS_LABEL, ""), quota=quota, first=t, last=t,
                        usage=usage)
        return
    if state.usage > 0:
        state.used += state.usage * (t - state.last) * 1000
    state.usage, state.last = usage, t


def table(summary: Summary, published: str | None, wall_s: float | None = None) -> list[tuple[str, str, str, str]]:
    """Rows (measure, twin, Kueue, difference) for the console and the benchmark."""
    pub = PUBLISHED.get(published or "", {})
    rows: list[tuple[str, str, str, str]] = []
    for cls, ms in summary.admission_observed_ms.items():  # as Kueue measured its published numbers
        ref = pub.get("admission_ms", {}).get(cls)
        diff = f"{(ms - ref) * 100 / ref:+.1f} %" if ref else ""
        rows.append((f"{cls}: avg time to admission", f"{ms / 1000:.1f} s",
                     f"{ref / 1000:.1f} s" if ref else "-", diff))
    for cls, ms in summary.admission_ms.items():
        rows.append((f"{cls}: the same from the Admitted stamps (kueue#13313)", f"{ms / 1000:.1f} s", "-", ""))
    for cls, pct in summary.usage_pct.items():
        ref_pct = pub.get("usage_pct", {}).get(cls)
        rows.append((f"{cls}: ClusterQueue usage", f"{pct:.1f} %", f"{ref_pct:.1f} %" if ref_pct else "-",
                     f"{pct - ref_pct:+.1f} points" if ref_pct else ""))
    ref_wall = pub.get("wall_ms")
    rows.append(("drained (simulated) / minimalkueue wall", f"{summary.drained_s:.0f} s",
                 f"{ref_wall / 1000:.0f} s" if ref_wall else "-", ""))
    if wall_s is not None:
        rows.append(("twin wall time", f"{wall_s:.1f} s", "", ""))
    return rows

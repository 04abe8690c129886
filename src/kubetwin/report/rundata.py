"""A run folder read back for report.html: its files, and what the timeline and panels draw of the history.

The report is built from these files only (never from the live run), so `kubetwin report RUN` rebuilds the page a
run wrote and can put several runs side by side. history.jsonl is read in one pass, line by line, and never held:
each version goes to the timeline (kubetwin.report.timeline) and to the panels' series (ClusterQueue counts and
borrowing, Workload evictions, nodes per pool, Events on nodes), then is dropped (issue 32: loading every version
tripled the peak memory of a 10,000-pod run). Lines of kinds the report does not read, and Nodes' MODIFIED versions
(the nodes panel needs only when each node came and went, and its pool from its first version), are skipped
before parsing. `kubetwin run` does not read the file back at all: a HistoryFeed takes each version as the store
records it (report.historylog hands it over), and the page is built from what it kept (issue 32: parsing the
10,000-pod run's 77 MB history back cost 0.2 CPU s of its 3.3).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kubetwin.k8s.conditions import conditions_of, find_condition
from kubetwin.k8s.names import GKE_NODEPOOL
from kubetwin.report.historyindex import line_kind
from kubetwin.report.rundir import history_file, run_meta
from kubetwin.report.timeline import AGGREGATE_PODS, Key, Row, Timeline, key_of
from kubetwin.sim.historyfile import open_history

__all__ = ["ClusterQueueSeries", "HistoryFeed", "Key", "RunData", "Version", "key_of", "load_run"]

# The kinds the report's timeline and panels read; the rest of history.jsonl is skipped while reading.
KINDS = frozenset({"Job", "JobSet", "Workload", "Pod", "ClusterQueue", "Node", "Event"})
POOL_LABEL = GKE_NODEPOOL  # GKE's node pool label (kubetwin.autoscaler sets it on every node)
_NODE_MODIFIED_TAIL = b'"type":"MODIFIED"}'  # the end of a line (sorted keys, historylog.encode_line)


@dataclass
class ClusterQueueSeries:
    """One ClusterQueue's status over time: (t, admittedWorkloads), (t, pendingWorkloads), borrowed per resource."""

    admitted: list[tuple[float, float]] = field(default_factory=list)
    pending: list[tuple[float, float]] = field(default_factory=list)
    borrowed: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


@dataclass
class RunData:
    """One run folder: run.json, summary.json, timeseries.json, training.json and what the report draws of the
    history (rows: the timeline; the rest: the panels' series)."""

    name: str
    meta: dict[str, Any]
    summary: dict[str, Any]
    timeseries: dict[str, Any]
    training: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    never_bound: list[Key] = field(default_factory=list)  # pods never bound to a node, in creation order
    cluster_queues: dict[str, ClusterQueueSeries] = field(default_factory=dict)
    preemptions: list[tuple[float, str, str]] = field(default_factory=list)  # (t, ClusterQueue, text)
    node_changes: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # pool: (t, nodes alive)
    node_events: list[tuple[float, str, str, str]] = field(default_factory=list)  # (t, pool, text, colour)

    @property
    def duration(self) -> float:
        return float(self.meta["duration"])


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def _quantity(value: Any) -> float:
    """A Kueue usage quantity as a number (memory in GiB, CPU in cores)."""
    from kubetwin.k8s.units import parse_quantity

    v = float(parse_quantity(str(value)))
    return v / 2**30 if v >= 2**30 else v


class _Panels:
    """The panels' series, version by version (`finish` puts them in a RunData)."""

    def __init__(self) -> None:
        self.cluster_queues: dict[str, ClusterQueueSeries] = {}
        self.preemptions: list[tuple[float, str, str]] = []
        self.node_changes: dict[str, list[tuple[float, int]]] = {}
        self.workloads: dict[Key, tuple[str, bool]] = {}  # (ClusterQueue, Evicted) of each Workload's last version
        self.pool_of: dict[str, str] = {}  # each node's pool, from its first version
        self.alive: dict[str, int] = {}
        self.events: list[tuple[float, str, str, str, str]] = []  # (t, kind, name, reason, text): on nodes, pools

    def add(self, t: float, etype: str, obj: dict[str, Any]) -> None:
        kind = obj["kind"]
        if kind == "ClusterQueue":
            self._cluster_queue(t, obj)
        elif kind == "Workload":
            self._workload(t, obj)
        elif kind == "Node":
            name = obj["metadata"]["name"]
            pool = self.pool_of.get(name)
            if pool is None:
                pool = self.pool_of[name] = (obj["metadata"].get("labels") or {}).get(POOL_LABEL, "(no pool)")
            delta = -1 if etype == "DELETED" else 1 if etype == "ADDED" else 0
            if delta:
                self.alive[pool] = self.alive.get(pool, 0) + delta
                self.node_changes.setdefault(pool, []).append((t, self.alive[pool]))
        elif kind == "Event" and etype != "DELETED":  # deleted an hour after its last write (store.eventttl)
            inv = obj.get("involvedObject") or {}
            if inv.get("kind") in ("Node", "NodePool"):
                reason = obj.get("reason", "")
                self.events.append((t, inv["kind"], inv["name"], reason,
                                    f"{inv['kind']} {inv['name']}: {reason} {obj.get('message', '')}"))

    def _cluster_queue(self, t: float, obj: dict[str, Any]) -> None:
        series = self.cluster_queues.setdefault(obj["metadata"]["name"], ClusterQueueSeries())
        st = obj.get("status") or {}
        series.admitted.append((t, st.get("admittedWorkloads", 0)))
        series.pending.append((t, st.get("pendingWorkloads", 0)))
        used: dict[str, float] = {}
        for fl in st.get("flavorsUsage") or []:
            for res in fl.get("resources") or []:
                used[res["name"]] = used.get(res["name"], 0.0) + _quantity(res.get("borrowed", "0"))
        for res, v in used.items():
            series.borrowed.setdefault(res, []).append((t, v))

    def _workload(self, t: float, obj: dict[str, Any]) -> None:
        """A preemption mark each time a Workload's Evicted condition turned True."""
        key = key_of(obj)
        cq, was = self.workloads.get(key, ("", False))
        st = obj.get("status") or {}
        cq = (st.get("admission") or {}).get("clusterQueue") or cq
        ev = find_condition(conditions_of(obj), "Evicted")
        now = ev is not None and ev.get("status") == "True"
        if now and not was and ev is not None:
            pre = find_condition(conditions_of(obj), "Preempted")
            why = pre.get("reason") if pre is not None and pre.get("status") == "True" else ev.get("reason")
            self.preemptions.append((t, cq, f"Workload {key[1]}/{key[2]} evicted from {cq}: {why}"))
        self.workloads[key] = (cq, now)

    def finish(self, data: RunData) -> None:
        data.cluster_queues, data.node_changes = self.cluster_queues, self.node_changes
        data.preemptions = sorted(self.preemptions)
        out = []
        for t, kind, name, reason, text in self.events:
            pool = name if kind == "NodePool" else self.pool_of.get(name, "(no pool)")
            color = "#d62728" if "Fail" in reason or "Preempt" in reason or "Terminat" in reason else "#333333"
            out.append((t, pool, text, color))
        data.node_events = sorted(out)


Version = tuple[float, str, dict[str, Any]]  # (t, type, object): one line of history.jsonl


def _read_history(path: Path) -> Iterator[Version]:
    """history.jsonl (or .zst) line by line, each version of a kind the report reads (and a Node's only when it came
    or went); the other lines are skipped before they are parsed."""
    with open_history(path) as source:
        for line in source.lines():
            kind = line_kind(line)  # None: only parsing the line tells
            if kind is not None and (kind not in KINDS or (kind == "Node" and
                                                           line.rstrip().endswith(_NODE_MODIFIED_TAIL))):
                continue
            rec = orjson.loads(line)  # 3x json.loads; an integer beyond int64 (no API object holds one) as a float
            yield rec["t"], rec["type"], rec["object"]


class HistoryFeed:
    """What the report draws of a run's history, built version by version in history.jsonl's order (`add`): by
    load_run reading the file, or by the run itself as the store records each version (runner: report.historylog
    hands them over), so the page needs no second pass over the file. aggregate: whether the pods that would be
    rows of their own are one row per owner; None: decided when the pods counted pass AGGREGATE_PODS, or at the
    end (the Timeline builds both views until then); live: the versions are the store's objects as it records them
    (Timeline holds them as they are)."""

    def __init__(self, aggregate: bool | None = None, live: bool = False) -> None:
        self.timeline = Timeline(aggregate, live)
        self.panels = _Panels()
        self.bound: dict[Key, bool] = {}  # every pod, in creation order: ever bound to a node

    def add(self, t: float, etype: str, obj: dict[str, Any]) -> None:
        kind = obj["kind"]
        if kind not in KINDS or (kind == "Node" and etype == "MODIFIED"):
            return
        timeline = self.timeline
        timeline.add(t, etype, obj)
        self.panels.add(t, etype, obj)
        if kind == "Pod":
            if etype == "ADDED" and timeline.aggregate is None and timeline.pods > AGGREGATE_PODS:
                timeline.decide(True)
            key = key_of(obj)
            if not self.bound.get(key) and (obj.get("spec") or {}).get("nodeName"):
                self.bound[key] = True
            else:
                self.bound.setdefault(key, False)

    @property
    def pods(self) -> int:
        """The pods created (Pod ADDED versions): summary.json's pods.total."""
        return self.timeline.pods

    def finish(self, data: RunData) -> None:
        """The rows and series into `data` (once: the rows end the timeline's segments at the run's end)."""
        if self.timeline.aggregate is None:
            self.timeline.decide(self.pods > AGGREGATE_PODS)
        data.rows = self.timeline.rows(data.duration)
        data.never_bound = [k for k, b in self.bound.items() if not b]
        self.panels.finish(data)


def load_run(run_dir: Path, name: str | None = None, history: Iterable[Version] | None = None,
             feed: HistoryFeed | None = None) -> RunData:
    """Read a run folder; KubetwinError when it is not one. `name` labels it (default: the folder's name).

    feed: the run's history as it was recorded (`kubetwin run`), used when it counted the pods summary.json does
    (else the file is read); history: the versions history.jsonl holds, when the caller has them in memory (the
    same objects, without parsing the file back); by default the file is read."""
    meta = run_meta(run_dir, "summary.json")
    data = RunData(name=name or run_dir.resolve().name, meta=meta,
                   summary=_json(run_dir / "summary.json"), timeseries=_json(run_dir / "timeseries.json"),
                   training=_json(run_dir / "training.json"))
    pods = (data.summary.get("pods") or {}).get("total") or 0
    if feed is None or feed.pods != pods:
        feed = HistoryFeed(aggregate=pods > AGGREGATE_PODS)
        for t, etype, obj in _read_history(history_file(run_dir)) if history is None else history:
            feed.add(t, etype, obj)
    feed.finish(data)
    return data

"""The report's timeline: one row per Job / JobSet / Kueue Workload / pod, with the states it really went through.

A row's state at each moment is read from the stored versions of its objects (the Job or JobSet, its Kueue
Workloads, its pods) with the API's condition helpers (kubetwin.k8s.conditions), so a Job whose Workload Kueue
evicted shows `Preempted (InCohortReclamation)` for as long as the Workload's condition says so, not one green bar.

Built in one pass over history.jsonl (`Timeline.add` per version, in the file's order) that keeps, per object, only
the fields the state rules read of its latest version, never the versions themselves (issue 32: loading the whole
history tripled the peak memory of a 10,000-pod run). Past `AGGREGATE_PODS` pods, the pods that would each be a row
of their own (a Deployment's replicas, bare pods) are drawn as one row per owner, in the state most of them are in.
A timeline fed while the run records its versions (rundata.HistoryFeed) does not know the run's pod count yet: it
builds both views of those pods until the count passes the threshold or the run ends (`decide`), so it draws what
a timeline told the count up front draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubetwin.k8s.conditions import conditions_of, find_condition, is_condition_true

if TYPE_CHECKING:
    from kubetwin.report.rundata import RunData

__all__ = ["AGGREGATE_PODS", "STATE_COLORS", "Key", "Row", "Segment", "Timeline", "key_of", "rows_of"]

Key = tuple[str, str, str]  # (kind, namespace, name)
# The legend's order, and one colour per state (Preempted/Evicted/Failed stand out from Running).
STATE_COLORS: dict[str, str] = {
    "Pending": "#f0ad4e", "QuotaReserved": "#d9d46b", "Admitted": "#9ecae1", "Running": "#5cb85c",
    "Preempted": "#9467bd", "Evicted": "#e377c2", "Failed": "#d62728", "Succeeded": "#c6dbef",
}
_RANK = {s: i for i, s in enumerate(STATE_COLORS)}  # ties between a group's states: the legend's order
ROOT_OWNERS = frozenset({"Job", "JobSet"})  # a pod's or Workload's row is its Job's, and a Job's its JobSet's
MEMBER_KINDS = frozenset({"Pod", "Job", "JobSet", "Workload"})
# Past this many pods in a run (summary.json pods.total), the pods that would be rows of their own are one row per
# owner (twin choice: a timeline of thousands of rows is neither readable nor light; 2,000 rows is a ~2 MB page).
AGGREGATE_PODS = 2000
# The only conditions the state rules read (kept of each version; the rest, and every other field, is dropped).
_CONDITIONS = frozenset({"Complete", "Completed", "Failed", "Suspended", "Finished", "Preempted", "Evicted",
                         "Admitted", "QuotaReserved", "DisruptionTarget", "PodScheduled"})
State = tuple[str, str]  # (state, reason)


@dataclass(frozen=True)
class Segment:
    """One state held from start to end (simulated seconds); reason: the condition's or pod's reason."""

    start: float
    end: float
    state: str
    reason: str


@dataclass
class Row:
    """One timeline row: the object it stands for and what happened to it (pods: how many pods an aggregated row
    stands for, 0 for one object's row)."""

    kind: str
    namespace: str
    name: str
    segments: list[Segment] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)  # pod failures and disruptions
    events: list[tuple[float, str]] = field(default_factory=list)  # Events on the row's objects
    pods: int = 0

    @property
    def label(self) -> str:
        what = f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"
        return f"{what} ({self.pods} pods)" if self.pods else what

    def seconds_in(self, state: str) -> float:
        return sum(s.end - s.start for s in self.segments if s.state == state)

    def states(self) -> list[str]:
        return [s.state for s in self.segments]


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def _controller(obj: dict[str, Any]) -> tuple[str, str] | None:
    refs = obj["metadata"].get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return (ref["kind"], ref["name"]) if ref else None


def _root(key: Key, owners: dict[Key, tuple[str, str] | None]) -> Key:
    """The row an object belongs to: up its owners while they are Jobs or JobSets (a Workload: to its owner)."""
    kind, ns, _ = key
    seen = 0
    while seen < 4:  # Pod -> Job -> JobSet at most; the bound guards against an ownership cycle
        seen += 1
        owner = owners.get(key)
        if owner is None or (owner[0] not in ROOT_OWNERS and not (kind == "Workload" and owner[0] == "Pod")):
            break
        key = (owner[0], ns, owner[1])
        kind = key[0]
    return key


def _reason(c: dict[str, Any] | None) -> str:
    if c is None:
        return ""
    msg = c.get("message") or ""
    return f"{c.get('reason') or ''}: {msg}" if msg else c.get("reason") or ""


def _pod_failure(pod: dict[str, Any]) -> str:
    st = pod.get("status") or {}
    if st.get("reason"):
        return f"{st['reason']}: {st.get('message') or ''}".rstrip(": ")
    for cs in st.get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or {}
        if term.get("reason"):
            return f"{term['reason']}: {term.get('message') or ''}".rstrip(": ")
    return ""


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """The fields of a version that _state and _pod_end read, and nothing else (the latest version of every live
    object is held until the end of the pass); the rules read the same of the whole object."""
    st = obj.get("status") or {}
    status: dict[str, Any] = {k: st[k] for k in ("phase", "reason", "message") if k in st}
    conds = [{k: c[k] for k in ("type", "status", "reason", "message") if k in c}
             for c in st.get("conditions") or () if c.get("type") in _CONDITIONS]
    if conds:
        status["conditions"] = conds
    terminated = [{"state": {"terminated": {k: term[k] for k in ("reason", "message") if k in term}}}
                  for cs in st.get("containerStatuses") or ()
                  if (term := (cs.get("state") or {}).get("terminated") or {}).get("reason")]
    if terminated:
        status["containerStatuses"] = terminated
    node = (obj.get("spec") or {}).get("nodeName")
    return {"kind": obj["kind"], "metadata": {"name": obj["metadata"]["name"]}, "status": status,
            "spec": {"nodeName": node} if node else {}}


def _state(root: dict[str, Any] | None, wls: list[dict], pods: list[dict]) -> State:
    """The row's state from its objects' latest versions: terminal conditions first, then Kueue's, then pods'."""
    if root is not None and root["kind"] in ROOT_OWNERS:
        conds = conditions_of(root)
        for done in ("Complete", "Completed"):
            if is_condition_true(conds, done):
                return "Succeeded", _reason(find_condition(conds, done))
        if is_condition_true(conds, "Failed"):
            return "Failed", _reason(find_condition(conds, "Failed"))
    if root is not None and root["kind"] == "Pod":
        phase = (root.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return "Succeeded", ""
        if phase == "Failed":
            return "Failed", _pod_failure(root)
    for wl in wls:
        conds = conditions_of(wl)
        fin = find_condition(conds, "Finished")
        if fin is not None and fin.get("status") == "True":
            return ("Succeeded" if fin.get("reason") == "Succeeded" else "Failed"), _reason(fin)
        for cond in ("Preempted", "Evicted"):
            if is_condition_true(conds, cond):
                return cond, _reason(find_condition(conds, cond))
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    for p in live:
        dt = find_condition(conditions_of(p), "DisruptionTarget")
        if dt is not None and dt.get("status") == "True":
            return ("Preempted" if "Preempt" in (dt.get("reason") or "") else "Evicted"), _reason(dt)
    if any((p.get("status") or {}).get("phase") == "Running" for p in live):
        return "Running", ""
    for wl in wls:
        if is_condition_true(conditions_of(wl), "Admitted"):
            return "Admitted", ""
        if is_condition_true(conditions_of(wl), "QuotaReserved"):
            return "QuotaReserved", ""
    for wl in wls:
        qr = find_condition(conditions_of(wl), "QuotaReserved")
        if qr is not None:
            return "Pending", _reason(qr)
    for p in live:
        ps = find_condition(conditions_of(p), "PodScheduled")
        if ps is not None and ps.get("status") == "False":
            return "Pending", _reason(ps)
    bound = [p for p in live if (p.get("spec") or {}).get("nodeName")]
    if bound:
        return "Pending", f"bound to {bound[0]['spec']['nodeName']}, containers starting"
    if root is not None and is_condition_true(conditions_of(root), "Suspended"):
        return "Pending", _reason(find_condition(conditions_of(root), "Suspended"))
    return "Pending", ""


def _pod_end(pod: dict[str, Any], before: dict[str, Any] | None) -> State | None:
    """(state, reason) when this version is the one where the pod failed or was marked for disruption."""
    st = pod.get("status") or {}
    dt = find_condition(conditions_of(pod), "DisruptionTarget")
    if dt is not None and dt.get("status") == "True":
        was = find_condition(conditions_of(before), "DisruptionTarget") if before else None
        if was is None or was.get("status") != "True":
            return ("Preempted" if "Preempt" in (dt.get("reason") or "") else "Evicted"), _reason(dt) + _where(pod)
    if st.get("phase") == "Failed" and ((before or {}).get("status") or {}).get("phase") != "Failed":
        return "Failed", (_pod_failure(pod) or "Failed") + _where(pod)
    return None


def _where(pod: dict[str, Any]) -> str:
    node = (pod.get("spec") or {}).get("nodeName")
    return f" (pod {pod['metadata']['name']}" + (f" on {node})" if node else ")")


class _Track:
    """One row's objects as the pass has seen them: each member's latest (slim) version and the state shown."""

    __slots__ = ("root", "row", "group", "snap", "current", "since", "lost", "events")

    def __init__(self, root: Key, row: Row | None, group: _Group | None) -> None:
        self.root, self.row, self.group = root, row, group
        self.snap: dict[Key, dict[str, Any]] = {}
        self.current: State | None = None
        self.since = 0.0
        # The last pod failure or disruption: the row shows it, not Pending, until a pod runs again.
        self.lost: State | None = None
        self.events: list[tuple[float, int, str]] = []  # (t, the Event object's order, text)

    def settle(self, t: float) -> None:
        """The state at t, once every write at t is in (a change ends the segment held since the last one)."""
        state: State | None = None
        if self.snap:
            snap = self.snap
            state = _state(snap.get(self.root), [o for k, o in snap.items() if k[0] == "Workload"],
                           [o for k, o in snap.items() if k[0] == "Pod"])
            if state[0] == "Pending" and self.lost is not None:
                state = self.lost[0], f"{self.lost[1]}; waiting for a replacement pod to run"
            elif state[0] == "Failed" and self.lost is not None and self.lost[1] not in state[1]:
                state = "Failed", f"{state[1]}; last pod: {self.lost[1]}"
        if state != self.current:
            if self.group is not None:
                self.group.move(self.current, state)
            elif self.current is not None and t > self.since and self.row is not None:
                self.row.segments.append(Segment(self.since, t, *self.current))
            self.current, self.since = state, t


class _Group:
    """An aggregated row: how many of its pods are in each state; it shows the state most of them are in."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.counts: dict[str, int] = {}
        self.current: str | None = None
        self.reason = ""
        self.since = 0.0

    def move(self, old: State | None, new: State | None) -> None:
        if old is not None:
            self.counts[old[0]] -= 1
        if new is not None:
            self.counts[new[0]] = self.counts.get(new[0], 0) + 1

    def settle(self, t: float) -> None:
        live = {s: n for s, n in self.counts.items() if n}
        state = min(live, key=lambda s: (-live[s], _RANK[s])) if live else None
        if state != self.current:
            if self.current is not None and t > self.since:
                self.row.segments.append(Segment(self.since, t, self.current, self.reason))
            self.current, self.since = state, t
            self.reason = "of its pods: " + ", ".join(f"{live[s]} {s}" for s in STATE_COLORS if s in live)

    def finish(self, end: float) -> None:
        if self.current is not None and end > self.since:
            self.row.segments.append(Segment(self.since, end, self.current, self.reason))


class Timeline:
    """The timeline built version by version, in history.jsonl's order (`add`), then `rows(end)`.

    aggregate: pods that would be rows of their own are one row per owner (per namespace for pods of no owner);
    None: not known yet (`decide` says, at the latest before `rows`): such pods get a row of their own and a place
    in their owner's group, and the view not chosen is dropped then."""

    def __init__(self, aggregate: bool | None = False, live: bool = False) -> None:
        self.aggregate = aggregate
        # live: the versions are the store's own objects as it records them (never changed in place, and held by
        # the store while they are an object's latest): kept as they are, where a version parsed from the file is
        # cut to the fields the rules read (_slim), so the pass never holds more than the store does.
        self.live = live
        self.shadow: dict[Key, _Track] = {}  # undecided: by root, each own-row pod's track in its owner's group
        self.pods = 0  # Pod objects created (ADDED versions): summary.json's pods.total
        self.owners: dict[Key, tuple[str, str] | None] = {}  # each member's controller, from its first version
        self.tracks: dict[Key, _Track] = {}  # by root, in the order the rows' first objects were created
        self.track_of: dict[Key, _Track] = {}  # every member's row
        self.groups: dict[Key, _Group] = {}
        self.dirty: dict[int, _Track] = {}  # the rows changed at this instant, in the order they changed
        self.t = 0.0
        self.early: dict[Key, list[tuple[float, int, str]]] = {}  # Events on objects not seen yet
        self.event_order: dict[Key, int] = {}  # Event objects, in the order first seen (attached ones only)

    def _flush(self) -> None:
        groups: dict[int, _Group] = {}
        for tr in self.dirty.values():
            tr.settle(self.t)
            if tr.group is not None:
                groups[id(tr.group)] = tr.group
        for g in groups.values():
            g.settle(self.t)
        self.dirty.clear()

    def _grouped(self, key: Key, owner: tuple[str, str] | None) -> _Track:
        """A pod's track in its owner's aggregated row."""
        gkey: Key = (owner[0], key[1], owner[1]) if owner else ("Pods", key[1], "(no owner)")
        group = self.groups.get(gkey)
        if group is None:
            group = self.groups[gkey] = _Group(Row(*gkey))
        group.row.pods += 1
        return _Track(key, None, group)

    def _track(self, key: Key, obj: dict[str, Any]) -> _Track:
        self.owners[key] = owner = _controller(obj)
        root = _root(key, self.owners)
        tr = self.tracks.get(root)
        if tr is None:
            own_row_pod = root == key and key[0] == "Pod"
            if own_row_pod and self.aggregate:
                tr = self.tracks[root] = self._grouped(key, owner)
            else:
                tr = self.tracks[root] = _Track(root, Row(*root), None)
                if own_row_pod and self.aggregate is None:
                    self.shadow[key] = self._grouped(key, owner)
        self.track_of[key] = tr
        for ev in self.early.pop(key, ()):
            self._attach(tr, ev)
        return tr

    def add(self, t: float, etype: str, obj: dict[str, Any]) -> None:
        """One version of a Pod, Job, JobSet, Workload or Event, at simulated time t."""
        if t != self.t:
            self._flush()
            self.t = t
        kind = obj["kind"]
        if kind == "Event":
            if etype != "DELETED":  # an Event goes an hour after its last write (store.eventttl); it still happened
                self._event(t, obj)
            return
        if kind not in MEMBER_KINDS:
            return
        key = key_of(obj)
        if kind == "Pod" and etype == "ADDED":
            self.pods += 1
        tr = self.track_of.get(key) or self._track(key, obj)
        slim = obj if self.live else _slim(obj)
        self._version(t, etype, key, slim, tr)
        if self.shadow:  # undecided: the same version in the pod's group (a plain pod's Workload is in its row)
            grouped = self.shadow.get(tr.root)
            if grouped is not None:
                self._version(t, etype, key, slim, grouped)

    def _version(self, t: float, etype: str, key: Key, slim: dict[str, Any], tr: _Track) -> None:
        if key[0] == "Pod":
            end_of = _pod_end(slim, tr.snap.get(key))
            if end_of is not None:
                row = tr.row if tr.group is None else tr.group.row
                row.marks.append((t, f"{end_of[0]} {end_of[1]}"))
                tr.lost = end_of
            if (slim.get("status") or {}).get("phase") == "Running" and etype != "DELETED":
                tr.lost = None
        if etype == "DELETED":
            tr.snap.pop(key, None)
        else:
            tr.snap[key] = slim
        self.dirty.setdefault(id(tr), tr)

    def decide(self, aggregate: bool) -> None:
        """Whether pods that would be rows of their own are one row per owner, for a timeline that began without
        knowing (aggregate=None): the view not chosen is dropped, the chosen one is what a timeline told up front
        has built (each pod's track or its group's keeps the place its pod's first version gave it)."""
        if self.aggregate is not None:
            if self.aggregate != aggregate:
                raise ValueError(f"the timeline was built with aggregate={self.aggregate}")
            return
        self.aggregate = aggregate
        if aggregate:
            moved: dict[int, _Track] = {}
            for root, grouped in self.shadow.items():
                own = self.tracks[root]
                self.dirty.pop(id(own), None)  # the group's track changed at the same instants
                self.tracks[root] = moved[id(own)] = grouped
            for key in [k for k, tr in self.track_of.items() if id(tr) in moved]:
                self.track_of[key] = moved[id(self.track_of[key])]
        else:
            for grouped in self.shadow.values():
                self.dirty.pop(id(grouped), None)
            self.groups.clear()
        self.shadow.clear()

    def _event(self, t: float, obj: dict[str, Any]) -> None:
        inv = obj.get("involvedObject") or {}
        target = (inv.get("kind", ""), inv.get("namespace") or "", inv.get("name", ""))
        if target[0] not in MEMBER_KINDS:
            return
        tr = self.track_of.get(target)
        if tr is not None and tr.group is not None:
            return  # an aggregated row carries no per-pod events
        ekey = key_of(obj)
        order = self.event_order.setdefault(ekey, len(self.event_order))
        ev = (t, order, f"{inv['kind']} {inv['name']}: {obj.get('reason', '')} {obj.get('message', '')}".rstrip())
        if tr is None:
            self.early.setdefault(target, []).append(ev)
        else:
            self._attach(tr, ev)

    @staticmethod
    def _attach(tr: _Track, ev: tuple[float, int, str]) -> None:
        if tr.row is not None:
            tr.events.append(ev)

    def rows(self, end: float) -> list[Row]:
        """Every row with a segment, in the order its first object was created; an aggregated row where its first
        pod's would be."""
        if self.aggregate is None:
            raise ValueError("Timeline.rows before decide()")
        self._flush()
        out: list[Row] = []
        seen: set[int] = set()
        for tr in self.tracks.values():
            if tr.group is not None:
                if id(tr.group) in seen:
                    continue
                seen.add(id(tr.group))
                tr.group.finish(end)
                row = tr.group.row
            else:
                assert tr.row is not None
                row = tr.row
                if tr.current is not None and end > tr.since:
                    row.segments.append(Segment(tr.since, end, *tr.current))
                # Events on one Event object stay together at one instant, in the order the Events were created.
                row.events = [(e[0], e[2]) for e in sorted(tr.events, key=lambda e: (e[0], e[1]))]
            if row.segments:
                out.append(row)
        return out


def rows_of(run: RunData) -> list[Row]:
    """Every row of the run's timeline, in the order their first object was created (built while the run folder
    was read)."""
    return run.rows

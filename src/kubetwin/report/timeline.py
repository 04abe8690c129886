"""The report's timeline: one row per Job / JobSet / Kueue Workload / pod, with the states it really went through.

A row's state at each moment is read from the stored versions of its objects (the Job or JobSet, its Kueue
Workloads, its pods) with the API's condition helpers (kubetwin.api.conditions), so a Job whose Workload Kueue
evicted shows `Preempted (InCohortReclamation)` for as long as the Workload's condition says so, not one green bar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubetwin.api.conditions import conditions_of, find_condition, is_condition_true
from kubetwin.report.rundata import Key, Record, RunData, key_of

__all__ = ["STATE_COLORS", "Row", "Segment", "rows_of"]

# The legend's order, and one colour per state (Preempted/Evicted/Failed stand out from Running).
STATE_COLORS: dict[str, str] = {
    "Pending": "#f0ad4e", "QuotaReserved": "#d9d46b", "Admitted": "#9ecae1", "Running": "#5cb85c",
    "Preempted": "#9467bd", "Evicted": "#e377c2", "Failed": "#d62728", "Succeeded": "#c6dbef",
}
ROOT_OWNERS = frozenset({"Job", "JobSet"})  # a pod's or Workload's row is its Job's, and a Job's its JobSet's


@dataclass(frozen=True)
class Segment:
    """One state held from start to end (simulated seconds); reason: the condition's or pod's reason."""

    start: float
    end: float
    state: str
    reason: str


@dataclass
class Row:
    """One timeline row: the object it stands for and what happened to it."""

    kind: str
    namespace: str
    name: str
    segments: list[Segment] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)  # pod failures and disruptions
    events: list[tuple[float, str]] = field(default_factory=list)  # Events on the row's objects

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def seconds_in(self, state: str) -> float:
        return sum(s.end - s.start for s in self.segments if s.state == state)

    def states(self) -> list[str]:
        return [s.state for s in self.segments]


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


def _state(root: dict[str, Any] | None, wls: list[dict], pods: list[dict]) -> tuple[str, str]:
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


def _pod_end(rec: Record, before: dict[str, Any] | None) -> tuple[str, str] | None:
    """(state, reason) when this version is the one where the pod failed or was marked for disruption."""
    pod = rec.obj
    st = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    where = f" (pod {pod['metadata']['name']}" + (f" on {node})" if node else ")")
    dt = find_condition(conditions_of(pod), "DisruptionTarget")
    was = find_condition(conditions_of(before), "DisruptionTarget") if before else None
    if dt is not None and dt.get("status") == "True" and (was is None or was.get("status") != "True"):
        return ("Preempted" if "Preempt" in (dt.get("reason") or "") else "Evicted"), _reason(dt) + where
    old_phase = ((before or {}).get("status") or {}).get("phase")
    if st.get("phase") == "Failed" and old_phase != "Failed":
        return "Failed", (_pod_failure(pod) or "Failed") + where
    return None


def rows_of(run: RunData) -> list[Row]:
    """Every row of the run's timeline, in the order their first object was created."""
    owners = {k: _controller(v[0].obj) for k, v in run.versions.items() if k[0] != "Event"}
    members: dict[Key, list[Key]] = {}
    for key in owners:
        kind = key[0]
        root = _root(key, owners)
        if kind in ("Pod", "Job", "JobSet", "Workload"):
            members.setdefault(root, []).append(key)
    rows: list[Row] = []
    where: dict[Key, Row] = {}
    end = run.duration
    for root, keys in members.items():
        row = Row(*root)
        where.update({k: row for k in keys})
        recs = sorted((r for k in keys for r in run.versions[k]), key=lambda r: r.seq)
        snap: dict[Key, dict[str, Any]] = {}
        current: tuple[str, str] | None = None
        since = 0.0
        # The last pod failure or disruption: the row shows it, not Pending, until a pod runs again.
        lost: tuple[str, str] | None = None
        for i, rec in enumerate(recs):
            key = key_of(rec.obj)
            if key[0] == "Pod":
                end_of = _pod_end(rec, snap.get(key))
                if end_of is not None:
                    row.marks.append((rec.t, f"{end_of[0]} {end_of[1]}"))
                    lost = end_of
                if (rec.obj.get("status") or {}).get("phase") == "Running" and rec.type != "DELETED":
                    lost = None
            if rec.type == "DELETED":
                snap.pop(key, None)
            else:
                snap[key] = rec.obj
            if i + 1 < len(recs) and recs[i + 1].t == rec.t:
                continue  # the state at t is the one after every write at t
            state: tuple[str, str] | None = None
            if snap:
                state = _state(snap.get(root), [o for k, o in snap.items() if k[0] == "Workload"],
                               [o for k, o in snap.items() if k[0] == "Pod"])
                if state[0] == "Pending" and lost is not None:
                    state = lost[0], f"{lost[1]}; waiting for a replacement pod to run"
                elif state[0] == "Failed" and lost is not None and lost[1] not in state[1]:
                    state = "Failed", f"{state[1]}; last pod: {lost[1]}"
            if state != current:
                if current is not None and rec.t > since:
                    row.segments.append(Segment(since, rec.t, *current))
                current, since = state, rec.t
        if current is not None and end > since:
            row.segments.append(Segment(since, end, *current))
        if row.segments:
            rows.append(row)
    for key, recs in run.versions.items():
        if key[0] != "Event":
            continue
        for rec in recs:
            inv = rec.obj.get("involvedObject") or {}
            row = where.get((inv.get("kind", ""), inv.get("namespace") or "", inv.get("name", "")))
            if row is not None:
                row.events.append((rec.t, f"{inv['kind']} {inv['name']}: {rec.obj.get('reason', '')} "
                                           f"{rec.obj.get('message', '')}".rstrip()))
    for row in rows:
        row.events.sort(key=lambda e: e[0])
    return rows

"""report.html's size bound: what the page draws stops growing with the run past fixed sizes (issue 32, goal 4: a
1,000,000-pod day drew 10,000 timeline rows, a 15.9 MB page).

Three rules, each a twin choice of size, each said on the page where it applies:
- the timeline draws at most MAX_ROWS rows: the rows that were ever Preempted, Evicted or Failed first, then the
  others in creation order; the rest are one row per (kind, namespace) that shows the state most of them are in
  (ties: the legend's order), as an aggregated pods row does (timeline._Group), its reason counting them;
- a line series of more than MAX_POINTS points is drawn from MAX_POINTS // 4 equal time intervals, each its first,
  lowest, highest and last point (in time order), so no peak or trough is lost (stacked series: all at the points
  their sum keeps, so they still stack point by point);
- a marker series of more than MAX_MARKERS points draws its first MAX_MARKERS (in time order, or row by row
  on the timeline).
A run below every size draws exactly what it drew before.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import plotly.graph_objects as go

from kubetwin.report.timeline import STATE_COLORS, Row, Segment

__all__ = ["MAX_GROUPS", "MAX_HEADLINE", "MAX_MARKERS", "MAX_POINTS", "MAX_ROWS", "MAX_SERIES", "bound_figure",
           "bound_headline", "bound_rows", "sum_steps"]

MAX_ROWS = 500  # ~1 KB of page per timeline row (its label four times, its bars and their hover text)
MAX_GROUPS = 20  # aggregated timeline rows: one per (kind, namespace) up to this many, else one per kind
MAX_POINTS = 2000
MAX_MARKERS = 2000
MAX_SERIES = 20  # ClusterQueues drawn one by one; the others summed (panels._kueue)
MAX_HEADLINE = 100  # rows of the page's header table
_RANK = {s: i for i, s in enumerate(STATE_COLORS)}
_LOST = frozenset({"Preempted", "Evicted", "Failed"})


def bound_rows(rows: list[Row]) -> tuple[list[Row], str]:
    """The rows to draw (at most MAX_ROWS + one per (kind, namespace) aggregated) and the page's note on what was
    aggregated ("" when nothing was)."""
    if len(rows) <= MAX_ROWS:
        return rows, ""
    lost = [i for i, r in enumerate(rows) if r.marks or any(s.state in _LOST for s in r.segments)]
    keep = set(lost[:MAX_ROWS])
    for i in range(len(rows)):
        if len(keep) >= MAX_ROWS:
            break
        keep.add(i)
    rest: dict[tuple[str, str], list[Row]] = {}
    for i, r in enumerate(rows):
        if i not in keep:
            rest.setdefault((r.kind, r.namespace), []).append(r)
    if len(rest) > MAX_GROUPS:  # rows in more namespaces than that: one row per kind
        by_kind: dict[tuple[str, str], list[Row]] = {}
        for (kind, _), members in rest.items():
            by_kind.setdefault((kind, "*"), []).extend(members)
        rest = by_kind
    out = [r for i, r in enumerate(rows) if i in keep]
    for (kind, ns), members in rest.items():
        out.append(_merged(kind, ns, members))
    n = sum(len(m) for m in rest.values())
    per = "kind and namespace" if all(ns != "*" for _, ns in rest) else "kind"
    note = (f"{len(rows):,} rows: {len(keep):,} drawn one by one (those ever Preempted, Evicted or Failed first, "
            f"then in creation order), the other {n:,} as one row per {per} showing the state most "
            f"of them are in (more than {MAX_ROWS:,} rows are not drawn one by one).")
    return out, note


def _merged(kind: str, ns: str, members: list[Row]) -> Row:
    """One row for `members`: at each moment the state most of those that exist then are in."""
    changes: list[tuple[float, int, str]] = []
    for r in members:
        for s in r.segments:
            changes += [(s.start, 1, s.state), (s.end, -1, s.state)]
    changes.sort(key=lambda c: (c[0], c[1]))  # ends before starts at one instant
    row = Row(f"{kind}s", ns, f"(other {len(members):,})", pods=sum(r.pods for r in members))
    counts: Counter[str] = Counter()
    current: str | None = None
    since, reason = 0.0, ""
    i = 0
    while i < len(changes):
        t = changes[i][0]
        while i < len(changes) and changes[i][0] == t:
            counts[changes[i][2]] += changes[i][1]
            i += 1
        live = {s: c for s, c in counts.items() if c}
        state = min(live, key=lambda s: (-live[s], _RANK[s])) if live else None
        if state != current:
            if current is not None and t > since:
                row.segments.append(Segment(since, t, current, reason))
            current, since = state, t
            reason = f"of its {len(members):,} rows: " + ", ".join(
                f"{live[s]} {s}" for s in STATE_COLORS if s in live)
    return row


def bound_figure(fig: go.Figure) -> list[str]:
    """Downsample the figure's long line series and cut its long marker series in place; a note for each."""
    notes = []
    stacks: dict[str, list[Any]] = {}
    for trace in fig.data:
        if isinstance(trace, go.Scatter) and trace.stackgroup and trace.x is not None:
            stacks.setdefault(trace.stackgroup, []).append(trace)
    for group in stacks.values():
        # A stack's series share their instants (plotly stacks point by point and takes a missing point as 0): all
        # are cut to the same points, those of the stack's top line (the sum).
        if len(group[0].x) <= MAX_POINTS or any(len(t.x) != len(group[0].x) for t in group):
            continue
        # each trace's y read once (plotly copies the array on every attribute read: per point that was quadratic)
        total = [sum(float(v or 0) for v in col) for col in zip(*(list(t.y) for t in group), strict=True)]
        keep = _extremes(list(group[0].x), total)
        notes.append(f"{', '.join(str(t.name) for t in group)}: {len(group[0].x):,} points each drawn as "
                     f"{len(keep):,} (the first, lowest, highest and last of their sum in each of "
                     f"{MAX_POINTS // 4:,} intervals)")
        for t in group:
            _take(t, keep)
    for trace in fig.data:
        if not isinstance(trace, go.Scatter) or trace.x is None or len(trace.x) <= min(MAX_POINTS, MAX_MARKERS):
            continue
        mode = trace.mode or ""
        if "lines" in mode and len(trace.x) > MAX_POINTS:
            keep = _extremes(list(trace.x), list(trace.y))
            notes.append(f"{trace.name}: {len(trace.x):,} points drawn as {len(keep):,} (the first, lowest, "
                         f"highest and last of each of {MAX_POINTS // 4:,} intervals)")
            _take(trace, keep)
        elif mode == "markers" and len(trace.x) > MAX_MARKERS:
            notes.append(f"{trace.name}: the first {MAX_MARKERS:,} of {len(trace.x):,} markers drawn")
            _take(trace, list(range(MAX_MARKERS)))
    return notes


def _extremes(xs: list[Any], ys: list[Any]) -> list[int]:
    """The indexes kept of a series sorted by x: per interval, its first, lowest, highest and last point."""
    lo, hi = float(xs[0]), float(xs[-1])
    width = (hi - lo) / (MAX_POINTS // 4) or 1.0
    keep: list[int] = []
    start = 0
    while start < len(xs):
        bucket = min(int((float(xs[start]) - lo) / width), MAX_POINTS // 4 - 1)
        end = start
        while end + 1 < len(xs) and min(int((float(xs[end + 1]) - lo) / width), MAX_POINTS // 4 - 1) == bucket:
            end += 1
        valued = [j for j in range(start, end + 1) if ys[j] is not None]
        ends = {start, end}
        if valued:
            ends |= {min(valued, key=lambda j: ys[j]), max(valued, key=lambda j: ys[j])}
        keep += sorted(ends)
        start = end + 1
    return keep


def _take(trace: Any, keep: list[int]) -> None:
    """Keep only the points `keep` of every per-point array of the trace."""
    for name in ("x", "y", "hovertext", "text", "customdata"):
        values = getattr(trace, name, None)
        if values is not None and not isinstance(values, str) and len(values) > len(keep):
            setattr(trace, name, [values[j] for j in keep])
    color = trace.marker.color if trace.marker is not None else None
    if color is not None and not isinstance(color, str) and len(color) > len(keep):
        trace.marker.color = [color[j] for j in keep]


def sum_steps(series: list[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The sum of step series (each (t, value) in time order, 0 before its first point), one point per instant."""
    changes = sorted(((t, i, v) for i, pts in enumerate(series) for t, v in pts), key=lambda c: c[0])
    current = [0.0] * len(series)
    total, out = 0.0, []
    for t, i, v in changes:
        total += v - current[i]
        current[i] = v
        if out and out[-1][0] == t:
            out[-1] = (t, total)
        else:
            out.append((t, total))
    return out


def bound_headline(rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The header table's first MAX_HEADLINE rows and one saying how many more summary.json holds."""
    if len(rows) <= MAX_HEADLINE:
        return rows
    return rows[:MAX_HEADLINE] + [("...", f"{len(rows) - MAX_HEADLINE:,} more rows (summary.json, `kubetwin run`'s "
                                          "console summary)")]

"""One time axis for every panel of a page that runs over simulated time, and no series hidden under another
(issue 35, charts 1-3).

A person reads stacked panels as Grafana draws them: the same instant at the same pixel in every panel. Plotly
sizes a figure's plot area from its margins, and its automatic margins grow with each figure's tick labels and
legend, so two panels of one page started tens of pixels apart. Every time panel of a page is therefore laid out
here with the same fixed left and right margins (`TimeAxis.left`, from the timeline's longest row label), the
legend in a band under the plot (it never takes width from it), and the same x range (0 to the run's end, or the
longest run's end on a comparison page); `SYNC_JS` then draws one crosshair across them all and carries a zoom
of one panel to the others. The time unit is the one that fits the run: hours from two hours up, else minutes.

Series of equal values (three pools of two nodes each) are told apart by `separate`: a line that runs on one
drawn before it for a tenth or more of the time is drawn thinner and dashed over a thicker one, so both show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

__all__ = ["SYNC_JS", "TimeAxis", "place", "separate", "time_axis"]

RIGHT = 30  # px right of every time panel's plot area
MIN_LEFT, MAX_LEFT = 80, 330  # px: y tick numbers and title at least; a long row label is cut beyond the most
TITLE_PX = 22  # px left of the tick labels for the y axis' title
CHAR_PX = 6.2  # px per character of plotly's 11-12 px sans-serif (an estimate that errs wide)
ASSUMED_WIDTH = 1000  # px of a figure when the legend's rows are counted (the page is at most 1,152 px wide)
DASHES = ("dash", "dot", "dashdot", "longdash", "longdashdot")


@dataclass(frozen=True)
class TimeAxis:
    """The page's time axis: from 0 to `end` simulated seconds, plot areas starting `left` px into each figure."""

    end: float
    left: int

    @property
    def unit(self) -> str:
        return "h" if self.end >= 2 * 3600 else "min"

    @property
    def per(self) -> float:
        """Simulated seconds per axis unit."""
        return 3600.0 if self.unit == "h" else 60.0

    @property
    def title(self) -> str:
        return f"simulated time ({self.unit})"


def text_px(text: str) -> float:
    return CHAR_PX * len(text)


def time_axis(end: float, labels: list[str]) -> TimeAxis:
    """The axis for a page whose longest run ends at `end` and whose timelines label rows `labels`."""
    widest = max((text_px(x) for x in labels), default=0.0)
    return TimeAxis(max(end, 1.0), int(min(MAX_LEFT, max(MIN_LEFT, widest + 16 + TITLE_PX))))


def cut_label(label: str, axis: TimeAxis) -> str:
    """A row label short enough for the left margin (the hover text keeps it whole)."""
    room = int((axis.left - 16 - TITLE_PX) / CHAR_PX) + 1
    return label if len(label) <= room else label[: max(room - 1, 1)] + "\u2026"


def legend_rows(names: list[str], width: float) -> int:
    """How many rows a horizontal legend of these entries takes in `width` px (plotly wraps it)."""
    rows, used = 1, 0.0
    for n in names:
        w = 45 + text_px(n)
        if used and used + w > width:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def place(fig: go.Figure, axis: TimeAxis, legend_below: bool = True) -> go.Figure:
    """Lay the figure (built in simulated hours) out on the page's time axis: x in the axis's unit over its whole
    range, fixed margins, the legend in a band of its own under the plot, and a spike line at the cursor."""
    scale = 3600.0 / axis.per
    if scale != 1.0:
        for tr in fig.data:
            if tr.x is not None:
                tr.x = [None if v is None else v * scale for v in tr.x]
            if isinstance(tr, go.Bar) and tr.base is not None:
                tr.base = [v * scale for v in tr.base]
    height = fig.layout.height or 380
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 60
    bottom = 50
    named = [str(tr.name or "") for tr in fig.data if tr.showlegend is not False]
    if legend_below and named:
        band = 19 * legend_rows(named, ASSUMED_WIDTH - axis.left - RIGHT) + 12
        bottom += band
        height += band
        fig.update_layout(legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yanchor": "bottom",
                                  "yref": "container", "traceorder": "normal"})
    traces = len(fig.data)
    fig.update_layout(height=height, margin={"l": axis.left, "r": RIGHT, "t": top, "b": bottom, "autoexpand": False},
                      hovermode="x unified" if legend_below and traces <= 10 else "closest",
                      hoverlabel={"bgcolor": "rgba(255,255,255,0.85)", "namelength": -1},
                      meta={"kubetwin_time_axis": axis.unit})
    fig.update_xaxes(range=[0, axis.end / axis.per], title_text=axis.title, nticks=13, hoverformat=".2f",
                     ticksuffix=f" {axis.unit}", showspikes=True,
                     spikemode="across", spikesnap="cursor", spikethickness=1, spikedash="solid", spikecolor="#666",
                     automargin=False)
    fig.update_yaxes(automargin=False)
    return fig


def _coincide(a: Any, b: Any) -> bool:
    """Whether two (step) line series hold the same value for at least a tenth of the span they share (one walk
    over both series' points, in time order)."""
    ax, ay, bx, by = list(a.x or ()), list(a.y or ()), list(b.x or ()), list(b.y or ())
    if len(ax) < 2 or len(bx) < 2 or len(ax) != len(ay) or len(bx) != len(by):
        return False
    try:
        lo, hi = max(ax[0], bx[0]), min(ax[-1], bx[-1])
        if hi <= lo:
            return False
        i = j = 0
        t, same = lo, 0.0
        while i + 1 < len(ax) and ax[i + 1] <= t:
            i += 1
        while j + 1 < len(bx) and bx[j + 1] <= t:
            j += 1
        while t < hi:
            nxt = min(ax[i + 1] if i + 1 < len(ax) else hi, bx[j + 1] if j + 1 < len(bx) else hi, hi)
            if ay[i] is not None and ay[i] == by[j]:
                same += nxt - t
            t = nxt
            while i + 1 < len(ax) and ax[i + 1] <= t:
                i += 1
            while j + 1 < len(bx) and bx[j + 1] <= t:
                j += 1
    except TypeError:  # categorical x: not a series over time
        return False
    return same >= 0.1 * (hi - lo)


def separate(fig: go.Figure, budget: int = 1_000_000) -> go.Figure:
    """Draw each line that coincides with one drawn before it dashed and thinner, over a thicker one, so no series
    hides under another; a figure of too many lines for the pairwise check gets the dashes in turn."""
    lines = [tr for tr in fig.data if isinstance(tr, go.Scatter) and "lines" in (tr.mode or "lines")
             and tr.stackgroup is None]
    if len(lines) < 2:
        return fig
    points = sum(len(tr.x or ()) for tr in lines)
    check = points * (len(lines) - 1) <= budget  # each pair walks both series once
    under: dict[int, int] = {}
    for i, tr in enumerate(lines):
        hits = [j for j in range(i) if _coincide(lines[j], tr)] if check else [i - 1] if i else []
        if not hits:
            continue
        k = len(hits) if check else i
        if tr.line.dash is None:  # a dash the panel chose says something (Kueue: pending dotted): kept
            tr.line.dash = DASHES[(k - 1) % len(DASHES)]
        tr.line.width = max(1.2, 2.4 - 0.4 * (k - 1))
        for j in hits:
            under[j] = under.get(j, 0) + 1
    for j in under:
        if lines[j].line.width is None:
            lines[j].line.width = 3.2
    return fig


# Loaded once at the end of a page: one crosshair across every time panel (they share the axis, so an instant is
# one x in all of them), and a zoom or pan of one panel's time axis applied to the others.
SYNC_JS = """window.addEventListener('load', function () {
  var gds = Array.prototype.slice.call(document.querySelectorAll('section.timed .js-plotly-plot'));
  var busy = false;
  function frame(gd) { var s = gd._fullLayout._size; return {l: s.l, w: s.w, t: s.t, h: s.h,
                                                               r: gd._fullLayout.xaxis.range}; }
  function cross(gd) {
    var d = gd.parentNode.querySelector(':scope > .kt-cross');
    if (!d) { d = document.createElement('div'); d.className = 'kt-cross'; gd.parentNode.appendChild(d); }
    return d;
  }
  function hide() { gds.forEach(function (gd) { cross(gd).style.display = 'none'; }); }
  function show(x) {
    gds.forEach(function (gd) {
      var f = frame(gd), px = f.l + (x - f.r[0]) / (f.r[1] - f.r[0]) * f.w, d = cross(gd);
      if (!(px >= f.l && px <= f.l + f.w)) { d.style.display = 'none'; return; }
      d.style.display = 'block'; d.style.left = (gd.offsetLeft + px) + 'px';
      d.style.top = (gd.offsetTop + f.t) + 'px'; d.style.height = f.h + 'px';
    });
  }
  // The values at the cursor ("x unified" panels): plotly draws them in a box over the series; the box is hidden
  // (html.STYLE) and its lines written out here instead, one row above the plot area, growing upwards over the
  // title when they wrap, never over the data.
  function readout(gd) {
    var d = gd.parentNode.querySelector(':scope > .kt-readout');
    if (!d) { d = document.createElement('div'); d.className = 'kt-readout'; gd.parentNode.appendChild(d); }
    return d;
  }
  function fill(gd) {
    var box = gd.querySelector('.hoverlayer .legend'), d = readout(gd);
    if (!box) { d.style.display = 'none'; return; }
    var head = box.querySelector('.legendtitletext');
    var rows = Array.prototype.slice.call(box.querySelectorAll('.traces'));
    d.innerHTML = (head ? '<b></b>' : '') + rows.map(function () { return '<span><i></i><span></span></span>'; })
      .join(' ');
    if (head) d.querySelector('b').textContent = head.textContent;
    rows.forEach(function (row, k) {
      var span = d.children[(head ? 1 : 0) + k], mark = row.querySelector('.legendpoints path, .legendlines path');
      var colour = mark ? (getComputedStyle(mark).stroke !== 'none' ? getComputedStyle(mark).stroke
                                                                   : getComputedStyle(mark).fill) : '#444';
      span.querySelector('i').style.background = colour;
      span.querySelector('span').textContent = (row.querySelector('.legendtext') || row).textContent;
    });
    var f = frame(gd);
    d.style.left = (gd.offsetLeft + f.l) + 'px'; d.style.maxWidth = f.w + 'px';
    d.style.top = ''; d.style.display = 'block';
    d.style.top = (gd.offsetTop + f.t - 2 - d.offsetHeight) + 'px';
  }
  gds.forEach(function (gd) {
    if (gd._fullLayout.hovermode === 'x unified') {
      gd.on('plotly_hover', function () { fill(gd); });
      gd.on('plotly_unhover', function () { readout(gd).style.display = 'none'; });
    }
    gd.addEventListener('mousemove', function (e) {
      var f = frame(gd), px = e.clientX - gd.getBoundingClientRect().left;
      if (px < f.l || px > f.l + f.w) { hide(); return; }
      show(f.r[0] + (px - f.l) / f.w * (f.r[1] - f.r[0]));
    });
    gd.addEventListener('mouseleave', hide);
    gd.on('plotly_relayout', function (ev) {
      if (busy || !ev) return;
      var keys = Object.keys(ev).filter(function (k) { return k.indexOf('xaxis.') === 0; });
      if (!keys.length) return;
      var range = gd._fullLayout.xaxis.range.slice();
      busy = true;
      Promise.all(gds.filter(function (o) { return o !== gd; }).map(function (o) {
        return Plotly.relayout(o, {'xaxis.range': range});
      })).then(function () { busy = false; }, function () { busy = false; });
    });
  });
});"""

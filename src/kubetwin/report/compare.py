"""The difference column of `kubetwin report A B` (issue 35, charts 5): each headline number of B against A's,
absolute and in percent, read back from the two rows' text so every headline row (report.headline) gets one.

Two values compare when they say the same thing with other numbers (`$1,234.50` and `$980.00`, `3 admitted, 1
evicted` and `5 admitted, 0 evicted`, `2h30m / 5h` and `1h / 4h`): each number becomes `+246.50 (-20.6%)` in the
sentence's place. Values of different shapes, or with no number, have no difference (an empty cell).
"""

from __future__ import annotations

import re

from kubetwin.k8s.units import parse_duration
from kubetwin.report.axes import human_duration

__all__ = ["difference"]

# A duration as the page writes it (report.axes.human_duration's 2h30m, 45m, 1d2h, 0.5s; the headline rows'
# k8s.units.short_duration, 2h0m1s) or a number ($, thousands
# separators, decimals; a trailing % is kept as the number's unit).
_DURATION = r"(?:\d+d)?(?:\d+h)?(?:\d+m(?!i))?(?:\d+(?:\.\d+)?s)?"
_TOKEN = re.compile(rf"(?<![\w.])(?P<dur>(?=\d+(?:\.\d+)?[dhms])(?:{_DURATION}))(?![\w])"
                    r"|(?<![\w.])(?P<num>-?\$?\d[\d,]*(?:\.\d+)?)(?P<pct>%)?")


def _parts(text: str) -> tuple[str, list[tuple[str, float, str]]]:
    """The value's sentence with each number replaced by a NUL placeholder, and the numbers: (kind, value, its
    text)."""
    nums: list[tuple[str, float, str]] = []

    def take(m: re.Match[str]) -> str:
        if m.group("dur"):
            nums.append(("dur", parse_duration(m.group("dur")), m.group("dur")))
        else:
            raw = m.group("num")
            nums.append(("pct" if m.group("pct") else "usd" if "$" in raw else "num",
                         float(raw.replace("$", "").replace(",", "")), raw))
        return "\0"

    return _TOKEN.sub(take, text), nums


def _decimals(raw: str) -> int:
    return len(raw.split(".")[1]) if "." in raw else 0


def _delta(kind: str, a: float, b: float, ra: str, rb: str) -> str:
    d = b - a
    if kind == "dur":
        absolute = ("+" if d > 0 else "") + human_duration(d) if d else "0s"
    else:
        places = max(_decimals(ra.lstrip("-$")), _decimals(rb.lstrip("-$")))
        grouped = "," in ra + rb or kind == "usd"
        body = f"{abs(d):,.{places}f}" if grouped else f"{abs(d):.{places}f}"
        shown_nonzero = float(body.replace(",", "")) != 0  # a difference that rounds to 0 has no sign
        sign = "" if not shown_nonzero else "-" if d < 0 else "+"
        absolute = f"{sign}{'$' if kind == 'usd' else ''}{body}{' pp' if kind == 'pct' else ''}"
    if a == 0:
        return absolute if b == 0 else f"{absolute} (new)"
    return f"{absolute} ({100 * d / abs(a):+.1f}%)"


def difference(a: str | None, b: str | None) -> str:
    """B's value against A's, number by number (empty when the two do not compare)."""
    if a is None or b is None:
        return ""
    ta, na = _parts(a)
    tb, nb = _parts(b)
    if not na or ta != tb or [k for k, _, _ in na] != [k for k, _, _ in nb]:
        return ""
    out = ta
    for (kind, va, ra), (_, vb, rb) in zip(na, nb, strict=True):
        out = out.replace("\0", _delta(kind, va, vb, ra, rb), 1)
    return out

"""The difference column of `kubetwin report A B` (issue 35, charts 5): each headline number of B against A's,
absolute and in percent, read back from the two rows' text so every headline row (report.headline) gets one.

Two values compare when they say the same thing with other numbers (`$1,234.50` and `$980.00`, `3 admitted, 1
evicted` and `5 admitted, 0 evicted`, `2h30m / 5h` and `1h / 4h`, `slowdown x1.25` and `slowdown x1.40`, `120 ms`
and `1.20 s`): each number becomes `+246.50 (-20.6%)` in the sentence's place. A row of slots (`p50 / p90 / p99`)
compares slot by slot. What does not compare says why (`n/a: different units`), never an empty cell.
"""

from __future__ import annotations

import re

from kubetwin.k8s.units import parse_duration, short_duration

__all__ = ["difference"]

# A duration as the page writes it (k8s.units.short_duration: 2h30m, 2h0m1s, 12.3s, 350ms; the serving rows' `120
# ms` and `1.20 s`), a factor (`x1.25`, the GPU-sharing slowdown) or a number ($, thousands separators, decimals;
# a trailing % or ` %` makes it a percentage, whose difference is in percentage points).
_DURATION = r"(?:\d+(?:\.\d+)?ms|(?:\d+d)?(?:\d+h)?(?:\d+m(?![is]))?(?:\d+(?:\.\d+)?s)?)"
_TOKEN = re.compile(r"(?<![\w.])(?P<sec>\d+(?:\.\d+)?) (?P<sunit>ms|s)(?![\w])"
                    rf"|(?<![\w.])(?P<dur>(?=\d+(?:\.\d+)?(?:ms|[dhms]))(?:{_DURATION}))(?![\w])"
                    r"|(?<![\w.])x(?P<factor>\d+(?:\.\d+)?)(?![\w])"
                    r"|(?<![\w.])(?P<num>-?\$?\d[\d,]*(?:\.\d+)?)(?P<pct> ?%)?")
_FIRST, _THIS = "the first run", "this run"  # the column is this run's value less the first run's
_KINDS = {"dur": "a duration", "factor": "a factor", "usd": "US dollars", "pct": "a percentage", "num": "a count"}


def _parts(text: str) -> tuple[str, list[tuple[str, float, str]]]:
    """The value's sentence with each number replaced by a NUL placeholder, and the numbers: (kind, value, its
    text)."""
    nums: list[tuple[str, float, str]] = []

    def take(m: re.Match[str]) -> str:
        if m.group("sec"):
            nums.append(("dur", parse_duration(m.group("sec") + m.group("sunit")), m.group(0)))
        elif m.group("dur"):
            nums.append(("dur", parse_duration(m.group("dur")), m.group("dur")))
        elif m.group("factor"):
            nums.append(("factor", float(m.group("factor")), m.group("factor")))
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
        absolute = ("+" if d > 0 else "") + short_duration(d) if d else "0s"
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


def _singular(sentence: str) -> str:
    return re.sub(r"(\0 \w+?)s\b", r"\1", sentence)


def _why_not(a: str, b: str, na: list, nb: list, ta: str, tb: str) -> str | None:
    """Why two values do not compare (None when they do)."""
    if not na and not nb:
        if a.strip() == b.strip():
            return "n/a: no value" if a.strip() in ("", "-") else "same"
        return "n/a: not numbers"
    if not na or not nb:
        return f"n/a: no value in {_FIRST if not na else _THIS}"
    if len(na) != len(nb):
        return "n/a: not the same quantities"
    kinds_a, kinds_b = [k for k, _, _ in na], [k for k, _, _ in nb]
    if kinds_a != kinds_b:
        ka, kb = next((x, y) for x, y in zip(kinds_a, kinds_b, strict=True) if x != y)
        return f"n/a: different units ({_KINDS[ka]}, {_KINDS[kb]})"
    if _singular(ta) != _singular(tb):  # "1 Workload waited" and "2 Workloads waited" say the same
        return "n/a: not the same quantity"
    return None


def _compare(a: str, b: str) -> str:
    ta, na = _parts(a)
    tb, nb = _parts(b)
    why = _why_not(a, b, na, nb, ta, tb)
    if why is not None:
        return why
    out = tb
    for (kind, va, ra), (_, vb, rb) in zip(na, nb, strict=True):
        out = out.replace("\0", _delta(kind, va, vb, ra, rb), 1)
    return out


def difference(a: str | None, b: str | None) -> str:
    """B's value against A's (the first run's), number by number; where they do not compare, `n/a:` and why."""
    if a is None or b is None:
        return "n/a: not in " + (_FIRST if a is None else _THIS) if (a, b) != (None, None) else "n/a: in neither"
    whole = _compare(a, b)
    sa, sb = a.split(" / "), b.split(" / ")
    if not whole.startswith("n/a") or len(sa) < 2 or len(sa) != len(sb):
        return whole
    # slots (p50 / p90 / p99, on-demand / Spot): each its own difference, the ones that do not compare said so
    return " / ".join(_compare(x, y) for x, y in zip(sa, sb, strict=True))

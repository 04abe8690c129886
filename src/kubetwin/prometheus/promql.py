"""A PromQL subset evaluated over the twin's metrics, so a KEDA prometheus trigger runs the user's own query.

Parsing is promql-parser (PyPI `promql-parser`, the Rust crate's AST), so the grammar, precedence and parse errors
are the real language's; this module only evaluates. Semantics follow prometheus/prometheus promql/engine.go and
functions.go: instant selectors take the newest sample within the 5-minute lookback (`--query.lookback-delta`);
range selectors take samples in (t - range, t] (left-open since Prometheus 3.0); `rate`/`increase` extrapolate as
`extrapolatedRate` does, with counter resets; arithmetic drops `__name__`; comparisons filter unless `bool`.
Anything outside the subset raises `PromQLError` naming the construct, never a silent wrong number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Protocol

import promql_parser as pp

from kubetwin.prometheus.functions import bucket_quantile, div, extrapolated_rate, over_time
from kubetwin.prometheus.staleness import LOOKBACK, is_stale, newest

Labels = dict[str, str]
Series = tuple[Labels, list[tuple[float, float]]]
Sample = tuple[Labels, float]
Value = float | list[Sample]  # a scalar or an instant vector


class MetricsProvider(Protocol):
    """Where series come from: every series of metric `name` with its samples (t, value) in [start, end], sorted by
    time. Labels exclude `__name__`. A series whose target is gone ends with a staleness marker (STALE_NAN), as in
    Prometheus; a provider may also simply stop its samples."""

    def series(self, name: str, start: float, end: float) -> list[Series]: ...


class PromQLError(ValueError):
    """A query the twin cannot evaluate (parse error, or a construct outside the supported subset)."""


def _key(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _drop_name(labels: Labels) -> Labels:
    return {k: v for k, v in labels.items() if k != "__name__"}


def _mod(a: float, b: float) -> float:
    return math.nan if b == 0 else math.fmod(a, b)  # Go math.Mod


def _pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except (OverflowError, ValueError):
        return math.inf if a > 0 else math.nan


ARITH: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": div, "%": _mod, "^": _pow}
COMPARE: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b}


def _matches(m: pp.Matcher, value: str) -> bool:
    """Label matchers; regexes are fully anchored as in Prometheus (labels.NewFastRegexMatcher)."""
    if m.op == pp.MatchOp.Equal:
        return value == m.value
    if m.op == pp.MatchOp.NotEqual:
        return value != m.value
    hit = re.fullmatch(m.value, value, re.DOTALL) is not None
    return hit if m.op == pp.MatchOp.Re else not hit


RANGE_FUNCS = {"rate", "increase", "delta", "avg_over_time", "max_over_time", "min_over_time", "sum_over_time",
               "count_over_time", "last_over_time"}
AGGREGATIONS = {"sum", "avg", "max", "min", "count"}


class Evaluator:
    """Evaluates instant queries at a time over one provider. Stateless between queries: the twin is deterministic
    because the provider is."""

    def __init__(self, provider: MetricsProvider) -> None:
        self.provider = provider

    def query(self, text: str, t: float) -> Value:
        """Parse and evaluate `text` at time t: a float for a scalar result, else a list of (labels, value) sorted
        by labels."""
        try:
            expr = pp.parse(text)
        except (ValueError, TypeError) as e:
            raise PromQLError(f"parse error: {e}") from None
        out = self._eval(expr, t)
        if isinstance(out, list):
            return sorted(out, key=lambda s: _key(s[0]))
        if isinstance(out, str):
            raise PromQLError("a string result is not supported")
        return out

    # -- selectors ----------------------------------------------------------------------------------
    def _select(self, vs: pp.VectorSelector, start: float, end: float) -> list[Series]:
        if vs.at is not None:
            raise PromQLError("the @ modifier is not supported")
        if vs.matchers.or_matchers:
            raise PromQLError("'or' inside label matchers is not supported")
        name = vs.name
        matchers = list(vs.matchers.matchers)
        if not name:
            named = [m for m in matchers if m.name == "__name__" and m.op == pp.MatchOp.Equal]
            if not named:
                raise PromQLError("a selector without a metric name is not supported")
            name = named[0].value
        offset = vs.offset.total_seconds() if vs.offset is not None else 0.0
        out = []
        for labels, samples in self.provider.series(name, start - offset, end - offset):
            full = {**labels, "__name__": name}
            if all(_matches(m, full.get(m.name, "")) for m in matchers):
                out.append((full, [(ts + offset, v) for ts, v in samples]))
        return out

    def _instant(self, vs: pp.VectorSelector, t: float) -> list[Sample]:
        out = []
        for labels, samples in self._select(vs, t - LOOKBACK, t):
            v = newest(samples, t)
            if v is not None:
                out.append((labels, v))
        return out

    def _range(self, expr: object, t: float) -> tuple[list[Series], float]:
        if isinstance(expr, pp.SubqueryExpr):
            raise PromQLError("subqueries are not supported")
        if not isinstance(expr, pp.MatrixSelector):
            raise PromQLError(f"expected a range vector, got {type(expr).__name__}")
        rng = expr.range.total_seconds()
        series = self._select(expr.vector_selector, t - rng, t)
        return [(labels, [(ts, v) for ts, v in s if t - rng < ts <= t and not is_stale(v)])
                for labels, s in series], rng

    # -- evaluation ---------------------------------------------------------------------------------
    def _eval(self, expr: object, t: float) -> Value | str:
        if isinstance(expr, pp.NumberLiteral):
            return float(expr.val)
        if isinstance(expr, pp.StringLiteral):
            return str(expr.val)
        if isinstance(expr, pp.ParenExpr):
            return self._eval(expr.expr, t)
        if isinstance(expr, pp.VectorSelector):
            return self._instant(expr, t)
        if isinstance(expr, pp.UnaryExpr):
            v = self._eval(expr.expr, t)
            if isinstance(v, list):
                return [(_drop_name(lb), -x) for lb, x in v]
            return -float(v)  # type: ignore[arg-type]
        if isinstance(expr, pp.AggregateExpr):
            return self._aggregate(expr, t)
        if isinstance(expr, pp.Call):
            return self._call(expr, t)
        if isinstance(expr, pp.BinaryExpr):
            return self._binary(expr, t)
        if isinstance(expr, pp.MatrixSelector):
            raise PromQLError("a range vector cannot be the query's result; wrap it in a function such as rate()")
        if isinstance(expr, pp.SubqueryExpr):
            raise PromQLError("subqueries are not supported")
        raise PromQLError(f"{type(expr).__name__} is not supported")

    def _vector(self, expr: object, t: float, what: str) -> list[Sample]:
        v = self._eval(expr, t)
        if not isinstance(v, list):
            raise PromQLError(f"{what} expects an instant vector")
        return v

    def _aggregate(self, expr: pp.AggregateExpr, t: float) -> list[Sample]:
        op = str(expr.op)
        if op not in AGGREGATIONS:
            raise PromQLError(f"aggregation {op} is not supported (supported: {', '.join(sorted(AGGREGATIONS))})")
        vec = self._vector(expr.expr, t, op)
        mod = expr.modifier
        groups: dict[tuple, tuple[Labels, list[float]]] = {}
        for labels, v in vec:
            if mod is None:
                out: Labels = {}
            elif mod.type == pp.AggModifierType.By:
                out = {k: labels[k] for k in mod.labels if k in labels and k != "__name__"}
            else:
                out = {k: x for k, x in _drop_name(labels).items() if k not in set(mod.labels)}
            groups.setdefault(_key(out), (out, []))[1].append(v)
        fns: dict[str, Callable[[list[float]], float]] = {
            "sum": math.fsum, "avg": lambda xs: math.fsum(xs) / len(xs), "count": lambda xs: float(len(xs)),
            "max": lambda xs: max((x for x in xs if not math.isnan(x)), default=math.nan),
            "min": lambda xs: min((x for x in xs if not math.isnan(x)), default=math.nan)}
        return [(labels, fns[op](vals)) for labels, vals in groups.values()]

    def _call(self, expr: pp.Call, t: float) -> Value:
        name = expr.func.name
        args = list(expr.args)
        if name in RANGE_FUNCS:
            series, rng = self._range(args[0], t)
            out = []
            for labels, samples in series:
                if name in ("rate", "increase", "delta"):
                    v = extrapolated_rate(samples, t - rng, t, rng, name != "delta", name == "rate")
                else:
                    v = over_time(name)(samples) if samples else None
                if v is not None:
                    out.append((_drop_name(labels) if name != "last_over_time" else labels, v))
            return out
        if name == "histogram_quantile":
            q = self._eval(args[0], t)
            if isinstance(q, list | str):
                raise PromQLError("histogram_quantile expects a scalar quantile")
            return _histogram_quantile(float(q), self._vector(args[1], t, "histogram_quantile"))
        if name == "vector":
            return [({}, float(self._eval(args[0], t)))]  # type: ignore[arg-type]
        if name == "scalar":
            vec = self._vector(args[0], t, "scalar")
            return vec[0][1] if len(vec) == 1 else math.nan
        if name == "time":
            return t
        if name in ("abs", "ceil", "floor", "sqrt", "exp", "ln"):
            f: Callable[[float], float] = {"abs": abs, "ceil": math.ceil, "floor": math.floor,
                                           "sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan, "exp": math.exp,
                                           "ln": lambda x: math.log(x) if x > 0 else (-math.inf if x == 0 else
                                                                                      math.nan)}[name]
            return [(_drop_name(lb), float(f(v))) for lb, v in self._vector(args[0], t, name)]
        if name in ("clamp_min", "clamp_max"):
            bound = float(self._eval(args[1], t))  # type: ignore[arg-type]
            pick = max if name == "clamp_min" else min
            return [(_drop_name(lb), pick(v, bound)) for lb, v in self._vector(args[0], t, name)]
        raise PromQLError(f"function {name}() is not supported")

    def _binary(self, expr: pp.BinaryExpr, t: float) -> Value:
        op = str(expr.op)
        mod = expr.modifier
        return_bool = bool(mod is not None and mod.return_bool)
        lhs, rhs = self._eval(expr.lhs, t), self._eval(expr.rhs, t)
        if isinstance(lhs, str) or isinstance(rhs, str):
            raise PromQLError("string operands are not supported")
        if op in ("and", "or", "unless"):
            if not isinstance(lhs, list) or not isinstance(rhs, list):
                raise PromQLError(f"set operator {op} needs vectors on both sides")
            return _set_op(op, lhs, rhs, mod)
        if op not in ARITH and op not in COMPARE:
            raise PromQLError(f"binary operator {op} is not supported")

        def apply(a: float, b: float) -> float | None:
            if op in ARITH:
                return ARITH[op](a, b)
            ok = COMPARE[op](a, b)
            return float(ok) if return_bool else (a if ok else None)

        if not isinstance(lhs, list) and not isinstance(rhs, list):
            r = apply(lhs, rhs)
            return float(r) if r is not None else 0.0  # scalar comparisons need `bool` (the parser enforces it)
        if isinstance(lhs, list) and isinstance(rhs, list):
            return _vector_vector(op, lhs, rhs, mod, apply)
        out = []
        keep_name = op in COMPARE and not return_bool
        for labels, v in (lhs if isinstance(lhs, list) else rhs):  # type: ignore[union-attr]
            a, b = (v, rhs) if isinstance(lhs, list) else (lhs, v)
            r = apply(a, b)  # type: ignore[arg-type]
            if r is not None:
                if op in COMPARE and not return_bool:
                    r = v  # a filtering comparison keeps the vector's own value
                out.append((labels if keep_name else _drop_name(labels), r))
        return out


def _signature(labels: Labels, mod: pp.BinModifier | None) -> tuple:
    """The labels a vector match compares: all but __name__, or only `on(...)`, or all but `ignoring(...)`."""
    m = mod.matching if mod is not None else None
    base = _drop_name(labels)
    if m is None:
        return _key(base)
    if m.type == pp.LabelModifierType.Include:
        return _key({k: v for k, v in base.items() if k in set(m.labels)})
    return _key({k: v for k, v in base.items() if k not in set(m.labels)})


def _vector_vector(op: str, lhs: list[Sample], rhs: list[Sample], mod: pp.BinModifier | None,
                   apply: Callable[[float, float], float | None]) -> list[Sample]:
    """One-to-one vector matching (group_left/group_right are outside the subset)."""
    if mod is not None and mod.card != pp.VectorMatchCardinality.OneToOne:
        raise PromQLError("group_left/group_right (many-to-one matching) is not supported")
    right: dict[tuple, float] = {}
    for labels, v in rhs:
        sig = _signature(labels, mod)
        if sig in right:
            raise PromQLError("found duplicate series for the match group on the right hand-side of the operation")
        right[sig] = v
    out, seen = [], set()
    for labels, v in lhs:
        sig = _signature(labels, mod)
        if sig not in right:
            continue
        if sig in seen:
            raise PromQLError("found duplicate series for the match group on the left hand-side of the operation")
        seen.add(sig)
        r = apply(v, right[sig])
        if r is None:
            continue
        m = mod.matching if mod is not None else None
        if op in COMPARE and not (mod is not None and mod.return_bool):
            result_labels = labels
        elif m is not None and m.type == pp.LabelModifierType.Include:
            result_labels = {k: x for k, x in labels.items() if k in set(m.labels)}
        else:
            result_labels = _drop_name(labels)
        out.append((result_labels, r))
    return out


def _set_op(op: str, lhs: list[Sample], rhs: list[Sample], mod: pp.BinModifier | None) -> list[Sample]:
    rsigs = {_signature(lb, mod) for lb, _ in rhs}
    if op == "and":
        return [s for s in lhs if _signature(s[0], mod) in rsigs]
    if op == "unless":
        return [s for s in lhs if _signature(s[0], mod) not in rsigs]
    lsigs = {_signature(lb, mod) for lb, _ in lhs}
    return lhs + [s for s in rhs if _signature(s[0], mod) not in lsigs]


def _histogram_quantile(q: float, vec: list[Sample]) -> list[Sample]:
    """promql/quantile.go bucketQuantile over classic `le` buckets, one result per label set without `le`."""
    groups: dict[tuple, tuple[Labels, list[tuple[float, float]]]] = {}
    for labels, v in vec:
        if "le" not in labels:
            continue
        try:
            le = float(labels["le"])
        except ValueError:
            continue
        rest = {k: x for k, x in _drop_name(labels).items() if k != "le"}
        groups.setdefault(_key(rest), (rest, []))[1].append((le, v))
    out = []
    for labels, buckets in groups.values():
        out.append((labels, bucket_quantile(q, sorted(buckets))))
    return out

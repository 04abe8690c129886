"""Prometheus' text exposition format (https://prometheus.io/docs/instrumenting/exposition_formats/), the one
writer of every exporter the twin simulates: the gateway's and vLLM's series (serving.observe.promsource), the DCGM
exporter (workloads.dcgm) and Kueue's registry (kueue/metrics.py, whose metric types come from prometheus_client):
`# HELP` and `# TYPE` lines, then `name{labels} value [timestamp_ms]`.

Formatted as client_golang's expfmt writes it (prometheus/common expfmt/text_create.go), since Kueue, the DCGM exporter
and the endpoint picker are Go programs: values by strconv.FormatFloat(v, 'g', -1, 64) (`6`, `2.5`, `1e+06`, `+Inf`),
label values and HELP escaped, and a registry's families gathered in name order with series in label order."""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from prometheus_client.registry import Collector


def format_value(v: Any) -> str:
    """strconv.FormatFloat(v, 'g', -1, 64): the shortest digits that read back as v, with an exponent when the
    decimal exponent is below -4 or at least 6 (Go's %g with the shortest precision)."""
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits, exponent = Decimal(repr(f)).as_tuple()  # repr: the shortest round-trip digits, as Go's
    ds = "".join(map(str, digits)).rstrip("0")
    dp = len(digits) + int(exponent)  # where the decimal point goes, counted from the first digit
    exp = dp - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{ds}"
    if dp >= len(ds):
        return f"{neg}{ds}{'0' * (dp - len(ds))}"
    return f"{neg}{ds[:dp]}.{ds[dp:]}"


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_labels(labels: Iterable[tuple[str, Any]]) -> str:
    """label="value" pairs in the order given (callers sort them, or keep the exporter's own order), values escaped
    as expfmt escapes them (backslash, double quote, newline)."""
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels)


def sample(name: str, labels: Iterable[tuple[str, Any]], value: Any, timestamp_ms: int | None = None) -> str:
    line = f"{name}{{{format_labels(labels)}}} {format_value(value)}"
    return line if timestamp_ms is None else f"{line} {timestamp_ms}"


def header(name: str, kind: str, help_text: str | None = None) -> list[str]:
    """The family's `# HELP` (when it has one) and `# TYPE` lines."""
    escaped = None if help_text is None else help_text.replace("\\", "\\\\").replace("\n", "\\n")
    return ([f"# HELP {name} {escaped}"] if escaped is not None else []) + [f"# TYPE {name} {kind}"]


def text(lines: list[str]) -> str:
    """The exposition: one sample or comment per line, newline-terminated (empty when there is nothing)."""
    return "\n".join(lines) + "\n" if lines else ""


_SUFFIX_ORDER = {"_bucket": 0, "_sum": 1, "_count": 2}  # a Go histogram's lines: buckets, then _sum and _count


def registry_text(registry: Collector) -> str:
    """A prometheus_client registry as client_golang's Gather + expfmt write it: families by name; in a family, one
    series per label set (sorted by label values in label-name order), a histogram's buckets then _sum, _count."""
    lines: list[str] = []
    for family in sorted(registry.collect(), key=lambda f: f.name):
        name = f"{family.name}_total" if family.type == "counter" else family.name
        if not family.samples:
            continue
        lines += header(name, family.type, family.documentation)
        by_series: dict[tuple[tuple[str, str], ...], list[tuple[int, int, str]]] = {}
        for i, s in enumerate(family.samples):
            if s.name == f"{family.name}_created":  # OpenMetrics' wall-clock series; the Go text format has none
                continue
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            labels = [*key, ("le", format_value(float(s.labels["le"])))] if "le" in s.labels else list(key)
            order = _SUFFIX_ORDER.get(s.name[len(family.name):], 0)
            by_series.setdefault(key, []).append((order, i, sample(s.name, labels, s.value)))
        for key in sorted(by_series):
            lines += [line for _, _, line in sorted(by_series[key])]
    return text(lines)

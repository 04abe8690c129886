"""Prometheus' text exposition format (https://prometheus.io/docs/instrumenting/exposition_formats/), written one
way for every exporter the twin simulates but does not run through prometheus_client (the gateway's and vLLM's
series in serving.promsource, the DCGM exporter in workloads.dcgm): `# HELP` and `# TYPE` lines, then
`name{labels} value [timestamp_ms]`. Kueue's series come from prometheus_client's own registry (kueue/metrics.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def format_value(v: Any) -> str:
    """An integral value without a decimal point (as the Go client prints counters), else Python's shortest repr."""
    f = float(v)
    return str(int(f)) if f.is_integer() else repr(f)


def format_labels(labels: Iterable[tuple[str, Any]]) -> str:
    """label="value" pairs in the order given (callers sort them, or keep the exporter's own order)."""
    return ",".join(f'{k}="{v}"' for k, v in labels)


def sample(name: str, labels: Iterable[tuple[str, Any]], value: Any, timestamp_ms: int | None = None) -> str:
    line = f"{name}{{{format_labels(labels)}}} {format_value(value)}"
    return line if timestamp_ms is None else f"{line} {timestamp_ms}"


def header(name: str, kind: str, help_text: str | None = None) -> list[str]:
    """The family's `# HELP` (when it has one) and `# TYPE` lines."""
    return ([f"# HELP {name} {help_text}"] if help_text is not None else []) + [f"# TYPE {name} {kind}"]


def text(lines: list[str]) -> str:
    """The exposition: one sample or comment per line, newline-terminated (empty when there is nothing)."""
    return "\n".join(lines) + "\n" if lines else ""

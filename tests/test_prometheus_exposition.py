"""The one Prometheus text writer (prometheus/exposition.py), as client_golang's expfmt writes it: Kueue, the DCGM
exporter and the endpoint picker are Go programs, so their /metrics print values with strconv.FormatFloat(v, 'g',
-1, 64), families sorted by name, and each family's series sorted by their label values."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.parser import text_string_to_metric_families

from kubetwin.prometheus import exposition


@pytest.mark.parametrize(("value", "text"), [
    (6.0, "6"), (0.0, "0"), (2.5, "2.5"), (0.1, "0.1"), (123456.0, "123456"), (1e6, "1e+06"),
    (1234567.0, "1.234567e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"), (-3.0, "-3"), (1.5e-7, "1.5e-07"),
    (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN"), (10240.0, "10240"), (3, "3")])
def test_values_print_as_go_formats_float64(value, text):
    # Go: fmt.Println(1e6) prints 1e+06; strconv's %g switches to an exponent at 1e+06 and below 1e-04.
    assert exposition.format_value(value) == text


def test_label_values_and_help_are_escaped_as_expfmt_does():
    assert exposition.sample("m", [("path", 'a"b\\c\nd')], 1) == 'm{path="a\\"b\\\\c\\nd"} 1'
    assert exposition.header("m", "gauge", "line1\nline2 \\") == ["# HELP m line1\\nline2 \\\\", "# TYPE m gauge"]


def test_registry_written_as_client_golang_gathers_it():
    r = CollectorRegistry()
    c = Counter("kueue_admitted_workloads", "admitted", ["cluster_queue"], registry=r)
    h = Histogram("kueue_admission_wait_time_seconds", "wait", ["cluster_queue"], buckets=(1.0, 2.5), registry=r)
    c.labels("research").inc(6)
    c.labels("prod").inc()
    h.labels("prod").observe(2.0)
    text = exposition.registry_text(r)
    assert text.splitlines() == [
        "# HELP kueue_admission_wait_time_seconds wait",
        "# TYPE kueue_admission_wait_time_seconds histogram",
        'kueue_admission_wait_time_seconds_bucket{cluster_queue="prod",le="1"} 0',
        'kueue_admission_wait_time_seconds_bucket{cluster_queue="prod",le="2.5"} 1',
        'kueue_admission_wait_time_seconds_bucket{cluster_queue="prod",le="+Inf"} 1',
        'kueue_admission_wait_time_seconds_sum{cluster_queue="prod"} 2',
        'kueue_admission_wait_time_seconds_count{cluster_queue="prod"} 1',
        "# HELP kueue_admitted_workloads_total admitted",
        "# TYPE kueue_admitted_workloads_total counter",
        'kueue_admitted_workloads_total{cluster_queue="prod"} 1',
        'kueue_admitted_workloads_total{cluster_queue="research"} 6',
    ]
    parsed = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
              if s.labels.get("cluster_queue") == "research"}
    assert parsed == {"kueue_admitted_workloads_total": 6.0}  # Prometheus' own parser reads it back

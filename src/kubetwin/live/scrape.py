"""Prometheus' text exposition format read back: what the live tools scrape from vLLM, the emulator and the
gateway (prometheus_client's parser, the reference Python implementation of the format)."""

from __future__ import annotations


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample as (sample name, labels, value); counters keep their `_total` sample names."""
    from prometheus_client.parser import text_string_to_metric_families

    return [(s.name, dict(s.labels), float(s.value)) for fam in text_string_to_metric_families(text)
            for s in fam.samples]

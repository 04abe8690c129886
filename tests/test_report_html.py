"""report.html: deterministic, self-contained, mentions pools and jobs."""

from __future__ import annotations

import re
from pathlib import Path

from kubetwin.report.html import write_report


def _inputs() -> tuple[dict, dict, list[dict]]:
    summary = {
        "duration_seconds": 7200.0,
        "pods": {"by_phase": {"Succeeded": 2, "Pending": 1}, "pending_seconds": {"p50": 30.0, "p99": 600.0}},
        "gpu_allocation": {"h100-pool": {"mean_pct": 62.5}, "a10-pool": {"mean_pct": 10.0}},
        "cost": {"total_usd": 123.45, "by_pool": {"h100-pool": 100.0, "a10-pool": 23.45}},
    }
    timeseries = {
        "t": [0.0, 3600.0, 7200.0],
        "gpu_allocation_pct": {"h100-pool": [0.0, 75.0, 100.0], "a10-pool": [0.0, 12.5, 25.0]},
        "pending_pods": [0, 3, 1],
    }
    jobs = [
        {"name": "train-llm", "namespace": "ml", "created": 0.0, "start": 60.0, "end": 3000.0, "status": "Complete"},
        {"name": "eval-run", "namespace": "ml", "created": 100.0, "start": 900.0, "end": None, "status": "Running"},
        {"name": "queued-job", "namespace": "batch", "created": 500.0, "start": None, "end": None,
         "status": "Pending"},
    ]
    return summary, timeseries, jobs


def test_report_is_deterministic_and_self_contained(tmp_path: Path) -> None:
    summary, timeseries, jobs = _inputs()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    pa = write_report(a, summary, timeseries, jobs)
    pb = write_report(b, summary, timeseries, jobs)
    assert pa == a / "report.html"
    assert pa.read_bytes() == pb.read_bytes()
    text = pa.read_text(encoding="utf-8")
    assert "kubetwin run report" in text
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", text, flags=re.S)
    assert sum("Plotly.newPlot" in s for s in scripts) == 5  # allocation, pending, fragmentation, cost, jobs
    assert "Fragmented GPUs" in text
    bundles = [s for s in scripts if len(s) > 1_000_000]
    assert len(bundles) == 1  # plotly.js inlined exactly once
    assert not re.search(r"<script[^>]*\bsrc\s*=", text)
    for name in ("h100-pool", "a10-pool", "train-llm", "eval-run", "queued-job"):
        assert name in text
    assert "<table>" in text and "123.45" in text

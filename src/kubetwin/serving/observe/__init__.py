"""What a run shows of serving, read from the data plane: `metrics` (per-pool time series, summary.json's serving
section, requests.csv), `results` (latencies, percentiles, SLO attainment, the CSV), `promsource` (the twin's
Prometheus over vLLM and EPP series) and `histograms` (vLLM's latency histograms)."""

"""The twin's Prometheus query side: PromQL evaluated over any MetricsProvider (`promql` on promql-parser, its functions
in `functions`, staleness markers and the 5-minute lookback in `staleness`, the series stores' Select in `storage`).
The HPA and KEDA (autoscaler) and the serving data plane's scraped series (serving.observe.promsource) meet here, so
neither imports the other."""

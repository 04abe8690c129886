"""LLM serving, in sub-packages that import each other without cycles (pyproject.toml's import-linter contract):
`engine` (one model server's vLLM V1 engine core), `modelserver` (servers recognized in pods, their flags, models,
performance, sizing and cold start), `traces` (RequestTraces as arrays), `router` (routing policies: the Gateway API
Inference Extension's endpoint picker and the routers users compare it with), `dataplane` (gateway, pools, arrivals,
the request log) and `observe` (time series, summary, Prometheus series, histograms); `types` holds the data they
share and `install` wires them into a run."""

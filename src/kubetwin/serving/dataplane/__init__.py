"""The serving data plane: `plane` (the gateway: pools, their routers and the engines of Ready model-server pods),
`pools` (a pool's endpoints and its router's snapshot), `arrivals` (a trace's arrival pump) and `requestlog` (the
record of every request, requests.csv's rows)."""

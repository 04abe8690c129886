"""The gateway's own Prometheus metrics, under the EPP's names where it has them (GIE pkg/epp/metrics/metrics.go:
subsystems inference_objective, inference_pool, inference_extension): request totals, errors and durations per
model, the pool gauges averaged over its endpoints, and the flow-control queue the twin's scale-to-zero example
queries (`inference_extension_flow_control_queue_size{inference_pool=...}`). Retries have no EPP name (Envoy counts
them), so they carry the twin's prefix, as do the two data-layer timings the EPP does not export: how old the scraped
metrics each pick scores are, and each /metrics scrape's round trip (named as GIE names its own histograms:
subsystem, then what, then the unit)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kubetwin.live.requestbody import STREAM_CUT

# GIE metrics.go request_duration_seconds buckets
DURATION_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45,
                    60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600)
# the data-layer timings: sub-millisecond scrapes on loopback to the 2 s staleness threshold, fine around the 50 ms
# refresh interval
AGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
               1.0, 2.0, 5.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


OTHER_MODEL = "other"  # the label value unconfigured model names fold into past the cap
DEFAULT_MAX_MODEL_LABELS = 1000


class ModelLabels:
    """Bounded model-name label values, as the EPP bounds them (llm-d/llm-d-router PR #1909, for issue #1625
    "epp/metrics: unbounded label cardinality from user-controlled inputs"; the EPP moved there from GIE): the
    model names the configuration names (objectives, InferenceModel/InferenceObjective manifests) are pinned and
    always their own label; other names, taken from request bodies, are admitted up to `cap` distinct values, and
    past it fold into "other". Admission is sticky: a name admitted once keeps its label."""

    def __init__(self, pinned: Iterable[str] = (), cap: int = DEFAULT_MAX_MODEL_LABELS) -> None:
        self.pinned = frozenset(pinned)
        self.cap = cap
        self.admitted: set[str] = set()

    def __call__(self, model: str) -> str:
        if model in self.pinned or model in self.admitted:
            return model
        if len(self.admitted) < self.cap:
            self.admitted.add(model)
            return model
        return OTHER_MODEL


class GatewayMetrics:
    def __init__(self, pool: str, pinned_models: Iterable[str] = (),
                 max_model_labels: int = DEFAULT_MAX_MODEL_LABELS) -> None:
        self.pool = pool
        self.model_label = ModelLabels(pinned_models, max_model_labels)
        self.registry = r = CollectorRegistry()
        ml = ["model_name", "target_model_name"]
        self.requests = Counter("inference_objective_request_total", "Counter of inference objective requests "
                                "broken out for each model and target model.", ml, registry=r)
        self.errors = Counter("inference_objective_request_error_total", "Counter of inference objective requests "
                              "errors broken out for each model and target model.", [*ml, "error_code"], registry=r)
        self.duration = Histogram("inference_objective_request_duration_seconds", "Inference objective response "
                                  "latency distribution in seconds for each model and target model.", ml,
                                  buckets=DURATION_BUCKETS, registry=r)
        self.running = Gauge("inference_objective_running_requests", "Inference objective number of running "
                             "requests in each model.", ["model_name"], registry=r)
        self.kv = Gauge("inference_pool_average_kv_cache_utilization", "The average kv cache utilization for an "
                        "inference server pool.", ["name"], registry=r).labels(pool)
        self.queue = Gauge("inference_pool_average_queue_size", "The average number of requests pending in the "
                           "model server queue.", ["name"], registry=r).labels(pool)
        self.ready = Gauge("inference_pool_ready_pods", "The number of ready pods in the inference server pool.",
                           ["name"], registry=r).labels(pool)
        self.held = Gauge("inference_extension_flow_control_queue_size", "Current number of requests being "
                          "actively managed by the EPP flow control layer.", ["inference_pool"],
                          registry=r).labels(pool)
        self.retries = Counter("kubetwin_gateway_upstream_retries_total", "Requests sent again to another endpoint "
                               "before their first byte (connect error, 5xx or timeout).", registry=r)
        self.metrics_age = Histogram("kubetwin_gateway_scheduler_metrics_age_seconds", "Age of the scraped metrics "
                                     "the scheduler scored each candidate endpoint on, at the pick: time since the "
                                     "response of that endpoint's last good /metrics scrape arrived (one observation "
                                     "per candidate per request).", buckets=AGE_BUCKETS, registry=r)
        self.scrape_duration = Histogram("kubetwin_gateway_metrics_scrape_duration_seconds", "Round trip of each "
                                         "good /metrics scrape of an endpoint, request written to response parsed.",
                                         buckets=AGE_BUCKETS, registry=r)

    def count_error(self, model: str, status: int) -> None:
        """A request that ended in error: its status as error_code when it is one (>= 400), else `stream_cut` (the
        response began with a success status and did not finish: the upstream closed or broke it mid-body), as
        loadgen names it; never a success status as an error code."""
        self.errors.labels(model, model, str(status) if status >= 400 else STREAM_CUT).inc()

    def count_refused(self, status: int) -> None:
        """A request refused before routing (a body that breaks live.requestbody's rules): counted with no model,
        as a request whose body names none."""
        self.requests.labels("", "").inc()
        self.errors.labels("", "", str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)

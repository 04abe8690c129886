"""Request accounting over a scenario that exercises every way a request can end: held at a pool with no endpoint
and released, expired after the TTL, failed when its pool is deleted while holding it, aborted when a pod goes
away, shed with 429, answered 404 (unknown adapter) and 400 (too long), and still in flight at the end. Every
request that arrived must appear in requests.csv exactly once."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from serving_builders import MODEL, h100_pool, inference_model, inference_pool, serving_scenario, trace, vllm

from kubetwin.api.loader import Manifest
from kubetwin.k8s.units import parse_duration
from kubetwin.prometheus.promql import Evaluator
from kubetwin.runner import RunResult, run
from kubetwin.serving.dataplane.requestlog import RequestLog
from kubetwin.serving.install import load_traces
from kubetwin.serving.observe.promsource import ServingMetricsSource
from kubetwin.sim.env import Environment

UNTIL = 20 * 60.0


def _objects() -> list[dict]:
    args = ["--model", MODEL, "--max-num-seqs", "4", "--max-model-len", "4096", "--enable-lora",
            "--lora-modules", "known=/adapters/known"]
    srv = vllm("srv", 1).args(args).obj()
    extra = copy.deepcopy(srv["spec"]["template"])  # a bare pod in the same pool, deleted mid-run
    extra["apiVersion"], extra["kind"] = "v1", "Pod"
    extra["metadata"] = {"name": "extra", "namespace": "default", "labels": {"app": "srv"},
                         "annotations": {"kubetwin.io/create-at": "1m", "kubetwin.io/delete-at": "11m"}}
    # never has an endpoint: holds, expires, then deleted
    cold = inference_pool("cold").app("nothing").request_ttl("3m").annotation("kubetwin.io/delete-at", "10m").obj()
    split = inference_model("split").model("split-model").obj()
    split["spec"]["targetModels"] = [{"name": "known", "weight": 1}, {"name": "unknown", "weight": 1}]
    return [serving_scenario("20m").obj(), h100_pool(3).obj(), srv, extra, inference_pool().obj(), cold, split,
            inference_model("batch").model("batch-model").criticality("Sheddable").obj(),
            trace("early").rate(2).duration("19m").prompt(2000).output(300).obj(),  # held during the cold start
            trace("shed").rate(4).duration("10m").start("8m").model("batch-model").prompt(2000).output(400).obj(),
            trace("lora").rate(1).duration("5m").start("8m").model("split-model").obj(),
            trace("long").rate(0.5).duration("2m").start("9m").prompt(5000).output(10).obj(),  # > max-model-len: 400
            trace("held").target("InferencePool", "cold").rate(1).duration("15m").start("2m").obj(),
            trace("shared").rate(3).duration("18m").start("1m").shared_prefix({
                "numGroups": 4, "promptsPerGroup": 400, "systemPromptLen": 1500, "questionLen": 100,
                "outputLen": 100}).obj()]


@pytest.fixture(scope="module")
def objs() -> list[dict]:
    return _objects()


@pytest.fixture(scope="module")
def result(objs: list[dict]) -> RunResult:
    return run(objects=objs)


def test_every_arrived_request_is_logged_exactly_once(objs: list[dict], result: RunResult) -> None:
    r = result
    df = r.requests()
    assert df.id.is_unique, df[df.id.duplicated(keep=False)].sort_values("id").head(10).to_string()
    arrays = load_traces([Manifest(o, "<object>", 0) for o in objs], 0, UNTIL)
    starts = {o["metadata"]["name"]: parse_duration(o["metadata"]["annotations"]["kubetwin.io/create-at"])
              for o in objs if o["kind"] == "RequestTrace"}
    for (ns, name), a in arrays.items():
        mine = df[df.trace == f"{ns}/{name}"]
        arrived = int(((a.arrival + starts[name]) < UNTIL).sum())
        assert len(mine) == arrived, (name, len(mine), arrived)
        assert sorted(mine.id) == list(range(int(mine.id.min()), int(mine.id.min()) + arrived)), name
    assert r.summary["serving"]["overall"]["requests"] == len(df) == r.summary["serving"]["requests_csv_rows"]
    statuses = set(df.status)
    assert {0, 200, 400, 404, 429, 503} <= statuses, statuses
    held = df[df.trace == "default/held"]
    reasons = set(held.reason)
    assert {"request timed out in queue", "no healthy upstream"} <= reasons, reasons
    reset = df[df.reason.fillna("").str.startswith("upstream connect error")]
    assert len(reset) and set(reset.pod) == {"extra"}  # the deleted pod's in-flight requests


def test_time_series_cover_every_sample_and_hit_rates_stay_rates(result: RunResult) -> None:
    """A pool deleted mid-run keeps a series as long as `t` (0s after its deletion); the per-interval prefix hit rate
    stays in [0, 1] when a pod (and its cache counters) leaves the pool."""
    ts = result.timeseries["serving"]
    n = len(ts["t"])
    assert set(ts["pools"]) == {"InferencePool/default/pool", "InferencePool/default/cold"}
    for key, series in ts["pools"].items():
        assert {len(v) for v in series.values()} == {n}, key
    cold = ts["pools"]["InferencePool/default/cold"]
    gone = [i for i, t in enumerate(ts["t"]) if t > 600]
    assert max(cold["held"]) > 0 and all(cold["held"][i] == 0 for i in gone)
    rates = ts["pools"]["InferencePool/default/pool"]["prefix_hit_rate"]
    assert all(0.0 <= x <= 1.0 for x in rates), rates
    # shared-prefix traffic flows all along: every interval hits, including the one in which `extra` left (11m)
    assert all(x > 0.3 for t, x in zip(ts["t"], rates, strict=True) if 540 <= t <= 1080), rates
    pools = result.summary["serving"]["pools"]
    assert pools["InferencePool/default/cold"]["requests"] > 0  # the deleted pool still has its section
    assert 0 < pools["InferencePool/default/pool"]["prefix_cache_hit_rate"] <= 1


def _fake_endpoint(name: str, finished: int) -> SimpleNamespace:
    engine = SimpleNamespace(advance=lambda t: None, num_waiting=2, num_running=1, kv_usage=0.5, block_size=16,
                             num_gpu_blocks=1000, max_loras=0, finished=finished, prompt_tokens_total=0,
                             generation_tokens_total=0, prefix_cache_queries=0, prefix_cache_hits=0,
                             num_preemptions=0)
    return SimpleNamespace(engine=engine, args=None, namespace="default", name=name, served_names=["m"])


def test_a_gone_pods_series_go_stale_at_the_next_scrape_as_in_prometheus() -> None:
    """Prometheus writes a staleness marker for every series a scrape no longer sees: an instant query stops
    returning the deleted pod's gauge at the next scrape (not 5 minutes later, the lookback), a range query still
    reads the samples it had before, and metrics.prom no longer lists it."""
    env = Environment()
    pool = SimpleNamespace(name="pool", namespace="default", endpoints=[], held={})
    plane = SimpleNamespace(endpoints={"a": _fake_endpoint("a", 0), "b": _fake_endpoint("b", 0)},
                            pools={"InferencePool/default/pool": pool}, log=RequestLog())
    src = ServingMetricsSource(plane, env)  # type: ignore[arg-type]
    env.after(31, lambda: plane.endpoints.pop("b"))  # b deleted between the scrapes at 30 s and 45 s
    env.run(50)
    q = Evaluator(src)
    assert q.query("count(vllm:num_requests_waiting)", 40) == [({}, 2.0)]
    assert q.query("count(vllm:num_requests_waiting)", 46) == [({}, 1.0)]  # was 2 until 5 minutes later
    assert q.query("count(count_over_time(vllm:num_requests_waiting[1m]))", 46) == [({}, 2.0)]
    assert 'pod="b"' not in src.exposition() and 'pod="a"' in src.exposition()

"""The live gateway, standalone mode: the twin's endpoint picker routing real HTTP traffic to fake OpenAI/vLLM
backends (tests/live_fakes.py), driven with the openai SDK streaming. Every wait is bounded."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "httpx", "openai")

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from gateway_harness import GatewayThread
from live_fakes import FakeFleet, Knobs

from kubetwin.live import requeststart
from kubetwin.live.gateway.config import GatewayConfig, load_config
from kubetwin.live.gateway.endpoints import from_manifests, parse_endpoint_lines
from kubetwin.live.gateway.scrape import Metrics, parse_vllm_metrics
from kubetwin.live.gateway.standalone import Framing

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "the quick brown fox jumps over the lazy dog " * 20


@pytest.fixture
def fleet() -> Iterator[FakeFleet]:
    f = FakeFleet()
    yield f
    f.close()


def start(tmp_path: Path, **kw) -> GatewayThread:
    kw.setdefault("listen", "127.0.0.1:0")
    kw.setdefault("adminListen", "127.0.0.1:0")
    kw.setdefault("accessLog", str(tmp_path / "access.log"))
    kw.setdefault("metricsStalenessThreshold", "500ms")
    return GatewayThread(GatewayConfig(**kw))


def client(gt: GatewayThread, timeout: float = 10.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=gt.url + "/v1", api_key="none", timeout=timeout, max_retries=0)


def stream_text(c: openai.OpenAI, prompt: str = PROMPT, headers: dict | None = None, n: int = 4) -> str:
    s = c.completions.create(model="fake", prompt=prompt, max_tokens=n, stream=True, extra_headers=headers or {})
    return "".join(ch.choices[0].text for ch in s)


def access(tmp_path: Path) -> list[dict]:
    p = tmp_path / "access.log"
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def test_traffic_lands_only_on_picked_endpoints(tmp_path: Path, fleet: FakeFleet) -> None:
    bs = [fleet.add(Knobs(tokens=4)) for _ in range(3)]
    gt = start(tmp_path, endpoints=[b.address for b in bs])
    before = time.time()
    try:
        c = client(gt)
        served = []
        for i in range(24):
            raw = c.completions.with_raw_response.create(model="fake", prompt=f"{i} " + PROMPT, max_tokens=4,
                                                         stream=True, extra_headers={"x-request-id": f"r{i}"})
            served.append(raw.headers["x-gateway-destination-endpoint-served"])
            assert "".join(ch.choices[0].text for ch in raw.parse()) == "w0 w1 w2 w3"
        chat = c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}], stream=True)
        assert "".join(ch.choices[0].delta.content or "" for ch in chat) == "w0 w1 w2 w3"
    finally:
        gt.close()
    hits = {b.address: b.hits for b in bs}
    assert sum(len(h) for h in hits.values()) == 25
    for addr, hs in hits.items():  # each backend got only requests the picker sent to it
        assert all(h.headers["x-gateway-destination-endpoint"] == addr for h in hs)
    log = access(tmp_path)
    assert len(log) == 25 and all(r["status"] == 200 and r["retries"] == 0 for r in log)
    for addr, hs in hits.items():
        assert sum(1 for r in log if r["endpoint"] == addr) == len(hs)
    assert [r["endpoint"] for r in log[:24]] == served
    assert [r["request_id"] for r in log] == [f"r{i}" for i in range(24)] + [None]  # the client's x-request-id
    stamps = [requeststart.parse(h.headers["x-request-start"]) for hs in hits.values() for h in hs]
    assert all(s is not None and before <= s <= time.time() for s in stamps)  # when the gateway received each
    assert all(r["ttft_ms"] is not None and r["duration_ms"] >= r["ttft_ms"] for r in log)


def test_the_first_proxys_request_start_is_kept(tmp_path: Path, fleet: FakeFleet) -> None:
    b = fleet.add(Knobs(tokens=2))
    gt = start(tmp_path, endpoints=[b.address])
    try:
        stream_text(client(gt), headers={"x-request-start": "t=1700000000123"}, n=2)
    finally:
        gt.close()
    assert b.hits[0].headers["x-request-start"] == "t=1700000000123"


@pytest.mark.parametrize(("value", "seconds"), [
    ("t=1700000000.123456", 1700000000.123456), ("t=1700000000123", 1700000000.123),  # nginx's msec; Heroku's ms
    ("t=1700000000123456", 1700000000.123456), ("1700000000", 1700000000.0),  # microseconds; no t=
    (None, None), ("", None), ("t=", None), ("t=abc", None), ("t=-5", None), ("t=nan", None), ("t=inf", None)])
def test_request_start_values(value, seconds) -> None:
    got = requeststart.parse(value)
    assert got == (None if seconds is None else pytest.approx(seconds, abs=1e-6))


def test_request_start_stamp_reads_back() -> None:
    assert requeststart.parse(requeststart.stamp(1700000000.25)) == 1700000000.25


def test_prefix_affinity_and_load_spread(tmp_path: Path, fleet: FakeFleet) -> None:
    """The default EPP config (queue 2, kv 2, prefix 3): a repeated prompt sticks to one endpoint while the loads are
    equal; a backend reporting a long queue gets nothing new."""
    bs = [fleet.add(Knobs(tokens=2)) for _ in range(3)]
    bs[0].knobs.waiting = 50
    gt = start(tmp_path, endpoints=[b.address for b in bs])
    try:
        gt.until_picker(lambda snap: bs[0].address in snap.names  # a scrape has seen the queue
                        and snap.waiting[snap.names.index(bs[0].address)] == 50)
        c = client(gt)
        for _ in range(6):
            stream_text(c, n=2)
    finally:
        gt.close()
    assert len(bs[0].hits) == 0
    assert sorted(len(b.hits) for b in bs[1:]) == [0, 6]


def test_503_when_no_ready_endpoint_after_hold(tmp_path: Path) -> None:
    eps = tmp_path / "endpoints.txt"
    eps.write_text("")
    gt = start(tmp_path, endpointsFile=str(eps), holdTimeout="300ms")
    try:
        c = client(gt)
        t0 = time.monotonic()
        with pytest.raises(openai.APIStatusError) as info:
            stream_text(c)
        assert info.value.status_code == 503
        assert 0.25 <= time.monotonic() - t0 < 3.0
    finally:
        gt.close()
    assert access(tmp_path)[0]["status"] == 503


def test_held_request_released_when_an_endpoint_appears(tmp_path: Path, fleet: FakeFleet) -> None:
    eps = tmp_path / "endpoints.txt"
    eps.write_text("# none yet\n")
    gt = start(tmp_path, endpointsFile=str(eps), holdTimeout="10s", refreshMetricsInterval="20ms")
    try:
        import threading

        out: list[str] = []
        th = threading.Thread(target=lambda: out.append(stream_text(client(gt))), daemon=True)
        th.start()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and gt.gw.picker.held == 0:
            time.sleep(0.01)
        metrics = httpx.get(gt.admin_url + "/metrics", timeout=5).text
        assert 'inference_extension_flow_control_queue_size{inference_pool="pool"} 1.0' in metrics
        b = fleet.add(Knobs(tokens=4))
        eps.write_text(b.address + "\n")
        th.join(10)
        assert out == ["w0 w1 w2 w3"]
        assert len(b.hits) == 1
        metrics = httpx.get(gt.admin_url + "/metrics", timeout=5).text
        assert 'inference_extension_flow_control_queue_size{inference_pool="pool"} 0.0' in metrics
        assert 'inference_pool_ready_pods{name="pool"} 1.0' in metrics
    finally:
        gt.close()


def test_429_for_sheddable_under_saturation(tmp_path: Path, fleet: FakeFleet) -> None:
    bs = [fleet.add(Knobs(tokens=2, waiting=10)) for _ in range(2)]  # 10/5 queue threshold: saturation 2
    gt = start(tmp_path, endpoints=[b.address for b in bs], objectives={"batch": -1, "chat": 1})
    try:
        c = client(gt)
        for headers in ({"x-gateway-priority": "-1"}, {"x-gateway-inference-objective": "batch"}):
            with pytest.raises(openai.APIStatusError) as info:
                stream_text(c, headers=headers, n=2)
            assert info.value.status_code == 429
        assert stream_text(c, headers={"x-gateway-inference-objective": "chat"}, n=2) == "w0 w1"
        assert stream_text(c, n=2) == "w0 w1"  # Standard (0) is never shed
    finally:
        gt.close()
    assert sum(len(b.hits) for b in bs) == 2
    assert [r["status"] for r in access(tmp_path)] == [429, 429, 200, 200]


def test_5xx_and_hanging_backends_retried_elsewhere(tmp_path: Path, fleet: FakeFleet) -> None:
    bad = fleet.add(Knobs(status=500))
    hang = fleet.add(Knobs(hang=True))
    good = fleet.add(Knobs(tokens=3))
    gt = start(tmp_path, endpoints=[bad.address, hang.address, good.address], firstByteTimeout="300ms",
               maxRetries=2)
    try:
        c = client(gt)
        t0 = time.monotonic()
        for i in range(8):
            assert stream_text(c, prompt=f"{i} {PROMPT}", headers={"x-gateway-priority": "1"}, n=3) == "w0 w1 w2"
        assert time.monotonic() - t0 < 8
    finally:
        gt.close()
    assert good.completed == 8
    log = access(tmp_path)
    assert all(r["status"] == 200 and r["endpoint"] == good.address for r in log)
    assert sum(r["retries"] for r in log) == len(bad.hits) + len(hang.hits) > 0


def test_backend_killed_mid_stream(tmp_path: Path, fleet: FakeFleet) -> None:
    """The stream in flight on a killed backend ends with an error (its tokens were already relayed: nothing can be
    retried); every Critical request after it succeeds on the others, the first ones by retrying on a refused
    connect before the scrape drops the dead endpoint."""
    bs = [fleet.add(Knobs(tokens=50, token_delay=0.02)) for _ in range(3)]
    gt = start(tmp_path, endpoints=[b.address for b in bs], preset="round-robin", refreshMetricsInterval="1s")
    try:
        c = client(gt)
        raw = c.completions.with_raw_response.create(model="fake", prompt=PROMPT, max_tokens=50, stream=True)
        slow = fleet.by_address(raw.headers["x-gateway-destination-endpoint-served"])
        it = iter(raw.parse())
        assert next(it).choices[0].text == "w0"
        slow.kill()
        with pytest.raises((openai.APIError, httpx.HTTPError)):
            for _ in it:
                pass
        for i in range(9):
            assert stream_text(c, prompt=f"{i}", headers={"x-gateway-priority": "1"}, n=3) == "w0 w1 w2"
        metrics = httpx.get(gt.admin_url + "/metrics", timeout=5).text
    finally:
        gt.close()
    # the cut stream is an error of its own kind, not counted under the success status it began with
    errors = [ln for ln in metrics.splitlines() if ln.startswith("inference_objective_request_error_total{")]
    assert len(errors) == 1 and 'error_code="stream_cut"' in errors[0] and errors[0].endswith(" 1.0"), errors
    log = access(tmp_path)
    assert log[0]["endpoint"] == slow.address and log[0]["error"]
    assert all(r["status"] == 200 and r["error"] is None and r["endpoint"] != slow.address for r in log[1:])
    assert sum(b.completed for b in bs if b is not slow) == 9
    assert sum(r["retries"] for r in log[1:]) >= 1


def test_dead_metrics_endpoint_goes_stale_but_keeps_serving(tmp_path: Path, fleet: FakeFleet) -> None:
    dead = fleet.add(Knobs(tokens=2, metrics="hang"))
    err = fleet.add(Knobs(tokens=2, metrics="500"))
    ok = fleet.add(Knobs(tokens=2))
    gt = start(tmp_path, endpoints=[dead.address, err.address, ok.address], scrapeTimeout="100ms",
               metricsStalenessThreshold="300ms", preset="round-robin")
    try:
        # the hanging and the failing endpoint go stale past 300 ms, the healthy one stays fresh
        snap = gt.until_picker(lambda snap: snap.fresh.tolist() == [False, False, True])
        assert snap.names == [dead.address, err.address, ok.address]
        c = client(gt)
        for i in range(6):
            assert stream_text(c, prompt=str(i), headers={"x-gateway-priority": "1"}, n=2) == "w0 w1"
    finally:
        gt.close()
    assert [len(b.hits) for b in (dead, err, ok)] == [2, 2, 2]


def test_graceful_drain_finishes_in_flight(tmp_path: Path, fleet: FakeFleet) -> None:
    import threading

    b = fleet.add(Knobs(tokens=10, token_delay=0.05))
    gt = start(tmp_path, endpoints=[b.address], drainTimeout="5s")
    out: list[str] = []
    th = threading.Thread(target=lambda: out.append(stream_text(client(gt), n=10)), daemon=True)
    th.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not b.hits:
        time.sleep(0.01)
    port = gt.gw.port
    gt.close(drain=5)
    th.join(5)
    assert out == [" ".join(f"w{i}" for i in range(10))]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)


def test_parse_vllm_metrics() -> None:
    m = Metrics()
    parse_vllm_metrics("\n".join([
        "# HELP vllm:num_requests_waiting x",
        'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0',
        'vllm:num_requests_waiting{engine="1",model_name="m"} 2.0',
        'vllm:num_requests_running{engine="0",model_name="m"} 7',
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.25',
        'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b",waiting_lora_adapters="c"} 1.7e9',
        'vllm:cache_config_info{block_size="32",num_gpu_blocks="4096",enable_prefix_caching="True"} 1.0',
    ]), m)
    assert (m.waiting, m.running, m.kv) == (5, 7, 0.25)
    assert m.active_loras == frozenset({"a", "b"}) and m.waiting_loras == frozenset({"c"}) and m.max_loras == 4
    assert (m.num_gpu_blocks, m.block_size) == (4096, 32)


class _FakeMetricsConn:
    """Stands in for a replica's /metrics connection: answers the gauges it is given, counting fetches."""

    def __init__(self, waiting: int) -> None:
        self.waiting, self.fetches = waiting, 0

    async def get(self, path: str = "/metrics") -> tuple[int, bytes]:
        self.fetches += 1
        return 200, (f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {self.waiting}\n'
                     f'vllm:num_requests_running{{engine="0",model_name="m"}} 0\n').encode()

    def close(self) -> None:
        pass


def test_a_scrape_reaches_the_next_pick_at_once_and_its_age_is_measured() -> None:
    """GIE's collector swaps an endpoint's metrics as its scrape is parsed and the scheduler reads the latest
    (pkg/epp/datalayer/collector.go, extractor.go UpdateMetrics): a pick after a scrape scores that scrape, not a
    snapshot rebuilt on a second refresh clock (which left picks up to two intervals behind the replicas). The
    refresh clock here is an hour, so only the scrape itself can make the pick see the new queue."""
    import asyncio

    from kubetwin.live.gateway.picker import LivePicker

    a, b = "127.0.0.1:9", "127.0.0.1:10"  # never dialled: the connections are fakes

    async def scenario() -> None:
        picker = LivePicker(GatewayConfig(endpoints=[a, b], refreshMetricsInterval="1h", preset="load"))
        conns = {a: _FakeMetricsConn(0), b: _FakeMetricsConn(9)}
        picker.scraper._conns.update(conns)  # noqa: SLF001 - the test's fake transport
        await picker.start()
        try:
            reg = picker.metrics.registry
            assert picker.current().waiting.tolist() == [0, 9]
            req = picker.request({"model": "m", "prompt": "x"}, {})
            assert (await picker.pick(req)).endpoint == a
            assert reg.get_sample_value("kubetwin_gateway_scheduler_metrics_age_seconds_count") == 2
            # the queues swap sides; one scrape of each, and the very next pick follows them
            conns[a].waiting, conns[b].waiting = 9, 0
            t0 = time.monotonic()
            await picker.scraper.scrape_one(a)
            await picker.scraper.scrape_one(b)
            assert (await picker.pick(picker.request({"model": "m", "prompt": "y"}, {}))).endpoint == b
            assert picker.current().waiting.tolist() == [9, 0]
            assert reg.get_sample_value("kubetwin_gateway_scheduler_metrics_age_seconds_count") == 4
            # every good scrape's round trip is observed: the start-up round, each loop's first, the two above
            fetches = sum(c.fetches for c in conns.values())
            assert reg.get_sample_value("kubetwin_gateway_metrics_scrape_duration_seconds_count") == fetches >= 4
            # each age is the time since that candidate's last scrape arrived: the two just made are younger than
            # the time since, and all four are far under the hour the refresh clock waits
            age = "kubetwin_gateway_scheduler_metrics_age_seconds_bucket"
            assert reg.get_sample_value(age, {"le": "5.0"}) == 4
            assert picker.state.updated.min() >= t0  # both endpoints' metrics are those two scrapes', not older
        finally:
            await picker.stop()

    asyncio.run(asyncio.wait_for(scenario(), 30))  # bounded, whatever the picker does


def test_picker_stops_while_its_first_scrapes_complete() -> None:
    """A stop that lands as the scrape loops' first fetches finish still ends them: on Python 3.11 asyncio.wait_for
    drops that cancellation (python/cpython#86296) and the loop slept on, so the gateway's shutdown waited for
    ever (here, an hour's refresh interval)."""
    import asyncio

    from kubetwin.live.gateway.picker import LivePicker

    a, b = "127.0.0.1:9", "127.0.0.1:10"

    async def scenario() -> None:
        picker = LivePicker(GatewayConfig(endpoints=[a, b], refreshMetricsInterval="1h", preset="load"))
        picker.scraper._conns.update({a: _FakeMetricsConn(0), b: _FakeMetricsConn(1)})  # noqa: SLF001
        await picker.start()
        tasks = list(picker.scraper._tasks.values())  # noqa: SLF001
        await picker.stop()
        assert tasks and all(t.done() for t in tasks)

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_the_comparison_reads_the_pickers_data_layer_timings(tmp_path: Path, fleet: FakeFleet) -> None:
    """benchmarks/live_vs_twin.py's summary of the two histograms, from a running gateway: one age per candidate per
    request, scrapes counted, quantiles inside the buckets; and its histogram_quantile is Prometheus'."""
    from conftest import load_script

    lvt = load_script(ROOT / "benchmarks" / "live_vs_twin.py")
    assert lvt.histogram_quantile(0.5, [(0.01, 0), (0.05, 10), (float("inf"), 10)]) == 0.03
    assert lvt.histogram_quantile(0.9, [(0.01, 5), (0.05, 5), (float("inf"), 10)]) == 0.05
    eps = [fleet.add(Knobs(tokens=2)) for _ in range(3)]
    gt = start(tmp_path, endpoints=[e.address for e in eps])
    try:
        gt.until_picker(lambda snap: len(snap) == 3)
        c = client(gt)
        for i in range(4):
            stream_text(c, prompt=str(i), n=2)
        got = lvt.picker_data_layer(gt.gw.admin_port, tmp_path)
    finally:
        gt.close()
    assert got["metrics_age"]["count"] == 4 * 3
    assert got["scrape_rtt"]["count"] >= 3
    for k in ("metrics_age", "scrape_rtt"):
        assert 0 <= got[k]["p50_ms"] <= got[k]["p90_ms"] <= 5000 and got[k]["mean_ms"] >= 0
    assert "kubetwin_gateway_scheduler_metrics_age_seconds_bucket" in (tmp_path / "gateway-metrics.txt").read_text()


def test_framing_tracks_chunked_split_anywhere() -> None:
    body = b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n"
    for cut in range(1, len(body)):
        f = Framing("chunked")
        f.feed(body[:cut])
        assert not f.done or cut == len(body)
        f.feed(body[cut:])
        assert f.done, cut
    assert cut == len(body) - 1  # every split was tried


def test_endpoint_sources(tmp_path: Path) -> None:
    assert parse_endpoint_lines("a:1\n\n# c\nb:2  # x\na:1\n") == ["a:1", "b:2"]
    got = from_manifests([str(ROOT / "examples" / "serving-llama3-epp.yaml")], "llama3-pool", "default",
                         "127.0.0.1")
    assert got.endpoints == [f"127.0.0.1:{8000 + i}" for i in range(4)]
    assert got.objectives["chat"] == 0 and got.pool == "llama3-pool"


@pytest.mark.parametrize("name", ["gateway-standalone.yaml", "gateway-envoy.yaml"])
def test_example_configs_load(name: str) -> None:
    cfg = load_config(ROOT / "examples" / "live" / name)
    assert cfg.refreshMetricsInterval == 0.05
    assert cfg.picker_config()


def test_config_rejects_mistakes() -> None:
    with pytest.raises(ValueError):
        GatewayConfig(endpoints=[])
    with pytest.raises(ValueError):
        GatewayConfig(endpoints=["nohost"])
    with pytest.raises(ValueError):
        GatewayConfig(endpoints=["a:1"], preset="epp", endpointPickerConfig={"plugins": []})
    with pytest.raises(ValueError):
        GatewayConfig(endpoints=["a:1"], bogus=1)


def test_envoy_mode_has_one_body_cap() -> None:
    """envoy.maxRequestBytes (Envoy's buffer: its 413 comes first) and maxRequestBodyBytes (the picker's) are one
    setting: they were 16 and 32 MiB by default, so the picker's never applied. Either follows the other; set both,
    they must agree."""
    mib = 1024 * 1024
    assert GatewayConfig(endpoints=["a:1"]).envoy.maxRequestBytes == 32 * mib
    assert GatewayConfig(endpoints=["a:1"], maxRequestBodyBytes=mib).envoy.maxRequestBytes == mib
    assert GatewayConfig(endpoints=["a:1"], envoy={"maxRequestBytes": 2 * mib}).maxRequestBodyBytes == 2 * mib
    both = GatewayConfig(endpoints=["a:1"], maxRequestBodyBytes=mib, envoy={"maxRequestBytes": mib})
    assert both.envoy_body_cap == mib
    with pytest.raises(ValueError, match=r"envoy.maxRequestBytes \(2097152\) and maxRequestBodyBytes \(1048576\) are "
                                         "one body cap and disagree"):
        GatewayConfig(endpoints=["a:1"], maxRequestBodyBytes=mib, envoy={"maxRequestBytes": 2 * mib})

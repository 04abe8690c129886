"""The vLLM emulator over real HTTP (openai SDK, httpx): vLLM's response shapes, /metrics names parsed by
prometheus_client, the twin engine's timing on the wall clock, and each fault flag. Every call has a timeout."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "httpx", "openai")

import json
import math
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubetwin.live.emulator import EmulatorConfig, EmulatorConfigError, EmulatorProcess, EmulatorThread
from kubetwin.live.emulator.config import build_served
from kubetwin.live.emulator.realtime import Stream
from kubetwin.live.prompts import VOCAB, engine_request
from kubetwin.serving.engine.core import Engine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LORA = ["--enable-lora", "--max-loras", "2", "--lora-modules", "sql=/adapters/sql", "chat=/adapters/chat"]
T = 10.0  # client timeout (s)


def config(**kw: object) -> EmulatorConfig:
    kw.setdefault("vllm_args", LORA)
    return EmulatorConfig(model=MODEL, port=0, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def emu():
    with EmulatorThread(config()) as e:
        yield e


def client(e: EmulatorThread | EmulatorProcess, timeout: float = T) -> openai.OpenAI:
    return openai.OpenAI(base_url=e.url + "/v1", api_key="x", timeout=timeout, max_retries=0)


def scrape(e: EmulatorThread) -> dict[str, list]:
    text = httpx.get(e.url + "/metrics", timeout=T).text
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list, name: str) -> float:
    return sum(s.value for s in samples if s.name == name)


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_streamed_completion_has_vllm_chunks_and_usage(emu):
    stream = client(emu).completions.create(model=MODEL, prompt=words(40), max_tokens=12, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    text_chunks = [c for c in chunks if c.choices]
    assert len(text_chunks) == 12  # one chunk per token, exactly max_tokens (the twin's no-EOS assumption)
    assert [c.choices[0].finish_reason for c in text_chunks] == [None] * 11 + ["length"]
    text = "".join(c.choices[0].text for c in text_chunks)
    assert len(text.split()) == 12 and set(text.split()) <= set(VOCAB)  # live.prompts' words, one per token
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens,
            chunks[-1].usage.total_tokens) == (40, 12, 52)
    assert all(c.object == "text_completion" and c.id.startswith("cmpl-") for c in chunks)


def test_raw_sse_ends_with_done(emu):
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 3, "stream": True}
    with httpx.stream("POST", emu.url + "/v1/completions", json=body, timeout=T) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]" and len(events) == 4


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("route,prefix", [("completions", "cmpl-"), ("chat/completions", "chatcmpl-")])
def test_response_id_is_the_clients_x_request_id(emu, stream, route, prefix):
    """vLLM takes the X-Request-Id header as its request id (serving_engine.py _base_request_id)."""
    body = {"model": MODEL, "max_tokens": 2, "stream": stream,
            **({"messages": [{"role": "user", "content": "a b"}]} if "chat" in route else {"prompt": "a b"})}
    r = httpx.post(f"{emu.url}/v1/{route}", json=body, headers={"x-request-id": "trace-42"}, timeout=T)
    chunks = [json.loads(e[6:]) for e in r.text.split("\n\n") if e.startswith("data: {")] if stream else [r.json()]
    assert chunks and {c["id"] for c in chunks} == {prefix + "trace-42"}
    other = httpx.post(f"{emu.url}/v1/{route}", json=body, timeout=T).text
    assert "trace-42" not in other and prefix in other


def test_chat_stream_and_non_stream(emu):
    c = client(emu)
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": words(30)}]
    chunks = list(c.chat.completions.create(model=MODEL, messages=msgs, max_completion_tokens=5, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = [ch.choices[0].delta.content for ch in chunks[1:]]
    assert len(content) == 5 and chunks[-1].choices[0].finish_reason == "length"
    r = c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=7)
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert len(r.choices[0].message.content.split()) == 7
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (32, 7, 39)


def test_non_streamed_completion_usage(emu):
    r = client(emu).completions.create(model=MODEL, prompt=words(20), max_tokens=4)
    assert r.choices[0].finish_reason == "length" and len(r.choices[0].text.split()) == 4
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (20, 4)


def test_models_lists_base_and_adapters(emu):
    data = httpx.get(emu.url + "/v1/models", timeout=T).json()["data"]
    by_id = {m["id"]: m for m in data}
    assert set(by_id) == {MODEL, "sql", "chat"}
    assert by_id[MODEL]["parent"] is None and by_id[MODEL]["max_model_len"] == 131072
    assert by_id["sql"]["parent"] == MODEL and by_id["sql"]["root"] == "/adapters/sql"
    assert all(m["object"] == "model" and m["owned_by"] == "vllm" for m in data)


def test_metrics_names_labels_and_prefix_hits(emu):
    before = scrape(emu)
    names = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:lora_requests_info",
             "vllm:cache_config_info", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
             "vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds", "vllm:prompt_tokens",
             "vllm:generation_tokens", "vllm:num_preemptions"}
    assert names <= set(before)
    running = before["vllm:num_requests_running"][0]
    assert running.labels == {"model_name": MODEL, "engine": "0"}
    cache = before["vllm:cache_config_info"][0].labels
    assert cache["block_size"] == "16" and int(cache["num_gpu_blocks"]) > 0
    ttft_le = [s.labels["le"] for s in before["vllm:time_to_first_token_seconds"] if s.name.endswith("_bucket")]
    assert ttft_le[:3] == ["0.001", "0.005", "0.01"] and ttft_le[-1] == "+Inf" and len(ttft_le) == 23
    hits0 = value(before["vllm:prefix_cache_hits"], "vllm:prefix_cache_hits_total")
    prompt = "shared " + words(200)
    c = client(emu)
    c.completions.create(model=MODEL, prompt=prompt, max_tokens=2)
    c.completions.create(model=MODEL, prompt=prompt, max_tokens=2)
    after = scrape(emu)
    hits = value(after["vllm:prefix_cache_hits"], "vllm:prefix_cache_hits_total") - hits0
    assert hits >= 192  # the second request finds the first's full 16-token blocks (all but the last partial one)
    assert value(after["vllm:generation_tokens"], "vllm:generation_tokens_total") >= 4
    assert 0.0 <= value(after["vllm:kv_cache_usage_perc"], "vllm:kv_cache_usage_perc") <= 1.0


def test_lora_request_shows_in_lora_requests_info(emu):
    body = {"model": "sql", "prompt": words(10), "max_tokens": 400, "stream": True}
    with httpx.stream("POST", emu.url + "/v1/completions", json=body, timeout=T) as r:
        it = r.iter_lines()
        assert next(it).startswith("data: ")
        info = scrape(emu)["vllm:lora_requests_info"]
        for _ in it:
            pass
    assert len(info) == 1
    assert info[0].labels["running_lora_adapters"] == "sql" and info[0].labels["max_lora"] == "2"
    assert info[0].value > 1e9  # vLLM sets it to the current time
    idle = scrape(emu)["vllm:lora_requests_info"][0].labels
    assert idle["running_lora_adapters"] == "" and idle["waiting_lora_adapters"] == ""


def test_unknown_model_is_404_in_vllm_shape(emu):
    r = httpx.post(emu.url + "/v1/completions", json={"model": "nope", "prompt": "hi", "max_tokens": 1}, timeout=T)
    assert r.status_code == 404
    assert r.json() == {"error": {"message": "The model `nope` does not exist.", "type": "NotFoundError",
                                  "param": None, "code": 404}}


def test_too_long_prompt_is_400_with_the_engine_message():
    with EmulatorThread(config(vllm_args=["--max-model-len", "256"])) as e:
        with pytest.raises(openai.BadRequestError) as exc:
            client(e).completions.create(model=MODEL, prompt=words(250), max_tokens=10)
        assert exc.value.status_code == 400
        req = engine_request(0, 0.0, words(250), 10)
        assert exc.value.body["message"] == Engine.reject_message(req, 256)  # type: ignore[index]
        assert "maximum context length is 256 tokens" in exc.value.body["message"]  # type: ignore[index]


def test_bad_vllm_flag_is_refused_in_vllms_words():
    with pytest.raises(EmulatorConfigError, match="unrecognized arguments: --bogus"):
        build_served(config(vllm_args=["--bogus"]))
    with pytest.raises(EmulatorConfigError, match="time-scale"):
        build_served(config(time_scale=0))


def twin_times(cfg: EmulatorConfig, prompt: str, max_tokens: int) -> tuple[float, float, float]:
    """(TTFT, TPOT, e2e) the twin's engine gives one request on an idle server."""
    eng = build_served(cfg).engine
    req = engine_request(0, 0.0, prompt, max_tokens)
    eng.add(req, 0.0)
    eng.advance(math.inf)
    return req.first_token, (req.finish - req.first_token) / (max_tokens - 1), req.finish


def measure(e: EmulatorThread, prompt: str, max_tokens: int) -> tuple[float, float, float]:
    c = client(e)
    c.completions.create(model=MODEL, prompt="warm up the connection", max_tokens=1)
    time.sleep(0.05)
    t0 = time.monotonic()
    times = []
    for _ in c.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, stream=True):
        times.append(time.monotonic() - t0)
    return times[0], (times[-1] - times[0]) / (max_tokens - 1), times[-1]


LATE = 0.25  # wall seconds a loaded machine may delay a token (the tight bound is the other side)


@pytest.mark.parametrize("scale", [1.0, 8.0])
def test_single_request_timing_matches_the_twin(scale):
    cfg = config(time_scale=scale)
    prompt, n = words(3000), 60
    ttft, tpot, e2e = twin_times(cfg, prompt, n)
    with EmulatorThread(cfg) as e:
        m_ttft, m_tpot, m_e2e = measure(e, prompt, n)
        hist = scrape(e)
    # wall seconds x scale = emulated seconds. A token is never early: each is sent at its emulated time on the
    # wall clock, so the client cannot see it sooner (tight); a starved CPU (the suite runs two workers a core) can
    # only make it late, bounded by LATE wall seconds. The server's histograms (the engine's times) are checked below.
    assert ttft * 0.9 - 0.03 * scale <= m_ttft * scale <= ttft * 1.1 + (0.03 + LATE) * scale
    assert e2e * 0.9 - 0.03 * scale <= m_e2e * scale <= e2e * 1.1 + (0.03 + LATE) * scale
    assert m_tpot * scale == pytest.approx(tpot, rel=0.15, abs=(0.002 + 2 * LATE / (n - 1)) * scale)
    # the server's own histograms report emulated seconds
    ttft_sum = value(hist["vllm:time_to_first_token_seconds"], "vllm:time_to_first_token_seconds_sum")
    assert ttft_sum == pytest.approx(ttft, rel=0.1, abs=0.02 * scale)
    itl_count = value(hist["vllm:inter_token_latency_seconds"], "vllm:inter_token_latency_seconds_count")
    assert itl_count == n - 1


def test_startup_delay_health_503_then_200():
    with EmulatorThread(config(startup_delay=0.6)) as e:
        assert httpx.get(e.url + "/health", timeout=T).status_code == 503
        r = httpx.post(e.url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1}, timeout=T)
        assert r.status_code == 503 and r.json()["error"]["code"] == 503
        deadline = time.monotonic() + 5
        while httpx.get(e.url + "/health", timeout=T).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert client(e).completions.create(model=MODEL, prompt="x", max_tokens=1).usage.completion_tokens == 1


def test_crash_after_tokens_cuts_the_connection():
    with EmulatorThread(config(crash_after_tokens=3)) as e:
        got = []
        with pytest.raises((openai.APIConnectionError, httpx.RemoteProtocolError)):
            for c in client(e).completions.create(model=MODEL, prompt="a b", max_tokens=10, stream=True):
                got.append(c.choices[0].text)
        assert len(got) == 3
        # a request shorter than the limit is unaffected
        assert client(e).completions.create(model=MODEL, prompt="a b", max_tokens=2).usage.completion_tokens == 2


def test_hang_after_tokens_keeps_the_connection_silent():
    with EmulatorThread(config(hang_after_tokens=2)) as e:
        got = []
        with pytest.raises((openai.APITimeoutError, httpx.ReadTimeout)):
            for c in client(e, timeout=1.0).completions.create(model=MODEL, prompt="a b", max_tokens=10,
                                                                stream=True):
                got.append(c.choices[0].text)
        assert len(got) == 2


def test_error_rate_answers_500_in_vllm_shape():
    with EmulatorThread(config(error_rate=1.0)) as e:
        r = httpx.post(e.url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1}, timeout=T)
        assert r.status_code == 500 and r.json()["error"]["type"] == "InternalServerError"
    with EmulatorThread(config(error_rate=0.5, seed=7)) as e:
        codes = [httpx.post(e.url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1},
                            timeout=T).status_code for _ in range(40)]
    assert set(codes) == {200, 500} and 8 <= codes.count(500) <= 32
    with EmulatorThread(config(error_rate=0.5, seed=7)) as e:  # same seed, same faults
        again = [httpx.post(e.url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1},
                            timeout=T).status_code for _ in range(40)]
    assert again == codes


def test_metrics_fail_error_and_hang():
    with EmulatorThread(config(metrics_fail="error")) as e:
        assert httpx.get(e.url + "/metrics", timeout=T).status_code == 500
        assert httpx.get(e.url + "/health", timeout=T).status_code == 200
    with EmulatorThread(config(metrics_fail="hang")) as e:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(e.url + "/metrics", timeout=0.5)


def test_concurrent_streams_all_complete(emu):
    import concurrent.futures

    def one(i: int) -> int:
        n = 0
        for c in client(emu).completions.create(model=MODEL, prompt=words(50 + i), max_tokens=20, stream=True):
            n += len(c.choices)
        return n

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        assert list(pool.map(one, range(32))) == [20] * 32


def test_the_docs_sh_block_runs(tmp_path):
    """docs/live-emulator.md's sh block prints what the page says (`.venv/bin/*` -> this interpreter;
    test_docs_commands.py checks only that it runs)."""
    import re
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "live-emulator.md").read_text()
    block = re.search(r"```sh\n(.*?)```", doc, re.S)
    assert block is not None
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name, body in (("kubetwin", "-m kubetwin.cli.main"), ("python", "")):
        (bin_ / name).write_text(f'#!/bin/sh\nexec {sys.executable} {body} "$@"\n')
        (bin_ / name).chmod(0o755)
    res = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.group(1)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert '"parent":"meta-llama/Llama-3.1-8B-Instruct"' in out.replace(" ", "")
    assert out.count('"finish_reason":"length"') == 1 and "data: [DONE]" in out
    assert 'vllm:lora_requests_info{max_lora="1"' in out
    assert re.search(r'vllm:e2e_request_latency_seconds_count\{engine="0",model_name="[^"]+"\} 1\.0', out)


def test_cli_refuses_a_bad_vllm_flag():
    from typer.testing import CliRunner

    from kubetwin.cli.main import app

    res = CliRunner().invoke(app, ["emulate", "vllm", "--model", MODEL, "--max-num-seqs", "many"])
    assert res.exit_code == 1
    assert "argument --max-num-seqs: invalid int value: 'many'" in res.output


def until_gauges(e: EmulatorThread, running: int, waiting: int) -> None:
    """Wait until the server's own /metrics shows these gauges: tests sequence requests by what the server reports,
    never by sleeps (a thread's first request can take longer than any sleep to leave on a busy machine)."""
    deadline = time.monotonic() + T
    while True:
        got = scrape(e)
        now = (value(got["vllm:num_requests_running"], "vllm:num_requests_running"),
               value(got["vllm:num_requests_waiting"], "vllm:num_requests_waiting"))
        if now == (running, waiting):
            return
        assert time.monotonic() < deadline, f"the server shows (running, waiting) {now}, not {(running, waiting)}"
        time.sleep(0.01)


def test_priority_scheduling_serves_the_lower_priority_value_first():
    """--scheduling-policy priority: with one sequence slot, of two waiting requests the one with the lower vLLM
    `priority` value is served first, whatever their arrival order. Each request is sent once the server shows the
    one before it running or waiting (its /metrics gauges), and the order is the server's: the emulated times its
    engine finished them (responses that end in one loop wake-up reach their clients in any order)."""
    import concurrent.futures

    cfg = config(vllm_args=["--max-num-seqs", "1", "--scheduling-policy", "priority"], time_scale=5.0)
    ended: list[tuple[float, int]] = []  # (emulated finish, vLLM priority)

    with EmulatorThread(cfg) as e:
        rt = e.emulator.rt
        told = rt.on_done

        def record(s: Stream) -> None:
            ended.append((s.req.finish, -s.req.priority))  # the engine's priority is vLLM's negated
            if told is not None:
                told(s)

        rt.on_done = record

        def send(name: str, prio: int, n: int) -> None:
            r = httpx.post(e.url + "/v1/completions", json={"model": MODEL, "prompt": name, "max_tokens": n,
                                                            "priority": prio}, timeout=T)
            assert r.status_code == 200

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            first = pool.submit(send, "first", 0, 1000)  # ~7 s emulated, ~1.4 s wall: the others wait behind it
            until_gauges(e, 1, 0)
            late = pool.submit(send, "low", 5, 2)
            until_gauges(e, 1, 1)
            urgent = pool.submit(send, "urgent", -5, 2)
            until_gauges(e, 1, 2)
            assert ended == []  # both queued while "first" still runs
            for f in (first, late, urgent):
                f.result(timeout=T)
    assert [prio for _, prio in sorted(ended)] == [0, -5, 5]  # first, then urgent, then low


def test_emulator_process_serves_on_a_free_port_and_reports_bad_flags():
    with EmulatorProcess(config(vllm_args=["--max-num-seqs", "8"], startup_delay=0.3)) as p:
        assert p.url.startswith("http://127.0.0.1:")
        deadline = time.monotonic() + T
        while httpx.get(p.url + "/health", timeout=T).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = client(p).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=3)
        assert r.usage.completion_tokens == 3
    assert p.proc is not None and p.proc.returncode is not None  # stopped
    with pytest.raises(RuntimeError, match="invalid int value: 'x'"):
        EmulatorProcess(config(vllm_args=["--max-num-seqs", "x"])).start()


@pytest.mark.parametrize("vllm_args", [[], LORA], ids=["plain", "lora"])
def test_metrics_exposition_is_rendered_again_only_when_a_value_changed(vllm_args):
    """An idle replica's /metrics is the previous exposition (the picker scrapes every 50 ms); at every step of
    requests running, finishing and lagging it is byte for byte what prometheus_client renders from the state,
    and with LoRA (whose info gauge carries the scrape's time) it is rendered every time."""
    from prometheus_client import generate_latest

    from kubetwin.live.emulator.server import Emulator

    e = Emulator(config(vllm_args=vllm_args))
    now = [0.0]
    e.rt.clock, e.rt.t0 = (lambda: now[0]), 0.0
    m = e.metrics
    first = m.render()
    assert (m.render() is first) == (not vllm_args)  # nothing changed: the same bytes object, unless LoRA
    for i in range(3):
        e.rt.submit(words(40 * (i + 1)), 5)
    seen = set()
    while e.rt.streams or now[0] < 0.05:
        e.rt.step()
        got = m.render()
        if not vllm_args:  # with LoRA the info gauge's time moves between two renders: nothing to compare
            assert got == generate_latest(m.registry)
        seen.add(got)
        now[0] += 0.003
    e.rt.lag_sum, e.rt.lag_count, e.rt.lag_max = e.rt.lag_sum + 0.5, e.rt.lag_count + 1, 0.5  # a lag alone shows
    assert b"kubetwin_emulator_token_lag_max_seconds 0.5" in m.render()
    assert len(seen) > 3  # the exposition followed the engine


@pytest.mark.parametrize("scale", [1.0, 8.0])
@pytest.mark.parametrize("spent_wall", [0.0, 0.004, 0.5])
def test_reading_the_request_counts_toward_the_api_share_not_on_top(scale, spent_wall):
    """The step model's API-server share (11 ms on every GPU: perf.Calibration.request_overhead_s) stands for vLLM's
    HTTP and tokenization path; the wall time the emulator itself spent reading a request before the engine saw it
    is taken out of that share (never more than all of it), so the client sees the twin's times from when the
    server received the request, and the server's own histograms say the same."""
    from kubetwin.live.emulator.server import Emulator

    cfg = config(vllm_args=[], time_scale=scale)
    prompt, n = words(3000), 8
    ttft, _tpot, e2e = twin_times(cfg, prompt, n)
    e = Emulator(cfg)
    api = e.rt.api_s
    assert api == pytest.approx(0.011)
    now = [10.0]
    e.rt.clock, e.rt.t0 = (lambda: now[0]), 10.0
    received = now[0]
    now[0] += spent_wall  # the body read and tokenized: the engine sees the request only now
    s = e.rt.submit(prompt, n, received=received)
    spent = spent_wall * scale
    credit = min(spent, api)
    assert s.credit == pytest.approx(credit) and s.req.arrival == pytest.approx(spent - credit)
    while not s.done:
        nxt = e.rt.step()
        now[0] = 10.0 + nxt / scale + 1e-9 if math.isfinite(nxt) else now[0] + 0.001
    # emulated times since the request was received: the twin's, plus what the share could not absorb
    assert s.first_token == pytest.approx(ttft + spent - credit, abs=1e-9)
    assert s.req.finish == pytest.approx(e2e + spent - credit, abs=1e-9)
    # the server's histograms: from the request's arrival, which is when the server received it plus what the share
    # could not absorb (the engine's own time, the twin's)
    assert e.metrics.ttft.sum == pytest.approx(ttft, abs=1e-9)
    assert e.metrics.e2e.sum == pytest.approx(e2e, abs=1e-9)


def test_the_front_proxys_request_start_begins_the_api_share():
    """X-Request-Start (live.requeststart: stamped by the gateway when the request reached it) starts the request's
    API-server share: a request that spent longer than the whole share on its way shows its first token the whole
    share (11 emulated ms) sooner than one that came straight in. At time-scale 0.1 that is 110 wall ms."""
    from kubetwin.live import requeststart

    with EmulatorThread(config(vllm_args=[], time_scale=0.1)) as e:
        def ttft(headers: dict[str, str]) -> float:
            t0 = time.monotonic()
            with httpx.stream("POST", e.url + "/v1/completions", headers=headers, timeout=T,
                              json={"model": MODEL, "prompt": words(50), "max_tokens": 2, "stream": True}) as r:
                next(r.iter_lines())
                return time.monotonic() - t0

        ttft({})  # a warm connection and code path
        plain = min(ttft({}) for _ in range(2))
        proxied = min(ttft({"x-request-start": requeststart.stamp(time.time() - 1.0)}) for _ in range(2))
    assert plain - proxied == pytest.approx(0.11, abs=0.04)

"""The live vLLM emulator (kubetwin.live.emulator) against the twin's engine it runs, and its capacity on this machine.

1. accuracy: one request on an idle server, streamed over loopback HTTP: client-measured TTFT / TPOT / e2e
   (x time scale) against what the twin's Engine predicts for the same request (same build_served engine, offline);
2. concurrency: N streams started at once; the lag of delivery is the client-measured mean e2e (x scale) minus the
   server's own emulated mean e2e (vllm:e2e_request_latency_seconds); "sustained" while the lag stays under 5% of
   the e2e; plus the emulator process's CPU seconds per streamed token (from /proc).

The emulator runs as a `kubetwin emulate vllm` subprocess so the client does not share its interpreter.

    .venv/bin/python benchmarks/bench_live_emulator.py [--scales 1 10] [--streams 32 128 512] [--conc-scales 1 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kubetwin.live.emulator import EmulatorConfig, EmulatorProcess
from kubetwin.live.emulator.config import build_served
from kubetwin.live.prompts import engine_request

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def start(scale: float, extra: list[str]) -> EmulatorProcess:
    return EmulatorProcess(EmulatorConfig(model=MODEL, port=0, time_scale=scale, vllm_args=extra)).start()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def twin(prompt: str, n: int, extra: list[str]) -> tuple[float, float, float]:
    eng = build_served(EmulatorConfig(model=MODEL, vllm_args=extra)).engine
    req = engine_request(0, 0.0, prompt, n)
    eng.add(req, 0.0)
    eng.advance(math.inf)
    return req.first_token, (req.finish - req.first_token) / (n - 1), req.finish


def e2e_server(url: str) -> tuple[float, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    for fam in text_string_to_metric_families(text):
        if fam.name == "vllm:e2e_request_latency_seconds":
            s = {x.name: x.value for x in fam.samples if not x.name.endswith("_bucket")}
            return s["vllm:e2e_request_latency_seconds_sum"], s["vllm:e2e_request_latency_seconds_count"]
    return 0.0, 0.0


async def accuracy(scale: float, prompt_len: int, n: int) -> None:
    prompt = " ".join(f"p{i}" for i in range(prompt_len))
    want = twin(prompt, n, [])
    proc = start(scale, [])
    url = proc.url
    try:
        host, port = url.rsplit("/", 1)[1].split(":")
        await raw_stream(await asyncio.open_connection(host, int(port)), "warm up", 1)
        times = await raw_stream(await asyncio.open_connection(host, int(port)), prompt, n)
    finally:
        proc.stop()
    got = (times[0] * scale, (times[-1] - times[0]) / (n - 1) * scale, times[-1] * scale)
    row = " ".join(f"{k} twin {w * 1e3:8.2f} ms http {g * 1e3:8.2f} ms ({(g / w - 1) * 100:+5.1f}%)"
                   for k, w, g in zip(("TTFT", "TPOT", "e2e"), want, got, strict=True))
    print(f"scale {scale:4g} prompt {prompt_len:5d} out {n:4d}: {row}")


async def raw_stream(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], prompt: str, n: int) -> list[float]:
    """One streamed completion on an open connection, read with as little client work as possible (the
    benchmark's client must not be what limits it): the times of each `data: {` event."""
    reader, writer = conn
    body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": n, "stream": True}).encode()
    t0 = time.monotonic()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: emulator\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    times: list[float] = []
    carry = b""
    while True:
        data = await reader.read(65536)
        if not data:
            break
        buf = carry + data
        times += [time.monotonic() - t0] * buf.count(b"data: {")
        if b"data: [DONE]" in buf:
            break
        carry = buf[-16:]
        carry = carry[carry.rfind(b"\n") + 1:] if b"\n" in carry else carry
    writer.close()
    return times


async def concurrency(scale: float, streams: int, n: int) -> None:
    proc = start(scale, ["--max-num-seqs", "1024"])
    url = proc.url
    host, port = url.rsplit("/", 1)[1].split(":")
    try:
        # open every connection first, so the measured streams do not include TCP set-up
        conns = await asyncio.gather(*(asyncio.open_connection(host, int(port)) for _ in range(streams)))
        s0, c0 = e2e_server(url)
        cpu0, mine0 = cpu_seconds(proc.pid), time.process_time()
        t0 = time.monotonic()
        results = await asyncio.wait_for(asyncio.gather(*(
            raw_stream(c, " ".join(f"c{i} q{j}" for j in range(100)), n) for i, c in enumerate(conns))), 600)
        wall = time.monotonic() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
        client_cpu = time.process_time() - mine0
        s1, c1 = e2e_server(url)
    finally:
        proc.stop()
    tokens = sum(len(r) for r in results)
    client_e2e = sum(r[-1] for r in results) / len(results) * scale
    server_e2e = (s1 - s0) / max(c1 - c0, 1)
    lag = client_e2e - server_e2e
    ok = all(len(r) == n for r in results) and lag < 0.05 * server_e2e
    print(f"scale {scale:4g} streams {streams:5d} x {n} tokens: wall {wall:6.2f} s, {tokens / wall:6.0f} tokens/s, "
          f"emulated e2e server {server_e2e:6.3f} s client {client_e2e:6.3f} s (lag {lag * 1e3:+7.1f} ms, "
          f"{lag / server_e2e * 100:+5.1f}%), CPU emulator {cpu / tokens * 1e6:5.1f} us/token, client "
          f"{client_cpu / tokens * 1e6:5.1f} us/token, {'sustained' if ok else 'NOT sustained'}")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", type=float, nargs="*", default=[1.0, 10.0])
    ap.add_argument("--streams", type=int, nargs="*", default=[32, 128, 512])
    ap.add_argument("--conc-scales", type=float, nargs="*", default=[1.0])
    ap.add_argument("--tokens", type=int, default=100)
    a = ap.parse_args()
    for scale in a.scales:
        for prompt_len, n in ((512, 128), (3000, 128)):
            await accuracy(scale, prompt_len, n)
    for scale in a.conc_scales:
        for streams in a.streams:
            await concurrency(scale, streams, a.tokens)


if __name__ == "__main__":
    asyncio.run(main())

"""How many requests per second one `kubetwin loadgen` process sends open-loop and measures, against the bare HTTP
client's ceiling measured in the same run.

A minimal HTTP/1.1 server in a second process answers every /v1/completions at once with a canned SSE stream
(`--tokens` chunks, a usage chunk, [DONE]), so the server is never the bottleneck. The loadgen then replays
generator traces (Poisson, 32-token prompts) at increasing rates; a rate is sustained when every request completed
and the sends kept their schedule (p99 send lag under 50 ms). The baseline is bare httpx streaming the same
requests closed-loop with the same concurrency and client layout and no bookkeeping: the ratio says what the
loadgen's scheduling, prompt text and per-request records cost.

    python benchmarks/bench_loadgen.py                  # rates 100..3200 req/s, 3 s each
    python benchmarks/bench_loadgen.py --seconds 2 --rates 100 400
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import yaml

from kubetwin.live import loadgen as lg


def _serve(sock: socket.socket, tokens: int) -> None:
    chunk = "data: " + json.dumps({"choices": [{"index": 0, "text": "tok "}]}) + "\n\n"
    usage = {"prompt_tokens": 32, "completion_tokens": tokens, "total_tokens": 32 + tokens}
    body = (chunk * tokens + "data: " + json.dumps({"choices": [], "usage": usage}) + "\n\ndata: [DONE]\n\n").encode()
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\n\r\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                hdr = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in hdr.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                writer.write(head + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, sock=sock, backlog=4096)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def trace_file(tmp: Path, rate: float, seconds: float) -> Path:
    doc = {"apiVersion": "kubetwin.io/v1alpha1", "kind": "RequestTrace", "metadata": {"name": f"r{rate:g}"},
           "spec": {"format": "generator", "target": {"kind": "InferencePool", "name": "p"}, "model": "m", "seed": 1,
                    "generator": {"rate": rate, "duration": f"{seconds}s", "promptTokens": 32, "outputTokens": 8}}}
    path = tmp / f"r{rate:g}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


async def bare(url: str, n: int, concurrency: int) -> float:
    """Closed-loop requests/s of httpx alone: `concurrency` workers streaming canned requests back to back."""
    body = {"model": "m", "prompt": "the " * 32, "max_tokens": 8, "stream": True}
    left = n
    shards = -(-concurrency // lg.POOL_SHARD)  # the loadgen's own client layout
    per = -(-concurrency // shards)
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(httpx.AsyncClient(limits=limits, timeout=30))
                   for _ in range(shards)]

        async def worker(client: httpx.AsyncClient) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with client.stream("POST", url + "/completions", json=body) as resp:
                    async for _ in resp.aiter_lines():
                        pass

        t = time.perf_counter()
        await asyncio.gather(*(worker(clients[i % shards]) for i in range(concurrency)))
        return n / (time.perf_counter() - t)


@contextlib.contextmanager
def canned_server(tokens: int = 8) -> Iterator[str]:
    """The canned SSE server in a child process for the duration; yields its base URL (.../v1)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    proc = mp.get_context("fork").Process(target=_serve, args=(sock, tokens), daemon=True)
    proc.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        proc.terminate()
        proc.join(5)
        sock.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rates", type=float, nargs="+", default=[100, 200, 400, 800, 1600, 3200])
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--bare", type=int, default=2000, help="requests of the bare-httpx baseline")
    args = ap.parse_args()
    with canned_server(args.tokens) as url:
        ceiling = asyncio.run(bare(url, args.bare, args.concurrency))
        print(f"bare httpx, closed loop, concurrency {args.concurrency}: {ceiling:.0f} req/s")
        best = 0.0
        with tempfile.TemporaryDirectory(prefix="loadgen-bench-") as tmp:
            for rate in args.rates:
                path = trace_file(Path(tmp), rate, args.seconds)
                t = time.perf_counter()
                s = lg.run(path, lg.Options(url, concurrency=args.concurrency, timeout=30))
                wall = time.perf_counter() - t
                o, c = s["serving"]["overall"], s["loadgen"]
                ok = o["completed"] == o["requests"] and c["send_lag_p99_seconds"] < 0.05
                best = max(best, rate) if ok else best
                print(f"offered {rate:6.0f} req/s: {o['requests']:6d} requests, completed {o['completed']:6d}, "
                      f"{o['completed'] / wall:7.0f} req/s over {wall:.2f} s, send lag p99 "
                      f"{1000 * c['send_lag_p99_seconds']:.1f} ms, TTFT p50 {1000 * o['ttft_seconds']['p50']:.1f} ms"
                      f" {'sustained' if ok else 'NOT sustained'}")
                if not ok:
                    break
        print(f"sustained open-loop rate: {best:.0f} req/s = {best / ceiling:.2f} x bare httpx's closed-loop "
              f"{ceiling:.0f} req/s")


if __name__ == "__main__":
    main()

"""Tiny fake OpenAI-compatible / vLLM backends for the live gateway and load generator tests: /v1/completions and
/v1/chat/completions (JSON or SSE streaming, one word per chunk), /v1/models and a vLLM-shaped /metrics
(vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc, vllm:lora_requests_info,
vllm:cache_config_info). Knobs make a backend slow, answer 5xx, hang, crash mid-stream, or serve a dead /metrics.
All of them run on one event loop in a background thread, listening on 127.0.0.1 free ports."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Knobs:
    tokens: int = 4  # words (= chunks) per completion unless the request's max_tokens is smaller
    token_delay: float = 0.0  # seconds between chunks
    first_delay: float = 0.0  # seconds before the response head
    status: int = 200  # != 200: answer that status with an OpenAI-style error
    hang: bool = False  # read the request, never answer
    crash_after: int | None = None  # close the connection after this many chunks
    metrics: str = "ok"  # "ok" | "hang" | "500"
    waiting: int = 0
    running: int | None = None  # None: the number of requests in flight
    kv: float = 0.0
    block_size: int = 16
    num_gpu_blocks: int = 1000


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    t: float


class FakeBackend:
    def __init__(self, fleet: FakeFleet, name: str, knobs: Knobs) -> None:
        self.fleet, self.name, self.knobs = fleet, name, knobs
        self.hits: list[Hit] = []
        self.completed = 0
        self.inflight = 0
        self.server: asyncio.Server | None = None
        self.port = 0
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _start(self, port: int = 0) -> None:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for h in lines[1:]:
                    if ":" in h:
                        k, v = h.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                if "chunked" in headers.get("transfer-encoding", "").lower():  # Envoy streams bodies chunked
                    parts = []
                    while True:
                        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                        if size == 0:
                            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                                pass
                            break
                        parts.append((await reader.readexactly(size + 2))[:-2])
                    raw = b"".join(parts)
                else:
                    n = int(headers.get("content-length", "0") or 0)
                    raw = await reader.readexactly(n) if n else b""
                if path.startswith("/metrics"):
                    if not await self._metrics(writer):
                        return
                    continue
                body = json.loads(raw) if raw else {}
                self.hits.append(Hit(path, headers, body, time.monotonic()))
                self.inflight += 1
                try:
                    ok = await self._complete(path, body, writer)
                finally:
                    self.inflight -= 1
                if not ok:
                    return
        except (ConnectionError, OSError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _metrics(self, writer: asyncio.StreamWriter) -> bool:
        k = self.knobs
        if k.metrics == "hang":
            await asyncio.sleep(3600)
            return False
        if k.metrics == "500":
            writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n")
            return True
        running = self.inflight if k.running is None else k.running
        m = "".join([
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n",
            "# TYPE vllm:num_requests_waiting gauge\n",
            f'vllm:num_requests_waiting{{engine="0",model_name="fake"}} {float(k.waiting)}\n',
            f'vllm:num_requests_running{{engine="0",model_name="fake"}} {float(running)}\n',
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="fake"}} {float(k.kv)}\n',
            f'vllm:lora_requests_info{{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""}} '
            f"{time.time()}\n",
            f'vllm:cache_config_info{{block_size="{k.block_size}",num_gpu_blocks="{k.num_gpu_blocks}"}} 1.0\n',
        ]).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: "
                     + str(len(m)).encode() + b"\r\n\r\n" + m)
        return True

    async def _complete(self, path: str, body: dict, writer: asyncio.StreamWriter) -> bool:
        k = self.knobs
        if k.hang:
            await asyncio.sleep(3600)
            return False
        if k.first_delay:
            await asyncio.sleep(k.first_delay)
        if path == "/v1/models":
            data = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(data)).encode() + b"\r\n\r\n" + data)
            return True
        if k.status != 200:
            data = json.dumps({"error": {"message": "fake failure", "type": "server_error", "code": k.status}}
                              ).encode()
            writer.write(f"HTTP/1.1 {k.status} Error\r\ncontent-type: application/json\r\ncontent-length: "
                         f"{len(data)}\r\n\r\n".encode() + data)
            return True
        chat = path.endswith("/chat/completions")
        n = min(k.tokens, int(body.get("max_tokens") or body.get("max_completion_tokens") or k.tokens))
        model = body.get("model", "fake")
        rid = f"cmpl-{self.name}-{len(self.hits)}"
        words = [f"w{i}" for i in range(n)]
        if not body.get("stream"):
            await asyncio.sleep(k.token_delay * n)
            text = " ".join(words)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": text, "finish_reason": "length"})
            data = json.dumps({"id": rid, "object": "chat.completion" if chat else "text_completion",
                               "created": 0, "model": model, "choices": [choice],
                               "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(data)).encode() + b"\r\n\r\n" + data)
            self.completed += 1
            return True
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for i, w in enumerate(words):
            if k.crash_after is not None and i >= k.crash_after:
                await writer.drain()
                writer.transport.abort()
                return False
            if k.token_delay and i:
                await asyncio.sleep(k.token_delay)
            text = w if i == 0 else " " + w
            delta = {"index": 0, "delta": {"content": text}, "finish_reason": None} if chat else {
                "index": 0, "text": text, "finish_reason": None}
            ev = json.dumps({"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                             "created": 0, "model": model, "choices": [delta]})
            self._chunk(writer, f"data: {ev}\n\n".encode())
            await writer.drain()
        self._chunk(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        self.completed += 1
        return True

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    async def _kill(self) -> None:
        if self.server is not None:
            self.server.close()
        for w in list(self._writers):
            w.transport.abort()
        self.server = None

    def kill(self) -> None:
        """Die as a process does: listening socket closed, every open connection reset."""
        self.fleet.call(self._kill())

    def revive(self) -> None:
        self.fleet.call(self._start(self.port))


@dataclass
class FakeFleet:
    """A background event loop hosting fake backends."""

    backends: list[FakeBackend] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def add(self, knobs: Knobs | None = None, name: str | None = None) -> FakeBackend:
        b = FakeBackend(self, name or f"b{len(self.backends)}", knobs or Knobs())
        self.call(b._start())
        self.backends.append(b)
        return b

    def by_address(self, addr: str) -> FakeBackend:
        return next(b for b in self.backends if b.address == addr)

    def close(self) -> None:
        for b in self.backends:
            if b.server is not None:
                try:
                    self.call(b._kill())
                except Exception:  # noqa: BLE001 - best effort at teardown
                    pass
        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(5)
        except Exception:  # noqa: BLE001 - teardown
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def generator_trace(tmp: Path, model: str, rate: float = 10.0, duration: str = "0.5s") -> Path:
    """A Scenario and a generated RequestTrace (8-token prompts, 6 output tokens) in tmp/trace.yaml, for loadgen."""
    import yaml

    objs = [{"apiVersion": "kubetwin.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
             "spec": {"duration": "1h", "seed": 3}},
            {"apiVersion": "kubetwin.io/v1alpha1", "kind": "RequestTrace",
             "metadata": {"name": "gen", "namespace": "default"},
             "spec": {"format": "generator", "target": {"kind": "InferencePool", "name": "pool"}, "model": model,
                      "generator": {"rate": rate, "duration": duration, "promptTokens": 8, "outputTokens": 6}}}]
    path = tmp / "trace.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return path

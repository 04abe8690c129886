"""vLLM's OpenAI-compatible HTTP server, emulated: starlette routes in vLLM's shapes over the twin's engine on the
wall clock (`realtime.RealtimeEngine`).

Shapes follow vllm-project/vllm vllm/entrypoints/openai/protocol.py and serving_completion.py / serving_chat.py:
completions and chat completions, streamed as server-sent events (`data: {json}\\n\\n`, one chunk per token, the
last token's chunk carrying finish_reason "length", then with stream_options.include_usage a chunk with empty
choices and `usage`, then `data: [DONE]`); a chat stream's first chunk carries the assistant role and comes with the
first token (vLLM sends it on the engine's first output). Errors are vLLM's ErrorResponse,
{"error": {"message", "type", "param", "code"}} with code the HTTP status. /v1/models lists the served model and each
LoRA adapter (`parent` = the base model, `root` = the adapter's path). /health answers 200 once ready.

Twin assumptions: the tokenizer is white space (kubetwin.live.prompts), a request generates exactly its max_tokens
(vLLM's completions default 16; chat: max_model_len - prompt), n > 1, logprobs and stop strings are not modelled
(ignored), and a chat prompt is its messages' text without a chat template.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator
from json.encoder import encode_basestring_ascii
from typing import IO, Any

from pydantic import TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kubetwin.live.emulator.config import EmulatorConfig, Served, build_served
from kubetwin.live.emulator.faults import EmulatedCrash, Faults
from kubetwin.live.emulator.metrics import CONTENT_TYPE, EmulatorMetrics
from kubetwin.live.emulator.realtime import RealtimeEngine, Stream
from kubetwin.live.prompts import chat_prompt, output_text, tokens_or_count
from kubetwin.live.requestbody import RequestError, check_length, decode_body_async, error_json, too_large
from kubetwin.live.requeststart import REQUEST_ID_HEADER, REQUEST_START_HEADER
from kubetwin.live.requeststart import parse as parse_request_start

# vLLM's error types by HTTP status (serving_engine.py create_error_response: the exception class's name)
ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError", 503: "ServiceUnavailable"}
HANG_S = 3600.0  # how long a hung /metrics or stream waits (a client's timeout ends it first)
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM CompletionRequest.max_tokens default


def _dumps(obj: object) -> str:
    """Compact JSON, as pydantic's model_dump_json writes vLLM's chunks."""
    return json.dumps(obj, separators=(",", ":"))


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse(error_json(status, message, ERROR_TYPES.get(status, "BadRequestError")), status_code=status)


_LAX_INT: TypeAdapter[int | None] = TypeAdapter(int | None)


def lax_int(field: str, value: object) -> int | None | JSONResponse:
    """An integer field as vLLM's pydantic request model reads it (lax mode: "5", 5.0 and true are 5, 5, 1); else
    vLLM's 400 for a RequestValidationError, its message built from the errors as vLLM builds it
    (vllm/entrypoints/serve/utils/server_utils.py validation_exception_handler: "1 validation error:" and each
    error dict, loc ('body', field))."""
    try:
        return _LAX_INT.validate_python(value)
    except ValidationError as exc:
        e = exc.errors()[0]
        shown = {"type": e["type"], "loc": ("body", field), "msg": e["msg"], "input": e["input"]}
        return error(400, f"1 validation error:\n  {shown}")


class Emulator:
    """The server's state: the engine on the wall clock, its metrics and faults."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.served: Served = build_served(config)
        self.metrics = EmulatorMetrics(self.served)
        self.rt = RealtimeEngine(self.served.engine, config.time_scale, on_token=self.metrics.on_token,
                                 on_done=self.metrics.on_done)
        self.metrics.lag_source = self.rt
        self.faults = Faults(config)
        self.created = int(time.time())
        self.task: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- request parsing
    def _target(self, body: dict) -> tuple[str, str | None] | JSONResponse:
        """(the model name to echo, the LoRA adapter or None) for the body's `model`; 404 for an unknown model
        (vllm serving_engine.py _check_model: "The model `X` does not exist.")."""
        model = body.get("model")
        names = self.served.model_names
        if model is None or model in names:
            return (model or names[0]), None
        if model in self.served.adapters:
            return model, model
        return error(404, f"The model `{model}` does not exist.")

    async def _body(self, request: HttpRequest) -> dict[str, Any]:
        """The body as a JSON object, read up to the cap (413 past it, from the Content-Length before reading any
        of it), decoded by the rule every live server shares (live.requestbody)."""
        limit = self.config.max_request_body_bytes
        check_length(request.headers.get("content-length"), limit)
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            parts.append(chunk)
        return await decode_body_async(b"".join(parts), limit)

    async def _admit(self, request: HttpRequest, chat: bool) -> tuple[dict, str, Stream] | Response:
        # when the request reached this server, or the front proxy before it (X-Request-Start): from there on its
        # way to the engine is part of the API-server share the engine's step model adds (live.emulator.realtime)
        received = self.rt.clock()
        proxied = parse_request_start(request.headers.get(REQUEST_START_HEADER))
        if proxied is not None:
            received -= max(0.0, time.time() - proxied)
        if not self.faults.ready():
            return error(503, "The server is starting up (--startup-delay).")
        try:
            body = await self._body(request)
        except RequestError as exc:
            return error(exc.status, exc.message)
        target = self._target(body)
        if isinstance(target, Response):
            return target
        model, lora = target
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list):
                return error(400, "messages: Field required")
            prompt = chat_prompt(m for m in messages if isinstance(m, dict))
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        else:
            raw = body.get("prompt")
            if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
                raw = raw[0]
            if isinstance(raw, list) and all(isinstance(t, int) for t in raw):
                raw = " ".join(str(t) for t in raw)  # token ids: one token each
            if not isinstance(raw, str):
                return error(400, "prompt: a string (or one string, or a list of token ids) is required")
            prompt = raw
            max_tokens = body.get("max_tokens", COMPLETIONS_DEFAULT_MAX_TOKENS)
        max_tokens = lax_int("max_tokens", max_tokens)
        if isinstance(max_tokens, Response):
            return max_tokens
        n_prompt, tokens = await tokens_or_count(prompt)  # a huge prompt counted in slices, never held in a list
        if max_tokens is None:  # vLLM: the rest of the context
            max_tokens = max(1, self.served.max_model_len - n_prompt)
        if max_tokens < 1:  # vLLM SamplingParams._verify_args
            return error(400, f"max_tokens must be at least 1, got {max_tokens}.")
        if not n_prompt:
            return error(400, "The prompt is empty.")
        if self.faults.inject_error():
            return error(500, "Injected failure (--error-rate).")
        priority = body.get("priority", 0)
        priority = priority if isinstance(priority, int) else 0
        # vLLM serves a lower `priority` value first; the engine's Request.priority is InferenceObjective's sign
        s = self.rt.submit(prompt, max_tokens, model=model, lora=lora, priority=-priority, prompt_tokens=n_prompt,
                           tokens=tokens, received=received)
        if s.rejected:
            return error(400, s.req.reason)
        return body, model, s

    # ---------------------------------------------------------------- responses
    async def _words(self, s: Stream) -> AsyncIterator[str]:
        """The stream's tokens as they become visible, with the fault flags applied."""
        words = output_text(s.total, seed=s.req.id)
        limit, kind = self.faults.limit()
        sent = 0
        while True:
            target = s.visible if limit is None else min(s.visible, limit)
            while sent < target:
                yield words[sent]
                sent += 1
            if limit is not None and sent >= limit and sent < s.total:
                if kind == "crash":
                    raise EmulatedCrash(f"--crash-after-tokens {limit}")
                await asyncio.sleep(HANG_S)
                return
            if sent >= s.total:
                return
            s.event.clear()
            await s.event.wait()

    def _usage(self, s: Stream, n: int) -> dict[str, Any]:
        p = s.req.prompt_tokens
        return {"prompt_tokens": p, "total_tokens": p + n, "completion_tokens": n, "prompt_tokens_details": None}

    async def _sse(self, body: dict, model: str, s: Stream, chat: bool, rid: str) -> AsyncIterator[bytes]:
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        opts = body.get("stream_options") or {}
        usage = isinstance(opts, dict) and bool(opts.get("include_usage"))

        # every chunk is this head, one choice, this tail (the bytes pydantic would write, built once per stream)
        head = (f'data: {{"id":{_dumps(rid)},"object":{_dumps(obj)},"created":{created},"model":{_dumps(model)},'
                f'"choices":[').encode()
        tail = b"]}\n\n"
        key = '{"index":0,"delta":{"content":' if chat else '{"index":0,"text":'
        close = "}" if chat else ""
        n = 0
        async for word in self._words(s):
            if chat and n == 0:
                yield head + b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,' \
                             b'"finish_reason":null}' + tail
            n += 1
            finish = '"length"' if n == s.total else "null"
            text = encode_basestring_ascii(word if n == 1 else " " + word)
            yield head + (f'{key}{text}{close},"logprobs":null,"finish_reason":{finish},'
                          f'"stop_reason":null}}').encode() + tail
        if usage:
            yield b"data: " + _dumps({"id": rid, "object": obj, "created": created, "model": model,
                                          "choices": [], "usage": self._usage(s, n)}).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def _whole(self, model: str, s: Stream, chat: bool, rid: str) -> AsyncIterator[bytes]:
        """A non-streamed answer, sent once the last token is visible (a fault cuts or stalls it first)."""
        words = [w async for w in self._words(s)]
        text = " ".join(words)
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                      "logprobs": None, "finish_reason": "length", "stop_reason": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None,
                      "prompt_logprobs": None}
        yield _dumps({"id": rid,
                          "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                          "model": model, "choices": [choice], "usage": self._usage(s, len(words))}).encode()

    async def completions(self, request: HttpRequest, chat: bool = False) -> Response:
        admitted = await self._admit(request, chat)
        if isinstance(admitted, Response):
            return admitted
        body, model, s = admitted
        # vLLM's response id: the client's X-Request-Id when it sent one (serving_engine.py _base_request_id), else
        # a random one, after "cmpl-" / "chatcmpl-"
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{request.headers.get(REQUEST_ID_HEADER) or uuid.uuid4().hex}"
        if self.faults.limit() == (0, "hang"):  # a wedged server: not even the status line
            await asyncio.sleep(HANG_S)
        if body.get("stream"):
            return StreamingResponse(self._sse(body, model, s, chat, rid), media_type="text/event-stream")
        if self.faults.limit()[0] is not None:  # headers first, so a cut or stall happens mid-response
            return StreamingResponse(self._whole(model, s, chat, rid), media_type="application/json")
        payload = b"".join([b async for b in self._whole(model, s, chat, rid)])
        return Response(payload, media_type="application/json")

    async def chat(self, request: HttpRequest) -> Response:
        return await self.completions(request, chat=True)

    async def models(self, request: HttpRequest) -> Response:
        if not self.faults.ready():
            return error(503, "The server is starting up (--startup-delay).")

        def card(name: str, root: str, parent: str | None, max_len: int | None) -> dict[str, Any]:
            return {"id": name, "object": "model", "created": self.created, "owned_by": "vllm", "root": root,
                    "parent": parent, "max_model_len": max_len, "permission": [{
                        "id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                        "created": self.created, "allow_create_engine": False, "allow_sampling": True,
                        "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                        "allow_fine_tuning": False, "organization": "*", "group": None, "is_blocking": False}]}

        base = self.served.model_names[0]
        data = [card(n, self.served.args.model, None, self.served.max_model_len) for n in self.served.model_names]
        data += [card(name, path, base, None) for name, path in self.served.adapters.items()]
        return JSONResponse({"object": "list", "data": data})

    async def health(self, request: HttpRequest) -> Response:
        return Response(status_code=200 if self.faults.ready() else 503)

    async def prom(self, request: HttpRequest) -> Response:
        mode = self.faults.metrics_fail
        if mode == "error":
            return Response("metrics unavailable (--metrics-fail error)", status_code=500)
        if mode == "hang":
            await asyncio.sleep(HANG_S)
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.task = asyncio.create_task(self.rt.run())
        try:
            yield
        finally:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def build_app(config: EmulatorConfig) -> Starlette:
    """The emulated vLLM server as an ASGI app (EmulatorConfigError when vLLM would refuse the configuration).
    `app.state.emulator` is the Emulator (tests read its engine)."""
    emu = Emulator(config)
    app = Starlette(routes=[
        Route("/v1/completions", emu.completions, methods=["POST"]),
        Route("/v1/chat/completions", emu.chat, methods=["POST"]),
        Route("/v1/models", emu.models, methods=["GET"]),
        Route("/health", emu.health, methods=["GET"]),
        Route("/metrics", emu.prom, methods=["GET"]),
    ], lifespan=emu.lifespan)
    app.state.emulator = emu
    return app


def uvicorn_config(app: Starlette, config: EmulatorConfig, **kw: Any) -> Any:
    """uvicorn.Config for the emulator, bounded as live.emulator.http describes: the head timer and 431 (the h11
    protocol subclass), vLLM's --h11-max-incomplete-event-size, uvicorn's limit_concurrency, and vLLM's 5 s
    keep-alive (VLLM_HTTP_TIMEOUT_KEEP_ALIVE)."""
    import uvicorn

    from kubetwin.live.emulator.http import protocol_class

    return uvicorn.Config(app, http=protocol_class(config.header_timeout), log_level="warning",
                          timeout_graceful_shutdown=1, limit_concurrency=config.limit_concurrency,
                          h11_max_incomplete_event_size=config.h11_max_incomplete_event_size(),
                          timeout_keep_alive=5, **kw)


class EmulatorThread:
    """An emulator on a loopback port (0: a free one) in a background thread, for tests and notebooks:
    `with EmulatorThread(config) as emu: openai.OpenAI(base_url=emu.url + "/v1", ...)`."""

    def __init__(self, config: EmulatorConfig, start_timeout: float = 20.0) -> None:
        import uvicorn

        self.app = build_app(config)
        self.emulator: Emulator = self.app.state.emulator
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((config.host, config.port))
        self.host, self.port = self.sock.getsockname()[:2]
        self.server = uvicorn.Server(uvicorn_config(self.app, config, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                       name=f"emulator-{self.port}")
        self.start_timeout = start_timeout

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> EmulatorThread:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the emulator did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> EmulatorThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class EmulatorProcess:
    """An emulator as a `kubetwin emulate vllm` subprocess (its own interpreter: no GIL shared with the caller), on
    a free loopback port when config.port is 0; `url` once started (it answers /health, 503 during
    --startup-delay)."""

    def __init__(self, config: EmulatorConfig, start_timeout: float = 60.0) -> None:
        config.validate()
        self.config = config
        port = config.port
        if port == 0:
            with socket.socket() as s:
                s.bind((config.host, 0))
                port = int(s.getsockname()[1])
        self.url = f"http://{config.host}:{port}"
        c = config
        self.argv = [sys.executable, "-m", "kubetwin.cli.main", "emulate", "vllm", "--model", c.model, "--gpu", c.gpu,
                     "--host", c.host, "--port", str(port), "--time-scale", str(c.time_scale),
                     "--startup-delay", str(c.startup_delay), "--error-rate", str(c.error_rate), "--seed", str(c.seed)]
        for flag, value in (("--crash-after-tokens", c.crash_after_tokens),
                            ("--hang-after-tokens", c.hang_after_tokens), ("--metrics-fail", c.metrics_fail),
                            ("--max-request-body-bytes", c.max_request_body_bytes),
                            ("--header-timeout", c.header_timeout), ("--limit-concurrency", c.limit_concurrency)):
            if value is not None:
                self.argv += [flag, str(value)]
        self.argv += list(c.vllm_args)
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None

    def start(self) -> EmulatorProcess:
        import httpx

        # stderr to a file, not a pipe nobody drains (a crash fault's tracebacks would fill it and stall the server)
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                err = self.log.read().decode(errors="replace")
                self.stop()
                raise RuntimeError(f"the emulator exited: {err.strip()}")
            try:
                httpx.get(self.url + "/health", timeout=1.0)
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the emulator did not start")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
        if self.log is not None:
            self.log.close()
            self.log = None

    def __enter__(self) -> EmulatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

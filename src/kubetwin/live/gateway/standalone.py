"""The standalone gateway: the live picker in front of OpenAI-compatible servers as a lean asyncio HTTP/1.1 proxy,
for users without Envoy. Kept small for speed: asyncio streams, no framework; upstream keep-alive connections pooled
per endpoint; the upstream's response bytes are relayed as they arrive (an SSE stream chunk by chunk, unbuffered),
with only the framing (Content-Length or chunked) tracked to know when a response ends.

Behaviour, each as the Envoy + EPP pair does it unless noted:
- the picker answers 429 (a sheddable request under saturation) or 503 (no endpoint after the hold) as a local reply
  with an OpenAI-style JSON error;
- the request goes to the chosen endpoint with `x-gateway-destination-endpoint` set; the response carries
  `x-gateway-destination-endpoint-served` (the endpoint picker protocol's served-endpoint key, here as a header);
- before the first byte reaches the client, a connect error, a 5xx answer or no response headers within
  firstByteTimeout sends the request to another endpoint, up to maxRetries times (Envoy's retry_on
  connect-failure,5xx with a previous-hosts predicate); after it, an upstream that dies ends the client's response
  abruptly (nothing can be retried once tokens were relayed);
- SIGTERM: stop accepting, let in-flight requests finish for up to drainTimeout, then close (Envoy's drain)."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from kubetwin.live.gateway.accesslog import AccessLog
from kubetwin.live.gateway.config import GatewayConfig, split_hostport
from kubetwin.live.gateway.metrics import CONTENT_TYPE
from kubetwin.live.gateway.picker import DEST_HEADER, OBJECTIVE_HEADER, SERVED_HEADER, LivePicker
from kubetwin.live.requestbody import (
    DEFAULT_MAX_BODY_BYTES,
    RequestError,
    check_length,
    decode_body_async,
    gateway_error_body,
    too_large,
)
from kubetwin.live.requeststart import REQUEST_ID_HEADER, REQUEST_START_HEADER, stamp

HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"proxy-connection", b"upgrade",
       b"te", b"trailer", DEST_HEADER.encode()}
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 408: "Request Timeout", 413: "Payload Too Large",
           429: "Too Many Requests", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
UPSTREAM_CONNECT = "upstream connect error or disconnect/reset before headers"  # Envoy's local reply words
READ_CHUNK = 65536
# the local replies' error types
LINGER_S = 2.0  # after an error reply that closes, what the client still sends is dropped this long (nginx's
# lingering close), so the reply is not lost to a TCP reset


class BadRequest(RequestError):
    """A request the gateway cannot parse as HTTP/1.1: 400."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)


class IdleTimeout(Exception):
    """No byte of a next request within the head timeout: the connection is closed without a reply."""


async def read_request(reader: asyncio.StreamReader, max_body: int = DEFAULT_MAX_BODY_BYTES,
                       head_timeout: float | None = None) -> tuple[bytes, bytes, bytes, list[tuple[bytes, bytes]],
                                                                    bytes] | None:
    """(method, target, version, headers with lower-cased names, body) of one HTTP/1.1 request; None at EOF.
    RequestError for a request refused before routing: 400 (malformed), 408 (head not in within head_timeout once
    begun, Envoy's request_headers_timeout), 413 (body over max_body: a Content-Length over it is refused before a
    byte of the body is read, a chunked body as soon as it passes it), 431 (head over the reader's limit, Envoy's
    max_request_headers_kb); IdleTimeout when no byte came within head_timeout."""
    loop = asyncio.get_running_loop()
    deadline = None if head_timeout is None else loop.time() + head_timeout
    try:
        async with asyncio.timeout_at(deadline):
            first = await reader.read(1)
    except TimeoutError:
        raise IdleTimeout from None
    if not first:
        return None
    try:
        async with asyncio.timeout_at(deadline):
            head = first + await reader.readuntil(b"\r\n\r\n")
    except TimeoutError:
        raise RequestError(408, "request timeout") from None
    except asyncio.IncompleteReadError as e:
        if not (first + e.partial).strip():  # a stray line end before the close
            return None
        raise BadRequest("incomplete request head") from e
    except asyncio.LimitOverrunError as e:
        raise RequestError(431, "Request Header Fields Too Large") from e
    lines = head[:-4].split(b"\r\n")
    try:
        method, target, version = lines[0].split(b" ", 2)
    except ValueError as e:
        raise BadRequest("bad request line") from e
    headers: list[tuple[bytes, bytes]] = []
    length = 0
    chunked = False
    for line in lines[1:]:
        k, sep, v = line.partition(b":")
        if not sep:
            raise BadRequest("bad header line")
        k = k.strip().lower()
        v = v.strip()
        headers.append((k, v))
        if k == b"content-length":
            length = check_length(v, max_body)
        elif k == b"transfer-encoding" and b"chunked" in v.lower():
            chunked = True
    if chunked:
        parts = []
        size_total = 0
        while True:
            line = (await reader.readuntil(b"\r\n")).split(b";")[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise BadRequest("invalid chunk size") from None
            if size < 0:
                raise BadRequest("invalid chunk size")
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            size_total += size
            if size_total > max_body:
                raise too_large(max_body)
            parts.append((await reader.readexactly(size + 2))[:-2])
        body = b"".join(parts)
    else:
        body = await reader.readexactly(length) if length else b""
    return method, target, version, headers, body


def local_reply(status: int, message: str, keep_alive: bool = True, extra: bytes = b"") -> bytes:
    """An OpenAI-style JSON error as the gateway's own answer."""
    body = gateway_error_body(status, message)
    return (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{'' if keep_alive else 'connection: close' + chr(13) + chr(10)}"
            ).encode() + extra + b"\r\n" + body


class Framing:
    """Tracks where an HTTP/1.1 response body ends while its bytes are relayed untouched: Content-Length, chunked
    (sizes parsed, data skipped) or until the connection closes."""

    __slots__ = ("mode", "left", "buf", "state", "done")

    def __init__(self, mode: str, length: int = 0) -> None:
        self.mode, self.left, self.buf, self.state = mode, length, b"", "size"
        self.done = mode == "length" and length == 0

    def feed(self, data: bytes) -> None:
        if self.mode == "length":
            self.left -= len(data)
            self.done = self.left <= 0
            return
        if self.mode != "chunked":
            return
        if self.buf:  # a size or trailer line cut by the previous read
            data, self.buf = self.buf + data, b""
        pos, n = 0, len(data)
        while pos < n and not self.done:
            if self.state == "data":
                take = min(self.left, n - pos)
                self.left -= take
                pos += take
                if self.left == 0:
                    self.state = "size"
                continue
            end = data.find(b"\r\n", pos)
            if end < 0:
                self.buf = data[pos:]
                return
            line = data[pos:end]
            pos = end + 2
            if self.state == "size":
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.state = "trailer"
                else:
                    self.state, self.left = "data", size + 2
            elif self.state == "trailer" and not line:
                self.done = True


class UpstreamPool:
    """Idle keep-alive connections per endpoint."""

    def __init__(self, connect_timeout: float) -> None:
        self.timeout = connect_timeout
        self.idle: dict[str, deque[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}

    async def acquire(self, ep: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        q = self.idle.get(ep)
        while q:
            r, w = q.pop()
            if not r.at_eof() and not w.is_closing():
                return r, w, True
            w.close()
        host, _, port = ep.rpartition(":")
        r, w = await asyncio.wait_for(asyncio.open_connection(host, int(port)), self.timeout)
        return r, w, False

    def release(self, ep: str, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.idle.setdefault(ep, deque()).append(conn)

    def close(self) -> None:
        for q in self.idle.values():
            for _, w in q:
                w.close()
        self.idle.clear()


class StandaloneGateway:
    def __init__(self, cfg: GatewayConfig, picker: LivePicker | None = None) -> None:
        self.cfg = cfg
        self.picker = picker or LivePicker(cfg)
        self.upstreams = UpstreamPool(cfg.connectTimeout)
        self.log = AccessLog(cfg.accessLog)
        self.server: asyncio.Server | None = None
        self.admin: asyncio.Server | None = None
        self.inflight = 0
        self.draining = False
        self._idle_clients: set[asyncio.StreamWriter] = set()
        self._clients: set[asyncio.StreamWriter] = set()
        self._quiet = asyncio.Event()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    @property
    def admin_port(self) -> int:
        assert self.admin is not None
        return int(self.admin.sockets[0].getsockname()[1])

    async def start(self) -> None:
        await self.picker.start()
        host, port = split_hostport(self.cfg.listen)
        # the reader's limit bounds the request head (Envoy's max_request_headers_kb): past it, 431
        # (backlog: uvicorn's 2048, so a burst of connections is taken and answered, not left to SYN retries)
        self.server = await asyncio.start_server(self._client, host, port, limit=self.cfg.maxRequestHeadersKb * 1024,
                                                 backlog=2048)
        self.admin = await start_admin(self.picker, self.cfg.adminListen)

    async def drain(self, timeout: float | None = None) -> None:
        """Stop accepting, close idle keep-alive connections, wait for in-flight requests (bounded), close all."""
        self.draining = True
        if self.server is not None:
            self.server.close()
        for w in list(self._idle_clients):
            w.close()
        if self.inflight:
            self._quiet.clear()
            try:
                await asyncio.wait_for(self._quiet.wait(), self.cfg.drainTimeout if timeout is None else timeout)
            except TimeoutError:
                pass
        for w in list(self._clients):
            w.close()
        if self.admin is not None:
            self.admin.close()
        self.upstreams.close()
        await self.picker.stop()
        self.log.close()

    # ---- the client side ---------------------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._clients) >= self.cfg.maxConnections:  # uvicorn's limit_concurrency answer: 503, then close
            writer.write(local_reply(503, "Exceeded concurrency limit.", keep_alive=False))
            await self._linger_close(reader, writer)
            return
        self._clients.add(writer)
        linger = False
        try:
            while not self.draining:
                self._idle_clients.add(writer)
                try:
                    got = await read_request(reader, self.cfg.maxRequestBodyBytes, self.cfg.requestHeadersTimeout)
                except (RequestError, ValueError) as e:
                    if not isinstance(e, RequestError):  # a parse this module missed: still a 400, in words
                        e = BadRequest("malformed request")
                    writer.write(local_reply(e.status, e.message, keep_alive=False))
                    self.log.write(objective="", model="", priority=None, endpoint=None, status=e.status,
                                   ttft_ms=None, duration_ms=0.0, retries=0, error=e.message)
                    linger = True
                    break
                except (IdleTimeout, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        asyncio.CancelledError):
                    break  # an idle or cancelled connection (shutdown) ends quietly
                finally:
                    self._idle_clients.discard(writer)
                if got is None:
                    break
                method, target, version, headers, body = got
                keep = version == b"HTTP/1.1" and not any(k == b"connection" and b"close" in v.lower()
                                                          for k, v in headers)
                self.inflight += 1
                try:
                    ok = await self._proxy(method, target, headers, body, writer)
                finally:
                    self.inflight -= 1
                    if self.draining and not self.inflight:
                        self._quiet.set()
                if not ok or not keep:
                    break
        finally:
            self._clients.discard(writer)
            self._idle_clients.discard(writer)
            if linger and not self.draining:
                await self._linger_close(reader, writer)
            else:
                writer.close()

    @staticmethod
    async def _linger_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Half-close after an error reply, drop what the client still sends for up to LINGER_S, then close: a
        close with unread data would send a reset that can destroy the reply before the client reads it."""
        try:
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
            async with asyncio.timeout(LINGER_S):
                while await reader.read(READ_CHUNK):
                    pass
        except (TimeoutError, ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _proxy(self, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
                     client: asyncio.StreamWriter) -> bool:
        """Route and relay one request; False when the client connection must close afterwards."""
        t0 = time.perf_counter()
        received = time.time()
        hmap = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
        try:  # the rule the emulator applies too (live.requestbody): a bad body never reaches a replica
            decoded = await decode_body_async(body, self.cfg.maxRequestBodyBytes)
        except RequestError as exc:
            client.write(local_reply(exc.status, exc.message))
            self.picker.metrics.count_refused(exc.status)
            self.log.write(objective=hmap.get(OBJECTIVE_HEADER, ""), model="", priority=None, endpoint=None,
                           status=exc.status, ttft_ms=None, duration_ms=round((time.perf_counter() - t0) * 1e3, 3),
                           retries=0, error=exc.message, request_id=hmap.get(REQUEST_ID_HEADER))
            return True
        req = self.picker.request(decoded, hmap)
        model = self.picker.metrics.model_label(req.model)
        objective = hmap.get(OBJECTIVE_HEADER, "")
        fwd = b"".join(k + b": " + v + b"\r\n" for k, v in headers if k not in HOP)
        if REQUEST_START_HEADER not in hmap:  # the first proxy stamps it (live.requeststart)
            fwd += f"{REQUEST_START_HEADER}: {stamp(received)}\r\n".encode()
        tried: set[str] = set()
        retries = 0
        status = 0
        endpoint = ""
        error = ""
        ttft = -1.0
        keep = True
        m = self.picker.metrics
        m.requests.labels(model, model).inc()
        try:
            while True:
                p = await self.picker.pick(req, frozenset(tried))
                if p.endpoint is None:
                    status = p.status if not tried else 503
                    error = p.reason if not tried else (error or UPSTREAM_CONNECT)
                    client.write(local_reply(status, error))
                    return True
                endpoint = ep = p.endpoint
                can_retry = retries < self.cfg.maxRetries and len(self.picker.state.snap) > len(tried) + 1
                try:
                    r, w, head, reused = await self._send(ep, method, target, fwd, body)
                except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ValueError) as exc:
                    self.picker.finished(req, ep)
                    tried.add(ep)
                    error = f"{UPSTREAM_CONNECT}: {type(exc).__name__}"
                    if can_retry:
                        retries += 1
                        m.retries.inc()
                        continue
                    status = 503
                    client.write(local_reply(503, error))
                    return True
                lines = head[:-4].split(b"\r\n")
                status = int(lines[0].split(b" ", 2)[1])
                if status >= 500 and can_retry:
                    w.close()
                    self.picker.finished(req, ep)
                    tried.add(ep)
                    retries += 1
                    m.retries.inc()
                    error = f"upstream {status}"
                    continue
                error = ""
                framing = Framing("close")
                up_close = False
                for line in lines[1:]:
                    k, _, v = line.partition(b":")
                    k = k.strip().lower()
                    if k == b"content-length":
                        if framing.mode != "chunked":
                            framing = Framing("length", int(v))
                    elif k == b"transfer-encoding" and b"chunked" in v.lower():
                        framing = Framing("chunked")
                    elif k == b"connection" and b"close" in v.lower():
                        up_close = True
                if method == b"HEAD" or status in (204, 304) or 100 <= status < 200:
                    framing = Framing("length", 0)
                eol = head.index(b"\r\n") + 2
                client.write(head[:eol] + SERVED_HEADER.encode() + b": " + ep.encode() + b"\r\n" + head[eol:])
                done, ttft, err = await self._relay(r, framing, client, t0)
                self.picker.finished(req, ep)
                if not done:
                    error = err
                    w.close()
                    keep = False
                    return False
                if up_close or framing.mode == "close":
                    w.close()
                    keep = framing.mode != "close"
                else:
                    self.upstreams.release(ep, (r, w))
                return keep
        finally:
            dur = time.perf_counter() - t0
            if status >= 400 or error:
                m.count_error(model, status)
            else:
                m.duration.labels(model, model).observe(dur)
            self.log.write(objective=objective, model=req.model, priority=req.priority, endpoint=endpoint,
                           status=status, ttft_ms=round(ttft * 1e3, 3) if ttft >= 0 else None,
                           duration_ms=round(dur * 1e3, 3), retries=retries, error=error or None,
                           request_id=hmap.get(REQUEST_ID_HEADER))

    async def _send(self, ep: str, method: bytes, target: bytes, fwd: bytes, body: bytes
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes, bool]:
        """Write the request on a pooled (else new) connection and read the response head; a reused connection that
        the server had closed is retried once on a new one (it never reached the server)."""
        for attempt in range(2):
            r, w, reused = await self.upstreams.acquire(ep) if attempt == 0 else (*await self._fresh(ep), False)
            w.write(method + b" " + target + b" HTTP/1.1\r\n" + fwd + DEST_HEADER.encode() + b": " + ep.encode()
                    + b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            try:
                head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), self.cfg.firstByteTimeout)
                return r, w, head, reused
            except asyncio.IncompleteReadError as e:
                w.close()
                if not (reused and not e.partial):
                    raise
            except BaseException:
                w.close()
                raise
        raise ConnectionResetError("upstream closed the connection")

    async def _fresh(self, ep: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, _, port = ep.rpartition(":")
        return await asyncio.wait_for(asyncio.open_connection(host, int(port)), self.cfg.connectTimeout)

    async def _relay(self, r: asyncio.StreamReader, framing: Framing, client: asyncio.StreamWriter, t0: float
                     ) -> tuple[bool, float, str]:
        """Relay the body as it arrives: (complete, TTFT, error)."""
        ttft = -1.0
        if framing.done:
            await client.drain()
            return True, time.perf_counter() - t0, ""
        idle = self.cfg.streamIdleTimeout
        transport = client.transport
        try:
            async with asyncio.timeout(idle) as cm:
                loop = asyncio.get_running_loop()
                while not framing.done:
                    data = await r.read(READ_CHUNK)
                    if not data:
                        if framing.mode == "close":
                            return True, ttft, ""
                        return False, ttft, "upstream closed mid-response"
                    if ttft < 0:
                        ttft = time.perf_counter() - t0
                    framing.feed(data)
                    if client.is_closing():
                        return False, ttft, "client closed"
                    client.write(data)
                    if transport.get_write_buffer_size() > READ_CHUNK:
                        await client.drain()
                    cm.reschedule(loop.time() + idle)
        except TimeoutError:
            return False, ttft, "upstream idle timeout"
        except (ConnectionError, OSError) as exc:
            return False, ttft, f"upstream reset: {type(exc).__name__}"
        return True, ttft, ""


async def start_admin(picker: LivePicker, address: str) -> asyncio.Server:
    """The admin port: GET /metrics (the gateway's Prometheus metrics), /healthz."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                got = await read_request(reader, head_timeout=picker.cfg.requestHeadersTimeout)
                if got is None:
                    break
                path = got[1].split(b"?")[0]
                if path == b"/metrics":
                    body, ctype, status = picker.metrics.render(), CONTENT_TYPE, 200
                elif path in (b"/healthz", b"/readyz", b"/health"):
                    body, ctype, status = b"ok", "text/plain", 200
                else:
                    body, ctype, status = b"not found", "text/plain", 404
                writer.write(f"HTTP/1.1 {status} {REASONS[status]}\r\ncontent-type: {ctype}\r\n"
                             f"content-length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
        except (RequestError, IdleTimeout, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, asyncio.CancelledError):
            pass  # a cancelled handler (shutdown) ends quietly
        finally:
            writer.close()

    host, port = split_hostport(address)
    return await asyncio.start_server(handle, host, port)


async def serve(cfg: GatewayConfig, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None
                ) -> StandaloneGateway:
    """Run a standalone gateway until `stop` is set (or forever), then drain."""
    gw = StandaloneGateway(cfg)
    await gw.start()
    if ready is not None:
        ready.set()
    await (stop.wait() if stop is not None else asyncio.Event().wait())
    await gw.drain()
    return gw

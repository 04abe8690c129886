"""Scraping the model servers' /metrics as the EPP's data layer does (GIE pkg/epp/datalayer / backend/metrics): every
--refresh-metrics-interval (50 ms) each endpoint's vLLM metrics are fetched with a bounded timeout; a failed scrape
keeps the last values and their update time, so the endpoint turns stale once metricsStalenessThreshold (2 s, the
EPP's --metrics-staleness-threshold) has passed since its last good scrape. The twin's saturation detector counts a
stale endpoint as saturated (serving.router.saturation), as GIE's utilization detector does.

One twin choice: an endpoint whose /metrics port refuses connections is taken out of the candidate set (it stands in
for the kubelet's readiness probe, which removes a dead pod from the InferencePool's endpoints), and comes back on
its next good scrape. A metrics endpoint that hangs or answers an error only goes stale.

Each scrape's values reach the picker as soon as its response is parsed, as in GIE: the per-endpoint Collector's
extractor swaps the endpoint's metrics pointer at once (GIE@1748e829 pkg/epp/datalayer/collector.go,
framework/plugins/datalayer/extractor/metrics/extractor.go `ep.UpdateMetrics(clone)`, framework/interface/datalayer/
endpoint.go `atomic.Pointer[Metrics]`) and the scheduler reads the latest pointer per request. So a scrape marks the
snapshot dirty and the next pick rebuilds it (PoolState.dirty); the metrics a pick reads are then 0-50 ms old plus
the scrape's own round trip, not up to twice that (a snapshot rebuilt on a second 50 ms clock, as before)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kubetwin.serving.types import EndpointSnapshot

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # vLLM >= 0.10, and the older name
LORA_INFO = "vllm:lora_requests_info"
CACHE_INFO = "vllm:cache_config_info"
NEVER = -1e18  # Metrics.updated of an endpoint never scraped well


@dataclass(slots=True)
class Metrics:
    """One endpoint's last scraped state (GIE's backend metrics: WaitingQueueSize, RunningQueueSize,
    KVCacheUsagePercent, ActiveModels, WaitingModels, MaxActiveModels, UpdateTime)."""

    waiting: int = 0
    running: int = 0
    kv: float = 0.0
    active_loras: frozenset[str] = frozenset()
    waiting_loras: frozenset[str] = frozenset()
    max_loras: int = 0
    num_gpu_blocks: int = 0
    block_size: int = 0
    updated: float = NEVER  # monotonic time the last good scrape's response arrived
    rtt: float = 0.0  # that scrape's round trip (request written to response parsed), seconds
    refused: bool = False  # the last scrape could not connect (see the module doc)
    errors: int = 0


def _labels(s: str) -> dict[str, str]:
    out: dict[str, str] = {}
    i, n = 0, len(s)
    while i < n:
        eq = s.find("=", i)
        if eq < 0:
            break
        key = s[i:eq].strip().lstrip(",").strip()
        j = eq + 2  # past ="
        val = []
        while j < n and s[j] != '"':
            if s[j] == "\\" and j + 1 < n:
                j += 1
            val.append(s[j])
            j += 1
        out[key] = "".join(val)
        i = j + 1
    return out


def parse_vllm_metrics(text: str, m: Metrics) -> None:
    """Fill `m` from a vLLM /metrics exposition: gauges summed over the label sets (engines, models), KV usage the
    largest, lora_requests_info the newest sample (its value is a timestamp), cache_config_info's block counts."""
    waiting = running = 0.0
    kv = 0.0
    lora_t = -1.0
    for line in text.splitlines():
        if not line or line[0] == "#" or not line.startswith("vllm:"):
            continue
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")
            name, labels, rest = line[:brace], line[brace + 1:close], line[close + 1:]
        else:
            name, _, rest = line.partition(" ")
            labels = ""
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if name == WAITING:
            waiting += value
        elif name == RUNNING:
            running += value
        elif name in KV:
            kv = max(kv, value)
        elif name == LORA_INFO and value >= lora_t:
            lora_t = value
            lb = _labels(labels)
            m.active_loras = frozenset(a for a in lb.get("running_lora_adapters", "").split(",") if a)
            m.waiting_loras = frozenset(a for a in lb.get("waiting_lora_adapters", "").split(",") if a)
            try:
                m.max_loras = int(float(lb.get("max_lora", "0") or 0))
            except ValueError:
                m.max_loras = 0
        elif name == CACHE_INFO:
            lb = _labels(labels)
            try:
                m.num_gpu_blocks = int(float(lb.get("num_gpu_blocks", "0") or 0))
                m.block_size = int(float(lb.get("block_size", "0") or 0))
            except ValueError:
                pass
    m.waiting, m.running, m.kv = int(waiting), int(running), float(kv)


class _Conn:
    """A keep-alive HTTP/1.1 connection to one endpoint's /metrics."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str = "/metrics") -> tuple[int, bytes]:
        if self.writer is None or self.writer.is_closing() or self.reader is None or self.reader.at_eof():
            self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.reader, self.writer  # this fetch's own references, whatever close() does meanwhile
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                     f"Accept: text/plain\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length, chunked, close = -1, False, False
        for h in lines[1:]:
            k, _, v = h.partition(":")
            k = k.strip().lower()
            if k == "content-length":
                length = int(v)
            elif k == "transfer-encoding" and "chunked" in v.lower():
                chunked = True
            elif k == "connection" and "close" in v.lower():
                close = True
        if chunked:
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                parts.append(await reader.readexactly(size + 2))
            body = b"".join(p[:-2] for p in parts)
        elif length >= 0:
            body = await reader.readexactly(length)
        else:
            body = await reader.read()
            close = True
        if close:
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


@dataclass
class PoolState:
    """Every endpoint's metrics and the snapshot the router picks from, rebuilt after each scrape round (not per
    request: the EPP's scheduler reads the datastore's latest metrics the same way)."""

    staleness: float
    metrics: dict[str, Metrics] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    snap: EndpointSnapshot = field(default_factory=lambda: empty_snapshot())
    # per snapshot row: when the scrape it was built from arrived (monotonic), for the pick's metrics-age metric
    updated: np.ndarray = field(default_factory=lambda: np.zeros(0))
    version: int = 0
    dirty: bool = False  # a scrape landed since the snapshot was built: the next pick rebuilds it

    def set_endpoints(self, eps: list[str]) -> None:
        self.order = list(eps)
        for e in eps:
            self.metrics.setdefault(e, Metrics())
        for e in list(self.metrics):
            if e not in eps:
                del self.metrics[e]

    def rebuild(self, now: float) -> EndpointSnapshot:
        """The snapshot of the ready endpoints (those not refusing connections), in endpoint order."""
        names = [e for e in self.order if not self.metrics[e].refused]
        if names == self.snap.names:
            names = self.snap.names  # the same list object: the router's per-names caches stay warm
        ms = [self.metrics[e] for e in names]
        self.updated = np.array([m.updated for m in ms], dtype=np.float64)
        self.dirty = False
        self.snap = EndpointSnapshot(
            names,
            np.array([m.waiting for m in ms], dtype=np.int64),
            np.array([m.running for m in ms], dtype=np.int64),
            np.array([m.kv for m in ms], dtype=np.float64),
            np.array([now - m.updated <= self.staleness for m in ms], dtype=bool),
            [m.active_loras for m in ms],
            [m.waiting_loras for m in ms],
            np.array([m.max_loras for m in ms], dtype=np.int64),
            np.array([m.num_gpu_blocks for m in ms], dtype=np.int64),
            np.array([m.block_size for m in ms], dtype=np.int64),
        )
        self.version += 1
        return self.snap


def empty_snapshot() -> EndpointSnapshot:
    z = np.zeros(0, dtype=np.int64)
    return EndpointSnapshot([], z, z, np.zeros(0), np.zeros(0, dtype=bool), [], [], z, z, z)


class Scraper:
    """One scrape loop per endpoint (as the EPP runs one collector per pod), each fetch bounded by `timeout`, so a
    hanging endpoint delays only its own refresh."""

    def __init__(self, state: PoolState, interval: float, timeout: float,
                 on_scrape: Callable[[float], None] | None = None) -> None:
        self.state, self.interval, self.timeout = state, interval, timeout
        self.on_scrape = on_scrape  # called with each good scrape's round trip (seconds)
        self._conns: dict[str, _Conn] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    async def scrape_one(self, ep: str) -> None:
        m = self.state.metrics.get(ep)
        if m is None:
            return
        conn = self._conns.get(ep)
        if conn is None:
            host, _, port = ep.rpartition(":")
            conn = self._conns[ep] = _Conn(host, int(port))
        sent = time.monotonic()
        try:
            status, body = await asyncio.wait_for(conn.get(), self.timeout)
        except (ConnectionRefusedError, ConnectionResetError) as exc:
            conn.close()
            m.errors += 1
            refused = isinstance(exc, ConnectionRefusedError)
            if refused != m.refused:
                m.refused = refused
                self.state.dirty = True
            return
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError):
            conn.close()
            m.errors += 1
            return
        if m.refused:
            m.refused = False
            self.state.dirty = True
        if status != 200:
            m.errors += 1
            return
        parse_vllm_metrics(body.decode("utf-8", "replace"), m)
        m.updated = time.monotonic()
        m.rtt = m.updated - sent
        self.state.dirty = True
        if self.on_scrape is not None:
            self.on_scrape(m.rtt)

    async def _loop(self, ep: str) -> None:
        """Scrape every interval until the endpoint leaves or the scraper closes. The closed flag, not only the
        task's cancellation, ends it: Python 3.11's asyncio.wait_for drops a cancellation that lands as the fetch it
        waits on completes (python/cpython#86296, fixed in 3.12), and the loop would then sleep on and keep
        aclose (a gateway's shutdown) waiting."""
        loop = asyncio.get_running_loop()
        while not self._closed and ep in self.state.metrics:
            t0 = loop.time()
            await self.scrape_one(ep)
            if self._closed:
                break
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - t0)))

    def sync(self) -> None:
        """Start a loop for each new endpoint, stop those of endpoints that left."""
        eps = set(self.state.order)
        for gone in set(self._tasks) - eps:
            self._tasks.pop(gone).cancel()
            conn = self._conns.pop(gone, None)
            if conn is not None:
                conn.close()
        for ep in self.state.order:
            if ep not in self._tasks:
                self._tasks[ep] = asyncio.get_running_loop().create_task(self._loop(ep))

    async def scrape_all(self) -> None:
        """One round over every endpoint now (start-up), then the snapshot."""
        if self.state.order:
            await asyncio.gather(*(self.scrape_one(e) for e in self.state.order))
        self.state.rebuild(time.monotonic())

    def close(self) -> None:
        self._closed = True
        for t in self._tasks.values():
            t.cancel()
        self._tasks.clear()
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    async def aclose(self) -> None:
        """close, then wait for the scrape loops to end (a loop closed with them still pending warns "Task was
        destroyed but it is pending")."""
        tasks = list(self._tasks.values())
        self.close()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

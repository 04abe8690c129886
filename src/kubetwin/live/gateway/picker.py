"""The live endpoint picker: the twin's router (kubetwin.serving.router, the same object `kubetwin run` simulates
with, built by the same make_router / EndpointPickerConfig loader) fed with scraped endpoint state instead of
simulated engines. Both front ends (ext_proc and standalone) call `LivePicker.pick`, then `routed` once the request
is sent and `finished` when it completes, exactly as serving.dataplane.plane calls the router.

A request is the twin's serving.types.Request: the model from the body, the prompt hashed as GIE v1.0's prefix plugin
does (serving.router.prompt_segments), the priority from the `x-gateway-priority` header, else the
`x-gateway-inference-objective` header's InferenceObjective, else the model's InferenceModel/Objective, else 0.
While the pool has no ready endpoint the request is held (the EPP's flow control, counted in
inference_extension_flow_control_queue_size) until one appears or holdTimeout passes (503)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubetwin.live.gateway.config import GatewayConfig
from kubetwin.live.gateway.endpoints import EndpointSource
from kubetwin.live.gateway.metrics import GatewayMetrics
from kubetwin.live.gateway.scrape import NEVER, PoolState, Scraper
from kubetwin.serving.router import make_router, prompt_segments
from kubetwin.serving.router.epp import NO_ENDPOINT_REASON
from kubetwin.serving.router.prefix_index import AVERAGE_CHARS_PER_TOKEN, DEFAULT_MAX_PREFIX_BLOCKS
from kubetwin.serving.types import EndpointSnapshot, Request

OBJECTIVE_HEADER = "x-gateway-inference-objective"
PRIORITY_HEADER = "x-gateway-priority"
DEST_HEADER = "x-gateway-destination-endpoint"
SERVED_HEADER = "x-gateway-destination-endpoint-served"
HOLD_TIMEOUT_REASON = "request timed out in queue"  # the twin's word for a held request that expired (dataplane)


@dataclass(slots=True)
class Pick:
    """An endpoint (host:port), or no endpoint with the HTTP status and reason the EPP answers."""

    endpoint: str | None
    status: int = 200
    reason: str = ""
    fallbacks: tuple[str, ...] = ()  # maxNumOfEndpoints > 1: the next best, for the data plane's retries

    @property
    def destination(self) -> str:
        """The x-gateway-destination-endpoint value: the endpoint, then any fallbacks, comma-separated (protocol
        v0.4.0)."""
        return ",".join((self.endpoint or "", *self.fallbacks))


def prompt_text(body: Mapping[str, Any]) -> str:
    """What GIE's prefix plugin hashes: the completion prompt, or the JSON of the chat messages."""
    if "messages" in body:
        return json.dumps(body["messages"], separators=(",", ":"), ensure_ascii=False)
    p = body.get("prompt", "")
    if isinstance(p, list):
        return "".join(x if isinstance(x, str) else " ".join(map(str, x)) if isinstance(x, list) else str(x)
                       for x in p)
    return str(p)


def subset(snap: EndpointSnapshot, keep: np.ndarray) -> EndpointSnapshot:
    """The snapshot's rows `keep` (a retry excludes the endpoints already tried)."""
    def rows(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[keep]
    ids = keep.tolist()
    return EndpointSnapshot([snap.names[i] for i in ids], snap.waiting[keep], snap.running[keep],
                            snap.kv_usage[keep], snap.fresh[keep],
                            [snap.active_loras[i] for i in ids] if snap.active_loras else [],
                            [snap.waiting_loras[i] for i in ids] if snap.waiting_loras else [],
                            rows(snap.max_loras), rows(snap.num_gpu_blocks), rows(snap.block_size))


class LivePicker:
    def __init__(self, cfg: GatewayConfig) -> None:
        self.cfg = cfg
        self.source = EndpointSource(cfg)
        self.objectives = {**self.source.objectives, **cfg.objectives}
        self.pool = self.source.pool_name
        self.state = PoolState(cfg.metricsStalenessThreshold)
        self.state.set_endpoints(self.source.current)
        self.metrics = GatewayMetrics(self.pool, self.objectives, cfg.maxModelLabels)
        self.scraper = Scraper(self.state, cfg.refreshMetricsInterval, cfg.scrapeTimeout,
                               on_scrape=self.metrics.scrape_duration.observe)
        self.router = make_router(cfg.picker_config(), seed=cfg.seed)
        picker = getattr(getattr(self.router, "profile", None), "picker", None)  # EPP routers: their picker plugin
        self.endpoints_per_pick: int = getattr(picker, "max_num_of_endpoints", None) or cfg.maxNumOfEndpoints
        self._ids = itertools.count()
        self._ready: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.held = 0
        # called with the ready endpoints whenever they change (Envoy OverrideHost rewrites its EDS file: like an
        # EndpointSlice, it lists ready endpoints only)
        self.on_endpoints: list[Callable[[list[str]], None]] = []

    # ---- life --------------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._ready = asyncio.Event()
        await self.scraper.scrape_all()  # one round first, then the loops (never two fetches on one connection)
        self.scraper.sync()
        self._publish()
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.scraper.aclose()

    async def _refresh_loop(self) -> None:
        """The endpoints file and the snapshot's freshness flags on the refresh clock; the scraped values
        themselves reach picks as each scrape lands (`current`)."""
        while True:
            await asyncio.sleep(self.cfg.refreshMetricsInterval)
            self.refresh()

    def refresh(self) -> None:
        """The endpoints file's changes, then a fresh snapshot from the scraped metrics."""
        if self.source.refresh():
            gone = set(self.state.order) - set(self.source.current)
            for name in sorted(gone):
                self.router.remove(name)
            self.state.set_endpoints(self.source.current)
            self.scraper.sync()
        self._rebuild()

    def current(self) -> EndpointSnapshot:
        """The snapshot a pick reads: rebuilt first when a scrape has landed since (GIE's scheduler reads each
        endpoint's latest metrics pointer, swapped by its collector as the scrape is parsed; see scrape's doc)."""
        if self.state.dirty:
            self._rebuild()
        return self.state.snap

    def _rebuild(self) -> None:
        old = self.state.snap.names
        self.state.rebuild(time.monotonic())
        for name in sorted(set(old) - set(self.state.snap.names)):  # went unready: forget its prefix entries
            self.router.remove(name)
        if old != self.state.snap.names:
            for cb in self.on_endpoints:
                cb(list(self.state.snap.names))
        self._publish()

    def _publish(self) -> None:
        snap = self.state.snap
        n = len(snap)
        self.metrics.ready.set(n)
        self.metrics.kv.set(float(snap.kv_usage.mean()) if n else 0.0)
        self.metrics.queue.set(float(snap.waiting.mean()) if n else 0.0)
        assert self._ready is not None
        if n:
            self._ready.set()
        else:
            self._ready.clear()

    # ---- requests ----------------------------------------------------------------------------------------------
    def request(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> Request:
        """The twin's Request for an OpenAI request body and its (lower-cased) headers."""
        model = str(body.get("model") or "")
        text = prompt_text(body)
        hashes, segs = prompt_segments(model, text, max_blocks=DEFAULT_MAX_PREFIX_BLOCKS)
        prio = self.priority(model, headers)
        out = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        return Request(next(self._ids), time.monotonic(), max(sum(segs), len(text) // AVERAGE_CHARS_PER_TOKEN),
                       int(out) if isinstance(out, int) else 0, hashes, segs, model=model, priority=prio)

    def priority(self, model: str, headers: Mapping[str, str]) -> int:
        p = headers.get(PRIORITY_HEADER)
        if p is not None:
            try:
                return int(p)
            except ValueError:
                pass
        obj = headers.get(OBJECTIVE_HEADER)
        if obj and obj in self.objectives:
            return self.objectives[obj]
        return self.objectives.get(model, 0)

    async def pick(self, req: Request, exclude: frozenset[str] = frozenset(), hold: float | None = None,
                   n: int = 1) -> Pick:
        """Hold while the pool has no ready endpoint (up to holdTimeout, or `hold` if shorter, then 503), then one
        scheduling cycle of the router over the ready endpoints not in `exclude` and its PreRequest (the request is
        on its way to the endpoint); with n > 1, up to n - 1 fallbacks after it."""
        snap = self.current()
        if not len(snap):
            assert self._ready is not None
            self.held += 1
            self.metrics.held.set(self.held)
            try:
                limit = self.cfg.holdTimeout if hold is None else min(hold, self.cfg.holdTimeout)
                await asyncio.wait_for(self._ready.wait(), limit)
            except TimeoutError:
                return Pick(None, 503, HOLD_TIMEOUT_REASON)
            finally:
                self.held -= 1
                self.metrics.held.set(self.held)
            snap = self.current()
        updated = self.state.updated
        if exclude:
            keep = np.array([i for i, name in enumerate(snap.names) if name not in exclude], dtype=np.intp)
            if not len(keep):
                return Pick(None, 503, NO_ENDPOINT_REASON)
            snap = subset(snap, keep)
            updated = updated[keep]
        now = time.monotonic()
        observe = self.metrics.metrics_age.observe
        for t in updated.tolist():  # each candidate's metrics, as old as they are at this pick
            if t != NEVER:
                observe(now - t)
        d = self.router.pick(req, snap, now)
        if d.index is None:
            return Pick(None, d.status, d.reason)
        first = snap.names[d.index]
        self.router.routed(req, first)
        # GIE's picker returns the top maxNumOfEndpoints; here each fallback is the next scheduling cycle's choice
        # over the endpoints not yet named (a twin choice: one cycle per name, the same plugins)
        names = [first]
        while len(names) < n:
            keep = np.array([i for i, name in enumerate(snap.names) if name not in names], dtype=np.intp)
            if not len(keep):
                break
            rest = subset(snap, keep)
            d = self.router.pick(req, rest, time.monotonic())
            if d.index is None:
                break
            names.append(rest.names[d.index])
        return Pick(first, fallbacks=tuple(names[1:]))

    def routed(self, req: Request, endpoint: str) -> None:
        """PreRequest for an endpoint other than the one picked (the data plane went down the fallback list)."""
        self.router.routed(req, endpoint)

    def finished(self, req: Request, endpoint: str) -> None:
        self.router.finished(req, endpoint)

"""The twin's engine on the wall clock: one asyncio task owns the `serving.engine.core.Engine` and advances it to
(wall time since start) x time_scale, so every request is timed by the same vLLM-V1 model `kubetwin run` uses.

Token times: an engine iteration that ends at engine time t makes its tokens visible to the client at
t + the step model's API-server share (`request_overhead_s`), the same shift the twin applies to a request's first
and last token; the first token is visible at the request's `first_token` once the engine has fixed it (with the
step model's first-token lag, one iteration after the prefill). That share stands for vLLM's whole API-server path
(HTTP, tokenization, detokenization, streaming: serving.modelserver.perf), so the emulator's own work on that path
counts toward it, not on top of it: a request reaches the engine only after the server has read and tokenized it
(`received` -> submit, real wall time; received is when the gateway in front got it when the gateway says so,
live.requeststart, since the twin's request reaches the engine the moment it reaches the gateway), and the stream's
times are moved that much earlier, up to the whole share (`Stream.credit`; the request's arrival is when it was
received). So a single request's TTFT, TPOT and end-to-end latency over HTTP are the twin's own numbers (scaled
by time_scale), up to the event loop's wake-up jitter and the response's own way back.

Twin assumptions carried over: a request always generates exactly max_tokens (no EOS: the twin's requests have a
fixed output length), and a client that disconnects does not abort its request (the twin's engine has no
per-request abort, only abort_all); the request runs to its end, as a request whose client vanished would until vLLM
noticed.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kubetwin.live.prompts import engine_request
from kubetwin.serving.engine.core import Engine
from kubetwin.serving.engine.request import EngineRequest
from kubetwin.serving.types import Request

# Longest the loop sleeps when nothing is due (it is woken at once by a new request); bounds how stale the gauges
# the engine exposes can be relative to the wall clock.
IDLE_POLL_S = 0.5


@dataclass(eq=False)
class Stream:
    """One request's progress as its HTTP handler reads it: `visible` tokens so far (emulated-time stamps in
    `times`), `event` set whenever it grows or the request ends."""

    req: Request
    handle: EngineRequest | None
    event: asyncio.Event = field(default_factory=asyncio.Event)
    visible: int = 0
    recorded: int = 0  # tokens produced by the engine so far (not yet all visible)
    records: deque[tuple[float, int]] = field(default_factory=deque)  # (visible at, produced count)
    first_token: float = -1.0  # emulated time the first token became visible
    credit: float = 0.0  # emulated seconds of the API-server share the server already spent reading the request
    last_time: float = -1.0  # emulated time of the last visible token
    done: bool = False

    @property
    def rejected(self) -> bool:
        return self.handle is None

    @property
    def total(self) -> int:
        return self.req.output_tokens


class RealtimeEngine:
    """Owns the engine; `submit` adds a request now, `run` is the clock task."""

    def __init__(self, engine: Engine, time_scale: float = 1.0, *, clock: Callable[[], float] = time.monotonic,
                 on_token: Callable[[Stream, int, float], None] | None = None,
                 on_done: Callable[[Stream], None] | None = None) -> None:
        self.engine = engine
        self.time_scale = time_scale
        self.clock = clock
        self.t0 = clock()
        self.api_s = float(getattr(engine.step, "request_overhead_s", 0.0))
        self.streams: dict[Stream, None] = {}
        self.next_id = 0
        self.on_token = on_token  # (stream, new visible tokens, emulated time of their iteration)
        self.on_done = on_done
        self._wake: asyncio.Event | None = None
        self.wakeups = 0  # loop cycles, for the benchmark's CPU-per-token figure
        # How late tokens became visible, in wall seconds, against the emulated time they were due at: a loop that
        # falls behind the wall clock (a starved CPU, a stalled event loop) makes every latency it reports longer
        # than the engine's, so a comparison run on it is not valid (issue 34 item 6; /metrics, loadgen)
        self.lag_sum = 0.0
        self.lag_count = 0
        self.lag_max = 0.0

    def now(self) -> float:
        """Emulated seconds since the server started."""
        return (self.clock() - self.t0) * self.time_scale

    def submit(self, prompt: str, max_tokens: int, *, model: str = "", lora: str | None = None,
               priority: int = 0, prompt_tokens: int | None = None, tokens: list[str] | None = None,
               received: float | None = None) -> Stream:
        """The request reaches the engine now; the server received it at `received` (a `clock` reading, default
        now), the time its reading and tokenizing took counts toward the API-server share (module doc). A request
        longer than max_model_len comes back rejected (handle None) with the engine's reason
        (Engine.reject_message). With `prompt_tokens` known (live.prompts.count_tokens), an over-long prompt is
        rejected without being split and hashed: its block hashes would never be used, and hashing millions of
        words would stall the event loop every stream shares."""
        t = self.now()
        spent = 0.0 if received is None else max(0.0, (self.clock() - received) * self.time_scale)
        credit = min(spent, self.api_s)
        self.engine.advance(t)
        arrival = t - credit
        if prompt_tokens is not None and prompt_tokens + max_tokens > self.engine.max_model_len:
            req = Request(self.next_id, arrival, prompt_tokens, max_tokens, (), (), model=model, lora=lora,
                          priority=priority)
        else:
            req = engine_request(self.next_id, arrival, prompt, max_tokens, model=model, lora=lora,
                                 priority=priority, tokens=tokens)
        self.next_id += 1
        handle = self.engine.add(req, t)
        s = Stream(req, handle, credit=credit)
        if handle is None:
            s.done = True
            return s
        self.streams[s] = None
        if self._wake is not None:
            self._wake.set()
        return s

    def step(self) -> float:
        """Advance the engine to now, make due tokens visible; returns the emulated time of the next thing due."""
        t = self.now()
        eng = self.engine
        eng.advance(t)
        end = eng.now
        nxt = eng.next_event_time
        finished = []
        for s in self.streams:
            assert s.handle is not None
            produced, first = eng.progress(s.handle)
            credit = s.credit
            if first >= 0:
                first -= credit
            if produced > s.recorded:
                s.recorded = produced
                s.records.append((end + self.api_s - credit, produced))
            req = s.req
            if req.finish >= 0 and t >= req.finish - credit:
                if credit:  # the engine is done with it: the client's times, as the twin's request carries them
                    req.finish -= credit
                    if req.first_token >= 0:
                        req.first_token -= credit
                    s.credit = 0.0
                if s.visible < s.total:  # the earliest token still to show was due at its record (or the end)
                    due = max(s.records[0][0], first) if s.records else req.finish
                    self._late(t - min(due, req.finish), s.total - s.visible)
                self._show(s, s.total, req.finish)
                finished.append(s)
                continue
            if first < 0 or t < first:
                due = first if first >= 0 else (s.records[0][0] if s.records else math.inf)
                nxt = min(nxt, due)
                continue
            n, at = s.visible, s.last_time
            due = s.records[0][0] if s.records else at  # the earliest of the tokens now shown was due then
            while s.records and s.records[0][0] <= t:
                at, n = s.records.popleft()
            if min(n, s.total) > s.visible:  # counted at the earliest one's lateness: the batch's worst
                self._late(t - max(due, first), min(n, s.total) - s.visible)
            self._show(s, n, max(at, first))
            if s.records:
                nxt = min(nxt, s.records[0][0])
            if req.finish >= 0:
                nxt = min(nxt, req.finish - credit)
        for s in finished:
            del self.streams[s]
            s.done = True
            s.event.set()
            if self.on_done is not None:
                self.on_done(s)
        return nxt

    def _late(self, emulated: float, tokens: int) -> None:
        """`tokens` tokens shown `emulated` seconds after they were due."""
        lag = max(0.0, emulated) / self.time_scale
        self.lag_sum += lag * tokens
        self.lag_count += tokens
        if lag > self.lag_max:
            self.lag_max = lag

    def _show(self, s: Stream, n: int, at: float) -> None:
        n = min(n, s.total)
        if n <= s.visible:
            return
        if s.visible == 0:
            s.first_token = at
        if self.on_token is not None:
            self.on_token(s, n - s.visible, at)
        s.visible = n
        s.last_time = at
        s.event.set()

    async def run(self) -> None:
        """The clock task: step, then sleep until the next iteration ends, a token is due or a request arrives."""
        self._wake = wake = asyncio.Event()
        while True:
            self.wakeups += 1
            nxt = self.step()
            wait = (nxt - self.now()) / self.time_scale if math.isfinite(nxt) else IDLE_POLL_S
            wake.clear()
            if wait > 0:
                try:
                    await asyncio.wait_for(wake.wait(), timeout=min(wait, IDLE_POLL_S))
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)

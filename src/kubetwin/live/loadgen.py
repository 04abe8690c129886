"""A RequestTrace replayed against a real OpenAI-compatible server (issue 20): the twin's requests, sent open-loop
at their arrival times, measured as `kubetwin run` measures them, written as the twin writes them.

The trace is read by the same loader `kubetwin run` uses (serving/traces/requesttrace.load_request_trace: Mooncake
jsonl, Azure csv, Vidur, generators; timeScale, startOffset, limit, loop), so the loadgen sends exactly the requests the
twin simulates. Each prompt is written by live.prompts.prompt_text from the request's segment hashes, so shared
prefixes reach the server's prefix cache as shared text; max_tokens is the trace's output length (with vLLM's
`ignore_eos`, a vLLM sampling parameter, so the server generates all of them).

Open loop: request i is sent at start + arrival_i / time_scale whatever the server is doing, and its latencies are
measured from that due time, so a slow server (or a saturated client) shows up as latency rather than as a lower
offered load (Schroeder et al., "Open versus closed", NSDI'06; the "coordinated omission" of closed-loop tools).
`--concurrency` caps requests in flight: a request waiting for a slot counts that wait in its TTFT.

requests.csv and summary.json's serving section are the twin's own functions (serving/observe/results.write_csv,
summarize, overall_slo and install.pool_slos for the SLO annotations), times in the trace's seconds (wall times
multiplied back by the time scale, from the RequestTrace's kubetwin.io/create-at like the twin's arrival column),
so a live run and a twin run diff column for column. What the client cannot see is left as the twin writes an
unknown: queue time empty (vLLM does not report it per request), preemptions 0, the pod from the response's
`x-gateway-destination-endpoint-served` header (the endpoint picker protocol's served-endpoint key,
docs/proposals/004-endpoint-picker-protocol, as the live gateway returns it) or `x-gateway-destination-endpoint`,
cached tokens from the usage's
prompt_tokens_details.cached_tokens when the server reports them (vLLM --enable-prompt-tokens-details).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from kubetwin.api.loader import Manifest, load_paths
from kubetwin.k8s.units import parse_duration
from kubetwin.live import eventloop
from kubetwin.live.emulator.metrics import LAG_MAX_METRIC, LAG_METRIC
from kubetwin.live.prompts import prompt_text
from kubetwin.live.requestbody import STREAM_CUT
from kubetwin.live.requeststart import REQUEST_ID_HEADER  # the trace's request id on every request
from kubetwin.live.scrape import parse_exposition
from kubetwin.serving.dataplane.pools import objective_priority
from kubetwin.serving.dataplane.requestlog import RequestLog
from kubetwin.serving.install import pool_slos
from kubetwin.serving.observe.results import DEFAULT_SLO_TPOT, DEFAULT_SLO_TTFT, overall_slo, summarize, write_csv
from kubetwin.serving.traces import arrays as traces
from kubetwin.serving.traces.requesttrace import load_request_trace
from kubetwin.serving.types import Request

# The Inference Extension's request headers (gateway-api-inference-extension pkg/epp: the objective header names an
# InferenceObjective in the pool's namespace; its priority orders admission and shedding). x-gateway-priority is the
# twin's numeric form of the same priority for gateways without the InferenceObjective CR (live_common contract).
OBJECTIVE_HEADER = "x-gateway-inference-objective"
PRIORITY_HEADER = "x-gateway-priority"
# the endpoint that served the request: the endpoint picker protocol's served-endpoint key as the live gateway
# returns it in a response header, else the destination header if a gateway echoes that
SERVED_HEADER, DESTINATION_HEADER = "x-gateway-destination-endpoint-served", "x-gateway-destination-endpoint"
CREATE_AT = "kubetwin.io/create-at"
POOL_SHARD = 16  # connections per httpx client (see replay_async)
DRAIN_S = 1.0  # wall seconds a stream's end is awaited after its [DONE] (see _drain)
SPIN_S = 1e-3  # the last stretch before a request is due is waited for by yielding, not by a timer (see _until)
# Requests the trace sends at the same instant are written in trace order, each once the one before it has its whole
# body on the socket, as the twin's gateway receives them in trace order; without it a long prompt's body, written in
# many chunks, reaches the server after the short ones sent beside it. Bounded: a stalled connection delays the next
# one at most this long (wall seconds; a twin choice).
ORDER_WAIT_S = 1.0
HIT_METRIC, QUERY_METRIC = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"  # vllm/v1/metrics
# The emulator's lag behind the wall clock (live.emulator.metrics: every visible token's lateness, summed, counted,
# and its maximum); a real vLLM exports none of them.
LAG_SUM, LAG_COUNT, LAG_MAX = f"{LAG_METRIC}_sum", f"{LAG_METRIC}_count", LAG_MAX_METRIC
# Twin choice: a run is a valid comparison with the twin while the load generator sends its requests (p99) and the
# emulators show their tokens (mean) within 20 ms of when they were due: a fifth of the smallest TTFT the examples
# report (~100 ms), and past what loopback HTTP adds (~1-3 ms). Beyond it, the latencies measured are the machine's
# (issue 34 item 6: a loaded 2-core machine put the emulators 10-41 % behind and the comparison at TTFT +443 %).
MAX_LAG_S = 0.02
# A response that started (200 and its headers) and stopped before vLLM's closing `data: [DONE]`: the server or a
# proxy cut it (a crash, a reset, an idle timeout). requests.csv keeps a failure status (502: the client's view of
# an upstream that broke; the twin's status column is numeric), its reason starts with STREAM_CUT, and the summary's
# error counts name it on its own, not as the 200 its headers said (Envoy's access log keeps 200 and a UR/UC flag).
# A 404 that is not vLLM's (vLLM answers an unknown model with its error object, "The model `x` does not exist."):
# the server has no such route, most often a base URL without /v1 (loadgen posts to BASE_URL/completions).
NO_ROUTE = "no_route"


class LoadgenError(ValueError):
    """A trace file or flag the load generator cannot use (printed without a traceback)."""


@dataclass
class Plan:
    """What to send: the trace's requests and how the twin would label, prioritise and judge them."""

    arrays: traces.TraceArrays
    trace: str  # "namespace/name", requests.csv's trace column
    pool: str  # "InferencePool/namespace/name", requests.csv's pool column and summary.json's pools key
    model: str
    priority: int
    objective: str | None  # the InferenceObjective the objective header names (None: no such object)
    send_priority: bool  # the trace or an objective gives a priority: send the priority header
    create_at: float  # trace seconds the twin waits before the trace starts (its arrival column includes it)
    horizon: float  # the run's length in trace seconds (the Scenario's duration, or --duration)
    slos: dict[str, tuple[float, float]] = field(default_factory=dict)

    def requests(self) -> list[Request]:
        reqs = list(traces.requests(self.arrays, self.model, priority=self.priority))
        for r in reqs:
            r.arrival += self.create_at
        return reqs


def load_plan(path: str | Path, *, trace_name: str | None = None, seed: int | None = None,
              duration: str | None = None) -> Plan:
    """The RequestTrace in `path` (the one named `trace_name` when the file holds several) as `kubetwin run` would
    load it: the Scenario's seed and duration (the flags override them) seed generators and bound loops."""
    from kubetwin.api.twin import ScenarioSpec

    manifests = load_paths([str(path)])
    found = [m for m in manifests if m.kind == "RequestTrace"]
    if trace_name is not None:
        found = [m for m in found if (m.obj.get("metadata") or {}).get("name") == trace_name]
    if not found:
        what = f"RequestTrace {trace_name!r}" if trace_name else "RequestTrace"
        raise LoadgenError(f"{path}: no {what} in the file")
    m = found[0]
    scen = next((x for x in manifests if x.kind == "Scenario" and x.obj.get("apiVersion") == "kubetwin.io/v1alpha1"),
                None)
    spec = ScenarioSpec.model_validate((scen.obj.get("spec") or {}) if scen is not None else {})
    horizon = parse_duration(duration or spec.duration)
    arrays = load_request_trace(m.obj, m.file, seed=spec.seed if seed is None else seed, horizon=horizon,
                                line_of=m.line_of)
    meta, tspec = m.obj.get("metadata") or {}, m.obj.get("spec") or {}
    ns = meta.get("namespace") or "default"
    target = tspec["target"]
    pool = f"{target.get('kind', 'InferencePool')}/{target.get('namespace') or ns}/{target['name']}"
    model = tspec.get("model", "")
    objective, prio, send = _objective(manifests, ns, model, tspec)
    create_at = parse_duration((meta.get("annotations") or {}).get(CREATE_AT, "0s"))
    slos = pool_slos(manifests)
    slos.setdefault(pool, (DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT))
    return Plan(arrays, f"{ns}/{meta['name']}", pool, model, prio, objective, send, create_at, horizon, slos)


def _objective(manifests: list[Manifest], ns: str, model: str, tspec: dict) -> tuple[str | None, int, bool]:
    """The objective the data plane gives the trace's model (serving/dataplane/plane.py: an InferenceObjective or
    InferenceModel for it in the trace's namespace wins over spec.priority)."""
    for m in manifests:
        if m.kind in ("InferenceObjective", "InferenceModel"):
            if ((m.obj.get("metadata") or {}).get("namespace") or "default") != ns:
                continue
            name, prio = objective_priority(m.obj)
            if name == model:
                return (name if m.kind == "InferenceObjective" else None), prio, True
    return None, int(tspec.get("priority") or 0), "priority" in tspec


# ---- sending ----


@dataclass
class Options:
    url: str  # base URL ending in /v1, as the openai SDK takes it
    time_scale: float = 1.0  # > 1 replays faster; latencies are multiplied back by it
    concurrency: int = 1024  # requests in flight at most
    timeout: float = 600.0  # wall seconds one request may take before it counts as 504
    ignore_eos: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    max_lag: float = MAX_LAG_S  # wall seconds of lag past which a run is not a valid comparison


def request_body(req: Request, opts: Options) -> bytes:
    """The /v1/completions body of a request, encoded (built before its due time, so the prompt's text costs
    nothing in its latency)."""
    body: dict[str, Any] = {"model": req.lora or req.model, "prompt": prompt_text(req.hashes, req.seg_tokens),
                            "max_tokens": req.output_tokens, "stream": True,
                            "stream_options": {"include_usage": True}}
    if opts.ignore_eos:
        body["ignore_eos"] = True
    return json.dumps(body).encode()


async def _one(client: httpx.AsyncClient, opts: Options, plan: Plan, req: Request, body: bytes, due: float,
               sem: asyncio.Semaphore, after: asyncio.Event | None = None,
               admitted: asyncio.Event | None = None) -> None:
    """Send one request, stream it, and write what was seen into `req` in trace seconds from `due`. With `after`,
    wait (at most ORDER_WAIT_S) until the request before it at the same instant was admitted; set `admitted` once
    its whole body is written or the request ends."""
    try:
        if after is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(after.wait(), ORDER_WAIT_S)
        await _send(client, opts, plan, req, body, due, sem, admitted)
    finally:
        if admitted is not None:
            admitted.set()


async def _send(client: httpx.AsyncClient, opts: Options, plan: Plan, req: Request, body: bytes, due: float,
                sem: asyncio.Semaphore, admitted: asyncio.Event | None) -> None:
    scale = opts.time_scale
    headers = {"content-type": "application/json", REQUEST_ID_HEADER: str(req.id), **opts.headers}
    if plan.objective:
        headers[OBJECTIVE_HEADER] = plan.objective
    if plan.send_priority:
        headers[PRIORITY_HEADER] = str(req.priority)
    t_first = t_done = -1.0
    chunks = 0
    started = False  # a 200 and its headers arrived
    usage: dict[str, Any] | None = None
    async with sem:
        try:
            async with asyncio.timeout(opts.timeout):
                async with client.stream("POST", opts.url.rstrip("/") + "/completions",
                                         content=_written(body, admitted),
                                         headers={**headers, "content-length": str(len(body))}) as resp:
                    req.pod = resp.headers.get(SERVED_HEADER) or resp.headers.get(DESTINATION_HEADER, "")
                    if resp.status_code != 200:
                        await resp.aread()
                        req.status, req.reason = resp.status_code, _error_message(resp.text)
                        if resp.status_code == 404 and not _is_openai_error(resp.text):
                            req.reason = f"{NO_ROUTE}: {resp.request.url} answered {req.reason!r}"
                        req.finish = req.arrival + (time.perf_counter() - due) * scale
                        return
                    started = True
                    status, reason = 502, f"{STREAM_CUT}: the stream ended before [DONE]"
                    lines = resp.aiter_lines()
                    async for line in lines:
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            status, reason = 200, ""
                            t_done = time.perf_counter()
                            await _drain(lines)
                            break
                        ev = json.loads(data)
                        if "error" in ev:  # vLLM streams an error event mid-stream (serving_completion.py)
                            err = ev["error"] if isinstance(ev["error"], dict) else {"message": str(ev["error"])}
                            status, reason = int(err.get("code") or 500), str(err.get("message", ""))
                            break
                        if any(c.get("text") for c in ev.get("choices") or ()):
                            chunks += 1
                            if t_first < 0:
                                t_first = time.perf_counter()
                        if ev.get("usage"):
                            usage = ev["usage"]
        except TimeoutError:
            status, reason = 504, f"no complete response within {opts.timeout:g}s (loadgen --timeout)"
        except httpx.HTTPError as exc:
            if started:  # after a 200's headers: the response was cut, not refused
                status, reason = 502, f"{STREAM_CUT}: the connection broke after {chunks} tokens: {exc!r}"
            else:
                status, reason = 503, f"upstream connect error or disconnect/reset before headers: {exc!r}"
    now = time.perf_counter() if t_done < 0 else t_done
    req.status, req.reason = status, reason
    req.finish = req.arrival + (now - due) * scale
    if t_first >= 0:
        req.first_token = req.arrival + (t_first - due) * scale
    if status == 200:
        if usage:
            req.output_tokens = int(usage.get("completion_tokens") or chunks)
            req.prompt_tokens = int(usage.get("prompt_tokens") or req.prompt_tokens)
            details = usage.get("prompt_tokens_details") or {}
            req.cached_tokens = int(details.get("cached_tokens") or 0)
        else:
            req.output_tokens = chunks
        if req.first_token < 0:  # zero tokens generated: the response itself is the first (and last) byte
            req.first_token = req.finish


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read a finished stream to its end (vLLM closes the body right after `data: [DONE]`), so httpx keeps its
    connection for the next request: a response left unread is closed with its connection, and every request then
    paid a new TCP connection in its TTFT (issue 34). Bounded: a server that holds the body open past [DONE] loses
    the connection after DRAIN_S, as before."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_S):
            async for _ in lines:
                pass


async def _until(due: float) -> None:
    """Wait until perf_counter() reaches `due`, serving the other tasks meanwhile. The event loop's timers wake up
    to a millisecond late (epoll's timeout is whole milliseconds, rounded up), a lateness every request's latency
    would carry: sleep to within SPIN_S of the due time, then yield to the loop until it comes."""
    delay = due - time.perf_counter()
    if delay > SPIN_S:
        await asyncio.sleep(delay - SPIN_S)
    while time.perf_counter() < due:
        await asyncio.sleep(0)


async def _written(body: bytes, written: asyncio.Event | None) -> AsyncIterator[bytes]:
    """The body as one chunk; `written` is set once the client has handed it to the connection (the generator
    resumes only then)."""
    yield body
    if written is not None:
        written.set()


def _is_openai_error(text: str) -> bool:
    """An OpenAI-style error body ({"error": {...}} or vLLM's {"object": "error", ...}): the server understood the
    route and refused the request."""
    try:
        body = json.loads(text)
    except ValueError:
        return False
    return isinstance(body, dict) and (isinstance(body.get("error"), dict) or body.get("object") == "error")


def error_codes(reqs: Sequence[Request]) -> dict[str, int]:
    """Failed requests by error code: the HTTP status, or STREAM_CUT for a response cut after its 200."""
    out: dict[str, int] = {}
    for r in reqs:
        if r.status in (0, 200):
            continue
        code = STREAM_CUT if r.reason.startswith(STREAM_CUT) else str(r.status)
        out[code] = out.get(code, 0) + 1
    return dict(sorted(out.items()))


def problems(opts: Options, reqs: Sequence[Request]) -> list[str]:
    """What went wrong that the counts alone do not say: 404s from a server without the route (the base URL
    lacks /v1, most often)."""
    out = []
    missing = [r for r in reqs if r.status == 404 and r.reason.startswith(NO_ROUTE)]
    if missing:
        url = opts.url.rstrip("/")
        fix = (f"the base URL probably lacks /v1: pass --url {url}/v1 (loadgen posts to BASE_URL/completions, as "
               "the openai SDK takes its base_url)" if not url.endswith("/v1") else
               "the server has no /v1/completions route: is it an OpenAI-compatible server?")
        out.append(f"{len(missing)} of {len(reqs)} requests got 404 Not Found from {url}/completions: {fix}")
    return out


def _error_message(text: str) -> str:
    """The message of an OpenAI-style error body ({"error": {"message"}} or vLLM's {"message"}), else the text."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])
        if "message" in body:
            return str(body["message"])
        if isinstance(err, str):
            return err
    return text.strip()[:200]


class Shards:
    """Which httpx client a request goes to: the first with a connection to spare (so the connections in use are the
    same few, kept alive), else the least busy (requests waiting for the concurrency cap)."""

    def __init__(self, shards: int, per: int) -> None:
        self.busy = [0] * shards
        self.per = per

    def take(self) -> int:
        busy = self.busy
        k = next((i for i, n in enumerate(busy) if n < self.per), None)
        if k is None:
            k = busy.index(min(busy))
        busy[k] += 1
        return k

    def give_back(self, k: int, _task: object = None) -> None:
        self.busy[k] -= 1


async def replay_async(plan: Plan, opts: Options, reqs: Sequence[Request] | None = None) -> tuple[list[Request],
                                                                                                    dict[str, float]]:
    """Send every request at its due time; at the end of the run (the plan's horizon, trace seconds from the
    trace's start) whatever is still open is cancelled and stays status 0, the twin's in flight at the end.
    Returns the requests and the client's own numbers (wall time, how late sends were)."""
    reqs = list(plan.requests() if reqs is None else reqs)
    scale = opts.time_scale
    sem = asyncio.Semaphore(opts.concurrency)
    # httpx's connection pool scans its connections per request (httpcore's pool is linear in them), so one client
    # with hundreds of connections runs several times slower than a few clients of POOL_SHARD connections each. A
    # request goes to the first shard with a free connection (`Shards`), so the connections in use stay warm: dealt
    # round robin over 64 shards, a trace at a few requests a second found every connection past httpx's 5 s
    # keep-alive and paid a new TCP connection per request (~2 ms of its TTFT on loopback, issue 34)
    shards = -(-opts.concurrency // POOL_SHARD)
    per = -(-opts.concurrency // shards)
    pool = Shards(shards, per)
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    timeout = httpx.Timeout(opts.timeout, connect=min(opts.timeout, 10.0))
    lags: list[float] = []
    end_wall = max(0.0, plan.horizon - plan.create_at) / scale
    async with contextlib.AsyncExitStack() as stack:
        tls = ssl.create_default_context()  # one for all shards: building one costs ~20 ms
        clients = [await stack.enter_async_context(httpx.AsyncClient(limits=limits, timeout=timeout, verify=tls))
                   for _ in range(shards)]
        t0 = time.perf_counter()
        tasks: list[asyncio.Task] = []
        prev_arrival: float | None = None
        prev_admitted: asyncio.Event | None = None
        for req in reqs:
            offset = (req.arrival - plan.create_at) / scale
            if offset >= end_wall:
                break
            due = t0 + offset
            body = request_body(req, opts)
            await _until(due)
            lags.append(max(0.0, time.perf_counter() - due))
            after = prev_admitted if req.arrival == prev_arrival else None
            prev_arrival, prev_admitted = req.arrival, asyncio.Event()
            k = pool.take()
            task = asyncio.create_task(_one(clients[k], opts, plan, req, body, due, sem, after, prev_admitted))
            task.add_done_callback(functools.partial(pool.give_back, k))
            tasks.append(task)
        if tasks:
            left = t0 + end_wall - time.perf_counter()
            _, pending = await asyncio.wait(tasks, timeout=max(left, 0.0))
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5.0)
        wall = time.perf_counter() - t0
    sent = reqs[:len(tasks)]
    for r in sent:
        if r.status == 0:  # cancelled at the end of the run: nothing measured counts
            r.first_token = r.finish = -1.0
    lag = np.asarray(lags) if lags else np.zeros(1)
    # lags to the microsecond: _until makes the client punctual to a few of them
    return sent, {"wall_seconds": round(wall, 3), "sent": len(sent),
                  "send_lag_p99_seconds": round(float(np.percentile(lag, 99)), 6),
                  "send_lag_max_seconds": round(float(lag.max()), 6)}


# ---- metrics and results ----


def scrape_counters(urls: Sequence[str], timeout: float = 5.0) -> dict[str, float]:
    """Over the servers' /metrics (every label set): vLLM's prefix-cache hit and query token counters and the
    emulators' lag summary, summed (the lag's maximum: the largest); a name no server exports is absent."""
    out: dict[str, float] = {}
    for url in urls:
        for name, _, value in parse_exposition(httpx.get(url, timeout=timeout).raise_for_status().text):
            if name in (HIT_METRIC, QUERY_METRIC, LAG_SUM, LAG_COUNT):
                out[name] = out.get(name, 0.0) + value
            elif name == LAG_MAX:
                out[name] = max(out.get(name, 0.0), value)
    return out


def comparison(client: dict[str, float], before: dict[str, float] | None, after: dict[str, float] | None,
               max_lag: float) -> dict[str, Any]:
    """Whether the run measured the servers rather than the machine: the load generator's send lag (p99) and the
    emulators' mean token lag during the run (from their /metrics, when scraped) within `max_lag` wall seconds."""
    reasons = []
    if client["send_lag_p99_seconds"] > max_lag:
        reasons.append(f"the load generator sent its requests late (p99 {client['send_lag_p99_seconds']:.3f} s > "
                       f"{max_lag:g} s): the client machine is too busy")
    out: dict[str, Any] = {"max_lag_seconds": max_lag}
    if before is not None and after is not None and LAG_COUNT in after:
        tokens = after[LAG_COUNT] - before.get(LAG_COUNT, 0.0)
        mean = (after.get(LAG_SUM, 0.0) - before.get(LAG_SUM, 0.0)) / tokens if tokens > 0 else 0.0
        out["server_lag"] = {"mean_seconds": round(mean, 5), "max_seconds": round(after.get(LAG_MAX, 0.0), 5),
                             "tokens": int(tokens)}
        if mean > max_lag:
            reasons.append(f"the emulators showed their tokens late (mean {mean:.3f} s > {max_lag:g} s): they fell "
                           "behind the wall clock, so their latencies are the machine's, not the engine's")
    out.update(valid=not reasons, reasons=reasons)
    return out


def results(plan: Plan, reqs: Sequence[Request], prefix: tuple[float, float] | None) -> tuple[dict[str, Any], str]:
    """summary.json's serving section and requests.csv, by the twin's own functions. `prefix` is the servers'
    (hits, queries) counted during the run, when their /metrics were scraped; the twin's gpu_hours and cost are
    unknown to a client and stay null."""
    log = RequestLog()
    for r in reqs:
        log.add(r, plan.trace, plan.pool)
    a = log.arrays()
    rate = round(prefix[0] / prefix[1], 4) if prefix and prefix[1] > 0 else None
    overall = summarize(a, overall_slo(plan.slos))
    overall.update(prefix_cache_hit_rate=rate, gpu_hours=None, gpu_cost_usd=None,
                   usd_per_million_output_tokens=None)
    pool = summarize(a, plan.slos.get(plan.pool, (DEFAULT_SLO_TTFT, DEFAULT_SLO_TPOT)))
    pool.update(prefix_cache_hit_rate=rate, router=None)
    serving = {"overall": overall, "pools": {plan.pool: pool} if len(a["id"]) else {},
               "requests_csv_rows": len(a["id"])}
    return serving, write_csv(a, log.labels)


def run(trace_file: str | Path, opts: Options, out: Path | None = None, *, trace_name: str | None = None,
        seed: int | None = None, duration: str | None = None, metrics_urls: Sequence[str] = ()) -> dict[str, Any]:
    """Load, send, measure, write DIR/requests.csv and DIR/summary.json; returns the summary."""
    plan = load_plan(trace_file, trace_name=trace_name, seed=seed, duration=duration)
    before = scrape_counters(metrics_urls) if metrics_urls else None
    reqs, client = eventloop.run(replay_async(plan, opts))
    prefix = after = None
    if before is not None:
        after = scrape_counters(metrics_urls)
        prefix = (after.get(HIT_METRIC, 0.0) - before.get(HIT_METRIC, 0.0),
                  after.get(QUERY_METRIC, 0.0) - before.get(QUERY_METRIC, 0.0))
    serving, csv_text = results(plan, reqs, prefix)
    summary = {"serving": serving,
               "loadgen": {"url": opts.url, "trace": plan.trace, "time_scale": opts.time_scale,
                           "concurrency": opts.concurrency, "timeout_seconds": opts.timeout,
                           "metrics_urls": list(metrics_urls), **client,
                           "error_codes": error_codes(reqs), "problems": problems(opts, reqs),
                           "comparison": comparison(client, before, after, opts.max_lag)}}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "requests.csv").write_text(csv_text)
        (out / "summary.json").write_text(json.dumps(summary, sort_keys=True, indent=2) + "\n")
    return summary

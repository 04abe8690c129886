"""Soak the live gateway (issue 34's last acceptance item): `kubetwin gateway` in Envoy mode in front of N
`kubetwin emulate vllm` replicas, mixed good and hostile traffic for --minutes, while a seeded schedule kill -9s and
restarts a replica, freezes the picker (SIGSTOP/SIGCONT of the gateway process, Envoy running on) and kill -9s and
restarts the gateway (its Envoy dies with it: PR_SET_PDEATHSIG).

What it checks (exit status 1 when one fails; docs/live-gateway.md "Soak"):
- no Critical request is lost while a ready replica existed and the gateway was up: a failure counts against this
  unless the replica serving it (or, when unknown, any replica) or the gateway was killed while it was in flight,
  or no replica was ready when it was sent (each of these is counted on its own line);
- every hostile request gets a 4xx (a client that disconnects mid-stream: the 200 it began with; one that connects
  and sends nothing: the connection closed after requestHeadersTimeout), never a 5xx, a reset or a hang, except
  when the gateway was down or killed while it was in flight;
- RSS (and open fds) of Envoy, the gateway and each replica sampled every --sample seconds: start, end, max and a
  least-squares slope (MB/h) per process, and no growth over the run of a process that lived through it;
- no process started by the run is left behind at the end (each carries an environment marker; /proc is walked).

Faults come every --kill-every seconds, each kind once per round in a seeded order; the last replica is never
killed, and the gateway is killed at most --gateway-kills times, all in the run's first half, so that one replica,
one gateway and one Envoy live long enough for their RSS to be judged (--judge-after). The harness plays the
kubelet: a killed replica is restarted on its port after a short back-off and counted ready once its GET /health
answers 200 (the readiness probe); the gateway learns of both by itself (a replica whose port refuses connections
leaves its candidate set; OverrideHost's EDS file follows). The gateway runs with `envoy.cluster: OverrideHost`
(Envoy retries a connect failure or a reset before response headers on another replica) and `failureMode: FailOpen`
(a frozen picker costs `messageTimeout`, then the fallback route): with the default OriginalDst cluster a request
picked for a replica killed a moment before fails (no retry elsewhere,
docs/live-gateway.md), and with FailClose a frozen picker answers 504, by design.

    python benchmarks/soak_gateway.py --minutes 2 --out /tmp/soak/dev
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kubetwin.live.lifetime import preexec_die_with_parent  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MARK_VAR = "KUBETWIN_SOAK_MARK"
GOOD_KINDS = ("completion", "completion_stream", "chat", "chat_stream")
HOSTILE_KINDS = {  # kind -> weight among hostile requests
    "surrogate": 3, "nested": 2, "model_list": 3, "model_object": 1, "oversized_body": 1, "big_headers": 2,
    "slow_client": 1, "silent_client": 1, "bad_request_line": 1, "unknown_model": 4, "disconnect_mid_stream": 3,
}
# what a hostile request must get: a 4xx, except these (None: the server closes the connection, unanswered)
HOSTILE_WANT: dict[str, int | None] = {"disconnect_mid_stream": 200, "silent_client": None}
CRITICALITY = {"critical": 1, "standard": 0, "sheddable": -1}  # InferenceObjective name -> priority
WORDS = ("the quick brown fox jumps over the lazy dog while the model serves tokens to many users "
         "across the pool of replicas behind the gateway").split()
GOOD_TIMEOUT = 60.0
HOSTILE_TIMEOUT = 30.0
SLOW_FOR = 12.0  # a slow client dribbles its head this long (past the standalone requestHeadersTimeout, 10 s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- processes -------------------------------------------------------------------------------------------------------


def proc_stat(pid: int) -> tuple[int, str] | None:
    """(ppid, state) of a live process, None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2:].split()
    return int(f[1]), f[0]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def marked(mark: str) -> list[int]:
    """Live processes (not zombies) carrying this run's environment marker: everything the run started, however
    deep, and nothing else."""
    needle = f"{MARK_VAR}={mark}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        st = proc_stat(int(d.name))
        if needle in env.split(b"\0") and st is not None and st[1] not in "ZX":
            out.append(int(d.name))
    return out


def children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := proc_stat(int(d.name))) is not None and st[0] == pid and st[1] not in "ZX":
            out.append(int(d.name))
    return out


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


@dataclass
class Replica:
    index: int
    port: int
    proc: subprocess.Popen | None = None
    ready: bool = False
    generation: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Record:
    kind: str
    hostile: bool
    criticality: str
    t_send: float
    t_end: float = 0.0
    status: int | None = None
    complete: bool = False
    ttft: float | None = None
    error: str = ""
    served: str = ""
    ready_at_send: int = 0
    gateway_up_at_send: bool = True
    frozen_at_send: bool = False
    outcome: str = ""

    @property
    def latency(self) -> float:
        return self.t_end - self.t_send


@dataclass
class Event:
    kind: str  # replica_kill, freeze, gateway_kill
    t: float
    target: str = ""
    t_end: float = 0.0  # restarted / thawed / ready again
    detail: dict[str, Any] = field(default_factory=dict)


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(args.seed)
        self.traffic_rng = random.Random(args.seed + 1)
        self.mark = uuid.uuid4().hex
        self.env = {**os.environ, MARK_VAR: self.mark,
                    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        self.replicas = [Replica(i, free_port()) for i in range(args.replicas)]
        self.listen_port, self.admin_port, self.envoy_admin_port, self.extproc_port = (free_port() for _ in range(4))
        self.url = f"http://127.0.0.1:{self.listen_port}"
        self.gateway: subprocess.Popen | None = None
        self.gateway_gen = 0
        self.gateway_up = False
        self.frozen = False
        self.records: list[Record] = []
        self.events: list[Event] = []
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self.big_body = b"x" * 0  # built lazily

    def now(self) -> float:
        return time.monotonic() - self.t0

    # -- replicas --------------------------------------------------------------------------------------------------
    def start_replica(self, r: Replica) -> None:
        argv = [sys.executable, "-m", "kubetwin.cli.main", "emulate", "vllm", "--model", MODEL, "--host", "127.0.0.1",
                "--port", str(r.port), "--time-scale", str(self.args.time_scale), "--seed", str(r.index)]
        log = open(self.out / f"replica-{r.index}.log", "ab")  # noqa: SIM115 - the child holds it
        r.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=self.env, start_new_session=True,
                                  preexec_fn=preexec_die_with_parent())
        log.close()
        r.generation += 1

    async def wait_healthy(self, r: Replica, timeout: float = 90.0) -> float:
        """The readiness probe: GET /health 200 (bounded); the seconds it took."""
        t = time.monotonic()
        async with httpx.AsyncClient(timeout=2.0) as c:
            while time.monotonic() - t < timeout:
                assert r.proc is not None
                if r.proc.poll() is not None:
                    raise RuntimeError(f"replica {r.index} exited with {r.proc.returncode}")
                try:
                    if (await c.get(f"http://{r.address}/health")).status_code == 200:
                        r.ready = True
                        return time.monotonic() - t
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"replica {r.index} not healthy in {timeout}s")

    # -- the gateway -------------------------------------------------------------------------------------------------
    def gateway_config(self) -> Path:
        cfg = {"mode": "envoy", "endpoints": [r.address for r in self.replicas],
               "adminListen": f"127.0.0.1:{self.admin_port}", "accessLog": str(self.out / "picker-access.log"),
               "objectives": CRITICALITY, "seed": self.args.seed,
               "envoy": {"listen": f"127.0.0.1:{self.listen_port}", "admin": f"127.0.0.1:{self.envoy_admin_port}",
                         "extProc": f"127.0.0.1:{self.extproc_port}", "failureMode": "FailOpen",
                         "cluster": "OverrideHost", "messageTimeout": f"{self.args.message_timeout}s",
                         "accessLog": str(self.out / "envoy-access.log")}}
        path = self.out / "gateway.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    async def start_gateway(self, timeout: float = 90.0) -> float:
        """Start `kubetwin gateway -c ...` and wait for its 'envoy on http://' line; a port the killed gateway's
        Envoy still holds (the kernel frees a dead process's sockets at its own pace) is retried, bounded."""
        t = time.monotonic()
        path = self.gateway_config()
        while True:
            self.gateway_gen += 1
            err = self.out / f"gateway-{self.gateway_gen}.stderr"
            with open(err, "wb") as fh:
                self.gateway = subprocess.Popen([sys.executable, "-m", "kubetwin.cli.main", "gateway", "-c", str(path)],
                                                stdout=subprocess.DEVNULL, stderr=fh, env=self.env,
                                                start_new_session=True, preexec_fn=preexec_die_with_parent())
            while time.monotonic() - t < timeout:
                text = err.read_text(errors="replace")
                if "envoy on http://" in text:
                    self.gateway_up = True
                    return time.monotonic() - t
                if self.gateway.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError(f"gateway not ready in {timeout}s: {err.read_text()[-2000:]}")
            text = err.read_text(errors="replace")
            if "already in use" not in text or time.monotonic() - t > timeout:
                raise RuntimeError(f"gateway exited {self.gateway.returncode}: {text[-2000:]}")
            await asyncio.sleep(0.5)

    def envoy_pid(self) -> int | None:
        if self.gateway is None:
            return None
        for pid in children_of(self.gateway.pid):
            if "envoy" in cmdline(pid).split(" ")[0]:
                return pid
        return None

    # -- good traffic ----------------------------------------------------------------------------------------------
    def prompt(self) -> str:
        rng = self.traffic_rng
        user = rng.randrange(8)  # eight shared prefixes: the prefix scorer has something to do
        head = " ".join(WORDS[(user + i) % len(WORDS)] for i in range(60))
        return f"user {user}: {head} " + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(5, 60)))

    async def good(self, client: httpx.AsyncClient, kind: str, crit: str) -> None:
        rng = self.traffic_rng
        stream = kind.endswith("_stream")
        body: dict[str, Any] = {"model": MODEL, "max_tokens": rng.randrange(4, 48), "stream": stream}
        if kind.startswith("chat"):
            body["messages"] = [{"role": "user", "content": self.prompt()}]
            path = "/v1/chat/completions"
        else:
            body["prompt"] = self.prompt()
            path = "/v1/completions"
        headers = {"x-gateway-inference-objective": crit}
        rec = self.record(kind, False, crit)
        try:
            async with client.stream("POST", self.url + path, json=body, headers=headers) as r:
                rec.status = r.status_code
                rec.served = r.headers.get("x-gateway-destination-endpoint-served", "")
                if stream:
                    async for line in r.aiter_lines():
                        if line.startswith("data: ") and rec.ttft is None:
                            rec.ttft = self.now() - rec.t_send
                        if line == "data: [DONE]":
                            rec.complete = True
                else:
                    data = await r.aread()
                    if r.status_code == 200:
                        rec.complete = bool(json.loads(data).get("choices"))
        except httpx.HTTPError as exc:
            rec.error = type(exc).__name__
        except ValueError as exc:  # a cut non-stream body that is not JSON
            rec.error = f"bad body: {exc}"[:80]
        rec.t_end = self.now()

    def record(self, kind: str, hostile: bool, crit: str) -> Record:
        rec = Record(kind, hostile, crit, self.now(), ready_at_send=sum(r.ready for r in self.replicas),
                     gateway_up_at_send=self.gateway_up, frozen_at_send=self.frozen)
        self.records.append(rec)
        return rec

    # -- hostile traffic -------------------------------------------------------------------------------------------
    async def raw(self, head: bytes, body: bytes = b"", dribble: float = 0.0) -> tuple[int | None, str]:
        """Send one raw HTTP/1.1 request (its head one byte a second for `dribble` seconds first, then the rest),
        read the status line: (status, '') or (None, what went wrong)."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.listen_port), 5)
        except (OSError, TimeoutError) as exc:
            return None, f"connect: {type(exc).__name__}"
        status_task = asyncio.ensure_future(reader.readline())
        try:
            data = head + body
            sent = 0
            t = time.monotonic()
            while dribble and time.monotonic() - t < dribble and sent < len(head) - 4 and not status_task.done():
                writer.write(data[sent:sent + 1])
                sent += 1
                await writer.drain()
                await asyncio.wait([status_task], timeout=1.0)
            step = 1 << 20
            while sent < len(data) and not status_task.done():
                writer.write(data[sent:sent + step])
                sent += step
                await writer.drain()
            line = await asyncio.wait_for(status_task, HOSTILE_TIMEOUT)
        except TimeoutError:
            return None, "timeout"
        except (ConnectionError, OSError) as exc:
            if status_task.done() and not status_task.cancelled() and status_task.exception() is None:
                line = status_task.result()  # answered before the write failed: the answer counts
            else:
                return None, f"reset: {type(exc).__name__}"
        finally:
            if not status_task.done():
                status_task.cancel()
            writer.close()
        if not line:
            return None, "closed without a response"
        try:
            return int(line.split()[1]), ""
        except (IndexError, ValueError):
            return None, f"bad status line {line[:40]!r}"

    def head(self, body_len: int, extra: str = "", path: str = "/v1/completions") -> bytes:
        return (f"POST {path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                f"Content-Length: {body_len}\r\nConnection: close\r\n{extra}\r\n").encode()

    async def hostile(self, client: httpx.AsyncClient, kind: str) -> None:
        rng = self.traffic_rng
        rec = self.record(kind, True, "")
        body: bytes
        if kind == "disconnect_mid_stream":
            try:
                async with client.stream("POST", self.url + "/v1/completions", json={
                        "model": MODEL, "prompt": self.prompt(), "max_tokens": 400, "stream": True}) as r:
                    rec.status = r.status_code
                    rec.served = r.headers.get("x-gateway-destination-endpoint-served", "")
                    n = 0
                    async for _ in r.aiter_lines():
                        n += 1
                        if n >= 3:
                            break  # leave mid-stream: the context manager closes the connection
                    rec.complete = n >= 3
            except httpx.HTTPError as exc:
                rec.error = type(exc).__name__
            rec.t_end = self.now()
            return
        if kind == "unknown_model":
            body = json.dumps({"model": f"no-such-model-{rng.getrandbits(40):x}", "prompt": "hi",
                               "max_tokens": 2}).encode()
            status, err = await self.raw(self.head(len(body)), body)
        elif kind == "surrogate":
            body = b'{"model": "' + MODEL.encode() + b'", "prompt": "hi \\ud800 there", "max_tokens": 2}'
            status, err = await self.raw(self.head(len(body)), body)
        elif kind == "nested":
            depth = rng.choice((1000, 100_000))
            body = b'{"model": "' + MODEL.encode() + b'", "prompt": ' + b"[" * depth + b"]" * depth + b"}"
            status, err = await self.raw(self.head(len(body)), body)
        elif kind in ("model_list", "model_object"):
            model: Any = [MODEL] if kind == "model_list" else {"name": MODEL}
            body = json.dumps({"model": model, "prompt": "hi", "max_tokens": 2}).encode()
            status, err = await self.raw(self.head(len(body)), body)
        elif kind == "oversized_body":
            n = self.args.oversized_bytes
            if len(self.big_body) != n:
                self.big_body = b'{"model": "' + MODEL.encode() + b'", "prompt": "' + b"a" * (n - 60) + b'"}'
            status, err = await self.raw(self.head(len(self.big_body)), self.big_body)
        elif kind == "big_headers":
            body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 2}).encode()
            status, err = await self.raw(self.head(len(body), extra=f"x-big: {'a' * 70_000}\r\n"), body)
        elif kind == "silent_client":  # connects, sends nothing: closed after requestHeadersTimeout (10 s)
            status, err = await self.raw(b"")
        elif kind == "bad_request_line":
            status, err = await self.raw(b"NOT AN HTTP REQUEST LINE\r\n\r\n")
        elif kind == "slow_client":  # dribbles its head, then sends a request for an unknown model if still open
            body = json.dumps({"model": "slow-client-model", "prompt": "hi", "max_tokens": 2}).encode()
            head = self.head(len(body), extra="".join(f"x-pad-{i}: {'b' * 20}\r\n" for i in range(20)))
            status, err = await self.raw(head, body, dribble=SLOW_FOR)
        else:
            raise ValueError(kind)
        rec.status, rec.error, rec.t_end = status, err, self.now()

    async def traffic(self, until: float) -> None:
        rng = self.traffic_rng
        kinds, weights = zip(*HOSTILE_KINDS.items(), strict=True)
        tasks: set[asyncio.Task] = set()
        limits = httpx.Limits(max_keepalive_connections=0)  # a fresh connection a request: none outlives a kill
        async with httpx.AsyncClient(timeout=httpx.Timeout(GOOD_TIMEOUT, connect=5.0), limits=limits) as client:
            nxt = self.now()
            while self.now() < until:
                nxt += rng.expovariate(self.args.rate)
                await asyncio.sleep(max(0.0, nxt - self.now()))
                if rng.random() < self.args.hostile:
                    coro = self.hostile(client, rng.choices(kinds, weights)[0])
                else:
                    crit = rng.choices(("critical", "standard", "sheddable"), (5, 2, 3))[0]
                    coro = self.good(client, rng.choice(GOOD_KINDS), crit)
                task = asyncio.ensure_future(coro)
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.wait(tasks, timeout=GOOD_TIMEOUT + SLOW_FOR + 5)
            for t in tasks:
                t.cancel()

    # -- faults ------------------------------------------------------------------------------------------------------
    async def faults(self, until: float) -> None:
        kinds = self.args.faults
        rng = self.rng
        order: list[str] = []
        kills = 0
        nxt = self.now() + self.args.kill_every * rng.uniform(0.5, 1.0)
        while True:
            await asyncio.sleep(max(0.0, nxt - self.now()))
            if self.now() >= until - 5:
                return
            if not order:  # every fault kind once per round, in a seeded order
                order = list(kinds)
                rng.shuffle(order)
            kind = order.pop()
            if kind == "gateway" and (self.now() > until / 2 or kills >= self.args.gateway_kills) and len(kinds) > 1:
                kind = "replica" if "replica" in kinds else "freeze"  # the second half keeps one gateway and Envoy
            if kind == "gateway":
                kills += 1
            if kind == "replica":
                victims = self.replicas[:-1] if len(self.replicas) > 1 else self.replicas  # the last lives throughout
                r = rng.choice(victims)
                ev = Event("replica_kill", self.now(), r.address)
                self.events.append(ev)
                r.ready = False
                assert r.proc is not None
                r.proc.send_signal(signal.SIGKILL)
                await asyncio.to_thread(r.proc.wait, 10)
                await asyncio.sleep(rng.uniform(1.0, 3.0))  # the kubelet's restart back-off, shortened
                self.start_replica(r)
                ev.detail["ready_after_start_s"] = round(await self.wait_healthy(r), 2)
                ev.t_end = self.now()
            elif kind == "freeze":
                assert self.gateway is not None
                ev = Event("freeze", self.now(), "gateway")
                self.events.append(ev)
                self.frozen = True
                os.kill(self.gateway.pid, signal.SIGSTOP)
                await asyncio.sleep(rng.uniform(3.0, 6.0))
                os.kill(self.gateway.pid, signal.SIGCONT)
                self.frozen = False
                ev.t_end = self.now()
            elif kind == "gateway":
                assert self.gateway is not None
                envoy = self.envoy_pid()
                ev = Event("gateway_kill", self.now(), "gateway")
                self.events.append(ev)
                self.gateway_up = False
                self.gateway.send_signal(signal.SIGKILL)
                await asyncio.to_thread(self.gateway.wait, 10)
                t = time.monotonic()
                while envoy is not None and proc_stat(envoy) is not None and proc_stat(envoy)[1] not in "ZX":  # type: ignore[index]
                    if time.monotonic() - t > 15:
                        ev.detail["envoy_orphaned"] = envoy
                        break
                    await asyncio.sleep(0.05)
                ev.detail["envoy_gone_s"] = round(time.monotonic() - t, 2)
                ev.detail["ready_after_start_s"] = round(await self.start_gateway(), 2)
                ev.t_end = self.now()
            else:
                raise ValueError(kind)
            nxt = max(nxt + self.args.kill_every, self.now() + 2.0)

    # -- sampling ----------------------------------------------------------------------------------------------------
    def processes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.gateway is not None and self.gateway.poll() is None:
            out["gateway"] = self.gateway.pid
            if (e := self.envoy_pid()) is not None:
                out["envoy"] = e
        for r in self.replicas:
            if r.proc is not None and r.proc.poll() is None:
                out[f"replica-{r.index}"] = r.proc.pid
        out["harness"] = os.getpid()
        return out

    async def sampler(self, until: float) -> None:
        while True:
            t = self.now()
            for role, pid in self.processes().items():
                if (rss := rss_kb(pid)) is not None:
                    self.samples.append({"t": round(t, 1), "role": role, "pid": pid, "rss_kb": rss,
                                         "fds": fd_count(pid)})
            if t >= until:
                return
            await asyncio.sleep(min(self.args.sample, max(0.0, until - t)))

    # -- the run -----------------------------------------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        started = time.time()
        try:
            return await self._run(started)
        except BaseException:
            await self.shutdown()  # nothing outlives a failed start either
            raise

    async def _run(self, started: float) -> dict[str, Any]:
        for r in self.replicas:
            self.start_replica(r)
        await asyncio.gather(*(self.wait_healthy(r) for r in self.replicas))
        await self.start_gateway()
        # the picker has scraped every replica: its pool metric says so
        async with httpx.AsyncClient(timeout=2.0) as c:
            for _ in range(200):
                text = (await c.get(f"http://127.0.0.1:{self.admin_port}/metrics")).text
                if any(line.startswith("inference_pool_ready_pods") and line.endswith(f" {len(self.replicas)}.0")
                       for line in text.splitlines()):
                    break
                await asyncio.sleep(0.1)
        self.t0 = time.monotonic()
        until = self.args.minutes * 60.0
        await asyncio.gather(self.traffic(until), self.faults(until), self.sampler(until))
        ended = self.now()
        shutdown = await self.shutdown()
        return self.summarize(started, ended, shutdown)

    async def shutdown(self) -> dict[str, Any]:
        """SIGTERM the gateway (it stops its Envoy) and the replicas, bounded; then any process of this run still
        running is an orphan (and is killed, so the run leaves nothing behind either way)."""
        out: dict[str, Any] = {}
        if self.gateway is not None and self.gateway.poll() is None:
            self.gateway.send_signal(signal.SIGTERM)
            try:
                out["gateway_rc"] = await asyncio.to_thread(self.gateway.wait, 60)
            except subprocess.TimeoutExpired:
                out["gateway_rc"] = "did not stop in 60 s"
        for r in self.replicas:
            if r.proc is not None and r.proc.poll() is None:
                r.proc.send_signal(signal.SIGTERM)
        for r in self.replicas:
            if r.proc is not None:
                try:
                    await asyncio.to_thread(r.proc.wait, 30)
                except subprocess.TimeoutExpired:
                    out.setdefault("replicas_not_stopped", []).append(r.index)
        t = time.monotonic()
        left = marked(self.mark)
        while left and time.monotonic() - t < 10:  # a dying process leaves /proc at the kernel's pace
            await asyncio.sleep(0.1)
            left = marked(self.mark)
        out["orphans"] = [f"{pid} {cmdline(pid)[:160]}" for pid in left]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return out

    # -- the report --------------------------------------------------------------------------------------------------
    def classify(self, rec: Record) -> str:
        """One outcome per request; 'lost' is a good request that failed with no fault to blame, 'bad' a hostile
        request not answered 4xx without one."""
        in_flight = [e for e in self.events if e.t <= rec.t_end and (e.t_end or 1e18) >= rec.t_send]
        gw_killed = any(e.kind == "gateway_kill" and rec.t_send <= e.t <= rec.t_end for e in in_flight)
        replica_killed = any(e.kind == "replica_kill" and rec.t_send <= e.t <= rec.t_end
                             and (not rec.served or rec.served == e.target) for e in in_flight)
        if rec.hostile:
            if rec.kind not in HOSTILE_WANT:
                if rec.status is not None and 400 <= rec.status < 500:
                    return "4xx"
            elif rec.kind == "silent_client":
                if rec.status is None and rec.error == "closed without a response":
                    return "closed"
            elif rec.status == HOSTILE_WANT[rec.kind]:
                return "200+disconnect"
        elif rec.status == 200 and rec.complete:
            return "ok"
        elif rec.status == 429 and rec.criticality == "sheddable":
            return "shed"
        if not rec.gateway_up_at_send:
            return "gateway_down"
        if gw_killed:
            return "gateway_killed_in_flight"
        if replica_killed:
            return "replica_killed_in_flight"
        if not rec.hostile and rec.ready_at_send == 0:
            return "no_ready_replica"
        return "bad" if rec.hostile else "lost"

    def summarize(self, started: float, ended: float, shutdown: dict[str, Any]) -> dict[str, Any]:
        for rec in self.records:
            rec.outcome = self.classify(rec)
        table: dict[str, dict[str, int]] = {}
        for rec in self.records:
            key = rec.kind if rec.hostile else f"{rec.kind} ({rec.criticality})"
            row = table.setdefault(key, {})
            row[rec.outcome] = row.get(rec.outcome, 0) + 1
        crit_lost = [asdict(r) for r in self.records if r.criticality == "critical" and r.outcome == "lost"]
        hostile_bad = [asdict(r) for r in self.records if r.hostile and r.outcome == "bad"]
        good_ok = [r for r in self.records if not r.hostile and r.outcome == "ok"]

        def pct(xs: list[float], q: float) -> float | None:
            if not xs:
                return None
            xs = sorted(xs)
            return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 1)

        latency: dict[str, Any] = {}
        for name, recs in (("all", good_ok), ("stream", [r for r in good_ok if r.kind.endswith("_stream")]),
                           ("non_stream", [r for r in good_ok if not r.kind.endswith("_stream")]),
                           ("critical", [r for r in good_ok if r.criticality == "critical"]),
                           ("during_freeze", [r for r in good_ok if r.frozen_at_send])):
            lat = [r.latency for r in recs]
            latency[name] = {"n": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}
        ttft = [r.ttft for r in good_ok if r.ttft is not None]
        latency["stream_ttft"] = {"n": len(ttft), "p50_ms": pct(ttft, 0.5), "p99_ms": pct(ttft, 0.99)}
        rss = self.rss_summary()
        faults: dict[str, int] = {}
        for e in self.events:
            faults[e.kind] = faults.get(e.kind, 0) + 1
        growing = [role for role, s in rss.items() if s.get("flat") is False]
        checks = {
            "critical_lost_with_ready_replica": len(crit_lost),
            "hostile_not_4xx": len(hostile_bad),
            "orphans": len(shutdown["orphans"]),
            "envoy_orphaned_after_gateway_kill": sum("envoy_orphaned" in e.detail for e in self.events),
            "rss_growing": growing,
        }
        ok = not (checks["critical_lost_with_ready_replica"] or checks["hostile_not_4xx"] or checks["orphans"]
                  or checks["envoy_orphaned_after_gateway_kill"] or growing)
        load = os.getloadavg()
        summary = {
            "ok": ok, "checks": checks,
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "duration_s": round(ended, 1), "machine": {"cpus": os.cpu_count(), "loadavg_end": load,
                                                       "platform": sys.platform},
            "args": vars(self.args), "requests": len(self.records),
            "hostile": sum(r.hostile for r in self.records), "outcomes": table, "faults": faults,
            "events": [asdict(e) for e in self.events], "latency": latency, "rss": rss, "shutdown": shutdown,
            "critical_lost": crit_lost[:50], "hostile_bad": hostile_bad[:50],
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        with open(self.out / "requests.jsonl", "w") as fh:
            for rec in self.records:
                fh.write(json.dumps({**asdict(rec), "latency": round(rec.latency, 4)}) + "\n")
        with open(self.out / "rss.jsonl", "w") as fh:
            for s in self.samples:
                fh.write(json.dumps(s) + "\n")
        (self.out / "summary.md").write_text(markdown(summary))
        return summary

    def rss_summary(self) -> dict[str, Any]:
        """Per role: start/end/max RSS over the run (MB), open fds, and per process instance (a restart is a new
        one) a least-squares slope after a warm-up; `flat` judged on the longest-lived instance when it lived
        --judge-after seconds past it (no growth past 10 % and 20 MB from its first quarter of samples to its
        last); not on the harness, whose records grow by design."""
        out: dict[str, Any] = {}
        roles = sorted({s["role"] for s in self.samples})
        for role in roles:
            ss = [s for s in self.samples if s["role"] == role]
            insts: dict[int, list[dict[str, Any]]] = {}
            for s in ss:
                insts.setdefault(s["pid"], []).append(s)
            longest = max(insts.values(), key=len)
            warm = [s for s in longest if s["t"] - longest[0]["t"] >= self.args.warmup] or longest
            slope = None
            flat: bool | None = None
            if len(warm) >= 3:
                ts = [s["t"] / 3600 for s in warm]
                ys = [s["rss_kb"] / 1024 for s in warm]
                mt, my = statistics.fmean(ts), statistics.fmean(ys)
                den = sum((t - mt) ** 2 for t in ts)
                slope = round(sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / den, 1) if den else None
            if len(warm) >= 12 and warm[-1]["t"] - warm[0]["t"] >= self.args.judge_after and role != "harness":
                q = len(warm) // 4
                first = statistics.median(s["rss_kb"] / 1024 for s in warm[:q])
                last = statistics.median(s["rss_kb"] / 1024 for s in warm[-q:])
                flat = last - first <= max(20.0, 0.10 * first)
            fds = [s["fds"] for s in ss if s["fds"] is not None]
            out[role] = {
                "instances": len(insts), "start_mb": round(ss[0]["rss_kb"] / 1024, 1),
                "end_mb": round(ss[-1]["rss_kb"] / 1024, 1), "max_mb": round(max(s["rss_kb"] for s in ss) / 1024, 1),
                "longest_s": round(longest[-1]["t"] - longest[0]["t"], 1), "slope_mb_per_h": slope, "flat": flat,
                "fds_start": fds[0] if fds else None, "fds_end": fds[-1] if fds else None,
                "fds_max": max(fds) if fds else None,
            }
        return out


def markdown(s: dict[str, Any]) -> str:
    """The summary as the markdown docs/live-gateway.md's Soak section shows."""
    lines = [f"Soak: `{s['command']}`, started {s['started_utc']}, {s['duration_s']:.0f} s, "
             f"{s['requests']} requests ({s['hostile']} hostile); faults: "
             + ", ".join(f"{k} {v}" for k, v in sorted(s["faults"].items())) + f"; ok: {s['ok']}", ""]
    outcomes = sorted({o for row in s["outcomes"].values() for o in row})
    lines += ["| request | " + " | ".join(outcomes) + " |", "|---|" + "---|" * len(outcomes)]
    for key in sorted(s["outcomes"]):
        row = s["outcomes"][key]
        lines.append(f"| {key} | " + " | ".join(str(row.get(o, "")) for o in outcomes) + " |")
    c = s["checks"]
    lines += ["", f"Critical requests lost while a ready replica existed: **{c['critical_lost_with_ready_replica']}**;"
              f" hostile requests not answered 4xx: **{c['hostile_not_4xx']}**; processes left behind: "
              f"**{c['orphans']}**; RSS growing: {c['rss_growing'] or 'none'}.", "",
              "| latency of good requests | n | p50 ms | p99 ms |", "|---|---|---|---|"]
    for k, v in s["latency"].items():
        lines.append(f"| {k} | {v['n']} | {v['p50_ms']} | {v['p99_ms']} |")
    lines += ["", "| process | instances | RSS start MB | end MB | max MB | slope MB/h (longest, after warm-up) "
              "| longest s | fds start/end/max |", "|---|---|---|---|---|---|---|---|"]
    for role, r in s["rss"].items():
        lines.append(f"| {role} | {r['instances']} | {r['start_mb']} | {r['end_mb']} | {r['max_mb']} | "
                     f"{r['slope_mb_per_h']} | {r['longest_s']} | {r['fds_start']}/{r['fds_end']}/{r['fds_max']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="traffic duration")
    ap.add_argument("--rate", type=float, default=6.0, help="requests a second (Poisson arrivals)")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--out", default="soak-out", help="folder for summary.json, summary.md, requests.jsonl, logs")
    ap.add_argument("--kill-every", type=float, default=60.0, help="seconds between faults")
    ap.add_argument("--faults", default="replica,freeze,gateway",
                    help="fault kinds, each once per round in a seeded order: replica, freeze, gateway")
    ap.add_argument("--gateway-kills", type=int, default=3,
                    help="at most this many gateway kills, all in the run's first half (its RSS is judged on the "
                    "second)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hostile", type=float, default=0.15, help="fraction of hostile requests")
    ap.add_argument("--time-scale", type=float, default=1.0, help="the replicas' --time-scale")
    ap.add_argument("--message-timeout", type=float, default=2.0, help="envoy.messageTimeout (s)")
    ap.add_argument("--oversized-bytes", type=int, default=33 * 1024 * 1024,
                    help="an oversized body's size (over the gateway's body cap, 32 MiB)")
    ap.add_argument("--sample", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--judge-after", type=float, default=300.0,
                    help="RSS flatness is judged only on a process that lived this long past its warm-up")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds of each process' life left out of its slope")
    args = ap.parse_args(argv)
    args.faults = [f for f in args.faults.split(",") if f]
    bad = set(args.faults) - {"replica", "freeze", "gateway"}
    if bad:
        ap.error(f"unknown fault kinds {sorted(bad)}")
    summary = asyncio.run(Soak(args).run())
    print((Path(args.out) / "summary.md").read_text())
    if not summary["ok"]:
        print(f"soak: FAILED {json.dumps(summary['checks'])}", file=sys.stderr)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

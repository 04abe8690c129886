"""What the live gateway adds to a request: added p50/p99 latency at a fixed request rate and the max request rate,
through the gateway vs straight to the backends, streaming (SSE), in both modes (standalone proxy; Envoy + the
ext_proc picker). The backends are the tests' fakes (tests/live_fakes.py) answering at once (4 SSE chunks), so what
is measured is the gateway's own cost. Backends, gateway and this load generator are separate processes; the
baseline (direct) is measured in the same run, so the numbers are differences and ratios on this machine, not
absolutes. The load generator is a lean asyncio HTTP/1.1 client with keep-alive connections (the openai SDK costs
more than the gateway at these rates).

    python benchmarks/bench_gateway.py                         # rate 1000/s for 5 s, both modes
    python benchmarks/bench_gateway.py --rate 500 --duration 3 --modes standalone
    python benchmarks/bench_gateway.py --cpus 0                # pin the gateway (and Envoy) to CPU 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
BODY = json.dumps({"model": "fake", "prompt": "the quick brown fox jumps over the lazy dog " * 12, "max_tokens": 4,
                   "stream": True}).encode()


# ---- the backends process ------------------------------------------------------------------------------------------
def serve_backends(n: int, tokens: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from live_fakes import FakeFleet, Knobs

    fleet = FakeFleet()
    bs = [fleet.add(Knobs(tokens=tokens)) for _ in range(n)]
    print(json.dumps([b.address for b in bs]), flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        fleet.close()


# ---- the load generator ------------------------------------------------------------------------------------------
class Conn:
    def __init__(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.r, self.w = r, w


async def one(pool: list[Conn], host: str, port: int, lat: list[float], ttft: list[float], errors: list[int]) -> None:
    c = pool.pop() if pool else Conn(*await asyncio.open_connection(host, port))
    t0 = time.perf_counter()
    c.w.write(b"POST /v1/completions HTTP/1.1\r\nHost: bench\r\ncontent-type: application/json\r\n"
              b"content-length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
    try:
        head = await c.r.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        first = -1.0
        if b"chunked" in head.lower():
            while True:
                size = int((await c.r.readuntil(b"\r\n")).split(b";")[0], 16)
                if first < 0:
                    first = time.perf_counter() - t0
                if size == 0:
                    await c.r.readuntil(b"\r\n")
                    break
                await c.r.readexactly(size + 2)
        else:
            n = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":")[1])
            await c.r.readexactly(n)
        if status != 200:
            errors.append(status)
            c.w.close()
            return
    except (OSError, asyncio.IncompleteReadError, ValueError):
        errors.append(0)
        c.w.close()
        return
    lat.append(time.perf_counter() - t0)
    ttft.append(first)
    pool.append(c)


async def open_loop(targets: list[tuple[str, int]], rate: float, duration: float) -> dict[str, float]:
    """Requests at a fixed rate (round robin over targets), each on an idle keep-alive connection or a new one."""
    pools: list[list[Conn]] = [[] for _ in targets]
    lat: list[float] = []
    ttft: list[float] = []
    errors: list[int] = []
    tasks = set()
    loop = asyncio.get_running_loop()
    n = int(rate * duration)
    t0 = loop.time()
    late = 0
    for i in range(n):
        due = t0 + i / rate
        now = loop.time()
        if due > now:
            await asyncio.sleep(due - now)
        elif now - due > 0.005:
            late += 1
        h, p = targets[i % len(targets)]
        t = loop.create_task(one(pools[i % len(targets)], h, p, lat, ttft, errors))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(tasks, timeout=30)
    for pool in pools:
        for c in pool:
            c.w.close()
    a = np.array(lat) * 1e3
    return {"n": len(lat), "errors": len(errors), "late": late, "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "ttft_p50": float(np.percentile(np.array(ttft) * 1e3, 50))}


async def closed_loop(targets: list[tuple[str, int]], concurrency: int, duration: float) -> float:
    """Max rate: `concurrency` clients each sending back to back on their own keep-alive connection."""
    done = 0
    errors: list[int] = []
    stop = time.perf_counter() + duration

    async def client(k: int) -> None:
        nonlocal done
        h, p = targets[k % len(targets)]
        pool: list[Conn] = []
        lat: list[float] = []
        while time.perf_counter() < stop:
            await one(pool, h, p, lat, [], errors)
        done += len(lat)
        for c in pool:
            c.w.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(concurrency)))
    return done / (time.perf_counter() - t0)


# ---- the gateway process -----------------------------------------------------------------------------------------
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gateway(mode: str, backends: list[str], tmp: Path, cpus: str | None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cfg = {"mode": mode, "listen": f"127.0.0.1:{port}", "adminListen": f"127.0.0.1:{free_port()}",
           "endpoints": backends, "accessLog": str(tmp / f"{mode}-access.log"), "preset": "epp"}
    if mode == "envoy":
        cfg["envoy"] = {"listen": f"127.0.0.1:{port}", "admin": f"127.0.0.1:{free_port()}",
                        "extProc": f"127.0.0.1:{free_port()}", "accessLog": str(tmp / "envoy-access.log")}
    path = tmp / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "kubetwin.cli.main", "gateway", "--config", str(path)]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the gateway prints one line when it listens
        line = proc.stderr.readline()
        if line.startswith("gateway:"):
            return proc, port
        if proc.poll() is not None:
            raise RuntimeError(f"gateway exited with {proc.returncode}: {line}{proc.stderr.read()}")
    raise RuntimeError("gateway did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve-backends", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--backends", type=int, default=4)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--modes", default="standalone,envoy")
    ap.add_argument("--cpus", default=None, help="taskset CPU list for the gateway process (and Envoy)")
    args = ap.parse_args()
    if args.serve_backends:
        serve_backends(args.serve_backends, args.tokens)
        return
    be = subprocess.Popen([sys.executable, __file__, "--serve-backends", str(args.backends), "--tokens",
                           str(args.tokens)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert be.stdout is not None
    addrs: list[str] = json.loads(be.stdout.readline())
    direct = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in addrs]
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-gateway-") as td:
            asyncio.run(open_loop(direct, args.rate, 1.0))  # warm up
            base = asyncio.run(open_loop(direct, args.rate, args.duration))
            base_max = asyncio.run(closed_loop(direct, args.concurrency, args.duration))
            rows.append(("direct", base, base_max))
            for mode in [m for m in args.modes.split(",") if m]:
                gw, port = start_gateway(mode, addrs, Path(td), args.cpus)
                try:
                    target = [("127.0.0.1", port)]
                    asyncio.run(open_loop(target, args.rate, 1.0))
                    r = asyncio.run(open_loop(target, args.rate, args.duration))
                    m = asyncio.run(closed_loop(target, args.concurrency, args.duration))
                    rows.append((mode, r, m))
                finally:
                    gw.terminate()
                    try:
                        gw.wait(30)
                    except subprocess.TimeoutExpired:
                        gw.kill()
    finally:
        if be.stdin is not None:
            be.stdin.close()
        be.wait(10)
    print(f"streaming requests ({args.tokens} SSE chunks), {args.backends} instant fake backends, "
          f"{args.rate:.0f} req/s for {args.duration:.0f} s; max rate with {args.concurrency} closed-loop clients; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other work on the machine moves the numbers)")
    print(f"{'path':<11} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8} {'+p99 ms':>8} {'TTFT p50':>9} "
          f"{'ok':>6} {'err':>4} {'late':>5} {'max req/s':>10} {'vs direct':>9}")
    for name, r, m in rows:
        print(f"{name:<11} {r['p50']:>8.3f} {r['p99']:>8.3f} {r['p50'] - base['p50']:>8.3f} "
              f"{r['p99'] - base['p99']:>8.3f} {r['ttft_p50']:>9.3f} {r['n']:>6} {r['errors']:>4} {r['late']:>5} "
              f"{m:>10.0f} {m / base_max:>9.2f}")


if __name__ == "__main__":
    main()

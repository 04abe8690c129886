"""Running a gateway as a process: the standalone proxy or Envoy + the ext_proc server, until SIGINT/SIGTERM, then a
bounded drain. A port already held (an earlier gateway's, an orphaned Envoy's) is an error on stderr and exit status
1, before anything listens."""

from __future__ import annotations

import asyncio
import signal
import sys

from kubetwin.live import eventloop
from kubetwin.live.gateway.config import GatewayConfig, split_hostport
from kubetwin.live.lifetime import PortInUse, check_free


async def _main(cfg: GatewayConfig) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if cfg.mode == "envoy":
        from kubetwin.live.gateway.envoy import EnvoyGateway

        eg = EnvoyGateway(cfg)
        try:
            await eg.start()
        except (PortInUse, RuntimeError) as exc:  # a held port, no envoy binary, an Envoy that failed to start
            print(f"gateway: error: {exc}", file=sys.stderr, flush=True)
            await eg.stop()
            return 1
        print(f"gateway: envoy on http://{eg.listen_address}, ext_proc on {eg.extproc_address}, "
              f"metrics on http://{eg.admin_address}/metrics", file=sys.stderr, flush=True)
        waiter = asyncio.ensure_future(stop.wait())
        died = asyncio.ensure_future(eg.wait_envoy())
        await asyncio.wait({waiter, died}, return_when=asyncio.FIRST_COMPLETED)
        rc = 0 if waiter.done() else 1
        for f in (waiter, died):
            f.cancel()
        await eg.stop()
        return rc
    from kubetwin.live.gateway.standalone import StandaloneGateway

    try:
        for what, addr in (("listen", cfg.listen), ("adminListen", cfg.adminListen)):
            check_free(what, *split_hostport(addr))
    except PortInUse as exc:
        print(f"gateway: error: {exc}", file=sys.stderr, flush=True)
        return 1
    gw = StandaloneGateway(cfg)
    await gw.start()
    print(f"gateway: standalone on http://127.0.0.1:{gw.port}, metrics on http://127.0.0.1:{gw.admin_port}/metrics "
          f"({len(gw.picker.state.order)} endpoints)", file=sys.stderr, flush=True)
    await stop.wait()
    try:
        await asyncio.wait_for(gw.drain(), cfg.drainTimeout + 5.0)
    except TimeoutError:
        print("gateway: drain did not finish in time; exiting", file=sys.stderr, flush=True)
    return 0


def run_gateway(cfg: GatewayConfig) -> int:
    return eventloop.run(_main(cfg))

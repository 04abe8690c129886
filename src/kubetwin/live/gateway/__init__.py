"""`kubetwin gateway`: the twin's endpoint picker (kubetwin.serving.router, unchanged) routing real HTTP traffic,
either as an Envoy ext_proc server (the Inference Extension's endpoint picker protocol) or as a lean standalone
asyncio proxy. See docs/live-gateway.md."""

from kubetwin.live.gateway.config import GatewayConfig, load_config

__all__ = ["GatewayConfig", "load_config"]

"""The contract every router keeps: the `Router` protocol the data plane (and the live gateway) calls, and the 503
decision every router returns when there is no endpoint. Its own module so the presets registry and the router
families (production-stack, SGLang, Dynamo) can share it without importing each other."""

from __future__ import annotations

from typing import Protocol

from kubetwin.serving.router.epp import NO_ENDPOINT_REASON
from kubetwin.serving.types import Decision, EndpointSnapshot, Request


class Router(Protocol):
    """What the data plane (and the live gateway) calls."""

    name: str

    def pick(self, req: Request, snap: EndpointSnapshot, now: float) -> Decision: ...

    def routed(self, req: Request, index_or_name: int | str) -> None: ...

    def finished(self, req: Request, name: str) -> None: ...

    def remove(self, name: str) -> None: ...


NO_ENDPOINT_DECISION = Decision(None, 503, NO_ENDPOINT_REASON)

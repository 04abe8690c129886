"""A RequestTrace's arrivals pump, split from the data plane (plane.py): it hands each request to the gateway when it
is due. It reaches the data plane only through `Gateway`, the three things it asks of it, so arrivals.py does not
import plane.py (which creates the pumps)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kubetwin.serving.dataplane.pools import Pool
from kubetwin.serving.types import Request
from kubetwin.sim.env import Environment


class Gateway(Protocol):
    """What the arrivals pump needs of the data plane (plane.ServingDataPlane)."""

    env: Environment
    pools: dict[str, Pool]  # pool key -> the pool, while it exists

    def route(self, pool: Pool, req: Request, trace: str) -> None: ...

    def no_route(self, req: Request, trace: str, key: str) -> None: ...


class Arrivals:
    """One RequestTrace's arrivals: routes the request due now, then every following one that falls before the next
    queued event (Environment.claim: those would run next anyway), then schedules itself for the first that does
    not. One object per trace instead of a closure and a heap round trip per request."""

    __slots__ = ("plane", "it", "t0", "trace", "key", "req")

    def __init__(self, plane: Gateway, it: Iterator[Request], t0: float, trace: str, key: str, req: Request) -> None:
        self.plane, self.it, self.t0, self.trace, self.key = plane, it, t0, trace, key
        self.req: Request | None = req  # the next request due; None once the trace is spent

    def __call__(self) -> None:
        plane, it, t0, trace, key = self.plane, self.it, self.t0, self.trace, self.key
        env, pools = plane.env, plane.pools
        req: Request | None = self.req
        while req is not None:
            pool = pools.get(key)
            if pool is None:  # no such pool (yet, or any more): the gateway has no route
                plane.no_route(req, trace, key)
            else:
                plane.route(pool, req, trace)
            req = next(it, None)
            if req is None:
                break
            req.arrival += t0
            if not env.claim(req.arrival):
                self.req = req
                env.at(req.arrival, self)
                return
        self.req = None

"""A RequestTrace's arrivals pump, split from dataplane.py: it hands each request to the data plane when it is due."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from kubetwin.serving.types import Request

if TYPE_CHECKING:
    from kubetwin.serving.dataplane import ServingDataPlane


class Arrivals:
    """One RequestTrace's arrivals: routes the request due now, then every following one that falls before the next
    queued event (Environment.claim: those would run next anyway), then schedules itself for the first that does
    not. One object per trace instead of a closure and a heap round trip per request."""

    __slots__ = ("plane", "it", "t0", "trace", "key", "req")

    def __init__(self, plane: ServingDataPlane, it: Iterator[Request], t0: float, trace: str, key: str,
                 req: Request) -> None:
        self.plane, self.it, self.t0, self.trace, self.key, self.req = plane, it, t0, trace, key, req

    def __call__(self) -> None:
        plane, it, t0, trace, key = self.plane, self.it, self.t0, self.trace, self.key
        env, pools = plane.env, plane.pools
        req: Request | None = self.req
        while req is not None:
            pool = pools.get(key)
            if pool is None:  # no such pool (yet, or any more): the gateway has no route
                plane.no_route(req, trace, key)
            else:
                plane._route(pool, req, trace)
            req = next(it, None)
            if req is None:
                break
            req.arrival += t0
            if not env.claim(req.arrival):
                self.req = req
                env.at(req.arrival, self)
                return
        self.req = None

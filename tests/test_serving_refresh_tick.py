"""The router's view of a pool lags the engines as the EPP's periodic metrics scrape does: the state as of the last
50 ms tick, also for the first request after a quiet spell (it used to be read fresh then, which no scrape gives,
and the twin then routed differently from the live picker on the same trace)."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette")

from kubetwin.live.emulator.config import EmulatorConfig, build_served
from kubetwin.live.prompts import engine_request
from kubetwin.serving.dataplane.pools import REFRESH_INTERVAL, Endpoint, Pool

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def one_replica_pool() -> tuple[Pool, Endpoint]:
    engine = build_served(EmulatorConfig(model=MODEL)).engine
    ep = Endpoint("vllm-0", "default", "uid-0", {"app": "vllm"}, engine, 1, MODEL, [MODEL])
    pool = Pool("InferencePool", "default", "pool", {"app": "vllm"}, router=None, holds=True, ttl=600.0)
    pool.set_endpoints([ep])
    return pool, ep


def test_view_is_the_last_tick_not_now() -> None:
    pool, ep = one_replica_pool()
    assert REFRESH_INTERVAL == 0.05
    first = pool.view(0.02)  # the first request after a quiet spell sees the 0.00 tick, not 0.02
    assert pool.snap_time == 0.0 and first.waiting.tolist() == [0] and first.running.tolist() == [0]
    ep.engine.advance(0.02)
    ep.engine.add(engine_request(0, 0.02, "the quick brown fox " * 200, 50), 0.02)
    assert pool.view(0.049) is first  # same tick: the request routed at 0.02 is not seen yet
    later = pool.view(0.051)  # the 0.05 tick: it is
    assert pool.snap_time == 0.05 and later is not first
    assert later.waiting.tolist()[0] + later.running.tolist()[0] == 1
    assert pool.view(0.099) is later and pool.view(0.1) is not later

"""A comparison knows when it is void (issue 34 item 6): the emulator measures how late it shows tokens against the
wall clock and exports it on /metrics; `kubetwin loadgen` reads it (--metrics-url) with its own send lag and flags
a run past --max-lag as not a valid comparison, in summary.json and on stderr."""

from __future__ import annotations

from conftest import need_live_extra

need_live_extra("starlette", "httpx", "uvicorn")

from pathlib import Path

import httpx
from live_fakes import generator_trace
from typer.testing import CliRunner

from kubetwin.cli.main import app
from kubetwin.live import loadgen as lg
from kubetwin.live.emulator import EmulatorConfig, EmulatorThread
from kubetwin.live.emulator.config import build_served
from kubetwin.live.emulator.realtime import RealtimeEngine
from kubetwin.live.scrape import parse_exposition

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_realtime_engine_measures_how_late_it_shows_tokens() -> None:
    """On time, no lag (a clock that stops at each due time); a loop held up for 0.5 s of wall time shows the tokens
    due meanwhile that much late, in wall seconds whatever the time scale."""
    for scale in (1.0, 4.0):
        clock = Clock()
        rt = RealtimeEngine(build_served(EmulatorConfig(model=MODEL, time_scale=scale)).engine, scale, clock=clock)
        rt.submit("a b c d", 40)
        nxt = rt.step()
        for _ in range(10_000):  # punctual: the clock lands on each due time (a hair past one not yet fixed)
            if not rt.streams or rt.lag_count >= 5:
                break
            clock.t = max(nxt / scale, clock.t + 1e-6)
            nxt = rt.step()
        assert rt.lag_count >= 5 and rt.lag_max < 1e-5, (scale, rt.lag_count, rt.lag_max)
        assert rt.streams and nxt > rt.now()
        clock.t += 0.5 + (nxt - rt.now()) / scale  # the loop wakes 0.5 s after the next token was due
        before = rt.lag_count
        rt.step()
        # 0.5 s after the engine's next event; the token it makes visible is due the step's API share later
        assert rt.lag_count > before and 0.49 <= rt.lag_max <= 0.5 + 1e-6, (scale, rt.lag_max)


def _trace(tmp: Path) -> Path:
    return generator_trace(tmp, MODEL)


def test_loadgen_flags_a_run_past_its_lag_bound(tmp_path: Path) -> None:
    with EmulatorThread(EmulatorConfig(model=MODEL, port=0, time_scale=10.0)) as e:
        metrics = e.url + "/metrics"
        names = {name for name, _, _ in parse_exposition(httpx.get(metrics, timeout=10).text)}
        assert {lg.LAG_SUM, lg.LAG_COUNT, lg.LAG_MAX} <= names
        ok = lg.run(_trace(tmp_path), lg.Options(e.url + "/v1", timeout=10, max_lag=10.0), metrics_urls=[metrics])
        verdict = ok["loadgen"]["comparison"]
        assert verdict["valid"] and verdict["reasons"] == [] and verdict["max_lag_seconds"] == 10.0
        assert verdict["server_lag"]["tokens"] >= ok["serving"]["overall"]["completed"] * 6 > 0
        # a bound no real run meets: both sides are named, and the CLI says so on stderr
        void = lg.run(_trace(tmp_path), lg.Options(e.url + "/v1", timeout=10, max_lag=0.0), metrics_urls=[metrics])
        reasons = void["loadgen"]["comparison"]["reasons"]
        assert not void["loadgen"]["comparison"]["valid"] and len(reasons) == 2
        assert "load generator sent its requests late" in reasons[0] and "emulators showed their tokens" in reasons[1]
        res = CliRunner().invoke(app, ["loadgen", str(_trace(tmp_path)), "--url", e.url + "/v1", "--timeout", "10",
                                       "--metrics-url", metrics, "--max-lag", "0"])
        assert res.exit_code == 0 and "loadgen: not a valid comparison: the emulators showed" in res.output


def test_without_server_metrics_only_the_client_is_judged() -> None:
    client = {"send_lag_p99_seconds": 0.001}
    assert lg.comparison(client, None, None, 0.02) == {"max_lag_seconds": 0.02, "valid": True, "reasons": []}
    late = lg.comparison({"send_lag_p99_seconds": 0.5}, None, None, 0.02)
    assert not late["valid"] and "p99 0.500 s > 0.02 s" in late["reasons"][0]


def test_the_cli_default_is_the_modules() -> None:
    import inspect

    from kubetwin.cli.loadgen import loadgen

    assert inspect.signature(loadgen).parameters["max_lag"].default.default == lg.MAX_LAG_S

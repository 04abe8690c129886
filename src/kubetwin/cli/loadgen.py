"""`kubetwin loadgen TRACE.yaml --url BASE_URL`: a RequestTrace replayed against an OpenAI-compatible server
(kubetwin.live.loadgen), written as `kubetwin run` writes requests.csv and summary.json's serving section."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kubetwin.api.errors import KubetwinError
from kubetwin.cli.output import console as make_console
from kubetwin.cli.output import fail

console = make_console()
err = make_console(stderr=True)


def loadgen(trace_file: Path = typer.Argument(..., help="YAML holding a RequestTrace (other manifests are read "
                                              "for its Scenario, objectives and SLO annotations)"),
            url: str = typer.Option(..., "--url", help="OpenAI-compatible base URL ending in /v1"),
            out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder for requests.csv and summary.json"),
            time_scale: float = typer.Option(1.0, "--time-scale", min=1e-6, help="replay X times faster; "
                                             "latencies are multiplied back into trace seconds"),
            concurrency: int = typer.Option(1024, "--concurrency", min=1, help="requests in flight at most"),
            seed: Optional[int] = typer.Option(None, "--seed", help="generator seed (overrides the Scenario's)"),
            duration: Optional[str] = typer.Option(None, "--duration", help="run length in trace time, e.g. 10m "
                                                   "(default the Scenario's): later requests are not sent, open "
                                                   "ones at the end count as in flight"),
            trace: Optional[str] = typer.Option(None, "--trace", help="the RequestTrace's name when the file "
                                                "holds several"),
            metrics_url: list[str] = typer.Option([], "--metrics-url", help="a server's /metrics (repeatable): "
                                                  "prefix-cache hit rate from vllm:prefix_cache_* counters"),
            timeout: float = typer.Option(600.0, "--timeout", min=0.001, help="wall seconds one request may take "
                                          "(then 504)"),
            ignore_eos: bool = typer.Option(True, "--ignore-eos/--no-ignore-eos", help="send vLLM's ignore_eos so "
                                            "the server generates max_tokens"),
            max_lag: float = typer.Option(0.02, "--max-lag", min=0.0, help="wall seconds of lag (the client's sends, "
                                          "p99; the emulators' tokens, mean, from --metrics-url) past which the "
                                          "run is flagged as not a valid comparison")) -> None:
    """Replay a RequestTrace open-loop against a live server and record it as the twin records a run."""
    from kubetwin.live import loadgen as lg

    opts = lg.Options(url, time_scale, concurrency, timeout, ignore_eos, max_lag=max_lag)
    try:
        summary = lg.run(trace_file, opts, out, trace_name=trace, seed=seed, duration=duration,
                         metrics_urls=metrics_url)
    except (KubetwinError, lg.LoadgenError) as exc:
        fail(exc)
    console.print(summary_line(summary), highlight=False)
    for problem in summary["loadgen"].get("problems") or []:
        err.print(f"loadgen: {problem}", markup=False, highlight=False)
    for reason in summary["loadgen"]["comparison"]["reasons"]:
        err.print(f"loadgen: not a valid comparison: {reason}", markup=False, highlight=False)
    if out is not None:
        console.print(f"run folder: {out}", highlight=False)


def summary_line(summary: dict) -> str:
    """One line: counts by status, TTFT/TPOT percentiles, SLO attainment and goodput, as the twin names them."""
    o, c = summary["serving"]["overall"], summary["loadgen"]

    def ms(d: dict, k: str) -> str:
        return "-" if d.get(k) is None else f"{1000 * d[k]:.0f} ms"

    slo = "-" if o["slo_attainment"] is None else f"{100 * o['slo_attainment']:.1f} %"
    # the "other" failures by error code (a cut stream as stream_cut, not the 200 its headers said)
    codes = {k: v for k, v in (c.get("error_codes") or {}).items() if k not in ("429", "503")}
    other = f" ({', '.join(f'{k} {v}' for k, v in codes.items())})" if codes else ""
    hit = "" if o.get("prefix_cache_hit_rate") is None else f", prefix-cache hit rate {o['prefix_cache_hit_rate']}"
    return (f"loadgen: {o['requests']} requests in {c['wall_seconds']:.1f} s wall, {o['completed']} completed, "
            f"{o['rejected_429']} 429, {o['failed_503']} 503, {o['failed_other']} other{other}, "
            f"{o['in_flight_at_end']} in flight at the end; TTFT p50 {ms(o['ttft_seconds'], 'p50')} "
            f"p90 {ms(o['ttft_seconds'], 'p90')}, "
            f"TPOT p50 {ms(o['tpot_seconds'], 'p50')}, SLO attainment {slo}, goodput {o['goodput_rps']} req/s"
            f"{hit} (trace seconds; send lag p99 {c['send_lag_p99_seconds']} s wall)")

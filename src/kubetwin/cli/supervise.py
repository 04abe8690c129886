"""`kubetwin supervise SCENARIO.yaml`: the twin's KEDA and HPA controllers scaling real replica processes
(kubetwin.live.supervisor)."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType
from typing import Optional

import typer

from kubetwin.api.errors import KubetwinError
from kubetwin.cli.output import fail


def supervise(paths: list[Path] = typer.Argument(..., help="manifests holding a ScaledObject (or an HPA) and its "
                                                 "target Deployment, e.g. examples/serving-scale-to-zero.yaml"),
              command: Optional[str] = typer.Option(None, "--command", help="replica command; {port}, {host}, "
                                                    "{name}, {model} are filled in (default: kubetwin emulate vllm "
                                                    "--host 127.0.0.1 --port {port} --model {model})"),
              endpoints_file: Path = typer.Option(..., "--endpoints-file", help="host:port per line of the ready "
                                                  "replicas, for the gateway to re-read"),
              metrics_url: list[str] = typer.Option([], "--metrics-url", help="the gateway's /metrics (repeatable)"),
              scaled_object: Optional[str] = typer.Option(None, "--scaled-object", help="the ScaledObject or HPA "
                                                          "to run when the manifests hold several"),
              scrape_interval: float = typer.Option(15.0, "--scrape-interval", min=0.01, help="seconds between "
                                                    "scrapes (Prometheus' scrape_interval)"),
              hpa_sync_period: float = typer.Option(15.0, "--hpa-sync-period", min=0.01,
                                                    help="--horizontal-pod-autoscaler-sync-period, seconds"),
              hpa_downscale_stabilization: float = typer.Option(
                  300.0, "--hpa-downscale-stabilization", min=0.0,
                  help="--horizontal-pod-autoscaler-downscale-stabilization, seconds"),
              drain: float = typer.Option(2.0, "--drain", min=0.0, help="seconds between leaving the endpoints "
                                          "file and SIGTERM"),
              tick: float = typer.Option(1.0, "--tick", min=0.01, help="the loop's period, seconds"),
              duration: Optional[float] = typer.Option(None, "--duration", help="stop after this many seconds "
                                                       "(default: until Ctrl-C or SIGTERM)")) -> None:
    """Run the ScaledObject's KEDA + HPA decisions live: start and stop replica processes, keep the gateway's
    endpoints file, and print each decision as KEDA and the HPA word it."""
    from kubetwin.live import supervisor as sv

    opts = sv.Options(command=command or sv.DEFAULT_COMMAND, endpoints_file=endpoints_file,
                      metrics_urls=metrics_url, tick=tick, scrape_interval=scrape_interval,
                      hpa_sync_period=hpa_sync_period, hpa_downscale_stabilization=hpa_downscale_stabilization,
                      drain=drain, log=lambda line: print(line, flush=True))
    try:
        sup = sv.supervisor_for([str(p) for p in paths], opts, scaled_object)
    except (KubetwinError, sv.SupervisorError) as exc:
        fail(exc)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)  # a SIGTERM stops the replicas like Ctrl-C does
    try:
        sup.run(duration)
    except KeyboardInterrupt:
        pass  # run() already stopped every replica on the way out

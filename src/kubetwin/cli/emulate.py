"""`kubetwin emulate vllm ...`: a vLLM stand-in on loopback whose timing is the twin's engine model
(kubetwin.live.emulator; docs/live-emulator.md)."""

from __future__ import annotations

from typing import Any, Optional

import typer

from kubetwin.cli.output import console as make_console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Run model-server emulators timed by the twin's engine model.")
err = make_console(stderr=True)


@app.command("vllm", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def vllm_cmd(ctx: typer.Context,
             model: str = typer.Option(..., "--model", help="the model vLLM serves (a name in the twin's model "
                                       "table, e.g. meta-llama/Llama-3.1-8B-Instruct)"),
             gpu: str = typer.Option("nvidia-h100-80gb", "--gpu", help="GKE accelerator name of the one device "
                                     "(x --tensor-parallel-size) the engine is sized and timed for"),
             port: int = typer.Option(8000, "--port", help="port to listen on"),
             host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
             time_scale: float = typer.Option(1.0, "--time-scale", help="emulated seconds per wall second (10: "
                                              "run ten times faster than real time; latencies reported are "
                                              "emulated)"),
             startup_delay: float = typer.Option(0.0, "--startup-delay", help="wall seconds /health answers 503 "
                                                 "before the server is ready"),
             crash_after_tokens: Optional[int] = typer.Option(None, "--crash-after-tokens", help="cut each "
                                                              "response's connection after N tokens"),
             hang_after_tokens: Optional[int] = typer.Option(None, "--hang-after-tokens", help="stop sending "
                                                             "after N tokens, keeping the connection open (0: never "
                                                             "answer)"),
             error_rate: float = typer.Option(0.0, "--error-rate", help="fraction of requests answered 500"),
             seed: int = typer.Option(0, "--seed", help="seed of --error-rate's draws"),
             metrics_fail: Optional[str] = typer.Option(None, "--metrics-fail", help="GET /metrics fails: "
                                                        "'error' (500) or 'hang'"),
             # these three default to EmulatorConfig's (live/emulator/config.py), the one place they are set
             max_request_body_bytes: Optional[int] = typer.Option(None, "--max-request-body-bytes",
                                                                  help="larger request bodies get 413 (vLLM has no "
                                                                  "cap; default 32 MiB)"),
             header_timeout: Optional[float] = typer.Option(None, "--header-timeout", help="seconds a connection "
                                                            "may take to send a request head (408 / closed past "
                                                            "it; default 10)"),
             limit_concurrency: Optional[int] = typer.Option(None, "--limit-concurrency", help="open connections "
                                                             "past which requests get 503 (uvicorn's "
                                                             "limit_concurrency; default 2048)"),
             ) -> None:
    """vLLM's OpenAI API (/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics). Any other
    option is vLLM's own (`vllm serve --help`), read by the twin's vLLM parser: --max-num-seqs 64,
    --enable-lora --lora-modules sql=/adapters/sql, --max-model-len 4096, ..."""
    import uvicorn

    from kubetwin.live.emulator import EmulatorConfig, EmulatorConfigError, build_app
    from kubetwin.live.emulator.server import uvicorn_config

    limits: dict[str, Any] = {k: v for k, v in (("max_request_body_bytes", max_request_body_bytes),
                                                ("header_timeout", header_timeout),
                                                ("limit_concurrency", limit_concurrency)) if v is not None}
    config = EmulatorConfig(model=model, gpu=gpu, vllm_args=list(ctx.args), host=host, port=port,
                            time_scale=time_scale, startup_delay=startup_delay,
                            crash_after_tokens=crash_after_tokens, hang_after_tokens=hang_after_tokens,
                            error_rate=error_rate, seed=seed, metrics_fail=metrics_fail,
                            **limits)
    try:
        app_ = build_app(config)
    except EmulatorConfigError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    served = app_.state.emulator.served
    # bound here, before the banner, so it names the port the kernel gave (--port 0: a free one) and a port in
    # use fails before anything is printed as served (uvicorn.Config.bind_socket: SO_REUSEADDR, as uvicorn.run)
    server = uvicorn.Server(uvicorn_config(app_, config, host=host, port=port))
    try:
        sock = server.config.bind_socket()
    except SystemExit:  # uvicorn logs the OSError (address in use) and exits 1
        raise typer.Exit(1) from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    err.print(f"emulating vLLM serving {', '.join(served.model_names)} on {gpu}: max_model_len "
              f"{served.max_model_len}, {served.engine.num_gpu_blocks} KV blocks, max_num_seqs "
              f"{served.args.max_num_seqs}; http://{shown}:{bound} (time scale {time_scale})", markup=False,
              highlight=False)
    server.run(sockets=[sock])

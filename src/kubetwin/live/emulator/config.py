"""The emulator's configuration: vLLM's own command line (read by the twin's vLLM parser, so a flag vLLM rejects is
rejected here in vLLM's words) plus the emulator's flags (device, time scale, fault injection), and the engine built
from them exactly as the twin builds a vLLM pod's engine (`serving.modelserver.sizing.build_engine`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from kubetwin.live.requestbody import DEFAULT_MAX_BODY_BYTES
from kubetwin.serving.dataplane.plane import lora_names
from kubetwin.serving.engine.core import Engine
from kubetwin.serving.modelserver.modelspec import lookup_server_model
from kubetwin.serving.modelserver.server_args import ArgToken
from kubetwin.serving.modelserver.sizing import (
    allows_long_max_model_len,
    build_engine,
    context_length_error,
    parallel_problems,
)
from kubetwin.serving.modelserver.vllm_args import parse_vllm
from kubetwin.serving.types import EngineArgs

METRICS_FAIL_MODES = ("error", "hang")
H11_FLAG = "--h11-max-incomplete-event-size"
H11_MAX_INCOMPLETE_EVENT_SIZE_DEFAULT = 4 * 1024 * 1024  # vllm/entrypoints/constants.py


class EmulatorConfigError(ValueError):
    """The configuration vLLM (or the emulator) would refuse to start with; the message is vLLM's where vLLM has
    one."""


@dataclass
class EmulatorConfig:
    """Everything `kubetwin emulate vllm` takes. `vllm_args` are vLLM's own flags after --model (e.g.
    ["--max-num-seqs", "64", "--enable-lora", "--lora-modules", "sql=/adapters/sql"])."""

    model: str
    gpu: str = "nvidia-h100-80gb"
    vllm_args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8000
    time_scale: float = 1.0  # emulated seconds per wall second
    # fault injection (tests of the gateway and load generator)
    startup_delay: float = 0.0  # wall seconds before /health answers 200
    crash_after_tokens: int | None = None  # a stream's connection is cut after this many tokens
    # a stream stops sending after this many tokens (connection kept); 0: the server never answers (a wedged server)
    hang_after_tokens: int | None = None
    error_rate: float = 0.0  # fraction of requests answered 500
    seed: int = 0
    metrics_fail: str | None = None  # "error": GET /metrics answers 500; "hang": it never answers
    # bounds against hostile clients (issue 34; docs/live-emulator.md): a body over the cap gets 413; a request head
    # not in within header_timeout seconds is dropped (408 if it had started); past limit_concurrency open
    # connections requests get uvicorn's 503. Head size: vLLM's own --h11-max-incomplete-event-size (431 past it).
    max_request_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    header_timeout: float = 10.0
    limit_concurrency: int = 2048

    def h11_max_incomplete_event_size(self) -> int:
        """vLLM's --h11-max-incomplete-event-size among the vLLM flags (default 4 MB, vLLM's)."""
        args = self.vllm_args
        for i, a in enumerate(args):
            value = None
            if a == H11_FLAG and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith(H11_FLAG + "="):
                value = a.split("=", 1)[1]
            if value is not None:
                if not value.isdigit():
                    raise EmulatorConfigError(f"argument {H11_FLAG}: invalid int value: {value!r}")
                return int(value)
        return H11_MAX_INCOMPLETE_EVENT_SIZE_DEFAULT

    def validate(self) -> None:
        if not self.time_scale > 0:
            raise EmulatorConfigError(f"--time-scale must be > 0, got {self.time_scale}")
        if not 0.0 <= self.error_rate <= 1.0:
            raise EmulatorConfigError(f"--error-rate must be in [0, 1], got {self.error_rate}")
        if self.startup_delay < 0:
            raise EmulatorConfigError(f"--startup-delay must be >= 0, got {self.startup_delay}")
        if self.metrics_fail is not None and self.metrics_fail not in METRICS_FAIL_MODES:
            raise EmulatorConfigError(f"--metrics-fail must be one of {', '.join(METRICS_FAIL_MODES)}, "
                                      f"got {self.metrics_fail!r}")
        if self.max_request_body_bytes < 1:
            raise EmulatorConfigError(f"--max-request-body-bytes must be >= 1, got {self.max_request_body_bytes}")
        if not self.header_timeout > 0:
            raise EmulatorConfigError(f"--header-timeout must be > 0, got {self.header_timeout}")
        if self.limit_concurrency < 1:
            raise EmulatorConfigError(f"--limit-concurrency must be >= 1, got {self.limit_concurrency}")
        self.h11_max_incomplete_event_size()
        for name in ("crash_after_tokens", "hang_after_tokens"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise EmulatorConfigError(f"--{name.replace('_', '-')} must be >= 0, got {v}")


@dataclass
class Served:
    """What the emulated server serves: its resolved engine args, the engine, its model names and adapters."""

    args: EngineArgs
    engine: Engine
    model_names: list[str]  # --served-model-name (default: --model); the first is the metrics' model_name
    adapters: dict[str, str]  # LoRA name -> path (--lora-modules, only with --enable-lora)
    max_model_len: int


def lora_paths(modules: list[str]) -> dict[str, str]:
    """name -> path of each --lora-modules entry (`name=path` or the JSON form), named as the data plane names them
    (serving.dataplane.plane.lora_names); an entry without a name is skipped, as there."""
    out: dict[str, str] = {}
    for m in modules:
        names = lora_names([m])
        if not names:
            continue
        if m.lstrip().startswith("{"):
            out[names[0]] = str(json.loads(m).get("path", ""))
        else:
            out[names[0]] = m.split("=", 1)[1] if "=" in m else ""
    return out


def build_served(config: EmulatorConfig) -> Served:
    """vLLM's command line -> the engine, as the twin builds a vLLM pod's engine on one device of `config.gpu`."""
    config.validate()
    argv = [ArgToken(w, f"argv[{i}]") for i, w in enumerate(["--model", config.model, *config.vllm_args])]
    args, problems = parse_vllm(argv, "vllm serve", "argv")
    errors = [p for p in problems if p.severity == "error"]
    if args is None or errors:
        raise EmulatorConfigError("; ".join(p.message for p in errors) or "invalid vLLM arguments")
    spec = lookup_server_model(args.model, args.served_model_name)
    if spec is None:
        raise EmulatorConfigError(f"model {args.model!r} is not in the twin's model table")
    too_long = context_length_error(args, spec, allows_long_max_model_len(dict(os.environ)))
    if too_long:  # ModelConfig's check runs before any parallel layout is looked at
        raise EmulatorConfigError(too_long)
    refused = [msg for _, msg, sev in parallel_problems(args, spec, args.tensor_parallel_size *
                                                        args.pipeline_parallel_size) if sev == "error"]
    if refused:
        raise EmulatorConfigError(refused[0])
    try:
        args, engine = build_engine(args, spec, config.gpu, None, name="emulator")
    except ValueError as err:  # StartupFailure: vLLM would exit while starting; catalog errors for an unknown GPU
        raise EmulatorConfigError(str(err)) from None
    assert args.max_model_len is not None
    adapters = lora_paths(args.lora_modules) if args.enable_lora else {}
    return Served(args, engine, list(args.served_model_name) or [args.model], adapters, args.max_model_len)

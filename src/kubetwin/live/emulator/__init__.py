"""A vLLM stand-in (issue 20): vLLM's OpenAI-compatible API and /metrics, timed by the twin's engine model running on
the wall clock. `config` (vLLM's flags -> the engine, as the twin builds a pod's), `realtime` (the engine on the wall
clock), `server` (the HTTP routes, `build_app`; `EmulatorThread` runs one in-process, `EmulatorProcess` as a
subprocess), `metrics` (vLLM's Prometheus series), `faults` (failure injection). CLI: `kubetwin emulate vllm`;
docs/live-emulator.md."""

from kubetwin.live.emulator.config import EmulatorConfig, EmulatorConfigError
from kubetwin.live.emulator.server import EmulatorProcess, EmulatorThread, build_app

__all__ = ["EmulatorConfig", "EmulatorConfigError", "EmulatorProcess", "EmulatorThread", "build_app"]

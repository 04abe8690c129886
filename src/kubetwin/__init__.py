"""kubetwin: a digital twin of a GKE AI/ML accelerator platform."""

from typing import Any

__all__ = ["RunResult", "run"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import the runner lazily so `kubetwin validate` does not pay for the simulator."""
    if name in __all__:
        from kubetwin import run as _run_module

        return getattr(_run_module, name)
    raise AttributeError(name)

"""kubetwin: a digital twin of a GKE AI/ML accelerator platform."""

import importlib
from typing import Any

from kubetwin.native import install

install()  # the compiled hot modules, when built from these sources (kubetwin.native), before any of them loads

__all__ = ["RunResult", "run"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import the runner (kubetwin.runner) lazily, so `kubetwin validate` does not pay for the simulator."""
    if name in __all__:
        value = getattr(importlib.import_module("kubetwin.runner"), name)
        globals()[name] = value
        return value
    raise AttributeError(name)

"""kubetwin: a digital twin of a GKE AI/ML accelerator platform."""

import importlib
from typing import Any

__all__ = ["RunResult", "run"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import the runner lazily so `kubetwin validate` does not pay for the simulator.

    Importing the submodule `kubetwin.run` binds the package attribute `run` to the module; it is bound to the
    function here instead (and the module itself is callable, for code that imported the submodule first)."""
    if name in __all__:
        module = importlib.import_module("kubetwin.run")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(name)

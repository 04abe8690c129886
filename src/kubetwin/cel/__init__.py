"""CEL as Kubernetes runs it: Google's cel-cpp (cel-expr-python) plus the Kubernetes CEL libraries."""

from kubetwin.cel.dra import CelError, DeviceView, Selector, compile_selector

__all__ = ["CelError", "DeviceView", "Selector", "compile_selector"]

"""The store's errors that subclass a built-in exception other than Exception: kept out of the compiled store
(kubetwin.native: mypyc compiles a class that inherits from RuntimeError only as a Python class)."""

from __future__ import annotations

__all__ = ["WriteDuringDispatch"]


class WriteDuringDispatch(RuntimeError):
    """A watch handler wrote to the store while its event was being dispatched.

    A handler must only enqueue work (env.after(0, ...)) or update its own cache, as informer event handlers
    hand keys to a workqueue (client-go tools/cache ResourceEventHandler; sample-controller's enqueue). A write
    inside dispatch reaches the handlers registered after it before the ones registered earlier have seen the
    first event, so results would depend on the order controllers were created.
    """

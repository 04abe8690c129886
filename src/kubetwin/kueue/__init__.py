"""Kueue's admission algorithms as a pure library: manifests in, scheduling decisions out.

Modules (each ported from kubernetes-sigs/kueue, cited in its docstring): ``api`` (manifests -> dataclasses),
``quota`` (hierarchical quota arithmetic), ``snapshot`` (the state a cycle sees), ``flavorassigner``,
``preemption`` (classical), ``podset_reducer`` (partial admission), ``queue`` (heaps and requeue rules),
``cycle`` (``KueueScheduler.schedule``), ``outcomes`` (what a cycle returns) and ``fairsharing`` (DRS, fair-sharing
preemption and admission order, on with ``KueueScheduler(fair_sharing=True)``).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubetwin.kueue.cycle import KueueScheduler
    from kubetwin.kueue.outcomes import Admitted, CycleResult, Pending, Victim

__all__ = ["Admitted", "CycleResult", "KueueScheduler", "Pending", "Victim"]


def __getattr__(name: str) -> Any:
    """The library's names, imported on first use (PEP 562): every run reads kubetwin.kueue.config, and only a
    cluster with Kueue installed needs the admission cycle (~25 ms of imports; issue 32)."""
    if name == "KueueScheduler":
        from kubetwin.kueue.cycle import KueueScheduler

        return KueueScheduler
    if name in ("Admitted", "CycleResult", "Pending", "Victim"):
        from kubetwin.kueue import outcomes

        return getattr(outcomes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Kueue's admission algorithms as a pure library: manifests in, scheduling decisions out.

Modules (each ported from kubernetes-sigs/kueue, cited in its docstring): ``api`` (manifests -> dataclasses),
``quota`` (hierarchical quota arithmetic), ``snapshot`` (the state a cycle sees), ``flavorassigner``,
``preemption`` (classical), ``podset_reducer`` (partial admission), ``queue`` (heaps and requeue rules),
``cycle`` (``KueueScheduler.schedule``), ``outcomes`` (what a cycle returns) and ``fairsharing`` (DRS, fair-sharing
preemption and admission order, on with ``KueueScheduler(fair_sharing=True)``).
"""

from kubetwin.kueue.cycle import KueueScheduler
from kubetwin.kueue.outcomes import Admitted, CycleResult, Pending, Victim

__all__ = ["Admitted", "CycleResult", "KueueScheduler", "Pending", "Victim"]

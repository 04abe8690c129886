"""A made-up scheduler plugin that reacts to a cluster event: the whole of it, as docs/architecture.md's "Plugging in"
says a plugin is (tests/test_plugging_in.py registers it with one line).

MaintenanceWindow keeps pods labelled `example.com/needs-window: "true"` off every node until the ConfigMap
`maintenance-window` in their namespace says `open: "true"`. It registers ConfigMap add/update
(events_to_register), and its QueueingHint answers Queue only for that ConfigMap when it opens the window, so a
ConfigMap that changes nothing (QueueSkip) leaves the rejected pod where it waits.
"""

from __future__ import annotations

from kubetwin.scheduler import framework as F
from kubetwin.scheduler.plugins import PodInfo
from kubetwin.store.store import Obj, Store

NAME = "MaintenanceWindow"
LABEL = "example.com/needs-window"
CONFIG = "maintenance-window"
CLOSED = "maintenance window is closed"


def _opens(cm: object, namespace: str) -> bool:
    """Whether `cm` is the namespace's maintenance-window ConfigMap and says the window is open."""
    if not isinstance(cm, dict):
        return False
    meta = cm.get("metadata") or {}
    return (meta.get("name") == CONFIG and (meta.get("namespace") or "default") == namespace
            and (cm.get("data") or {}).get("open") == "true")


class MaintenanceWindow(F.Plugin):
    name = NAME

    def __init__(self, store: Store) -> None:
        self.store = store

    def events_to_register(self) -> list[F.ClusterEventWithHint]:
        return [F.ClusterEventWithHint(F.ClusterEvent("ConfigMap", F.ActionType.Add | F.ActionType.Update),
                                       self._after_config_change)]

    def _after_config_change(self, pi: PodInfo, old: object, new: object) -> F.QueueingHint:
        return F.Queue if _opens(new, pi.pod["metadata"].get("namespace") or "default") else F.QueueSkip

    def pre_filter(self, state: F.CycleState) -> None:
        pod: Obj = state.pod
        if (pod["metadata"].get("labels") or {}).get(LABEL) != "true":
            return
        ns = pod["metadata"].get("namespace") or "default"
        if not _opens(self.store.get("ConfigMap", ns, CONFIG), ns):
            raise F.Rejected(NAME, CLOSED)

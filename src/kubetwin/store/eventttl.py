"""The API server's Event retention: an Event is deleted an hour after it was last written.

kube-apiserver stores Events with an etcd lease of --event-ttl (default 1h, cmd/kube-apiserver/app/options:
EventTTL: 1 * time.Hour; the event registry's TTLFunc gives every create and update that TTL, so a recurring event
that bumps its count lives on); GKE keeps that default ("Cluster events are removed after one hour",
https://cloud.google.com/kubernetes-engine/docs/concepts/about-logs). When the lease expires etcd deletes the key
and watchers see the deletion, so `kubectl get events` at any moment lists the last hour's, and a long run's store
holds an hour of Events instead of all of them.

An Event written again after it expired is created anew (client-go's recordToSink: a patch that finds no Event
falls back to a create), which the EventRecorder already does when the store no longer has it.
"""

from __future__ import annotations

from collections import deque

from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

EVENT_TTL = 3600.0  # seconds; kube-apiserver --event-ttl default, unchanged on GKE (module docstring)


class EventTTL:
    """Deletes each Event EVENT_TTL after its last write. Every write queues (deadline, Event, resourceVersion);
    deadlines come in write order, so one FIFO and one timer serve them all: at a deadline the Event goes only if
    that write was its last (an Event written since has a later entry)."""

    def __init__(self, store: Store, env: Environment, ttl: float = EVENT_TTL) -> None:
        self.store, self.env, self.ttl = store, env, ttl
        self._due: deque[tuple[float, str, str, str]] = deque()  # (deadline, namespace, name, resourceVersion)
        self._armed = False
        store.watch("Event", self._on_event)

    def _on_event(self, etype: str, obj: Obj, old: Obj | None) -> None:
        if etype == "DELETED":
            return  # its queued entries find it gone
        meta = obj["metadata"]
        self._due.append((self.env.now + self.ttl, meta.get("namespace") or "", meta["name"],
                          meta["resourceVersion"]))
        if not self._armed:
            self._armed = True
            self.env.at(self._due[0][0], self._expire)

    def _expire(self) -> None:
        now, due = self.env.now, self._due
        while due and due[0][0] <= now:
            _, ns, name, rv = due.popleft()
            cur = self.store.get("Event", ns, name)
            if cur is not None and cur["metadata"]["resourceVersion"] == rv:  # not written since
                self.store.delete("Event", ns, name)
        self._armed = bool(due)
        if due:
            self.env.at(due[0][0], self._expire)

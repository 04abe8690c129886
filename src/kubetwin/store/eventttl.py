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

from kubetwin.sim.env import Environment
from kubetwin.store.store import Obj, Store

EVENT_TTL = 3600.0  # seconds; kube-apiserver --event-ttl default, unchanged on GKE (module docstring)


class EventTTL:
    """Deletes each Event EVENT_TTL after its last write: one timer per Event, moved on when it was written since."""

    def __init__(self, store: Store, env: Environment, ttl: float = EVENT_TTL) -> None:
        self.store, self.env, self.ttl = store, env, ttl
        self._written: dict[tuple[str, str], float] = {}  # (namespace, name) -> time of the last write
        store.watch("Event", self._on_event)

    def _on_event(self, etype: str, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        if etype == "DELETED":
            self._written.pop(key, None)
            return
        armed = key in self._written
        self._written[key] = self.env.now
        if not armed:  # a timer per Event: a later write only moves its deadline
            self.env.at(self.env.now + self.ttl, lambda: self._expire(key))

    def _expire(self, key: tuple[str, str]) -> None:
        written = self._written.get(key)
        if written is None:  # deleted by someone else
            return
        due = written + self.ttl
        if due > self.env.now:
            self.env.at(due, lambda: self._expire(key))
            return
        del self._written[key]
        self.store.delete("Event", key[0], key[1])

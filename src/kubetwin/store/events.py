"""core/v1 Events, deduplicated the way client-go's event correlator counts repeats."""

from __future__ import annotations

from kubetwin.store.store import Obj, Store


class EventRecorder:
    """Writes Event objects into the store; an identical event on the same object bumps count."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._seen: dict[tuple, str] = {}
        self._n = 0

    def event(self, obj: Obj, etype: str, reason: str, message: str, component: str) -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        key = (obj["kind"], ns, meta["name"], reason, message, component)
        now = self.store.timestamp(self.store.env.now)
        name = self._seen.get(key)
        if name is not None:
            cur = self.store.get("Event", ns, name)
            if cur is not None:
                self.store.update({**cur, "count": cur["count"] + 1, "lastTimestamp": now})
                return
        self._n += 1
        name = f"{meta['name']}.{self._n:08x}"
        self._seen[key] = name
        self.store.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj["kind"], "namespace":
                               meta.get("namespace"), "name": meta["name"], "uid": meta.get("uid")},
            "reason": reason, "message": message, "type": etype, "source": {"component": component},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })

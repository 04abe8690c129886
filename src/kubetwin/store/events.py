"""core/v1 Events, written the way client-go's EventCorrelator writes them.

client-go tools/record/events_cache.go: an event identical to an earlier one (source, object, type,
reason, message) bumps that Event's count; once one source has said 10 different messages with the same
reason about one object within 10 minutes, further ones are combined into one Event
("(combined from similar events): ..."); and a token bucket per source and object (burst 25, one
token per 5 minutes) drops the rest. The kubelet and the controllers record through it. kube-scheduler
records through the events.k8s.io broadcaster, which has no spam filter: its events only deduplicate.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kubetwin.store.store import Obj, Store

AGGREGATE_MAX_EVENTS, AGGREGATE_INTERVAL = 10, 600.0  # defaultAggregateMaxEvents, ...IntervalInSeconds
SPAM_BURST, SPAM_QPS = 25, 1.0 / 300.0  # defaultSpamBurst, defaultSpamQPS
UNFILTERED = frozenset({"default-scheduler"})
Key = tuple[Any, ...]  # an EventCorrelator cache key (object, type, reason, ... as client-go builds them)
LRU_ENTRIES = 4096  # maxLruCacheEntries: the correlator forgets the least recently seen keys


def _remember(cache: OrderedDict[Key, Any], key: Key, value: Any, new: bool) -> None:
    """Store as most recent (a new key is inserted last); drop the least recent beyond LRU_ENTRIES."""
    cache[key] = value
    if not new:
        cache.move_to_end(key)
    elif len(cache) > LRU_ENTRIES:
        cache.popitem(last=False)


class EventRecorder:
    """Writes Event objects into the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._seen: OrderedDict[Key, tuple[str, int]] = OrderedDict()  # event key -> (Event name, count)
        self._aggregate: OrderedDict[Key, tuple[set[str], float]] = OrderedDict()  # -> (messages, last time)
        self._spam: OrderedDict[Key, tuple[float, float]] = OrderedDict()  # -> (tokens, last refill time)
        self._n = 0

    def _accept(self, spam_key: Key, now: float) -> bool:
        """EventSourceObjectSpamFilter: a token bucket per source and object."""
        bucket = self._spam.get(spam_key)
        if bucket is None:
            tokens = float(SPAM_BURST)
        else:
            tokens = min(float(SPAM_BURST), bucket[0] + (now - bucket[1]) * SPAM_QPS)
        ok = tokens >= 1.0
        _remember(self._spam, spam_key, (tokens - 1.0 if ok else tokens, now), bucket is None)
        return ok

    def _aggregated(self, obj_key: Key, etype: str, reason: str, message: str, now: float) -> Key | None:
        """EventAggregator: the aggregate key once this reason has had AGGREGATE_MAX_EVENTS distinct messages
        within AGGREGATE_INTERVAL, else None."""
        agg_key = (*obj_key, etype, reason)
        record = self._aggregate.get(agg_key)
        if record is None or now - record[1] > AGGREGATE_INTERVAL:
            messages = {message}
        else:
            messages = record[0]
            messages.add(message)
        _remember(self._aggregate, agg_key, (messages, now), record is None)
        if len(messages) < AGGREGATE_MAX_EVENTS:
            return None
        messages.discard(message)
        return agg_key

    def event(self, obj: Obj, etype: str, reason: str, message: str, component: str) -> None:
        meta = obj["metadata"]
        name, namespace, uid = meta["name"], meta.get("namespace"), meta.get("uid")
        ns = namespace or "default"
        obj_key = (obj["kind"], ns, name, uid, component)
        store = self.store
        now_s = store.env.now
        filtered = component not in UNFILTERED
        agg_key = self._aggregated(obj_key, etype, reason, message, now_s) if filtered else None
        if agg_key is None:
            key: Key = (obj_key, etype, reason, message)
        else:
            message, key = f"(combined from similar events): {message}", agg_key
        seen = self._seen.get(key)
        if seen is None:
            self._n += 1
            event_name, count = f"{name}.{self._n:08x}", 0
        else:
            event_name, count = seen
        _remember(self._seen, key, (event_name, count + 1), seen is None)
        if filtered and not self._accept(obj_key, now_s):
            return
        now = store.timestamp(now_s)
        cur = store.get("Event", ns, event_name) if count else None
        if cur is not None:
            store.update({**cur, "count": count + 1, "message": message, "lastTimestamp": now})
            return
        store.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": event_name, "namespace": ns},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj["kind"], "namespace": namespace,
                               "name": name, "uid": uid},
            "reason": reason, "message": message, "type": etype, "source": {"component": component},
            "firstTimestamp": now, "lastTimestamp": now, "count": count + 1,
        })

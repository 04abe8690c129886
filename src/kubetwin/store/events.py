"""core/v1 Events, written the way client-go's EventCorrelator writes them.

client-go tools/record/events_cache.go: an event identical to an earlier one (source, object, type,
reason, message) bumps that Event's count; once one source has said 10 different messages with the same
reason about one object within 10 minutes, further ones are combined into one Event
("(combined from similar events): ..."); and a token bucket per source and object (burst 25, one
token per 5 minutes) drops the rest. The kubelet and the controllers record through it. kube-scheduler
records through the events.k8s.io broadcaster, which has no spam filter: its events only deduplicate.
"""

from __future__ import annotations

from kubetwin.store.store import Obj, Store

AGGREGATE_MAX_EVENTS, AGGREGATE_INTERVAL = 10, 600.0  # defaultAggregateMaxEvents, ...IntervalInSeconds
SPAM_BURST, SPAM_QPS = 25, 1.0 / 300.0  # defaultSpamBurst, defaultSpamQPS
UNFILTERED = frozenset({"default-scheduler"})
LRU_ENTRIES = 4096  # maxLruCacheEntries: the correlator forgets the least recently seen keys


def _remember(cache: dict, key: tuple, value: object) -> None:
    """Insert as most recent; drop the least recent beyond LRU_ENTRIES."""
    cache.pop(key, None)
    cache[key] = value
    if len(cache) > LRU_ENTRIES:
        del cache[next(iter(cache))]


class EventRecorder:
    """Writes Event objects into the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._seen: dict[tuple, tuple[str, int]] = {}  # event key -> (Event name, count)
        self._aggregate: dict[tuple, tuple[set[str], float]] = {}  # aggregate key -> (messages, last time)
        self._spam: dict[tuple, tuple[float, float]] = {}  # spam key -> (tokens, last refill time)
        self._n = 0

    def _accept(self, spam_key: tuple, now: float) -> bool:
        """EventSourceObjectSpamFilter: a token bucket per source and object."""
        tokens, last = self._spam.get(spam_key, (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - last) * SPAM_QPS)
        ok = tokens >= 1.0
        _remember(self._spam, spam_key, (tokens - 1.0 if ok else tokens, now))
        return ok

    def event(self, obj: Obj, etype: str, reason: str, message: str, component: str) -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        obj_key = (obj["kind"], ns, meta["name"], meta.get("uid"), component)
        now_s = self.store.env.now
        key = (*obj_key, etype, reason, message)
        if component not in UNFILTERED:
            agg_key = (*obj_key, etype, reason)
            record = self._aggregate.get(agg_key)
            if record is None or now_s - record[1] > AGGREGATE_INTERVAL:
                messages = {message}
            else:
                messages = record[0]
                messages.add(message)
            _remember(self._aggregate, agg_key, (messages, now_s))
            if len(messages) >= AGGREGATE_MAX_EVENTS:
                messages.discard(message)
                message, key = f"(combined from similar events): {message}", agg_key
        seen = self._seen.get(key)
        name, count = seen if seen is not None else (None, 0)
        if name is None:
            self._n += 1
            name = f"{meta['name']}.{self._n:08x}"
        _remember(self._seen, key, (name, count + 1))
        if component not in UNFILTERED and not self._accept(obj_key, now_s):
            return
        now = self.store.timestamp(now_s)
        cur = self.store.get("Event", ns, name) if count else None
        if cur is not None:
            self.store.update({**cur, "count": count + 1, "message": message, "lastTimestamp": now})
            return
        self.store.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj["kind"], "namespace":
                               meta.get("namespace"), "name": meta["name"], "uid": meta.get("uid")},
            "reason": reason, "message": message, "type": etype, "source": {"component": component},
            "firstTimestamp": now, "lastTimestamp": now, "count": count + 1,
        })

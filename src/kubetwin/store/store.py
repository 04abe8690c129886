"""An in-memory API server: objects by kind/namespace/name, resourceVersions, label selectors, watches.

Objects are plain dicts in their real Kubernetes shape. They are never mutated in place once stored:
an update stores a new dict, so the history can keep references instead of copies.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol

from kubetwin.k8s.labels import matches
from kubetwin.sim.env import Environment
from kubetwin.store.errors import WriteDuringDispatch as WriteDuringDispatch  # where it was defined before

Obj = dict[str, Any]
Handler = Callable[[str, Obj, Obj | None], None]  # (event type, object, old object)
Version = tuple[float, int, str, Obj]  # (simulated time, resourceVersion, watch event type, object)


class HistorySink(Protocol):
    """Where the store records every version: a list, or a run folder's files as they are written."""

    def append(self, version: Version, /) -> None: ...


class AlreadyExists(Exception):
    pass


class NotFound(Exception):
    pass


def key_of(obj: Obj) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


class Store:
    """Create/update/delete with resourceVersion bumps; every change is recorded and dispatched to watchers."""

    # Test hook: call each event's watchers in the reverse of their registration order, as if run.run had created
    # the controllers the other way round; results must not change (handlers only enqueue).
    reverse_dispatch = False

    def __init__(self, env: Environment, rng_seed: int = 0, start_time: str = "2026-01-01T00:00:00Z") -> None:
        self.env = env
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._watchers: dict[str, list[tuple[Handler, str | None]]] = {}  # kind -> (handler, owner kind)
        self._every_kind: list[Handler] = []  # watch_all's handlers: told of every kind's changes
        self._dispatch: dict[tuple[str, str | None], list[Handler]] = {}  # (kind, controller kind) -> handlers
        self._admission: list[tuple[Callable[[Obj], Obj], tuple[str, ...] | None]] = []
        self._admission_of: dict[str, list[Callable[[Obj], Obj]]] = {}  # per kind, in registration order
        self.rv = 0
        self.history: HistorySink = []
        # uids: deterministic, unique and RFC 4122-shaped: a seeded uuid5 prefix and a 48-bit counter
        self._uid_prefix = str(uuid.uuid5(uuid.UUID(int=rng_seed), "kubetwin"))[:24]  # "xxxxxxxx-xxxx-xxxx-xxxx-"
        self._uid_n = 0
        # uids objects came with (an imported cluster's; a run's own state, kubetwin import): never generated again
        self._given_uids: set[str] = set()
        self.start_time = start_time
        self._ts_t, self._ts = -1.0, ""
        # (kind, ns, ownerKind, owner) -> names of the objects it controls, in creation order
        self._owned: dict[tuple[str, str, str, str], dict[str, None]] = {}
        self._dependent_kinds: dict[tuple[str, str, str], set[str]] = {}  # (ns, ownerKind, owner) -> kinds it owned
        # [the watch handler being dispatched, its event type, its object] while one is
        self._running: list[Any] | None = None
        self._finalizing: frozenset[str] = frozenset()  # kinds whose metadata.finalizers delay their deletion
        # the aggregation layer: API group/version -> the servers registered for it (an APIService each), asked in
        # registration order (kube-aggregator; external.metrics.k8s.io is KEDA's metrics server's)
        self.api_services: dict[str, list[Any]] = {}

    # -- plumbing -------------------------------------------------------------------------------
    def watch(self, kind: str, handler: Handler, owner_kind: str | None = None) -> None:
        """Call handler on every change of a `kind` object; with owner_kind, only for objects whose
        controller is of that kind (an informer with a FilterFunc on the controller reference)."""
        self._watchers.setdefault(kind, []).append((handler, owner_kind))
        self._dispatch.clear()

    def watch_all(self, handler: Handler) -> None:
        """Call handler on every change of every kind (the garbage collector's view, as its monitors of every
        resource discovery lists)."""
        self._every_kind.append(handler)
        self._dispatch.clear()

    def _handlers(self, kind: str, owner_kind: str | None) -> list[Handler]:
        """Build the dispatch list for objects of `kind` controlled by an `owner_kind` (looked up in _emit)."""
        handlers = self._dispatch[(kind, owner_kind)] = [
            h for h, want in self._watchers.get(kind, ()) if want is None or want == owner_kind] + self._every_kind
        if self.reverse_dispatch:
            handlers.reverse()
        return handlers

    def honor_finalizers(self, *kinds: str) -> None:
        """Delete objects of these kinds as the API server deletes an object with finalizers: the delete sets
        metadata.deletionTimestamp (MODIFIED), and the update that removes the last finalizer removes it
        (DELETED). Opt-in per kind: the twin runs the controllers that remove these kinds' finalizers (the
        PVC/PV protection controllers); other kinds' finalizers, from dumps for instance, are kept as data."""
        self._finalizing = self._finalizing | frozenset(kinds)

    def admit(self, plugin: Callable[[Obj], Obj], kinds: tuple[str, ...] | None = None) -> None:
        """Register a mutating admission plugin run on create (like the API server's admission chain),
        for every kind or only for `kinds`."""
        self._admission.append((plugin, kinds))
        self._admission_of.clear()

    def _plugins(self, kind: str) -> list[Callable[[Obj], Obj]]:
        """Build the admission chain for `kind` (looked up in create)."""
        plugins = self._admission_of[kind] = [p for p, kinds in self._admission if kinds is None or kind in kinds]
        return plugins

    def _index(self, etype: str, obj: Obj, old: Obj | None) -> str | None:
        """Index objects by their controller owner, so controllers list what they own without a scan.
        Returns the controller's kind."""
        meta = obj["metadata"]
        refs = meta.get("ownerReferences")
        if old is not None and etype == "MODIFIED":
            old_refs = old["metadata"].get("ownerReferences")
            if old_refs is not refs and old_refs != refs:  # re-parented: index it afresh
                self._index("DELETED", old, None)
                etype = "ADDED"
        if not refs:
            return None
        for ref in refs:
            if ref.get("controller"):
                if etype != "MODIFIED":
                    key = (obj["kind"], meta.get("namespace") or "", ref["kind"], ref["name"])
                    if etype == "DELETED":
                        self._owned.get(key, {}).pop(meta["name"], None)
                    else:
                        names = self._owned.get(key)
                        if names is None:  # the first object of its kind this owner controls
                            names = self._owned[key] = {}
                            self._dependent_kinds.setdefault(key[1:], set()).add(key[0])
                        names[meta["name"]] = None
                return str(ref["kind"])
        return None

    def dependents(self, ns: str, owner_kind: str, owner_name: str) -> list[Obj]:
        """Objects of any kind in `ns` whose controller is owner_kind/owner_name (the garbage collector's question),
        without a pass over every kind: the kinds an owner ever controlled are indexed."""
        kinds = self._dependent_kinds.get((ns or "", owner_kind, owner_name))
        return [o for kind in sorted(kinds) for o in self.owned(kind, ns, owner_kind, owner_name)] if kinds else []

    def owned(self, kind: str, ns: str, owner_kind: str, owner_name: str) -> list[Obj]:
        """Objects of `kind` in `ns` whose controller is owner_kind/owner_name, in creation order."""
        ns = ns or ""
        names = self._owned.get((kind, ns, owner_kind, owner_name))
        if not names:
            return []
        objs = self._objects[kind]
        return [objs[(ns, name)] for name in names]

    def _emit(self, etype: str, obj: Obj, old: Obj | None) -> None:
        owner_kind = self._index(etype, obj, old)
        self.history.append((self.env.now, self.rv, etype, obj))
        handlers = self._dispatch.get((obj["kind"], owner_kind))
        if handlers is None:
            handlers = self._handlers(obj["kind"], owner_kind)
        if not handlers:
            return
        outer = self._running
        running = self._running = [handlers[0], etype, obj]  # the slot for the handler is rewritten per call
        try:
            for handler in handlers:
                running[0] = handler
                handler(etype, obj, old)
        finally:
            self._running = outer

    def _check_write(self, verb: str, kind: str, ns: str, name: str) -> None:
        """Refuse a write made from inside a watch handler (see WriteDuringDispatch)."""
        assert self._running is not None
        handler, etype, obj = self._running
        what = getattr(handler, "__qualname__", repr(handler))
        msg = (f"{what} handled {etype} {obj['kind']} {obj['metadata'].get('name')} and wrote "
               f"({verb} {kind} {ns + '/' if ns else ''}{name}) during dispatch: a watch handler must only enqueue "
               f"work (env.after(0, ...)) or update its own cache")
        raise WriteDuringDispatch(msg)

    # -- verbs ----------------------------------------------------------------------------------
    def create(self, obj: Obj) -> Obj:
        kind = str(obj.get("kind"))
        if self._running:
            self._check_write("create", kind, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        plugins = self._admission_of.get(kind)
        for plugin in plugins if plugins is not None else self._plugins(kind):
            obj = plugin(obj)
        meta = obj["metadata"]
        kind, ns, name = obj["kind"], meta.get("namespace") or "", meta["name"]
        bucket = self._objects.get(kind)
        if bucket is None:
            bucket = self._objects[kind] = {}
        if (ns, name) in bucket:
            raise AlreadyExists(f'{kind.lower()}s "{name}" already exists')
        self.rv = rv = self.rv + 1
        meta = {**meta, "resourceVersion": str(rv)}
        if "uid" not in meta:
            self._uid_n += 1
            uid = f"{self._uid_prefix}{self._uid_n:012x}"
            while uid in self._given_uids:
                self._uid_n += 1
                uid = f"{self._uid_prefix}{self._uid_n:012x}"
            meta["uid"] = uid
        else:
            self._given_uids.add(str(meta["uid"]))
        meta["creationTimestamp"] = self.timestamp(self.env.now)
        if "generation" not in meta:
            meta["generation"] = 1
        obj = {**obj, "metadata": meta}
        bucket[(ns, name)] = obj
        self._emit("ADDED", obj, None)
        return obj

    def update(self, obj: Obj) -> Obj:
        kind, ns, name = key_of(obj)
        if self._running:
            self._check_write("update", kind, ns, name)
        bucket = self._objects.get(kind, {})
        old = bucket.get((ns, name))
        if old is None:
            raise NotFound(f'{kind.lower()}s "{name}" not found')
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        if kind in self._finalizing and obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get(
                "finalizers"):  # the last finalizer of a deleted object is gone: the object goes
            del bucket[(ns, name)]
            self._emit("DELETED", obj, old)
            return obj
        bucket[(ns, name)] = obj
        self._emit("MODIFIED", obj, old)
        return obj

    def patch(self, kind: str, ns: str, name: str, fn: Callable[[Obj], Obj]) -> Obj | None:
        """Read-modify-write: fn returns a new object built from the stored one."""
        cur = self.get(kind, ns, name)
        return None if cur is None else self.update(fn(cur))

    def delete(self, kind: str, ns: str, name: str) -> Obj | None:
        if self._running:
            self._check_write("delete", kind, ns or "", name)
        if kind in self._finalizing:
            cur = self._objects.get(kind, {}).get((ns or "", name))
            if cur is not None and cur["metadata"].get("finalizers"):  # marked; its finalizers' owners finish it
                if cur["metadata"].get("deletionTimestamp"):
                    return cur
                return self.update({**cur, "metadata": {**cur["metadata"],
                                                        "deletionTimestamp": self.timestamp(self.env.now)}})
        old = self._objects.get(kind, {}).pop((ns or "", name), None)
        if old is not None:
            self.rv += 1
            gone = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self.rv),
                                        "deletionTimestamp": self.timestamp(self.env.now)}}
            self._emit("DELETED", gone, old)
        return old

    def kinds(self) -> list[str]:
        """The kinds the store holds objects of (sorted): the namespace controller's discovery."""
        return sorted(k for k, bucket in self._objects.items() if bucket)

    def get(self, kind: str, ns: str, name: str) -> Obj | None:
        bucket = self._objects.get(kind)
        return bucket.get((ns or "", name)) if bucket is not None else None

    def current(self, kind: str, ns: str, name: str, uid: str | None) -> Obj | None:
        """The object as stored now if it is still the one with this uid, else None: a write decided earlier (a
        request that waited for its client's token, a timer) goes to the object it was meant for, as the API
        server's UID precondition makes it (metav1.Preconditions); one deleted and re-created under the same name
        is another object."""
        bucket = self._objects.get(kind)
        cur = bucket.get((ns or "", name)) if bucket is not None else None
        return cur if cur is not None and cur["metadata"].get("uid") == uid else None

    def list(self, kind: str, ns: str | None = None, selector: dict[str, Any] | None = None) -> list[Obj]:
        objs = self._objects.get(kind, {})
        return [o for (ons, _), o in objs.items()
                if (ns is None or ons == ns) and matches(selector, o["metadata"].get("labels"))]

    def count(self, kind: str | None = None) -> int:
        """Live objects of `kind`, or of every kind (a long run's progress line), without listing them."""
        if kind is not None:
            return len(self._objects.get(kind, ()))
        return sum(len(bucket) for bucket in self._objects.values())

    def timestamp(self, t: float) -> str:
        """RFC 3339 time of simulated second t (cached: many objects are written at the same second)."""
        if t != self._ts_t:
            self._ts_t, self._ts = t, sim_timestamp(self.start_time, t)
        return self._ts

    def seconds(self, timestamp: str) -> float:
        """The simulated second of an RFC 3339 time (the inverse of `timestamp`, for times the store wrote)."""
        return sim_seconds(self.start_time, timestamp)


def sim_seconds(start: str, timestamp: str) -> float:
    """Simulated seconds from `start` to an RFC 3339 time."""
    from datetime import datetime

    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (parse(timestamp) - parse(start)).total_seconds()


def sim_timestamp(start: str, t: float) -> str:
    """RFC 3339 wall-clock time of simulated second t."""
    from datetime import datetime, timedelta

    base = datetime.fromisoformat(start.replace("Z", "+00:00"))
    return (base + timedelta(seconds=int(t))).strftime("%Y-%m-%dT%H:%M:%SZ")

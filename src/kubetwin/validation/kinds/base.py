"""What validate asks of one kind beyond the generic checks, and the registry of those entries (the package
docstring says when each hook runs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubetwin.api.errors import Diagnostic
from kubetwin.api.loader import Manifest

Check = Callable[[Manifest], list[Diagnostic]]


@dataclass(frozen=True)
class KindChecks:
    """What validate asks of one kind beyond the generic checks (kubetwin.validation.kinds says when each runs)."""

    group: str  # "" for the core group
    kind: str
    first: Callable[[Manifest], list[Diagnostic] | None] | None = None
    checks: tuple[Check, ...] = ()
    when_clean: Check | None = None


class KindChecksRegistry:
    """The entries by (group, kind)."""

    def __init__(self, entries: tuple[KindChecks, ...] = ()) -> None:
        self._entries: dict[tuple[str, str], KindChecks] = {}
        for entry in entries:
            self.register(entry)

    def register(self, entry: KindChecks) -> KindChecks | None:
        """Add or replace the kind's entry; the one it replaced, for `restore`."""
        previous = self._entries.get((entry.group, entry.kind))
        self._entries[(entry.group, entry.kind)] = entry
        return previous

    def restore(self, group: str, kind: str, previous: KindChecks | None) -> None:
        """Put back what `register` replaced (None: the kind had no entry)."""
        if previous is None:
            self._entries.pop((group, kind), None)
        else:
            self._entries[(group, kind)] = previous

    def get(self, group: str, kind: str) -> KindChecks | None:
        return self._entries.get((group, kind))

    def of(self, api_version: str, kind: str) -> KindChecks:
        """The entry of an object's apiVersion and kind; an empty one (generic checks only) for any other."""
        group, sep, _ = api_version.partition("/")  # as validate and api.crd split it
        key = (group if sep else "", kind)
        return self._entries.get(key) or KindChecks(*key)

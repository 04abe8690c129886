"""metadata.generateName as k8s.io/apiserver's pkg/storage/names/generate.go completes it: the prefix and five
random characters from an alphabet without vowels or confusable characters; seeded here so a run is reproducible."""

from __future__ import annotations

import random
from typing import Protocol

# k8s.io/apiserver storage/names: 5 characters from this alphabet (no vowels, no confusables).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class ObjectGetter(Protocol):
    """What generate needs of the API server (kubetwin.store.Store): whether a name is taken."""

    def get(self, kind: str, ns: str, name: str) -> object: ...


class NameGenerator:
    """generateName suffixes, seeded so a run is reproducible."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def suffix(self, n: int = 5) -> str:
        return "".join(self.rng.choices(_ALPHABET, k=n))

    def generate(self, store: ObjectGetter, kind: str, ns: str, prefix: str) -> str:
        """generateName: a fresh suffix until the name is free (the API server retries on conflict too)."""
        while True:
            name = f"{prefix}-{self.suffix()}"
            if store.get(kind, ns, name) is None:
                return name

"""One structured JSON line per request (time, objective, model, endpoint, status, TTFT, duration, retries), to
stdout, a file, or nowhere."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import IO, Any


class AccessLog:
    def __init__(self, where: str) -> None:
        self._own = False
        self.out: IO[str] | None
        if where == "-":
            self.out = sys.stdout
        elif not where:
            self.out = None
        else:
            self.out = open(where, "a", encoding="utf-8", buffering=1)
            self._own = True

    def write(self, **fields: Any) -> None:
        if self.out is None:
            return
        rec = {"time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
               **fields}
        self.out.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self.out is not None:
            self.out.flush()
            if self._own:
                self.out.close()
        self.out = None

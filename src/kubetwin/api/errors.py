"""Diagnostics: every problem names file:line, the object and the field path, and says how to fix it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnostic:
    """One finding about one object; severity "error" rejects the object, "notice" only informs."""

    file: str
    line: int
    obj: str  # kind/namespace/name or kind/name
    field: str
    message: str
    hint: str = ""
    severity: str = "error"

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        field = f" {self.field}:" if self.field else ""
        what = f" {self.obj}:" if self.obj and self.obj != "-" else ""  # "-": about the file, not an object
        # no file ("-" or ""): about the command line, as kubectl writes it ("error: ..."), never "-: error:"
        prefix = f"{where}: " if where and where != "-" else ""
        text = f"{prefix}{self.severity}:{what}{field} {self.message}"
        if self.hint:
            text += f"\n    fix: {self.hint}"
        return text


class KubetwinError(Exception):
    """A user-facing failure carrying diagnostics; the CLI prints them and exits non-zero."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))

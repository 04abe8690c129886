"""What the model servers' command-line parsers share with the code that finds them: `_Tok` (one command-line word
with the field path it came from), `ArgProblem` (one finding, for validate.py's Diagnostic), `ModelServerError` (the
problems that would make the real server exit) and the notice for real flags the twin does not model. Its own module
so `modelserver`, `vllm_args` and `tgi_args` can all use them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArgProblem:
    """One finding about a model server's command line, for validate.py's Diagnostic."""

    field: str  # e.g. spec.template.spec.containers[0].args[3]
    message: str
    hint: str = ""
    severity: str = "error"  # "error" | "notice"


class ModelServerError(ValueError):
    def __init__(self, problems: list[ArgProblem]):
        self.problems = problems
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))


@dataclass
class _Tok:
    text: str
    field: str


def _ignored(tok: _Tok, key: str) -> ArgProblem:
    return ArgProblem(tok.field, f"{key} is a real server flag the twin does not model; ignored", "",
                      severity="notice")

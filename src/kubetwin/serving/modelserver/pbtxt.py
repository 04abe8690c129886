"""Protocol-buffer text format, as Triton reads a model's `config.pbtxt` (google::protobuf::TextFormat::ParseFromString
into inference.ModelConfig; triton-inference-server/core's ReadTextProto answers "failed to read text proto from
PATH" when it fails, after protobuf logs "Error parsing text-format inference.ModelConfig: LINE:COLUMN: ...").

Only the syntax is read here (fields, nested messages in `{}` or `<>`, repeated fields written several times or as
`[a, b]` lists, scalars: numbers, identifiers, quoted strings with adjacent strings concatenated, `#` comments);
which fields exist is the caller's schema (`check_fields`). Every value keeps its 1-based line and column so an
error points into the file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class TextFormatError(ValueError):
    """A parse or schema error at (line, column), in protobuf's words."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(f"{line}:{column}: {message}")
        self.line, self.column, self.message = line, column, message


@dataclass
class Scalar:
    text: str  # the token as written (strings unquoted and concatenated)
    kind: str  # "string" | "number" | "ident"
    line: int
    column: int


@dataclass
class Message:
    fields: dict[str, list[Scalar | Message]] = field(default_factory=dict)
    line: int = 1
    column: int = 1

    def all(self, name: str) -> list[Scalar | Message]:
        return self.fields.get(name, [])

    def first(self, name: str) -> Scalar | Message | None:
        got = self.fields.get(name)
        return got[-1] if got else None  # a non-repeated field written twice: the last wins (protobuf merges)


# int fields of inference.ModelConfig and the messages the twin reads, for protobuf's "Expected integer" when the
# value is not a number (a `${...}` template placeholder)
INTEGER_FIELDS = {"max_batch_size", "count", "max_queue_delay_microseconds", "preferred_batch_size", "gpus",
                  "priority_levels", "default_priority_level", "max_queue_size"}

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[fF]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}\[\]<>:,;])
""", re.VERBOSE)


@dataclass
class _Tok:
    text: str
    kind: str
    line: int
    column: int


def _tokens(text: str) -> list[_Tok]:
    out, pos, line, col = [], 0, 1, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            # protobuf's tokenizer: "Invalid character" for bytes no token starts with; the parser then expects a
            # value or a field name there (e.g. a fill_template.py placeholder `${triton_max_batch_size}` left in)
            out.append(_Tok(text[pos], "bad", line, col))
            pos += 1
            col += 1
            continue
        kind = m.lastgroup or ""
        tok = m.group(0)
        if kind != "ws":
            out.append(_Tok(tok, kind, line, col))
        newlines = tok.count("\n")
        if newlines:
            line += newlines
            col = len(tok) - tok.rfind("\n")
        else:
            col += len(tok)
        pos = m.end()
    return out


def _unquote(tok: str) -> str:
    body = tok[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


class _Parser:
    def __init__(self, text: str, type_name: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.type_name = type_name
        last = text.count("\n") + 1
        self.end = _Tok("", "end", last, len(text) - text.rfind("\n"))

    def peek(self) -> _Tok:
        return self.toks[self.i] if self.i < len(self.toks) else self.end

    def take(self) -> _Tok:
        tok = self.peek()
        self.i += 1
        return tok

    def fail(self, tok: _Tok, expected: str) -> TextFormatError:
        got = "end of input" if tok.kind == "end" else tok.text
        return TextFormatError(tok.line, tok.column, f"Expected {expected}, got: {got}")

    def message(self, close: str | None) -> Message:
        start = self.peek()
        msg = Message(line=start.line, column=start.column)
        while True:
            tok = self.peek()
            if close is not None and tok.text == close and tok.kind == "punct":
                self.take()
                return msg
            if tok.kind == "end":
                if close is None:
                    return msg
                raise self.fail(tok, f'"{close}"')
            if tok.kind != "ident":
                raise self.fail(tok, "identifier")
            self.take()
            values = msg.fields.setdefault(tok.text, [])
            self.field_value(values, tok.text)
            if self.peek().text in (",", ";") and self.peek().kind == "punct":
                self.take()

    def field_value(self, values: list[Scalar | Message], name: str) -> None:
        colon = self.peek().text == ":" and self.peek().kind == "punct"
        if colon:
            self.take()
        tok = self.peek()
        if tok.kind == "punct" and tok.text == "[":
            self.take()
            if self.peek().text == "]":
                self.take()
                return
            while True:
                values.append(self.value(colon, name))
                sep = self.take()
                if sep.text == "]":
                    return
                if sep.text != ",":
                    raise self.fail(sep, '"," or "]"')
        values.append(self.value(colon, name))

    def value(self, colon: bool, name: str) -> Scalar | Message:
        tok = self.peek()
        if tok.kind == "punct" and tok.text in ("{", "<"):
            self.take()
            return self.message("}" if tok.text == "{" else ">")
        if not colon:
            raise self.fail(tok, '":"')  # a scalar field needs its colon (protobuf: Expected ":", found ...)
        if tok.kind == "string":
            self.take()
            text = _unquote(tok.text)
            while self.peek().kind == "string":  # adjacent string literals concatenate
                text += _unquote(self.take().text)
            return Scalar(text, "string", tok.line, tok.column)
        if tok.kind in ("number", "ident"):
            self.take()
            return Scalar(tok.text, tok.kind, tok.line, tok.column)
        raise self.fail(tok, "integer" if name in INTEGER_FIELDS else "value")


def parse(text: str, type_name: str = "inference.ModelConfig") -> Message:
    """The text as one message; TextFormatError at the first token protobuf would refuse."""
    return _Parser(text, type_name).message(None)


def check_fields(msg: Message, allowed: set[str], type_name: str) -> None:
    """protobuf's refusal of a field its message type lacks, at the field's first value."""
    for name, values in msg.fields.items():
        if name not in allowed:
            v = values[0] if values else None
            line, col = (v.line, v.column) if v is not None else (msg.line, msg.column)
            raise TextFormatError(line, col, f'Message type "{type_name}" has no field named "{name}".')


def integer(v: Scalar | Message | None, default: int) -> int:
    """An int field's value (TextFormatError in protobuf's words when it is not one)."""
    if v is None:
        return default
    if isinstance(v, Message) or v.kind != "number" or not re.fullmatch(r"[-+]?\d+", v.text):
        line, col = (v.line, v.column)
        got = "{" if isinstance(v, Message) else v.text
        raise TextFormatError(line, col, f"Expected integer, got: {got}")
    return int(v.text)


def string(v: Scalar | Message | None, default: str) -> str:
    if v is None:
        return default
    if isinstance(v, Message) or v.kind != "string":
        got = "{" if isinstance(v, Message) else v.text
        raise TextFormatError(v.line, v.column, f"Expected string, got: {got}")
    return v.text


def ident(v: Scalar | Message | None, default: str) -> str:
    """An enum or bool field's identifier (KIND_GPU, true)."""
    if v is None:
        return default
    if isinstance(v, Message) or v.kind == "string":
        got = "{" if isinstance(v, Message) else f'"{v.text}"'
        raise TextFormatError(v.line, v.column, f"Expected identifier, got: {got}")
    return v.text
